"""Reductions: sum, mean and friends.

A reduction's cotangent has the reduced shape; ``expand_reduced`` puts the reduced
axes back as length-one axes (after any batch axis), and the engine broadcasts the
result to the input's shape.
"""

from __future__ import annotations

import numpy as np

from funcdiff.rules._registry import Arg, Case, Rule, batch_ndim, register


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(int(a) % ndim if ndim else 0 for a in axis))
    return (int(axis) % ndim if ndim else 0,)


def expand_reduced(g, ans, x, axis, keepdims: bool = False):
    """Reshape a reduction's cotangent ``g`` so it broadcasts against ``x`` (batch kept)."""
    nb = batch_ndim(g, ans)
    if keepdims:
        return g
    shape = list(np.shape(x))
    for a in normalize_axes(axis, len(shape)):
        shape[a] = 1
    return np.reshape(g, tuple(np.shape(g)[:nb]) + tuple(shape))


def _sum(a, axis=None, dtype=None, keepdims=False):
    return np.sum(a, axis=axis, dtype=dtype, keepdims=keepdims)


def _mean(a, axis=None, dtype=None, keepdims=False):
    return np.mean(a, axis=axis, dtype=dtype, keepdims=keepdims)


def _count(x, axis) -> int:
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in normalize_axes(axis, len(shape))]))


def reduction_cases() -> tuple[Case, ...]:
    """Test points for an axis reduction: all axes, one axis, negative axis, keepdims."""
    return (
        Case((Arg((3, 4)),)),
        Case((Arg((3, 4)),), {"axis": 0}),
        Case((Arg((2, 3, 4)),), {"axis": -1, "keepdims": True}),
        Case((Arg((2, 3, 4)),), {"axis": (0, 2)}),
        Case((Arg(()),)),
    )


register(
    Rule(
        "sum",
        _sum,
        vjps={0: lambda g, ans, a, axis=None, dtype=None, keepdims=False: expand_reduced(
            g, ans, a, axis, keepdims
        )},
        cases=reduction_cases(),
        family="reductions",
    ),
    np.sum,
)
register(
    Rule(
        "mean",
        _mean,
        vjps={0: lambda g, ans, a, axis=None, dtype=None, keepdims=False: expand_reduced(
            g, ans, a, axis, keepdims
        ) / _count(a, axis)},
        cases=reduction_cases(),
        family="reductions",
    ),
    np.mean,
)
