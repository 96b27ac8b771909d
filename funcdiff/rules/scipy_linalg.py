"""``scipy.linalg`` rules: ``solve_triangular``, ``cho_factor``, ``cho_solve``, ``expm``,
``solve``, ``inv``, ``det`` and ``eigh``.

SciPy's Python functions do not dispatch to Tensors: each rule's forward has a wrapper
that does (the public faces are in :mod:`funcdiff.linalg`). The wrappers never pass
``overwrite_a``/``overwrite_b`` on (a Tensor's data must not change behind the recorded
graph). The vjps reuse the ``numpy.linalg`` ones (``inv``, ``det``, ``cholesky``), and
``scipy.linalg.solve`` with ``assume_a`` keeps the gradient on the entries the structured
solver reads.

Examples
--------
An upper-triangular solve leaves ``a`` as it was (``overwrite_a`` is not passed on) and
gives no gradient to the entry below the diagonal, which the solver never reads:

>>> import numpy as np
>>> import funcdiff as fd
>>> from funcdiff.linalg import solve
>>> a = fd.tensor([[2.0, 1.0], [3.0, 4.0]], requires_grad=True)
>>> x = solve(a, np.array([3.0, 8.0]), assume_a="upper triangular", overwrite_a=True)
>>> a.data
array([[2., 1.],
       [3., 4.]])
>>> fd.grad(x.sum(), a)[0]
tensor([[-0.25, -1.  ],
        [-0.  , -0.25]])
"""

from __future__ import annotations

import functools

import numpy as np

from funcdiff._core.backends import first_foreign, on_device_of
from funcdiff._core.lazy import scipy  # scipy.linalg is imported on first use
from funcdiff._core.registry import Rule, register
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.eigen import (
    _eigh_function,
    _eigh_gauge,
    _eigh_symmetric_gradient,
    _eigvalsh_symmetric_gradient,
    _one_triangle,
)
from funcdiff.rules.linalg import (
    _DET_CONVENTION,
    _cholesky_core_vjp,
    _det_vjp,
    _inv_vjp,
    _solve_triangular,
    scipy_forward,
    solve_triangular,
)
from funcdiff.rules.linalg_common import (
    DEGENERATE,
    SYM_NOTE,
    SYMMETRIC,
    dispatching_nested,
    mT,
    numbers_of,
    solution_outer,
    solve_many,
    symmetrize,
)
from funcdiff.rules.structure import DENSE


def _tri_mask(n: int, lower: bool, k: int = 0, like=None) -> np.ndarray:
    """Ones on the triangle (``k`` diagonals beyond it), as an array of ``like``'s type."""
    ones = np.ones((n, n))
    mask = np.tril(ones, k) if lower else np.triu(ones, -k)
    return mask if like is None else on_device_of(mask, like)


# ------------------------------------------------- the same results on backend arrays
# SciPy's Python code cannot take a backend array (CuPy); these give its results from
# numpy.linalg functions that NumPy's dispatch sends to the backend, for the options
# whose meaning they keep exactly, and raise TypeError (named by the caller) otherwise.
# SciPy's check_finite reads the values, which a device array is never asked for.
def _no_counterpart(name: str, option: str) -> TypeError:
    return TypeError(f"scipy.linalg.{name} with {option} has no counterpart on this array type")


def _mirrored(a, lower: bool, conjugate: bool):
    """The symmetric (``conjugate``: Hermitian) matrix whose ``lower`` (else upper)
    triangle is that of ``a``: what SciPy's symmetric solvers read."""
    half = np.tril(a, -1) if lower else np.triu(a, 1)
    half_t = np.conj(mT(half)) if conjugate else mT(half)
    diag = np.real(a) if conjugate else a  # LAPACK reads a Hermitian diagonal as real
    return half + half_t + diag * _eye(np.shape(a)[-1], a)


def _eye(n: int, like):
    return on_device_of(np.eye(n), like)


def _matrix_read(name: str, a, assume_a, lower: bool):
    """The matrix SciPy's solver for ``assume_a`` reads from ``a``, and whether it must
    be positive definite."""
    n = np.shape(a)[-1]
    if assume_a in _GENERAL:  # None and "banded" detect the structure from the values
        return a, False
    if assume_a == "diagonal":
        return a * _eye(n, a), False
    if assume_a == "tridiagonal":
        return a * _tri_mask(n, True, 1, a) * _tri_mask(n, False, 1, a), False
    if assume_a in ("upper triangular", "lower triangular"):
        return a * _tri_mask(n, assume_a == "lower triangular", 0, a), False
    if assume_a in _SYMMETRIC_KINDS:
        hermitian = assume_a not in ("sym", "symmetric") and np.iscomplexobj(a)
        return _mirrored(a, bool(lower), hermitian), assume_a in ("pos", "positive definite")
    raise _no_counterpart(name, f"assume_a={assume_a!r}")


def _check_positive_definite(m) -> None:
    """Raise LinAlgError, as SciPy's Cholesky-based solvers do, unless ``m`` is
    positive definite (the backend's cholesky checks it)."""
    np.linalg.cholesky(m)


def _solve_on_device(
    a,
    b,
    lower=False,
    overwrite_a=False,
    overwrite_b=False,
    check_finite=True,
    assume_a=None,
    transposed=False,
):
    _check_structure(assume_a)
    if transposed and np.iscomplexobj(a):
        raise NotImplementedError(
            "scipy.linalg.solve can currently not solve a^T x = b or a^H x = b for "
            "complex matrices."
        )
    m, positive = _matrix_read("solve", a, assume_a, lower)
    if positive:
        _check_positive_definite(m)
    # numpy.linalg.solve reads b as SciPy does: (N,) a vector, (..., N, K) matrices
    return np.linalg.solve(mT(m) if transposed else m, b)


# What scipy.linalg.inv takes; its "diagonal" keeps the off-diagonal entries of a in
# its result (SciPy 1.17), which the inverse of the diagonal would not reproduce.
_INV_ON_DEVICE = (
    None,
    "gen",
    "general",
    "sym",
    "her",
    "pos",
    "upper triangular",
    "lower triangular",
)


def _inv_on_device(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    _check_structure(assume_a)
    if assume_a not in _INV_ON_DEVICE:
        raise _no_counterpart("inv", f"assume_a={assume_a!r}")
    m, positive = _matrix_read("inv", a, assume_a, lower)
    if positive:
        _check_positive_definite(m)
    return np.linalg.inv(m)


def _det_on_device(a, overwrite_a=False, check_finite=True):
    return np.linalg.det(a)


def _cho_factor_on_device(a, lower=False, overwrite_a=False, check_finite=True):
    # LAPACK's potrf factors the triangle that lower names and leaves the other as in a.
    n = np.shape(a)[-1]
    factor = np.linalg.cholesky(_mirrored(a, bool(lower), np.iscomplexobj(a)))
    if not lower:
        factor = np.conj(mT(factor))
    keep = _tri_mask(n, bool(lower), 0, a)
    return factor * keep + a * (1.0 - keep), bool(lower)


def _cho_solve_on_device(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    n = np.shape(c)[-1]
    factor = c * _tri_mask(n, bool(lower), 0, c)
    low = factor if lower else np.conj(mT(factor))  # a = low low^H
    return np.linalg.solve(np.conj(mT(low)), np.linalg.solve(low, b))


# ----------------------------------------------------------------------------- scipy.linalg
def _trans_code(trans) -> int:
    codes = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1, "n": 0, "t": 1, "c": 1}
    try:
        return codes[trans]
    except (KeyError, TypeError):
        raise ValueError(
            f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}"
        ) from None


def _solve_triangular_vjp_all(
    needs,
    g,
    ans,
    a,
    b,
    trans=0,
    lower=False,
    unit_diagonal=False,
    overwrite_b=False,
    check_finite=True,
):
    t = _trans_code(trans)
    vector = np.ndim(b) == 1

    def solver(aa, rhs):
        return solve_triangular(aa, rhs, trans=1 - t, lower=lower, unit_diagonal=unit_diagonal)

    gb = solve_many(solver, a, g, vector)
    ga = None
    if needs[0]:
        full = solution_outer(gb, ans, vector) if t == 0 else solution_outer(ans, gb, vector)
        n = np.shape(a)[-1]
        # Only the triangle that is read (without its diagonal if unit) has a gradient.
        ga = -(full * on_device_of(_tri_mask(n, lower, -1 if unit_diagonal else 0), full))
    return [ga, gb if needs[1] else None]


register(
    Rule(
        "scipy.linalg.solve_triangular",
        _solve_triangular,
        vjp_all=_solve_triangular_vjp_all,
        cases=(
            Case((Arg((3, 3), kind="wellcond"), Arg((3,))), {"lower": True}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2))), {"trans": "T", "lower": True}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3,))), {"trans": 1}),
            Case((Arg((3, 3)), Arg((3, 2))), {"unit_diagonal": True, "lower": True}),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((2, 3, 2))), {"lower": True}),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((3,)))),
        ),
        convention="the gradient of a lives on the triangle that is read (without the "
        "diagonal when unit_diagonal=True): the other entries are ignored by the solver",
        family="linalg",
        structure=DENSE,
    ),
    scipy.linalg.solve_triangular,
    solve_triangular,
)


_cho_factor, cho_factor = scipy_forward(scipy.linalg.cho_factor, _cho_factor_on_device)


def _cho_factor_vjp(g, ans, a, lower=False, overwrite_a=False, check_finite=True):
    c, gc = ans[0], g[0]
    n = np.shape(a)[-1]
    mask = _tri_mask(n, bool(lower), 0, c)
    factor = c * mask
    gfactor = gc * mask
    if lower:
        ga = _cholesky_core_vjp(factor, gfactor)
    else:
        ga = _cholesky_core_vjp(mT(factor), mT(gfactor))
    # SciPy leaves the other triangle of ``a`` in place: its cotangent passes through.
    return ga + gc * (1.0 - mask)


register(
    Rule(
        "scipy.linalg.cho_factor",
        _cho_factor,
        vjps={0: _cho_factor_vjp},
        cases=(
            Case((Arg((1, 1), kind="spd"),), note=SYM_NOTE),
            Case((Arg((1, 1), kind="spd"),), {"lower": True}, note=SYM_NOTE),
        ),
        convention=SYMMETRIC + "; the triangle not read passes its cotangent through",
        family="linalg",
        structure=DENSE,
    ),
    scipy.linalg.cho_factor,
    cho_factor,
)


_cho_solve, cho_solve = scipy_forward(scipy.linalg.cho_solve, _cho_solve_on_device)


def _cho_solve_vjp_all(needs, g, ans, c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower_flag = c_and_lower
    lower = bool(np.asarray(numbers_of(lower_flag)).ravel()[0])
    vector = np.ndim(b) == 1

    def solver(cc, rhs):
        return cho_solve((cc, lower_flag), rhs)

    gb = solve_many(solver, c, g, vector)
    gc = None
    if needs[0]:
        outer = solution_outer(gb, ans, vector)
        s = -(outer + mT(outer))
        n = np.shape(c)[-1]
        mask = _tri_mask(n, lower, 0, c)
        if lower:
            gc = (np.matmul(s, c * mask)) * mask
        else:
            gc = (np.matmul(c * mask, s)) * mask
        gc = (gc, None)
    return [gc, gb if needs[1] else None]


register(
    Rule(
        "scipy.linalg.cho_solve",
        _cho_solve,
        vjp_all=_cho_solve_vjp_all,
        cases=(
            Case(([Arg((3, 3), kind="wellcond"), False], Arg((3,)))),
            Case(([Arg((3, 3), kind="wellcond"), True], Arg((3, 2)))),
            Case(([Arg((2, 3, 3), kind="wellcond"), True], Arg((2, 3, 2)))),
        ),
        convention="the factor is read from one triangle of c; the gradient lives there",
        family="linalg",
        structure=DENSE,
    ),
    scipy.linalg.cho_solve,
    cho_solve,
)


_expm, expm = scipy_forward(scipy.linalg.expm)


def _block_upper(diag, corner):
    """``[[diag, corner], [0, diag]]`` built with einsum (recorded, stacks broadcast)."""
    n = np.shape(diag)[-1]
    on_diag = np.einsum("pq,...ij->...piqj", _eye(2, diag), diag)
    off = np.einsum(
        "pq,...ij->...piqj", on_device_of(np.array([[0.0, 1.0], [0.0, 0.0]]), diag), corner
    )
    block = on_diag + off
    return np.reshape(block, tuple(np.shape(block)[:-4]) + (2 * n, 2 * n))


def _expm_vjp(g, ans, a):
    # The adjoint of the Frechet derivative L(A, .) is L(A^T, .), read off the corner of
    # expm([[A^T, G], [0, A^T]]): expm again, so every order is available.
    n = np.shape(a)[-1]
    return expm(_block_upper(mT(a), g))[..., :n, n:]


register(
    Rule(
        "scipy.linalg.expm",
        _expm,
        vjps={0: _expm_vjp},
        cases=(
            Case((Arg((3, 3), -1.0, 1.0),)),
            Case((Arg((2, 2, 2), -1.0, 1.0),)),
            Case((Arg((1, 1)),)),
        ),
        convention="the adjoint Frechet derivative through the block-matrix identity",
        family="linalg",
        structure=DENSE,
    ),
    scipy.linalg.expm,
    expm,
)


_GENERAL = (None, "gen", "general", "banded")
_SYMMETRIC_KINDS = ("sym", "symmetric", "her", "hermitian", "pos", "positive definite")
_KNOWN_STRUCTURES = (
    _GENERAL
    + _SYMMETRIC_KINDS
    + (
        "diagonal",
        "tridiagonal",
        "upper triangular",
        "lower triangular",
    )
)


def _check_structure(assume_a) -> None:
    if assume_a not in _KNOWN_STRUCTURES:
        raise NotImplementedError(
            f"funcdiff has no derivative for scipy.linalg with assume_a={assume_a!r}; "
            f"supported: {', '.join(repr(k) for k in _KNOWN_STRUCTURES)}"
        )


def _project_structure(ga, n: int, assume_a, lower: bool):
    """Restrict a full-matrix cotangent to the entries the structured solver reads.

    ``None`` (structure detected from the values) and ``"banded"`` (band detected from the
    non-zeros) compute ``inv(A) b`` for every ``A``, so the full gradient is right there.
    """
    if assume_a in _GENERAL:
        return ga
    if assume_a in _SYMMETRIC_KINDS:
        return symmetrize(ga)
    if assume_a == "diagonal":
        return ga * _eye(n, ga)
    if assume_a == "tridiagonal":
        return ga * on_device_of(np.tri(n, n, 1) * np.tri(n, n, 1).T, ga)
    return ga * _tri_mask(n, assume_a == "lower triangular", 0, ga)


_scipy_solve, scipy_solve = scipy_forward(scipy.linalg.solve, _solve_on_device)


def _scipy_solve_vjp_all(
    needs,
    g,
    ans,
    a,
    b,
    lower=False,
    overwrite_a=False,
    overwrite_b=False,
    check_finite=True,
    assume_a=None,
    transposed=False,
):
    _check_structure(assume_a)
    vector = np.ndim(b) == 1
    symmetric = assume_a in _SYMMETRIC_KINDS

    def solver(aa, rhs):
        return scipy_solve(
            aa,
            rhs,
            lower=lower,
            assume_a=assume_a,
            transposed=transposed if symmetric else not transposed,
        )

    gb = solve_many(solver, a, g, vector)
    ga = None
    if needs[0]:
        full = solution_outer(ans, gb, vector) if transposed else solution_outer(gb, ans, vector)
        ga = -_project_structure(full, np.shape(a)[-1], assume_a, lower)
    return [ga, gb if needs[1] else None]


register(
    Rule(
        "scipy.linalg.solve",
        _scipy_solve,
        vjp_all=_scipy_solve_vjp_all,
        cases=(
            Case((Arg((3, 3), kind="wellcond"), Arg((3,)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2))), {"transposed": True}),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((2, 3, 2))), {"assume_a": "gen"}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3,))), {"assume_a": "diagonal"}),
            Case((Arg((4, 4), kind="wellcond"), Arg((4, 2))), {"assume_a": "tridiagonal"}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3,))), {"assume_a": "upper triangular"}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2))), {"assume_a": "lower triangular"}),
            Case((Arg((1, 1), kind="spd"), Arg((1, 2))), {"assume_a": "pos"}, note=SYM_NOTE),
        ),
        convention="assume_a: the gradient lives on the entries the solver reads "
        "(diagonal, band, triangle); 'sym'/'her'/'pos' use the " + SYMMETRIC,
        family="linalg",
        structure=DENSE,
    ),
    scipy.linalg.solve,
    scipy_solve,
)


_scipy_inv, scipy_inv = scipy_forward(scipy.linalg.inv, _inv_on_device)


@functools.cache
def _inv_diagonal_keeps_off_diagonal() -> bool:
    """Whether this SciPy's ``inv(a, assume_a="diagonal")`` returns ``a``'s off-diagonal
    entries unchanged beside the inverted diagonal (SciPy 1.17 does), rather than zeros."""
    try:
        out = scipy.linalg.inv(np.array([[2.0, 3.0], [5.0, 4.0]]), assume_a="diagonal")
    except (TypeError, ValueError):  # a SciPy without the option
        return False
    return bool(out[0, 1] == 3.0)


def _scipy_inv_vjp(g, ans, a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    _check_structure(assume_a)
    n = np.shape(a)[-1]
    if assume_a == "diagonal":
        # The derivative of what SciPy returns: the inverse of the diagonal, and (where
        # this SciPy keeps them) the off-diagonal entries of a passed through.
        eye = _eye(n, g)
        ga = _project_structure(_inv_vjp(g, ans * eye, a), n, assume_a, lower)
        return ga + g * (1.0 - eye) if _inv_diagonal_keeps_off_diagonal() else ga
    return _project_structure(_inv_vjp(g, ans, a), n, assume_a, lower)


register(
    Rule(
        "scipy.linalg.inv",
        _scipy_inv,
        vjps={0: _scipy_inv_vjp},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 3, 3), kind="wellcond"),)),
            Case((Arg((3, 3), kind="wellcond"),), {"assume_a": "upper triangular"}),
            Case((Arg((3, 3), kind="wellcond"),), {"assume_a": "diagonal"}),
        ),
        convention="as scipy.linalg.solve for assume_a",
        family="linalg",
        structure=DENSE,
    ),
    scipy.linalg.inv,
    scipy_inv,
)


_scipy_det, scipy_det = scipy_forward(scipy.linalg.det, _det_on_device)
register(
    Rule(
        "scipy.linalg.det",
        _scipy_det,
        vjps={0: lambda g, ans, a, overwrite_a=False, check_finite=True: _det_vjp(g, ans, a)},
        cases=(Case((Arg((3, 3), kind="wellcond"),)), Case((Arg((2, 2, 2)),))),
        convention=_DET_CONVENTION,
        family="linalg",
        structure=DENSE,
    ),
    scipy.linalg.det,
    scipy_det,
)


# ----------------------------------------------------------------------------- eigh
EIGH_GRADIENTS = ("triangle", "symmetric")


def _scipy_eigh(
    a,
    b=None,
    *,
    lower=True,
    eigvals_only=False,
    overwrite_a=False,
    overwrite_b=False,
    check_finite=True,
    gradient="triangle",
):
    """``scipy.linalg.eigh`` of the standard problem, never overwriting ``a``.

    ``gradient`` picks the convention of the derivative (the values do not depend on it).
    """
    if b is not None:
        raise NotImplementedError(
            "funcdiff.linalg.eigh: the generalized problem (b given) has no derivative "
            "rule; only b=None is supported"
        )
    if not isinstance(gradient, str) or gradient not in EIGH_GRADIENTS:
        raise ValueError(
            f"funcdiff.linalg.eigh: gradient must be 'triangle' or 'symmetric', got {gradient!r}"
        )
    try:
        return scipy.linalg.eigh(
            a, lower=lower, eigvals_only=eigvals_only, check_finite=check_finite
        )
    except TypeError:  # a backend array (CuPy): numpy.linalg reads the same triangle
        if first_foreign((a,)) is None:
            raise
        uplo = "L" if lower else "U"
        return (
            np.linalg.eigvalsh(a, UPLO=uplo)
            if eigvals_only
            else tuple(np.linalg.eigh(a, UPLO=uplo))
        )


scipy_eigh = dispatching_nested(_scipy_eigh)


def _scipy_eigh_vjp(
    g,
    ans,
    a,
    b=None,
    *,
    lower=True,
    eigvals_only=False,
    overwrite_a=False,
    overwrite_b=False,
    check_finite=True,
    gradient="triangle",
):
    if eigvals_only:
        # The vectors come from this rule again, so that higher orders keep the convention.
        _, v = scipy_eigh(a, lower=lower, check_finite=check_finite, gradient=gradient)
        g_sym = _eigvalsh_symmetric_gradient(g, v)
    else:
        g_sym = _eigh_symmetric_gradient(g, ans)
    return _one_triangle(g_sym, bool(lower)) if gradient == "triangle" else g_sym


register(
    Rule(
        "scipy.linalg.eigh",
        _scipy_eigh,
        vjps={0: _scipy_eigh_vjp},
        cases=(
            Case((Arg((3, 3)),), output=_eigh_gauge),
            Case((Arg((3, 3)),), {"lower": False}, output=_eigh_function),
            Case((Arg((2, 3, 3)),), {"eigvals_only": True}),
            Case((Arg((4, 4)),), {"lower": False, "eigvals_only": True}),
            Case(
                (Arg((1, 1), kind="spd"),),
                dict(gradient="symmetric"),
                output=_eigh_gauge,
                note=SYM_NOTE,
            ),
            Case(
                (Arg((1, 1), kind="spd"),),
                dict(gradient="symmetric", eigvals_only=True),
                note=SYM_NOTE,
            ),
        ),
        convention="gradient='triangle' (the default) is the gradient of the function SciPy "
        "computes: on the triangle that lower names (with the diagonal), zero on the other, "
        "so it matches finite differences along any direction; gradient='symmetric': "
        + SYMMETRIC
        + "; "
        + DEGENERATE,
        family="linalg",
        structure=DENSE,
    ),
    scipy.linalg.eigh,
    scipy.linalg.eigvalsh,
    scipy_eigh,
)
