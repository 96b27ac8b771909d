"""Elementwise rules with kinks and jumps, and the parts of complex numbers.

``maximum``/``minimum``/``fmax``/``fmin`` (ties split the gradient evenly),
``copysign``, ``heaviside``, ``modf``, ``frexp``, ``clip``, ``nan_to_num``; ``real``,
``imag`` and ``angle``; and the piecewise-constant functions (rounding, comparisons,
logical and bitwise operations), whose results never require grad.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([1.0, 2.0], requires_grad=True)
>>> np.maximum(x, 1.0).sum().backward()
>>> x.grad
tensor([0.5, 1. ])
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.backends import as_array, copy_array, on_device_of
from funcdiff._core.registry import Rule, register
from funcdiff._core.tensor import Tensor, values_read
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.elementwise import binary, binary_cases, constant, tie_weights
from funcdiff.rules.structure import (
    DENSE,
    DENSE_LINEAR,
    ELEMENTWISE_LINEAR,
    ELEMENTWISE_PIECEWISE,
)


def _zeros(g, ans, x, y):
    """Zero cotangent of a binary ufunc (named parameters: it reads neither argument)."""
    return np.zeros_like(g)


def _max_weights(x, y):
    """Like ``tie_weights``; a NaN argument (which ``maximum`` propagates) gets the gradient."""
    return np.where(np.isnan(x), 1.0, np.where(np.isnan(y), 0.0, tie_weights(x, y)))


def _fmax_weights(x, y):
    """Like ``tie_weights``, but a NaN loses (``fmax`` ignores NaN)."""
    return np.where(np.isnan(y), 1.0, np.where(np.isnan(x), 0.0, tie_weights(x, y)))


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
        lambda g, ans, x, y, s=_sign: g * _max_weights(s * x, s * y),
        lambda g, ans, x, y, s=_sign: g * _max_weights(s * y, s * x),
        cases=_distinct,
        convention=_tie_convention + "; a NaN argument (propagated) gets the gradient",
        curvature="piecewise",
    )
binary(
    np.fmax,
    lambda g, ans, x, y: g * _fmax_weights(x, y),
    lambda g, ans, x, y: g * _fmax_weights(y, x),
    cases=_distinct,
    convention=_tie_convention + "; a NaN argument gets no gradient",
    curvature="piecewise",
)
binary(
    np.fmin,
    lambda g, ans, x, y: g * _fmax_weights(-x, -y),
    lambda g, ans, x, y: g * _fmax_weights(-y, -x),
    cases=_distinct,
    convention=_tie_convention + "; a NaN argument gets no gradient",
    curvature="piecewise",
)
binary(
    np.copysign,
    lambda g, ans, x, y: g * np.sign(x) * np.where(np.signbit(y), -1.0, 1.0)[()],
    _zeros,
    cases=binary_cases(0.2, 2.0, -2.0, 2.0) + (Case((Arg((2, 3), -2.0, -0.2), Arg((3,)))),),
    convention="d/dx copysign(x, y) = sign(x) sign(y) (0 at x = 0); zero gradient for y",
    curvature="piecewise",
)
binary(
    np.ldexp,
    lambda g, ans, x, n: g * np.exp2(n),
    _zeros,
    cases=(Case((Arg((2, 3)), Arg((2, 3), -2, 3, kind="int"))),),
    curvature="linear",
)
register(
    Rule(
        "heaviside",
        np.heaviside,
        vjps={0: _zeros, 1: lambda g, ans, x, h: np.where(x == 0, g, 0.0)},
        cases=(
            Case((Arg((2, 3)), Arg((2, 3)))),
            Case((np.array([-1.0, 0.0, 2.0]), Arg((2, 3)))),
        ),
        convention="zero gradient for x (piecewise constant); the second argument, the "
        "value at x = 0, gets the gradient where x == 0",
        family="elementwise",
        diagonal=True,
        structure=ELEMENTWISE_PIECEWISE,
    )
)

# ---------------------------------------------------------------- decompositions
register(
    Rule(
        "modf",
        np.modf,
        vjps={0: lambda g, ans, x: g[0]},
        cases=(
            Case((Arg((2, 3), 0.1, 0.9),)),
            Case((Arg((3,), -1.9, -1.1),)),
            Case((Arg((), 2.1, 2.9),)),
        ),
        convention="d frac/dx = 1 and d int/dx = 0 (the integral part is piecewise constant)",
        family="elementwise",
        diagonal=True,
        structure=ELEMENTWISE_PIECEWISE,
    )
)
register(
    Rule(
        "frexp",
        np.frexp,
        vjps={0: lambda g, ans, x: g[0] * np.exp2(-ans[1])},
        cases=(
            Case((Arg((2, 3), 1.1, 1.9),)),
            Case((Arg((3,), -3.5, -2.5),)),
            Case((Arg((), 0.3, 0.45),)),
        ),
        convention="d mantissa/dx = 2**-exponent (piecewise); the integer exponent has none",
        family="elementwise",
        diagonal=True,
        structure=ELEMENTWISE_PIECEWISE,
    )
)

# ---------------------------------------------------------------- real-input helpers
register(
    Rule(
        "real",
        lambda val: np.real(val)[...],  # a view, never the input object itself
        vjps={0: lambda g, ans, val: g},
        cases=(Case((Arg((2, 3)),)), Case((Arg(()),))),
        convention="identity on real Tensors (Tensors are always real)",
        family="elementwise",
        diagonal=True,
        structure=ELEMENTWISE_LINEAR,
        complex=True,
    ),
    np.real,
)
register(
    Rule(
        "imag",
        # A view of a complex input's imaginary parts, as np.real's of its real parts
        # (writing through it changes the input); a real input's zeros are a new array.
        lambda val: np.imag(val)[...] if np.iscomplexobj(val) else copy_array(np.imag(val)),
        # Im z = (z - conj z) / 2i: the cotangent -i g, whose real part (a real
        # input's share) is 0.
        vjps={0: lambda g, ans, val: -1j * g},
        cases=(Case((Arg((2, 3)),)), Case((Arg(()),))),
        convention="zero gradient on real Tensors; i times the gradient on complex ones",
        family="elementwise",
        diagonal=True,
        structure=DENSE_LINEAR,
        batch=batching.elementwise,
        complex=True,
    ),
    np.imag,
)


def _angle_vjp(g, ans, z, deg=False):
    # d angle = Im(conj(z) dz) / |z|**2, so the cotangent is -i g conj(z) / |z|**2
    # (0 at 0); for a real z its real part, the gradient, is 0.
    r2 = np.real(z * np.conjugate(z))
    scale = -180j / np.pi if deg else -1j
    return scale * g * np.conjugate(z) / np.where(r2 == 0, 1.0, r2)


def _angle(z, deg=False):
    return as_array(np.angle(z, deg=deg))


register(
    Rule(
        "angle",
        _angle,
        vjps={0: _angle_vjp},
        nondiff_args=frozenset({1, "deg"}),
        cases=(Case((Arg((2, 3), 0.2, 2.0),)), Case((Arg((3,), 0.2, 2.0),), {"deg": True})),
        convention="zero gradient on real Tensors (piecewise constant) and at 0",
        family="elementwise",
        diagonal=True,
        structure=DENSE,
        batch=batching.elementwise,
        complex=True,
    ),
    np.angle,
)


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    if not copy:
        raise ValueError(
            "numpy.nan_to_num(copy=False) would change a Tensor's data behind the recorded "
            "graph; use copy=True (the default) and keep the returned Tensor"
        )
    return np.nan_to_num(x, copy=True, nan=nan, posinf=posinf, neginf=neginf)


register(
    Rule(
        "nan_to_num",
        _nan_to_num,
        vjps={
            0: lambda g, ans, x, copy=True, nan=0.0, posinf=None, neginf=None: np.where(
                np.isfinite(x), g, 0.0
            )
        },
        cases=(Case((Arg((2, 3)),)), Case((Arg(()),), {"nan": 1.0, "posinf": 5.0})),
        convention="the gradient passes where x is finite and is 0 where a value was replaced",
        family="elementwise",
        diagonal=True,
        structure=ELEMENTWISE_LINEAR,
    ),
    np.nan_to_num,
)

# ---------------------------------------------------------------- piecewise constant
_CONSTANT_ON_COMPLEX = (
    np.rint,
    np.round,
    np.around,
    np.isfinite,
    np.isnan,
    np.isinf,
    np.equal,
    np.not_equal,
)
for _fn in (
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
    np.bitwise_count,
    np.invert,
    np.left_shift,
    np.right_shift,
    np.gcd,
    np.lcm,
    np.spacing,
    np.nextafter,
    # functions (NEP 18), not ufuncs
    np.round,
    np.around,
    np.fix,
    np.isposinf,
    np.isneginf,
):
    # Rounding rounds both parts of a complex value, and the tests and comparisons
    # below stay constant there too; sign, not constant on complex values, refuses them.
    constant(_fn, complex=_fn in _CONSTANT_ON_COMPLEX)


# ---------------------------------------------------------------- clip
def _clip_bounds(a_min, a_max, min, max):  # noqa: A002
    if min is not None:
        if a_min is not None:
            raise TypeError("numpy.clip: pass only one of a_min= and min=")
        a_min = min
    if max is not None:
        if a_max is not None:
            raise TypeError("numpy.clip: pass only one of a_max= and max=")
        a_max = max
    return a_min, a_max


def _clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):  # noqa: A002
    if out is not None:
        raise TypeError(
            "numpy.clip on Tensors does not support out=; use the returned Tensor instead"
        )
    lo, hi = _clip_bounds(a_min, a_max, min, max)
    return np.clip(a, lo, hi)


def _clip_sources(a, lo, hi):
    """Constant masks (from_a, from_lo, from_hi): where the result comes from.

    NumPy computes ``minimum(maximum(a, lo), hi)``, so ``hi`` wins whenever
    ``max(a, lo) >= hi`` and ``lo`` wins where ``a <= lo``; ties go to the bound.
    """
    false = on_device_of(np.zeros(np.shape(a), dtype=bool), a)
    from_hi = false if hi is None else (a >= hi) | (False if lo is None else lo >= hi)
    from_lo = false if lo is None else (a <= lo) & ~from_hi
    return ~(from_hi | from_lo), from_lo, from_hi


def _clip_vjp(which: int):
    def vjp(g, ans, a, a_min=None, a_max=None, out=None, *, min=None, max=None):  # noqa: A002
        lo, hi = _clip_bounds(a_min, a_max, min, max)
        return np.where(_clip_sources(a, lo, hi)[which], g, 0.0)

    return vjp


register(
    Rule(
        "clip",
        _clip,
        vjps={
            0: _clip_vjp(0),
            1: _clip_vjp(1),
            2: _clip_vjp(2),
            # NumPy's keyword names for the bounds, old and new (as keywords: ``min``
            # and ``max`` are also the names of rules, declared in reductions.py).
            **dict(a_min=_clip_vjp(1), a_max=_clip_vjp(2), min=_clip_vjp(1), max=_clip_vjp(2)),
        },
        cases=(
            Case((Arg((3, 4)), -1.0, 1.0)),
            Case((Arg((3, 4)), None, 0.5)),
            Case((Arg((3, 4)), -0.5, None)),
            Case((Arg((3, 4)), Arg((3, 1), -1.5, -0.5), Arg((4,), 0.5, 1.5))),
            Case((Arg((3, 4)),), dict(min=Arg((), -1.0, -0.5), max=Arg((), 0.5, 1.0))),
            Case((Arg((5,)), 1.0, Arg((5,), -0.5, 0.5))),
            Case((Arg(()), -1.0, 1.0)),
            Case((Arg((0, 2)), -1.0, 1.0)),
        ),
        convention=(
            "the gradient to x is 0 at and beyond the bounds; a bound gets the gradient "
            "where it is active (the result equals it, ties included); with a_min > a_max "
            "the result, and the gradient, go to a_max, as in NumPy"
        ),
        family="shape",
        diagonal=True,
        structure=ELEMENTWISE_PIECEWISE,
    ),
    np.clip,
)


# ---------------------------------------------------------------- real_if_close
def _real_if_close(a, tol=100):
    dtype = a.dtype if isinstance(a, Tensor) else np.result_type(a)
    if dtype.kind != "c":
        return a
    limit = float(tol) * float(np.finfo(dtype).eps) if tol > 1 else float(tol)
    # A decision on the values (traced as a branch by funcdiff.sparse and funcdiff.replay).
    if bool(np.all(np.abs(np.imag(values_read(a))) < limit)):
        return np.real(a)
    return a


register(
    Rule(
        "real_if_close",
        np.real_if_close,
        impl=_real_if_close,
        cases=(Case((Arg((3, 2)),)),),
        complex_cases=(Case((Arg((3,), kind="complex"),)),),
        convention="the real part where every imaginary part is below tol machine epsilons "
        "(a branch on the values), else the complex input unchanged",
        family="elementwise",
        complex=True,
    ),
    np.real_if_close,
)
