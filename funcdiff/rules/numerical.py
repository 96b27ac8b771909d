"""Numerical-analysis rules: ``interp``, ``polyval`` and ``gradient``.

All three are compositions (``Rule(impl=...)``) of operations that have rules of their
own (indexing, products, sums, ``where``), so each is differentiable to any order and
forward mode needs nothing extra:

* ``polyval`` is Horner's rule, differentiable in the coefficients and in ``x``.
* ``gradient`` is linear in ``f``: shifted slices with NumPy's finite-difference
  weights, which depend only on the spacing. The spacing arguments are constants.
* ``interp`` is one linear segment per point: ``fp[j] + slope_j (x - xp[j])``. The
  segment is found from the values (a constant index), so the result is differentiable
  in ``x``, in ``fp`` (the hat-function weights) and in ``left``/``right``; ``xp`` is
  not differentiable.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor(1.5, requires_grad=True)
>>> fp = fd.tensor([0.0, 1.0, 4.0], requires_grad=True)
>>> y = np.interp(x, [0.0, 1.0, 2.0], fp)
>>> y.backward()
>>> x.grad, fp.grad
(tensor(3.), tensor([0. , 0.5, 0.5]))
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from funcdiff._core.backends import as_array, on_device_of
from funcdiff._core.registry import Rule, register
from funcdiff._core.tensor import Tensor, values_read
from funcdiff.rules.cases import Arg, Case

_FAMILY = "numerical"


def _value(x: Any) -> np.ndarray:
    """The numbers of ``x``: for indices and weights only, never differentiated."""
    return values_read(x) if isinstance(x, Tensor) else as_array(x)


def _constant(x: Any, func: str, argument: str) -> np.ndarray:
    """``x`` as an ndarray, refusing a Tensor that requires grad (not differentiable)."""
    if isinstance(x, Tensor) and x.requires_grad:
        raise TypeError(
            f"numpy.{func} is not differentiable in {argument}: pass a constant there "
            f"({argument}.detach()), or differentiate with respect to the other arguments"
        )
    return _value(x)


# ---------------------------------------------------------------- interp
def _interp(x, xp, fp, left=None, right=None, period=None):
    xp_v = as_array(_constant(xp, "interp", "xp")).astype(np.float64)
    if not isinstance(fp, Tensor):
        fp = np.asarray(fp, dtype=np.float64)
    if xp_v.ndim != 1 or np.ndim(fp) != 1:
        raise ValueError("numpy.interp: xp and fp must be 1-D sequences")
    if np.shape(fp)[0] != xp_v.shape[0]:
        raise ValueError("fp and xp are not of the same length")
    if xp_v.shape[0] == 0:
        raise ValueError("array of sample points is empty")
    if period is not None:
        period = abs(float(_constant(period, "interp", "period")))
        if period == 0:
            raise ValueError("period must be a non-zero value")
        # As NumPy: reduce x and xp to [0, period), sort, wrap one point each side.
        x_v = as_array(values_read(x)).astype(np.float64)
        x = x - (x_v - x_v % period)  # a constant shift: d x_reduced / dx = 1
        xp_v = xp_v % period
        order = np.argsort(xp_v, kind="stable")
        xp_v = np.concatenate((xp_v[order][-1:] - period, xp_v[order], xp_v[order][:1] + period))
        fp = fp[np.concatenate((order[-1:], order, order[:1]))]
        left = right = None
    x_v = as_array(values_read(x)).astype(np.float64)
    n = xp_v.shape[0]
    left = fp[0] if left is None else left
    right = fp[n - 1] if right is None else right
    if n == 1:
        inside = fp[0] + 0.0 * x  # keeps x's shape (and its zero derivative)
    else:
        # NumPy evaluates the segment [xp[j], xp[j+1]) with xp[j] <= x: at an interior
        # knot that is the segment to the right; at xp[-1] the last segment.
        j = np.clip(np.searchsorted(xp_v, x_v, side="right") - 1, 0, n - 2)
        lo, width = xp_v[j], xp_v[j + 1] - xp_v[j]
        fp_lo, fp_hi = fp[j], fp[j + 1]
        slope = (fp_hi - fp_lo) / np.where(width == 0, 1.0, width)
        at_end = x_v == xp_v[n - 1]
        # At xp[-1] NumPy returns fp[-1] itself: the same line written from its end.
        anchor = np.where(at_end, fp[n - 1], fp_lo)
        inside = slope * (x - np.where(at_end, xp_v[n - 1], lo)) + anchor
    return np.where(x_v < xp_v[0], left, np.where(x_v > xp_v[n - 1], right, inside))


register(
    Rule(
        "interp",
        np.interp,
        impl=_interp,
        cases=(
            Case((Arg((6,), 0.1, 2.9), np.array([0.0, 0.7, 1.5, 2.0, 3.0]), Arg((5,)))),
            Case((Arg((2, 3), -1.0, 4.0), np.array([0.0, 1.0, 2.5, 3.0]), Arg((4,)))),
            Case(
                (Arg((5,), -1.0, 4.0), np.array([0.0, 1.0, 3.0]), Arg((3,))),
                {"left": Arg(()), "right": Arg(())},
            ),
            Case((Arg((4,), -5.0, 5.0), np.array([0.2, 1.0, 2.3]), Arg((3,))), {"period": 3.0}),
            Case((Arg(()), np.array([1.0]), Arg((1,)))),
        ),
        convention=(
            "d/dx is the slope of the segment NumPy evaluates: at an interior knot the one "
            "to its right, at xp[-1] the last one (as JAX); 0 outside [xp[0], xp[-1]]; "
            "xp is not differentiable"
        ),
        family=_FAMILY,
    ),
    np.interp,
)


# ---------------------------------------------------------------- polyval
def _polyval(p, x):
    if isinstance(p, np.poly1d):
        p = p.coeffs
    if not isinstance(p, Tensor):
        p = np.asarray(p)
    y = np.zeros_like(_value(x))
    for k in range(np.shape(p)[0]):
        y = y * x + p[k]
    return y


register(
    Rule(
        "polyval",
        np.polyval,
        impl=_polyval,
        cases=(
            Case((Arg((4,)), Arg((5,)))),
            Case((Arg((3,)), Arg((2, 3)))),
            Case((Arg((1,)), Arg(()))),
            Case((Arg((3, 2)), Arg((2,)))),
        ),
        convention="Horner's rule",
        family=_FAMILY,
    ),
    np.polyval,
)


# ---------------------------------------------------------------- gradient
def _weights(n: int, spacing: Any, edge_order: Literal[1, 2]) -> np.ndarray:
    """NumPy's finite-difference weights along one axis of length ``n``.

    ``w[r, i]`` is the weight of ``f[k]`` with ``k % 3 == r`` in output ``i``: each
    output reads three consecutive samples at most, whose residues mod 3 differ, so
    three evaluations of ``np.gradient`` itself on 0/1 combs give every weight.
    """
    combs = (np.arange(n)[None, :] % 3 == np.arange(3)[:, None]).astype(np.float64)
    combs = on_device_of(combs, spacing)  # an array of spacings: on its device
    return np.stack([np.gradient(c, spacing, edge_order=edge_order) for c in combs])


def _gradient_along(f, axis: int, spacing: Any, edge_order: Literal[1, 2]):
    n = np.shape(f)[axis]
    w = _weights(n, spacing, edge_order)
    shape = [1] * np.ndim(f)
    shape[axis] = -1

    def term(k: int, a: int, b: int):
        # Outputs a..b-1 times their weight of the sample k places away.
        rows = np.arange(a, b)
        weights = on_device_of(np.reshape(w[(rows + k) % 3, rows], tuple(shape)), f)
        return weights * f[(slice(None),) * axis + (slice(a + k, b + k),)]

    width = edge_order + 1
    head = sum(term(k, 0, 1) for k in range(width))
    middle = sum(term(k, 1, n - 1) for k in (-1, 0, 1))
    tail = sum(term(-k, n - 1, n) for k in range(width))
    return np.concatenate((head, middle, tail), axis=axis)


def _spacings(varargs: tuple, axes: tuple[int, ...], shape: tuple[int, ...]) -> list:
    values = [_constant(v, "gradient", "the spacing (varargs)") for v in varargs]
    if not values:
        return [1.0] * len(axes)
    if len(values) == 1 and np.ndim(values[0]) == 0:
        return values * len(axes)
    if len(values) != len(axes):
        raise TypeError("invalid number of arguments")
    return values


def _gradient(f, *varargs, axis=None, edge_order=1):
    ndim = np.ndim(f)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(np.atleast_1d(axis).tolist())
        axes = tuple(normalize_axis_index(int(a), ndim) for a in axes)
    if not isinstance(f, Tensor):
        f = np.asarray(f)
    if np.result_type(f).kind not in "fc":
        f = f * 1.0
    spacings = _spacings(varargs, axes, np.shape(f))
    out = tuple(
        _gradient_along(f, ax, sp, int(edge_order)) for ax, sp in zip(axes, spacings, strict=True)
    )
    return out[0] if len(out) == 1 else out


register(
    Rule(
        "gradient",
        np.gradient,
        impl=_gradient,
        cases=(
            Case((Arg((5,)),)),
            Case((Arg((6,)), 0.5), {"edge_order": 2}),
            Case((Arg((3, 4)),)),
            Case((Arg((3, 4)), 2.0), {"axis": 1}),
            Case((Arg((4, 3)), np.array([0.0, 0.5, 1.7, 2.0]), 1.5)),
            Case((Arg((4, 3)), np.array([0.0, 0.5, 1.7, 2.0])), {"axis": 0, "edge_order": 2}),
        ),
        convention="linear in f; the spacing arguments are constants",
        family=_FAMILY,
    ),
    np.gradient,
)


# ---------------------------------------------------------------- unwrap
def _unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    # unwrap adds multiples of the period, piecewise constant in p: its Jacobian is the
    # identity. The multiples come from the values (a branch decision, traced as such),
    # with NumPy's algorithm written in calls that have rules.
    values = values_read(p)
    period = float(_constant(period, "unwrap", "period"))
    half = period / 2.0
    discont = half if discont is None else max(float(_constant(discont, "unwrap", "discont")), half)
    step = np.diff(values, axis=axis)
    wrapped = np.mod(step + half, period) - half
    wrapped = np.where((wrapped == -half) & (step > 0), half, wrapped)
    correction = np.where(np.abs(step) < discont, 0.0, wrapped - step)
    ndim = np.ndim(values)
    first = tuple(slice(0, 1) if i == axis % ndim else slice(None) for i in range(ndim))
    shift = np.concatenate([values[first] * 0.0, np.cumsum(correction, axis=axis)], axis=axis)
    return p + shift


register(
    Rule(
        "unwrap",
        np.unwrap,
        impl=_unwrap,
        cases=(
            Case((Arg((5,), 0.0, 12.0, kind="distinct"),)),
            Case((Arg((3, 4), -6.0, 6.0, kind="distinct"),), {"axis": 0}),
            Case((Arg((6,), 0.0, 7.0, kind="distinct"),), {"period": 4.0}),
        ),
        convention="the added multiples of the period are constants: the Jacobian is the "
        "identity, away from the jumps of the decision",
        family=_FAMILY,
    ),
    np.unwrap,
)
