"""Derivatives from a graph that is already recorded: Jacobian rows, jvp and vjp.

The checkers and :mod:`funcdiff.optimize` record a function once and then ask many
questions of that one graph (the Jacobian rows of every output, the dot-product and
symmetry tests, a cached optimisation point), so the graph must outlive all of them:
every backward pass here keeps it (``retain_graph=True``). ``funcdiff.functional``
records the function anew on each call and frees its graph after its last pass, so
only its standard-basis builders are reused here.

A batch of one-hot cotangents (``is_grads_batched=True``) gives a whole Jacobian block
in one backward pass. The engine feeds a custom Function's backward one batch entry
at a time unless its class sets ``batched_backward = True``. Such a declared batch-aware
backward, and tensor hooks, are user code that may still handle one cotangent only
(``A.T @ g``), so a graph holding them gets one backward pass per row
(:func:`is_batch_safe`); ``gradcheck(check_batched_grad=True)`` tests them batched on
purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor, tensor
from funcdiff.autograd.engine import grad
from funcdiff.autograd.function import FunctionNode
from funcdiff.check.values import as_array
from funcdiff.functional import _basis_rows, _one_hot

__all__ = ["is_batch_safe", "jacobian_rows", "jvp", "vjp"]

# Elements of a batched basis of cotangents per backward pass (bounds memory).
_CHUNK = 1 << 22


def is_batch_safe(outs: Sequence[Any]) -> bool:
    """True unless the graph behind ``outs`` holds a hook or a declared batch-aware backward.

    Registered rules are tested with batched cotangents, and the engine passes a custom
    Function's backward one cotangent at a time; a hook, or a backward whose class sets
    ``batched_backward = True``, sees the whole batch and may be written for one
    cotangent only.
    """
    stack = [o.grad_fn for o in outs if isinstance(o, Tensor) and o.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        declared_batched = isinstance(node, FunctionNode) and getattr(
            node.fn_cls, "batched_backward", False
        )
        if node.pre_hooks or declared_batched:
            return False
        stack.extend(e[0] for e in node.edges if e is not None)
    return True


def jacobian_rows(out: Any, ins: Sequence[Tensor], batched: bool | None = None) -> list[np.ndarray]:
    """Jacobian of ``out`` w.r.t. each of ``ins``: shape ``out.shape + in.shape`` (float64).

    With ``batched`` True, one backward pass per chunk of rows with a batch of one-hot
    cotangents; with False, one pass per row; with None (the default), batched wherever
    :func:`is_batch_safe` allows it.
    """
    if batched is None:
        batched = is_batch_safe([out])
    shape = tuple(np.shape(as_array(out)))
    m = int(np.prod(shape, dtype=np.int64))
    blocks = [np.zeros((m,) + t.shape) for t in ins]
    if m and isinstance(out, Tensor) and out.requires_grad and ins:
        step = max(1, _CHUNK // (m + sum(t.size for t in ins))) if batched else 1
        for start in range(0, m, step):
            stop = min(m, start + step)
            if batched:
                cotangent = _basis_rows(shape, out.dtype, 0, start, stop)
            else:
                cotangent = _one_hot(shape, out.dtype, start)
            gs = grad(
                out,
                list(ins),
                cotangent,
                retain_graph=True,
                allow_unused=True,
                is_grads_batched=batched,
            )
            for b, g in zip(blocks, gs, strict=True):
                if g is not None:
                    b[start:stop] = g.data
    return [b.reshape(shape + t.shape) for b, t in zip(blocks, ins, strict=True)]


def jvp(
    outs: Sequence[Any],
    ins: Sequence[Tensor],
    dirs: Sequence[np.ndarray],
    batched: bool = False,
    force_batched: bool = False,
) -> list[np.ndarray]:
    """``J v`` for every output (float64), by the double-backward trick.

    ``dirs[j]`` has the shape of ``ins[j]`` (with a leading batch axis if ``batched``).
    The gradient with respect to a dummy cotangent ``u`` of ``<grad(out, x, u), v>``
    is ``J v``; this needs the vjps to be differentiable, which funcdiff's are. A batch
    takes one backward pass, or one per direction where :func:`is_batch_safe` forbids
    a batch (unless ``force_batched``).
    """
    nb = (np.shape(dirs[0])[0],) if batched and dirs else ()
    results = [np.zeros(nb + np.shape(as_array(o))) for o in outs]
    live = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not live:
        return results
    us = [tensor(np.zeros(outs[k].shape, dtype=outs[k].dtype), requires_grad=True) for k in live]
    gs = grad(
        [outs[k] for k in live],
        list(ins),
        us,
        create_graph=True,
        retain_graph=True,
        allow_unused=True,
    )
    pairs = [(g, d) for g, d in zip(gs, dirs, strict=True) if g is not None and g.requires_grad]
    if not pairs:
        return results
    gl = [g for g, _ in pairs]
    cotangents = [np.asarray(d, dtype=g.dtype) for g, d in pairs]

    def pull_back(index: Any, cots: list[np.ndarray], as_batch: bool) -> None:
        jv = grad(gl, us, cots, retain_graph=True, allow_unused=True, is_grads_batched=as_batch)
        for k, r in zip(live, jv, strict=True):
            if r is not None:
                results[k][index] = r.data

    if batched and not force_batched and not is_batch_safe(gl):
        for b in range(nb[0]):
            pull_back(b, [c[b] for c in cotangents], False)
    else:
        pull_back(Ellipsis, cotangents, batched)
    return results


def vjp(outs: Sequence[Any], ins: Sequence[Tensor], cotangents: Sequence[Any]) -> list[np.ndarray]:
    """``sum_i u_i^T J_i`` for each of ``ins``, as the gradients' data.

    Outputs that are constants (not Tensors requiring grad) contribute nothing; an
    input that no output reaches gets float64 zeros.
    """
    live = [
        (o, u)
        for o, u in zip(outs, cotangents, strict=True)
        if isinstance(o, Tensor) and o.requires_grad
    ]
    if not live:
        return [np.zeros(t.shape) for t in ins]
    gs = grad(
        [o for o, _ in live],
        list(ins),
        [np.asarray(u, dtype=o.dtype) for o, u in live],
        retain_graph=True,
        allow_unused=True,
    )
    return [np.zeros(t.shape) if g is None else g.data for g, t in zip(gs, ins, strict=True)]
