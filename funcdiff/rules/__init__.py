"""Derivative rules, one module per family; importing this package registers them all.

Each operation is one ``Rule(...)`` entry in the module of its family, holding every
fact about it: the forward, the vjps, the test cases, the Jacobian structure
(:mod:`funcdiff.rules.structure`), and whether and how it accepts complex values
(:mod:`funcdiff.rules.complex_support` lists them). :mod:`funcdiff.rules.cases` holds
the test-point types, :mod:`funcdiff.rules.linalg_common` the helpers the linear-algebra
families share.
"""

from funcdiff._core.registry import (
    FUNCTION_RULES,
    NAMED_RULES,
    UFUNC_RULES,
    Rule,
    Structure,
    all_rules,
)
from funcdiff.rules import (  # noqa: F401  (imported for their registrations)
    choosing,
    complex_linalg,
    complex_support,
    constants,
    contractions,
    creation,
    eigen,
    elementwise,
    fft,
    indexing,
    linalg,
    matrix_equations,
    norms,
    numerical,
    piecewise,
    rearrange,
    reductions,
    scans,
    scipy_linalg,
    shape,
    signal,
    sparse_linalg,
    sparse_matmul,
    special,
    statistics,
    stats,
    structure,
    zeta,
)
from funcdiff.rules.cases import Arg, Case

__all__ = [
    "Arg",
    "Case",
    "Rule",
    "Structure",
    "UFUNC_RULES",
    "FUNCTION_RULES",
    "NAMED_RULES",
    "all_rules",
]
