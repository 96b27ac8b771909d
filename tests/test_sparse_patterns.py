"""Every rule's sparsity, checked from the rule table against dense derivatives.

For each registered rule and each of its test cases, with the case's differentiable
arguments flattened into one vector ``x``:

* the detected Jacobian pattern covers every nonzero of the dense Jacobian at three
  random points (a missed entry would make a sparse Jacobian silently wrong);
* for rules whose structure is declared exact (selections, reductions, elementwise,
  contractions ...), the pattern has no entry that is zero at all three points;
* ``funcdiff.sparse.jacobian`` equals the dense Jacobian to 1e-12;
* the Hessian pattern covers the dense Hessian of a random combination of the outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
import funcdiff.sparse as fs
from funcdiff.functional import hessian, jacobian
from funcdiff.rules import all_rules
from funcdiff.rules.structure import structure_of, structure_table
from funcdiff.testing import flat_case

DIFFERENTIABLE = [r for r in all_rules() if r.differentiable]
CASES = [(r, i, c) for r in DIFFERENTIABLE for i, c in enumerate(r.cases)]

#: Structures whose patterns are exact at generic points.
TIGHT = {
    "select",
    "reduce",
    "scan",
    "contract",
    "outer",
    "kron",
    "convolve",
    "where",
    "setitem",
    "index_add",
    "bincount",
    "full_like",
    "elementwise",
}
#: Rules whose derivative vanishes on part of the domain the cases draw from, or whose
#: tests draw inputs where one branch is never taken: exact patterns, not tight there.
NOT_TIGHT_AT_CASES = {
    "clip",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "absolute",
    "fabs",
    "copysign",
    "heaviside",
    "floor_divide",
    "remainder",
    "fmod",
    "modf",
    "frexp",
    "sort",
    "max",
    "min",
    "nanmax",
    "nanmin",
    "norm0",
    "where",
    "nan_to_num",
    "cross_last",
    "linear_recurrence",
    "divmod",
    "power",
    "float_power",
    "var",
    "std",
    "huber",
    "xlogy",
    "xlog1py",
    "rel_entr",
}


def _problem(rule, case, seed):
    return flat_case(rule, case, seed)


def _dense_jacobian(f, x):
    return np.asarray(jacobian(f, fd.tensor(x), vectorize=True).data).reshape(-1, x.size)


@pytest.mark.parametrize("rule, index, case", CASES, ids=[f"{r.name}-{i}" for r, i, _ in CASES])
def test_pattern_covers_the_jacobian(rule, index, case) -> None:
    f, points = _problem(rule, case, 7 + index)
    if points[0].size == 0:  # empty inputs: an empty pattern of the right shape
        pattern = fs.jacobian_sparsity(f, points[0])
        assert pattern.shape == (f(fd.tensor(points[0])).data.size, 0) and pattern.nnz == 0
        return
    prepared = fs.prepare_jacobian(f, points[0])
    detected = fs.jacobian_sparsity(f, points[0]).toarray()
    assert (detected == prepared.sparsity.toarray()).all()
    seen = np.zeros_like(detected)
    same_path = True
    for x in points:
        # A point where the function branches differently (interp's segments) has its
        # own pattern: the prepared object detects it, and that one must cover it.
        sparse = prepared(x).toarray()
        pattern = prepared.sparsity.toarray()
        same_path &= prepared.info["redetections"] == 0
        dense = _dense_jacobian(f, x)
        assert pattern.shape == dense.shape
        # FFT-based rules (convolutions) leave round-off where the exact entry is zero.
        scale = max(1.0, np.abs(dense).max(initial=0.0))
        nonzero = np.abs(dense) > 1e-13 * scale
        missed = nonzero & ~pattern
        assert not missed.any(), f"{rule.name}: pattern misses {np.argwhere(missed)[:5]}"
        np.testing.assert_allclose(sparse, dense, rtol=0, atol=1e-12 * scale)
        seen |= nonzero
    struct = structure_of(rule)
    exact = rule.impl is None and struct is not None and struct.pattern in TIGHT
    if exact and same_path and rule.name not in NOT_TIGHT_AT_CASES:
        extra = detected & ~seen
        assert not extra.any(), f"{rule.name}: pattern has extra entries {np.argwhere(extra)[:5]}"


HESSIAN_CASES = [(r, i, c) for r, i, c in CASES if c.order >= 2]


@pytest.mark.parametrize(
    "rule, index, case", HESSIAN_CASES, ids=[f"{r.name}-{i}" for r, i, _ in HESSIAN_CASES]
)
def test_hessian_pattern_covers_the_hessian(rule, index, case) -> None:
    f, points = _problem(rule, case, 11 + index)
    if points[0].size == 0:  # empty inputs: an empty Hessian pattern
        assert fs.hessian_sparsity(lambda x: np.sum(f(x)), points[0]).shape == (0, 0)
        return
    m = f(fd.tensor(points[0])).data.size
    weights = np.random.default_rng(index).uniform(0.5, 1.5, m)

    def scalar(x):
        return np.sum(weights * f(x))

    prepared = fs.prepare_hessian(scalar, points[0])
    detected = fs.hessian_sparsity(scalar, points[0]).toarray()
    assert (detected == detected.T).all()
    assert (detected == prepared.sparsity.toarray()).all()
    for x in points[:2]:
        values = prepared(x).toarray()
        pattern = prepared.sparsity.toarray()
        dense = np.asarray(hessian(scalar, fd.tensor(x)).data).reshape(x.size, x.size)
        scale = max(1.0, np.abs(dense).max(initial=0.0))
        missed = (np.abs(dense) > 1e-12 * scale) & ~pattern
        assert not missed.any(), f"{rule.name}: Hessian pattern misses {np.argwhere(missed)[:5]}"
        np.testing.assert_allclose(values, dense, rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize(
    "rule", [r for r in DIFFERENTIABLE if r.impl is None], ids=lambda r: r.name
)
def test_every_rule_declares_its_structure(rule) -> None:
    # A new differentiable operation needs a deliberate declaration in its entry,
    # Rule(..., structure=...), or its factory's (unary/binary: elementwise).
    assert structure_of(rule) is not None, f"{rule.name} has no declared structure"


def test_structure_table_names_only_registered_rules() -> None:
    names = {r.name for r in all_rules()}
    assert set(structure_table()) <= names, sorted(set(structure_table()) - names)
