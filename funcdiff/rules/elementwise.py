"""Elementwise rules: NumPy's arithmetic, exponential, trigonometric and hyperbolic ufuncs.

Each entry maps an argument to ``vjp(g, ans, *args)``. Results broadcast to the
argument's shape: the engine sums them back (unbroadcast) and casts dtypes.

Conventions at kinks (the docs page is generated from the ``convention`` fields):
``abs'(0) = 0``; ties of ``maximum``/``minimum``/``fmax``/``fmin`` split the gradient
evenly; ``hypot`` at the origin has gradient 0; ``power``'s gradient with respect to
the exponent is 0 where the base is 0 or negative (where it is undefined).
"""

from __future__ import annotations

import numpy as np

from funcdiff.rules._registry import Arg, Case, Rule, register

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


def unary(ufunc: np.ufunc, vjp, low: float = -2.0, high: float = 2.0, convention: str = "") -> Rule:
    rule = Rule(
        ufunc.__name__,
        ufunc,
        vjps={0: vjp},
        cases=unary_cases(low, high),
        convention=convention,
        family="elementwise",
    )
    return register(rule)


def binary(
    ufunc: np.ufunc,
    vjp_x,
    vjp_y,
    cases: tuple[Case, ...] | None = None,
    convention: str = "",
) -> Rule:
    rule = Rule(
        ufunc.__name__,
        ufunc,
        vjps={0: vjp_x, 1: vjp_y},
        cases=binary_cases() if cases is None else cases,
        convention=convention,
        family="elementwise",
    )
    return register(rule)


def constant(ufunc: np.ufunc) -> Rule:
    """A piecewise-constant ufunc: its result never requires grad."""
    return register(Rule(ufunc.__name__, ufunc, differentiable=False, family="elementwise"))


def _safe(x, ok):
    """``x`` where ``ok``, else 1: keeps NaN and inf out of the branch ``where`` discards."""
    return np.where(ok, x, 1.0)


def _tie_weights(x, y):
    """1 where x wins, 1/2 at ties, 0 where y wins: a constant (comparisons never record)."""
    return np.where(x == y, 0.5, np.where(x > y, 1.0, 0.0))


def _fmax_weights(x, y):
    """Like ``_tie_weights``, but a NaN loses (``fmax`` ignores NaN)."""
    return np.where(np.isnan(y), 1.0, np.where(np.isnan(x), 0.0, _tie_weights(x, y)))


# ---------------------------------------------------------------- arithmetic
binary(np.add, lambda g, ans, x, y: g, lambda g, ans, x, y: g)
binary(np.subtract, lambda g, ans, x, y: g, lambda g, ans, x, y: -g)
binary(np.multiply, lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x)
binary(
    np.true_divide,
    lambda g, ans, x, y: g / y,
    lambda g, ans, x, y: -g * x / (y * y),
    cases=binary_cases(-2.0, 2.0, 0.5, 2.0),
)
register(
    Rule(
        "floor_divide",
        np.floor_divide,
        vjps={0: lambda g, ans, x, y: np.zeros_like(g), 1: lambda g, ans, x, y: np.zeros_like(g)},
        cases=binary_cases(0.1, 0.9, 1.5, 2.5),
        convention="piecewise constant: zero gradient everywhere",
        family="elementwise",
    )
)
binary(
    np.remainder,
    lambda g, ans, x, y: g,
    lambda g, ans, x, y: -g * np.floor_divide(x, y),
    cases=binary_cases(0.1, 0.9, 1.5, 2.5),
    convention="gradient of the continuous branch; jumps where x/y is an integer",
)
binary(
    np.fmod,
    lambda g, ans, x, y: g,
    lambda g, ans, x, y: -g * np.trunc(np.true_divide(x, y)),
    cases=binary_cases(0.1, 0.9, 1.5, 2.5),
    convention="gradient of the continuous branch; jumps where x/y is an integer",
)


def _power_vjp_base(g, ans, x, y):
    return g * y * np.power(x, y - 1)


def _power_vjp_exponent(g, ans, x, y):
    positive = x > 0
    return np.where(positive, g * ans * np.log(_safe(x, positive)), 0.0)


_power_convention = (
    "d/dy x**y = x**y log(x) where x > 0, and 0 where x <= 0 (undefined there)"
)
binary(
    np.power,
    _power_vjp_base,
    _power_vjp_exponent,
    cases=binary_cases(0.5, 2.0, -1.5, 2.5),
    convention=_power_convention,
)
binary(
    np.float_power,
    _power_vjp_base,
    _power_vjp_exponent,
    cases=binary_cases(0.5, 2.0, -1.5, 2.5),
    convention=_power_convention,
)
unary(np.negative, lambda g, ans, x: -g)
unary(np.positive, lambda g, ans, x: g)
_abs_convention = "abs'(0) = 0"
unary(np.absolute, lambda g, ans, x: g * np.sign(x), convention=_abs_convention)
unary(np.fabs, lambda g, ans, x: g * np.sign(x), convention=_abs_convention)
unary(np.square, lambda g, ans, x: 2.0 * g * x)
unary(np.reciprocal, lambda g, ans, x: -g * ans * ans, low=0.5, high=2.0)
unary(np.sqrt, lambda g, ans, x: g / (2.0 * ans), low=0.2, high=3.0)
unary(np.cbrt, lambda g, ans, x: g / (3.0 * ans * ans), low=0.2, high=3.0)

# ---------------------------------------------------------------- exponentials and logs
unary(np.exp, lambda g, ans, x: g * ans)
unary(np.exp2, lambda g, ans, x: g * ans * LN2)
unary(np.expm1, lambda g, ans, x: g * (ans + 1.0))
unary(np.log, lambda g, ans, x: g / x, low=0.2, high=3.0)
unary(np.log2, lambda g, ans, x: g / (x * LN2), low=0.2, high=3.0)
unary(np.log10, lambda g, ans, x: g / (x * LN10), low=0.2, high=3.0)
unary(np.log1p, lambda g, ans, x: g / (1.0 + x), low=-0.7, high=3.0)
binary(
    np.logaddexp,
    lambda g, ans, x, y: g * np.exp(x - ans),
    lambda g, ans, x, y: g * np.exp(y - ans),
)
binary(
    np.logaddexp2,
    lambda g, ans, x, y: g * np.exp2(x - ans),
    lambda g, ans, x, y: g * np.exp2(y - ans),
)

# ---------------------------------------------------------------- trigonometric
unary(np.sin, lambda g, ans, x: g * np.cos(x))
unary(np.cos, lambda g, ans, x: -g * np.sin(x))
unary(np.tan, lambda g, ans, x: g * (1.0 + ans * ans), low=-1.2, high=1.2)
unary(np.arcsin, lambda g, ans, x: g / np.sqrt(1.0 - x * x), low=-0.9, high=0.9)
unary(np.arccos, lambda g, ans, x: -g / np.sqrt(1.0 - x * x), low=-0.9, high=0.9)
unary(np.arctan, lambda g, ans, x: g / (1.0 + x * x))
binary(
    np.arctan2,
    lambda g, ans, y, x: g * x / (x * x + y * y),
    lambda g, ans, y, x: -g * y / (x * x + y * y),
    cases=binary_cases(0.3, 2.0, 0.3, 2.0),
)
_hypot_convention = "gradient 0 at the origin"


def _hypot_vjp(g, ans, x, y):
    nonzero = ans > 0
    return np.where(nonzero, g * x / _safe(ans, nonzero), 0.0)


binary(
    np.hypot,
    _hypot_vjp,
    lambda g, ans, x, y: _hypot_vjp(g, ans, y, x),
    convention=_hypot_convention,
    cases=binary_cases(0.3, 2.0, -2.0, -0.3),
)
unary(np.deg2rad, lambda g, ans, x: g * (np.pi / 180.0))
unary(np.rad2deg, lambda g, ans, x: g * (180.0 / np.pi))
unary(np.radians, lambda g, ans, x: g * (np.pi / 180.0))
unary(np.degrees, lambda g, ans, x: g * (180.0 / np.pi))

# ---------------------------------------------------------------- hyperbolic
unary(np.sinh, lambda g, ans, x: g * np.cosh(x))
unary(np.cosh, lambda g, ans, x: g * np.sinh(x))
unary(np.tanh, lambda g, ans, x: g * (1.0 - ans * ans))
unary(np.arcsinh, lambda g, ans, x: g / np.sqrt(x * x + 1.0))
unary(np.arccosh, lambda g, ans, x: g / np.sqrt(x * x - 1.0), low=1.2, high=3.0)
unary(np.arctanh, lambda g, ans, x: g / (1.0 - x * x), low=-0.9, high=0.9)

# ---------------------------------------------------------------- max/min and friends
_tie_convention = "ties split the gradient evenly between the two arguments"
_distinct = (
    Case((Arg((2, 3), kind="distinct"), Arg((2, 3), -1.9, 1.9))),
    Case((Arg((3, 1), kind="distinct"), Arg((1, 4), -1.9, 1.9))),
    Case((Arg((2, 3), kind="distinct"), 0.05)),
)
for _ufunc in (np.maximum, np.minimum):
    _sign = 1.0 if _ufunc is np.maximum else -1.0
    binary(
        _ufunc,
        lambda g, ans, x, y, s=_sign: g * _tie_weights(s * x, s * y),
        lambda g, ans, x, y, s=_sign: g * _tie_weights(s * y, s * x),
        cases=_distinct,
        convention=_tie_convention,
    )
binary(
    np.fmax,
    lambda g, ans, x, y: g * _fmax_weights(x, y),
    lambda g, ans, x, y: g * _fmax_weights(y, x),
    cases=_distinct,
    convention=_tie_convention + "; a NaN argument gets no gradient",
)
binary(
    np.fmin,
    lambda g, ans, x, y: g * _fmax_weights(-x, -y),
    lambda g, ans, x, y: g * _fmax_weights(-y, -x),
    cases=_distinct,
    convention=_tie_convention + "; a NaN argument gets no gradient",
)
binary(
    np.copysign,
    lambda g, ans, x, y: g * np.sign(x) * np.where(np.signbit(y), -1.0, 1.0),
    lambda g, ans, x, y: np.zeros_like(g),
    cases=binary_cases(0.2, 2.0, -2.0, 2.0),
    convention="d/dx copysign(x, y) = sign(x) sign(y) (0 at x = 0); zero gradient for y",
)
binary(
    np.ldexp,
    lambda g, ans, x, n: g * np.exp2(n),
    lambda g, ans, x, n: np.zeros_like(g),
    cases=(Case((Arg((2, 3)), Arg((2, 3), -2, 3, kind="int"))),),
)

# ---------------------------------------------------------------- piecewise constant
for _ufunc in (
    np.sign,
    np.floor,
    np.ceil,
    np.trunc,
    np.rint,
    np.isfinite,
    np.isnan,
    np.isinf,
    np.signbit,
    np.equal,
    np.not_equal,
    np.less,
    np.less_equal,
    np.greater,
    np.greater_equal,
    np.logical_and,
    np.logical_or,
    np.logical_xor,
    np.logical_not,
    np.bitwise_and,
    np.bitwise_or,
    np.bitwise_xor,
    np.invert,
    np.left_shift,
    np.right_shift,
    np.gcd,
    np.lcm,
    np.spacing,
    np.nextafter,
):
    constant(_ufunc)
