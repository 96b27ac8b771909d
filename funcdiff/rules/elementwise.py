"""Elementwise rules: NumPy's arithmetic, exponential, trigonometric and hyperbolic ufuncs.

Each entry maps an argument to ``vjp(g, ans, *args)``. Results broadcast to the
argument's shape: the engine sums them back (unbroadcast) and casts dtypes.

Conventions at kinks (the docs page is generated from the ``convention`` fields):
``abs'(0) = 0``; ties of ``maximum``/``minimum``/``fmax``/``fmin`` split the gradient
evenly; ``hypot`` and ``arctan2`` at the origin have gradient 0; ``d/dx x**0 = 0``
(also at ``x = 0``); ``power``'s gradient with respect to the exponent is 0 where the
base is 0 or negative (where it is undefined); ``sinc'(0) = 0``, exact at every order.

Every vjp is written with NumPy calls that have rules themselves, so each rule is
differentiable again; values a discarded ``where`` branch would turn into NaN or inf
are replaced by safe ones *before* the arithmetic, so nothing leaks at any order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from funcdiff._core.arrays import anywhere, everywhere
from funcdiff._core.registry import Rule, Structure, register
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.structure import (
    ELEMENTWISE,
    ELEMENTWISE_PIECEWISE,
)

LN2 = float(np.log(2.0))
LN10 = float(np.log(10.0))


def unary_cases(low: float = -2.0, high: float = 2.0) -> tuple[Case, ...]:
    """Test points for a unary elementwise rule: a matrix, a 0-d array and an empty array."""
    return (
        Case((Arg((3, 4), low, high),)),
        Case((Arg((), low, high),)),
        Case((Arg((0, 3), low, high),)),
    )


def binary_cases(
    low: float = -2.0, high: float = 2.0, low2: float | None = None, high2: float | None = None
) -> tuple[Case, ...]:
    """Test points for a binary elementwise rule, broadcasting pairs included."""
    low2 = low if low2 is None else low2
    high2 = high if high2 is None else high2
    return (
        Case((Arg((2, 3), low, high), Arg((2, 3), low2, high2))),
        Case((Arg((3, 1), low, high), Arg((1, 4), low2, high2))),
        Case((Arg((), low, high), Arg((2, 3), low2, high2))),
        Case((Arg((2, 3), low, high), Arg((3,), low2, high2, diff=False))),
        Case((Arg((2, 3), low, high), 1.5)),
    )


def unary(
    ufunc: np.ufunc,
    vjp,
    low: float = -2.0,
    high: float = 2.0,
    convention: str = "",
    cases: tuple[Case, ...] = (),
    *,
    name: str | None = None,
    family: str = "elementwise",
    curvature: str = "nonlinear",
    complex: bool = False,  # noqa: A002  (the Rule field it sets)
    complex_vjps: dict | None = None,
) -> Rule:
    """Register the rule of a one-argument ufunc, tested on :func:`unary_cases` in
    ``[low, high]`` plus ``cases``; ``name`` defaults to the ufunc's own.

    The rule is elementwise (``diagonal=True``) with the given Hessian ``curvature``;
    ``complex=True`` declares that its vjp holds on complex values as written (a
    holomorphic function), ``complex_vjps`` replaces it there."""
    rule = Rule(
        name or ufunc.__name__,
        ufunc,
        vjps={0: vjp},
        cases=unary_cases(low, high) + tuple(cases),
        convention=convention,
        family=family,
        diagonal=True,
        structure=Structure("elementwise", curvature),
        complex=complex or bool(complex_vjps),
        complex_vjps=complex_vjps or {},
    )
    return register(rule)


def binary(
    ufunc: np.ufunc,
    vjp_x,
    vjp_y,
    cases: tuple[Case, ...] | None = None,
    convention: str = "",
    *,
    curvature: str = "nonlinear",
    complex: bool = False,  # noqa: A002
    complex_vjps: dict | None = None,
) -> Rule:
    """Register the rule of a two-argument elementwise ufunc (see :func:`unary`)."""
    rule = Rule(
        ufunc.__name__,
        ufunc,
        vjps={0: vjp_x, 1: vjp_y},
        cases=binary_cases() if cases is None else cases,
        convention=convention,
        family="elementwise",
        diagonal=True,
        structure=Structure("elementwise", curvature),
        complex=complex or bool(complex_vjps),
        complex_vjps=complex_vjps or {},
    )
    return register(rule)


def constant(fn, name: str | None = None, *, complex: bool = False) -> Rule:  # noqa: A002
    """A piecewise-constant ufunc or function: its result never requires grad.
    ``complex=True``: it stays constant on complex values (``rint`` rounds both parts)."""
    rule = Rule(
        name or fn.__name__, fn, differentiable=False, family="elementwise", complex=complex
    )
    return register(rule, fn)


def _safe(x, ok):
    """``x`` where ``ok``, else 1: keeps NaN and inf out of the branch ``where`` discards."""
    return np.where(ok, x, 1.0)


def _is_number(v) -> bool:
    """A Python or NumPy scalar (not an array, not a Tensor): lets rules branch in Python."""
    return isinstance(v, (int, float, np.integer, np.floating))


# Up to this size a count of zeros costs less than entering np.errstate (~5 us).
_COUNT_MAX = 2048
_count_nonzero = np.count_nonzero


def _nonzero(d) -> bool:
    """Whether ``d`` certainly holds no zero: a small ndarray or a number without one.

    A large array or a Tensor (under ``create_graph``, where recording costs more than
    the context) answers False: the caller then enters ``np.errstate``, whose fixed cost
    is small beside the arithmetic on a large array.
    """
    if type(d) is np.ndarray:
        return d.size <= _COUNT_MAX and _count_nonzero(d) == d.size
    return _is_number(d) and d != 0


def _over(n, d):
    """``n / d``; where ``d`` is 0 the quotient is the derivative's value there (inf,
    or NaN for 0/0), computed without NumPy's divide-by-zero RuntimeWarning."""
    if _nonzero(d):
        return n / d
    with np.errstate(divide="ignore", invalid="ignore"):
        return n / d


def _power(x, e):
    """``np.power(x, e)``, without a RuntimeWarning where ``x`` is 0 and ``e < 0``."""
    if (_is_number(e) and e >= 0) or _nonzero(x):
        return np.power(x, e)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.power(x, e)


def _zeros(g, ans, x, y):
    """Zero cotangent of a binary ufunc (named parameters: it reads neither argument)."""
    return np.zeros_like(g)


def _conj_vjp(g, ans, x):
    # conj is a function of conj(z) alone: its vjp conjugates the cotangent.
    return np.conjugate(g)


def _power_exponent_complex_vjp(g, ans, x, y):
    # d/dy x**y = x**y log x (principal branch); 0 where x = 0, where 0**y is constant.
    nonzero = x != 0
    return g * np.where(nonzero, ans, 0.0) * np.log(np.where(nonzero, x, 1.0))


def _arccosh_complex_vjp(g, ans, x):
    # 1 / sqrt(z**2 - 1) has the wrong sign left of the imaginary axis; this product
    # follows arccosh's principal branch everywhere off its cut.
    return g / (np.sqrt(x - 1.0) * np.sqrt(x + 1.0))


def tie_weights(x, y):
    """1 where x wins, 1/2 at ties, 0 where y wins: a constant (comparisons never record)."""
    return np.where(x == y, 0.5, np.where(x > y, 1.0, 0.0))


# ---------------------------------------------------------------- arithmetic
binary(np.add, lambda g, ans, x, y: g, lambda g, ans, x, y: g, curvature="linear", complex=True)
binary(
    np.subtract, lambda g, ans, x, y: g, lambda g, ans, x, y: -g, curvature="linear", complex=True
)
binary(
    np.multiply,
    lambda g, ans, x, y: g * y,
    lambda g, ans, x, y: g * x,
    curvature="bilinear",
    complex=True,
)
binary(  # np.divide is np.true_divide
    np.true_divide,
    lambda g, ans, x, y: g / y,
    lambda g, ans, x, y: -g * x / (y * y),
    cases=binary_cases(-2.0, 2.0, 0.5, 2.0),
    curvature="quotient",
    complex=True,
)
register(
    Rule(
        "floor_divide",
        np.floor_divide,
        vjps={0: _zeros, 1: _zeros},
        cases=binary_cases(0.1, 0.9, 1.5, 2.5),
        convention="piecewise constant: zero gradient everywhere",
        family="elementwise",
        diagonal=True,
        structure=ELEMENTWISE_PIECEWISE,
    )
)
# Quotients away from integers (the jumps), with non-zero floor/trunc quotients and
# negative operands, so the divisor's gradient -floor(x/y) is exercised.
_mod_cases = (
    Case((Arg((2, 3), -2.9, -2.1), Arg((2, 3), 3.0, 3.5))),
    Case((Arg((3, 1), 3.6, 3.9), Arg((1, 4), 1.5, 1.75))),
    Case((Arg((), 0.1, 0.9), Arg((2, 3), 1.5, 2.5))),
    Case((Arg((2, 3), 0.2, 0.8), Arg((2, 3), -2.5, -1.5))),
    Case((Arg((2, 3), 3.6, 3.9), 1.5)),
    Case((Arg((2, 3), -3.9, -3.6), Arg((3,), 1.5, 1.75, diff=False))),
)
_mod_convention = "gradient of the continuous branch; jumps where x/y is an integer"
binary(  # np.mod is np.remainder
    np.remainder,
    lambda g, ans, x, y: g,
    lambda g, ans, x, y: -g * np.floor_divide(x, y),
    cases=_mod_cases,
    convention=_mod_convention,
    curvature="piecewise",
)
binary(
    np.fmod,
    lambda g, ans, x, y: g,
    lambda g, ans, x, y: -g * np.trunc(np.true_divide(x, y)),
    cases=_mod_cases,
    convention=_mod_convention,
    curvature="piecewise",
)
register(
    Rule(
        "divmod",
        np.divmod,
        vjps={
            0: lambda g, ans, x, y: g[1],
            1: lambda g, ans, x, y: -g[1] * ans[0],
        },
        cases=_mod_cases,
        convention="the quotient is piecewise constant; the remainder as numpy.remainder",
        family="elementwise",
        diagonal=True,
        structure=ELEMENTWISE,
    )
)


def _power_vjp_base(g, ans, x, y):
    # d/dx x**y = y x**(y-1), and 0 for y = 0 (x**0 = 1 for every x, 0**0 included).
    if _is_number(y):
        if y == 0:
            return np.zeros_like(g)
        if y == 1:
            return g
        if y == 2:  # the common square: two passes instead of three, at every order
            return 2.0 * (g * x)
        return g * y * _power(x, y - 1)
    # At x = 0, y = 0 the base 1 replaces 0 so that 0 * 0**-1 never becomes NaN.
    xs = np.where(np.logical_and(y == 0, x == 0), 1.0, x)
    return g * y * _power(xs, y - 1)


def _power_vjp_exponent(g, ans, x, y):
    if _is_number(x) and x > 0:
        return g * ans * np.log(x)
    # Where x <= 0 both factors are replaced (ans may be NaN or inf there), which makes
    # the product exactly 0 without an outer where, and finite at every order.
    positive = x > 0
    return g * np.where(positive, ans, 0.0) * np.log(_safe(x, positive))


_power_convention = (
    "d/dx x**y = y x**(y-1), with d/dx x**0 = 0 everywhere (also at x = 0, where "
    "0**0 = 1), so x**2 has gradient 0 and second derivative 2 at x = 0 and negative "
    "bases with integer exponents are exact; d/dy x**y = x**y log(x) where x > 0, and 0 "
    "where x <= 0 (0**y is constant for y > 0; for x < 0 x**y is real only at integer y, "
    "where the derivative is undefined)"
)
# Negative bases with integer-valued constant exponents, and bases that include an exact
# 0 (``kind="distinct"`` with an odd count puts one at the midpoint).
_power_cases = binary_cases(0.5, 2.0, -1.5, 2.5) + (
    Case((Arg((2, 3), -2.0, -0.5), 3.0)),
    Case((Arg((2, 3), -2.0, 2.0), 2)),
    Case((Arg((2, 3), -2.0, -0.5), Arg((2, 3), -3, 4, kind="int"))),
    Case((Arg((2, 3), -2.0, -0.5), np.array([[-2.0, -1.0, 0.0], [1.0, 2.0, 3.0]]))),
    Case((Arg((5,), -1.0, 1.0, kind="distinct"), Arg((5,), 0, 4, kind="int"))),
    Case((Arg((5,), -1.0, 1.0, kind="distinct"), 2)),
    Case((Arg((5,), -1.0, 1.0, kind="distinct"), 1.0)),
    Case((Arg((5,), -1.0, 1.0, kind="distinct"), 0.0)),
    Case((np.array([0.0, 0.5, 2.0]), Arg((2, 3), 0.5, 2.0))),
)
binary(
    np.power,
    _power_vjp_base,
    _power_vjp_exponent,
    cases=_power_cases,
    convention=_power_convention,
    complex_vjps={1: _power_exponent_complex_vjp},
)
binary(
    np.float_power,
    _power_vjp_base,
    _power_vjp_exponent,
    cases=_power_cases,
    convention=_power_convention,
    complex_vjps={1: _power_exponent_complex_vjp},
)
unary(np.negative, lambda g, ans, x: -g, curvature="linear", complex=True)
unary(np.positive, lambda g, ans, x: g, curvature="linear", complex=True)
unary(
    np.conjugate,
    lambda g, ans, x: g,
    convention="identity on real Tensors; the cotangent's conjugate on complex ones",
    curvature="linear",
    complex_vjps={0: _conj_vjp},
)
_abs_convention = "abs'(0) = 0; on complex values the gradient is z/|z| (0 at 0)"


def _abs_vjp(g, ans, x):
    if x.dtype.kind == "c":
        # |z| is a function of z and conj(z): the cotangent g conj(z)/|z|, 0 at 0.
        # Written with conj(z)/|z| rather than sign(z), a constant, so that it is
        # differentiable again.
        nonzero = ans != 0
        return g * np.conjugate(x) / np.where(nonzero, ans, 1.0)
    return g * np.sign(x)


unary(np.absolute, _abs_vjp, convention=_abs_convention, curvature="piecewise", complex=True)
unary(np.fabs, lambda g, ans, x: g * np.sign(x), convention=_abs_convention, curvature="piecewise")
unary(np.square, lambda g, ans, x: 2.0 * g * x, complex=True)
unary(np.reciprocal, lambda g, ans, x: -g * ans * ans, low=0.5, high=2.0, complex=True)
unary(
    np.sqrt,
    lambda g, ans, x: _over(g, 2.0 * ans),
    low=0.2,
    high=3.0,
    convention="infinite at 0, as the one-sided derivative",
    complex=True,
)
unary(
    np.cbrt,
    lambda g, ans, x: _over(g, 3.0 * ans * ans),
    convention="infinite at 0",
    cases=(Case((Arg((2, 3), -3.0, -0.2),)),),
)

# ---------------------------------------------------------------- exponentials and logs
unary(np.exp, lambda g, ans, x: g * ans, complex=True)
unary(np.exp2, lambda g, ans, x: g * ans * LN2, complex=True)
unary(np.expm1, lambda g, ans, x: g * (ans + 1.0), complex=True)
unary(np.log, lambda g, ans, x: g / x, low=0.2, high=3.0, complex=True)
unary(np.log2, lambda g, ans, x: g / (x * LN2), low=0.2, high=3.0, complex=True)
unary(np.log10, lambda g, ans, x: g / (x * LN10), low=0.2, high=3.0, complex=True)
unary(np.log1p, lambda g, ans, x: g / (1.0 + x), low=-0.7, high=3.0, complex=True)


def _logaddexp_vjp(exp: np.ufunc) -> tuple[Callable, Callable]:
    def vjp_x(g, ans, x, y):
        finite = np.isfinite(ans)
        if everywhere(finite):
            return g * exp(x - ans)
        # Where the result is infinite (both arguments -inf, or one +inf) x - ans is
        # NaN; the weights there are the limits: the larger argument takes it all, ties
        # split evenly. A NaN result (a NaN argument) keeps its NaN weight.
        keep = ~np.isinf(ans)
        w = exp(np.where(keep, x, 0.0) - np.where(keep, ans, 0.0))
        return g * np.where(keep, w, tie_weights(x, y))

    def vjp_y(g, ans, x, y):
        return vjp_x(g, ans, y, x)

    return vjp_x, vjp_y


_logaddexp_convention = (
    "where the result is infinite (both arguments -inf, or one +inf) the gradient goes to "
    "the larger argument, split evenly at ties, instead of NaN"
)
binary(np.logaddexp, *_logaddexp_vjp(np.exp), convention=_logaddexp_convention)
binary(np.logaddexp2, *_logaddexp_vjp(np.exp2), convention=_logaddexp_convention)

# ---------------------------------------------------------------- trigonometric
unary(np.sin, lambda g, ans, x: g * np.cos(x), complex=True)
unary(np.cos, lambda g, ans, x: -g * np.sin(x), complex=True)
unary(np.tan, lambda g, ans, x: g * (1.0 + ans * ans), low=-1.2, high=1.2, complex=True)
unary(np.arcsin, lambda g, ans, x: _over(g, np.sqrt(1.0 - x * x)), low=-0.9, high=0.9, complex=True)
unary(
    np.arccos, lambda g, ans, x: _over(-g, np.sqrt(1.0 - x * x)), low=-0.9, high=0.9, complex=True
)
unary(np.arctan, lambda g, ans, x: g / (1.0 + x * x), complex=True)


def _arctan2_radius2(y, x):
    """x**2 + y**2, with 1 at the origin (where both numerators are 0 anyway)."""
    r2 = x * x + y * y
    return np.where(r2 != 0, r2, 1.0)  # not r2 > 0: NaN must stay NaN


binary(
    np.arctan2,
    lambda g, ans, y, x: g * x / _arctan2_radius2(y, x),
    lambda g, ans, y, x: -g * y / _arctan2_radius2(y, x),
    cases=binary_cases(0.3, 2.0, 0.3, 2.0)
    + (
        Case((Arg((2, 3), 0.3, 2.0), Arg((2, 3), -2.0, -0.3))),
        Case((Arg((2, 3), -2.0, -0.3), Arg((2, 3), -2.0, 2.0))),
    ),
    convention="gradient 0 at the origin (where arctan2 is discontinuous)",
)
_hypot_convention = "gradient 0 at the origin"


def _hypot_vjp(g, ans, x, y):
    nonzero = ans != 0  # not ans > 0: a NaN result must give a NaN gradient
    return np.where(nonzero, g * x / _safe(ans, nonzero), 0.0)


binary(
    np.hypot,
    _hypot_vjp,
    lambda g, ans, x, y: _hypot_vjp(g, ans, y, x),
    convention=_hypot_convention,
    cases=binary_cases(0.3, 2.0, -2.0, -0.3),
)
unary(np.deg2rad, lambda g, ans, x: g * (np.pi / 180.0), curvature="linear")
unary(np.rad2deg, lambda g, ans, x: g * (180.0 / np.pi), curvature="linear")
unary(np.radians, lambda g, ans, x: g * (np.pi / 180.0), curvature="linear")
unary(np.degrees, lambda g, ans, x: g * (180.0 / np.pi), curvature="linear")

# sinc'(x) = (cos(pi x) - sinc(x)) / x loses digits near 0 and is 0/0 at 0; there a
# Taylor polynomial (error below 1e-16 for |x| < 0.1) takes over. A polynomial is exact
# at every order at 0 (sinc''(0) = -pi**2/3), which a "0 at 0" where would not be.
_SINC_SMALL = 0.1
_SINC_SERIES = tuple(
    (-1) ** k * np.pi ** (2 * k) * 2 * k / float(np.prod(np.arange(1, 2 * k + 2)))
    for k in range(1, 9)
)  # sinc'(x) = sum_k c_k x**(2k-1)


def _sinc_series(x):
    x2 = x * x
    acc = _SINC_SERIES[-1]
    for c in reversed(_SINC_SERIES[:-1]):
        acc = acc * x2 + c
    return acc * x


def _sinc_vjp(g, ans, x):
    small = np.abs(x) < _SINC_SMALL
    if not anywhere(small):
        return g * ((np.cos(np.pi * x) - ans) / x)
    if everywhere(small):
        return g * _sinc_series(x)
    xb = np.where(small, 1.0, x)
    big = (np.cos(np.pi * xb) - np.sinc(xb)) / xb
    return g * np.where(small, _sinc_series(np.where(small, x, 0.0)), big)


register(
    Rule(
        "sinc",
        np.sinc,
        vjps={0: _sinc_vjp},
        cases=unary_cases(-2.0, 2.0)
        + (
            Case((Arg((6,), -0.09, 0.09),)),
            Case((Arg((5,), -1.0, 1.0, kind="distinct"),)),
            Case((Arg((4,), 0.05, 0.15),)),
        ),
        convention="sinc'(0) = 0, and every higher derivative at 0 exact",
        family="elementwise",
        diagonal=True,
        structure=ELEMENTWISE,
    ),
    np.sinc,
)

# ---------------------------------------------------------------- hyperbolic
unary(np.sinh, lambda g, ans, x: g * np.cosh(x), complex=True)
unary(np.cosh, lambda g, ans, x: g * np.sinh(x), complex=True)
# g - g*ans*ans rather than g * (1 - ans*ans): the same three passes, none of them
# with a Python scalar, which costs a small-array ufunc call ~40% more.
unary(np.tanh, lambda g, ans, x: g - g * ans * ans, complex=True)
unary(np.arcsinh, lambda g, ans, x: g / np.sqrt(x * x + 1.0), complex=True)
unary(
    np.arccosh,
    lambda g, ans, x: _over(g, np.sqrt(x * x - 1.0)),
    low=1.2,
    high=3.0,
    complex_vjps={0: _arccosh_complex_vjp},
)
unary(np.arctanh, lambda g, ans, x: _over(g, 1.0 - x * x), low=-0.9, high=0.9, complex=True)
