"""Every registered rule, checked against finite differences from its own test cases."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff  # noqa: F401  (registers the rules)
from funcdiff.ops import dispatch as _ops
from funcdiff.rules import Arg, Case, Rule, all_rules
from funcdiff.testing import check_rule_case

DIFFERENTIABLE = [r for r in all_rules() if r.differentiable]
CASES = [
    pytest.param(rule, i, case, id=f"{rule.name}-{i}")
    for rule in DIFFERENTIABLE
    for i, case in enumerate(rule.cases)
]


@pytest.fixture(autouse=True)
def _stand_ins_for_every_size(monkeypatch):
    # Shapes-only rules save zero-stride stand-ins of large arguments in place of the
    # arrays; the test cases are small, so make every size large enough: each rule is
    # then checked with what it saves for big inputs.
    monkeypatch.setattr(_ops, "STAND_IN_MIN_BYTES", 0)


@pytest.mark.parametrize("rule, index, case", CASES)
def test_rule_against_finite_differences(rule: Rule, index: int, case: Case) -> None:
    result = check_rule_case(rule, case, index)
    assert result.ok, f"{rule.name} case {index}:\n" + "\n".join(result.failures)


@pytest.mark.parametrize("rule", DIFFERENTIABLE, ids=lambda r: r.name)
def test_every_rule_has_a_test_domain(rule: Rule) -> None:
    assert rule.cases, f"rule {rule.name!r} has no test cases (Case entries)"


def test_checker_rejects_a_wrong_first_derivative() -> None:
    wrong = Rule("sin", np.sin, vjps={0: lambda g, ans, x: g * np.cos(x) * 1.01})
    result = check_rule_case(wrong, Case((Arg((3,)),)))
    assert not result.ok
    assert "first order" in result.failures[0]


def test_checker_rejects_a_wrong_second_derivative() -> None:
    # Right first derivative, wrong derivative of the derivative: |x| in place of x.
    wrong = Rule("square", np.square, vjps={0: lambda g, ans, x: 2.0 * g * np.abs(x) * np.sign(x)})
    assert check_rule_case(wrong, Case((Arg((3,), 0.5, 2.0),))).ok
    bad = Rule("cube", lambda x: x**3, vjps={0: lambda g, ans, x: 3.0 * g * np.abs(x) * x})
    result = check_rule_case(bad, Case((Arg((3,), -2.0, -0.5),)))
    assert not result.ok


def test_checker_rejects_a_rule_that_ignores_the_batch_axis() -> None:
    def vjp(g, ans, x):
        if np.ndim(g) == np.ndim(ans):
            return g * np.cos(x)
        return g[0] * np.cos(x)  # drops the batch axis: wrong for every batch but the first

    wrong = Rule("sin", np.sin, vjps={0: vjp})
    result = check_rule_case(wrong, Case((Arg((3,)),)))
    assert not result.ok
    assert any("batched" in f for f in result.failures)


def test_checker_rejects_a_wrong_tangent_map() -> None:
    # Right vjps, a forward-mode map that is off by 1%: only the tangent check sees it.
    vjps = {0: lambda g, ans, a, b: g @ b.T, 1: lambda g, ans, a, b: a.T @ g}
    right = Rule("mm", np.matmul, vjps=vjps, jvps={0: lambda t, ans, a, b: t @ b})
    wrong = Rule("mm", np.matmul, vjps=vjps, jvps={0: lambda t, ans, a, b: 1.01 * (t @ b)})
    case = Case((Arg((3, 4)), Arg((4, 2), diff=False)))
    assert check_rule_case(right, case).ok
    result = check_rule_case(wrong, case)
    assert not result.ok
    assert any("tangent rules" in f for f in result.failures)
