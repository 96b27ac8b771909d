"""funcdiff-only measurements: dispatch overhead, backward over long chains, Jacobian memory."""

from __future__ import annotations

import gc
import time
import tracemalloc
from typing import Any

import numpy as np

from benchmarks import problems as P
from benchmarks._common import compare, to_arrays
from benchmarks._timing import Budget, measure


def dispatch(fd: Any, budget: Budget) -> dict[str, Any]:
    """``np.tanh(t)`` on a 10-element Tensor minus ``np.tanh`` on the ndarray (issue 3)."""
    a = np.random.default_rng(3).uniform(-1.0, 1.0, 10)
    t = fd.tensor(a)
    tg = fd.tensor(a, requires_grad=True)
    for arg in (t, tg):
        err = compare(to_arrays(np.tanh(arg)), [np.tanh(a)], 0.0, 0.0)
        if err:
            return {"status": "FAILED", "error": err}
    base = measure(lambda: np.tanh(a), budget)
    plain = measure(lambda: np.tanh(t), budget)
    recorded = measure(lambda: np.tanh(tg), budget)
    return {
        "status": "ok",
        "ndarray_us": base.median * 1e6,
        "tensor_us": plain.median * 1e6,
        "tensor_requires_grad_us": recorded.median * 1e6,
        "overhead_us": (plain.median - base.median) * 1e6,
        "overhead_requires_grad_us": (recorded.median - base.median) * 1e6,
        "timings": {
            "ndarray": base.as_dict(),
            "tensor": plain.as_dict(),
            "tensor_requires_grad": recorded.as_dict(),
        },
    }


def chain(
    fd: Any, lengths: tuple[int, ...], repeats: dict[int, int], clock: str = "wall"
) -> dict[str, Any]:
    """Backward over a chain of ``n`` recorded ops (``y*a`` and ``y+b`` alternating).

    The forward recording is timed separately; each repeat records a fresh chain
    (backward frees the graph). The gradient is ``a ** (n/2)``.
    """
    a, b = 1.0 + 1e-7, 1e-3
    now = time.process_time if clock == "cpu" else time.perf_counter
    rows = []
    for n in lengths:
        fwd_times, bwd_times = [], []
        for _ in range(repeats.get(n, 1)):
            x = fd.tensor(0.3, requires_grad=True)
            gc.collect()
            t0 = now()
            y = x
            for _ in range(n // 2):
                y = y * a
                y = y + b
            t1 = now()
            (g,) = fd.grad(y, x)
            t2 = now()
            err = compare(to_arrays(g), [np.asarray(a ** (n // 2))], 1e-8, 0.0)
            del y, g
            if err:
                rows.append({"ops": n, "status": "FAILED", "error": err})
                break
            fwd_times.append(t1 - t0)
            bwd_times.append(t2 - t1)
        else:
            fwd, bwd = float(np.median(fwd_times)), float(np.median(bwd_times))
            rows.append(
                {
                    "ops": n,
                    "status": "ok",
                    "repeats": len(bwd_times),
                    "backward_s": bwd,
                    "backward_us_per_op": bwd / n * 1e6,
                    "forward_us_per_op": fwd / n * 1e6,
                }
            )
    ok = [r for r in rows if r["status"] == "ok"]
    result: dict[str, Any] = {"rows": rows}
    if len(ok) >= 2:
        per_op = [r["backward_us_per_op"] for r in ok]
        result["growth"] = per_op[-1] / per_op[0]  # longest over shortest, 1.0 = flat
    return result


def memory(
    F: Any, fd: Any, n: int = 2000, chunk_size: int = 100, unchunked: bool = True
) -> dict[str, Any]:
    """Extra peak memory (tracemalloc) of ``jacobian(vectorize=True, chunk_size=k)``.

    "Extra" is the peak of traced allocations during the call minus what was allocated
    before it, so the returned Jacobian itself counts. ``unchunked`` adds the same
    measurement without ``chunk_size`` for comparison.
    """
    if F is None or not hasattr(F, "jacobian"):
        return {"status": "skipped", "note": "funcdiff.functional.jacobian not available yet"}
    rng = np.random.default_rng(7)
    A = rng.standard_normal((n, n)) / np.sqrt(n)
    x = rng.standard_normal(n)
    f = P.tanh_mv(P.NP, A)
    x0 = fd.tensor(x)
    want = [P.tanh_mv_jacobian(A, x)]
    jac_bytes = want[0].nbytes
    rows = []
    settings: list[dict] = [{"vectorize": True, "chunk_size": chunk_size}]
    if unchunked:
        settings.append({"vectorize": True})
    for kw in settings:
        label = ", ".join(f"{k}={v}" for k, v in kw.items())
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            t0 = time.perf_counter()
            J = F.jacobian(f, x0, **kw)
            seconds = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
        except Exception as exc:  # noqa: BLE001  (reported in the table)
            rows.append({"setting": label, "status": "error", "error": repr(exc)[:300]})
            continue
        finally:
            tracemalloc.stop()
        err = compare(to_arrays(J), want, 1e-9, 1e-12)
        del J
        extra = peak - base
        rows.append(
            {
                "setting": label,
                "status": "FAILED" if err else "ok",
                "error": err,
                "extra_peak_bytes": extra,
                "jacobian_bytes": jac_bytes,
                "ratio": extra / jac_bytes,
                "seconds_under_tracemalloc": seconds,
            }
        )
    return {"status": "ok", "n": n, "rows": rows}


def graph_memory(fd: Any, n: int = 1_000_000, steps: int = 25) -> dict[str, Any]:
    """Memory a recorded graph holds after the forward pass (tracemalloc).

    The function is B5's chain, ``(sin, * c, + d, tanh) x steps`` on ``n`` elements:
    ``4 * steps`` operations, each making one array of ``8 n`` bytes. A node that kept
    every input and output would hold about all of them until the backward pass; one
    that keeps only what its rule reads holds one array per step (tanh's output, which
    is also the next sin's input). Reported as a multiple of one array.
    """
    rng = np.random.default_rng(11)
    c, d = rng.uniform(0.95, 1.05, n), rng.uniform(-0.01, 0.01, n)
    x = fd.tensor(rng.uniform(-1.0, 1.0, n), requires_grad=True)

    def f(t: Any) -> Any:
        y = t
        for _ in range(steps):
            y = np.tanh(np.sin(y) * c + d)
        return np.sum(y)

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        v = f(x)
        held = tracemalloc.get_traced_memory()[0] - base
        (g,) = fd.grad(v, x)
    finally:
        tracemalloc.stop()
    y = x.data + 1e-30j  # the complex step: exact to rounding, elementwise
    for _ in range(steps):
        y = np.tanh(np.sin(y) * c + d)
    err = compare(to_arrays([g]), [y.imag / 1e-30], 1e-9, 1e-12)
    array_bytes = 8 * n
    return {
        "status": "FAILED" if err else "ok",
        "error": err,
        "ops": 4 * steps,
        "held_bytes": held,
        "array_bytes": array_bytes,
        "arrays_held": held / array_bytes,
    }
