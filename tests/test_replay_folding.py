"""Instructions of constants alone are computed once in the generated NumPy code.

A replayed program's instructions that read only constants (a sparse Jacobian's seeds
pushed through the function) give the same arrays at every call; the generated code
computes them when it is made. The values must be exactly the unfolded program's, the
folded constants must not grow the program's memory past ``GROWTH`` times its constant
arrays, and outputs and instructions before an in-place write are never folded.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from support.problems import brusselator

import funcdiff as fd
import funcdiff.sparse as sparse
from funcdiff.replay import _folding
from funcdiff.replay._codegen import compile_program
from funcdiff.replay.program import _OPCODES, _emit, _flat, build, recording


def brusselator_jacobian(y):
    n = y.shape[0] // 2
    u, v = y[:n], y[n:]
    c = 0.02 * n**2
    lap = sp.diags_array(
        [[c], np.full(n - 1, c), np.full(n, -2.0 * c), np.full(n - 1, c), [c]],
        offsets=[-(n - 1), -1, 0, 1, n - 1],
        shape=(n, n),
    )
    return sp.block_array(
        [
            [sp.diags_array(2.0 * u * v - 4.4) + lap, sp.diags_array(u * u)],
            [sp.diags_array(3.4 - 2.0 * u * v), sp.diags_array(-u * u) + lap],
        ]
    ).toarray()


def _folded(program):
    return _folding.folded(program.code, program.template, set(_flat(program.outputs)), _OPCODES)


def test_a_sparse_jacobians_seed_instructions_are_computed_once() -> None:
    n = 40
    t = 2.0 * np.pi * np.arange(n) / n
    y0 = np.concatenate([1.0 + 0.5 * np.sin(t), 3.0 + 0.1 * np.cos(t)])
    jac = sparse.prepare_jacobian(brusselator, y0, replay=True, compile=False)
    rng = np.random.default_rng(3)
    for _ in range(5):  # past the runs after which a program becomes generated code
        y = y0 + 0.1 * rng.standard_normal(2 * n)
        np.testing.assert_allclose(jac(y).toarray(), brusselator_jacobian(y), rtol=1e-13)
    (program,) = [p for p in jac._programs.values() if p is not None]
    code, template = _folded(program)
    assert program.info["compiled"] and program.info["folded"] == len(program.code) - len(code)

    def rolls(instructions):
        return sum(getattr(ins[1], "__name__", "") == "roll" for ins in instructions)

    # Four rolls of u and v in the forward pass, four of the seeds' tangents: only the
    # forward's read the point and stay.
    assert (rolls(program.code), rolls(code)) == (8, 4)
    # The folded code computes the unfolded program's numbers exactly.
    run = compile_program(code, program.inputs, template, program.outputs, _OPCODES)
    for got, want in zip(run(y), program.interpret([y])):
        np.testing.assert_array_equal(got, want)


def _record(f, constant: np.ndarray):
    with recording() as tracer:
        x = fd.tensor(np.ones(constant.shape), requires_grad=True)
        tracer.input(x)
        out = f(x, fd.tensor(constant))
    structure = tuple(tracer.slot_of(o) for o in out) if isinstance(out, tuple) else None
    return build(tracer, structure if structure else tracer.slot_of(out))


def test_folding_stops_where_its_constants_would_grow_past_the_bound() -> None:
    c = np.arange(1.0, 4.0)

    def small(x, c):
        return x * c[::-1] + np.sin(c)

    def large(x, c):  # a view of a constant 1000 times c's size
        return x * np.tile(c, 1000)[::1000] + np.sin(c)

    program = _record(small, c)
    code, template = _folded(program)
    assert len(code) == len(program.code) - 2  # the reversal and the sine
    # The folded results are read only (a result handed out as it is gets copied); the
    # program's own constants keep their flags.
    new = [v for s, v in enumerate(template) if program.template[s] is None and v is not None]
    assert new and not any(v.flags.writeable for v in new)
    assert all(
        v.flags.writeable for v in program.template if isinstance(v, np.ndarray) and v.base is None
    )
    held = new[0]
    handed = _emit(held, False)
    assert handed is not held and handed.flags.writeable
    np.testing.assert_array_equal(handed, held)
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_array_equal(
        compile_program(code, program.inputs, template, program.outputs, _OPCODES)(x),
        x * c[::-1] + np.sin(c),
    )
    program = _record(large, c)
    assert _folded(program) == (program.code, program.template)
    assert _folding.GROWTH < 1000


def test_outputs_and_what_precedes_an_in_place_write_are_not_folded() -> None:
    c = np.arange(1.0, 4.0)

    def with_output(x, c):  # c * 3 reads a constant alone but is an output
        return x * np.cos(c), c * 3.0

    program = _record(with_output, c)
    code, _ = _folded(program)
    names = [getattr(ins[1], "__name__", "") for ins in code]
    assert "cos" not in names and "multiply" in names
    assert any(
        getattr(ins[1], "__name__", "") == "multiply" and ins[-1] in _flat(program.outputs)
        for ins in code
    )

    def written(x, c):
        d = np.exp(c)  # before the in-place write: stays
        w = x * 1.0
        w += 1.0
        return w * d * np.cos(c)  # after it: cos(c) folds

    program = _record(written, c)
    code, _ = _folded(program)
    names = [getattr(ins[1], "__name__", "") for ins in code]
    assert "exp" in names and "cos" not in names


@pytest.mark.parametrize("point", [0.0, 1.5])
def test_a_replayed_hessian_with_folded_seeds_equals_the_closed_form(point: float) -> None:
    def rosen(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    x0 = np.full(30, point)
    hess = sparse.prepare_hessian(rosen, x0, replay=True, compile=False)
    rng = np.random.default_rng(7)
    for _ in range(5):
        x = x0 + 0.1 * rng.standard_normal(30)
        d = np.zeros(30)
        d[:-1] = 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
        d[1:] += 200.0
        want = np.diag(d) + np.diag(-400.0 * x[:-1], 1) + np.diag(-400.0 * x[:-1], -1)
        np.testing.assert_allclose(hess(x).toarray(), want, rtol=1e-12, atol=1e-9)
    (program,) = [p for p in hess._programs.values() if p is not None]
    code, _ = _folded(program)
    assert 0 < program.info["folded"] == len(program.code) - len(code)
