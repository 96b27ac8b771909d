"""Norm rules: ``numpy.linalg.norm``, ``vector_norm`` and ``matrix_norm``, with the
primitives they are built from (2-norms, p-norms, the 0-"norm" and singular-value norms).

Norms at zero have gradient 0, and the gradient stays finite at every order (the
double-``where`` trick); ``ord=0`` counts non-zeros and has gradient 0 everywhere. The
inf-norms split the gradient evenly between tied extrema, as ``max`` does. The nuclear
and 2-norms of matrices go through the singular values (``numpy.linalg.svd``'s rule).

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([3.0, 4.0], requires_grad=True)
>>> np.linalg.norm(x).backward()
>>> x.grad
tensor([0.6, 0.8])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from funcdiff._core.backends import on_device_of
from funcdiff._core.registry import (
    FUNCTION_RULES,
    Rule,
    dispatching,
    register,
)
from funcdiff.rules import (
    batching,
    linalg,  # noqa: F401  (registers numpy.linalg.svd's rule, read below)
)
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.reductions import _TIES, _count, expand_reduced, normalize_axes
from funcdiff.rules.structure import axis_argument, reduction


# ---------------------------------------------------------------- norms
@dispatching
def _norm2(x, axis, keepdims):
    """The Euclidean (Frobenius) norm over ``axis``: NumPy's value, a safe gradient."""
    return np.linalg.norm(x, axis=axis, keepdims=keepdims)


def _norm2_vjp(g, ans, x, axis, keepdims):
    n = expand_reduced(ans, ans, x, axis, keepdims)
    positive = n != 0  # not n > 0: a NaN norm must give a NaN gradient
    ge = expand_reduced(g, ans, x, axis, keepdims)
    return np.where(positive, ge * x / np.where(positive, n, 1.0), 0.0)


@dispatching
def _pnorm(x, p, axis, keepdims):
    """The vector p-norm along ``axis`` for a finite ``p`` other than 0, 1 and 2."""
    return np.linalg.norm(x, p, axis=axis, keepdims=keepdims)


def _pnorm_vjp(g, ans, x, p, axis, keepdims):
    # d|x|_p / dx_i = sign(x_i) (|x_i| / |x|_p)^(p-1); the ratio form cannot overflow.
    n = expand_reduced(ans, ans, x, axis, keepdims)
    size = np.abs(x)
    ok = (size != 0) & (n != 0)  # NaN entries stay NaN
    ratio = np.where(ok, size, 1.0) / np.where(ok, n, 1.0)
    ge = expand_reduced(g, ans, x, axis, keepdims)
    return np.where(ok, ge * np.sign(x) * ratio ** (float(p) - 1.0), 0.0)


@dispatching
def _norm0(x, axis, keepdims):
    """The number of non-zero entries along ``axis`` (NumPy's ``ord=0``)."""
    return np.linalg.norm(x, 0, axis=axis, keepdims=keepdims)


@dispatching
def _svnorm(x, kind, axes, keepdims):
    """A norm of the singular values of the matrices spanned by ``axes``.

    ``kind`` is ``"nuc"`` (their sum), ``2`` (the largest) or ``-2`` (the smallest).
    """
    return np.linalg.norm(x, kind, axis=axes, keepdims=keepdims)


def _svnorm_vjp(g, ans, x, kind, axes, keepdims):
    # The gradient of a singular value s_i is u_i v_i^T. Singular values below the
    # numerical-rank tolerance count as zero and get gradient 0 (like abs'(0) = 0): the
    # nuclear norm then gets its minimum-norm subgradient, and every norm is 0 at 0.
    m = np.moveaxis(x, axes, (-2, -1))
    u, s, vh = np.linalg.svd(m, full_matrices=False)
    rows, cols = np.shape(m)[-2:]
    tol = np.max(s, axis=-1, keepdims=True) * (max(rows, cols) * np.finfo(float).eps)
    live = s > tol
    if kind == "nuc":
        pick = live
    else:
        k = s.shape[-1]
        first = on_device_of(np.arange(k) == (0 if kind == 2 else k - 1), s)
        pick = live & first
    d = np.matmul(u * pick[..., None, :], vh)
    d = np.moveaxis(d, (-2, -1), axes)
    return expand_reduced(g, ans, x, axes, keepdims) * d


# Complex vjps (functions of conj(z)): the real formulas on conj(x), or conjugated.
def _norm2_complex_vjp(g, ans, x, axis, keepdims):
    return _norm2_vjp(g, ans, np.conjugate(x), axis, keepdims)


def _pnorm_complex_vjp(g, ans, x, p, axis, keepdims):
    # d|x|_p: conj(x_i) / |x_i| (|x_i| / |x|_p)^(p-1), in the ratio form of the real rule.
    n = expand_reduced(ans, ans, x, axis, keepdims)
    size = np.abs(x)
    ok = (size != 0) & (n != 0)
    ratio = np.where(ok, size, 1.0) / np.where(ok, n, 1.0)
    phase = np.conjugate(x) / np.where(ok, size, 1.0)
    ge = expand_reduced(g, ans, x, axis, keepdims)
    return np.where(ok, ge * phase * ratio ** (float(p) - 1.0), 0.0)


def _svnorm_complex_vjp(g, ans, x, kind, axes, keepdims):
    # d s_i = Re(u_i^H dA v_i): torch's gradient u_i v_i^H, conjugated.
    return np.conjugate(_svnorm_vjp(g, ans, x, kind, axes, keepdims))


def _svnorm_axes(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
    """The two axes of the matrices whose singular values ``svnorm`` reads."""
    axes = args[2] if len(args) > 2 else (-2, -1)
    return tuple(int(a) % ndim for a in axes)


register(
    Rule(
        "norm2",
        _norm2.__wrapped__,
        vjps={0: _norm2_vjp},
        nondiff_args=frozenset({1, 2}),
        cases=(
            Case((Arg((4,)), None, False)),
            Case((Arg((3, 4)), 1, True)),
            Case((Arg((2, 3, 4)), (0, 2), False)),
        ),
        convention="gradient 0 at 0 (finite at every order)",
        family="reductions",
        structure=reduction("nonlinear"),
        # np.linalg.norm takes one or two axes: axis=None flattens each example.
        batch=batching.shift_axis(1, tuples=False, keepdims=2),
        complex=True,
        complex_vjps={0: _norm2_complex_vjp},
    ),
    _norm2,
)
register(
    Rule(
        "pnorm",
        _pnorm.__wrapped__,
        vjps={0: _pnorm_vjp},
        nondiff_args=frozenset({1, 2, 3}),
        cases=(Case((Arg((4,)), 3, 0, False)), Case((Arg((3, 4)), -1.5, 1, True))),
        convention="gradient 0 at 0 and at zero entries (finite at every order)",
        family="reductions",
        structure=reduction("nonlinear", axis_argument(2)),
        # np.linalg.norm takes one or two axes: axis=None flattens each example.
        batch=batching.shift_axis(2, tuples=False, keepdims=3),
        complex=True,
        complex_vjps={0: _pnorm_complex_vjp},
    ),
    _pnorm,
)
register(
    Rule(
        "norm0",
        _norm0.__wrapped__,
        vjps={0: lambda g, ans, x, axis, keepdims: expand_reduced(g, ans, x, axis, keepdims) * 0.0},
        nondiff_args=frozenset({1, 2}),
        cases=(Case((Arg((4,)), 0, False)),),
        convention="piecewise constant: gradient 0 everywhere",
        uses_values=False,
        family="reductions",
        structure=reduction("piecewise"),
        # np.linalg.norm takes one or two axes: axis=None flattens each example.
        batch=batching.shift_axis(1, tuples=False, keepdims=2),
        complex=True,
    ),
    _norm0,
)
# Second order through the SVD needs numpy.linalg.svd to have a rule of its own.
_SVD_ORDER = 2 if np.linalg.svd in FUNCTION_RULES else 1
register(
    Rule(
        "svnorm",
        _svnorm.__wrapped__,
        vjps={0: _svnorm_vjp},
        nondiff_args=frozenset({1, 2, 3}),
        cases=(
            Case((Arg((3, 4)), "nuc", (0, 1), False), order=_SVD_ORDER),
            Case((Arg((3, 4)), 2, (0, 1), False), order=_SVD_ORDER),
            Case((Arg((2, 4, 3)), -2, (2, 1), True), order=_SVD_ORDER),
        ),
        convention="singular values below the numerical-rank tolerance get gradient 0; "
        "a repeated extreme singular value gets the gradient of LAPACK's singular pair",
        family="reductions",
        structure=reduction("nonlinear", _svnorm_axes),
        complex=True,
        complex_vjps={0: _svnorm_complex_vjp},
    ),
    _svnorm,
)

_INF = float("inf")


def _abs_distinct(shape: tuple[int, ...]) -> Arg:
    """Entries whose absolute values are distinct and away from 0: no kink of abs or of
    a tie is within a finite-difference step (the range is deliberately lopsided)."""
    return Arg(shape, -1.73, 2.31, kind="distinct")


def _vector_norm(x: Any, ord: Any, axis: int, keepdims: bool) -> Any:
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    if ord is None or ord == 2:
        return _norm2(x, axis, keepdims)
    if ord == _INF:
        return np.max(np.abs(x), axis=axis, keepdims=keepdims)
    if ord == -_INF:
        return np.min(np.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return _norm0(x, axis, keepdims)
    if ord == 1:
        return np.sum(np.abs(x), axis=axis, keepdims=keepdims)
    try:
        p = float(ord)
    except (TypeError, ValueError):
        raise ValueError(f"Invalid norm order {ord!r} for vectors") from None
    return _pnorm(x, p, axis, keepdims)


def _matrix_norm(x: Any, ord: Any, axes: tuple[int, int], keepdims: bool) -> Any:
    rows, cols = axes
    if ord in (None, "fro", "f"):
        return _norm2(x, axes, keepdims)
    if ord in ("nuc", 2, -2):
        return _svnorm(x, ord, axes, keepdims)
    if ord in (1, -1, _INF, -_INF):
        # ord 1: the largest column sum of |x|; ord inf: the largest row sum.
        summed, best = (rows, cols) if ord in (1, -1) else (cols, rows)
        extremum = np.max if ord in (1, _INF) else np.min
        sums = np.sum(np.abs(x), axis=summed, keepdims=True)
        result = extremum(sums, axis=best, keepdims=True)
        return result if keepdims else np.squeeze(result, axis=axes)
    raise ValueError(f"Invalid norm order {ord!r} for matrices.")


def _norm(x, ord=None, axis=None, keepdims=False):
    if np.result_type(x).kind not in "fc":
        x = x.astype(float)
    nd = np.ndim(x)
    keepdims = bool(keepdims)
    if axis is None:
        if ord is None:  # the 2-norm of all entries, whatever the dimension
            return _norm2(x, None, keepdims)
        if nd not in (1, 2):
            raise ValueError(
                f"numpy.linalg.norm: ord={ord!r} needs axis= for a {nd}-d array "
                "(without axis the array must be 1-d or 2-d)"
            )
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = (int(axis),)
        except TypeError:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from None
    axes = normalize_axis_tuple(axis, nd, argname="axis")
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError(f"numpy.linalg.norm: axis must name 1 or 2 axes, got {axis!r}")


def _norm_cases() -> tuple[Case, ...]:
    v, m = Arg((5,)), Arg((3, 4))
    svd: dict[str, Any] = {"order": _SVD_ORDER}
    return (
        Case((v,)),
        Case((Arg((2, 3, 4)),)),
        Case((Arg((2, 3, 4)),), {"keepdims": True}),
        Case((v, 1)),
        Case((_abs_distinct((5,)), _INF)),
        Case((_abs_distinct((5,)), -_INF)),
        Case((v, 0)),
        Case((v, 3)),
        Case((v, 0.5)),
        Case((v, -2)),
        Case((m,), {"ord": 2.5, "axis": -1, "keepdims": True}),
        Case((m,), {"axis": 0}),
        Case((m, "fro")),
        Case((Arg((2, 3, 4)), "fro", (2, 0))),
        Case((_abs_distinct((3, 4)), 1)),
        Case((_abs_distinct((3, 4)), -1)),
        Case((_abs_distinct((3, 4)), _INF)),
        Case((_abs_distinct((2, 3, 4)), -_INF, (0, 2), True)),
        Case((m, "nuc"), **svd),
        Case((m, 2), **svd),
        Case((Arg((2, 4, 3)), -2, (-1, 1)), **svd),
        Case((Arg((0,)),)),
    )


_NORM_CONVENTION = (
    "gradient 0 at 0, finite at every order; ord=0 has gradient 0; inf-norms, matrix "
    "1/inf norms: " + _TIES + "; 2/-2/'nuc': singular values below the numerical-rank "
    "tolerance get gradient 0"
)
register(
    Rule(
        "norm",
        np.linalg.norm,
        impl=_norm,
        cases=_norm_cases(),
        convention=_NORM_CONVENTION,
        family="reductions",
        complex=True,
    ),
    np.linalg.norm,
)


def _vector_norm_api(x, /, *, axis=None, keepdims=False, ord=2):
    nd = np.ndim(x)
    axes = normalize_axes(axis, nd)
    if len(axes) == 1:
        return _norm(x, ord, axes[0], keepdims)
    # Several axes form one vector: move them last and merge them.
    rest = tuple(i for i in range(nd) if i not in axes)
    moved = np.transpose(x, rest + axes)
    lead = tuple(np.shape(x)[i] for i in rest)
    flat = np.reshape(moved, lead + (_count(x, axes),))
    result = _norm(flat, ord, -1, False)
    if keepdims:
        result = np.reshape(result, tuple(1 if i in axes else s for i, s in enumerate(np.shape(x))))
    return result


def _matrix_norm_api(x, /, *, keepdims=False, ord="fro"):
    return _norm(x, ord, (-2, -1), keepdims)


for _name, _impl in (("vector_norm", _vector_norm_api), ("matrix_norm", _matrix_norm_api)):
    if hasattr(np.linalg, _name):
        _api = getattr(np.linalg, _name)
        register(
            Rule(
                _name,
                _api,
                impl=_impl,
                cases=(
                    Case((Arg((2, 3, 4)),)),
                    Case((Arg((2, 3, 4)),), {"ord": 3.0, "axis": (0, 2), "keepdims": True}),
                    Case((_abs_distinct((2, 3, 4)),), {"ord": _INF, "axis": 1}),
                )
                if _name == "vector_norm"
                else (
                    Case((Arg((2, 3, 4)),)),
                    Case((_abs_distinct((2, 3, 4)),), {"ord": 1, "keepdims": True}),
                ),
                convention=_NORM_CONVENTION,
                family="reductions",
                complex=True,
            ),
            _api,
        )
