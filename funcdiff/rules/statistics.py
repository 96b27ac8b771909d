"""Statistics of arrays: NaN-skipping moments, order statistics and covariances.

``nanvar``, ``nanstd``, ``median``, ``quantile``, ``percentile``, ``cov`` and
``corrcoef`` are compositions (``Rule(impl=...)``): they run on the Tensors themselves
through rules that exist (``sort``, ``take``, ``where``, ``sum``, ``matmul``), so every
order of derivative, forward mode, sparsity detection and replay come from those rules.

Conventions: NaN entries are skipped by the ``nan`` functions and get gradient 0; an
order statistic's gradient goes to the sorted entries it reads (ties as ``sort``:
the entries swap places without changing the value); the linear interpolation of
``quantile`` (NumPy's default method) weighs its two neighbours.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([3.0, 1.0, 2.0, 10.0], requires_grad=True)
>>> np.median(x).backward()  # the mean of the two middle values, 2 and 3
>>> x.grad
tensor([0.5, 0. , 0.5, 0. ])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from funcdiff._core.registry import Rule, register
from funcdiff._core.tensor import Tensor
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.reductions import numpy_moment

_NOVALUE = np._NoValue  # NumPy's "argument not given"


def _refuse(func: str, **options: Any) -> None:
    """Refuse NumPy options funcdiff does not differentiate, naming them."""
    for name, value in options.items():
        if value is not None and value is not _NOVALUE:
            raise TypeError(
                f"numpy.{func} on Tensors does not support the argument {name}= "
                f"(got {type(value).__name__}); compute it from the plain call instead"
            )


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(int(a) % max(ndim, 1) for a in axis))
    return (int(axis) % max(ndim, 1),)


def _keep(result: Any, axes: tuple[int, ...], ndim: int, lead: int = 0) -> Any:
    """``result`` with the reduced ``axes`` put back as length-1 axes (``keepdims``),
    behind ``lead`` leading axes (those of ``q`` in a quantile)."""
    for axis in axes:
        result = np.expand_dims(result, lead + axis)
    return result


# ---------------------------------------------------------------- nanvar, nanstd
def _nanvar_body(a, axis, dtype, ddof, keepdims):
    _refuse("nanvar", dtype=dtype)
    keep = keepdims is True
    present = ~np.isnan(a)
    count = np.sum(present, axis=axis, keepdims=True)
    average = np.sum(np.where(present, a, 0.0), axis=axis, keepdims=True) / np.maximum(count, 1)
    centered = np.where(present, a - average, 0.0)
    squares = np.sum(centered * centered, axis=axis, keepdims=keep)
    dof = np.sum(present, axis=axis, keepdims=keep) - ddof
    # A safe divisor: a slice with no degree of freedom gives NaN, as NumPy's value.
    return np.where(dof > 0, squares / np.maximum(dof, 1), np.nan)


_nanvar = numpy_moment("nanvar", _nanvar_body)


def _nanstd_body(a, axis, dtype, ddof, keepdims):
    _refuse("nanstd", dtype=dtype)
    variance = _nanvar_body(a, axis, None, ddof, keepdims)
    # Gradient 0 where the deviation is 0 (as numpy.std's rule), finite at every order.
    positive = variance > 0
    return np.where(positive, np.sqrt(np.where(positive, variance, 1.0)), variance * 0.0)


_nanstd = numpy_moment("nanstd", _nanstd_body)


def _nan_cases() -> tuple[Case, ...]:
    return (
        Case((Arg((3, 4)),)),
        Case((Arg((3, 4)),), {"axis": -1}),
        Case((Arg((2, 3, 4)),), {"axis": (0, 2), "keepdims": True, "ddof": 1}),
        Case((Arg((5,)),), {"ddof": 1}),
    )


_NAN = "NaN entries are skipped and get gradient 0; a slice without a degree of freedom is NaN"
register(
    Rule(
        "nanvar",
        np.nanvar,
        impl=_nanvar,
        cases=_nan_cases(),
        convention=_NAN,
        family="reductions",
    ),
    np.nanvar,
)
register(
    Rule(
        "nanstd",
        np.nanstd,
        impl=_nanstd,
        cases=_nan_cases(),
        convention=_NAN + "; gradient 0 where the deviation is 0",
        family="reductions",
    ),
    np.nanstd,
)


# ---------------------------------------------------------------- quantiles
def _order_statistic(name: str, scale: float) -> Any:
    """``numpy.quantile`` (``scale`` 1) or ``numpy.percentile`` (``scale`` 100), with
    NumPy's signature: ``q`` is a constant in ``[0, scale]``."""

    def forward(
        a,
        q,
        axis=None,
        out=None,
        overwrite_input=False,
        method="linear",
        keepdims=False,
        *,
        weights=None,
        interpolation=None,
    ):
        _refuse(name, out=out, weights=weights, interpolation=interpolation)
        if method != "linear":
            raise NotImplementedError(
                f"numpy.{name}(method={method!r}) on Tensors: only the default "
                "method='linear' is differentiated"
            )
        if isinstance(q, Tensor):
            raise TypeError(f"numpy.{name}: q must be a constant, not a Tensor")
        q = np.asarray(q, dtype=np.float64)
        if np.any((q < 0) | (q > scale)) or np.any(np.isnan(q)):
            raise ValueError(f"numpy.{name}: q must be in the range [0, {scale:g}]")
        q = q / scale
        ndim = np.ndim(a)
        axes = _axes(axis, ndim)
        front = np.moveaxis(a, axes, tuple(range(len(axes))))
        rest = tuple(np.shape(front)[len(axes) :])
        n = math.prod(np.shape(a)[i] for i in axes)
        if n == 0:
            raise ValueError(f"numpy.{name} of an empty slice")
        ordered = np.sort(np.reshape(front, (n,) + rest), axis=0)
        position = q * (n - 1)
        low = np.floor(position).astype(np.intp)
        high = np.minimum(low + 1, n - 1)
        weight = np.reshape(position - low, q.shape + (1,) * len(rest))
        below = np.take(ordered, low, axis=0)
        above = np.take(ordered, high, axis=0)
        result = below + (above - below) * weight
        if keepdims is True:
            result = _keep(result, axes, ndim, q.ndim)
        return result

    forward.__name__ = forward.__qualname__ = f"_{name}"
    return forward


_quantile = _order_statistic("quantile", 1.0)
_percentile = _order_statistic("percentile", 100.0)


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return _quantile(a, 0.5, axis, out, overwrite_input, keepdims=keepdims)


_ORDER = (
    "the gradient goes to the sorted entries the value reads (two neighbours, weighted "
    "by the linear interpolation); at ties it is split as numpy.sort's"
)
_order_cases = (
    Case((Arg((7,), kind="distinct"),)),
    Case((Arg((3, 4), kind="distinct"),), {"axis": 1}),
    Case((Arg((2, 3, 4), kind="distinct"),), {"axis": (0, 2), "keepdims": True}),
)
register(
    Rule(
        "median",
        np.median,
        impl=_median,
        cases=_order_cases + (Case((Arg((6,), kind="distinct"),)),),
        convention=_ORDER,
        family="reductions",
    ),
    np.median,
)
register(
    Rule(
        "quantile",
        np.quantile,
        impl=_quantile,
        cases=(
            Case((Arg((7,), kind="distinct"), 0.3)),
            Case((Arg((3, 5), kind="distinct"), np.array([0.1, 0.5, 0.95])), {"axis": 1}),
            Case((Arg((2, 3, 4), kind="distinct"), 0.8), {"axis": (0, 2), "keepdims": True}),
            Case((Arg((4, 3), kind="distinct"), np.array([[0.0, 1.0], [0.25, 0.6]])), {"axis": 0}),
        ),
        nondiff_args=frozenset({1, "q"}),
        convention=_ORDER,
        family="reductions",
    ),
    np.quantile,
)
register(
    Rule(
        "percentile",
        np.percentile,
        impl=_percentile,
        cases=(
            Case((Arg((7,), kind="distinct"), 30.0)),
            Case((Arg((3, 5), kind="distinct"), np.array([10.0, 50.0, 95.0])), {"axis": 0}),
        ),
        nondiff_args=frozenset({1, "q"}),
        convention=_ORDER,
        family="reductions",
    ),
    np.percentile,
)


# ---------------------------------------------------------------- cov, corrcoef
def _cov(
    m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None
):
    _refuse("cov", fweights=fweights, aweights=aweights, dtype=dtype)
    if ddof is not None and ddof != int(ddof):
        raise ValueError("numpy.cov: ddof must be an integer")
    x = np.atleast_2d(m)
    if not rowvar and np.shape(x)[0] != 1:
        x = np.transpose(x)
    if y is not None:
        other = np.atleast_2d(y)
        if not rowvar and np.shape(other)[0] != 1:
            other = np.transpose(other)
        x = np.concatenate([x, other], axis=0)
    dof = np.shape(x)[1] - ((0 if bias else 1) if ddof is None else int(ddof))
    centered = x - np.mean(x, axis=1, keepdims=True)
    product = np.matmul(centered, np.conjugate(np.transpose(centered)))
    # numpy.cov warns and divides by max(dof, 0) (inf or NaN); the same values here.
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.squeeze(product / float(max(dof, 0)))


def _corrcoef(x, y=None, rowvar=True, bias=_NOVALUE, ddof=_NOVALUE, *, dtype=None):
    c = _cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:
        return c / c
    scale = np.sqrt(np.real(np.diagonal(c)))
    c = c / scale[:, None] / scale[None, :]
    # NumPy clips rounding beyond [-1, 1]; the diagonal is exactly 1 (derivative 0).
    return (
        c
        if np.result_type(c.dtype if isinstance(c, Tensor) else c).kind == "c"
        else np.clip(c, -1.0, 1.0)
    )


_cov_cases = (
    Case((Arg((3, 5)),)),
    Case((Arg((5, 2)),), {"rowvar": False}),
    Case((Arg((2, 4)), Arg((4,))), {"bias": True}),
    Case((Arg((6,)),), {"ddof": 2}),
)
register(
    Rule(
        "cov",
        np.cov,
        impl=_cov,
        cases=_cov_cases,
        convention="no frequency or analytic weights (refused by name)",
        family="reductions",
    ),
    np.cov,
)
register(
    Rule(
        "corrcoef",
        np.corrcoef,
        impl=_corrcoef,
        cases=_cov_cases[:2] + (Case((Arg((2, 4)), Arg((4,)))),),
        convention="the diagonal is exactly 1 (gradient 0); NumPy's clip to [-1, 1] only "
        "touches rounding",
        family="reductions",
    ),
    np.corrcoef,
)
