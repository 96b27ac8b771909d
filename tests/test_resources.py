"""Resources: memory stays flat over many calls and after exceptions; threads agree.

Memory is measured with tracemalloc (NumPy reports its data buffers to it too): after a
warm-up, the traced memory at the end of a long run of calls must not exceed the traced
memory near its start by more than a small allowance, far below what one leaked
array or graph per call would add. ``FIGURES`` collects the measured numbers; run this
file with ``-s`` to print them (docs/reliability.rst quotes them).
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import tracemalloc
import weakref
from collections.abc import Callable

import numpy as np
import pytest

import funcdiff as fd
from funcdiff.functional import hessian, hvp, jacobian

FIGURES: dict[str, str] = {}


def _traced_growth(step: Callable[[], None], calls: int, warmup: int = 50) -> tuple[int, int]:
    """Run ``step`` ``calls`` times under tracemalloc.

    Returns (growth, peak): the traced memory after the last call minus the traced memory
    after the first tenth of the calls (so one-off caches filled early do not count), and
    the peak above the starting point.
    """
    for _ in range(warmup):
        step()
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tenth = max(calls // 10, 1)
        for _ in range(tenth):
            step()
        gc.collect()
        early = tracemalloc.get_traced_memory()[0]
        for _ in range(calls - tenth):
            step()
        gc.collect()
        end, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return end - early, peak - start


@pytest.mark.slow
def test_memory_flat_over_10000_grad_calls() -> None:
    x = fd.tensor(np.linspace(-1.0, 1.0, 50), requires_grad=True)

    def step() -> None:
        (g,) = fd.grad(np.sum(np.sin(x) * x), x)
        assert g.shape == (50,)

    t0 = time.perf_counter()
    growth, peak = _traced_growth(step, 10_000)
    FIGURES["grad x 10,000"] = (
        f"growth {growth} B, peak {peak} B, {time.perf_counter() - t0:.1f} s traced"
    )
    # one leaked gradient (400 B of data) per call would be 3.6 MB
    assert growth < 16_384, f"memory grew by {growth} bytes over 10,000 grad calls"
    assert peak < 200_000


@pytest.mark.slow
def test_memory_flat_over_1000_hessians_n100() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((100, 100)) / 10

    def f(x):
        return np.sum(np.sin(x) * x) + x @ a @ x + np.sum(np.tanh(a @ x) ** 2)

    x = fd.tensor(rng.standard_normal(100))

    def step() -> None:
        h = hessian(f, x, vectorize=True)
        assert h.shape == (100, 100)

    t0 = time.perf_counter()
    growth, peak = _traced_growth(step, 1_000, warmup=5)
    FIGURES["hessian n=100 x 1,000"] = (
        f"growth {growth} B, peak {peak} B, {time.perf_counter() - t0:.1f} s traced"
    )
    # one leaked Hessian is 80 kB; 900 of them 72 MB
    assert growth < 65_536, f"memory grew by {growth} bytes over 1,000 Hessians"
    # a few Hessian-sized temporaries (basis, batched cotangents) at a time, not 1,000
    assert peak < 40 * 80_000


@pytest.mark.slow
def test_memory_flat_after_exceptions_in_the_middle_of_a_jacobian() -> None:
    """The user's hook raises on the third row of a looped Jacobian, 300 times over: the
    recorded graph (with its saved 80 kB arrays) is released each time."""
    n = 10_000
    x = fd.tensor(np.linspace(0.0, 1.0, n))
    alive: list[weakref.ref] = [lambda: None]  # the intermediate of the latest call

    class Boom(Exception):
        pass

    def f(x):
        rows = {"count": 0}
        h = np.sin(x) * 1.0
        alive[0] = weakref.ref(h)

        def hook(g):
            rows["count"] += 1
            if rows["count"] == 3:
                raise Boom
            return g

        h.register_hook(hook)
        return np.stack([np.sum(h), np.sum(h * h), np.sum(h**3), np.sum(h**4)])

    def step() -> None:
        try:
            jacobian(f, x)
        except Boom:
            pass
        else:  # pragma: no cover
            raise AssertionError("the hook did not raise")

    growth, peak = _traced_growth(step, 300, warmup=3)
    FIGURES["exception mid-jacobian x 300"] = f"growth {growth} B, peak {peak} B"
    # one leaked graph per failure would keep 300 x 160 kB
    assert growth < 16_384, f"memory grew by {growth} bytes over 300 failed Jacobians"
    assert peak < 20 * 8 * n  # a handful of the 80 kB arrays, never 300 of them
    gc.collect()
    assert alive[0]() is None, "an intermediate survived its failed Jacobian"
    assert fd.is_grad_enabled()


# --------------------------------------------------------------------------- threads
def _tasks() -> list[tuple[str, bool, Callable[[], list[np.ndarray]]]]:
    """Eight different computations: (name, inside no_grad, fn returning arrays)."""
    rng = np.random.default_rng(1)
    xs = [rng.uniform(-1.0, 1.0, size=6) for _ in range(8)]
    a = rng.standard_normal((6, 6)) / 6 + 2 * np.eye(6)

    def t_grad():
        x = fd.tensor(xs[0], requires_grad=True)
        return [fd.grad(np.sum(np.exp(np.sin(x)) * x), x)[0].data]

    def t_hessian():
        return [
            hessian(
                lambda x: np.sum(np.tanh(x) ** 3) + x @ a @ x, fd.tensor(xs[1]), vectorize=True
            ).data
        ]

    def t_jacobian_loop():  # inside no_grad
        return [jacobian(lambda x: np.linalg.solve(a, np.cos(x) * x), fd.tensor(xs[2])).data]

    def t_jacobian_forward():
        return [
            jacobian(
                lambda x: np.cumprod(1.0 + 0.1 * x),
                fd.tensor(xs[3]),
                strategy="forward-mode",
                vectorize=True,
            ).data
        ]

    def t_hvp():  # inside no_grad
        out, h = hvp(
            lambda x: np.sum(x**4) * np.sum(np.sin(x)), fd.tensor(xs[4]), fd.tensor(np.ones(6))
        )
        return [out.data, h.data]

    def t_backward():
        x = fd.tensor(xs[5], requires_grad=True)
        for _ in range(3):
            np.sum(np.linalg.inv(a + np.diag(x)) ** 2).backward()
        return [x.grad.data]

    def t_third_order():
        x = fd.tensor(xs[6], requires_grad=True)
        h = hessian(lambda x: np.sum(np.sin(x) * np.exp(x)), x, create_graph=True)
        return [h.data, fd.grad(np.sum(h), x)[0].data]

    def t_chunked_and_modes():  # inside no_grad, toggling grad mode inside
        with fd.enable_grad():
            y = fd.tensor(xs[7], requires_grad=True) * 2.0
            recorded = y.requires_grad
        z = fd.tensor(xs[7], requires_grad=True) * 2.0
        flags = np.array([recorded, z.requires_grad, fd.is_grad_enabled()], dtype=float)
        jac = jacobian(
            lambda x: np.outer(x, np.sin(x)).ravel()[:10],
            fd.tensor(xs[7]),
            vectorize=True,
            chunk_size=3,
        )
        return [flags, jac.data]

    return [
        ("grad", False, t_grad),
        ("hessian", False, t_hessian),
        ("jacobian loop", True, t_jacobian_loop),
        ("jacobian forward", False, t_jacobian_forward),
        ("hvp", True, t_hvp),
        ("backward x3", False, t_backward),
        ("third order", False, t_third_order),
        ("chunked + modes", True, t_chunked_and_modes),
    ]


def _run(no_grad: bool, fn: Callable[[], list[np.ndarray]]) -> list[np.ndarray]:
    if no_grad:
        with fd.no_grad():
            out = fn()
            assert not fd.is_grad_enabled()
        return out
    out = fn()
    assert fd.is_grad_enabled()
    return out


@pytest.mark.parametrize("rounds", [50])
def test_threads_agree_with_serial_runs(rounds: int) -> None:
    tasks = _tasks()
    serial = [_run(no_grad, fn) for _, no_grad, fn in tasks]
    # the mode flags of the last task: recorded under enable_grad, not under no_grad
    assert serial[-1][0].tolist() == [1.0, 0.0, 0.0]
    barrier = threading.Barrier(len(tasks))
    errors: list[str] = []
    done = [0] * len(tasks)

    def worker(k: int) -> None:
        name, no_grad, fn = tasks[k]
        barrier.wait()
        try:
            for r in range(rounds):
                got = _run(no_grad, fn)
                for a, b in zip(got, serial[k], strict=True):
                    if not np.array_equal(a, b):
                        errors.append(f"{name}, round {r}: differs from the serial result")
                        return
                done[k] += 1
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append(f"{name}: {type(exc).__name__}: {exc}")

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, to interleave the recordings
    t0 = time.perf_counter()
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(tasks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    finally:
        sys.setswitchinterval(old)
    FIGURES["threads"] = (
        f"{len(tasks)} threads x {rounds} rounds = {sum(done)} rounds, "
        f"{time.perf_counter() - t0:.1f} s"
    )
    assert not errors, errors
    assert done == [rounds] * len(tasks)
    assert fd.is_grad_enabled()


def test_print_figures(capsys) -> None:
    """Not a check: prints the figures measured above (visible with ``pytest -s``)."""
    with capsys.disabled():
        for k, v in FIGURES.items():
            print(f"\n[resources] {k}: {v}", end="")
