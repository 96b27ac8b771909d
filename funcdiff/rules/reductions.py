"""Reductions: sums, products, extrema, moments, cumulative operations and norms.

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

from funcdiff.rules._registry import (
    FUNCTION_RULES,
    Arg,
    Case,
    Rule,
    batch_ndim,
    dispatching,
    register,
)
from funcdiff.rules.indexing import index_add

__all__ = [
    "normalize_axes",
    "expand_reduced",
    "reduction_cases",
    "shift_last",
    "linear_recurrence",
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


def _unsupported(func: str, **options: Any) -> None:
    """Refuse NumPy options whose gradient funcdiff does not implement, naming them."""
    reasons = {
        "out": "write the result to a new Tensor (y = f(x)) instead",
        "where": "a mask changes which entries receive gradient; mask the input with "
        "np.where before reducing",
        "initial": "pass the initial value as an ordinary operand instead",
        "mean": "let the function compute the mean itself",
    }
    for name, value in options.items():
        if value is None or value is _NOVALUE:
            continue
        if name == "where" and isinstance(value, (bool, np.bool_)) and value:
            continue  # where=True is NumPy's default: every entry takes part
        raise TypeError(
            f"numpy.{func} on Tensors does not support the argument {name}= "
            f"(got {type(value).__name__}): {reasons[name]}"
        )


def _count(x: Any, axis: Any) -> int:
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in normalize_axes(axis, len(shape))]))


def _from_end(axis: Any, ndim: int) -> int:
    """``axis`` counted from the end (negative), so it also fits a batched cotangent."""
    return normalize_axis_index(int(axis), ndim) - ndim


def _flip_last(x: Any) -> Any:
    return x[..., ::-1]


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


# ---------------------------------------------------------------- primitives for rules
@dispatching
def shift_last(x: Any, k: int, fill: float) -> Any:
    """Shift ``x`` by ``k`` places along its last axis, filling the vacated places.

    ``shift_last(x, 1, f)[..., i]`` is ``x[..., i - 1]`` (``f`` at ``i = 0``). Its
    cotangent is a shift the other way, so it is differentiable to any order.

    Examples
    --------
    >>> shift_last(np.array([1.0, 2.0, 3.0]), 1, 9.0)
    array([9., 1., 2.])
    >>> shift_last(np.array([1.0, 2.0, 3.0]), -1, 0.0)
    array([2., 3., 0.])
    """
    x = np.asarray(x)
    out = np.full(x.shape, fill, dtype=np.result_type(x, fill))
    n = x.shape[-1]
    k = int(k)
    if abs(k) >= n:
        return out
    if k >= 0:
        out[..., k:] = x[..., : n - k]
    else:
        out[..., :k] = x[..., -k:]
    return out


@dispatching
def linear_recurrence(a: Any, b: Any, reverse: bool = False) -> Any:
    """Solve a first-order linear recurrence along the last axis, without division.

    Forward (``reverse=False``): ``s[k] = b[k] + a[k] * s[k-1]`` with ``s[-1] = 0``.
    Reverse: ``r[k] = b[k] + a[k+1] * r[k+1]`` with ``r[n] = 0``. ``a[..., 0]`` is not
    used. ``a`` and ``b`` broadcast. The two directions are each other's adjoints, so
    the cotangents are recurrences again and the primitive is differentiable to any
    order; it gives ``cumprod`` an exact gradient when the input has zeros.

    Examples
    --------
    >>> linear_recurrence(np.array([0.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0]))
    array([ 1.,  3., 10.])
    >>> linear_recurrence(np.array([0.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0]), True)
    array([9., 4., 1.])
    """
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    out = np.empty(a.shape, dtype=np.result_type(a, b, 1.0))
    n = a.shape[-1]
    if n == 0 or out.size == 0:
        return out
    # A loop along the axis keeps the recurrence exact (a log-depth scan would
    # multiply long products first, which can overflow where the result does not).
    av, bv, ov = np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0), np.moveaxis(out, -1, 0)
    if reverse:
        ov[n - 1] = bv[n - 1]
        for k in range(n - 2, -1, -1):
            ov[k] = bv[k] + av[k + 1] * ov[k + 1]
    else:
        ov[0] = bv[0]
        for k in range(1, n):
            ov[k] = bv[k] + av[k] * ov[k - 1]
    return out


def _recurrence_vjp_a(g, ans, a, b, reverse=False):
    # d s[k] / d a[j] = s[j-1] * (product of a over (j, k]); summing against g is the
    # opposite recurrence. Symmetrically for the reverse direction.
    if reverse:
        return ans * shift_last(linear_recurrence(a, g, False), 1, 0.0)
    return shift_last(ans, 1, 0.0) * linear_recurrence(a, g, True)


register(
    Rule(
        "shift_last",
        shift_last.__wrapped__,
        vjps={0: lambda g, ans, x, k, fill: shift_last(g, -k, 0.0)},
        nondiff_args=frozenset({1, 2}),
        cases=(
            Case((Arg((2, 4)), 1, 1.0)),
            Case((Arg((4,)), -2, 0.0)),
            Case((Arg((3,)), 5, 0.0)),
        ),
        uses_values=False,
        family="reductions",
    ),
    shift_last,
)
register(
    Rule(
        "linear_recurrence",
        linear_recurrence.__wrapped__,
        vjps={
            0: _recurrence_vjp_a,
            1: lambda g, ans, a, b, reverse=False: linear_recurrence(a, g, not reverse),
        },
        nondiff_args=frozenset({2, "reverse"}),
        cases=(
            Case((Arg((5,), -1.5, 1.5), Arg((5,)))),
            Case((Arg((5,), -1.5, 1.5), Arg((5,)), True)),
            Case((Arg((2, 4), -1.5, 1.5), Arg((3, 2, 4))), {"reverse": True}),
            Case((Arg((4,), -1.5, 1.5), Arg((2, 4)))),
        ),
        family="reductions",
    ),
    linear_recurrence,
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
        return np.ones(np.shape(x))
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
    def forward(a, axis=None, out=None, keepdims=False, initial=_NOVALUE, where=True):
        _unsupported(name, out=out, initial=initial, where=where)
        return func(a, axis=axis, keepdims=_keepdims(keepdims))

    forward.__name__ = forward.__qualname__ = f"_{name}"
    return forward


def _extremum_vjp(g, ans, a, axis=None, out=None, keepdims=False, initial=None, where=True):
    return expand_reduced(g, ans, a, axis, keepdims) * _tie_weights(a, ans, axis, keepdims)


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
            vjps={0: _extremum_vjp},
            cases=_extremum_cases(),
            convention=_TIES + "; a NaN result sends it to the NaN entries",
            family="reductions",
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
def _moment_options(func, out, where, mean):
    _unsupported(func, out=out, where=where, mean=mean)


def _dof(a: Any, axis: Any, ddof: Any, correction: Any) -> Any:
    return _count(a, axis) - (ddof if correction is _NOVALUE else correction)


def _var(
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
    _moment_options("var", out, where, mean)
    extra = {} if correction is _NOVALUE else {"correction": correction}
    return np.var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=_keepdims(keepdims), **extra)


def _std(
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
    _moment_options("std", out, where, mean)
    extra = {} if correction is _NOVALUE else {"correction": correction}
    return np.std(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=_keepdims(keepdims), **extra)


def _var_vjp(
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
    return ge * centered * (2.0 / _dof(a, axis, ddof, correction))


def _std_vjp(
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
    s = expand_reduced(ans, ans, a, axis, keepdims)
    positive = s != 0  # not s > 0: a NaN standard deviation must give a NaN gradient
    centered = a - np.mean(a, axis=axis, keepdims=True)
    ge = expand_reduced(g, ans, a, axis, keepdims)
    scale = _dof(a, axis, ddof, correction) * np.where(positive, s, 1.0)
    return np.where(positive, ge * centered / scale, 0.0)


def _moment_cases() -> tuple[Case, ...]:
    return (
        Case((Arg((3, 4)),)),
        Case((Arg((3, 4)),), {"axis": 0, "ddof": 1}),
        Case((Arg((2, 3, 4)),), {"axis": -1, "keepdims": True}),
        Case((Arg((2, 3, 4)),), {"axis": (0, 2), "ddof": 1}),
        Case((Arg((2, 3, 4)),), {"axis": (2, -3), "keepdims": True, "correction": 1}),
        Case((Arg(()),)),
    )


register(
    Rule("var", _var, vjps={0: _var_vjp}, cases=_moment_cases(), family="reductions"),
    np.var,
)
register(
    Rule(
        "std",
        _std,
        vjps={0: _std_vjp},
        cases=_moment_cases(),
        convention="gradient 0 where the standard deviation is 0 (finite at every order); "
        "ddof >= n gives inf or NaN, as NumPy's value does",
        family="reductions",
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


def _nan_extremum(name: str, func: Any) -> Any:
    def forward(a, axis=None, out=None, keepdims=False, initial=_NOVALUE, where=True):
        _unsupported(name, out=out, initial=initial, where=where)
        return func(a, axis=axis, keepdims=_keepdims(keepdims))

    forward.__name__ = forward.__qualname__ = f"_{name}"
    return forward


def _nan_extremum_vjp(g, ans, a, axis=None, out=None, keepdims=False, initial=None, where=True):
    weights = _tie_weights(a, ans, axis, keepdims, skip_nan=True)
    return expand_reduced(g, ans, a, axis, keepdims) * weights


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
            _nan_extremum(_name, getattr(np, _name)),
            vjps={0: _nan_extremum_vjp},
            cases=_nan_cases(distinct=True),
            convention=_NAN + "; " + _TIES,
            family="reductions",
        ),
        getattr(np, _name),
    )


# ---------------------------------------------------------------- cumulative operations
def _cumsum(a, axis=None, dtype=None, out=None):
    _unsupported("cumsum", out=out)
    return np.cumsum(a, axis=axis, dtype=dtype)


def _cumprod(a, axis=None, dtype=None, out=None):
    _unsupported("cumprod", out=out)
    return np.cumprod(a, axis=axis, dtype=dtype)


def _along_last(g: Any, ans: Any, a: Any, axis: Any) -> tuple[Any, Any, Any, Any]:
    """Views with the accumulated axis last: (g, ans, a, undo) for a cumulative op."""
    nb = batch_ndim(g, ans)
    if axis is None:  # NumPy flattens; the flat result already has its axis last
        out_shape = tuple(np.shape(g)[:nb]) + tuple(np.shape(a))
        return g, ans, np.reshape(a, (-1,)), lambda r: np.reshape(r, out_shape)
    ax = _from_end(axis, np.ndim(a))
    moved = tuple(np.moveaxis(v, ax, -1) for v in (g, ans, a))
    return (*moved, lambda r: np.moveaxis(r, -1, ax))


def _cumsum_vjp(g, ans, a, axis=None, dtype=None, out=None):
    g_last, _, _, undo = _along_last(g, ans, a, axis)
    return undo(_flip_last(np.cumsum(_flip_last(g_last), axis=-1)))


def _cumprod_vjp(g, ans, a, axis=None, dtype=None, out=None):
    # d y[i] / d x[k] = (prod_{j<k} x[j]) (prod_{k<j<=i} x[j]) for i >= k: the first
    # factor is the exclusive cumprod, the sum over i against g is a reverse linear
    # recurrence in x. Neither divides by x, so zeros are exact.
    g_last, y_last, x_last, undo = _along_last(g, ans, a, axis)
    return undo(shift_last(y_last, 1, 1.0) * linear_recurrence(x_last, g_last, True))


def _cumulative_cases(low: float = -2.0, high: float = 2.0) -> tuple[Case, ...]:
    return (
        Case((Arg((5,), low, high),)),
        Case((Arg((3, 4), low, high),)),
        Case((Arg((3, 4), low, high),), {"axis": 0}),
        Case((Arg((2, 3, 4), low, high),), {"axis": -1}),
        Case((Arg((), low, high),)),
        Case((Arg((2, 0), low, high),), {"axis": 1}),
    )


register(
    Rule(
        "cumsum",
        _cumsum,
        vjps={0: _cumsum_vjp},
        cases=_cumulative_cases(),
        uses_values=False,
        family="reductions",
    ),
    np.cumsum,
)
register(
    Rule(
        "cumprod",
        _cumprod,
        vjps={0: _cumprod_vjp},
        cases=_cumulative_cases(-1.5, 1.5),
        convention="exact with zeros at every order (no division by the input)",
        family="reductions",
    ),
    np.cumprod,
)


def _cumulative(name: str, func: Any, pad: float) -> Any:
    def impl(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        _unsupported(name, out=out)
        if axis is None:
            if np.ndim(x) != 1:
                raise ValueError(
                    f"numpy.{name}: axis= must be given for arrays with more than one "
                    f"dimension (got {np.ndim(x)} dimensions)"
                )
            axis = 0
        result = func(x, axis=axis, dtype=dtype)
        if not include_initial:
            return result
        # Scatter the result behind one slot of the identity (index_add is a primitive).
        nd = np.ndim(result)
        ax = normalize_axis_index(int(axis), nd)
        shape = tuple(s + (i == ax) for i, s in enumerate(np.shape(result)))
        after = tuple(slice(1, None) if i == ax else slice(None) for i in range(nd))
        padded = index_add(result, after, shape)
        if pad:
            first = np.zeros(shape)
            first[tuple(slice(0, 1) if i == ax else slice(None) for i in range(nd))] = pad
            padded = padded + first
        return padded

    return impl


for _name, _func, _pad in (
    ("cumulative_sum", np.cumsum, 0.0),
    ("cumulative_prod", np.cumprod, 1.0),
):
    if hasattr(np, _name):  # NumPy >= 2.1
        register(
            Rule(
                _name,
                getattr(np, _name),
                impl=_cumulative(_name, _func, _pad),
                cases=(
                    Case((Arg((4,), -1.5, 1.5),)),
                    Case((Arg((3, 4), -1.5, 1.5),), {"axis": 1, "include_initial": True}),
                    Case((Arg((3, 4), -1.5, 1.5),), {"axis": -2}),
                ),
                family="reductions",
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
    if np.any(total == 0.0):
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
    ),
    np.average,
)


# ---------------------------------------------------------------- trace
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
    return np.reshape(g, tuple(np.shape(g)[:nb]) + ones) * eye


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
    ),
    np.trace,
)


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
        first = np.arange(k) == (0 if kind == 2 else k - 1)
        pick = live & first
    d = np.matmul(u * pick[..., None, :], vh)
    d = np.moveaxis(d, (-2, -1), axes)
    return expand_reduced(g, ans, x, axes, keepdims) * d


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
    svd = {"order": _SVD_ORDER}
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
            ),
            _api,
        )
