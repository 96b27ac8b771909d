"""Selections: operations whose every output element copies one input element.

Reshapes, transposes, slicing and fancy indexing, ``concatenate``, ``roll``, ``pad``,
``tril`` ... (rules declared ``pattern="select"`` in :mod:`funcdiff.rules.structure`)
move elements around at positions that depend on shapes and constant arguments only.
Running the rule's own forward on arrays of element positions tells where each output
element comes from; forward mode then moves a tangent the same way (one gather, where
transposing the vjp would record and run a whole backward pass), and sparsity
detection moves a pattern's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor

__all__ = ["selection_sources", "gather_tangent", "plain"]


def plain(value: Any) -> Any:
    """The arrays of Tensors (one level into lists and tuples too), everything else as is."""
    if isinstance(value, Tensor):
        return value.data
    if type(value) in (list, tuple):
        return type(value)(plain(v) for v in value)
    return value


def selection_sources(
    rule: Any,
    args: Sequence[Any],
    kwargs: dict,
    variable: Sequence[tuple[Any, Any, tuple[int, ...]]],
) -> list[np.ndarray] | None:
    """Where each element of each output of ``rule(*args, **kwargs)`` comes from.

    Parameters
    ----------
    variable : sequence of ``(key, index in list or None, shape)``
        The arguments whose elements are followed; their elements are numbered in
        order, each argument's in C order, one after the other. Every other argument
        keeps its value: its elements come out unchanged by the shift, as constants.

    Returns
    -------
    list of ndarray or None
        Per output, the flat source position of every element (``-1`` for an element
        that is no input element: a pad value, a zero of ``tril``), or None when the
        call turns out not to be a selection. Two runs with the positions shifted tell
        copies (shifted too) from constants (unchanged); anything else is not a copy.
    """
    offsets, total = [], 0
    for _, _, shape in variable:
        offsets.append(total)
        total += int(np.prod(shape))
    shift = total + 1

    def encoded(extra: int) -> tuple[list, dict]:
        new_args, new_kwargs = [plain(a) for a in args], {k: plain(v) for k, v in kwargs.items()}
        for (key, sub, shape), offset in zip(variable, offsets):
            value = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
            value += offset + 1 + extra
            target: Any = new_kwargs if isinstance(key, str) else new_args
            if sub is None:
                target[key] = value
            else:
                items = list(target[key])
                items[sub] = value
                target[key] = type(target[key])(items)
        return new_args, new_kwargs

    try:
        a1, k1 = encoded(0)
        a2, k2 = encoded(shift)
        r1, r2 = rule.fn(*a1, **k1), rule.fn(*a2, **k2)
    except (TypeError, ValueError, IndexError):  # the forward refused integer positions
        return None
    outs1 = r1 if isinstance(r1, (list, tuple)) else (r1,)
    outs2 = r2 if isinstance(r2, (list, tuple)) else (r2,)
    result = []
    for o1, o2 in zip(outs1, outs2):
        o1 = np.asarray(o1)
        delta = np.asarray(o2) - o1
        copied = delta == shift
        if not np.all(copied | (delta == 0)):
            return None
        result.append(np.where(copied, o1 - 1, -1).astype(np.int64).ravel())
    return result


def gather_tangent(
    tangents: Sequence[Any],
    sources: np.ndarray,
    offsets: Sequence[int],
    batch: tuple,
    out_shape: tuple[int, ...],
) -> Any:
    """The output tangent of a selection: each element takes its source's tangent.

    ``tangents`` are the followed arguments' tangents (None for a missing one), with
    the leading ``batch`` axes; ``offsets`` their first source positions.
    """
    total = None
    for t, offset in zip(tangents, offsets):
        if t is None:
            continue
        size = int(np.prod(np.shape(t)[len(batch) :]))
        local = sources - offset
        mine = (local >= 0) & (local < size)
        if not mine.any():
            continue  # nothing of this argument lands in this output
        flat = np.reshape(t, batch + (size,))
        if mine.all():
            part = flat[..., local]
        else:
            part = np.where(mine, flat[..., np.where(mine, local, 0)], 0.0)
        total = part if total is None else total + part
    if total is None:
        # The output copies nothing that has a tangent (an empty piece, pad values only).
        like = next(t for t in tangents if t is not None)
        return np.zeros_like(like, shape=batch + tuple(out_shape))
    return np.reshape(total, batch + tuple(out_shape))
