"""Helpers shared by the linear-algebra rule modules (``linalg``, ``eigen``,
``complex_linalg``, ``scipy_linalg``, ``contractions``): batched transposes and products,
solves against many right-hand sides, the guarded reciprocals of eigen- and singular
value gaps, and the conventions the rules document.

Everything here is written with NumPy calls that have rules of their own, so a vjp built
from these helpers is differentiable again.

Examples
--------
>>> import numpy as np
>>> from funcdiff.rules.linalg_common import safe_inverse_gaps
>>> safe_inverse_gaps(np.array([1.0, 3.0]))
array([[ 0. ,  0.5],
       [-0.5,  0. ]])
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from funcdiff._core.backends import as_array, on_device_of
from funcdiff._core.tensor import Tensor, values_read

__all__ = [
    "SYMMETRIC",
    "DEGENERATE",
    "SYM_NOTE",
    "LinAlgError",
    "mT",
    "mm",
    "size_of",
    "numbers_of",
    "is_zero_cotangent",
    "diag_embed",
    "symmetrize",
    "safe_inverse_gaps",
    "safe_reciprocal",
    "solve_many",
    "solution_outer",
    "dispatching_nested",
    "det_gradient",
    "conjugating_first",
]

LinAlgError = np.linalg.LinAlgError

SYMMETRIC = (
    "symmetric convention (torch/JAX): only one triangle is read, and the gradient is "
    "the symmetric one, with respect to the symmetric matrix that triangle stands for; "
    "it equals the entrywise gradient along symmetric perturbations"
)
DEGENERATE = (
    "1/(l_j - l_i) factors of (near-)equal values are set to 0: finite at every order, exact "
    "for functions of the values alone; vector gradients of repeated values are undefined"
)
SYM_NOTE = "symmetric convention: checked through a symmetrising wrapper in tests/test_linalg.py"


def mT(a):
    return np.swapaxes(a, -1, -2)


def size_of(shape) -> int:
    return math.prod(int(s) for s in shape)


def mm(x, y):
    """``x @ y``; when ``y`` is one matrix and ``x`` a stack, a single GEMM.

    NumPy's matmul loops over the stack of ``x`` even when ``y`` is 2-D; merging the
    leading axes of ``x`` into rows (a view for contiguous data) makes it one call.
    """
    xs = np.shape(x)
    if np.ndim(y) == 2 and len(xs) > 2:
        lead = tuple(xs[:-1])
        out = np.matmul(np.reshape(x, (size_of(lead), xs[-1])), y)
        return np.reshape(out, lead + (np.shape(y)[-1],))
    return np.matmul(x, y)


def numbers_of(x) -> np.ndarray:
    """The numbers of ``x``, only for masks and thresholds (constants, never differentiated)."""
    return values_read(x) if isinstance(x, Tensor) else as_array(x)


def is_zero_cotangent(g) -> bool:
    """True for a cotangent that is identically zero and carries no derivative.

    Multi-output rules receive zeros for unused outputs; skipping their terms saves
    work (and an extra decomposition) without changing any derivative, because a zero
    Tensor that requires grad is never skipped.
    """
    if isinstance(g, Tensor):
        return not g.requires_grad and not np.any(values_read(g))
    return not np.any(g)


def diag_embed(v):
    """Diagonal matrices with the last axis of ``v`` on their diagonals."""
    return np.expand_dims(v, -1) * on_device_of(np.eye(np.shape(v)[-1]), v)


def symmetrize(a):
    return (a + mT(a)) * 0.5


def machine_eps(vals: np.ndarray) -> float:
    return float(np.finfo(vals.dtype if vals.dtype.kind == "f" else np.float64).eps)


def safe_inverse_gaps(values, squared: bool = False):
    """``F[..., i, j] = 1 / (v_j - v_i)``, 0 on the diagonal and for (near-)equal pairs.

    The double ``where`` keeps the discarded branch finite, so no NaN or inf leaks into
    derivatives of any order.
    """
    v = values * values if squared else values
    d = np.expand_dims(v, -2) - np.expand_dims(v, -1)
    vals = numbers_of(v)
    n = vals.shape[-1] if vals.ndim else 1
    scale = max_with_zero(np.abs(vals))
    tol = (8 * n * machine_eps(vals)) * np.expand_dims(scale, -1)
    ok = np.abs(numbers_of(d)) > tol
    return np.where(ok, 1.0 / np.where(ok, d, 1.0), 0.0)


def max_with_zero(a):
    """``max(a, axis=-1, keepdims=True, initial=0)``, written for Tensors too."""
    zero = np.zeros_like(a[..., :1]) if np.shape(a)[-1] else np.zeros(np.shape(a)[:-1] + (1,))
    return np.max(np.concatenate([a, zero], axis=-1), axis=-1, keepdims=True)


def safe_reciprocal(s):
    """``1 / s`` for singular values clearly above zero, 0 for (numerically) zero ones."""
    vals = numbers_of(s)
    scale = max_with_zero(vals)
    ok = vals > (8 * max(vals.shape[-1:] or (1,)) * machine_eps(vals)) * scale
    return np.where(ok, 1.0 / np.where(ok, s, 1.0), 0.0)


def solve_many(solver: Callable, a, rhs, vector: bool):
    """``solver(a, r)`` for right-hand sides ``rhs`` that may carry extra leading axes.

    ``rhs`` is ``(..., M)`` when ``vector`` else ``(..., M, K)``. Leading axes of ``rhs``
    beyond the stack axes of ``a`` (a cotangent batch, or a stack of ``b`` against one
    matrix) are moved into extra columns, so each matrix is factorised once for all of
    them instead of once per batch element.
    """
    if vector:
        rhs = np.expand_dims(rhs, -1)
    rs, ash = tuple(np.shape(rhs)), tuple(np.shape(a))
    extra = len(rs) - len(ash)
    if extra > 0 and rs[extra:-2] == ash[:-2]:
        lead = rs[:extra]
        src = tuple(range(extra))
        dst = tuple(range(len(rs) - 1 - extra, len(rs) - 1))
        r = np.reshape(np.moveaxis(rhs, src, dst), ash[:-2] + (rs[-2], size_of(lead) * rs[-1]))
        x = solver(a, r)
        x = np.reshape(x, tuple(np.shape(x)[:-1]) + lead + (rs[-1],))
        x = np.moveaxis(x, dst, src)
    else:
        x = solver(a, rhs)
    return np.squeeze(x, -1) if vector else x


def solution_outer(first, second, vector: bool):
    """``first second^T`` for solutions and cotangents of a linear solve (``gb x^T``).

    Vectors (``vector``: ``b`` was 1-D) give their outer product, (stacks of) matrices
    their matrix product; a stack against one matrix is a single GEMM.
    """
    if vector:
        return np.expand_dims(first, -1) * np.expand_dims(second, -2)
    return mm(first, mT(second))


def dispatching_nested(fn: Callable) -> Callable:
    """Like ``_registry.dispatching``, but also finds Tensors one level inside tuples
    and lists and among keyword arguments (``cho_solve((c, lower), b)``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for a in (*args, *kwargs.values()):
            items = a if type(a) in (tuple, list) else (a,)
            for item in items:
                if isinstance(item, Tensor):
                    # Tensor installs __array_function__ from funcdiff._methods (layer 3).
                    return cast(Any, item).__array_function__(wrapper, (Tensor,), args, kwargs)
        return fn(*args, **kwargs)

    return wrapper


def det_gradient(a, scale):
    try:
        return np.expand_dims(np.expand_dims(scale, -1), -1) * mT(np.linalg.inv(a))
    except LinAlgError:
        raise LinAlgError(
            "the gradient of det/slogdet at a singular matrix (the adjugate) is not "
            "implemented: funcdiff computes it as det(A) A^-T"
        ) from None


def conjugating_first(vjps: dict) -> dict:
    """Complex vjps of ``f(conj(a), b)`` from the vjps of the bilinear ``f(a, b)``
    (vdot, vecdot, vecmat conjugate their first argument): the same formulas on
    ``conj(a)``, the first one's result conjugated."""
    vjp_a, vjp_b = vjps[0], vjps[1]

    def first(g, ans, a, b, *rest, **kwargs):
        return np.conjugate(vjp_a(g, ans, np.conjugate(a), b, *rest, **kwargs))

    def second(g, ans, a, b, *rest, **kwargs):
        return vjp_b(g, ans, np.conjugate(a), b, *rest, **kwargs)

    return {0: first, 1: second}
