"""Complex vjps of the decompositions, declared by their rules in ``linalg`` and
``eigen``; and the rules of ``numpy.linalg.eig``/``eigvals``.

Inside a backward pass the cotangent of a complex value is ``dL/dx - i dL/dy``, the
conjugate of torch's gradient (see :mod:`funcdiff._core.registry`). The decompositions
below are not holomorphic (they conjugate: ``A = U S V^H``, ``A = L L^H``, unit-norm
eigenvectors), so each vjp conjugates its cotangents into torch's form, applies the
formula with conjugate transposes, and conjugates the result back. Every step is a
recorded call, so each vjp is differentiable again.

Eigenvectors and singular vectors of complex matrices are defined up to a phase
``e^(i phi)`` per vector. A loss that depends on those phases has no gradient; as torch
does, the vjps refuse it (``RuntimeError``) instead of returning one choice of it.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> a = fd.tensor([[2.0, 1.0j], [0.5, 1.0 + 1.0j]], requires_grad=True)
>>> np.real(np.sum(np.linalg.eigvals(a))).backward()  # the trace's real part
>>> np.round(a.grad.numpy(), 12)
array([[1.+0.j, 0.+0.j],
       [0.+0.j, 1.+0.j]])
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.registry import Rule, dispatching, register
from funcdiff._core.tensor import Tensor
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.linalg_common import (
    DEGENERATE,
    det_gradient,
    diag_embed,
    is_zero_cotangent,
    mT,
    numbers_of,
    safe_inverse_gaps,
    safe_reciprocal,
)
from funcdiff.rules.structure import DENSE

__all__ = [
    "EIGH_COMPLEX_CASES",
    "SVD_COMPLEX_CASES",
    "cholesky_complex_vjp",
    "eigh_complex_vjp",
    "eigvalsh_complex_vjp",
    "slogdet_complex_vjp",
    "svd_complex_vjp",
    "svdvals_complex_vjp",
]


def _mH(a):
    return np.conjugate(mT(a))


def _diagonal(a):
    return np.diagonal(a, axis1=-2, axis2=-1)


def _refuse_phase_dependence(imag_diag, scale, what: str) -> None:
    """Raise when a loss depends on the phases of complex eigen/singular vectors:
    ``imag_diag`` (the imaginary diagonal of ``V^H gV``) must vanish then."""
    size = np.abs(numbers_of(imag_diag))
    if size.size and np.max(size) > 1e-6 * (float(np.max(np.abs(numbers_of(scale)))) + 1e-300):
        raise RuntimeError(
            f"{what}: the vectors of a complex matrix are defined up to a phase e^(i phi) "
            "each, and this loss depends on those phases, so its gradient is undefined "
            "(torch refuses it too). Make the loss invariant to them (abs of the entries, "
            "V diag(f(w)) V^H, ...)."
        )


# ----------------------------------------------------------------------------- slogdet
def slogdet_complex_vjp(g, ans, a):
    # log det = log|det| + i arg: logabsdet is its real part, sign = exp(i Im log det).
    # The cotangent of log det is then g_logabsdet + i Im(sign * g_sign).
    g_sign, g_log = g
    scale = g_log + 1j * np.imag(ans[0] * g_sign) if not is_zero_cotangent(g_sign) else g_log + 0j
    return det_gradient(a, scale)


# ----------------------------------------------------------------------------- cholesky
def cholesky_complex_vjp(g, ans, a, upper=False):
    # upper: U = L^H, so the cotangent of L is that of U conjugate-transposed.
    low, g_low = (_mH(ans), _mH(g)) if upper else (ans, g)
    n = np.shape(low)[-1]
    phi = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    p = np.matmul(_mH(low), np.conjugate(g_low)) * phi  # torch's form from here
    inv = np.linalg.inv(low)
    s = np.matmul(np.matmul(_mH(inv), p), inv)
    return np.conjugate((s + _mH(s)) * 0.5)


# ----------------------------------------------------------------------------- svd
def _svd_core(u, s, vh, gu, gs, gvh):
    """torch's gradient of ``A = U diag(s) Vh`` (reduced) for torch-form cotangents."""
    m, n, k = np.shape(u)[-2], np.shape(vh)[-1], np.shape(s)[-1]
    v = _mH(vh)
    gv = None if gvh is None else _mH(gvh)
    inner = diag_embed(np.zeros(np.shape(s)) if gs is None else gs) + 0j
    extra = 0.0
    if gu is not None or gv is not None:
        f = safe_inverse_gaps(s, squared=True)
        sinv = safe_reciprocal(s)
        ju = None if gu is None else np.matmul(_mH(u), gu)
        jv = None if gv is None else np.matmul(_mH(v), gv)
        phase = 0.0
        if ju is not None:
            inner = inner + f * (ju - _mH(ju)) * np.expand_dims(s, -2)
            phase = phase + np.imag(_diagonal(ju))
        if jv is not None:
            inner = inner + np.expand_dims(s, -1) * (f * (jv - _mH(jv)))
            phase = phase - np.imag(_diagonal(jv))
        if ju is not None and jv is not None:
            both = np.imag(_diagonal(ju)) + np.imag(_diagonal(jv))
            _refuse_phase_dependence(both, np.abs(ju) + np.abs(jv), "svd")
        elif ju is not None:
            _refuse_phase_dependence(np.imag(_diagonal(ju)), np.abs(ju), "svd")
        else:
            _refuse_phase_dependence(np.imag(_diagonal(jv)), np.abs(jv), "svd")
        # The phase of u_k against v_k: half from each side, by the invariance above.
        inner = inner + diag_embed(0.5j * phase * sinv)
        if gu is not None and m > k:
            ortho = gu - np.matmul(u, ju)
            extra = extra + np.matmul(ortho * np.expand_dims(sinv, -2), vh)
        if gv is not None and n > k:
            ortho = gv - np.matmul(v, jv)
            extra = extra + np.matmul(u * np.expand_dims(sinv, -2), _mH(ortho))
    return np.matmul(np.matmul(u, inner), vh) + extra


def svd_complex_vjp(g, ans, a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        raise NotImplementedError(
            "the gradient of svd(..., hermitian=True) of a complex matrix is not "
            "implemented; use hermitian=False (the same factors up to phases)"
        )
    if not compute_uv:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        return np.conjugate(np.matmul(u * np.expand_dims(g, -2), vh))
    u, s, vh = ans
    gu, gs, gvh = (None if is_zero_cotangent(x) else x for x in g)
    shape = np.shape(a)
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    if full_matrices and m != n:
        spare = (gu[..., :, k:] if gu is not None else None) if m > n else None
        if m < n and gvh is not None:
            spare = gvh[..., k:, :]
        if spare is not None and np.any(numbers_of(spare)):
            raise NotImplementedError(
                "the gradient of svd(..., full_matrices=True) of a non-square matrix is "
                "undefined for the singular vectors beyond min(M, N) (any orthonormal "
                "completion is valid); use full_matrices=False"
            )
        if m > n:
            u, gu = u[..., :, :k], None if gu is None else gu[..., :, :k]
        else:
            vh, gvh = vh[..., :k, :], None if gvh is None else gvh[..., :k, :]
    conj = [None if x is None else np.conjugate(x) for x in (gu, gvh)]
    return np.conjugate(_svd_core(u, s, vh, conj[0], gs, conj[1]))


# ----------------------------------------------------------------------------- eigh
def _hermitian_one_triangle(gamma, uplo):
    """The gradient on the triangle NumPy reads, from the cotangent ``gamma`` of the
    Hermitian matrix it stands for: ``a[i, j]`` is ``H[i, j]`` and ``conj(H[j, i])``;
    the diagonal's imaginary part is not read."""
    n = np.shape(gamma)[-1]
    lower = str(uplo).upper() == "L"
    strict = np.tril(np.ones((n, n)), -1) if lower else np.triu(np.ones((n, n)), 1)
    return (gamma + _mH(gamma)) * (strict + 0.5 * np.eye(n))


def eigh_complex_vjp(g, ans, a, UPLO="L"):  # noqa: N803  (NumPy's parameter name)
    w, v = ans
    gw, gv = g
    inner = 0.0
    if not is_zero_cotangent(gv):
        p = np.matmul(mT(v), gv)
        _refuse_phase_dependence(np.imag(_diagonal(p)), p, "eigh")
        inner = safe_inverse_gaps(w) * (p - _mH(p)) * 0.5
    if not is_zero_cotangent(gw) or np.ndim(inner) == 0:
        inner = inner + diag_embed(gw)
    gamma = np.matmul(np.matmul(np.conjugate(v), inner), mT(v))
    return _hermitian_one_triangle(gamma, UPLO)


def eigvalsh_complex_vjp(g, ans, a, UPLO="L"):  # noqa: N803
    _, v = np.linalg.eigh(a, UPLO=UPLO)  # recomputed, so that higher orders see it
    gamma = np.matmul(np.conjugate(v) * np.expand_dims(g, -2), mT(v))
    return _hermitian_one_triangle(gamma, UPLO)


def _eigh_function(result):
    w, v = result  # V diag(sin w) V^H: independent of the eigenvectors' phases
    return np.matmul(v * np.sin(w)[..., None, :], _mH(v))


def _svd_function(result):
    u, s, vh = result  # U diag(sin s) Vh: the phases of u_k and v_k cancel
    return np.matmul(u * np.sin(s)[..., None, :], vh)


def _svd_moduli(result):
    u, s, vh = result  # |U|^2 and |Vh|^2 entrywise: phase-free, one side at a time
    return np.abs(u) ** 2, np.abs(vh) ** 2


_C = "complex"
#: Complex test points of ``linalg.eigh`` and ``linalg.svd``, whose real cases map their
#: outputs (gauges): the phases of complex vectors need maps of their own.
EIGH_COMPLEX_CASES = (
    Case((Arg((3, 3), kind=_C),), output=_eigh_function),
    Case((Arg((2, 3, 3), kind=_C),), {"UPLO": "U"}, output=_eigh_function),
    Case((Arg((4, 4), kind=_C),), output=lambda r: r[0]),
    Case((Arg((3, 3), kind=_C),), output=lambda r: np.abs(r[1]) ** 2),
)
SVD_COMPLEX_CASES = (
    Case((Arg((3, 3), kind=_C),), output=_svd_function),
    Case((Arg((4, 2), kind=_C),), {"full_matrices": False}, output=_svd_function),
    Case((Arg((2, 3, 4), kind=_C),), {"full_matrices": False}, output=_svd_function),
    Case((Arg((3, 2), kind=_C),), {"full_matrices": False}, output=_svd_moduli),
    Case((Arg((2, 3), kind=_C),), {"full_matrices": False}, output=_svd_moduli),
    Case((Arg((3, 3), kind=_C),), output=lambda r: r[1]),
)


def svdvals_complex_vjp(g, ans, x):
    return svd_complex_vjp(g, ans, x, compute_uv=False)


# ----------------------------------------------------------------------------- eig
def _eig_core(w, v, gw, gv):
    """The cotangent of ``A`` for cotangents ``gw``/``gv`` of ``A V = V diag(w)`` with
    unit-norm columns (NumPy's normalisation), via torch's form."""
    tw = None if gw is None else np.conjugate(gw)
    inner = 0.0
    vh = _mH(v)
    if gv is not None:
        vhgv = np.matmul(vh, np.conjugate(gv))
        _refuse_phase_dependence(np.imag(_diagonal(vhgv)), vhgv, "eig")
        # The unit norm of each column removes its real diagonal part.
        unit = np.matmul(vh, v * np.expand_dims(np.real(_diagonal(vhgv)), -2))
        inner = (vhgv - unit) * safe_inverse_gaps(np.conjugate(w))
    if tw is not None or np.ndim(inner) == 0:
        inner = inner + diag_embed(np.zeros(np.shape(w)) if tw is None else tw)
    return np.conjugate(np.linalg.solve(vh, np.matmul(inner, vh)))


def _eig_vjp(g, ans, a):
    w, v = ans
    gw, gv = (None if is_zero_cotangent(x) else x for x in g)
    return _eig_core(w, v, gw, gv)


def _eigvals_vjp(g, ans, a):
    w, v = _eig(a)  # recomputed, so that higher orders see the vectors
    if not np.allclose(numbers_of(w), numbers_of(ans), rtol=1e-10, atol=0.0):
        raise RuntimeError(
            "the gradient of numpy.linalg.eigvals needs the eigenvectors, and "
            "numpy.linalg.eig returned the eigenvalues in another order; use eig"
        )
    return _eig_core(w, v, g, None)


def _eig_function(result):
    w, v = result  # V diag(sin w) V^-1 = sin(A): independent of the eigenvectors' scale
    return np.matmul(v * np.sin(w)[..., None, :], np.linalg.inv(v))


#: The named tuple NumPy's eig returns (``.eigenvalues``, ``.eigenvectors``).
EigResult = type(np.linalg.eig(np.eye(1)))

_EIG = (
    "unit-norm eigenvectors (NumPy's); a loss that depends on their phases raises, as in "
    "torch; " + DEGENERATE + "; a real matrix gets a real gradient (the real part)"
)


def _complex(x):
    return x.astype(np.result_type(x, np.complex64), copy=False)


@dispatching
def _eig(a):
    """``numpy.linalg.eig`` with complex results always (a dtype that does not depend on
    the values, as a primitive's must); the composite below makes them NumPy's."""
    w, v = np.linalg.eig(a)
    return _complex(w), _complex(v)


@dispatching
def _eigvals(a):
    return _complex(np.linalg.eigvals(a))


def _is_real(a, w) -> bool:
    """NumPy's choice: real results for a real matrix whose eigenvalues are all real.
    Computed with recorded calls, so a traced or prepared program (funcdiff.replay,
    funcdiff.sparse) guards on it like on any branch."""
    dtype = a.dtype if isinstance(a, Tensor) else np.result_type(a)
    return dtype.kind != "c" and bool(np.all(np.imag(w) == 0))


def _eig_composite(a):
    w, v = _eig(a)
    if _is_real(a, w):
        w, v = np.real(w), np.real(v)
    return EigResult(w, v)


def _eigvals_composite(a):
    w = _eigvals(a)
    return np.real(w) if _is_real(a, w) else w


_EIG_CASES = (
    Case((Arg((3, 3)),), output=lambda r: r[0]),
    Case((Arg((2, 3, 3)),), output=lambda r: r[0]),
    Case((Arg((3, 3)),), output=_eig_function),
    Case((Arg((3, 3), kind="complex"),), output=lambda r: r[0]),
    Case((Arg((3, 3), kind="complex"),), output=_eig_function),
    Case((Arg((1, 1), kind="complex"),), output=_eig_function),
)
_EIGVALS_CASES = (Case((Arg((3, 3)),)), Case((Arg((2, 3, 3)),)))
register(
    Rule(
        "linalg.eig",
        _eig.__wrapped__,
        vjps={0: _eig_vjp},
        cases=_EIG_CASES[:3],
        complex_cases=_EIG_CASES[3:],
        convention=_EIG,
        family="linalg",
        complex=True,
        structure=DENSE,
        batch=batching.stacked,
    ),
    _eig,
)
register(
    Rule(
        "linalg.eigvals",
        _eigvals.__wrapped__,
        vjps={0: _eigvals_vjp},
        cases=_EIGVALS_CASES,
        complex_cases=(Case((Arg((3, 3), kind="complex"),)),),
        convention=_EIG,
        family="linalg",
        complex=True,
        structure=DENSE,
        batch=batching.stacked,
    ),
    _eigvals,
)
register(
    Rule(
        "eig",
        np.linalg.eig,
        impl=_eig_composite,
        cases=_EIG_CASES[:1],
        complex_cases=_EIG_CASES[3:4],
        convention=_EIG,
        family="linalg",
        complex=True,
    ),
    np.linalg.eig,
)
register(
    Rule(
        "eigvals",
        np.linalg.eigvals,
        impl=_eigvals_composite,
        cases=_EIGVALS_CASES[:1],
        complex_cases=(Case((Arg((3, 3), kind="complex"),)),),
        convention=_EIG,
        family="linalg",
        complex=True,
    ),
    np.linalg.eigvals,
)
