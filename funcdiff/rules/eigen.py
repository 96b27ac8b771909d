"""``numpy.linalg.eigh`` and ``eigvalsh``: the gradient of the function NumPy computes.

NumPy reads one triangle of ``a`` (``UPLO``), so the gradient lives on that triangle and
is zero on the other; its off-diagonal entries are twice those of the symmetric
gradient, because each entry read stands for two entries of the symmetric matrix. The
symmetric convention (torch's, JAX's) is ``funcdiff.linalg.eigh(..., gradient="symmetric")``,
built on the helpers here. The conventions shared with the other decompositions are in
:mod:`funcdiff.rules.linalg`.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> a = fd.tensor([[2.0, 5.0], [1.0, 3.0]], requires_grad=True)
>>> np.sum(np.linalg.eigvalsh(a) ** 2).backward()  # the squared Frobenius norm of sym(a)
>>> bool(np.allclose(a.grad.data, [[4.0, 0.0], [4.0, 6.0]]))  # 2 a_ii; 4 a_ij below
True
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.backends import on_device_of
from funcdiff._core.registry import Rule, register
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.complex_linalg import EIGH_COMPLEX_CASES, eigh_complex_vjp, eigvalsh_complex_vjp
from funcdiff.rules.linalg_common import (
    DEGENERATE,
    diag_embed,
    is_zero_cotangent,
    mT,
    safe_inverse_gaps,
)
from funcdiff.rules.structure import DENSE

# ----------------------------------------------------------------------------- eigh, eigvalsh
_ONE_TRIANGLE = (
    "one-triangle convention: NumPy reads only the triangle UPLO names (with the "
    "diagonal), and the gradient is that of the function NumPy computes: on that "
    "triangle, zero on the other, so it matches finite differences along any direction; "
    "its off-diagonal entries are twice those of the symmetric gradient (funcdiff.linalg."
    "eigh(a, gradient='symmetric') gives the symmetric one)"
)


def _one_triangle(g_sym, lower: bool):
    """The gradient on the triangle that is read, from the symmetric gradient ``g_sym``.

    An entry ``a[i, j]`` of the triangle read (``i > j`` for the lower one) stands for
    both ``A[i, j]`` and ``A[j, i]`` of the symmetric matrix, so it collects both of their
    gradients; the diagonal stands for itself and the other triangle is not read.
    """
    n = np.shape(g_sym)[-1]
    strict = np.tril(np.ones((n, n)), -1) if lower else np.triu(np.ones((n, n)), 1)
    return (g_sym + mT(g_sym)) * on_device_of(strict + 0.5 * np.eye(n), g_sym)


def _reads_lower(uplo) -> bool:
    return str(uplo).upper() == "L"


def _eigh_symmetric_gradient(g, ans):
    """``V (F o sym(V^T gV) + diag(gw)) V^T``: the gradient w.r.t. the symmetric matrix."""
    w, v = ans
    gw, gv = g
    inner = 0.0
    if not is_zero_cotangent(gv):
        p = np.matmul(mT(v), gv)
        inner = safe_inverse_gaps(w) * (p - mT(p)) * 0.5
    if not is_zero_cotangent(gw) or np.ndim(inner) == 0:
        inner = inner + diag_embed(gw)
    return np.matmul(np.matmul(v, inner), mT(v))


def _eigvalsh_symmetric_gradient(g, v):
    """``V diag(g) V^T``, the gradient of the eigenvalues w.r.t. the symmetric matrix."""
    return np.matmul(v * np.expand_dims(g, -2), mT(v))


def _eigh_vjp(g, ans, a, UPLO="L"):  # noqa: N803  (NumPy's parameter name)
    return _one_triangle(_eigh_symmetric_gradient(g, ans), _reads_lower(UPLO))


def _eigvalsh_vjp(g, ans, a, UPLO="L"):  # noqa: N803
    # eigh again (not a stored copy), so that higher orders differentiate the vectors too.
    _, v = np.linalg.eigh(a, UPLO=UPLO)
    return _one_triangle(_eigvalsh_symmetric_gradient(g, v), _reads_lower(UPLO))


def _eigh_gauge(result):
    w, v = result
    return w, v * np.sign(v[..., :1, :])


def _eigh_function(result):
    w, v = result  # V diag(sin w) V^T: independent of the eigenvector signs
    return np.matmul(v * np.sin(w)[..., None, :], mT(v))


# General (non-symmetric) matrices: NumPy reads one triangle, so finite differences of
# its function along every entry check the one-triangle gradient.
register(
    Rule(
        "linalg.eigh",
        np.linalg.eigh,
        vjps={0: _eigh_vjp},
        cases=(
            Case((Arg((3, 3)),), output=_eigh_gauge),
            Case((Arg((4, 4)),), {"UPLO": "U"}, output=_eigh_gauge),
            Case((Arg((2, 3, 3)),), {"UPLO": "U"}, output=_eigh_gauge),
            Case((Arg((3, 3)),), output=_eigh_function),
            Case((Arg((1, 1)),), output=_eigh_gauge),
        ),
        convention=_ONE_TRIANGLE + "; " + DEGENERATE,
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
        complex_vjps={0: eigh_complex_vjp},
        complex_cases=EIGH_COMPLEX_CASES,
        complex=True,
    ),
    np.linalg.eigh,
)
register(
    Rule(
        "linalg.eigvalsh",
        np.linalg.eigvalsh,
        vjps={0: _eigvalsh_vjp},
        cases=(
            Case((Arg((3, 3)),)),
            Case((Arg((2, 4, 4)),), {"UPLO": "U"}),
            Case((Arg((1, 1)),)),
        ),
        convention=_ONE_TRIANGLE,
        family="linalg",
        structure=DENSE,
        batch=batching.stacked,
        complex_vjps={0: eigvalsh_complex_vjp},
        complex=True,
    ),
    np.linalg.eigvalsh,
)
