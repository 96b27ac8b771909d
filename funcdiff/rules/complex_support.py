"""Which rules accept complex values, and the vjps of the functions of ``conj(z)``.

A rule is differentiated on complex values only when it is declared here (or defined
with ``complex=True``, as the FFTs are); any other refuses them with a TypeError, never
a silently wrong gradient. The conventions are in :mod:`funcdiff._core.registry`:
inside a backward pass the cotangent of ``z = x + iy`` is ``dL/dx - i dL/dy``, so the
vjps of holomorphic functions and of complex-linear maps hold as they were written
for real values (``HOLOMORPHIC``). The functions of ``conj(z)`` (``conj``, ``real``,
``imag``, ``abs``, ``angle``, ``vdot``, the decompositions and norms in
:mod:`funcdiff.rules.complex_linalg`) get their own vjps, ``g * dw/dz + conj(g) * conj(dw/dz̄)``.

It imports the families whose rules it declares, so it finds them by name.
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.registry import Rule, all_rules
from funcdiff.rules import (  # noqa: F401  (the families declared here register first)
    complex_linalg,
    contractions,
    eigen,
    elementwise,
    indexing,
    linalg,
    norms,
    rearrange,
    reductions,
    scans,
    shape,
)
from funcdiff.rules.complex_linalg import COMPLEX_LINALG_CASES, COMPLEX_LINALG_VJPS

__all__ = ["HOLOMORPHIC", "PIECEWISE_CONSTANT", "complex_rule_names"]

#: Rules whose vjps hold on complex values as written: holomorphic functions and
#: complex-linear maps (shapes, indexing, sums, contractions without conjugation).
HOLOMORPHIC = (
    # elementwise
    "add",
    "subtract",
    "multiply",
    "divide",
    "negative",
    "positive",
    "square",
    "reciprocal",
    "sqrt",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "arcsinh",
    "arctanh",
    "real",
    # shape and indexing
    "reshape",
    "ravel",
    "transpose",
    "matrix_transpose",
    "swapaxes",
    "moveaxis",
    "rollaxis",
    "squeeze",
    "expand_dims",
    "broadcast_to",
    "broadcast_arrays",
    "copy",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "concatenate",
    "stack",
    "unstack",
    "hstack",
    "vstack",
    "dstack",
    "column_stack",
    "split",
    "array_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "append",
    "delete",
    "insert",
    "outer",
    "kron",
    "cross_last",
    "cross",
    "tile",
    "repeat",
    "flip",
    "fliplr",
    "flipud",
    "rot90",
    "roll",
    "pad",
    "diagonal",
    "diag",
    "tril",
    "triu",
    "diff",
    "ediff1d",
    "trapezoid",
    "fft.fftshift",
    "fft.ifftshift",
    "astype",
    "index_add",
    "where",
    "take",
    "take_along_axis",
    "getitem",
    "setitem",
    # reductions and scans
    "sum",
    "mean",
    "prod",
    "cumsum",
    "cumprod",
    "cumulative_sum",
    "cumulative_prod",
    "shift_last",
    "linear_recurrence",
    "average",
    "trace",
    # contractions without conjugation
    "matmul",
    "matvec",
    "linalg.matmul",
    "tensordot",
    "linalg.tensordot",
    "dot",
    "inner",
    "einsum",
    "multi_dot",
    # linear algebra: holomorphic functions of the entries
    "linalg.inv",
    "linalg.solve",
    "linalg.det",
    "linalg.matrix_power",
)

#: Piecewise-constant rules that stay constant on complex values (``rint`` rounds both
#: parts); ``sign``, which is not constant there, refuses complex values instead.
PIECEWISE_CONSTANT = ("rint", "round", "around", "isfinite", "isnan", "isinf", "equal", "not_equal")


def _conj_vjp(g, ans, x):
    return np.conjugate(g)


def _power_exponent_vjp(g, ans, x, y):
    # d/dy x**y = x**y log x (principal branch); 0 where x = 0, where 0**y is constant.
    nonzero = x != 0
    return g * np.where(nonzero, ans, 0.0) * np.log(np.where(nonzero, x, 1.0))


def _arccosh_vjp(g, ans, x):
    # 1 / sqrt(z**2 - 1) has the wrong sign left of the imaginary axis; this product
    # follows arccosh's principal branch everywhere off its cut.
    return g / (np.sqrt(x - 1.0) * np.sqrt(x + 1.0))


def _conjugating_first(vjp_a, vjp_b):
    """Complex vjps of ``f(conj(a), b)`` from the vjps ``vjp_a``/``vjp_b`` of the
    bilinear ``f(a, b)`` (vdot, vecdot, vecmat conjugate their first argument)."""

    def first(g, ans, a, b, *rest, **kwargs):
        return np.conjugate(vjp_a(g, ans, np.conjugate(a), b, *rest, **kwargs))

    def second(g, ans, a, b, *rest, **kwargs):
        return vjp_b(g, ans, np.conjugate(a), b, *rest, **kwargs)

    return {0: first, 1: second}


def _bilinear_vjps(name: str):
    """The real vjps of the rule ``name`` (bilinear: the same formulas on ``conj(a)``)."""
    rule = next(r for r in all_rules() if r.name == name)
    return _conjugating_first(rule.vjps[0], rule.vjps[1])


#: Rules with complex vjps of their own: ``{name: {argument: vjp}}``.
_COMPLEX_VJPS = {
    "conjugate": {0: _conj_vjp},
    "power": {1: _power_exponent_vjp},
    "float_power": {1: _power_exponent_vjp},
    "arccosh": {0: _arccosh_vjp},
    "vdot": _bilinear_vjps("vdot"),
    "vecdot": _bilinear_vjps("vecdot"),
    "linalg.vecdot": _bilinear_vjps("linalg.vecdot"),
    "vecmat": _bilinear_vjps("vecmat"),
    **COMPLEX_LINALG_VJPS,
}

#: Rules whose own vjps handle complex values (defined with the real ones), and the
#: norms' composites, made of rules declared here.
_SELF_HANDLING = ("absolute", "imag", "angle", "norm0", "norm", "vector_norm", "matrix_norm")


def _declare() -> None:
    by_name: dict[str, Rule] = {}
    for rule in all_rules():
        by_name.setdefault(rule.name, rule)
    for name in HOLOMORPHIC + PIECEWISE_CONSTANT + _SELF_HANDLING:
        by_name[name].allow_complex()
    for name, vjps in _COMPLEX_VJPS.items():
        by_name[name].allow_complex(vjps, COMPLEX_LINALG_CASES.get(name, ()))


_declare()


def complex_rule_names() -> list[str]:
    """Names of the differentiable rules that accept complex values, sorted."""
    return sorted({r.name for r in all_rules() if r.complex and r.differentiable})
