"""funcdiff on a GPU through CuPy, in one go: correctness, then the speed-up.

``python -m benchmarks.gpu [--n 10000000] [--json PATH]``

1. **Values and types.** A set of programs (elementwise and ``scipy.special`` code,
   reductions, indexing, linear algebra, ``funcdiff.functional`` to second order,
   ``funcdiff.replay``) runs on NumPy arrays and on the same values as CuPy arrays: every
   result must be a ``cupy.ndarray`` and equal the NumPy path to 1e-10 (relative).
2. **Speed.** The Hessian-vector product of the Rosenbrock function
   (``scipy.optimize.rosen``'s chained form) at ``n`` unknowns (1e7 by default): funcdiff
   on the CPU (NumPy) and on the GPU (CuPy) in the same process, and beside them
   ``jax.jit`` and torch on the GPU where installed. The answer is checked against
   ``scipy.optimize.rosen_hess_prod`` at a small ``n`` first, and every timed result
   against funcdiff's NumPy result at ``n``. The target is a GPU time at least 100 times
   shorter than the CPU time.

On a machine without CuPy or a CUDA device the script runs what it can (the CPU timing)
and says what it skipped. The results file carries the machine header
(``benchmarks/_machine.py``) and the GPU's name.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HERE = Path(__file__).resolve().parent
TARGET_SPEEDUP = 100.0


def _cupy() -> tuple[Any, str]:
    """CuPy and the device's name, or (None, why not)."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed (pip install 'funcdiff[gpu]')"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None, "no CUDA device"
        props = cupy.cuda.runtime.getDeviceProperties(0)
    except Exception as exc:  # no driver
        return None, f"no usable CUDA device ({exc})"
    name = props["name"]
    return cupy, name.decode() if isinstance(name, bytes) else str(name)


def rosen(x: Any) -> Any:
    """``scipy.optimize.rosen``: runs on ndarrays, CuPy arrays and Tensors alike."""
    import numpy as np

    return np.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


def _timed(fn: Callable[[], Any], sync: Callable[[], None], repeats: int) -> float:
    """The median seconds of ``repeats`` calls of ``fn`` (``sync`` waits for the device)."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _programs(np: Any) -> list[tuple[str, Callable[[Any], Any]]]:
    """Name and program; each takes one float64 vector of length 12 and returns arrays."""
    import scipy.special as sp

    import funcdiff as fd
    import funcdiff.replay as replay
    from funcdiff import functional as F

    def grad_of(f: Callable) -> Callable:
        def g(x: Any) -> Any:
            t = fd.tensor(x, requires_grad=True)
            return fd.grad(f(t), t)[0].data

        return g

    def elementwise(x: Any) -> Any:
        return np.sum(np.sin(x) * np.exp(-(x**2)) + np.tanh(x) / (1.0 + x**2))

    def special(x: Any) -> Any:
        return np.sum(
            sp.erf(x) + sp.erfc(x) + sp.expit(x) + sp.ndtr(x) + sp.gammaln(x**2 + 0.5)
        ) + np.sum(sp.xlogy(x**2, x**2 + 1.0))

    def shapes(x: Any) -> Any:
        m = np.reshape(x, (3, 4))
        return np.sum(np.cumsum(m, axis=1) ** 2) + np.max(m) + np.sum(m[[0, 2, 0], 1:] ** 3)

    def algebra(x: Any) -> Any:
        m = np.reshape(x[:9], (3, 3)) + 3.0 * np.diag(np.ones_like(x[:3]))
        return np.sum(np.linalg.solve(m, x[9:]) ** 2) + np.trace(m @ m.T)

    return [
        ("grad, elementwise", grad_of(elementwise)),
        ("grad, scipy.special", grad_of(special)),
        ("grad, cumsum/max/indexing", grad_of(shapes)),
        ("grad, solve/matmul/trace", grad_of(algebra)),
        ("hessian, elementwise", lambda x: F.hessian(elementwise, x, vectorize=True)),
        (
            "hessian, erf and expit",
            lambda x: F.hessian(lambda y: np.sum(sp.erf(y) * sp.expit(y)), x),
        ),
        ("jacobian", lambda x: F.jacobian(lambda y: np.sin(y) * np.sum(y**2), x)),
        ("hvp, rosen", lambda x: F.hvp(rosen, x, x * 0.5 + 1.0)[1]),
        ("replay value_and_grad, rosen", replay.value_and_grad(rosen)),
    ]


def _arrays(result: Any) -> list:
    """The arrays of a result: tuples flattened, the data of Tensors."""
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _arrays(r)]
    return [getattr(result, "data", result) if hasattr(result, "grad_fn") else result]


def check_values(np: Any, cupy: Any) -> list[dict]:
    """Each program on NumPy and on CuPy (``cupy`` may be any module with ``ndarray``,
    ``asarray`` and ``asnumpy``): all results CuPy arrays, equal to 1e-10."""
    rows = []
    x = np.random.default_rng(0).uniform(0.2, 1.2, 12)
    for name, program in _programs(np):
        entry: dict[str, Any] = {"program": name}
        try:
            reference = program(x)
            got = program(cupy.asarray(x))
            ref_items, got_items = _arrays(reference), _arrays(got)
            entry["all_cupy"] = all(isinstance(g, cupy.ndarray) for g in got_items)
            entry["max_rel_err"] = max(
                float(np.max(np.abs(cupy.asnumpy(g) - r)) / max(1.0, float(np.max(np.abs(r)))))
                for g, r in zip(got_items, ref_items)
            )
            entry["ok"] = entry["all_cupy"] and entry["max_rel_err"] <= 1e-10
        except Exception as exc:
            entry.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        rows.append(entry)
        status = "ok" if entry["ok"] else "FAILED"
        print(f"  {name:34} {status:7} {entry.get('max_rel_err', entry.get('error', ''))}")
    return rows


def _jax_hvp(x: Any, v: Any) -> tuple[Callable[[], Any], Callable[[], None]] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    if not any(d.platform == "gpu" for d in jax.devices()):
        return None
    jax.config.update("jax_enable_x64", True)

    def f(y: Any) -> Any:
        return jnp.sum(100.0 * (y[1:] - y[:-1] ** 2.0) ** 2.0 + (1 - y[:-1]) ** 2.0)

    hvp = jax.jit(lambda y, w: jax.jvp(jax.grad(f), (y,), (w,))[1])
    xj, vj = jax.device_put(x), jax.device_put(v)
    return (lambda: hvp(xj, vj).block_until_ready()), (lambda: None)


def _torch_hvp(x: Any, v: Any) -> tuple[Callable[[], Any], Callable[[], None]] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    xt = torch.tensor(x, dtype=torch.float64, device="cuda")
    vt = torch.tensor(v, dtype=torch.float64, device="cuda")

    def call() -> Any:
        y = xt.detach().requires_grad_(True)
        f = torch.sum(100.0 * (y[1:] - y[:-1] ** 2.0) ** 2.0 + (1 - y[:-1]) ** 2.0)
        (g,) = torch.autograd.grad(f, y, create_graph=True)
        (hv,) = torch.autograd.grad(g, y, vt)
        return hv

    return call, torch.cuda.synchronize


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__)
    p.add_argument("--n", type=int, default=10_000_000, help="Rosenbrock size (1e7)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None, help="where to write results")
    args = p.parse_args(argv)

    import numpy as np
    import scipy.optimize

    from benchmarks._machine import machine
    from funcdiff import functional as F

    cupy, device = _cupy()
    skipped: list[str] = []
    result: dict[str, Any] = {"machine": machine({}), "device": device if cupy else None}
    print(f"device: {device}")

    # The derivative itself, against SciPy's, at a small size.
    small = np.random.default_rng(1).uniform(-1.0, 1.0, 50)
    hv_small = F.hvp(rosen, small, np.ones(50))[1].data
    reference_ok = bool(
        np.allclose(hv_small, scipy.optimize.rosen_hess_prod(small, np.ones(50)), rtol=1e-12)
    )
    print(f"hvp against scipy.optimize.rosen_hess_prod (n = 50): {reference_ok}")

    if cupy is not None:
        print("values and types, NumPy against CuPy:")
        result["values"] = check_values(np, cupy)
    else:
        skipped.append(f"values and types on CuPy: {device}")

    n = args.n
    rng = np.random.default_rng(2)
    x, v = rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n)
    cpu_hv = F.hvp(rosen, x, v)[1].data
    cells: dict[str, float] = {}
    cells["funcdiff, NumPy (CPU)"] = _timed(
        lambda: F.hvp(rosen, x, v), lambda: None, max(1, args.repeats // 2)
    )
    checks: dict[str, bool] = {}
    if cupy is not None:
        xg, vg = cupy.asarray(x), cupy.asarray(v)
        sync = cupy.cuda.Device().synchronize
        gpu_hv = F.hvp(rosen, xg, vg)[1].data
        checks["funcdiff, CuPy (GPU)"] = isinstance(gpu_hv, cupy.ndarray) and bool(
            np.allclose(cupy.asnumpy(gpu_hv), cpu_hv, rtol=1e-10, atol=1e-10)
        )
        cells["funcdiff, CuPy (GPU)"] = _timed(lambda: F.hvp(rosen, xg, vg), sync, args.repeats)
        cells["rosen forward only, CuPy (GPU)"] = _timed(lambda: rosen(xg), sync, args.repeats)
        peers = {"jax.jit (GPU)": _jax_hvp(x, v), "torch (GPU)": _torch_hvp(x, v)}
        for name, peer in peers.items():
            if peer is None:
                skipped.append(f"{name}: not installed or no GPU backend")
                continue
            call, peer_sync = peer
            got = call()
            host = got.cpu().numpy() if hasattr(got, "cpu") else np.asarray(got)
            checks[name] = bool(np.allclose(host, cpu_hv, rtol=1e-10, atol=1e-10))
            cells[name] = _timed(call, peer_sync, args.repeats)
    else:
        skipped.append(f"GPU timings (funcdiff on CuPy, jax.jit, torch): {device}")
    cells["rosen forward only, NumPy (CPU)"] = _timed(lambda: rosen(x), lambda: None, 3)

    print(f"Rosenbrock Hessian-vector product, n = {n:.0e} (median seconds per call):")
    for name, seconds in cells.items():
        mark = "" if name not in checks else ("  checked" if checks[name] else "  WRONG")
        print(f"  {name:34} {seconds:10.4g} s{mark}")
    speedup = None
    if "funcdiff, CuPy (GPU)" in cells:
        speedup = cells["funcdiff, NumPy (CPU)"] / cells["funcdiff, CuPy (GPU)"]
        verdict = "met" if speedup >= TARGET_SPEEDUP else "missed"
        target = f"target {TARGET_SPEEDUP:.0f}x: {verdict}"
        print(f"funcdiff GPU speed-up over CPU: {speedup:.0f}x ({target})")
    for line in skipped:
        print(f"skipped: {line}")
    result.update(
        n=n,
        reference_ok=reference_ok,
        seconds=cells,
        checked=checks,
        speedup=speedup,
        skipped=skipped,
    )
    out = Path(args.json) if args.json else HERE / "results" / f"gpu-{_dt.date.today()}.json"
    if cupy is not None or args.json:
        out.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {out}")
    values_ok = all(r["ok"] for r in result.get("values", []))
    return 0 if reference_ok and values_ok and all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
