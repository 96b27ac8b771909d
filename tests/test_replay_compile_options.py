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
