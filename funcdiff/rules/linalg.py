"""Linear algebra rules: matmul, dot and the ``numpy.linalg`` family.

Cotangents of products are products again (``g @ B.T``), so a batch of cotangents
becomes one matrix-matrix product instead of a loop.
"""

from __future__ import annotations

import numpy as np

from funcdiff.rules._registry import Arg, Case, Rule, register


def _mT(a):
    return np.swapaxes(a, -1, -2)


def _matmul_vjp_a(g, ans, a, b):
    if np.ndim(b) == 1:
        if np.ndim(a) == 1:  # inner product: g has no core axes
            return np.expand_dims(g, -1) * b
        return np.expand_dims(g, -1) * b  # outer product g[..., i] b[j]
    if np.ndim(a) == 1:
        return np.matmul(g, _mT(b)) if np.ndim(b) == 2 else np.squeeze(
            np.matmul(np.expand_dims(g, -2), _mT(b)), -2
        )
    return np.matmul(g, _mT(b))


def _matmul_vjp_b(g, ans, a, b):
    if np.ndim(a) == 1:
        if np.ndim(b) == 1:
            return np.expand_dims(g, -1) * a
        # b (..., k, n), g (..., n): outer product a[k] g[n]
        return np.expand_dims(a, -1) * np.expand_dims(g, -2)
    if np.ndim(b) == 1:
        if np.ndim(a) == 2:
            return np.matmul(g, a)  # one GEMM for a whole batch of cotangents
        return np.squeeze(np.matmul(np.expand_dims(g, -2), a), -2)
    return np.matmul(_mT(a), g)


register(
    Rule(
        "matmul",
        np.matmul,
        vjps={0: _matmul_vjp_a, 1: _matmul_vjp_b},
        cases=(
            Case((Arg((3, 4)), Arg((4, 2)))),
            Case((Arg((3, 4)), Arg((4,)))),
            Case((Arg((4,)), Arg((4, 2)))),
            Case((Arg((4,)), Arg((4,)))),
            Case((Arg((2, 3, 4)), Arg((4, 2)))),
            Case((Arg((2, 3, 4)), Arg((4,)))),
            Case((Arg((4,)), Arg((2, 4, 3)))),
        ),
        family="linalg",
    )
)
