"""``numpy.linalg`` rules: ``inv``, ``solve``, ``det``/``slogdet``, ``cholesky``,
``svd``, ``qr``, ``pinv``, ``lstsq`` and ``matrix_power``.

Every vjp here is written with calls that have rules themselves (``matmul``, ``solve``,
``inv``, ``eigh``, ``solve_triangular`` ...), so each rule is differentiable again under
``create_graph=True``. Cotangents may carry one leading batch axis and matrices their own
stack axes ``(..., n, n)``: products broadcast over both, and where one operand is a
single matrix the batch is folded into one BLAS/LAPACK call (a batch of cotangents
against a 2-D matrix is one GEMM; a batch of right-hand sides against one matrix is one
factorisation).

Conventions (also in each rule's ``convention``)
------------------------------------------------
* Symmetric input (``cholesky``, ``svd``/``pinv`` with ``hermitian=True``,
  ``cho_factor``): NumPy and SciPy read only one triangle. As in torch and JAX the
  gradient is taken with respect to the symmetric matrix that triangle stands for and is
  returned symmetric; it agrees with the entrywise gradient along symmetric
  perturbations and not along one-sided ones.
* ``eigh`` and ``eigvalsh`` differentiate the function NumPy computes: the gradient
  lives on the triangle ``UPLO`` names and is zero on the other (as in HIPS autograd),
  so it agrees with finite differences along every direction. ``funcdiff.linalg.eigh``
  offers the symmetric gradient as well.
* Eigen- and singular-vector gradients contain ``1 / (l_j - l_i)``; for (near-)equal
  values the factor is set to 0 (safe denominators), so results stay finite at every
  order. Gradients that flow through the values alone (spectral functions such as
  ``sum(f(l))``) are exact even then; gradients through the vectors of a repeated value
  are undefined (the decomposition is not differentiable there), and the finite value
  returned leaves out the rotation inside the degenerate subspace.
* ``inv``, ``solve``, ``slogdet``, ``qr`` need invertible (full-rank) inputs; ``det``
  takes the adjugate at singular ones;
  ``pinv`` and ``lstsq`` differentiate the pseudo-inverse at constant rank.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff._core.backends import backend_linalg, first_foreign, on_device_of
from funcdiff._core.lazy import resolved, scipy  # scipy.linalg: imported on first use
from funcdiff._core.registry import Rule, register
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.complex_linalg import (
    SVD_COMPLEX_CASES,
    cholesky_complex_vjp,
    slogdet_complex_vjp,
    svd_complex_vjp,
    svdvals_complex_vjp,
)
from funcdiff.rules.linalg_common import (
    DEGENERATE,
    SYM_NOTE,
    SYMMETRIC,
    det_gradient,
    diag_embed,
    dispatching_nested,
    is_zero_cotangent,
    mm,
    mT,
    numbers_of,
    safe_inverse_gaps,
    safe_reciprocal,
    solution_outer,
    solve_many,
    symmetrize,
)
from funcdiff.rules.structure import DENSE

LinAlgError = np.linalg.LinAlgError


# ----------------------------------------------------------------------------- inv, solve, det
def _inv_vjp(g, ans, a):
    xt = mT(ans)
    return -mm(np.matmul(xt, g), xt)


register(
    Rule(
        "linalg.inv",
        np.linalg.inv,
        vjps={0: _inv_vjp},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 3, 3), kind="wellcond"),)),
            Case((Arg((1, 1), kind="wellcond"),)),
        ),
        convention="needs an invertible matrix",
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
        complex=True,
    ),
    np.linalg.inv,
)


def _linalg_solve(a, b):
    return np.linalg.solve(a, b)


def _solve_vjp_all(needs, g, ans, a, b):
    vector = np.ndim(b) == 1
    gb = solve_many(np.linalg.solve, mT(a), g, vector)
    ga = -solution_outer(gb, ans, vector) if needs[0] else None
    return [ga, gb if needs[1] else None]


register(
    Rule(
        "linalg.solve",
        _linalg_solve,
        vjp_all=_solve_vjp_all,
        cases=(
            Case((Arg((3, 3), kind="wellcond"), Arg((3,)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2)))),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((3,)))),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((2, 3, 2)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((2, 3, 2)))),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((3, 1)))),
        ),
        convention="b is a vector when it is 1-D, else a (stack of) matrices, as in NumPy 2",
        family="linalg",
        structure=DENSE,
        batch=batching.solve,
        complex=True,
    ),
    np.linalg.solve,
)


#: Above this 1-norm condition number ``det(A) A^-T`` loses too many digits: the
#: gradient of ``det`` is then the adjugate, computed without inverting ``A``.
_DET_COND_LIMIT = 1e6
#: Up to this size the adjugate is the cofactor matrix (minors' determinants, exact at
#: every order and every rank); above it, the SVD form (exact at first order).
_COFACTOR_MAX_N = 24
_DET_CONVENTION = (
    "gradient det(A) A^-T; for a singular or ill-conditioned A the adjugate (cofactor "
    "matrix), exact at every order for n <= 24, by the SVD at first order above"
)


def _adjugate_transposed(a):
    """``adj(A)^T``, the gradient of ``det`` at any rank, written with recorded calls.

    For ``n <= 24``: cofactors ``(-1)^(i+j) det(minor_ij)``, a polynomial in ``A`` whose
    derivatives are again ``det`` gradients (of the minors), so every order is exact even
    at singular points. Above: ``det(U) det(V^T) U diag(prod_{j!=i} s_j) V^T`` from the
    SVD, valid at any rank (the products never divide by a singular value).
    """
    shape = tuple(np.shape(a))
    n = shape[-1]
    if n <= 1:
        return np.ones(shape)
    if n <= _COFACTOR_MAX_N:
        keep = np.array([[j for j in range(n) if j != i] for i in range(n)])
        rows = keep[:, None, :, None]
        cols = keep[None, :, None, :]
        minors = a[..., rows, cols]  # (..., n, n, n-1, n-1)
        signs = 1.0 - 2.0 * (np.add.outer(np.arange(n), np.arange(n)) % 2)
        return signs * np.linalg.det(minors)
    u, s, vt = np.linalg.svd(a)
    others = np.where(np.eye(n, dtype=bool), 1.0, np.expand_dims(s, -2))
    products = np.prod(others, axis=-1)  # prod_{j != i} s_j
    sign = np.linalg.det(numbers_of(u)) * np.linalg.det(numbers_of(vt))
    return _expand2(sign) * np.matmul(u * np.expand_dims(products, -2), vt)


def _expand2(x):
    return np.expand_dims(np.expand_dims(x, -1), -1)


def _det_vjp(g, ans, a):
    inv = None
    try:
        with np.errstate(all="ignore"):
            inv = np.linalg.inv(a)
        a_v, inv_v = numbers_of(a), numbers_of(inv)
        if a_v.shape[-1] and not np.all(
            np.linalg.norm(a_v, 1, axis=(-2, -1)) * np.linalg.norm(inv_v, 1, axis=(-2, -1))
            < _DET_COND_LIMIT
        ):
            inv = None
    except LinAlgError:
        pass
    if inv is not None:
        return _expand2(g * ans) * mT(inv)
    return _expand2(g) * _adjugate_transposed(a)


register(
    Rule(
        "linalg.det",
        np.linalg.det,
        vjps={0: _det_vjp},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 2, 2), kind="wellcond"),)),
            Case((Arg((3, 3)),)),
            Case((Arg((1, 1)),)),
        ),
        convention=_DET_CONVENTION,
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
        complex=True,
    ),
    np.linalg.det,
)
register(
    Rule(
        "linalg.slogdet",
        np.linalg.slogdet,
        vjps={0: lambda g, ans, a: det_gradient(a, g[1])},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 3, 3), kind="spd"),)),
            Case((Arg((3, 3)),)),
        ),
        convention=(
            "sign is piecewise constant (zero gradient); d logabsdet = A^-T; a singular A "
            "(logabsdet = -inf) raises LinAlgError"
        ),
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
        complex_vjps={0: slogdet_complex_vjp},
        complex=True,
    ),
    np.linalg.slogdet,
)


# ----------------------------------------------------------------------------- cholesky
def _cholesky_core_vjp(L, gL):
    """Symmetric gradient with respect to A = L L^T for a cotangent gL of lower L."""
    n = np.shape(L)[-1]
    phi = on_device_of(np.tril(np.ones((n, n))) - 0.5 * np.eye(n), L)
    p = np.matmul(mT(L), gL) * phi
    linv = np.linalg.inv(L)
    s = np.matmul(np.matmul(mT(linv), p), linv)
    return symmetrize(s)


def _cholesky_vjp(g, ans, a, upper=False):
    if upper:
        return _cholesky_core_vjp(mT(ans), mT(g))
    return _cholesky_core_vjp(ans, g)


def _cholesky(a, upper=False):
    return np.linalg.cholesky(a, upper=upper) if upper else np.linalg.cholesky(a)


register(
    Rule(
        "linalg.cholesky",
        _cholesky,
        vjps={0: _cholesky_vjp},
        cases=(
            Case((Arg((1, 1), kind="spd"),), note=SYM_NOTE),
            Case((Arg((2, 1, 1), kind="spd"),), {"upper": True}, note=SYM_NOTE),
        ),
        convention=SYMMETRIC,
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
        complex_vjps={0: cholesky_complex_vjp},
        complex=True,
    ),
    np.linalg.cholesky,
)


# ----------------------------------------------------------------------------- svd
def _svd_core_vjp(u, s, vh, gu, gs, gvh, shape):
    """Cotangent of A = U diag(s) Vh (reduced) for cotangents of U, s, Vh (None = zero)."""
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    inner = 0.0
    if gs is not None:
        inner = diag_embed(gs)
    v = mT(vh)
    gv = None if gvh is None else mT(gvh)
    extra = 0.0
    if gu is not None or gv is not None:
        f = safe_inverse_gaps(s, squared=True)
        if gu is not None:
            ju = np.matmul(mT(u), gu)
            inner = inner + f * (ju - mT(ju)) * np.expand_dims(s, -2)
        if gv is not None:
            jv = np.matmul(mT(v), gv)
            inner = inner + np.expand_dims(s, -1) * (f * (jv - mT(jv)))
        sinv = safe_reciprocal(s)
        if gu is not None and m > k:
            ortho = gu - np.matmul(u, ju)
            extra = extra + np.matmul(ortho * np.expand_dims(sinv, -2), vh)
        if gv is not None and n > k:
            ortho = gv - np.matmul(v, jv)
            extra = extra + np.matmul(u * np.expand_dims(sinv, -2), mT(ortho))
    if np.ndim(inner) == 0:
        inner = diag_embed(np.zeros(np.shape(s)))
    return np.matmul(np.matmul(u, inner), vh) + extra


def _svd_vjp(g, ans, a, full_matrices=True, compute_uv=True, hermitian=False):
    shape = np.shape(a)
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    if not compute_uv:
        u, _, vh = np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
        ga = np.matmul(u * np.expand_dims(g, -2), vh)
        return symmetrize(ga) if hermitian else ga
    u, s, vh = ans
    gu, gs, gvh = (None if is_zero_cotangent(x) else x for x in g)
    if full_matrices and m != n:
        # Singular vectors beyond min(M, N) are any orthonormal completion: no gradient.
        if m > n:
            spare = None if gu is None else gu[..., :, k:]
        else:
            spare = None if gvh is None else gvh[..., k:, :]
        if spare is not None and np.any(numbers_of(spare)):
            raise NotImplementedError(
                "the gradient of svd(..., full_matrices=True) of a non-square matrix is "
                "undefined for the singular vectors beyond min(M, N) (any orthonormal "
                "completion is valid); use full_matrices=False"
            )
        if m > n:
            u = u[..., :, :k]
            gu = None if gu is None else gu[..., :, :k]
        else:
            vh = vh[..., :k, :]
            gvh = None if gvh is None else gvh[..., :k, :]
    ga = _svd_core_vjp(u, s, vh, gu, gs, gvh, shape)
    return symmetrize(ga) if hermitian else ga


def _svd_gauge(result):
    u, s, vh = result
    signs = np.sign(u[..., :1, :])
    return u * signs, s, vh * mT(signs)


register(
    Rule(
        "linalg.svd",
        np.linalg.svd,
        vjps={0: _svd_vjp},
        cases=(
            Case((Arg((3, 3)),), output=_svd_gauge),
            Case((Arg((4, 2)),), {"full_matrices": False}, output=_svd_gauge),
            Case((Arg((2, 4)),), {"full_matrices": False}, output=_svd_gauge),
            Case((Arg((2, 3, 2)),), {"full_matrices": False}, output=_svd_gauge),
            Case((Arg((3, 2)),), {"compute_uv": False}),
            Case((Arg((2, 2, 3)),), {"compute_uv": False}),
            Case((Arg((4, 3)),), {"full_matrices": True}, output=lambda r: r[1]),
            Case((Arg((3, 3)),), output=lambda r: np.matmul(r[0] * r[1][..., None, :], r[2])),
        ),
        convention="singular values: U diag(gs) V^T; vectors need full_matrices=False for "
        "non-square input; " + DEGENERATE + "; 1/s for (numerically) zero s is set to 0; "
        "hermitian=True uses the " + SYMMETRIC,
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
        complex_vjps={0: svd_complex_vjp},
        complex_cases=SVD_COMPLEX_CASES,
        complex=True,
    ),
    np.linalg.svd,
)
if hasattr(np.linalg, "svdvals"):
    register(
        Rule(
            "linalg.svdvals",
            np.linalg.svdvals,
            vjps={0: lambda g, ans, x: _svd_vjp(g, ans, x, compute_uv=False)},
            cases=(Case((Arg((3, 2)),)), Case((Arg((2, 3, 3)),))),
            convention="U diag(g) V^T",
            family="linalg",
            structure=DENSE,
            batch=batching.stacked,
            complex_vjps={0: svdvals_complex_vjp},
            complex=True,
        ),
        np.linalg.svdvals,
    )


# ----------------------------------------------------------------------------- qr
def _copy_upper_to_lower(x):
    n = np.shape(x)[-1]
    upper = on_device_of(np.triu(np.ones((n, n))), x)
    return x * upper + mT(x * on_device_of(np.triu(np.ones((n, n)), 1), x))


def _right_solve_upper_t(y, r):
    """``y @ inv(r).T`` for upper-triangular ``r``: a triangular solve, stacks folded."""
    x = solve_many(lambda rr, rhs: solve_triangular(rr, rhs, lower=False), r, mT(y), vector=False)
    return mT(x)


def _qr_square_vjp(q, r, gq, gr):
    """Cotangent of A (m >= n) in the reduced QR A = Q R."""
    nmat = 0.0
    if gr is not None:
        nmat = np.matmul(gr, mT(r))
    if gq is not None:
        nmat = nmat - np.matmul(mT(q), gq)
    y = np.matmul(q, _copy_upper_to_lower(nmat))
    if gq is not None:
        y = y + gq
    return _right_solve_upper_t(y, r)


def _qr_vjp(g, ans, a, mode="reduced"):
    shape = np.shape(a)
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    if mode == "raw":
        raise NotImplementedError("qr(mode='raw') (Householder reflectors) is not differentiable")
    if mode == "r":
        q, r = np.linalg.qr(a)
        gq, gr = None, g
    else:
        q, r = ans
        gq, gr = (None if is_zero_cotangent(x) else x for x in g)
        if mode == "complete" and m > n:
            if gq is not None and np.any(numbers_of(gq[..., :, k:])):
                raise NotImplementedError(
                    "the gradient of qr(mode='complete') is undefined for the columns of Q "
                    "beyond N (any orthonormal completion is valid); use mode='reduced'"
                )
            q = q[..., :, :k]
            r = r[..., :k, :]
            gq = None if gq is None else gq[..., :, :k]
            gr = None if gr is None else gr[..., :k, :]
    if gq is None and gr is None:
        return None
    if m >= n:
        return _qr_square_vjp(q, r, gq, gr)
    # Wide A = [X | Y] with X = Q U square and Y = Q V: V = Q^T Y feeds Q as well.
    y_part = a[..., :, m:]
    u = r[..., :, :m]
    gu = None if gr is None else gr[..., :, :m]
    gv = None if gr is None else gr[..., :, m:]
    if gv is not None:
        extra = np.matmul(y_part, mT(gv))
        gq = extra if gq is None else gq + extra
    gx = _qr_square_vjp(q, u, gq, gu)
    sel_x = on_device_of(np.eye(m, n), gx)
    sel_y = on_device_of(np.eye(n - m, n, m), gx)
    out = np.matmul(gx, sel_x)
    if gv is not None:
        out = out + np.matmul(np.matmul(q, gv), sel_y)
    return out


register(
    Rule(
        "linalg.qr",
        np.linalg.qr,
        vjps={0: _qr_vjp},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((4, 2)),)),
            Case((Arg((2, 4)),)),
            Case((Arg((2, 4, 3)),)),
            Case((Arg((4, 3)),), {"mode": "r"}),
            Case((Arg((4, 2)),), {"mode": "complete"}, output=lambda r: r[1]),
        ),
        convention="modes 'reduced' and 'r' (and 'complete' when M <= N); needs full rank "
        "(R invertible); the gradient follows LAPACK's sign choice for diag(R)",
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
    ),
    np.linalg.qr,
)


# ----------------------------------------------------------------------------- pinv, lstsq
def _pinv_core_vjp(g, x, a):
    """Cotangent of A for X = pinv(A), valid where the rank of A is locally constant."""
    xt = mT(x)
    gt = mT(g)
    t1 = -np.matmul(np.matmul(xt, g), xt)
    y2 = np.matmul(gt, np.matmul(x, xt))
    t2 = y2 - np.matmul(a, np.matmul(x, y2))
    y3 = np.matmul(np.matmul(xt, x), gt)
    t3 = y3 - np.matmul(np.matmul(y3, x), a)
    return t1 + t2 + t3


def _pinv_vjp(g, ans, a, rcond=None, hermitian=False, *, rtol=None):
    ga = _pinv_core_vjp(g, ans, a)
    return symmetrize(ga) if hermitian else ga


register(
    Rule(
        "linalg.pinv",
        np.linalg.pinv,
        vjps={0: _pinv_vjp},
        cases=(
            Case((Arg((4, 2)),)),
            Case((Arg((2, 4)),)),
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 3, 2)),)),
        ),
        convention="derivative of the pseudo-inverse at locally constant rank (full column "
        "or row rank in particular); hermitian=True uses the " + SYMMETRIC,
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
    ),
    np.linalg.pinv,
)


def _lstsq(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)


def _lstsq_vjp_all(needs, g, ans, a, b, rcond=None):
    x, residuals, _rank, s = ans
    gx, gres, _grank, gs = g
    m, n = np.shape(a)
    vector = np.ndim(b) == 1
    if rcond is None:
        rcond = np.finfo(float).eps * max(m, n)
    pa = np.linalg.pinv(a, rcond=rcond)
    bm = np.expand_dims(b, -1) if vector else b
    xm = np.expand_dims(x, -1) if vector else x
    gxm = np.expand_dims(gx, -1) if vector else gx
    r = bm - np.matmul(a, xm)
    gb = np.matmul(mT(pa), gxm)
    ga = None
    if needs[0]:
        ga = _pinv_like_solution_vjp(gxm, pa, a, xm, r)
    if np.size(numbers_of(residuals)) and not is_zero_cotangent(gres):
        weighted = 2.0 * r * np.expand_dims(gres, -2)
        gb = gb + weighted
        if needs[0]:
            ga = ga - np.matmul(weighted, mT(xm))
    if needs[0] and not is_zero_cotangent(gs):
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        ga = ga + np.matmul(u * np.expand_dims(gs, -2), vh)
    if vector:
        gb = np.squeeze(gb, -1)
    return [ga, gb if needs[1] else None]


def _pinv_like_solution_vjp(gx, pa, a, x, r):
    """Cotangent of A in x = pinv(A) b (residual r = b - A x), at constant rank."""
    pat = mT(pa)
    t1 = -np.matmul(np.matmul(pat, gx), mT(x))
    t2 = np.matmul(r, mT(np.matmul(np.matmul(pa, pat), gx)))
    proj = gx - np.matmul(pa, np.matmul(a, gx))
    t3 = np.matmul(np.matmul(pat, x), mT(proj))
    return t1 + t2 + t3


register(
    Rule(
        "linalg.lstsq",
        _lstsq,
        vjp_all=_lstsq_vjp_all,
        cases=(
            Case((Arg((5, 3)), Arg((5,)))),
            Case((Arg((5, 2)), Arg((5, 3)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2)))),
            Case((Arg((2, 4)), Arg((2,)))),
            Case((Arg((4, 2)), Arg((4,), diff=False))),
        ),
        convention="x (through the pseudo-inverse, at constant rank), residuals "
        "(||A x - b||^2, present at full column rank with M > N) and singular values are "
        "differentiable; rank is an integer constant",
        family="linalg",
        structure=DENSE,
    ),
    np.linalg.lstsq,
)


# ----------------------------------------------------------------------------- matrix_power
def _matrix_power(a, n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: the exponent n must be an integer, got {n!r}")
    shape = np.shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise LinAlgError(
            f"matrix_power: a must be a (stack of) square matrices, got shape {tuple(shape)}"
        )
    n = int(n)
    if n == 0:
        # The identity, still connected to ``a`` (with a zero gradient), like torch.
        eye = np.broadcast_to(on_device_of(np.eye(shape[-1], dtype=np.result_type(a)), a), shape)
        return np.where(on_device_of(np.ones(shape, dtype=bool), a), eye, a)
    if n < 0:
        a = np.linalg.inv(a)
        n = -n
        if n == 1:
            return a
    if n == 1:
        return np.positive(a)
    result = None
    z = a
    while True:
        if n & 1:
            result = z if result is None else np.matmul(result, z)
        n >>= 1
        if not n:
            return result
        z = np.matmul(z, z)


register(
    Rule(
        "linalg.matrix_power",
        np.linalg.matrix_power,
        impl=_matrix_power,
        cases=(
            Case((Arg((3, 3), -1.0, 1.0), 3)),
            Case((Arg((3, 3), -1.0, 1.0), 1)),
            Case((Arg((2, 2, 2), -1.0, 1.0), 5)),
            Case((Arg((3, 3), kind="wellcond"), -2)),
            Case((Arg((3, 3), kind="wellcond"), -1)),
            Case((Arg((3, 3)), 0)),
        ),
        convention="repeated squaring of matmul; n < 0 through inv; n = 0 gives the "
        "identity with a zero gradient",
        family="linalg",
        complex=True,
    )
)
register(
    Rule("linalg.matrix_rank", np.linalg.matrix_rank, differentiable=False, family="linalg"),
    np.linalg.matrix_rank,
)


# ----------------------------------------------------------------- scipy.linalg forwards
def scipy_forward(
    scipy_fn: Callable, on_device: Callable | None = None
) -> tuple[Callable, Callable]:
    """The forward of a ``scipy.linalg`` rule and its Tensor-dispatching wrapper.

    The forward is ``scipy_fn`` with SciPy's own parameters, names and positions (so
    the vjps see the call as it was written), except that ``overwrite_a`` and
    ``overwrite_b`` are always passed on as False: a Tensor's data must never change
    behind the recorded graph.

    On a backend array (CuPy), which SciPy's Python code cannot take, the forward runs
    the backend's own ``scipy.linalg`` function of that name if it has one, else
    ``on_device`` (same parameters): the same result from ``numpy.linalg`` functions,
    which NumPy's dispatch sends to the backend. ``on_device`` raises TypeError for
    options it has no exact counterpart for.
    """

    @functools.cache
    def target() -> tuple[Callable, list[str], dict[int, str]]:
        # Looked up on the first call, so that registering the rule imports no scipy.linalg.
        fn = resolved(scipy_fn)
        names = list(inspect.signature(fn).parameters)
        return fn, names, {i: name for i, name in enumerate(names) if name.startswith("overwrite_")}

    def forward(*args: Any, **kwargs: Any) -> Any:
        fn, names, flags = target()
        if len(args) > min(flags, default=len(names)):
            args = tuple(False if i in flags else a for i, a in enumerate(args))
        for name in flags.values():
            if name in kwargs:
                kwargs[name] = False
        try:
            return fn(*args, **kwargs)
        except TypeError:  # a device array (CuPy): the backend's own scipy.linalg function
            if first_foreign((*args, *kwargs.values())) is None:
                raise
            own = backend_linalg(scipy_fn.__name__, (*args, *kwargs.values()))
            if own is not None:
                return own(*args, **kwargs)
            if on_device is None:
                raise
            return on_device(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = f"_{scipy_fn.__name__}"
    forward.__doc__ = f"``scipy.linalg.{scipy_fn.__name__}``, never overwriting its inputs."
    return forward, dispatching_nested(forward)


# The qr vjp solves with it, so its forward lives here; its rule is in scipy_linalg.py.
_solve_triangular, solve_triangular = scipy_forward(scipy.linalg.solve_triangular)
