"""Activation checkpointing: trade compute for memory, as
``torch.utils.checkpoint.checkpoint`` (non-reentrant).

``checkpoint(fn, *args)`` runs ``fn`` and keeps only its inputs and outputs, not the
values its operations save for backward; the backward pass runs ``fn`` again, with
recording on, and differentiates that recomputation. Gradients are the same as
without checkpointing, for ``fn``'s Tensor arguments and for the Tensors its closure
uses; the peak memory of a long loop whose steps are checkpointed is that of one
step's saved values plus every step's inputs, instead of every step's saved values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from funcdiff._core import grad_mode
from funcdiff._core.graph import FREED_GRAPH_MESSAGE, SEQUENCE, AccumulateGrad, Node, version_of
from funcdiff._core.tensor import Tensor, wrap
from funcdiff.autograd.engine import run_backward

__all__ = ["checkpoint"]


def _tensors_in(value: Any) -> list[Tensor]:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors_in(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors_in(item)]
    return []


def _boundary(outputs: Sequence[Tensor], start: int) -> list[tuple[Node, int]]:
    """The edges from the nodes ``fn`` recorded (created at or after ``start``) into the
    graph that existed before: its inputs, and the Tensors its closure used."""
    found: dict[tuple[Node, int], None] = {}
    stack: list[Node] = [o.grad_fn for o in outputs if o.grad_fn is not None]
    for o in outputs:
        if o._requires_grad and (o.grad_fn is None or o.grad_fn.seq < start):
            found[o._gradient_edge()] = None  # an input returned as it is
    seen: set[Node] = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.seq < start:
            continue
        for child, nr in node.edges:
            if child.seq < start or type(child) is AccumulateGrad:
                found[(child, nr)] = None
            else:
                stack.append(child)
    return list(found)


class CheckpointNode(Node):
    """The node of a checkpointed call: its backward recomputes the call."""

    __slots__ = ("fn", "args", "kwargs", "versions")

    fn: Callable[..., Any] | None
    args: tuple | None
    kwargs: dict[str, Any] | None
    versions: tuple[int, ...]

    def name(self) -> str:
        return "CheckpointBackward"

    def release(self) -> None:
        self.fn = self.args = self.kwargs = None

    def apply(self, grads: list, create_graph: bool) -> list:
        if self.fn is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        for t, version in zip(_tensors_in((self.args, self.kwargs)), self.versions):
            if version_of(t) != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    "by an inplace operation: an argument of a checkpointed function changed "
                    "in place after the call, so recomputing it would give other values. "
                    "It was saved by CheckpointBackward."
                )
        with grad_mode.enable_grad():
            recomputed = self.fn(*(self.args or ()), **(self.kwargs or {}))
        outs = [t for t in _tensors_in(recomputed) if t.data.dtype.kind in "fc"]
        roots, root_grads = [], []
        for o, g, (shape, _) in zip(outs, grads, self.out_meta):
            if o.shape != shape:
                raise RuntimeError(
                    "a checkpointed function returned outputs of other shapes when it was "
                    "run again in backward: it must compute the same thing each time"
                )
            if g is not None and o._requires_grad:
                roots.append(o)
                root_grads.append(g if create_graph or not isinstance(g, Tensor) else g.data)
        if not roots:
            return [None] * len(self.edges)
        captured = run_backward(
            roots,
            root_grads,
            targets=list(self.edges),
            accumulate=False,
            retain_graph=create_graph,
            create_graph=create_graph,
            stop_at_targets=True,
        )
        return [captured.get(edge) for edge in self.edges]


def checkpoint(fn: Callable[..., Any], *args: Any, use_reentrant: bool = False, **kwargs: Any):
    """Call ``fn(*args, **kwargs)`` without keeping its intermediate values for backward.

    Parameters
    ----------
    fn : callable
        A deterministic function of Tensors (and anything else); it may use Tensors
        from its closure, which get their gradients too.
    *args, **kwargs
        Its arguments: Tensors, containers of them, and other values.
    use_reentrant : bool
        Accepted for torch compatibility; only ``False`` (non-reentrant) is supported.

    Returns
    -------
    What ``fn`` returns: a Tensor, or a tuple or list of Tensors and other values.

    Notes
    -----
    ``fn`` runs once now and once more in the backward pass, so it costs one extra
    forward evaluation; it must compute the same values both times (no randomness
    drawn inside, no arguments modified in place in between: that is refused).

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([0.5, 1.0], requires_grad=True)
    >>> y = fd.checkpoint(lambda t: np.sin(t) * t, x)
    >>> y.sum().backward()
    >>> np.allclose(x.grad.data, np.cos(x.data) * x.data + np.sin(x.data))
    True
    """
    if use_reentrant:
        raise ValueError("funcdiff.checkpoint supports use_reentrant=False only")
    if not callable(fn):
        raise TypeError(f"checkpoint expects a callable as fn, got {type(fn).__name__}")
    if not grad_mode.is_grad_enabled():
        return fn(*args, **kwargs)
    start = next(SEQUENCE)
    result = fn(*args, **kwargs)
    outputs = _tensors_in(result)
    recorded = [o for o in outputs if o._requires_grad and o.data.dtype.kind in "fc"]
    if not recorded:
        return result
    node = CheckpointNode.__new__(CheckpointNode)
    differentiable = [o for o in outputs if o.data.dtype.kind in "fc"]
    Node.__init__(
        node,
        tuple(_boundary(recorded, start)),
        tuple((o.data.shape, o.data.dtype) for o in differentiable),
    )
    node.fn = fn
    node.args = args
    node.kwargs = kwargs
    node.versions = tuple(version_of(t) for t in _tensors_in((args, kwargs)))
    # Fresh outputs on the checkpoint node: the recorded graph of this run is dropped.
    replaced = {
        id(o): wrap(o.data, True, node, i) if o._requires_grad else o
        for i, o in enumerate(differentiable)
    }
    return _replace(result, replaced)


def _replace(value: Any, replaced: dict[int, Tensor]) -> Any:
    if isinstance(value, Tensor):
        return replaced.get(id(value), value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_replace(v, replaced) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_replace(v, replaced) for v in value)
    if isinstance(value, dict):
        return {k: _replace(v, replaced) for k, v in value.items()}
    return value
