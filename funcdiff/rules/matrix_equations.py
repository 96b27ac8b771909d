"""``scipy.linalg`` rules for matrix equations: ``solve_sylvester``, ``sqrtm`` and
``solve_banded`` (whose vjp solves the banded system of the transpose).

The Sylvester equation ``A X + X B = Q`` is its own adjoint's kind: the cotangent of
``Q`` solves ``A^T Y + Y B^T = G``, and the square root's vjp is one Sylvester solve
(``X dX + dX X = dA``). Both vjps call the recorded ``solve_sylvester``, so every order of
derivative is available; complex matrices follow the plain-transpose convention of
holomorphic functions. The public faces are in :mod:`funcdiff.linalg`.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> from funcdiff.linalg import sqrtm
>>> a = fd.tensor([[4.0, 0.0], [0.0, 9.0]], requires_grad=True)
>>> np.trace(sqrtm(a)).backward()  # d/da tr(sqrt(a)) = a^(-1/2) / 2
>>> np.round(a.grad.numpy(), 12)
array([[0.25      , 0.        ],
       [0.        , 0.16666667]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core.backends import first_foreign, on_device_of, zeros
from funcdiff._core.lazy import scipy  # scipy.linalg is imported on first use
from funcdiff._core.registry import Rule, dispatching, register
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.linalg_common import mT
from funcdiff.rules.structure import DENSE

__all__ = ["solve_sylvester", "sqrtm", "solve_banded"]


def _each_matrix(solve: Any, *operands: Any) -> Any:
    """``solve`` on each matrix of stacked operands (SciPy's solver takes one matrix;
    a batch of cotangents, or stacked inputs, arrive with leading axes)."""
    lead = np.broadcast_shapes(*(tuple(np.shape(x)[:-2]) for x in operands))
    if not lead:
        return solve(*operands)
    expanded = [np.broadcast_to(x, lead + tuple(np.shape(x)[-2:])) for x in operands]
    flat = [np.reshape(x, (-1,) + tuple(np.shape(x)[-2:])) for x in expanded]
    results = [solve(*(x[i] for x in flat)) for i in range(int(np.prod(lead)))]
    stacked = np.stack(results)
    return np.reshape(stacked, lead + tuple(np.shape(stacked)[-2:]))


# ---------------------------------------------------------------- solve_sylvester
@dispatching
def solve_sylvester(a, b, q):
    """``scipy.linalg.solve_sylvester`` (``A X + X B = Q``), also for stacks of matrices."""
    return _each_matrix(scipy.linalg.solve_sylvester, a, b, q)


def _sylvester_vjp_all(needs, g, ans, a, b, q):
    # dX solves A dX + dX B = dQ - dA X - X dB; the cotangent of Q, Y, solves the
    # transposed equation, and those of A and B follow from it.
    y = solve_sylvester(mT(a), mT(b), g)
    return (
        -np.matmul(y, mT(ans)) if needs[0] else None,
        -np.matmul(mT(ans), y) if needs[1] else None,
        y if needs[2] else None,
    )


register(
    Rule(
        "scipy.linalg.solve_sylvester",
        solve_sylvester.__wrapped__,
        vjp_all=_sylvester_vjp_all,
        cases=(
            Case((Arg((3, 3), kind="wellcond"), Arg((2, 2), kind="wellcond"), Arg((3, 2)))),
            Case((Arg((2, 2), kind="wellcond"), Arg((2, 2), kind="spd"), Arg((2, 2), diff=False))),
        ),
        convention="A and -B must share no eigenvalue (SciPy's condition for a solution)",
        family="linalg",
        structure=DENSE,
        complex=True,
        arg_names=("a", "b", "q"),
    ),
    scipy.linalg.solve_sylvester,
    solve_sylvester,
)


# ---------------------------------------------------------------- sqrtm
@dispatching
def sqrtm(a):
    """``scipy.linalg.sqrtm``: the principal square root (complex where ``a`` has
    negative real eigenvalues, as SciPy's)."""
    return scipy.linalg.sqrtm(a)


def _sqrtm_vjp(g, ans, a):
    # X X = A gives X dX + dX X = dA: the cotangent solves X^T Y + Y X^T = G.
    return solve_sylvester(mT(ans), mT(ans), g)


register(
    Rule(
        "scipy.linalg.sqrtm",
        sqrtm.__wrapped__,
        vjps={0: _sqrtm_vjp},
        cases=(
            Case((Arg((3, 3), kind="spd"),)),
            Case((Arg((2, 2, 2), kind="wellcond"),)),
            Case((Arg((1, 1), 0.5, 2.0),)),
        ),
        convention="the principal square root; its derivative needs X and -X to share no "
        "eigenvalue (a singular root has none)",
        family="linalg",
        structure=DENSE,
        complex=True,
    ),
    scipy.linalg.sqrtm,
    sqrtm,
)


# ---------------------------------------------------------------- solve_banded
@dispatching
def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """``scipy.linalg.solve_banded``, never overwriting its inputs."""
    try:
        return scipy.linalg.solve_banded(l_and_u, ab, b, check_finite=check_finite)
    except TypeError:  # a backend array (CuPy), whose scipy.linalg has no banded solver
        if first_foreign((ab, b)) is None:
            raise
        return _solve_banded_on_device(l_and_u, ab, b)


def _solve_banded_on_device(l_and_u, ab, b):
    """The same solution on a backend array: the matrix whose band ``ab`` holds, built
    on the device and solved there by ``numpy.linalg.solve`` (dense: ``O(n^3)``)."""
    lower, upper = _bands(l_and_u)
    if np.ndim(ab) != 2 or np.ndim(b) not in (1, 2):
        raise TypeError(
            "scipy.linalg.solve_banded on this array type takes a 2-d ab and a 1-d or "
            f"2-d b, got ab of shape {np.shape(ab)} and b of shape {np.shape(b)}"
        )
    rows, n = np.shape(ab)
    if rows != lower + upper + 1:
        raise ValueError(
            f"invalid values for the number of lower and upper diagonals: l+u+1 "
            f"({lower + upper + 1}) does not equal ab.shape[0] ({rows})"
        )
    r, j = np.meshgrid(np.arange(rows), np.arange(n), indexing="ij")
    i = r + j - upper  # a[i, j] = ab[u + i - j, j]
    keep = (i >= 0) & (i < n)
    dense = zeros((n, n), np.result_type(ab.dtype, np.float64), like=ab)
    dense[i[keep], j[keep]] = ab[r[keep], j[keep]]  # host indices, device values
    return np.linalg.solve(dense, b)


def _bands(l_and_u: Any) -> tuple[int, int]:
    lower, upper = (int(v) for v in l_and_u)
    return lower, upper


def _transposed_band(ab: Any, lower: int, upper: int) -> Any:
    """The banded form of ``A^T`` (``upper`` sub- and ``lower`` superdiagonals) from that
    of ``A``: ``ab_T[r, j] = ab[upper + lower - r, j + r - lower]``, a recorded gather."""
    rows, n = np.shape(ab)
    r = np.arange(rows)[:, None]
    cols = np.arange(n)[None, :] + r - lower
    valid = (cols >= 0) & (cols < n)
    gathered = ab[np.broadcast_to(upper + lower - r, (rows, n)), np.clip(cols, 0, n - 1)]
    return np.where(on_device_of(valid, gathered), gathered, 0.0)


def _solve_banded_vjp_all(needs, g, ans, l_and_u, ab, b, *args, **kwargs):
    lower, upper = _bands(l_and_u)
    # The cotangent of b solves A^T y = g; that of A is -y x^T on the band.
    band_t = _transposed_band(ab, lower, upper)
    if np.ndim(g) > np.ndim(ans):  # a batch of cotangents: extra right-hand sides
        moved = np.moveaxis(g, 0, -1)
        flat = np.reshape(moved, (np.shape(ans)[0], -1))
        y = np.moveaxis(
            np.reshape(solve_banded((upper, lower), band_t, flat), np.shape(moved)), -1, 0
        )
    else:
        y = solve_banded((upper, lower), band_t, g)
    grad_ab = None
    if needs[1]:
        rows, n = np.shape(ab)
        row_of = np.arange(rows)[:, None] + np.arange(n)[None, :] - upper  # i = r + j - u
        valid = (row_of >= 0) & (row_of < n)
        picked = np.clip(row_of, 0, n - 1)
        vector = np.ndim(b) == 1
        if vector:
            outer = y[..., picked] * ans[None, :]
        else:
            outer = np.sum(y[..., picked, :] * ans[None, :, :], axis=-1)
        grad_ab = np.where(on_device_of(valid, outer), -outer, 0.0)
    return (None, grad_ab, y if needs[2] else None)


register(
    Rule(
        "scipy.linalg.solve_banded",
        solve_banded.__wrapped__,
        vjp_all=_solve_banded_vjp_all,
        cases=(
            Case(((1, 0), Arg((2, 4), 0.5, 1.0), Arg((4,)))),
            Case(((0, 1), Arg((2, 3), 0.5, 1.0), Arg((3, 2)))),
            Case(((0, 0), Arg((1, 3), 0.5, 1.0), Arg((3,)))),
        ),
        nondiff_args=frozenset({0, "l_and_u"}),
        convention="the gradient of ab lives on the entries the solver reads (the band); "
        "its unused corners get 0",
        family="linalg",
        structure=DENSE,
        arg_names=("l_and_u", "ab", "b"),
    ),
    scipy.linalg.solve_banded,
    solve_banded,
)
