"""What every rule declares about itself: its Jacobian structure, whether it accepts
complex values, which of its vjps are replaced on complex values.

``tests/data/rule_declarations.json`` holds these facts for every rule registered
when each fact still lived in a table of its own keyed by rule name. Moving the
declarations into the ``Rule(...)`` entries must not change a single one: this test
compares them rule by rule (rules added since are checked by the rule tests, not
here). A deliberate change of one of them regenerates the file::

    PYTHONPATH=$PWD python tests/test_rule_declarations.py --write
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import funcdiff  # noqa: F401  (registers the rules)
from funcdiff._core.registry import all_rules

SNAPSHOT = Path(__file__).parent / "data" / "rule_declarations.json"


def _axes_probe(rule: Any, structure: Any) -> list | None:
    """The axes the structure's reader gives for the rule's first test case: the
    reader is a function, so compare what it answers, not its identity."""
    if structure is None or structure.axes is None or not rule.cases:
        return None
    case = rule.cases[0]
    rng = np.random.default_rng(0)

    def draw(a: Any) -> Any:
        if hasattr(a, "sample"):
            return a.sample(rng)
        if isinstance(a, list):
            return [draw(x) for x in a]
        return a

    args = tuple(draw(a) for a in case.args)
    axes = structure.axes(args, dict(case.kwargs), np.ndim(args[0]))
    return None if axes is None else [int(a) for a in axes]


def declarations() -> list[dict]:
    """The declared facts of every registered rule, in registration order."""
    out = []
    for rule in all_rules():
        s = rule.structure
        out.append(
            {
                "name": rule.name,
                "differentiable": rule.differentiable,
                "structure": None if s is None else [s.pattern, s.curvature],
                "axes": _axes_probe(rule, s),
                "complex": bool(rule.complex),
                "complex_vjps": sorted(str(k) for k in rule.complex_vjps),
                "complex_cases": len(rule.complex_cases),
            }
        )
    return out


def test_every_rule_declares_what_it_did() -> None:
    expected = json.loads(SNAPSHOT.read_text())
    found = declarations()
    expected_by_name: dict[str, list[dict]] = {}
    for entry in expected:
        expected_by_name.setdefault(entry["name"], []).append(entry)
    found_by_name: dict[str, list[dict]] = {}
    for entry in found:
        found_by_name.setdefault(entry["name"], []).append(entry)
    missing = sorted(set(expected_by_name) - set(found_by_name))
    assert not missing, f"rules no longer registered: {missing}"
    differ = [
        (name, expected_by_name[name], found_by_name[name])
        for name in sorted(expected_by_name)
        if found_by_name[name] != expected_by_name[name]
    ]
    assert not differ, "\n".join(f"{n}: was {a}, now {b}" for n, a, b in differ[:10])


if __name__ == "__main__" and "--write" in sys.argv:
    SNAPSHOT.write_text(json.dumps(declarations(), indent=1) + "\n")
