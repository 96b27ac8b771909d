"""Every rule that accepts complex values, on complex values, against finite differences.

The complex cases come from each rule's real ones (:func:`funcdiff.testing.complex_cases`)
and its ``complex_cases``; the checker differentiates along the real and the imaginary
axis of every input, at first and second order, in reverse and forward mode.
"""

from __future__ import annotations

import pytest

import funcdiff  # noqa: F401  (registers the rules)
from funcdiff._core.registry import UFUNC_RULES, all_rules
from funcdiff.testing import check_complex_rule_case, complex_cases

_PARAMS = [
    pytest.param(rule, case, i, id=f"{rule.name}-{i}")
    for rule in all_rules()
    for i, case in enumerate(complex_cases(rule))
]


@pytest.mark.parametrize(("rule", "case", "index"), _PARAMS)
def test_complex_rule(rule, case, index):
    result = check_complex_rule_case(rule, case, index)
    assert result.ok, "\n".join(result.failures)


def test_every_complex_rule_has_a_complex_case():
    missing = [
        r.name for r in all_rules() if r.complex and r.differentiable and not complex_cases(r)
    ]
    assert not missing


def test_ufuncs_from_complex_to_real_handle_complex():
    # The positional fast path records a ufunc with a real result without looking at
    # its arguments' dtypes: every differentiable ufunc that maps complex values to
    # real ones must therefore accept complex values in its own vjps.
    for ufunc, rule in UFUNC_RULES.items():
        signatures = [t.split("->") for t in ufunc.types]
        to_real = any("D" in ins and "D" not in outs for ins, outs in signatures)
        if rule.differentiable and to_real:
            assert rule.complex and not rule.complex_vjps, ufunc.__name__
