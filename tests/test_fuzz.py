"""Random programs against finite differences: the CI budget, and what the fuzzer found.

The generator and the checks live in ``tests/support/fuzz_programs.py`` (run the long budget with
``python tests/support/fuzz_programs.py --programs 10000``). Here hypothesis draws a fixed,
derandomized set of programs; a failure is shrunk to a minimal program, printed as a
self-contained script. Every failure the fuzzer has found is a named test below, with
its minimal program.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from support import fuzz_programs as fp

import funcdiff as fd
from funcdiff.rules import UFUNC_RULES

CI_PROGRAMS = 300


@pytest.mark.slow
def test_random_programs_ci_budget() -> None:
    ran: list[fp.Program] = []

    @settings(
        max_examples=CI_PROGRAMS,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    @given(fp.programs())
    def check(prog: fp.Program) -> None:
        ran.append(prog)
        result = fp.check_program(prog)
        assert result.ok, fp.report(prog, result)

    check()
    assert len(ran) >= CI_PROGRAMS
    # the budget really covers the generator's families (not 300 one-liners)
    ops = {op for p in ran for op in p.ops}
    assert {
        "unary",
        "binary",
        "reduce",
        "index",
        "shape",
        "join",
        "inplace",
        "product",
        "linalg",
        "registry",
        "sparse_matmul",
    } <= ops
    assert sum(len(p.ops) for p in ran) >= 3 * CI_PROGRAMS


@pytest.mark.slow
def test_seeded_programs_ci_budget() -> None:
    """The seeded generator of the long budget, on a fixed block of seeds (larger
    programs than hypothesis draws early on)."""
    summary = fp.run_budget(CI_PROGRAMS, seed=20_260)
    assert summary["ran"] == CI_PROGRAMS
    assert summary["failed"] == 0, "\n\n".join(text for _, text in summary["failures"][:3])


def test_registry_operations_cover_the_registered_rules() -> None:
    """Programs can call every differentiable rule on its own test cases' shapes."""
    from funcdiff.rules import all_rules

    cases = fp.registry_cases()
    reachable = {rule.name for _, rule, _ in cases}
    differentiable = {r.name for r in all_rules() if r.differentiable and r.cases}
    assert len(cases) >= 800
    assert len(reachable) >= 0.85 * len(differentiable), sorted(differentiable - reachable)


def test_generator_is_deterministic() -> None:
    a = fp.generate_program(fp.RandomChooser(1234))
    b = fp.generate_program(fp.RandomChooser(1234))
    assert a.source() == b.source()
    assert fp.generate_program(fp.RandomChooser(1235)).source() != a.source()


def test_reproduction_script_runs_and_matches_the_program() -> None:
    prog = fp.generate_program(fp.RandomChooser(7))
    ns: dict = {}
    exec(prog.source(), ns)
    f, loss, _ = prog.build()
    assert np.allclose(ns["loss"](*ns["INPUTS"]), loss(*prog.inputs), rtol=0, atol=0)


@pytest.mark.parametrize("scale", [1.0 + 1e-6, 1.0 + 1e-3])
def test_the_checks_catch_a_wrong_first_derivative(monkeypatch, scale: float) -> None:
    """A vjp off by a relative 1e-6 is caught: the checks are not vacuous."""
    rule = UFUNC_RULES[np.sin]
    wrong = dataclasses.replace(rule, vjps={0: lambda g, ans, x: g * np.cos(x) * scale})
    monkeypatch.setitem(UFUNC_RULES, np.sin, wrong)
    prog = fp.make_program(
        ["v0 = np.sin(x0) * x1", "v1 = np.sum(v0 ** 2, axis=0)"],
        [np.linspace(-1, 1, 6).reshape(2, 3), [0.3, -0.7, 1.1]],
    )
    result = fp.check_program(prog)
    assert any(f.startswith("gradient vs finite differences") for f in result.failures)


def test_the_checks_catch_a_derivative_that_is_wrong_only_at_second_order(monkeypatch) -> None:
    """A vjp that drops its own dependence on x (correct values, wrong Hessian)."""
    rule = UFUNC_RULES[np.sin]

    def detached(g, ans, x):
        return g * np.cos(x.data if isinstance(x, fd.Tensor) else x)

    monkeypatch.setitem(UFUNC_RULES, np.sin, dataclasses.replace(rule, vjps={0: detached}))
    prog = fp.make_program(["v0 = np.sin(x0) * x1"], [[0.2, -0.4, 0.9], [0.3, -0.7, 1.1]])
    result = fp.check_program(prog)
    assert not any(f.startswith("gradient vs") for f in result.failures)
    assert any(f.startswith("hessian vs differences") for f in result.failures)
    assert any(f.startswith("third order") for f in result.failures)


@pytest.mark.parametrize("kind", ["array", "matrix"])
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil", "dia", "bsr"])
def test_sparse_constants_in_programs(fmt: str, kind: str) -> None:
    """``L @ x``, ``x @ L`` and ``L.T @ x`` with random scipy.sparse constants, through
    every check the fuzzer makes (the generator's ``sparse_matmul`` operation)."""
    L = f"sps.{fmt}_{kind}(sps.random_array({{shape}}, density=0.6, rng=3))"
    _assert_passes(
        [
            f"v0 = {L.format(shape=(3, 4))} @ np.sin(x0)",
            f"v1 = v0 @ {L.format(shape=(2, 3))} * x1",
            f"v2 = {L.format(shape=(3, 2))}.T @ np.tanh(v1.T)",
        ],
        [np.linspace(-1.0, 1.2, 8).reshape(4, 2), [0.4, -0.9, 1.3]],
    )


def test_the_generator_draws_sparse_products_of_every_form() -> None:
    progs = [fp.generate_program(fp.RandomChooser(seed)) for seed in range(60)]
    lines = [ln for p in progs if "sparse_matmul" in p.ops for ln in p.lines if "sps." in ln]
    assert any(".T @" in ln for ln in lines)
    assert any(") @ " in ln and ".T @" not in ln for ln in lines)
    assert any(" @ sps." in ln for ln in lines)
    assert any("_array(" in ln.split("sps.random")[0] for ln in lines)
    assert any("_matrix(" in ln for ln in lines)


# --------------------------------------------------------------------------- regressions
def _assert_passes(lines: list[str], inputs: list, outs: list[str] | None = None) -> None:
    prog = fp.make_program(lines, inputs, outs)
    result = fp.check_program(prog)
    assert result.ok, fp.report(prog, result)


def test_ufunc_out_argument_aliasing_an_input() -> None:
    """Found by the fuzzer: ``np.multiply(v, w, out=v)`` (NumPy's spelling of ``v *= w``)
    recorded the multiplication with ``v`` itself as the saved operand, then overwrote
    ``v``: every backward pass raised "modified by an inplace operation". Fixed in
    ``ops.protocol.array_ufunc`` (operands aliasing ``out`` are snapshotted first)."""
    _assert_passes(
        ["v0 = x0 * 1.0", "np.multiply(v0, np.tanh(x1), out=v0)"],
        [[0.5, -1.0, 0.25], [0.3, 0.8, -1.2]],
    )
    # the view case: an operand that shares memory with out without being it
    _assert_passes(
        ["v0 = x0 * 1.0", "np.multiply(v0, np.flip(v0), out=v0)"],
        [[0.5, -1.0, 0.25]],
    )


def test_augmented_assignment_through_a_basic_slice() -> None:
    """Found by the fuzzer: ``v[1:] += w`` (Python runs ``v[1:].__iadd__`` on a view, which
    rewrites ``v``'s history as torch does)."""
    _assert_passes(["v0 = x0 * 1.0", "v0[1:] += np.sin(x1)"], [[0.5, -1.0, 0.25], [0.3, 0.8]])
