"""Compiled replay (``compile=True``): the same numbers as eager, and every fallback.

The rule table runs in groups: one scalar function sums the cases of a group, so one
compiled program covers many rules (compiling each case alone would cost a second per
rule). Every compiled program must agree with eager within 1e-12 (normwise, relative);
a program whose kernels disagreed with NumPy at their first run would replay NumPy calls
and hide a wrong lowering, so the tests also require the kernels to be in use.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from support import fuzz_programs as fp
from support.problems import brusselator, eager_value_and_grad

import funcdiff as fd
import funcdiff.replay as replay
import funcdiff.sparse as fs
from funcdiff import functional
from funcdiff import special as fds
from funcdiff.replay import jit
from funcdiff.replay.jit import _lower as jit_lower
from funcdiff.rules import all_rules
from funcdiff.sparse._coloring import color_hessian
from funcdiff.sparse._decompress import Decompressor, decompress
from funcdiff.testing import flat_case

HAS_JAX = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not HAS_JAX, reason="the funcdiff[jit] extra (JAX) is missing")

CASES = [
    (r, i, c)
    for r in all_rules()
    if r.differentiable
    for i, c in enumerate(r.cases)
    if not r.name.startswith("complex")
]
GROUP = 60


def _programs(replayed: replay.Replayed) -> list:
    return [p for programs in replayed._cache.values() for p in programs]


def _kernels_in_use(replayed: replay.Replayed) -> int:
    """Kernels of the compiled programs (failing when one disagreed with NumPy)."""
    total = 0
    for program in _programs(replayed):
        info = program.info["jit"]
        if info is not None:
            assert not info.get("disagreed"), info
            total += info["kernels"]
    return total


def _close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-12) -> None:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    scale = max(np.abs(want[finite]).max(initial=0.0), 1e-300)
    assert np.abs(got[finite] - want[finite]).max(initial=0.0) <= rtol * scale


def _group(cases):
    """One scalar function of one flat vector summing the weighted outputs of ``cases``."""
    parts, points = [], [[], [], []]
    start = 0
    for rule, index, case in cases:
        vector, drawn = flat_case(rule, case, 5 + index)
        size = drawn[0].size
        if size == 0:
            continue
        parts.append((vector, start, size))
        for k in range(3):
            points[k].append(drawn[k])
        start += size

    def f(x):
        total = 0.0
        for vector, first, size in parts:
            out = vector(x[first : first + size])
            total = total + np.sum(out * np.cos(1.3 * np.arange(np.size(out)) + 0.4))
        return total

    return f, [np.concatenate(p) for p in points]


GROUPS = [CASES[i : i + GROUP] for i in range(0, len(CASES), GROUP)]


@needs_jax
@pytest.mark.slow
@pytest.mark.parametrize("cases", GROUPS, ids=[f"{g[0][0].name}..{g[-1][0].name}" for g in GROUPS])
def test_the_rule_table_replayed_compiled_equals_eager(cases) -> None:
    f, points = _group(cases)
    vg = replay.value_and_grad(f, compile=True)
    for x in [*points, points[1]]:
        value, g = vg(x)
        ev, eg = eager_value_and_grad(f, x)
        _close(np.array([value]), np.array([ev]))
        _close(g, eg)
    assert _kernels_in_use(vg) >= 1


@needs_jax
@pytest.mark.parametrize("seed", range(6))
def test_random_programs_replayed_compiled_equal_eager(seed: int) -> None:
    program = fp.generate_program(fp.RandomChooser(7_000 + seed), max_ops=10)
    _, loss, _ = program.build()
    xs = program.inputs
    argnums = tuple(range(len(xs)))
    vg = replay.value_and_grad(loss, argnums=argnums, compile=True)
    rng = np.random.default_rng(seed)
    for shift in (0.0, 1e-3, -1e-3):
        point = [x + shift * rng.standard_normal(x.shape) for x in xs]
        value, grads = vg(*point)
        ts = [fd.tensor(x, requires_grad=True) for x in point]
        y = loss(*ts)
        eager = fd.grad(y, ts, allow_unused=True)
        _close(np.array([value]), np.array([y.item()]))
        for got, want, x in zip(grads, eager, point):
            _close(got, np.zeros_like(x) if want is None else want.data)
    _kernels_in_use(vg)


def _chain(x):
    y = x
    for _ in range(4):
        y = np.sin(y) * 0.9 + np.cos(y[::-1]) * y
    return y


@needs_jax
def test_every_transform_compiles_and_matches_eager() -> None:
    x = np.linspace(-1.0, 1.0, 40)
    v = np.cos(np.arange(40.0))

    def s(x):
        return np.sum(np.tanh(_chain(x)) ** 2)

    xt = fd.tensor(x)
    want_j = functional.jacobian(_chain, xt, vectorize=True).data
    want_h = functional.hessian(s, xt, vectorize=True).data
    cases = [
        (replay.jacobian(_chain, compile=True), (x,), lambda r: r, want_j),
        (replay.hessian(s, compile=True), (x,), lambda r: r, want_h),
        (replay.hvp(s, compile=True), (x, v), lambda r: r[1], want_h @ v),
        (replay.vjp(_chain, compile=True), (x, v), lambda r: r[1], v @ want_j),
        (replay.jvp(_chain, compile=True), (x, v), lambda r: r[1], want_j @ v),
        (replay.grad(s, compile=True), (x,), lambda r: r, eager_value_and_grad(s, x)[1]),
    ]
    for replayed, args, pick, want in cases:
        for _ in range(3):
            _close(pick(replayed(*args)), want)
        assert _kernels_in_use(replayed) >= 1


@needs_jax
def test_results_are_fresh_writable_arrays() -> None:
    vg = replay.value_and_grad(lambda x: np.sum(np.sin(x) * x), compile=True)
    x = np.linspace(0.0, 1.0, 8)
    _, g1 = vg(x)
    g1[:] = 0.0
    _, g2 = vg(x)
    _close(g2, np.sin(x) + x * np.cos(x))
    assert g2.flags.writeable and not np.shares_memory(g1, g2)
    assert _kernels_in_use(vg) == 1


@needs_jax
def test_small_results_come_back_packed_as_disjoint_writable_views() -> None:
    def f(x, y):
        return x * y + np.sin(y), np.exp(x) * y - np.sum(x * y)

    jac = replay.jacobian(f, argnums=(0, 1), compile=True)
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    for _ in range(3):  # record, validate (compiling the kernels), then run them
        first = jac(x, y)
    blocks = [b for row in first for b in row]
    # one kernel result, copied once: every block a view of the same memory ...
    base = blocks[0].base
    assert base is not None and all(b.base is base for b in blocks)
    assert all(b.flags.writeable and b.shape == (4, 4) for b in blocks)
    # ... and disjoint: writing one block changes no other, nor a later call's
    kept = [b.copy() for b in blocks]
    blocks[0][...] = np.nan
    for b, k in zip(blocks[1:], kept[1:]):
        np.testing.assert_array_equal(b, k)
    again = jac(x, y)
    want = functional.jacobian(f, (fd.tensor(x), fd.tensor(y)))
    for got_row, want_row in zip(again, want):
        for got, expected in zip(got_row, want_row):
            _close(got, expected)
    assert not any(np.shares_memory(a, b) for a in blocks for row in again for b in row)
    assert _kernels_in_use(jac) == 1


@needs_jax
def test_uncovered_operations_stay_numpy_calls_between_kernels() -> None:
    def f(x):
        a = np.sin(x) * x + np.cos(x)
        b = fds.gammaln(a + 3.0)  # a SciPy ufunc: no JAX namesake
        return np.sum(np.tanh(b) * a * x)

    vg = replay.value_and_grad(f, compile=True)
    x = np.linspace(0.1, 1.0, 30)
    for point in (x, x + 0.05):
        value, g = vg(point)
        ev, eg = eager_value_and_grad(f, point)
        _close(np.array([value]), np.array([ev]))
        _close(g, eg)
    (program,) = _programs(vg)
    info = program.info["jit"]
    assert info["kernels"] >= 2 and info["numpy"] >= 1 and not info.get("disagreed")


@needs_jax
def test_in_place_writes_run_as_numpy_before_the_kernels() -> None:
    def f(x):
        y = x * 2.0
        y[1:3] = np.sin(x[:2])  # an in-place write: a region boundary
        y += 1.0
        z = np.exp(-y) * y + np.cos(y) * x
        return np.sum(z * z)

    vg = replay.value_and_grad(f, compile=True)
    x = np.linspace(-1.0, 1.0, 12)
    for point in (x, x * 0.5):
        value, g = vg(point)
        ev, eg = eager_value_and_grad(f, point)
        _close(np.array([value]), np.array([ev]))
        _close(g, eg)
    (program,) = _programs(vg)
    assert program.info["jit"]["kernels"] >= 1 and program.info["jit"]["numpy"] >= 3


@needs_jax
def test_guards_are_checked_after_the_kernels_and_each_branch_compiles() -> None:
    def f(x):
        y = np.sin(x) * x + np.cos(x) * 2.0
        if np.sum(y) > 0:
            return np.sum(y * y)
        return np.sum(np.exp(y))

    vg = replay.value_and_grad(f, compile=True)
    for point in (np.linspace(0.1, 1.0, 10), -np.linspace(3.0, 4.0, 10)):
        for _ in range(2):
            value, g = vg(point)
            ev, eg = eager_value_and_grad(f, point)
            _close(np.array([value]), np.array([ev]))
            _close(g, eg)
    assert vg.trace_count == 2 and _kernels_in_use(vg) >= 2


@needs_jax
def test_complex_values_stay_numpy_calls() -> None:
    vg = replay.value_and_grad(lambda z: np.sum(np.abs(np.sin(z) * z) ** 2), compile=True)
    z = np.array([0.5 + 0.2j, -0.3 + 1.0j, 0.7 - 0.1j])
    for point in (z, z * 1.1):
        value, g = vg(point)
        ev, eg = eager_value_and_grad(lambda z: np.sum(np.abs(np.sin(z) * z) ** 2), point)
        assert value == pytest.approx(ev, rel=1e-12)
        np.testing.assert_allclose(g, eg, rtol=1e-12, atol=1e-14)
    (program,) = _programs(vg)
    assert (
        program.info["jit"] is None
        or program.info["jit"]["kernels"] == 0
        or (not program.info["jit"].get("disagreed"))
    )


@needs_jax
def test_nan_and_inf_propagate_as_in_numpy() -> None:
    def f(x):
        return np.sum(np.log(x) * x + 1.0 / x)

    vg = replay.value_and_grad(f, compile=True)
    x = np.linspace(0.5, 2.0, 6)
    vg(x)
    bad = x.copy()
    bad[0], bad[1] = -1.0, 0.0
    with np.errstate(all="ignore"):
        value, g = vg(bad)
        ev, eg = eager_value_and_grad(f, bad)
    assert np.isnan(value) and np.isnan(ev)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(eg))
    np.testing.assert_array_equal(np.isinf(g), np.isinf(eg))
    assert _kernels_in_use(vg) == 1


def _rosen(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


@needs_jax
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_sparse_jacobian_compiled_equals_eager(mode: str) -> None:
    n = 30
    t = 2.0 * np.pi * np.arange(n) / n
    y = np.concatenate([1.0 + 0.5 * np.sin(t), 3.0 + 0.1 * np.cos(t)])
    compiled = fs.prepare_jacobian(brusselator, y, mode=mode, replay=True, compile=True)
    eager = fs.prepare_jacobian(brusselator, y, mode=mode)
    for point in (y, y + 0.01, y - 0.02, y + 0.03):
        got, want = compiled(point), eager(point)
        assert (got != want).nnz == 0 or np.abs((got - want).data).max() <= 1e-12 * np.abs(
            want.data
        ).max()
        np.testing.assert_array_equal(got.indices, want.indices)
    program = compiled._programs[id(compiled._entry)]
    assert program is not None and program.info["jit"]["kernels"] >= 1
    assert not program.info["jit"].get("disagreed")
    # The gather of the stored entries from the compressed products is in the kernel.
    assert program.info["jit"]["numpy"] == 0


@needs_jax
def test_sparse_hessian_compiled_equals_eager() -> None:
    x = np.linspace(-1.0, 2.0, 25)
    compiled = fs.prepare_hessian(_rosen, x, replay=True, compile=True)
    eager = fs.prepare_hessian(_rosen, x)
    for point in (x, x + 0.1, x * 0.9, x - 0.2):
        _close(compiled(point).toarray(), eager(point).toarray())
    program = compiled._programs[id(compiled._entry)]
    assert program is not None and program.info["jit"]["kernels"] >= 1
    assert not program.info["jit"].get("disagreed")


def test_the_prepared_decompressor_equals_decompress_and_hands_out_copies() -> None:
    H = sp.csr_array(np.array([[2.0, 1, 0, 0], [1, 3, 4, 0], [0, 4, 5, 1], [0, 0, 1, 6]]))
    coloring = color_hessian(H != 0)
    compressed = (H @ coloring.seeds(4).T).T
    prepared = Decompressor(coloring, H != 0)
    first = prepared(compressed)
    want = decompress(coloring, H != 0, compressed).toarray()
    np.testing.assert_array_equal(first.toarray(), want)
    first.indices[:] = 0
    first.data[:] = -1.0
    np.testing.assert_array_equal(prepared(compressed).toarray(), H.toarray())
    with pytest.raises(ValueError, match="compressed must have shape"):
        prepared(compressed[:1])
    with pytest.raises(TypeError, match="real"):
        prepared(compressed + 1j)
    with pytest.raises(ValueError, match="stored entries"):
        Decompressor(coloring, np.eye(4))
    # The stored entries gathered from the compressed products, assembled around them.
    data = compressed.ravel()[prepared.gather]
    np.testing.assert_array_equal(prepared.assemble(data).toarray(), H.toarray())
    with pytest.raises(ValueError, match="one value per stored entry"):
        prepared.assemble(data[1:])


def test_compile_is_checked_and_true_without_the_extra_names_it(monkeypatch) -> None:
    with pytest.raises(ValueError, match="compile must be"):
        replay.grad(np.sum, compile="yes")
    with pytest.raises(ValueError, match="compile must be"):
        fs.prepare_jacobian(np.sin, np.ones(3), compile=1)
    monkeypatch.setattr(jit, "available", lambda: False)
    with pytest.raises(ImportError, match=r"funcdiff\[jit\]"):
        replay.grad(np.sum, compile=True)
    with pytest.raises(ImportError, match=r"funcdiff\[jit\]"):
        fs.prepare_jacobian(np.sin, np.ones(3), replay=True, compile=True)
    # "auto" without the extra: NumPy replay, silently.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vg = replay.value_and_grad(lambda x: np.sum(np.sin(x) ** 2), compile="auto")
        big = np.linspace(0.0, 1.0, 50_000)
        for _ in range(3):
            _, g = vg(big)
    _close(g, 2 * np.sin(big) * np.cos(big))
    assert all(p.info["jit"] is None for p in _programs(vg))


def test_a_broken_extra_under_auto_warns_once_and_replays_numpy(monkeypatch) -> None:
    def broken():
        raise ImportError("compiled replay needs the optional extra funcdiff[jit]: broken")

    monkeypatch.setattr(jit, "available", lambda: True)
    monkeypatch.setattr(jit, "_import_jax", broken)
    monkeypatch.setitem(jit._state, "warned", False)
    monkeypatch.setitem(jit._state, "error", None)
    big = np.linspace(0.0, 1.0, 50_000)
    with pytest.warns(RuntimeWarning, match="does not load") as record:
        vg = replay.value_and_grad(lambda x: np.sum(np.sin(x) ** 2), compile="auto")
        hvp = replay.hvp(lambda x: np.sum(np.cos(x) ** 2), compile="auto")
        for _ in range(2):
            _, g = vg(big)
            hvp(big, big)
    assert len([w for w in record if "does not load" in str(w.message)]) == 1
    _close(g, 2 * np.sin(big) * np.cos(big))


@needs_jax
def test_a_lowering_that_fails_replays_numpy_calls_under_auto_and_raises_under_true(
    monkeypatch,
) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("XLA failed")

    monkeypatch.setattr(jit, "lower", broken)
    big = np.linspace(0.0, 1.0, 30_000)
    vg = replay.value_and_grad(lambda x: np.sum(np.sin(x) ** 2), compile="auto")
    for _ in range(2):
        _, g = vg(big)
    _close(g, 2 * np.sin(big) * np.cos(big))
    assert all(p.info["jit"]["failed"] == "RuntimeError: XLA failed" for p in _programs(vg))
    strict = replay.value_and_grad(lambda x: np.sum(np.sin(x) ** 2), compile=True)
    with pytest.raises(RuntimeError, match="XLA failed"):
        strict(big)


def test_auto_leaves_small_programs_uncompiled() -> None:
    vg = replay.value_and_grad(lambda x: np.sum(np.sin(x) * x), compile="auto")
    for _ in range(3):
        vg(np.linspace(0.0, 1.0, 5))
    assert all(p.info["jit"] is None for p in _programs(vg))


def _polynomial_chain(x):
    """Forty cheap steps: one fused loop compiled, 120 passes over memory as NumPy calls
    (so that "auto", which keeps the faster form, keeps the kernels)."""
    y = x
    for _ in range(40):
        y = y * 0.99 + 0.01 * (y * y)
    return np.sum(y)


def test_auto_is_the_default_and_compiles_a_big_program() -> None:
    vg = replay.value_and_grad(_polynomial_chain)
    big = np.linspace(0.0, 1.0, 50_000)
    for _ in range(2):
        _, g = vg(big)
    _close(g, eager_value_and_grad(_polynomial_chain, big)[1])
    if HAS_JAX:
        assert _kernels_in_use(vg) >= 1
    else:
        assert all(p.info["jit"] is None for p in _programs(vg))
    prepared = fs.prepare_jacobian(np.sin, np.linspace(0.0, 1.0, 30_000), replay=True)
    assert prepared.compile == ("auto" if HAS_JAX else False)


def _rk4(steps: int):
    """States of ``steps`` RK4 steps of ``u' = u * (p + 0.1 * reversed(u))``: every stage
    reads the state several times, so an expression unfolded over the steps doubles in
    size many times per step."""
    u0 = np.array([1.0, 0.5, 0.2, 0.1])
    dt = 30.0 / 400

    def simulate(p):
        def rhs(u):
            return u * (p + 0.1 * u[::-1])

        u = u0 * 1.0
        states = [u]
        for _ in range(steps):
            k1 = rhs(u)
            k2 = rhs(u + (0.5 * dt) * k1)
            k3 = rhs(u + (0.5 * dt) * k2)
            k4 = rhs(u + dt * k3)
            u = u + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            states.append(u)
        return np.stack(states)

    return simulate


@needs_jax
@pytest.mark.parametrize("steps", [8, 40])
def test_a_long_rk4_loop_compiles_in_kernels_of_bounded_expressions(steps: int) -> None:
    # One kernel of eight steps never finished running under XLA: its fusion recomputes
    # each stage in each of its readers. The kernels are cut where an expression would
    # pass MAX_UNFOLDED, so several kernels run, each holding a few steps; the steps'
    # kernels repeat, and XLA compiles each distinct one once.
    from funcdiff.replay import program

    simulate = _rk4(steps)
    p = np.array([0.3, -0.2, 0.1, 0.05])
    # The plan is checked on the recorded program before anything is compiled, so that
    # a kernel too large to finish fails here instead of running forever.
    planned = replay.jacobian(simulate, compile="auto")
    planned(p)
    (recorded,) = _programs(planned)
    assert recorded.info["jit"] is None  # "auto" leaves it to NumPy calls
    assert (
        jit_lower.kernels_at_least(
            recorded.code, recorded.template, recorded.specs, program._OPCODES
        )
        >= (steps + 2) // 3
    )
    jac = replay.jacobian(simulate, compile=True)
    for q in (p, p + 0.01):
        _close(jac(q), functional.jacobian(simulate, q))
    info = [p.info["jit"] for p in _programs(jac) if p.info["jit"] is not None]
    assert _kernels_in_use(jac) >= 2
    assert all(0 < i["unfolded"] <= jit_lower.MAX_UNFOLDED for i in info)
    assert all(i["numpy"] == 0 for i in info)
    if steps == 40:
        assert all(i["executables"] < i["kernels"] for i in info)


def _compiled_flops(monkeypatch, simulate, p) -> float:
    """XLA's count of the floating-point operations of ``simulate``'s compiled Jacobian."""
    flops: list[float] = []
    compile_kernel = jit_lower._compile

    def counted(lowered, options):
        executable = compile_kernel(lowered, options)
        cost = executable.cost_analysis()
        flops.append((cost[0] if isinstance(cost, list) else cost)["flops"])
        return executable

    with monkeypatch.context() as patch:
        patch.setattr(jit_lower, "_compile", counted)
        jac = replay.jacobian(simulate, compile=True)
        for q in (p, p + 0.01):
            _close(jac(q), functional.jacobian(simulate, q))
    assert flops
    return sum(flops)


@needs_jax
def test_packing_small_results_adds_no_computation(monkeypatch) -> None:
    # Results packed into one array are concatenated inside the kernel, and XLA fuses a
    # concatenation with the loops that produce its operands. A result that the kernel
    # also reads would then be computed again for the concatenation: every RK4 stage
    # read by the next one, which made a 400-step loop a thousand times slower. Only
    # results read outside the kernel alone are packed; XLA counts the same work.
    simulate = _rk4(8)
    p = np.array([0.3, -0.2, 0.1, 0.05])
    packed = _compiled_flops(monkeypatch, simulate, p)
    monkeypatch.setattr(jit_lower, "PACK_WORK", -1)  # nothing packed
    separate = _compiled_flops(monkeypatch, simulate, p)
    assert packed <= 1.02 * separate


@needs_jax
def test_auto_replays_a_long_loop_of_small_steps_as_numpy_calls() -> None:
    # 40 RK4 steps compute enough elements to pass AUTO_MIN_WORK, but need a kernel
    # every two steps: far fewer than AUTO_MIN_WORK elements per kernel call.
    from funcdiff.replay import program

    simulate = _rk4(40)
    p = np.array([0.3, -0.2, 0.1, 0.05])
    jac = replay.jacobian(simulate, compile="auto")
    _close(jac(p), functional.jacobian(simulate, p))
    (recorded,) = _programs(jac)
    work = sum(int(np.prod(s[0])) for s in recorded.specs if s is not None)
    kernels = jit_lower.kernels_at_least(
        recorded.code, recorded.template, recorded.specs, program._OPCODES
    )
    assert jit.AUTO_MIN_WORK <= work < jit.AUTO_MIN_WORK * kernels
    assert recorded.info["jit"] is None
