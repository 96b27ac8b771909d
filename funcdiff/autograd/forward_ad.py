"""Forward-mode dual numbers, as ``torch.autograd.forward_ad``.

Inside ``with dual_level():``, ``make_dual(primal, tangent)`` gives a Tensor that
carries ``tangent`` as its directional derivative; every result computed from it
carries one too, read with ``unpack_dual(result).tangent``. Dual numbers compose with
reverse mode: ``fd.grad(f(make_dual(x, v)), x, create_graph=True)`` is the gradient
whose tangent is the Hessian-vector product ``H v`` (forward over reverse).

How it works: the operations on dual Tensors are recorded as usual, and
``unpack_dual`` pushes the level's tangents forward through the recorded graph
(:func:`funcdiff.autograd.forward.push_forward`), node by node, with each rule's
tangent map (a custom Function's ``jvp``) or its transposed vjp. Tangents flow under
:func:`funcdiff.no_grad` too, as torch's do: there, an operation on dual Tensors is
recorded from fresh duals that carry the inputs' tangents and no reverse-mode history,
so its result has a tangent and no gradient reaches the inputs through it. (Under
``inference_mode`` nothing is recorded and tangents stop, as in torch.)

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> import funcdiff.autograd.forward_ad as fwAD
>>> with fwAD.dual_level():
...     x = fwAD.make_dual(fd.tensor([0.0, 1.0]), fd.tensor([1.0, 1.0]))
...     y = np.sin(x) * 2.0
...     fwAD.unpack_dual(y).tangent
tensor([2.        , 1.08060461])
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import numpy as np

from funcdiff._core import grad_mode, tracing
from funcdiff._core.graph import SEQUENCE, Node
from funcdiff._core.registry import FUNCTION_RULES, NAMED_RULES, UFUNC_RULES, Rule
from funcdiff._core.tensor import Tensor, tensor, wrap
from funcdiff.autograd.forward import push_forward

__all__ = ["dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor", "enter_dual_level"]


class UnpackedDualTensor(NamedTuple):
    """What :func:`unpack_dual` returns: the primal and its tangent (None if none)."""

    primal: Any
    tangent: Any


class _Level:
    __slots__ = ("seeds", "index", "fresh")

    def __init__(self, index: int) -> None:
        self.index = index
        self.seeds: dict[tuple[Node, int], Any] = {}
        # The seeds of the fresh duals made under no_grad, held no longer than their nodes.
        self.fresh: weakref.WeakKeyDictionary[Node, Any] = weakref.WeakKeyDictionary()

    def all_seeds(self) -> dict[tuple[Node, int], Any]:
        if not self.fresh:
            return self.seeds
        return {**self.seeds, **{(node, 0): t for node, t in self.fresh.items()}}


_levels: list[_Level] = []


class _DualNode(Node):
    """A dual Tensor's node: the identity on its primal, the seed of its tangent."""

    __slots__ = ()

    def name(self) -> str:
        return "MakeDualBackward"

    def apply(self, grads: list, create_graph: bool) -> Sequence[Any]:
        return list(grads[: len(self.edges)])

    def run_single(self, grad: Any, retain_graph: bool) -> Any:
        return grad

    def tangent(self, tangents: list, create_graph: bool, batched: bool) -> Any:
        return list(tangents)


class dual_level:
    """Context manager for a forward-mode level: tangents made inside live until it ends.

    Examples
    --------
    >>> import funcdiff as fd
    >>> import funcdiff.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(fd.tensor(2.0), fd.tensor(1.0))
    ...     fwAD.unpack_dual(x ** 3).tangent
    tensor(12.)
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: object) -> None:
        exit_dual_level()


def enter_dual_level() -> int:
    """Enter a new level and return its index (``dual_level`` does this for you)."""
    if _levels:
        raise RuntimeError(
            "Nested forward mode AD is not supported at the moment: leave the current "
            "dual_level before entering a new one"
        )
    _levels.append(_Level(len(_levels)))
    grad_mode.MODE_WATCHERS.append(_follow_grad_mode)
    _follow_grad_mode()
    return len(_levels) - 1


def exit_dual_level(*, level: int | None = None) -> None:
    """Leave the current level: its tangents are forgotten."""
    if not _levels:
        raise RuntimeError("exit_dual_level called outside of a dual_level")
    _levels.pop()
    if _follow_grad_mode in grad_mode.MODE_WATCHERS:
        grad_mode.MODE_WATCHERS.remove(_follow_grad_mode)
    _follow_grad_mode()


def _current(level: int | None, what: str) -> _Level:
    if not _levels:
        raise RuntimeError(
            f"{what} must be called inside a dual level: use `with "
            "funcdiff.autograd.forward_ad.dual_level():`"
        )
    if level is not None and level != _levels[-1].index:
        raise RuntimeError(f"{what}: level {level} is not the current dual level")
    return _levels[-1]


def make_dual(tensor_: Any, tangent: Any, *, level: int | None = None) -> Tensor:
    """A dual Tensor: the values of ``tensor_``, carrying ``tangent``.

    Parameters
    ----------
    tensor_ : Tensor or array_like
        The primal (a floating-point Tensor; it may require grad).
    tangent : Tensor or array_like
        The direction, of the primal's shape. A Tensor that requires grad makes the
        tangents of the results differentiable.

    Raises
    ------
    RuntimeError
        Outside a :class:`dual_level`, or for a tangent of another shape.
    """
    current = _current(level, "make_dual")
    primal = tensor_ if isinstance(tensor_, Tensor) else tensor(tensor_)
    if primal.dtype.kind not in "fc":
        raise RuntimeError(
            f"make_dual expects a floating-point or complex primal, got dtype {primal.dtype}"
        )
    if not isinstance(tangent, Tensor):
        tangent = tensor(np.asarray(tangent, dtype=primal.dtype))
    if tangent.shape != primal.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {primal.shape} while "
            f"the given forward gradient is of size {tangent.shape}."
        )
    out, node = _dual(primal, primal._requires_grad)
    current.seeds[(node, 0)] = tangent
    return out


def _dual(primal: Tensor, linked: bool) -> tuple[Tensor, _DualNode]:
    """A Tensor sharing ``primal``'s data whose node seeds a tangent; its gradient flows
    on to ``primal`` when ``linked``."""
    node = _DualNode.__new__(_DualNode)
    Node.__init__(
        node,
        (primal._gradient_edge(),) if linked else (),
        ((primal.data.shape, primal.data.dtype),),
    )
    node.seq = next(SEQUENCE)
    out = wrap(primal.data, True, node, 0)
    out._version_owner = primal._version_owner if primal._version_owner is not None else primal
    return out, node


def unpack_dual(tensor_: Any, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor_``; the tangent is None for a value that
    depends on no dual Tensor of the current level, and outside a level."""
    if not isinstance(tensor_, Tensor):
        return UnpackedDualTensor(tensor_, None)
    if not _levels or not tensor_._requires_grad:
        return UnpackedDualTensor(tensor_, None)
    seeds = _current(level, "unpack_dual").all_seeds()
    if not seeds:
        return UnpackedDualTensor(tensor_, None)
    # Tangents are differentiable (recorded) when a tangent or a primal requires grad,
    # as torch's are (reverse over forward).
    create_graph = grad_mode.is_grad_enabled() and any(
        t._requires_grad or node.edges for (node, _), t in seeds.items()
    )
    values = {edge: (t if create_graph else t.data) for edge, t in seeds.items()}
    (tangent,) = push_forward([tensor_], values, create_graph=create_graph)
    if tangent is None:
        return UnpackedDualTensor(tensor_, None)
    if not isinstance(tangent, Tensor):
        tangent = wrap(np.array(tangent), False, None, 0)
    return UnpackedDualTensor(tensor_, tangent)


# ---------------------------------------------------------------- tangents under no_grad
class _NoGradTangents(tracing.BaseTracer):
    """Installed while grad is off inside a dual level (``no_grad``): an operation on
    Tensors with tangents runs recorded on fresh duals of its inputs, which carry their
    tangents and none of their reverse-mode history. The result has a tangent (it
    depends on dual Tensors) and passes no gradient back to the inputs, as a result
    computed under torch's ``no_grad``. Every other operation runs as usual."""

    def __init__(self, level: _Level) -> None:
        self.level = level
        self.busy = False

    def process(self, rule: Rule, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        if rule.impl is None and _key(rule) is None:
            return NotImplemented
        return self._rerun(lambda a, k: _run(rule, a, k), args, kwargs)

    def function_call(self, cls: Any, args: Sequence[Any]) -> Any:
        """A custom Function's ``apply`` under no_grad: rerun on fresh duals (its
        ``jvp``, or its transposed backward, gives the tangent)."""
        return self._rerun(lambda a, k: cls.apply(*a), args, {})

    def _rerun(self, run: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        if self.busy or grad_mode.thread_state.grad_enabled:
            return NotImplemented
        found = [
            t
            for a in (*args, *kwargs.values())
            for t in (a if type(a) in (list, tuple) else (a,))
            if isinstance(t, Tensor) and t._requires_grad
        ]
        seeds = self.level.all_seeds()
        if not found or not seeds:
            return NotImplemented
        tangents = push_forward(found, seeds, create_graph=False)
        if all(t is None for t in tangents):
            return NotImplemented
        swap: dict[int, Tensor] = {}
        for t, tangent in zip(found, tangents, strict=True):
            if id(t) in swap:
                continue
            if tangent is None:  # a constant here, as under no_grad
                swap[id(t)] = wrap(t.data, False, None, 0)
                continue
            fresh, node = _dual(t, False)
            self.level.fresh[node] = wrap(np.asarray(tangent), False, None, 0)
            swap[id(t)] = fresh

        def sub(a: Any) -> Any:
            if isinstance(a, Tensor):
                return swap.get(id(a), a)
            if type(a) in (list, tuple):
                return type(a)(sub(x) for x in a)
            return a

        self.busy = True
        state = grad_mode.thread_state
        state.grad_enabled = True
        try:
            return run([sub(a) for a in args], {k: sub(v) for k, v in kwargs.items()})
        finally:
            state.grad_enabled = False
            self.busy = False


_KEYS: dict[int, tuple[str, Any]] = {}


def _key(rule: Rule) -> tuple[str, Any] | None:
    """Where ``rule`` is registered: ``("ufunc" | "function" | "named", key)``."""
    key = _KEYS.get(id(rule))
    if key is None:  # a rule registered since (lazily loaded modules): look again
        for kind, table in (("ufunc", UFUNC_RULES), ("function", FUNCTION_RULES)):
            for k, r in table.items():
                _KEYS.setdefault(id(r), (kind, k))
        for k, r in NAMED_RULES.items():
            _KEYS.setdefault(id(r), ("named", k))
        key = _KEYS.get(id(rule))
    return key


def _run(rule: Rule, args: list, kwargs: dict[str, Any]) -> Any:
    """Run ``rule`` on Tensors through the dispatch that called it (recorded)."""
    if rule.impl is not None:
        return rule.impl(*args, **kwargs)
    kind, k = cast(tuple, _key(rule))
    if kind == "ufunc":
        return k(*args, **kwargs)
    if kind == "function":
        first = next(
            t
            for a in (*args, *kwargs.values())
            for t in (a if type(a) in (list, tuple) else (a,))
            if isinstance(t, Tensor)
        )
        return first.__array_function__(k, (Tensor,), tuple(args), kwargs)
    if k == "getitem":
        return args[0][args[1]]
    return args[0].astype(*args[1:], **kwargs)  # "astype"


class _Installed(threading.local):
    # This thread's installed _NoGradTangents, and the context manager that installed it.
    tracer: _NoGradTangents | None = None
    manager: Any = None


_installed = _Installed()


def _follow_grad_mode() -> None:
    """Install the no_grad tracer while grad is off (not inference mode) in a dual level,
    unless another transform traces this thread; remove it otherwise."""
    state = grad_mode.thread_state
    tracer = _installed.tracer
    if tracer is not None and tracer.busy and _levels:
        return  # its own rerun switches modes (a Function's forward runs under no_grad)
    wanted = bool(_levels) and not state.grad_enabled and not state.inference
    manager = _installed.manager
    if wanted and manager is None and not tracing.is_watched():
        tracer = _NoGradTangents(_levels[-1])
        manager = tracing.installed(tracer)
        manager.__enter__()
        _installed.tracer, _installed.manager = tracer, manager
    elif not wanted and manager is not None:
        _installed.tracer = _installed.manager = None
        manager.__exit__(None, None, None)
