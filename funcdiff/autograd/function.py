"""Custom differentiable operations: subclass :class:`Function`.

Two styles, as in torch. The classic one: ``forward(ctx, *args)`` runs on Tensors
without recording and saves what ``backward`` needs on ``ctx``. The modern one:
``forward(*args)`` without ``ctx``, and ``setup_context(ctx, inputs, output)`` saves
on ``ctx``. In both, ``backward(ctx, *grads)`` returns one gradient per input, and an
optional ``jvp(ctx, *tangents)`` returns the output tangents for forward mode.

What ``backward`` receives: ndarray cotangents in a first-order pass
(``create_graph=False``: ``backward()``, ``grad()``, ``jacobian``, the checkers), so
``np.asarray`` and SciPy calls on them just work; Tensors under ``create_graph=True``,
where a backward written with Tensor operations (or NumPy calls on Tensors) is itself
recorded, so custom functions can be differentiated to any order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core import grad_mode, tracing
from funcdiff._core.graph import (
    AFTER_INPLACE,
    FREED_GRAPH_MESSAGE,
    SEQUENCE,
    WATCHERS,
    Node,
    describe_value,
    note_inplace_change,
    notify_created,
    raise_modified,
    version_of,
)
from funcdiff._core.tensor import Tensor, wrap
from funcdiff.autograd import saved_hooks
from funcdiff.autograd.forward import transpose_vjp

__all__ = ["Function", "FunctionCtx", "FunctionNode", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` object passed to ``forward`` (or ``setup_context``), ``backward``
    and ``jvp``.

    Attributes
    ----------
    needs_input_grad : tuple of bool
        One flag per forward input: does it need a gradient?
    """

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self._saved: tuple | None = ()
        self._checks: tuple = ()
        self._saved_called = False
        self._non_differentiable: set[int] = set()
        self._dirty: list[Tensor] = []
        self.materialize_grads = True
        self._node: FunctionNode | None = None

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Save Tensors (or None) for ``backward``; read them via ``saved_tensors``.

        Active :func:`funcdiff.autograd.graph.saved_tensors_hooks` pack each of them.
        """
        if self._saved_called:
            raise RuntimeError("save_for_backward can be called at most once per forward")
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save Tensors or None, but argument {i} "
                    f"is {type(t).__name__}; store other values as attributes of ctx"
                )
        self._saved_called = True
        self._checks = tuple(version_of(t) for t in tensors)
        self._saved = saved_hooks.pack_all(tensors)

    @property
    def saved_tensors(self) -> tuple:
        """The saved Tensors, checked for in-place modification since they were saved."""
        if self._saved is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        saved = saved_hooks.unpack_all(self._saved)
        if self._node is not None:
            for i, (t, version) in enumerate(zip(saved, self._checks)):
                if isinstance(t, Tensor) and version_of(t) != version:
                    raise_modified(self._node, i, version_of(t), version)
        return saved

    def mark_non_differentiable(self, *outputs: Tensor) -> None:
        """Declare outputs that do not require grad."""
        self._non_differentiable.update(id(t) for t in outputs)

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Declare inputs that ``forward`` modified in place (and returns).

        Each becomes the Function's output: its later uses go through ``backward``,
        and its version counter is bumped, so values saved from it before are refused.
        Marking a leaf that requires grad raises, as any in-place change of it does.
        """
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"mark_dirty expects Tensors, got {type(t).__name__}")
        self._dirty.extend(tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` receives None (not zeros) for outputs that got no
        gradient."""
        self.materialize_grads = bool(value)


class FunctionNode(Node):
    """A node that calls a custom Function's ``backward`` (and ``jvp``)."""

    __slots__ = ("fn_cls", "ctx", "input_positions", "n_inputs", "once", "input_meta")

    transposes_strictly = True

    # Set by Function.apply when it records the node.
    fn_cls: type[Function]
    ctx: FunctionCtx
    input_positions: tuple[int, ...]  # the forward inputs that need a gradient
    n_inputs: int
    once: bool  # backward is @once_differentiable
    input_meta: tuple[tuple[tuple[int, ...], np.dtype], ...]  # (shape, dtype) of those inputs

    def name(self) -> str:
        return f"{self.fn_cls.__name__}Backward"

    @property
    def materializes_grads(self) -> bool:  # type: ignore[override]
        return self.ctx.materialize_grads

    def release(self) -> None:
        self.ctx._saved = None
        self.ctx._checks = ()

    def describe_saved(self, label: Any) -> str:
        value = saved_hooks.unpack_all(self.ctx._saved)[label]
        where = ""
        if value.grad_fn is not None:
            where = f", which is output {value._output_nr} of {value.grad_fn.name()},"
        return f"saved tensor {label} {describe_value(value)}{where}"

    def apply(self, grads: list, create_graph: bool) -> list:
        ctx = self.ctx
        if ctx._saved is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        if create_graph and self.once:
            raise RuntimeError(
                "trying to differentiate twice a function that was marked with @once_differentiable"
            )
        batch = self._batch_size(grads)
        if batch is not None and not getattr(self.fn_cls, "batched_backward", False):
            # backward was written for one cotangent: run it once per batch entry.
            return self._apply_looped(grads, create_graph, batch)
        cotangents: list[Any] = []
        for (shape, dtype), g in zip(self.out_meta, grads):
            if g is None:
                if not ctx.materialize_grads:
                    cotangents.append(None)
                    continue
                g = np.zeros(shape, dtype=dtype)
            if create_graph:
                g = g if isinstance(g, Tensor) else wrap(np.asarray(g), False, None, 0)
            elif isinstance(g, Tensor):
                g = g.data
            elif type(g) is not np.ndarray:
                g = np.asarray(g)  # a structured or partial cotangent: its dense array
            cotangents.append(g)
        try:
            result = self.fn_cls.backward(ctx, *cotangents)
        except RuntimeError as exc:
            if create_graph and "Can't convert a Tensor that requires grad" in str(exc):
                raise RuntimeError(
                    f"{self.name()}: backward converted its incoming gradient to an ndarray, "
                    "but under create_graph=True (double backward, Hessians) it receives "
                    "Tensors whose operations must be recorded. Write backward with Tensor "
                    "operations (NumPy calls on Tensors record), or differentiate it only "
                    "once; for forward mode give the Function a jvp staticmethod."
                ) from exc
            raise
        if not isinstance(result, tuple):
            result = (result,)
        n = self.n_inputs
        if len(result) != n and not (len(result) > n and all(r is None for r in result[n:])):
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients "
                f"(expected {n}, got {len(result)})"
            )
        out = []
        for pos in self.input_positions:
            r = result[pos]
            if r is not None and not create_graph and isinstance(r, Tensor):
                r = r.data
            out.append(r)
        return out

    def _batch_size(self, grads: list) -> int | None:
        for (shape, _), g in zip(self.out_meta, grads):
            if g is not None and np.ndim(g) == len(shape) + 1:
                return int(np.shape(g)[0])
        return None

    def _apply_looped(self, grads: list, create_graph: bool, batch: int) -> list:
        rows = [
            self.apply([None if g is None else g[b] for g in grads], create_graph)
            for b in range(batch)
        ]
        out: list[np.ndarray | None] = []
        for k, (child, nr) in enumerate(self.edges):
            column = [row[k] for row in rows]
            if all(r is None for r in column):
                out.append(None)
                continue
            shape, dtype = child.out_meta[nr]
            column = [np.zeros(shape, dtype=dtype) if r is None else r for r in column]
            # Entries may broadcast to the input (the engine unbroadcasts per call).
            column = [r if np.shape(r) == shape else np.broadcast_to(r, shape) for r in column]
            out.append(np.stack(column))
        return out

    # ------------------------------------------------------------------ forward mode
    def tangent(self, tangents: list, create_graph: bool, batched: bool) -> Any:
        if self.fn_cls.jvp is not Function.jvp:
            if batched:  # jvp is written for one tangent per input: loop over the batch
                live = next(t for t in tangents if t is not None)
                rows = [
                    self._jvp([None if t is None else t[b] for t in tangents], create_graph)
                    for b in range(len(live))
                ]
                return [
                    None if rows[0][i] is None else np.stack([r[i] for r in rows])
                    for i in range(len(self.out_meta))
                ]
            return self._jvp(tangents, create_graph)
        if create_graph or any(
            dtype.kind == "c" for _, dtype in (*self.out_meta, *self.input_meta)
        ):
            return NotImplemented  # transpose the (recorded) backward, strictly
        try:  # one recorded backward, transposed: the cheap way, when backward allows it
            return transpose_vjp(self, tangents, False, batched, False, strict=True)
        except Exception:  # noqa: BLE001  (np.asarray on a Tensor, SciPy ...: the rows way)
            return self._tangent_from_backward(tangents, batched)

    def _jvp(self, tangents: list, create_graph: bool) -> list:
        """The user's ``jvp``: one tangent per forward input (None for non-Tensors)."""
        per_input: list = [None] * self.n_inputs
        for pos, t, (shape, dtype) in zip(self.input_positions, tangents, self.input_meta):
            if t is None:
                t = np.zeros(shape, dtype=dtype)
            if create_graph:
                t = t if isinstance(t, Tensor) else wrap(np.asarray(t), False, None, 0)
            elif isinstance(t, Tensor):
                t = t.data
            per_input[pos] = t
        result = self.fn_cls.jvp(self.ctx, *per_input)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) != len(self.out_meta):
            raise RuntimeError(
                f"function {self.fn_cls.__name__}.jvp returned {len(result)} tangents for "
                f"{len(self.out_meta)} differentiable outputs"
            )
        return [r.data if isinstance(r, Tensor) and not create_graph else r for r in result]

    def _tangent_from_backward(self, tangents: list, batched: bool) -> list:
        """``J t`` from ``backward`` run on ndarray rows of the identity (one backward
        per output element): works for any backward, whatever it does with its
        cotangents (``np.asarray``, SciPy), without recording it."""
        sizes = [int(np.prod(shape)) for shape, _ in self.out_meta]
        results: list = []
        for k, (shape, dtype) in enumerate(self.out_meta):
            n = sizes[k]
            grads: list = [
                np.zeros((n, *s), dtype=d) if j != k else np.eye(n, dtype=dtype).reshape(n, *s)
                for j, (s, d) in enumerate(self.out_meta)
            ]
            if not self.ctx.materialize_grads:
                grads = [g if j == k else None for j, g in enumerate(grads)]
            rows = self._apply_looped(grads, False, n) if n else [None] * len(self.edges)
            total = None
            for row, t in zip(rows, tangents):
                if row is None or t is None or n == 0:
                    continue
                r = np.reshape(np.asarray(row), (n, -1))
                tv = np.reshape(np.asarray(t), (len(t), -1) if batched else (-1,))
                contribution = tv @ r.T
                total = contribution if total is None else total + contribution
            if total is not None:
                total = np.reshape(total, ((len(total),) if batched else ()) + tuple(shape))
            results.append(total)
        return results


class Function:
    """Base class for custom differentiable operations.

    Subclass it with static ``forward`` and ``backward`` methods and call
    ``MyFunction.apply(*args)``:

    * ``forward(ctx, *args)`` (classic), or ``forward(*args)`` with
      ``setup_context(ctx, inputs, output)`` (modern, as in torch);
    * ``backward(ctx, *grads)``: one gradient (or None) per forward input. It receives
      ndarrays in a first-order pass and Tensors under ``create_graph=True``;
    * ``jvp(ctx, *tangents)`` (optional): the output tangents from one tangent per
      forward input, for forward mode (``functional.jvp``, ``strategy="forward-mode"``,
      ``funcdiff.autograd.forward_ad``). Without it, forward mode still works, from
      ``backward``.

    ``ctx`` offers ``save_for_backward``/``saved_tensors``, ``needs_input_grad``,
    ``mark_dirty``, ``mark_non_differentiable`` and ``set_materialize_grads``.

    A batch of cotangents (``is_grads_batched=True``, ``vectorize=True``) reaches
    ``backward`` one entry at a time, unless the class sets ``batched_backward = True``
    to say that its backward accepts cotangents with one extra leading batch axis.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> class Cube(fd.Function):
    ...     @staticmethod
    ...     def forward(x):
    ...         return x ** 3
    ...     @staticmethod
    ...     def setup_context(ctx, inputs, output):
    ...         ctx.save_for_backward(inputs[0])
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return g * 3 * x ** 2
    >>> x = fd.tensor(2.0, requires_grad=True)
    >>> (dx,) = fd.grad(Cube.apply(x), x, create_graph=True)
    >>> dx, fd.grad(dx, x)[0]
    (tensor(12., grad_fn=<MultiplyBackward>), tensor(12.))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{type(self).__name__} is a custom Function: don't instantiate it, call "
            f"{type(self).__name__}.apply(...)"
        )

    @staticmethod
    def forward(*args: Any) -> Any:
        raise NotImplementedError("A custom Function must implement forward")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple, output: Any) -> None:
        """Modern style: save what ``backward`` needs, given the inputs and the output."""
        raise NotImplementedError

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError(
            "You must implement the backward method for your custom Function to use it "
            "with backward mode AD."
        )

    @staticmethod
    def jvp(ctx: FunctionCtx, *tangents: Any) -> Any:
        """Optional: the output tangents (forward mode), one tangent per input given."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Run ``forward`` and record a node that calls ``backward``."""
        if cls.backward is Function.backward:
            raise NotImplementedError(
                f"{cls.__name__} does not implement backward(ctx, *grads); a custom Function "
                "needs both forward and backward"
            )
        if tracing.TRACING[0] and not grad_mode.thread_state.grad_enabled:
            # Under no_grad in a dual level, forward_ad reruns the call on fresh duals.
            rerun = getattr(tracing.current_tracer(), "function_call", None)
            if rerun is not None:
                done = rerun(cls, args)
                if done is not NotImplemented:
                    return done
        needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        ctx = FunctionCtx(needs)
        recording = grad_mode.is_grad_enabled() and any(needs)
        positions = tuple(i for i, n in enumerate(needs) if n)
        # Taken before forward runs: a dirty input's history changes below.
        edges = tuple(args[i]._gradient_edge() for i in positions) if recording else ()
        modern = cls.setup_context is not Function.setup_context
        with grad_mode.no_grad():
            raw = cls.forward(*args) if modern else cls.forward(ctx, *args)
            if modern:
                cls.setup_context(ctx, args, raw)
        single = not isinstance(raw, tuple)
        items = (raw,) if single else raw
        dirty = {id(t) for t in ctx._dirty}
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        for t in ctx._dirty:
            if id(t) not in inputs_by_id:
                raise RuntimeError("mark_dirty() can only mark inputs of the Function")
            if grad_mode.is_grad_enabled() and t._requires_grad and t.grad_fn is None:
                raise RuntimeError(
                    "a leaf Variable that requires grad has been used in an in-place operation."
                )
            _bump_version(t)
        outputs = []
        for item in items:
            if isinstance(item, Tensor):
                if id(item) in inputs_by_id and id(item) not in dirty:
                    # An input returned as is: give it a new identity.
                    alias = wrap(item.data, False, None, 0)
                    alias._version_owner = (
                        item._version_owner if item._version_owner is not None else item
                    )
                    if id(item) in ctx._non_differentiable:
                        ctx._non_differentiable.add(id(alias))
                    item = alias
                outputs.append(item)
            elif isinstance(item, (np.ndarray, np.generic)):
                outputs.append(wrap(np.asarray(item), False, None, 0))
            else:
                outputs.append(item)
        tensors_out = [o for o in outputs if isinstance(o, Tensor)]
        if recording:
            node = FunctionNode.__new__(FunctionNode)
            node.edges = edges
            node.seq = next(SEQUENCE)
            node.out_meta = tuple((o.data.shape, o.data.dtype) for o in tensors_out)
            node.input_meta = tuple((args[i].data.shape, args[i].data.dtype) for i in positions)
            node.pre_hooks = None
            node.retained = None
            node.modified = False
            node.fn_cls = cls
            node.ctx = ctx
            node.input_positions = positions
            node.n_inputs = len(args)
            node.once = getattr(cls.backward, "_once_differentiable", False)
            ctx._node = node
            if WATCHERS:
                notify_created(node)
            for i, o in enumerate(tensors_out):
                if o.data.dtype.kind == "f" and id(o) not in ctx._non_differentiable:
                    o._requires_grad = True
                    o.grad_fn = node
                    o._output_nr = i
            for t in ctx._dirty:
                AFTER_INPLACE[0](t, None)  # its views, and its base if it is a view
        tracer = tracing.current_tracer()
        if tracer is not None:
            # Its derivative is its backward, which the tracer cannot read: a tracer
            # treats every output as depending on every Tensor input.
            tracer.opaque(tensors_out, [a for a in args if isinstance(a, Tensor)])
        return outputs[0] if single else tuple(outputs)


def _bump_version(t: Tensor) -> None:
    """An input modified in place by ``forward``: bump its (shared) version counter."""
    owner = t._version_owner if t._version_owner is not None else t
    owner._version_count += 1
    note_inplace_change()
    if t.grad_fn is not None:
        t.grad_fn.modified = True


def once_differentiable(backward: Any) -> Any:
    """Mark a custom ``backward`` as not differentiable again (an error under create_graph).

    Apply it below ``@staticmethod``; it sets a flag the Function reads.
    """
    backward._once_differentiable = True
    return backward
