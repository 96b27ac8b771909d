"""Cumulative rules (``cumsum``, ``cumprod``, ``cumulative_sum``, ``nancumsum`` ...) and the
two primitives they and ``prod`` are built from, :func:`shift_last` and
:func:`linear_recurrence`.

``cumprod`` is exact with zeros at every order: it never divides by the input, its
cotangent is a division-free linear recurrence. Both primitives are rules of their own
(internal: other rules call them inside their derivatives), so every rule here is
differentiable to any order.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([2.0, 0.0, 3.0], requires_grad=True)
>>> np.sum(np.cumprod(x)).backward()
>>> x.grad
tensor([1., 9., 0.])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from funcdiff._core.registry import Rule, Structure, batch_ndim, dispatching, register
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.indexing import index_add
from funcdiff.rules.structure import SELECT, last_axis, reduction

__all__ = ["shift_last", "linear_recurrence"]

_NOVALUE: Any = np._NoValue


# ---------------------------------------------------------------- helpers
def _unsupported(func: str, **options: Any) -> None:
    """Refuse NumPy options whose gradient funcdiff does not implement, naming them.

    ``where=True``, NumPy's default (every entry takes part), is accepted."""
    for name, value in options.items():
        if value is None or value is _NOVALUE:
            continue
        if name in _MASK_DEFAULT and isinstance(value, (bool, np.bool_)) and value:
            continue
        raise TypeError(
            f"numpy.{func} on Tensors does not support the argument {name}= "
            f"(got {type(value).__name__}): {_REASONS[name]}"
        )


# Why each NumPy keyword is refused (written as keywords: ``where`` and ``mean`` are also
# the names of rules, declared in their own modules).
_REASONS = dict(
    out="write the result to a new Tensor (y = f(x)) instead",
    where="a mask changes which entries receive gradient; mask the input with "
    "np.where before reducing",
    initial="pass the initial value as an ordinary operand instead",
    mean="let the function compute the mean itself",
)
#: The keywords whose value True is NumPy's default.
_MASK_DEFAULT = dict(where=True)


def _from_end(axis: Any, ndim: int) -> int:
    """``axis`` counted from the end (negative), so it also fits a batched cotangent."""
    return normalize_axis_index(int(axis), ndim) - ndim


def _flip_last(x: Any) -> Any:
    return x[..., ::-1]


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
    if not hasattr(x, "shape"):
        x = np.asarray(x)
    n = x.shape[-1]
    k = int(k)
    dtype = np.result_type(x.dtype, fill)
    # Built from NumPy calls that dispatch (no writes into a fresh array), so that forward
    # mode with create_graph can run it on Tensor tangents.
    pad = np.full((*x.shape[:-1], min(abs(k), n)), fill, dtype=dtype)
    if abs(k) >= n:
        return pad
    if k >= 0:
        return np.concatenate([pad, x[..., : n - k]], axis=-1)
    return np.concatenate([x[..., -k:], pad], axis=-1)


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
        structure=SELECT,
        complex=True,
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
        structure=Structure("fibre", "nonlinear", last_axis),
        complex=True,
    ),
    linear_recurrence,
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
        structure=reduction("linear", pattern="scan"),
        complex=True,
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
        structure=reduction("nonlinear", pattern="scan"),
        complex=True,
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
                complex=True,
            ),
            getattr(np, _name),
        )


# ---------------------------------------------------------------- nancumsum
def _nancumsum(a, axis=None, dtype=None, out=None):
    _unsupported("nancumsum", out=out)
    return np.cumsum(np.where(np.isnan(a), 0.0, a), axis=axis, dtype=dtype)


register(
    Rule(
        "nancumsum",
        np.nancumsum,
        impl=_nancumsum,
        cases=_cumulative_cases(),
        convention="NaN entries count as 0 and get gradient 0",
        family="reductions",
    ),
    np.nancumsum,
)
