"""Derivative rules, one module per family; importing this package registers them all."""

from funcdiff._core.registry import (
    FUNCTION_RULES,
    NAMED_RULES,
    UFUNC_RULES,
    Rule,
    all_rules,
)
from funcdiff.rules import (  # noqa: F401  (imported for their registrations)
    complex_linalg,
    complex_support,
    constants,
    contractions,
    eigen,
    elementwise,
    fft,
    indexing,
    linalg,
    norms,
    numerical,
    piecewise,
    rearrange,
    reductions,
    scans,
    scipy_linalg,
    shape,
    signal,
    special,
    stats,
    structure,
    zeta,
)
from funcdiff.rules.cases import Arg, Case

__all__ = ["Arg", "Case", "Rule", "UFUNC_RULES", "FUNCTION_RULES", "NAMED_RULES", "all_rules"]
