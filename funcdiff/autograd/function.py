"""Custom differentiable operations: subclass :class:`Function`.

``forward`` runs on Tensors without recording; ``backward`` receives one gradient
Tensor per output and returns one per input. A backward written with Tensor
operations (or NumPy calls on Tensors) is itself recorded under ``create_graph``,
so custom functions can be differentiated to any order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core import grad_mode, tracing
from funcdiff._core.graph import (
    FREED_GRAPH_MESSAGE,
    SEQUENCE,
    Node,
    describe_value,
    raise_modified,
    version_of,
)
from funcdiff._core.tensor import Tensor, wrap

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` object passed to ``forward`` and ``backward``.

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
        self.materialize_grads = True
        self._node: FunctionNode | None = None

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Save Tensors (or None) for ``backward``; read them via ``saved_tensors``."""
        if self._saved_called:
            raise RuntimeError("save_for_backward can be called at most once per forward")
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save Tensors or None, but argument {i} "
                    f"is {type(t).__name__}; store other values as attributes of ctx"
                )
        self._saved_called = True
        self._saved = tensors
        self._checks = tuple(version_of(t) for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        """The saved Tensors, checked for in-place modification since they were saved."""
        if self._saved is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        if self._node is not None:
            for i, (t, saved) in enumerate(zip(self._saved, self._checks)):
                if t is not None and version_of(t) != saved:
                    raise_modified(self._node, i, version_of(t), saved)
        return self._saved

    def mark_non_differentiable(self, *outputs: Tensor) -> None:
        """Declare outputs that do not require grad."""
        self._non_differentiable.update(id(t) for t in outputs)

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Accepted for compatibility; funcdiff forward runs on data without mutating inputs."""

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` may receive None for outputs that got no gradient."""
        self.materialize_grads = bool(value)


class FunctionNode(Node):
    """A node that calls a custom Function's ``backward``."""

    __slots__ = ("fn_cls", "ctx", "input_positions", "n_inputs", "once")

    # Set by Function.apply when it records the node.
    fn_cls: type[Function]
    ctx: FunctionCtx
    input_positions: tuple[int, ...]  # the forward inputs that need a gradient
    n_inputs: int
    once: bool  # backward is @once_differentiable

    def name(self) -> str:
        return f"{self.fn_cls.__name__}Backward"

    def release(self) -> None:
        self.ctx._saved = None
        self.ctx._checks = ()

    def describe_saved(self, label: Any) -> str:
        saved = self.ctx._saved
        assert saved is not None  # only saved_tensors reports, before release
        value = saved[label]
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
        tensors: list[Tensor | None] = []
        for (shape, dtype), g in zip(self.out_meta, grads):
            if g is None:
                if not ctx.materialize_grads:
                    tensors.append(None)
                    continue
                g = np.zeros(shape, dtype=dtype)
            tensors.append(g if isinstance(g, Tensor) else wrap(g, False, None, 0))
        result = self.fn_cls.backward(ctx, *tensors)
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


class Function:
    """Base class for custom differentiable operations.

    Subclass it with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``
    and call ``MyFunction.apply(*args)``.

    A batch of cotangents (``is_grads_batched=True``, ``vectorize=True``) reaches
    ``backward`` one entry at a time, unless the class sets ``batched_backward = True``
    to say that its backward accepts cotangents with one extra leading batch axis.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> class Cube(fd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 3
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
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        raise NotImplementedError("A custom Function must implement forward(ctx, *args)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError(
            "You must implement the backward method for your custom Function to use it "
            "with backward mode AD."
        )

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Run ``forward`` and record a node that calls ``backward``."""
        if cls.backward is Function.backward:
            raise NotImplementedError(
                f"{cls.__name__} does not implement backward(ctx, *grads); a custom Function "
                "needs both forward and backward"
            )
        needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with grad_mode.no_grad():
            raw = cls.forward(ctx, *args)
        single = not isinstance(raw, tuple)
        items = (raw,) if single else raw
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        outputs = []
        for item in items:
            if isinstance(item, Tensor):
                if id(item) in inputs_by_id:  # an input returned as is: give it a new identity
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
        if grad_mode.is_grad_enabled() and any(needs):
            positions = tuple(i for i, n in enumerate(needs) if n)
            node = FunctionNode.__new__(FunctionNode)
            node.edges = tuple(args[i]._gradient_edge() for i in positions)
            node.seq = next(SEQUENCE)
            node.out_meta = tuple((o.data.shape, o.data.dtype) for o in tensors_out)
            node.pre_hooks = None
            node.retained = None
            node.modified = False
            node.fn_cls = cls
            node.ctx = ctx
            node.input_positions = positions
            node.n_inputs = len(args)
            node.once = getattr(cls.backward, "_once_differentiable", False)
            ctx._node = node
            for i, o in enumerate(tensors_out):
                if o.data.dtype.kind == "f" and id(o) not in ctx._non_differentiable:
                    o._requires_grad = True
                    o.grad_fn = node
                    o._output_nr = i
        tracer = tracing.current_tracer()
        if tracer is not None:
            # Its derivative is its backward, which the tracer cannot read: a tracer
            # treats every output as depending on every Tensor input.
            tracer.opaque(tensors_out, [a for a in args if isinstance(a, Tensor)])
        return outputs[0] if single else tuple(outputs)


def once_differentiable(backward: Any) -> Any:
    """Mark a custom ``backward`` as not differentiable again (an error under create_graph).

    Apply it below ``@staticmethod``; it sets a flag the Function reads.
    """
    backward._once_differentiable = True
    return backward
