"""How compiled replay hands arrays to its kernels and which XLA options it compiles with.

Small arguments go to the kernel as they are, large ones through ``jax.device_put``;
both must give the eager numbers. The kernels compile with an experimental XLA option;
a JAX that does not know an option must still compile (without it), never fall back to
NumPy calls or fail.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import funcdiff as fd
import funcdiff.replay as replay
from funcdiff import functional

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="the funcdiff[jit] extra (JAX) is missing"
)


def rosenbrock(v):
    return np.sum(100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2)


def _kernels(replayed: replay.Replayed) -> int:
    programs = [p for ps in replayed._cache.values() for p in ps]
    return sum(p.info["jit"]["kernels"] for p in programs if p.info["jit"] is not None)


def _eager_hvp(x: np.ndarray, v: np.ndarray) -> tuple[float, np.ndarray]:
    value, product = functional.hvp(rosenbrock, fd.tensor(x), fd.tensor(v))
    return float(value.data), product.data


@pytest.mark.parametrize("n", [10, 20_000])  # below and above the device_put size
def test_small_and_large_arguments_give_eager_values(n: int) -> None:
    from funcdiff.replay.jit import _lower

    assert (n * 8 > _lower.LARGE_ARGUMENT) == (n == 20_000)
    rng = np.random.default_rng(n)
    hvp = replay.hvp(rosenbrock, compile=True)
    for _ in range(3):
        x, v = rng.uniform(-1.5, 1.5, n), rng.standard_normal(n)
        value, product = hvp(x, v)
        want_value, want_product = _eager_hvp(x, v)
        assert value == pytest.approx(want_value, rel=1e-12)
        np.testing.assert_allclose(product, want_product, rtol=1e-12, atol=1e-12)
        assert product.flags.writeable
    assert _kernels(hvp) == 1


def test_an_option_xla_does_not_know_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    from funcdiff.replay.jit import _lower

    options = {"xla_cpu_no_such_option_exists": ""}
    monkeypatch.setattr(_lower, "KERNEL_OPTIONS", options)
    rng = np.random.default_rng(1)
    x, v = rng.uniform(-1.5, 1.5, 30), rng.standard_normal(30)
    hvp = replay.hvp(rosenbrock, compile=True)
    value, product = hvp(x, v)
    want_value, want_product = _eager_hvp(x, v)
    assert value == pytest.approx(want_value, rel=1e-12)
    np.testing.assert_allclose(product, want_product, rtol=1e-12, atol=1e-12)
    assert _kernels(hvp) == 1  # compiled, without the option
    assert options == {}  # and not tried again


SLOWED_CALLS: list[int] = []


def _slowed(fn, seconds: float = 0.02):
    import time

    def slow(*arrays):
        SLOWED_CALLS.append(1)
        time.sleep(seconds)
        return fn(*arrays)

    return slow


def _chain(x):
    y = x
    for _ in range(60):
        y = np.tanh(y * 1.01 + 0.01)
    return np.sum(y)


@pytest.mark.parametrize("slow_side", ["kernels", "numpy"])
def test_auto_keeps_the_faster_form(monkeypatch: pytest.MonkeyPatch, slow_side: str) -> None:
    """Under "auto" the first run times the kernels against the NumPy calls and keeps
    the faster (each side made slower by a sleep here, so the outcome is known)."""
    from funcdiff.replay import jit, program

    if slow_side == "kernels":
        real_runner = jit.runner
        monkeypatch.setattr(jit, "runner", lambda fn: _slowed(real_runner(fn)))
    else:
        real_compile = program.compile_program
        monkeypatch.setattr(
            program, "compile_program", lambda *a: _maybe_slow(real_compile(*a), a[0])
        )
    SLOWED_CALLS.clear()
    rng = np.random.default_rng(3)
    x = rng.uniform(-1.0, 1.0, 400)  # 60 x 2 x 400 elements: past AUTO_MIN_WORK
    vg = replay.value_and_grad(_chain, compile="auto")
    for _ in range(3):
        x = x + 0.01
        value, grad = vg(x)
        t = fd.tensor(x, requires_grad=True)
        want = _chain(t)
        (want_grad,) = fd.grad(want, [t])
        assert want_grad is not None
        assert value == pytest.approx(float(want.data), rel=1e-12)
        np.testing.assert_allclose(grad, want_grad.data, rtol=1e-12, atol=1e-14)
    (prog,) = [p for ps in vg._cache.values() for p in ps]
    if slow_side == "kernels":
        assert prog.info["jit"]["kernels"] == 0 and prog.info["jit"]["slower"]
        assert prog.kernels is False and prog.compiled is not None
    else:
        assert prog.info["jit"]["kernels"] >= 1 and "slower" not in prog.info["jit"]
        assert prog.kernels
    assert SLOWED_CALLS  # the slowed side was timed


def _maybe_slow(fn, code):
    """The NumPy form slowed, but not the program with kernels in it."""
    from funcdiff.replay import program

    if fn is None or any(ins[0] == program._GENERAL and _is_kernel(ins[1]) for ins in code):
        return fn
    return _slowed(fn)


def _is_kernel(fn) -> bool:
    return getattr(fn, "__qualname__", "").endswith("compile.<locals>.run")


def test_true_keeps_kernels_even_when_slower(monkeypatch: pytest.MonkeyPatch) -> None:
    from funcdiff.replay import jit

    real_runner = jit.runner
    monkeypatch.setattr(jit, "runner", lambda fn: _slowed(real_runner(fn)))
    vg = replay.value_and_grad(_chain, compile=True)
    vg(np.linspace(-1.0, 1.0, 400))
    (prog,) = [p for ps in vg._cache.values() for p in ps]
    assert prog.info["jit"]["kernels"] >= 1 and prog.kernels


def _rk4(p, steps):
    dt = 0.05
    u = np.array([1.0, 0.5, 0.2, 0.1])
    states = [u]
    for _ in range(steps):

        def rhs(w):
            return w * (p + 0.1 * w[::-1])

        k1 = rhs(u)
        k2 = rhs(u + (0.5 * dt) * k1)
        k3 = rhs(u + (0.5 * dt) * k2)
        k4 = rhs(u + dt * k3)
        u = u + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        states.append(u)
    return np.stack(states)


def test_a_long_chain_read_at_the_same_indices_is_one_kernel() -> None:
    """Each value of the sin/tanh chain and its gradient is read twice, but at the same
    element: XLA computes it once per element, so nothing needs cutting."""
    rng = np.random.default_rng(5)
    c, d = rng.uniform(0.95, 1.05, 10), rng.uniform(-0.01, 0.01, 10)

    def f(x):
        for _ in range(250):
            x = np.tanh(np.sin(x) * c + d)
        return np.sum(x)

    vg = replay.value_and_grad(f, compile=True)
    x = rng.uniform(-1.0, 1.0, 10)
    value, grad = vg(x)
    t = fd.tensor(x, requires_grad=True)
    want = f(t)
    (want_grad,) = fd.grad(want, [t])
    assert want_grad is not None
    assert value == pytest.approx(float(want.data), rel=1e-12)
    np.testing.assert_allclose(grad, want_grad.data, rtol=1e-12, atol=1e-15)
    assert _kernels(vg) == 1


def test_auto_leaves_a_loop_of_small_kernels_uncompiled() -> None:
    """RK4 on four numbers: its reversed reads cut the kernels every few steps, and
    kernels of a few hundred elements each would replay slower than NumPy calls."""
    p = np.array([0.3, -0.2, 0.1, 0.05])
    jac = replay.jacobian(lambda q: _rk4(q, 60), compile="auto")
    got = jac(p)
    want = functional.jacobian(lambda q: _rk4(q, 60), fd.tensor(p)).data
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    (prog,) = [q for qs in jac._cache.values() for q in qs]
    assert prog.info["jit"] is None and prog.kernels is False
    forced = replay.jacobian(lambda q: _rk4(q, 60), compile=True)
    np.testing.assert_allclose(forced(p), want, rtol=1e-12, atol=1e-14)
    assert _kernels(forced) > 1


@pytest.mark.parametrize("compile", [False, True])
def test_prepared_sparse_results_are_the_callers_own(compile: bool) -> None:
    """The replayed program's products are read without a copy; what the caller gets
    (the value and the matrix) is still its own, writable, and unchanged by later calls."""
    import funcdiff.sparse as fs

    def f(y):
        return y**3 + np.roll(y, 1) * y

    x = np.linspace(0.1, 1.0, 50)
    prepared = fs.prepare_jacobian(f, x, replay=True, compile=compile)
    for _ in range(4):  # record, verify, replay (compiled after a few NumPy runs)
        value, jac = prepared.value_and_jacobian(x)
    want = functional.jacobian(f, fd.tensor(x)).data
    np.testing.assert_allclose(jac.toarray(), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(value, f(x), rtol=1e-15)
    value[:] = -1.0
    jac.data[:] = -1.0
    value2, jac2 = prepared.value_and_jacobian(x)
    np.testing.assert_allclose(value2, f(x), rtol=1e-15)
    np.testing.assert_allclose(jac2.toarray(), want, rtol=1e-13, atol=1e-15)


def _at_offset(values: np.ndarray, k: int) -> np.ndarray:
    """A copy of ``values`` whose data starts ``k`` elements past a 64-byte boundary."""
    memory = np.empty(values.size + 16)
    start = (-memory.ctypes.data % 64) // memory.itemsize + k
    placed = memory[start : start + values.size].reshape(values.shape)
    placed[...] = values
    return placed


def test_widened_views_start_aligned_and_hold_the_array() -> None:
    import jax

    from funcdiff.replay.jit import _handover, _lower

    values = np.arange(1000.0)
    for k in range(8):
        x = _at_offset(values, k)
        assert _handover.misalignment(x) == k
        wide = _handover.widened(x, k)
        assert wide.ctypes.data % 64 == 0 and wide.size == x.size + k
        assert np.shares_memory(wide, x) and np.array_equal(wide[k:], values)
        # JAX reads the widened view in place (no copy), which is the point of it.
        with _lower.x64():
            assert jax.device_put(wide).unsafe_buffer_pointer() == wide.ctypes.data
    strided = _at_offset(values, 0)[::2]
    assert _handover.misalignment(strided) == 0  # not contiguous: JAX copies it
    assert not _handover.aligned(strided) and _handover.aligned(_at_offset(values, 0))
    assert not _handover.aligned(_at_offset(values, 1))


def test_large_arguments_at_every_alignment_give_eager_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from funcdiff.replay.jit import _lower

    widened: list[int] = []

    def counting(value: np.ndarray, k: int) -> np.ndarray:
        widened.append(id(value))
        return original(value, k)

    original = _lower.widened
    monkeypatch.setattr(_lower, "widened", counting)
    compiled_with: list[dict] = []
    compile_kernel = _lower._compile

    def noted(lowered, options):
        compiled_with.append(options)
        return compile_kernel(lowered, options)

    monkeypatch.setattr(_lower, "_compile", noted)
    rng = np.random.default_rng(5)
    n = 20_000
    hvp = replay.hvp(rosenbrock, compile=True)
    variants: list[int] = []
    # Each alignment twice: a kernel is compiled for one once it recurs.
    for k in [0, 2, 2, 5, 5, 7, 7, 1, 1, 0]:
        x = _at_offset(rng.uniform(-1.5, 1.5, n), k)
        v = _at_offset(rng.standard_normal(n), k)
        widened.clear()
        value, product = hvp(x, v)
        want_value, want_product = _eager_hvp(x, v)
        assert value == pytest.approx(want_value, rel=1e-12)
        np.testing.assert_allclose(product, want_product, rtol=1e-12, atol=1e-12)
        read_in_place = {id(x), id(v)} <= set(widened)
        if read_in_place and k not in variants:
            variants.append(k)
        # The caller's arrays are read in place at the first alignments that recur;
        # at others (and when aligned) they are not widened.
        assert read_in_place == (k in variants)
        assert not ({id(x), id(v)} & set(widened)) or read_in_place
    assert variants == [2, 5][: _lower.MAX_ALIGNMENTS]
    # The aligned kernel and one per widened variant; those at the options for them.
    assert len(compiled_with) == 1 + len(variants)
    assert all(_lower.WIDENED_OPTIONS.items() <= o.items() for o in compiled_with[1:])
    assert not _lower.WIDENED_OPTIONS.items() <= compiled_with[0].items()
    # Strided views are copied by JAX (never widened), with the same numbers.
    x, v = rng.uniform(-1.5, 1.5, 2 * n)[::2], rng.standard_normal(2 * n)[::2]
    widened.clear()
    value, product = hvp(x, v)
    assert not widened
    np.testing.assert_allclose(product, _eager_hvp(x, v)[1], rtol=1e-12, atol=1e-12)
    assert _kernels(hvp) == 1


def test_matrix_arguments_off_alignment_give_eager_gradients() -> None:
    def f(a):
        return np.sum(np.sin(a) * a[::-1] + np.exp(-(a**2)))

    rng = np.random.default_rng(2)
    vg = replay.value_and_grad(f, compile=True)
    for k in (3, 3, 0):
        a = _at_offset(rng.standard_normal((120, 90)), k)
        value, g = vg(a)
        t = fd.tensor(a, requires_grad=True)
        want = f(t)
        (want_g,) = fd.grad(want, [t])
        assert value == pytest.approx(float(want.data), rel=1e-12)
        np.testing.assert_allclose(g, want_g.data, rtol=1e-12, atol=1e-12)
    assert _kernels(vg) == 1


def test_large_results_are_the_callers_own_without_a_copy() -> None:
    from funcdiff.replay import jit

    n = 20_000
    x, v = np.linspace(-1.0, 1.0, n), np.ones(n)
    hvp = replay.hvp(rosenbrock, compile=True)
    _, first = hvp(x, v)
    _, second = hvp(x, v)
    assert jit.kernel_output(second)  # XLA's own buffer, handed over
    assert first.flags.writeable and not np.shares_memory(first, second)
    want = second.copy()
    first[:] = np.nan
    _, third = hvp(x, v)
    np.testing.assert_array_equal(third, want)
    np.testing.assert_array_equal(second, want)
    assert not jit.kernel_output(x) and not jit.kernel_output(x[1:])


@pytest.mark.parametrize(
    ("shift", "axis"),
    [(1, None), (-7, None), (2, 0), (-1, -1), (13, 1), ((1, 2), (0, 1)), (3, (0, 1)), (0, 1)],
)
def test_rolls_lowered_as_gathers_equal_numpy(monkeypatch: pytest.MonkeyPatch, shift, axis) -> None:
    """np.roll is lowered as a gather at wrapped indices, not as JAX's concatenation:
    every shift (negative, past the length, several axes, along the flattened array)
    gives NumPy's values and the eager gradient."""
    from funcdiff.replay.jit import _arrays

    lowered = []

    def counted(*args, **kwargs):
        lowered.append(args[1:])
        return _arrays._roll(*args, **kwargs)

    monkeypatch.setitem(_arrays._LOWERINGS, np.roll, counted)

    def f(x):
        return np.sum(np.sin(x) * np.roll(x * x, shift, axis) + np.roll(x, 1, 0) ** 3)

    rng = np.random.default_rng(5)
    value_and_grad = replay.value_and_grad(f, compile=True)
    for _ in range(3):
        x = rng.standard_normal((4, 5))
        value, grad = value_and_grad(x)
        assert value == pytest.approx(float(f(x)), rel=1e-13)
        want = functional.vjp(f, fd.tensor(x))[1].data
        np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-13)
    assert _kernels(value_and_grad) >= 1
    assert lowered  # the rolls went through the gather lowering


def _structured_cases() -> list:
    eye = np.eye(6, 5)
    run = np.eye(6, 5, k=-1)
    run[:2] = 0.0  # the seeds of a slice: a run of the diagonal, not all of it
    minus_zero = 2.0 * np.eye(4)
    minus_zero[0, 3] = -0.0
    signed = np.zeros((70,))
    signed[5] = -0.0
    two = np.eye(5) + np.eye(5, k=1)
    gap = np.eye(6)
    gap[2, 2] = 0.0
    nan = np.where(np.eye(5) == 1.0, np.nan, 0.0)
    minus_nan = np.eye(9)
    minus_nan[0, 1] = -np.nan
    return [
        ("2 eye", 2.0 * eye, True),
        ("shifted run", run, True),
        ("minus eye", np.where(np.eye(9, 12, k=2) == 1.0, -3.0, 0.0), True),
        ("minus eye of -0.0", -3.0 * np.eye(9, 12, k=2), False),
        ("inf", np.where(np.eye(4) == 1.0, np.inf, 0.0), True),
        ("uniform", np.full((9, 9), 0.25), True),
        ("zeros", np.zeros((80,)), True),
        ("a -0.0 off the diagonal", minus_zero, False),
        ("mixed signed zeros", signed, False),
        ("two diagonals", two, False),
        ("a gap in the run", gap, False),
        ("nan", nan, False),
        ("two values", np.diag(np.arange(1.0, 7.0)), False),
        ("dense", np.random.default_rng(0).uniform(1.0, 2.0, (9, 9)), False),
        ("-nan off the diagonal", minus_nan, False),
    ]


@pytest.mark.parametrize(
    ("name", "value", "expression"), _structured_cases(), ids=[c[0] for c in _structured_cases()]
)
def test_structured_constants_become_exact_expressions(name, value, expression) -> None:
    """Uniform arrays and single-diagonal matrices (derivative seeds) reach the kernel
    as expressions XLA fuses; they equal the recorded array bit for bit, signed zeros
    included, and anything else stays the array itself."""
    import jax

    from funcdiff.replay.jit._arrays import constant, unwrap

    with jax.enable_x64(True):
        got = constant(value)
        if not expression:
            assert got is value
            return
        assert got is not value
        out = np.asarray(unwrap(got))
    assert out.dtype == value.dtype and out.shape == value.shape
    np.testing.assert_array_equal(out, value)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(value))


def _kernels_compiled(monkeypatch: pytest.MonkeyPatch) -> list:
    """The XLA executables compiled from now on in this test, in order."""
    from funcdiff.replay.jit import _lower

    executables: list = []
    compile_kernel = _lower._compile

    def kept(lowered, options):
        executables.append(compile_kernel(lowered, options))
        return executables[-1]

    monkeypatch.setattr(_lower, "_compile", kept)
    return executables


def test_a_dense_hessian_kernel_reads_no_seed_matrices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hessian's seeds (2 eye and shifted identities) are computed in the kernel,
    not read as literal matrices (a literal costs a pass over memory: 1.7x the time
    at n=100), and the Hessian equals Rosenbrock's closed form."""
    executables = _kernels_compiled(monkeypatch)
    hessian = replay.hessian(rosenbrock, compile=True)
    rng = np.random.default_rng(2)
    for _ in range(2):
        x = rng.uniform(-1.5, 1.5, 100)
        want = np.diag(np.r_[1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0, 0.0])
        want[1:, 1:] += np.diag(np.full(99, 200.0))
        off = -400.0 * x[:-1]
        want += np.diag(off, 1) + np.diag(off, -1)
        np.testing.assert_allclose(hessian(x), want, rtol=1e-13, atol=1e-10)
    assert executables and _kernels(hessian) == 1
    assert not any("constant({" in e.as_text() for e in executables)


@pytest.mark.parametrize(
    ("reduce", "shape", "axis", "keepdims"),
    [
        (np.sum, (4096,), None, False),
        (np.sum, (100_003,), None, False),
        (np.sum, (301, 700), None, True),
        (np.sum, (301, 700), 0, False),
        (np.sum, (4095,), None, False),
        (np.mean, (100_003,), None, False),
        (np.mean, (301, 700), None, True),
        (np.mean, (301, 700), 1, False),
    ],
)
def test_large_sums_equal_numpy_and_read_their_operands_once(
    monkeypatch: pytest.MonkeyPatch, reduce, shape, axis, keepdims
) -> None:
    """A whole-array sum or mean of a large float array is lowered as a sum of rows
    that XLA fuses with the loop producing its operand (no full-size intermediate in
    memory); partial reductions and small arrays go to ``jax.numpy``. Values and
    gradients are NumPy's to rounding."""
    import jax

    from funcdiff.replay.jit import _arrays

    executables = _kernels_compiled(monkeypatch)

    def f(x):
        s = reduce(np.sin(x) * x + 0.5 * x, axis=axis, keepdims=keepdims)
        return np.sum(s * s) if axis is not None or keepdims else s

    rng = np.random.default_rng(8)
    value_and_grad = replay.value_and_grad(f, compile=True)
    for _ in range(2):
        x = rng.uniform(-2.0, 2.0, shape)
        value, grad = value_and_grad(x)
        t = fd.tensor(x, requires_grad=True)
        want = f(t)
        assert value == pytest.approx(float(want.data), rel=1e-12)
        want_grad = fd.grad(want, t)[0].data  # normwise: the sum's rounding scales it
        np.testing.assert_allclose(grad, want_grad, rtol=0, atol=1e-12 * abs(want_grad).max())
    assert _kernels(value_and_grad) >= 1
    size = int(np.prod(shape))
    if axis is None and size >= _arrays.ROW_SUM_SIZE:
        with jax.enable_x64(True):
            temp = max(e.memory_analysis().temp_size_in_bytes for e in executables)
        # The row sums (and the gradient, which does not involve the sum) only.
        assert temp < 8 * size // 4


def test_a_forward_jacobian_computes_its_identity_seed_in_the_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Jacobian with more outputs than inputs is pushed forward from the identity, a
    constant slot of the program: the kernel computes it from indices (it reads x
    alone) and the Jacobian is the eager one."""

    def g(x):
        return np.concatenate([np.sin(x) * x[0], np.cos(x), x**2, np.tanh(x)])

    executables = _kernels_compiled(monkeypatch)
    jacobian = replay.jacobian(g, compile=True)
    rng = np.random.default_rng(4)
    for _ in range(2):
        x = rng.uniform(-1.0, 1.0, 30)
        want = functional.jacobian(g, fd.tensor(x)).data
        np.testing.assert_allclose(jacobian(x), want, rtol=1e-13, atol=1e-14)
    assert executables and _kernels(jacobian) == 1
    text = executables[0].as_text()
    entry = text[text.index("ENTRY") :].splitlines()[0]
    assert entry.count("parameter") + entry.count(": f64[") == 1  # x alone
    assert not any("constant({" in e.as_text() for e in executables)
