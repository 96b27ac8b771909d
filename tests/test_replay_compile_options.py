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
