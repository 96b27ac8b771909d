"""scipy.special rules: gamma and error functions, Bessel functions, logistic and
information-theory functions, and the composites ``logsumexp``, ``softmax``,
``log_softmax``.

The ``scipy.special`` functions below are NumPy ufuncs, so a call on a Tensor reaches
``Tensor.__array_ufunc__`` and the rule registered for that ufunc. ``polygamma`` and
``multigammaln`` are plain Python functions, which SciPy does not dispatch (no NEP 18):
this module wraps them with :func:`dispatching` (``funcdiff.special`` exports the
wrappers) and registers the rule under both the wrapper and SciPy's function.

Every derivative is written with registered functions, so each order is again
differentiable: ``gammaln' = digamma``, ``digamma' = polygamma(1, x)`` and
``polygamma(n, x)' = polygamma(n + 1, x)``; Bessel derivatives use the recurrences
(``J_v' = (J_{v-1} - J_{v+1}) / 2`` and friends), which are regular at 0; those of the
order-1 functions use integer orders only (``J_1' = J_0 - J_1 / x``, with the power
series of ``J_1 / x`` near 0), so that they run wherever ``j0`` and ``j1`` do.

Orders of Bessel functions and the first argument of ``gammainc``/``gammaincc`` have
no derivative rule: a Tensor that requires grad there raises NotImplementedError
rather than getting a silently wrong (zero) gradient. Integer orders (``polygamma``'s
``n``, ``yn``, ``kn``, ``multigammaln``'s ``d``) are constants by definition.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special as sp
from numpy.lib.array_utils import normalize_axis_tuple

from funcdiff._core.arrays import anywhere, everywhere
from funcdiff._core.backends import as_array, on_device_of, special_module
from funcdiff._core.registry import Rule, dispatching, register
from funcdiff._core.tensor import Tensor, values_read
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.device_special import betaincc_from, on_device
from funcdiff.rules.elementwise import binary_cases, constant, unary, unary_cases
from funcdiff.rules.structure import ELEMENTWISE

SQRT_PI = float(np.sqrt(np.pi))
SQRT_2PI = float(np.sqrt(2.0 * np.pi))
LOG_SQRT_2PI = float(np.log(SQRT_2PI))
LN10 = float(np.log(10.0))
TWO_OVER_SQRT_PI = 2.0 / SQRT_PI


_unary = functools.partial(unary, family="special")


def _binary(
    ufunc, vjps, cases, convention="", nondiff=(), name=None, dispatcher=None, arg_names=()
) -> Rule:
    """Register the rule of a two-argument function ``ufunc`` (``vjps`` by position).

    ``dispatcher``: the wrapper that sends Tensors to the rule, for a function that is
    not a ufunc and so cannot dispatch by itself; the rule is registered for both.
    """
    return register(
        Rule(
            name or ufunc.__name__,
            ufunc,
            vjps=vjps,
            nondiff_args=frozenset(nondiff),
            cases=tuple(cases),
            convention=convention,
            family="special",
            diagonal=True,
            structure=ELEMENTWISE,
            arg_names=tuple(arg_names),
        ),
        *(() if dispatcher is None else (dispatcher,)),
        ufunc,
    )


def _order_cases(low: float, high: float, orders=(0.5, 1.0, 2.3)) -> tuple[Case, ...]:
    """Test points for ``f(v, x)``: scalar and array orders, broadcasting, 0-d ``x``."""
    return (
        Case((orders[0], Arg((3, 4), low, high))),
        Case((np.array(orders), Arg((2, 3), low, high))),
        Case((Arg((3, 1), 0, 3, kind="int"), Arg((1, 4), low, high))),
        Case((orders[-1], Arg((), low, high))),
        Case((Arg((2, 3), 0.0, 2.5, diff=False), Arg((2, 3), low, high))),
    )


def _int_order_cases(low: float, high: float) -> tuple[Case, ...]:
    return (
        Case((Arg((3, 1), 0, 4, kind="int"), Arg((1, 4), low, high))),
        Case((2, Arg((2, 3), low, high))),
        Case((0, Arg((), low, high))),
    )


# ---------------------------------------------------------------- gamma family
@dispatching
def polygamma(n, x):
    """``scipy.special.polygamma`` that dispatches to Tensors (see ``funcdiff.special``)."""
    return special_module(x).polygamma(n, x)  # a device's own on device arrays


@dispatching
def multigammaln(a, d):
    """``scipy.special.multigammaln`` that dispatches to Tensors (see ``funcdiff.special``)."""
    return sp.multigammaln(a, d)


_unary(
    sp.gammaln,
    lambda g, ans, x: g * special_module(x).digamma(x),  # a device's own digamma
    0.3,
    4.0,
    cases=(Case((Arg((2, 3), -2.9, -2.1),)),),
    convention="log|gamma(x)|: the derivative is digamma(x) on both sides of the poles",
)
_unary(
    sp.loggamma,
    lambda g, ans, x: g * sp.digamma(x),
    0.3,
    4.0,
    convention="real arguments only (x > 0)",
)
_unary(
    sp.gamma,
    lambda g, ans, x: g * ans * sp.digamma(x),
    0.3,
    4.0,
    cases=(Case((Arg((2, 3), -1.9, -1.1),)),),
)
_unary(  # sp.psi is sp.digamma
    sp.digamma,
    lambda g, ans, x: g * polygamma(1, x),
    0.3,
    4.0,
    cases=(Case((Arg((2, 3), -1.9, -1.1),)),),
    name="digamma",
)


def _rgamma_vjp(g, ans, x):
    # For x >= 1/2, (1/gamma)' = -digamma(x) / gamma(x). To the left the reflection
    # 1/gamma(x) = gamma(1 - x) sin(pi x) / pi gives a formula that is regular at the
    # poles of gamma (0, -1, -2, ...), where 1/gamma is 0 with slope (-1)**n n!, at
    # every order.
    right = x >= 0.5
    if everywhere(right):
        return -g * ans * sp.digamma(x)
    xl = np.where(right, 0.0, x)
    left = sp.gamma(1.0 - xl) * (
        np.cos(np.pi * xl) - sp.digamma(1.0 - xl) * np.sin(np.pi * xl) / np.pi
    )
    if not anywhere(right):
        return g * left
    return g * np.where(right, -ans * sp.digamma(np.where(right, x, 1.0)), left)


_unary(
    sp.rgamma,
    _rgamma_vjp,
    0.6,
    4.0,
    cases=(
        Case((Arg((2, 3), -3.5, 0.4),)),
        Case((Arg((5,), -2.0, 0.0, kind="distinct"),)),  # -1.0 exactly: a pole of gamma
        Case((Arg((4,), -1.0, 2.0),)),
    ),
    convention="exact at the poles of gamma (x = 0, -1, ...), where 1/gamma is 0",
)


def _polygamma_vjp(g, ans, n, x):
    return g * polygamma(np.add(n, 1), x)


_binary(
    sp.polygamma,
    {1: _polygamma_vjp},
    (
        Case((1, Arg((3, 4), 0.3, 4.0))),
        Case((np.array([0, 1, 2]), Arg((2, 3), 0.3, 4.0))),
        Case((Arg((3, 1), 0, 4, kind="int"), Arg((1, 4), 0.5, 3.0))),
        Case((3, Arg((), 0.5, 3.0))),
    ),
    convention="n is an integer order (a constant)",
    nondiff=(0,),
    dispatcher=polygamma,
)


def _multigammaln_vjp(g, ans, a, d):
    total = sp.digamma(a)
    for j in range(1, int(d)):
        total = total + sp.digamma(a - 0.5 * j)
    return g * total


_binary(
    sp.multigammaln,
    {0: _multigammaln_vjp},
    (Case((Arg((3,), 2.0, 4.0), 3)), Case((Arg((), 1.5, 3.0), 2))),
    convention="d is an integer dimension (a constant)",
    nondiff=(1,),
    dispatcher=multigammaln,
)


def _beta_vjp(g, ans, a, b):
    return g * ans * (sp.digamma(a) - sp.digamma(a + b))


def _betaln_vjp(g, ans, a, b):
    return g * (sp.digamma(a) - sp.digamma(a + b))


_binary(
    sp.beta,
    {0: _beta_vjp, 1: lambda g, ans, a, b: _beta_vjp(g, ans, b, a)},
    binary_cases(0.5, 3.0),
)
_binary(
    sp.betaln,
    {0: _betaln_vjp, 1: lambda g, ans, a, b: _betaln_vjp(g, ans, b, a)},
    binary_cases(0.5, 3.0),
)


def _gammainc_density(a, x):
    """x**(a-1) exp(-x) / gamma(a), finite at x = 0 for a >= 1 (xlogy's 0 log 0 = 0)."""
    return np.exp(sp.xlogy(a - 1.0, x) - x - sp.gammaln(a))


_gammainc_cases = (
    Case((1.5, Arg((3, 4), 0.2, 3.0))),
    Case((np.array([0.5, 1.0, 2.5]), Arg((2, 3), 0.2, 3.0))),
    Case((Arg((2, 1), 0.5, 3.0, diff=False), Arg((1, 3), 0.2, 3.0))),
    Case((2.0, Arg((), 0.2, 3.0))),
)
_binary(
    sp.gammainc,
    {1: lambda g, ans, a, x: g * _gammainc_density(a, x)},
    _gammainc_cases,
    convention="derivative with respect to x only; a Tensor requiring grad in a raises",
    arg_names=("a", "x"),
)
_binary(
    sp.gammaincc,
    {1: lambda g, ans, a, x: -g * _gammainc_density(a, x)},
    _gammainc_cases,
    convention="derivative with respect to x only; a Tensor requiring grad in a raises",
    arg_names=("a", "x"),
)


def _betainc_density(a, b, x):
    """x**(a-1) (1-x)**(b-1) / B(a, b), finite at the ends where the exponent is 0."""
    return np.exp(sp.xlogy(a - 1.0, x) + sp.xlog1py(b - 1.0, -x) - sp.betaln(a, b))


_betainc_cases = (
    Case((1.5, 2.5, Arg((3, 4), 0.1, 0.9))),
    Case((np.array([0.5, 1.0, 3.0]), 2.0, Arg((2, 3), 0.1, 0.9))),
    Case((Arg((2, 1), 0.5, 3.0, diff=False), Arg((1, 3), 0.5, 3.0, diff=False), Arg((), 0.2, 0.8))),
)
# cupyx.scipy.special has no betaincc: on backend arrays it comes from betainc.
for _ufunc, _sign, _forward in (
    (sp.betainc, 1.0, sp.betainc),
    (sp.betaincc, -1.0, on_device(sp.betaincc, betaincc_from)),
):
    register(
        Rule(
            _ufunc.__name__,
            _forward,
            vjps={2: lambda g, ans, a, b, x, s=_sign: s * g * _betainc_density(a, b, x)},
            cases=_betainc_cases,
            convention="derivative with respect to x only; a Tensor requiring grad in a or b "
            "raises",
            family="special",
            diagonal=True,
            structure=ELEMENTWISE,
        ),
        _ufunc,
    )


def _stdtr_density(df, t):
    """Student's t density; log poch(df/2, 1/2) written as log(sqrt(pi)) - betaln(df/2, 1/2)."""
    half = 0.5 * df
    log_norm = -sp.betaln(half, 0.5) - 0.5 * np.log(df)
    return np.exp(log_norm - (half + 0.5) * np.log1p(t * t / df))


_binary(
    sp.stdtr,
    {1: lambda g, ans, df, t: g * _stdtr_density(df, t)},
    (
        Case((3.0, Arg((3, 4), -3.0, 3.0))),
        Case((np.array([0.7, 2.0, 30.0]), Arg((2, 3), -3.0, 3.0))),
        Case((Arg((2, 1), 0.5, 10.0, diff=False), Arg((1, 3), -3.0, 3.0))),
    ),
    convention="derivative with respect to t only; a Tensor requiring grad in df raises",
)

# ---------------------------------------------------------------- error functions
# The sign of the gamma function: piecewise constant, its result never requires grad.
constant(sp.gammasgn)
_unary(sp.erf, lambda g, ans, x: g * TWO_OVER_SQRT_PI * np.exp(-x * x), complex=True)
_unary(sp.erfc, lambda g, ans, x: -g * TWO_OVER_SQRT_PI * np.exp(-x * x), complex=True)
_unary(
    sp.erfcx,
    lambda g, ans, x: g * (2.0 * x * ans - TWO_OVER_SQRT_PI),
    -2.0,
    3.0,
    cases=(Case((Arg((3,), 5.0, 30.0),)),),
)
_unary(sp.erfinv, lambda g, ans, x: g * (0.5 * SQRT_PI) * np.exp(ans * ans), -0.9, 0.9)
_unary(sp.erfcinv, lambda g, ans, x: -g * (0.5 * SQRT_PI) * np.exp(ans * ans), 0.1, 1.9)
_unary(sp.ndtr, lambda g, ans, x: g * np.exp(-0.5 * x * x) / SQRT_2PI, -3.0, 3.0)
_unary(
    sp.log_ndtr,
    # phi(x) / Phi(x) as one exponential, so neither underflows for very negative x.
    lambda g, ans, x: g * np.exp(-0.5 * x * x - ans - LOG_SQRT_2PI),
    -3.0,
    3.0,
    cases=(Case((Arg((3,), -30.0, -10.0),)), Case((Arg((3,), 4.0, 8.0),))),
)
_unary(sp.ndtri, lambda g, ans, x: g * SQRT_2PI * np.exp(0.5 * ans * ans), 0.05, 0.95)

# ---------------------------------------------------------------- logistic and friends
_unary(sp.expit, lambda g, ans, x: g * ans * (1.0 - ans), -4.0, 4.0)
_unary(sp.logit, lambda g, ans, x: g / (x * (1.0 - x)), 0.05, 0.95)
_unary(
    sp.log_expit,
    lambda g, ans, x: g * sp.expit(-x),
    -4.0,
    4.0,
    cases=(Case((Arg((3,), -40.0, 40.0),)),),
)
_unary(
    sp.entr,
    lambda g, ans, x: -g * (1.0 + np.log(x)),
    0.1,
    3.0,
    convention="-(1 + log x): +inf at x = 0 (the one-sided slope), NaN for x < 0",
)


def _xlogy_vjp_x(g, ans, x, y):
    # log(y), and log(1) = 0 at x = y = 0, where the value convention 0 log 0 = 0 is
    # extended to the derivative instead of -inf.
    return g * np.log(np.where(np.logical_and(x == 0, y == 0), 1.0, y))


def _xlogy_vjp_y(g, ans, x, y):
    # x / y is 0 wherever x == 0 (also at y = 0): the safe y there is 1.
    return g * x / np.where(np.logical_and(x == 0, y == 0), 1.0, y)


_x_with_zeros = Case((np.array([0.0, 1.0, 2.0]), Arg((2, 3), 0.2, 2.0)))
_binary(
    sp.xlogy,
    {0: _xlogy_vjp_x, 1: _xlogy_vjp_y},
    binary_cases(0.1, 2.0, 0.2, 3.0)
    + (
        _x_with_zeros,
        Case((Arg((5,), -1.0, 1.0, kind="distinct"), Arg((5,), 0.5, 2.0))),
    ),
    convention="d/dx = log(y) and d/dy = x/y; where x = 0 the y-gradient is 0, and at "
    "x = y = 0 both are 0 (extending 0 log 0 = 0)",
)


def _xlog1py_safe(x, y):
    return np.where(np.logical_and(x == 0, y == -1), 0.0, y)


_binary(
    sp.xlog1py,
    {
        0: lambda g, ans, x, y: g * np.log1p(_xlog1py_safe(x, y)),
        1: lambda g, ans, x, y: g * x / (1.0 + _xlog1py_safe(x, y)),
    },
    binary_cases(0.1, 2.0, -0.5, 2.0) + (_x_with_zeros,),
    convention="d/dx = log1p(y) and d/dy = x/(1+y); where x = 0 the y-gradient is 0, and "
    "at x = 0, y = -1 both are 0",
)


def _rel_entr_safe(x, y):
    return np.where(x > 0, x, 1.0), np.where(x > 0, y, 1.0)


def _rel_entr_vjp_x(g, ans, x, y):
    xs, ys = _rel_entr_safe(x, y)
    return g * np.where(x > 0, np.log(xs) - np.log(ys) + 1.0, -np.inf)


def _rel_entr_vjp_y(g, ans, x, y):
    xs, ys = _rel_entr_safe(x, y)
    return g * np.where(x > 0, -xs / ys, 0.0)


_binary(
    sp.rel_entr,
    {0: _rel_entr_vjp_x, 1: _rel_entr_vjp_y},
    binary_cases(0.2, 2.0, 0.2, 2.0) + (_x_with_zeros,),
    convention="d/dx = log(x/y) + 1 (-inf at x = 0, the one-sided slope), d/dy = -x/y "
    "(0 where x = 0)",
)
_binary(
    sp.kl_div,
    {
        0: lambda g, ans, x, y: _rel_entr_vjp_x(g, ans, x, y) - g,
        1: lambda g, ans, x, y: _rel_entr_vjp_y(g, ans, x, y) + g,
    },
    binary_cases(0.2, 2.0, 0.2, 2.0) + (_x_with_zeros,),
    convention="d/dx = log(x/y) (-inf at x = 0), d/dy = 1 - x/y",
)


def _huber_vjp_delta(g, ans, delta, r):
    inside = np.abs(r) <= delta
    return g * np.where(delta >= 0, np.where(inside, 0.0, np.abs(r) - delta), np.nan)


def _huber_vjp_r(g, ans, delta, r):
    inside = np.abs(r) <= delta
    return g * np.where(delta >= 0, np.where(inside, r, delta * np.sign(r)), np.nan)


_huber_cases = (
    Case((Arg((), 0.5, 1.5), Arg((2, 3), -3.0, 3.0))),
    Case((1.0, Arg((3, 4), -3.0, 3.0))),
    Case((Arg((2, 3), 0.5, 1.5), Arg((2, 3), -3.0, 3.0))),
    Case((Arg((3, 1), 0.2, 2.0), Arg((1, 4), -2.0, 2.0))),
)
_binary(
    sp.huber,
    {0: _huber_vjp_delta, 1: _huber_vjp_r},
    _huber_cases,
    convention="|r| == delta uses the quadratic piece (the first derivative is "
    "continuous there, the second jumps); NaN for delta < 0, where huber is inf",
)


def _pseudo_huber_parts(delta, r):
    h = np.hypot(delta, r)
    return h, np.where(h > 0, h, 1.0)


def _pseudo_huber_vjp_delta(g, ans, delta, r):
    # delta**2 (sqrt(1 + (r/delta)**2) - 1) = delta h - delta**2 with h = hypot(delta, r).
    h, hs = _pseudo_huber_parts(delta, r)
    d = h - delta
    return g * np.where(delta >= 0, d * d / hs, np.nan)


def _pseudo_huber_vjp_r(g, ans, delta, r):
    h, hs = _pseudo_huber_parts(delta, r)
    return g * np.where(delta >= 0, delta * r / hs, np.nan)


_binary(
    sp.pseudo_huber,
    {0: _pseudo_huber_vjp_delta, 1: _pseudo_huber_vjp_r},
    _huber_cases,
    convention="at delta = 0 the r-gradient is 0 and the delta-gradient is |r| (one-sided); "
    "NaN for delta < 0, where pseudo_huber is inf",
)

# ---------------------------------------------------------------- Bessel functions
# The derivatives of the order-1 functions use integer orders only (``J1' = J0 - J1/x``
# and friends), which every backend's special-function module has; ``J1/x`` and ``I1/x``
# are regular at 0, where their power series replaces the quotient.
_J1_SERIES = tuple(
    (-1.0) ** k / (2.0 * math.factorial(k) * math.factorial(k + 1)) for k in range(10)
)
_I1_SERIES = tuple(abs(c) for c in _J1_SERIES)


def _first_order_over_x(f, series, x):
    """``f(x) / x`` for ``f`` = ``j1`` or ``i1``: the power series in ``x**2 / 4``
    (``series``) for ``|x| < 1``, where the quotient would lose digits in its
    derivatives, and the quotient elsewhere; every order stays exact at 0."""
    small = np.abs(x) < 1.0
    safe = np.where(small, 1.0, x)
    t = x * x * 0.25
    power_series = series[-1]
    for c in series[-2::-1]:
        power_series = power_series * t + c
    return np.where(small, power_series, f(safe) / safe)


def _j1_vjp(g, ans, x):
    return g * (sp.j0(x) - _first_order_over_x(sp.j1, _J1_SERIES, x))


def _i1_vjp(g, ans, x):
    return g * (sp.i0(x) - _first_order_over_x(sp.i1, _I1_SERIES, x))


def _i1e_vjp(g, ans, x):
    # i1e = exp(-|x|) i1: i1e' = i0e - exp(-|x|) i1 / x - sign(x) i1e
    over_x = np.exp(-np.abs(x)) * _first_order_over_x(sp.i1, _I1_SERIES, x)
    return g * (sp.i0e(x) - over_x - np.sign(x) * ans)


_unary(sp.j0, lambda g, ans, x: -g * sp.j1(x), -4.0, 4.0)
_unary(sp.j1, _j1_vjp, -4.0, 4.0, cases=(Case((Arg((3, 4), -1.2, 1.2),)),))
_unary(sp.y0, lambda g, ans, x: -g * sp.y1(x), 0.3, 4.0)
_unary(sp.y1, lambda g, ans, x: g * (sp.y0(x) - sp.y1(x) / x), 0.3, 4.0)
_unary(sp.i0, lambda g, ans, x: g * sp.i1(x), -3.0, 3.0)
_unary(sp.i1, _i1_vjp, -3.0, 3.0, cases=(Case((Arg((3, 4), -1.2, 1.2),)),))
_unary(
    sp.i0e,
    lambda g, ans, x: g * (sp.i1e(x) - np.sign(x) * ans),
    -3.0,
    3.0,
    convention="kink at 0 (exp(-|x|)): gradient 0 there, like abs",
)
_unary(sp.i1e, _i1e_vjp, -3.0, 3.0, cases=(Case((Arg((3, 4), -1.2, 1.2),)),))
_unary(sp.k0, lambda g, ans, x: -g * sp.k1(x), 0.3, 4.0)
_unary(sp.k1, lambda g, ans, x: -g * (sp.k0(x) + sp.k1(x) / x), 0.3, 4.0)
_unary(sp.k0e, lambda g, ans, x: g * (ans - sp.k1e(x)), 0.3, 4.0)
_unary(sp.k1e, lambda g, ans, x: g * (ans - sp.k0e(x) - ans / x), 0.3, 4.0)
# np.i0 is a NumPy function (NEP 18), not a ufunc.
register(
    Rule(
        "numpy.i0",
        np.i0,
        vjps={0: lambda g, ans, x: g * sp.i1(x)},
        cases=unary_cases(-3.0, 3.0)[:2],
        family="special",
        diagonal=True,
        structure=ELEMENTWISE,
    ),
    np.i0,
)


def _bessel_rule(ufunc, recurrence, low, high, *, integer_order=False, convention=""):
    """``f(v, x)`` whose x-derivative is ``recurrence(v, x, ans)``; the order v has none."""
    what = (
        "the integer order n is a constant"
        if integer_order
        else ("derivative with respect to x only; a Tensor requiring grad in the order v raises")
    )
    return _binary(
        ufunc,
        {1: lambda g, ans, v, x: g * recurrence(v, x, ans)},
        _int_order_cases(low, high) if integer_order else _order_cases(low, high),
        convention=what + (f"; {convention}" if convention else ""),
        nondiff=(0,) if integer_order else (),
        arg_names=("n" if integer_order else "v", "x"),
    )


def _cylinder_recurrence(f):
    """``Z_v' = (Z_{v-1} - Z_{v+1}) / 2``: the x-derivative of ``J_v`` and ``Y_v`` (and of
    ``jve``, ``yve``, which equal them for real x)."""
    return lambda v, x, ans: 0.5 * (f(v - 1.0, x) - f(v + 1.0, x))


# sp.jn is sp.jv.
_bessel_rule(sp.jv, _cylinder_recurrence(sp.jv), 0.3, 4.0)
_bessel_rule(sp.jve, _cylinder_recurrence(sp.jve), 0.3, 4.0, convention="real x, where jve = jv")
_bessel_rule(sp.yv, _cylinder_recurrence(sp.yv), 0.3, 4.0)
_bessel_rule(sp.yve, _cylinder_recurrence(sp.yve), 0.3, 4.0, convention="real x, where yve = yv")
_bessel_rule(sp.iv, lambda v, x, ans: 0.5 * (sp.iv(v - 1.0, x) + sp.iv(v + 1.0, x)), 0.3, 3.0)
_bessel_rule(
    sp.ive,
    lambda v, x, ans: 0.5 * (sp.ive(v - 1.0, x) + sp.ive(v + 1.0, x)) - np.sign(x) * ans,
    0.3,
    3.0,
)
_bessel_rule(sp.kv, lambda v, x, ans: -0.5 * (sp.kv(v - 1.0, x) + sp.kv(v + 1.0, x)), 0.3, 4.0)
_bessel_rule(
    sp.kve, lambda v, x, ans: ans - 0.5 * (sp.kve(v - 1.0, x) + sp.kve(v + 1.0, x)), 0.3, 4.0
)
_bessel_rule(
    sp.yn,
    lambda n, x, ans: 0.5 * (sp.yn(np.subtract(n, 1), x) - sp.yn(np.add(n, 1), x)),
    0.3,
    4.0,
    integer_order=True,
)
_bessel_rule(
    sp.kn,
    lambda n, x, ans: -0.5 * (sp.kn(np.subtract(n, 1), x) + sp.kn(np.add(n, 1), x)),
    0.3,
    4.0,
    integer_order=True,
)

# ---------------------------------------------------------------- elementary functions
_unary(sp.exp10, lambda g, ans, x: g * ans * LN10)
_unary(sp.cosm1, lambda g, ans, x: -g * np.sin(x))
_unary(sp.exp2, lambda g, ans, x: g * ans * float(np.log(2.0)), name="special.exp2")
_unary(sp.expm1, lambda g, ans, x: g * (ans + 1.0), name="special.expm1")
_unary(sp.log1p, lambda g, ans, x: g / (1.0 + x), -0.7, 3.0, name="special.log1p")
_unary(sp.cbrt, lambda g, ans, x: g / (3.0 * ans * ans), 0.2, 3.0, name="special.cbrt")


# ---------------------------------------------------------------- composites
def _data(v):
    return values_read(v) if isinstance(v, Tensor) else as_array(v)


def logsumexp_tensor(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``scipy.special.logsumexp`` built from recorded NumPy calls (any order).

    The shift ``m`` (the largest entry with a non-zero weight) is a constant: it cancels
    exactly in ``m + log(sum(b exp(a - m)))``, so it changes no derivative. As in SciPy,
    the terms at the maximum are split off so ``log1p`` keeps the digits of the rest.
    """
    ad = _data(a)
    bd = None if b is None else _data(b)
    shape = ad.shape if bd is None else np.broadcast_shapes(ad.shape, bd.shape)
    if not shape:  # SciPy works on at least one axis
        a = np.reshape(a, (1,))
        ad = ad.reshape(1)
        if b is not None:
            b = np.reshape(b, (1,))
            bd = bd.reshape(1)
        shape = (1,)
    axes = normalize_axis_tuple(tuple(range(len(shape))) if axis is None else axis, len(shape))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        live = ad if bd is None else np.where(bd != 0, ad, -np.inf)
        live = np.broadcast_to(live, shape)
        if any(shape[ax] == 0 for ax in axes):  # an empty sum: log 0, as SciPy
            m = np.full([1 if i in axes else n for i, n in enumerate(shape)], -np.inf)
            m = on_device_of(m, ad)
        else:
            m = np.max(live, axis=axes, keepdims=True)
        m_finite = np.isfinite(m)
        m = np.where(m_finite, m, 0.0)
        if bd is not None:
            # A zero weight removes its entry from the value. It is kept in the
            # computation (so the gradient with respect to b is exact there) unless its
            # exponential would overflow, or it is inf or NaN.
            drop = (bd == 0) & ~(ad - m <= 700.0)
            if np.any(drop):
                a = np.where(drop, -np.inf, a)
        e = np.exp(a - m)
        w = e if b is None else b * e
        w = w if np.shape(w) == shape else np.broadcast_to(w, shape)
        top = (live == m) & m_finite
        head = np.sum(np.where(top, w, 0.0), axis=axes, keepdims=True)
        tail = np.sum(np.where(top, 0.0, w), axis=axes, keepdims=True)
        hd, td = _data(head), _data(tail)
        head_zero = hd == 0
        ratio = np.where(head_zero, 0.0, td / np.where(head_zero, 1.0, hd))
        zero = np.where(head_zero, td == 0, ratio == -1.0)  # the sum vanishes
        flip = ~head_zero & (ratio < -1.0)  # |1 + r| = 1 + (-r - 2) there
        sgn = np.where(head_zero, np.sign(td), np.sign(hd) * np.where(flip, -1.0, 1.0))
        sgn = np.where(zero, 0.0, np.where(np.isnan(hd + td), np.nan, sgn))
        use_head = ~head_zero & ~zero
        hs = np.where(use_head, head, 1.0)
        r = tail / hs
        y = np.where(use_head, np.where(flip, -r - 2.0, r), 0.0)
        with_head = np.log(np.abs(hs)) + np.log1p(y)
        ts = np.where(head_zero & ~zero, tail, 1.0)
        out = np.where(zero, -np.inf, np.where(head_zero, np.log(np.abs(ts)), with_head)) + m
        if not return_sign and np.any(sgn < 0):
            out = np.where(sgn < 0, np.nan, out)
    if not keepdims:
        out = np.squeeze(out, axis=axes)
        sgn = np.squeeze(sgn, axis=axes)
    if return_sign:
        return out, sgn if isinstance(sgn, Tensor) else Tensor(sgn)
    return out


def softmax_tensor(x, axis=None):
    """``scipy.special.softmax`` from recorded NumPy calls; the shift is a constant."""
    xd = _data(x)
    with np.errstate(invalid="ignore"):
        m = np.max(xd, axis=axis, keepdims=True)
        e = np.exp(x - m)
        return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax_tensor(x, axis=None):
    """``scipy.special.log_softmax`` from recorded NumPy calls; the shift is a constant."""
    xd = _data(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.max(xd, axis=axis, keepdims=True)
        shifted = x - np.where(np.isfinite(m), m, 0.0)
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _first(result):
    return result[0]


register(
    Rule(
        "logsumexp",
        sp.logsumexp,
        impl=logsumexp_tensor,
        cases=(
            Case((Arg((3, 4)),)),
            Case((Arg((3, 4)),), {"axis": 1}),
            Case((Arg((2, 3, 4)),), {"axis": (0, 2), "keepdims": True}),
            Case((Arg(()),)),
            Case((Arg((3, 4)),), {"axis": -1, "b": Arg((3, 4), 0.2, 2.0)}),
            Case((Arg((4,)),), {"axis": -1, "b": Arg((2, 4), 0.5, 1.5)}),
            Case(
                (Arg((3, 4)),),
                {"axis": 1, "b": np.array([1.0, 0.0, -0.5, 2.0]), "return_sign": True},
                output=_first,
            ),
            Case(
                (Arg((3, 4)),),
                {"axis": 0, "b": Arg((3, 1), -1.0, 1.0), "return_sign": True},
                output=_first,
            ),
            Case((Arg((0, 3)),), {"axis": 0}),
        ),
        convention="the max shift is a constant; zero weights drop their entry from the "
        "value (and its gradient with respect to a); a slice whose sum is 0 (all entries "
        "-inf, or cancelling weights) gives -inf with gradient 0",
        family="special",
    ),
    sp.logsumexp,
)
_softmax_cases = (
    Case((Arg((3, 4)),)),
    Case((Arg((3, 4)),), {"axis": 1}),
    Case((Arg((2, 3, 4)),), {"axis": (0, 2)}),
    Case((Arg(()),)),
)
for _fn, _impl in ((sp.softmax, softmax_tensor), (sp.log_softmax, log_softmax_tensor)):
    register(
        Rule(
            _fn.__name__,
            _fn,
            impl=_impl,
            cases=_softmax_cases,
            family="special",
            convention="the max shift is a constant",
        ),
        _fn,
    )
