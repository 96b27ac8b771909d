"""The rule registry's former home, kept importable: it moved to
:mod:`funcdiff._core.registry` (the core, below the operations that use it)."""

from funcdiff._core.registry import (
    ALL,
    FUNCTION_RULES,
    NAMED_RULES,
    UFUNC_RULES,
    Arg,
    Case,
    Rule,
    all_rules,
    batch_ndim,
    dispatching,
    register,
)

__all__ = [
    "Arg",
    "Case",
    "Rule",
    "UFUNC_RULES",
    "FUNCTION_RULES",
    "NAMED_RULES",
    "register",
    "all_rules",
    "batch_ndim",
    "dispatching",
    "ALL",
]
