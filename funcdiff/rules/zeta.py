"""Rules for ``scipy.special.zeta``: the Hurwitz zeta function ``zeta(x, q)`` and
Riemann's ``zeta(x)``, differentiable in ``x`` and ``q`` to any order.

``scipy.special.zeta`` is a Python function that calls the private ufuncs
``_zeta(x, q)`` and ``_riemann_zeta(x)``; rules registered for those ufuncs make
``scipy.special.zeta(t, q)`` record as the user writes it.

The derivative in ``q`` has a closed form, ``d/dq zeta(x, q) = -x zeta(x + 1, q)``.
The derivatives in ``x``,

    d^n/dx^n zeta(x, q) = sum_{k >= 0} (-ln(k + q))^n (k + q)^(-x),

have none in SciPy: :func:`zeta_derivative` computes them by Euler-Maclaurin
summation (a direct sum of ``_TERMS`` terms, then the integral of the tail and
``_CORRECTIONS`` Bernoulli corrections, all differentiated in ``x`` exactly as
truncated Taylor series), which is accurate to a few units in the last place for
``x > 1``, ``q > 0``. ``zeta_derivative`` is itself a rule (its derivative in ``x`` is
the next order, in ``q`` a Leibniz sum of lower orders), so every order records.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special as sp
from scipy.special import _ufuncs

from funcdiff._core.arrays import anywhere, everywhere
from funcdiff._core.backends import first_foreign, is_foreign, on_device_of, special_module
from funcdiff._core.registry import Rule, dispatching, register
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.structure import ELEMENTWISE

__all__ = ["zeta_derivative"]

#: Terms summed directly before the Euler-Maclaurin tail (the tail starts at q + _TERMS).
_TERMS = 12
#: Bernoulli corrections of the tail: the first neglected one is below 1e-20 relative
#: for x <= 30 (it falls like (x + 2m)! / (2 pi (q + _TERMS))^(2m)).
_CORRECTIONS = 12
_BERNOULLI = sp.bernoulli(2 * _CORRECTIONS)
#: B_{2j} / (2j)! for j = 1 .. _CORRECTIONS.
_WEIGHTS = tuple(
    float(_BERNOULLI[2 * j]) / math.factorial(2 * j) for j in range(1, _CORRECTIONS + 1)
)


def _mul(p: list, r: list) -> list:
    """The product of two truncated Taylor series (lists of coefficient arrays)."""
    n = len(p)
    return [sum(p[i] * r[k - i] for i in range(k + 1)) for k in range(n)]


def _times_linear(p: list, c: np.ndarray) -> list:
    """``p(e) * (c + e)``, truncated."""
    return [c * p[0]] + [c * p[k] + p[k - 1] for k in range(1, len(p))]


def _zeta_derivative(n: int, x, q) -> np.ndarray:
    """``d^n/dx^n zeta(x, q)`` on ndarrays (NaN for q <= 0, where a log is undefined)."""
    n = int(n)
    if n < 0:
        raise ValueError(f"zeta_derivative needs an order n >= 0, got {n}")
    device = first_foreign((x, q))
    if device is None:
        x = np.asarray(x, dtype=float)
        q = np.asarray(q, dtype=float)
    else:  # a backend array (CuPy): both on its device, the sums run there
        x, q = (v if is_foreign(v) else on_device_of(np.asarray(v, float), device) for v in (x, q))
        x, q = (v if v.dtype.kind == "f" else v.astype(float) for v in (x, q))
    if n == 0:
        if device is not None:
            return special_module(device).zeta(x, q)
        return np.asarray(_ufuncs._zeta(x, q))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        direct = sum((-np.log(q + k)) ** n * (q + k) ** (-x) for k in range(_TERMS))
        a = q + _TERMS
        log_a = np.log(a)
        # a^-(x + e) as a Taylor series in e, and the bracket multiplying it:
        # a / (x - 1 + e) + 1/2 + sum_j w_j (x + e)_(2j-1) a^(1 - 2j).
        power = [a ** (-x) * (-log_a) ** k / math.factorial(k) for k in range(n + 1)]
        shifted = x - 1.0
        bracket = [a * (-1.0) ** k / shifted ** (k + 1) for k in range(n + 1)]
        bracket[0] = bracket[0] + 0.5
        rising = _times_linear([np.ones_like(x)] + [np.zeros_like(x)] * n, x)  # (x + e)_1
        for j, weight in enumerate(_WEIGHTS, start=1):
            scale = weight * a ** (1 - 2 * j)
            bracket = [b + scale * r for b, r in zip(bracket, rising)]
            rising = _times_linear(_times_linear(rising, x + (2 * j - 1)), x + 2 * j)
        tail = _mul(power, bracket)[n] * math.factorial(n)
        return direct + tail if device is not None else np.asarray(direct + tail)


@dispatching
def zeta_derivative(n, x, q):
    """``d^n/dx^n`` of the Hurwitz zeta function ``zeta(x, q)`` (dispatches to Tensors)."""
    return _zeta_derivative(n, x, q)


def _derivative_vjp_q(g, ans, n, x, q):
    # d/dq d^n/dx^n zeta(x, q) = d^n/dx^n (-x zeta(x + 1, q)), by Leibniz's rule.
    n = int(n)
    out = -x * zeta_derivative(n, x + 1.0, q)
    if n > 0:
        out = out - n * zeta_derivative(n - 1, x + 1.0, q)
    return g * out


def _hurwitz(x, q):
    """``zeta(x, q)`` in a vjp: the rule again on Tensors, the backend's own ``zeta``
    on backend arrays (SciPy's private ufunc is not among its functions)."""
    if not any(hasattr(type(v), "grad_fn") for v in (x, q)):
        device = first_foreign((x, q))
        if device is not None:
            return special_module(device).zeta(x, q)
    return _ufuncs._zeta(x, q)


_CASES = (
    Case((Arg((3, 4), 1.5, 5.0), Arg((3, 4), 0.5, 3.0))),
    Case((Arg((2, 3), 1.3, 4.0), 1.0)),
    Case((2.5, Arg((2, 3), 0.3, 4.0))),
    Case((Arg((3, 1), 2.0, 6.0), Arg((1, 4), 0.7, 2.0))),
    Case((Arg((), 1.5, 3.0), Arg((), 0.5, 2.0))),
)

register(
    Rule(
        "zeta_derivative",
        _zeta_derivative,
        vjps={
            1: lambda g, ans, n, x, q: g * zeta_derivative(np.add(n, 1), x, q),
            2: _derivative_vjp_q,
        },
        nondiff_args=frozenset({0}),
        cases=tuple(Case((1, *c.args)) for c in _CASES[:3]) + (Case((2, *_CASES[4].args)),),
        convention="n is an integer order (a constant); x > 1 and q > 0",
        family="special",
        diagonal=True,
        structure=ELEMENTWISE,
    ),
    zeta_derivative,
)

register(
    Rule(
        "zeta",
        _ufuncs._zeta,
        vjps={
            0: lambda g, ans, x, q: g * zeta_derivative(1, x, q),
            1: lambda g, ans, x, q: -g * x * _hurwitz(x + 1.0, q),
        },
        cases=_CASES,
        convention="Hurwitz zeta(x, q) for x > 1 and q > 0; d/dx by Euler-Maclaurin summation",
        family="special",
        diagonal=True,
        structure=ELEMENTWISE,
    ),
    _ufuncs._zeta,
)

_LOG_2PI = math.log(2.0 * math.pi)


def _riemann_zeta(x):
    """SciPy's ``_riemann_zeta(x)`` (what ``scipy.special.zeta(x)`` calls); on a backend
    array (CuPy), whose special functions have no Riemann zeta of one argument, the same
    function as ``zetac(x) + 1``."""
    try:
        return _ufuncs._riemann_zeta(x)
    except TypeError:
        device = None if hasattr(type(x), "grad_fn") else first_foreign((x,))
        zetac = None if device is None else getattr(special_module(device), "zetac", None)
        if zetac is None:
            raise
        return zetac(x) + 1.0


def _riemann(x):
    """``zeta(x)`` in a vjp: the rule again on Tensors, :func:`_riemann_zeta` on arrays."""
    return _ufuncs._riemann_zeta(x) if hasattr(type(x), "grad_fn") else _riemann_zeta(x)


def _riemann_zeta_vjp(g, ans, x):
    # For x >= -1/2 the Euler-Maclaurin sum continues zeta analytically to full precision.
    # Below it would cancel (its terms grow like N^(1 - x)): there the functional
    # equation zeta(x) = chi(x) zeta(1 - x), chi(x) = 2^x pi^(x-1) sin(pi x/2) gamma(1-x),
    # gives zeta'(x) = chi'(x) zeta(1 - x) - chi(x) zeta'(1 - x), with 1 - x > 3/2 (near
    # x = 0 it would cancel, the pole of zeta(1 - x) against the zero of chi). Both
    # branches are recorded functions, so every order records; each sees safe inputs.
    right = x >= -0.5
    if everywhere(right):
        return g * zeta_derivative(1, x, 1.0)
    xl = np.where(right, -1.0, x)
    scale = np.exp(xl * _LOG_2PI) / np.pi * sp.gamma(1.0 - xl)
    half = 0.5 * np.pi * xl
    chi = scale * np.sin(half)
    chi_prime = scale * (
        np.sin(half) * (_LOG_2PI - sp.digamma(1.0 - xl)) + 0.5 * np.pi * np.cos(half)
    )
    left = chi_prime * _riemann(1.0 - xl) - chi * zeta_derivative(1, 1.0 - xl, 1.0)
    if not anywhere(right):
        return g * left
    return g * np.where(right, zeta_derivative(1, np.where(right, x, 2.0), 1.0), left)


register(
    Rule(
        "riemann_zeta",
        _riemann_zeta,
        vjps={0: _riemann_zeta_vjp},
        cases=(
            Case((Arg((3, 4), 1.5, 5.0),)),
            Case((Arg((), 1.2, 3.0),)),
            Case((Arg((2, 3), -6.0, 0.9),)),
            Case((Arg((5,), -4.5, 0.5, kind="distinct"),)),  # -4, -3, ..., 0: trivial zeros
            Case((Arg((6,), -0.9, -0.1),)),  # both sides of the seam at -1/2
        ),
        convention="zeta(x) with q omitted, any x != 1; d/dx by Euler-Maclaurin summation "
        "(x >= -1/2) and the functional equation (x < -1/2)",
        family="special",
        diagonal=True,
        structure=ELEMENTWISE,
    ),
    _ufuncs._riemann_zeta,
)
