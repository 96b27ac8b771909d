"""Which rules accept complex values: views of the rules' own declarations.

A rule is differentiated on complex values only when its entry says so
(``Rule(..., complex=True)``, ``unary(..., complex=True)``; selections made by
``_layout_rule`` accept them by default); any other refuses them with a TypeError,
never a silently wrong gradient. The conventions are in :mod:`funcdiff._core.registry`:
inside a backward pass the cotangent of ``z = x + iy`` is ``dL/dx - i dL/dy``, so the
vjps of holomorphic functions and of complex-linear maps hold as they were written
for real values. The functions of ``conj(z)`` (``conj``, ``abs``, ``vdot``, the
decompositions and norms) declare their own vjps next to the real ones
(``complex_vjps``), ``g * dw/dz + conj(g) * conj(dw/dz̄)``.

Examples
--------
>>> import funcdiff
>>> from funcdiff.rules.complex_support import complex_rule_names, own_complex_vjps
>>> "sin" in complex_rule_names(), "arctan2" in complex_rule_names()
(True, False)
>>> own_complex_vjps()["conjugate"]
[0]
"""

from __future__ import annotations

from funcdiff._core.registry import all_rules

__all__ = ["complex_rule_names", "holomorphic_rule_names", "own_complex_vjps"]


def complex_rule_names() -> list[str]:
    """Names of the differentiable rules that accept complex values, sorted."""
    return sorted({r.name for r in all_rules() if r.complex and r.differentiable})


def holomorphic_rule_names() -> list[str]:
    """Names of the differentiable rules whose vjps hold on complex values as written
    (holomorphic functions, complex-linear maps, and the few whose real vjps already
    handle complex values), sorted."""
    return sorted(
        {r.name for r in all_rules() if r.complex and r.differentiable and not r.complex_vjps}
    )


def own_complex_vjps() -> dict[str, list]:
    """``{rule name: the arguments whose vjps are replaced on complex values}``."""
    return {r.name: sorted(r.complex_vjps, key=str) for r in all_rules() if r.complex_vjps}
