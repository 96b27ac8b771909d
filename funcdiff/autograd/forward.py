"""Forward mode over a recorded graph: push tangents from inputs to outputs.

After ``func`` has run on Tensors, its graph holds every operation with the values
it saved. :func:`push_forward` walks that graph from the inputs to the outputs and
maps input tangents ``v`` to output tangents ``J v``, one operation at a time,
without the extra reverse pass of the double-backward trick.

A node gives its tangent map through :meth:`Node.tangent`. Where it has none, its
vjp is transposed: ``u -> J^T u`` is linear, so ``J t`` is the gradient of
``<J^T u, t>`` with respect to ``u`` (:func:`transpose_vjp`). Every node is
covered that way; tangent rules only make the common ones fast.

Tangents may carry one leading batch axis (several tangents in one pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from funcdiff._core import grad_mode
from funcdiff._core.arrays import zeros
from funcdiff._core.backends import is_foreign
from funcdiff._core.backends import zeros as device_zeros
from funcdiff._core.graph import Node, fit_cotangent
from funcdiff._core.tensor import Tensor, wrap
from funcdiff.autograd.engine import grad

__all__ = ["push_forward", "transpose_vjp", "NotTransposable"]

_state = grad_mode.thread_state


class NotTransposable(RuntimeError):
    """A node's vjp, run on Tensor cotangents, did not record its result: forward mode
    cannot transpose it (a custom Function's backward that leaves the Tensors)."""


def transpose_vjp(
    node: Node,
    tangents: Sequence[Any],
    create_graph: bool,
    batched: bool,
    constant_args: bool,
    strict: bool = False,
) -> list[Any]:
    """Output tangents of ``node`` from its vjp: ``J t = d/du <J^T u, t>``.

    ``constant_args`` says that ``node.apply(..., create_graph=False)`` computes its
    vjp from the given (Tensor) cotangents and constant saved values, so the recorded
    ``J^T u`` depends on ``u`` only. Otherwise the vjp runs as under ``create_graph``.
    ``strict`` raises :class:`NotTransposable` where a cotangent (not None) of an input
    with a tangent was not recorded from ``u``, instead of taking it as zero.
    """
    previous = _state.grad_enabled
    _state.grad_enabled = True
    try:
        # The value of u is irrelevant (J^T u is linear in u); zeros keep inf and nan out.
        # Batched like the outputs under funcdiff.func.vmap (their cotangents are too), or
        # on the device of the tangents (CuPy).
        like = next((getattr(t, "data", t) for t in tangents if t is not None), None)
        device = like is not None and is_foreign(like)
        dummies = [
            wrap(device_zeros(shape, dtype, like) if device else zeros(shape, dtype), True, None, 0)
            for shape, dtype in node.out_meta
        ]
        cotangents = node.apply(list(dummies), create_graph or not constant_args)
        outputs, pushed = [], []
        for (child, nr), c, t in zip(node.edges, cotangents, tangents):
            if t is None or not isinstance(c, Tensor) or not c._requires_grad:
                if strict and t is not None and c is not None:
                    raise NotTransposable(
                        f"{node.name()} returned a gradient that was not computed from its "
                        "incoming gradient with Tensor operations, so forward mode cannot "
                        "transpose it: give the Function a jvp staticmethod, or write its "
                        "backward with Tensor operations"
                    )
                continue
            c = fit_cotangent(c, child.out_meta[nr], ())
            outputs.append(c)
            # grad() conjugates a complex cotangent on the way in and its results on the
            # way out (torch's convention); the transpose needs neither, so both
            # conjugations are undone here.
            pushed.append(np.conjugate(t) if c.dtype.kind == "c" else t)
        if not outputs:
            return [None] * len(dummies)
        result: Sequence[Any] = grad(
            outputs,
            dummies,
            pushed,
            allow_unused=True,
            is_grads_batched=batched,
            create_graph=create_graph,
        )
    finally:
        _state.grad_enabled = previous
    result = [r if r is None or r.dtype.kind != "c" else np.conjugate(r) for r in result]
    return [r if r is None or create_graph else r.data for r in result]


def _topological(roots: Sequence[Node], stops: set[Node]) -> tuple[list[Node], dict[Node, int]]:
    """The nodes ``roots`` depend on, inputs first (``stops`` are not expanded), and
    for every node the number of edges that lead into it."""
    order = [r for r in dict.fromkeys(roots) if r not in stops]
    seen = stops.union(order)
    uses: dict[Node, int] = {}
    stack = list(order)
    while stack:
        for child, _ in stack.pop().edges:
            uses[child] = uses.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                order.append(child)
                stack.append(child)
    # Creation order is a topological order: every node is newer than its inputs.
    order.sort(key=_creation)
    return order, uses


_creation = attrgetter("seq")


def push_forward(
    outputs: Sequence[Tensor],
    seeds: dict[tuple[Node, int], Any],
    *,
    create_graph: bool,
    batched: bool = False,
) -> list[Any]:
    """Tangents of ``outputs`` for the tangents ``seeds`` given at graph edges.

    Parameters
    ----------
    outputs : sequence of Tensor
        Results of a recorded computation.
    seeds : dict
        ``{(node, output_index): tangent}``, for the gradient edges of the inputs
        (``t._gradient_edge()``); each tangent has the input's shape, after one
        leading batch axis when ``batched``. Ndarrays, or Tensors under
        ``create_graph``.
    create_graph : bool
        Record the tangent computation, so the result can be differentiated.
    batched : bool
        The tangents carry a leading batch axis.

    Returns
    -------
    list
        One tangent per output (None where the output does not depend on the seeds):
        ndarrays, or Tensors under ``create_graph``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([0.0, 1.0], requires_grad=True)
    >>> y = np.sin(x) * x
    >>> push_forward([y], {x._gradient_edge(): np.array([1.0, 1.0])}, create_graph=False)
    [array([0.        , 1.38177329])]
    """
    seeded: dict[Node, list] = {}
    for (node, nr), t in seeds.items():
        seeded.setdefault(node, [None] * len(node.out_meta))[nr] = t
    roots = [o.grad_fn or o._gradient_edge()[0] for o in outputs if o._requires_grad]
    order, pending = _topological(roots, set(seeded))
    keep = set(roots)

    tangents: dict[Node, list | None] = dict(seeded)
    batch = (next(iter(seeds.values())).shape[0],) if batched and seeds else ()
    previous = _state.grad_enabled
    _state.grad_enabled = create_graph
    try:
        for node in order:
            ins: list[Any] = []
            live = False
            for child, nr in node.edges:
                ts = tangents.get(child)
                if ts is None:
                    ins.append(None)
                else:
                    t = ts[nr]
                    ins.append(t)
                    live = live or t is not None
                # The last consumer of a node's tangents lets them go.
                left = pending[child] - 1
                pending[child] = left
                if not left and child not in keep:
                    tangents.pop(child, None)
            if not live:
                continue
            out = node.tangent(ins, create_graph, batched)
            if out is NotImplemented:
                # The one place that decides the fallback: every node without a tangent
                # map (or whose map declines) has its vjp transposed.
                out = transpose_vjp(
                    node,
                    ins,
                    create_graph,
                    batched,
                    node.transposes_on_constants,
                    strict=node.transposes_strictly,
                )
            metas = node.out_meta
            for i, t in enumerate(out):
                if t is not None:
                    shape, dtype = metas[i]
                    if type(t) is not np.ndarray or t.dtype != dtype or t.shape != batch + shape:
                        out[i] = _fit_tangent(t, metas[i], batch)
            tangents[node] = out
    finally:
        _state.grad_enabled = previous

    result: list[Any] = []
    for o in outputs:
        if not o._requires_grad:
            result.append(None)
            continue
        node, nr = (o.grad_fn, o._output_nr) if o.grad_fn is not None else o._gradient_edge()
        ts = tangents.get(node)
        result.append(None if ts is None else ts[nr])
    return result


def _fit_tangent(t: Any, meta: tuple, batch: tuple[int, ...]) -> Any:
    """Broadcast a tangent contribution to ``batch + shape`` and cast it to ``dtype``."""
    shape, dtype = meta
    if not hasattr(t, "shape"):
        t = np.asarray(t)
    target = batch + shape if batch else shape
    if t.shape != target:
        t = np.broadcast_to(t, target)
    if t.dtype != dtype:
        if t.dtype.kind == "c" and dtype.kind != "c":
            t = np.real(t)  # the tangent of a real value: the real part of a complex one
        t = t.astype(dtype)
    return t
