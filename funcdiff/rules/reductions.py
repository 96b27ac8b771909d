"""Reductions: sums, products, extrema, moments, averages and traces.

A reduction's cotangent has the reduced shape; :func:`expand_reduced` puts the reduced
axes back as length-one axes (after any batch axis), and the engine broadcasts the
result to the input's shape.

Every forward is a small wrapper with NumPy's own parameter names, so a keyword that
funcdiff does not differentiate (``out=``, ``where=``, ``initial=``) raises a
``TypeError`` that names it instead of giving a wrong gradient.

Conventions at kinks and degeneracies (the ``convention`` field of each rule):

* ``max``/``min`` (and ``amax``, ``amin``, ``ptp``, the inf-norms): the gradient is
  split evenly between tied extrema; if the result is NaN it goes to the NaN entries.
* ``prod`` and ``cumprod`` are exact with zeros, at every order: they never divide by
  the input (exclusive products and a division-free linear recurrence instead).
* ``std`` at zero variance has gradient 0 (the one-sided derivatives are infinite).
* norms at zero have gradient 0, and the gradient stays finite at every order (the
  double-``where`` trick); ``ord=0`` counts non-zeros and has gradient 0 everywhere.
* ``nansum``/``nanmean``/``nanprod``/``nanmax``/``nanmin`` give NaN entries gradient 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from funcdiff._core.arrays import anywhere
from funcdiff._core.backends import on_device_of
from funcdiff._core.registry import (
    Rule,
    batch_ndim,
    register,
)
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.scans import _flip_last, _unsupported, shift_last
from funcdiff.rules.structure import reduction

__all__ = [
    "normalize_axes",
    "expand_reduced",
    "reduction_cases",
]

_NOVALUE: Any = np._NoValue


# ---------------------------------------------------------------- helpers
def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative axes.

    Raises NumPy's ``AxisError`` for an axis out of range and ``ValueError`` for a
    repeated axis.

    Examples
    --------
    >>> normalize_axes((-1, 0), 3)
    (0, 2)
    >>> normalize_axes(None, 2)
    (0, 1)
    """
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(normalize_axis_tuple(axis, ndim, argname="axis")))


def expand_reduced(g: Any, ans: Any, x: Any, axis: Any, keepdims: bool = False) -> Any:
    """Reshape a reduction's cotangent ``g`` so it broadcasts against ``x`` (batch kept).

    Examples
    --------
    >>> x = np.ones((2, 3))
    >>> expand_reduced(np.ones(3), np.ones(3), x, 0).shape
    (1, 3)
    >>> expand_reduced(np.ones((4, 3)), np.ones(3), x, 0).shape  # a batch of 4
    (4, 1, 3)
    """
    if _keepdims(keepdims):
        return g
    nb = batch_ndim(g, ans)
    shape = list(np.shape(x))
    for a in normalize_axes(axis, len(shape)):
        shape[a] = 1
    return np.reshape(g, tuple(np.shape(g)[:nb]) + tuple(shape))


def _keepdims(keepdims: Any) -> bool:
    return False if keepdims is _NOVALUE else bool(keepdims)


def _count(x: Any, axis: Any) -> int:
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in normalize_axes(axis, len(shape))]))


def reduction_cases() -> tuple[Case, ...]:
    """Test points for an axis reduction: all axes, one axis, negative axis, a tuple of
    axes, keepdims, a 0-d input and an empty input."""
    return (
        Case((Arg((3, 4)),)),
        Case((Arg((3, 4)),), {"axis": 0}),
        Case((Arg((2, 3, 4)),), {"axis": -1, "keepdims": True}),
        Case((Arg((2, 3, 4)),), {"axis": (0, 2)}),
        Case((Arg((2, 3, 4)),), {"axis": (-1, 0), "keepdims": True}),
        Case((Arg(()),)),
        Case((Arg((3, 0)),), {"axis": 0}),
    )


# ---------------------------------------------------------------- sum and mean
def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NOVALUE, where=True):
    _unsupported("sum", out=out, where=where)
    if initial is not _NOVALUE:  # an additive constant: the gradient does not change
        return np.sum(a, axis=axis, dtype=dtype, keepdims=_keepdims(keepdims), initial=initial)
    return np.sum(a, axis=axis, dtype=dtype, keepdims=_keepdims(keepdims))


def _sum_vjp(g, ans, a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    return expand_reduced(g, ans, a, axis, keepdims)


def _sum_jvp(t, ans, a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    nb = batch_ndim(t, a)
    axes = tuple(nb + k for k in normalize_axes(axis, np.ndim(a)))
    # The method, not np.sum: its argument handling costs more than a small sum.
    return t.sum(axis=axes, keepdims=_keepdims(keepdims))


def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    _unsupported("mean", out=out, where=where)
    return np.mean(a, axis=axis, dtype=dtype, keepdims=_keepdims(keepdims))


def _mean_vjp(g, ans, a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    # max(n, 1): an empty slice has an empty gradient, and no 0/0 on the way there.
    return expand_reduced(g, ans, a, axis, keepdims) / max(_count(a, axis), 1)


register(
    Rule(
        "sum",
        _sum,
        vjps={0: _sum_vjp},
        jvps={0: _sum_jvp},
        cases=reduction_cases() + (Case((Arg((2, 3)),), {"axis": 1, "initial": 2.0}),),
        uses_values=False,
        family="reductions",
        structure=reduction("linear"),
        complex=True,
    ),
    np.sum,
)
register(
    Rule(
        "mean",
        _mean,
        vjps={0: _mean_vjp},
        cases=reduction_cases(),
        uses_values=False,
        family="reductions",
        structure=reduction("linear"),
        complex=True,
    ),
    np.mean,
)


# ---------------------------------------------------------------- prod
def _exclusive_products(x: Any, axis: Any) -> Any:
    """For each entry, the product of the *other* entries of its reduced slice.

    Built from cumulative products from both ends, so zeros are exact (one zero: only
    its own entry is non-zero; two zeros: everything is zero) and, since ``cumprod`` is
    itself a rule, the result is differentiable to any order.
    """
    nd = np.ndim(x)
    axes = normalize_axes(axis, nd)
    if not axes:
        return on_device_of(np.ones(np.shape(x)), x)
    keep = tuple(i for i in range(nd) if i not in axes)
    perm = keep + axes
    xt = np.transpose(x, perm)
    tshape = np.shape(xt)
    flat = np.reshape(xt, tshape[: len(keep)] + (_count(x, axis),))
    left = shift_last(np.cumprod(flat, axis=-1), 1, 1.0)
    right = _flip_last(shift_last(np.cumprod(_flip_last(flat), axis=-1), 1, 1.0))
    others = np.reshape(left * right, tshape)
    return np.transpose(others, tuple(np.argsort(perm)))


def _prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NOVALUE, where=True):
    _unsupported("prod", out=out, initial=initial, where=where)
    return np.prod(a, axis=axis, dtype=dtype, keepdims=_keepdims(keepdims))


def _prod_vjp(g, ans, a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    return expand_reduced(g, ans, a, axis, keepdims) * _exclusive_products(a, axis)


register(
    Rule(
        "prod",
        _prod,
        vjps={0: _prod_vjp},
        cases=reduction_cases() + (Case((Arg((5,), 0.5, 1.5),)),),
        convention="exact with zeros at every order: the gradient is the product of the "
        "other entries (exclusive products), never ans / x",
        family="reductions",
        structure=reduction("nonlinear"),
        complex=True,
    ),
    np.prod,
)


# ---------------------------------------------------------------- max and min
def _tie_weights(a: Any, ans: Any, axis: Any, keepdims: bool, skip_nan: bool = False) -> Any:
    """1/k on each of the k entries that attain the extremum of their slice, else 0.

    A constant (comparisons never record). A NaN result sends the gradient to the NaN
    entries (``max``), or nowhere (``nanmax`` of an all-NaN slice).
    """
    at = expand_reduced(ans, ans, a, axis, keepdims)
    hit = a == at
    if not skip_nan:
        hit = hit | (np.isnan(a) & np.isnan(at))
    count = np.sum(hit, axis=axis, keepdims=True)
    return hit / np.maximum(count, 1)


def _extremum(name: str, func: Any) -> Any:
    """The forward of ``max``/``min``/``nanmax``/``nanmin``: ``func`` with NumPy's
    signature, refusing ``out``, ``initial`` and ``where``."""

    def forward(a, axis=None, out=None, keepdims=False, initial=_NOVALUE, where=True):
        _unsupported(name, out=out, initial=initial, where=where)
        return func(a, axis=axis, keepdims=_keepdims(keepdims))

    forward.__name__ = forward.__qualname__ = f"_{name}"
    return forward


def _extremum_vjp(skip_nan: bool) -> Any:
    """The vjp of an extremum: ``g`` split evenly over the entries that attain it
    (``skip_nan``: NaN entries never attain it, as in ``nanmax``)."""

    def vjp(g, ans, a, axis=None, out=None, keepdims=False, initial=None, where=True):
        ge = expand_reduced(g, ans, a, axis, keepdims)
        return ge * _tie_weights(a, ans, axis, keepdims, skip_nan)

    return vjp


def _extremum_cases() -> tuple[Case, ...]:
    return (
        Case((Arg((3, 4), kind="distinct"),)),
        Case((Arg((3, 4), kind="distinct"),), {"axis": 0}),
        Case((Arg((2, 3, 4), kind="distinct"),), {"axis": -1, "keepdims": True}),
        Case((Arg((2, 3, 4), kind="distinct"),), {"axis": (0, 2)}),
        Case((Arg(()),)),
        Case((Arg((3, 0)),), {"axis": 0}),
    )


_TIES = "ties split the gradient evenly: each of k tied extrema gets g / k"
for _name, _func, _keys in (
    ("max", np.max, (np.max, np.amax)),
    ("min", np.min, (np.min, np.amin)),
):
    register(
        Rule(
            _name,
            _extremum(_name, _func),
            vjps={0: _extremum_vjp(skip_nan=False)},
            cases=_extremum_cases(),
            convention=_TIES + "; a NaN result sends it to the NaN entries",
            family="reductions",
            structure=reduction("piecewise"),
        ),
        *_keys,
    )


def _ptp(a, axis=None, out=None, keepdims=False):
    _unsupported("ptp", out=out)
    keepdims = _keepdims(keepdims)
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


register(
    Rule(
        "ptp",
        np.ptp,
        impl=_ptp,
        cases=_extremum_cases()[:5],
        convention=_TIES + " (max and min separately)",
        family="reductions",
    ),
    np.ptp,
)


# ---------------------------------------------------------------- var and std
def _dof(a: Any, axis: Any, ddof: Any, correction: Any) -> Any:
    return _count(a, axis) - (ddof if correction is _NOVALUE else correction)


def numpy_moment(name: str, body: Any) -> Any:
    """A function with the signature of ``numpy.var`` (``std``, ``nanvar``, ``nanstd``)
    that refuses the options funcdiff does not differentiate (``out=``, ``mean=``, a
    ``where`` mask) and returns ``body(a, axis, dtype, ddof, keepdims)``, with ``ddof``
    taken from ``correction`` where that is given, as NumPy does."""

    def forward(
        a,
        axis=None,
        dtype=None,
        out=None,
        ddof=0,
        keepdims=False,
        *,
        where=True,
        mean=_NOVALUE,
        correction=_NOVALUE,
    ):
        _unsupported(name, out=out, where=where, mean=mean)
        if correction is not _NOVALUE:
            if ddof != 0:
                raise ValueError("ddof and correction can't be provided simultaneously.")
            ddof = correction
        return body(a, axis, dtype, ddof, keepdims)

    forward.__name__ = forward.__qualname__ = f"_{name}"
    return forward


def _moment(name: str, numpy_fn: Any, cotangent: Any) -> tuple[Any, Any]:
    """The forward and the vjp of ``var`` or ``std``, with NumPy's parameters.

    ``cotangent(ge, ans, a, axis, keepdims, centered, dof)`` gives the vjp from the
    expanded cotangent ``ge``, the centered input and the degrees of freedom.
    """

    def body(a, axis, dtype, ddof, keepdims):
        return numpy_fn(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=_keepdims(keepdims))

    forward = numpy_moment(name, body)

    def vjp(
        g,
        ans,
        a,
        axis=None,
        dtype=None,
        out=None,
        ddof=0,
        keepdims=False,
        *,
        where=True,
        mean=None,
        correction=_NOVALUE,
    ):
        centered = a - np.mean(a, axis=axis, keepdims=True)
        ge = expand_reduced(g, ans, a, axis, keepdims)
        return cotangent(ge, ans, a, axis, keepdims, centered, _dof(a, axis, ddof, correction))

    vjp.__name__ = vjp.__qualname__ = f"_{name}_vjp"
    return forward, vjp


def _var_cotangent(ge, ans, a, axis, keepdims, centered, dof):
    return ge * centered * (2.0 / dof)


def _std_cotangent(ge, ans, a, axis, keepdims, centered, dof):
    s = expand_reduced(ans, ans, a, axis, keepdims)
    positive = s != 0  # not s > 0: a NaN standard deviation must give a NaN gradient
    return np.where(positive, ge * centered / (dof * np.where(positive, s, 1.0)), 0.0)


_var, _var_vjp = _moment("var", np.var, _var_cotangent)
_std, _std_vjp = _moment("std", np.std, _std_cotangent)


def _moment_cases() -> tuple[Case, ...]:
    return (
        Case((Arg((3, 4)),)),
        Case((Arg((3, 4)),), {"axis": 0, "ddof": 1}),
        Case((Arg((2, 3, 4)),), {"axis": -1, "keepdims": True}),
        Case((Arg((2, 3, 4)),), {"axis": (0, 2), "ddof": 1}),
        Case((Arg((2, 3, 4)),), {"axis": (2, -3), "keepdims": True, "correction": 1}),
        Case((Arg(()),)),
    )


def _conjugated(vjp):
    """The complex vjp of a real-valued moment of ``a`` (``var``, ``std``): a function of
    ``|a - mean|**2``, whose vjp is the real formula on ``conj(a)``."""

    def complex_vjp(g, ans, a, *args, **kwargs):
        return vjp(g, ans, np.conjugate(a), *args, **kwargs)

    return complex_vjp


register(
    Rule(
        "var",
        _var,
        vjps={0: _var_vjp},
        complex_vjps={0: _conjugated(_var_vjp)},
        complex=True,
        cases=_moment_cases(),
        family="reductions",
        structure=reduction("nonlinear"),
    ),
    np.var,
)
register(
    Rule(
        "std",
        _std,
        vjps={0: _std_vjp},
        complex_vjps={0: _conjugated(_std_vjp)},
        complex=True,
        cases=_moment_cases(),
        convention="gradient 0 where the standard deviation is 0 (finite at every order); "
        "ddof >= n gives inf or NaN, as NumPy's value does",
        family="reductions",
        structure=reduction("nonlinear"),
    ),
    np.std,
)


# ---------------------------------------------------------------- nan-aware reductions
def _nan_to(a: Any, value: float) -> Any:
    return np.where(np.isnan(a), value, a)


def _nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NOVALUE, where=True):
    _unsupported("nansum", out=out, where=where)
    extra = {} if initial is _NOVALUE else {"initial": initial}
    return np.sum(_nan_to(a, 0.0), axis=axis, dtype=dtype, keepdims=_keepdims(keepdims), **extra)


def _nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    _unsupported("nanmean", out=out, where=where)
    keepdims = _keepdims(keepdims)
    total = np.sum(_nan_to(a, 0.0), axis=axis, dtype=dtype, keepdims=keepdims)
    count = np.sum(~np.isnan(a), axis=axis, keepdims=keepdims)
    # A safe divisor: an all-NaN slice gives NaN with no 0/0 in the recorded graph.
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NOVALUE, where=True):
    _unsupported("nanprod", out=out, initial=initial, where=where)
    return np.prod(_nan_to(a, 1.0), axis=axis, dtype=dtype, keepdims=_keepdims(keepdims))


def _nan_cases(distinct: bool = False) -> tuple[Case, ...]:
    kind = "distinct" if distinct else "uniform"
    return (
        Case((Arg((3, 4), kind=kind),)),
        Case((Arg((3, 4), kind=kind),), {"axis": -1}),
        Case((Arg((2, 3, 4), kind=kind),), {"axis": (0, 2), "keepdims": True}),
        Case((Arg(()),)),
    )


_NAN = "NaN entries are skipped and get gradient 0"
for _name, _impl in (("nansum", _nansum), ("nanmean", _nanmean), ("nanprod", _nanprod)):
    register(
        Rule(
            _name,
            getattr(np, _name),
            impl=_impl,
            cases=_nan_cases(),
            convention=_NAN + ("; an all-NaN slice gives NaN" if _name == "nanmean" else ""),
            family="reductions",
        ),
        getattr(np, _name),
    )
for _name in ("nanmax", "nanmin"):
    register(
        Rule(
            _name,
            _extremum(_name, getattr(np, _name)),
            vjps={0: _extremum_vjp(skip_nan=True)},
            cases=_nan_cases(distinct=True),
            convention=_NAN + "; " + _TIES,
            family="reductions",
            structure=reduction("piecewise"),
        ),
        getattr(np, _name),
    )


# ---------------------------------------------------------------- average
def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    keepdims = _keepdims(keepdims)
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        if not returned:
            return avg
        scale = np.full(np.shape(avg), np.size(a) / max(np.size(avg), 1))
        return avg, scale
    ndim = np.ndim(a)
    shape = np.shape(a)
    w = weights
    if np.shape(w) != shape:
        if axis is None:
            raise TypeError(
                "numpy.average: axis= must be given when the shapes of a and "
                f"weights differ (got {shape} and {np.shape(w)})"
            )
        axes = normalize_axis_tuple(axis, ndim, argname="axis")
        if np.shape(w) != tuple(shape[ax] for ax in axes):
            raise ValueError(
                "numpy.average: the shape of weights must match the shape of a along the "
                f"given axis (a has shape {shape}, axis={axis!r}, weights {np.shape(w)})"
            )
        w = np.transpose(w, tuple(int(i) for i in np.argsort(axes)))
        w = np.reshape(w, tuple(s if i in axes else 1 for i, s in enumerate(shape)))
    total = np.sum(w, axis=axis, keepdims=keepdims)
    if anywhere(total == 0.0):
        raise ZeroDivisionError("numpy.average: the weights sum to zero, can't be normalized")
    avg = np.sum(a * w, axis=axis, keepdims=keepdims) / total
    if not returned:
        return avg
    if np.shape(total) != np.shape(avg):
        total = np.broadcast_to(total, np.shape(avg))
    return avg, total


register(
    Rule(
        "average",
        np.average,
        impl=_average,
        cases=(
            Case((Arg((3, 4)),)),
            Case((Arg((3, 4)),), {"axis": -1, "keepdims": True}),
            Case((Arg((3, 4)),), {"weights": Arg((3, 4), 0.5, 2.0)}),
            Case((Arg((3, 4)),), {"axis": 0, "weights": Arg((3,), 0.5, 2.0)}),
            Case((Arg((2, 3, 4)),), {"axis": (2, 0), "weights": Arg((4, 2), 0.5, 2.0)}),
            Case((Arg((2, 3)), 1, Arg((3,), 0.5, 2.0), True)),
            Case((Arg(()),)),
        ),
        family="reductions",
        complex=True,
    ),
    np.average,
)


# ---------------------------------------------------------------- trace
def _trace_axes(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
    """The two axes whose diagonal ``trace`` sums (its sparsity structure)."""
    axis1 = kwargs.get("axis1", args[2] if len(args) > 2 else 0)
    axis2 = kwargs.get("axis2", args[3] if len(args) > 3 else 1)
    return (int(axis1) % ndim, int(axis2) % ndim)


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _unsupported("trace", out=out)
    return np.trace(a, offset=offset, axis1=axis1, axis2=axis2, dtype=dtype)


def _trace_vjp(g, ans, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    nb = batch_ndim(g, ans)
    shape = np.shape(a)
    ax1 = normalize_axis_index(axis1, len(shape))
    ax2 = normalize_axis_index(axis2, len(shape))
    ones = tuple(1 if i in (ax1, ax2) else s for i, s in enumerate(shape))
    eye = np.eye(shape[ax1], shape[ax2], k=offset)
    if ax1 > ax2:
        eye = eye.T
    eye = eye.reshape(tuple(s if i in (ax1, ax2) else 1 for i, s in enumerate(shape)))
    return np.reshape(g, tuple(np.shape(g)[:nb]) + ones) * on_device_of(eye, g)


register(
    Rule(
        "trace",
        _trace,
        vjps={0: _trace_vjp},
        cases=(
            Case((Arg((3, 3)),)),
            Case((Arg((3, 4)),), {"offset": 1}),
            Case((Arg((4, 3)), -2)),
            Case((Arg((2, 3, 4)),), {"offset": -1, "axis1": 2, "axis2": 0}),
            Case((Arg((2, 3, 4)), 0, -1, 1)),
        ),
        uses_values=False,
        family="reductions",
        structure=reduction("linear", _trace_axes),
        batch=batching.shift_axes((2, "axis1", 0), (3, "axis2", 1)),
        complex=True,
    ),
    np.trace,
)
