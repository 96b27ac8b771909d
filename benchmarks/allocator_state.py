"""How much of NumPy f's and of a compiled kernel's time is page faults.

``python -m benchmarks.allocator_state [--problems bruss,rosen,b4] [--runs 30] [--rounds 3]``

NumPy allocates each array over glibc's mmap threshold (128 KiB at start) with a fresh
``mmap`` and returns it with ``munmap``, so every temporary of a large problem faults
its pages in anew. glibc raises the threshold once a process frees a large mapped block,
and after that the same temporaries come from the heap without faults. The NumPy f the
benchmarks divide by is thus 2-4x faster in a process that has already run other
libraries (as ``benchmarks.sparse`` has) than in a fresh one.

XLA runs a kernel on its own thread, whose buffers come from another glibc arena; in
some processes that arena is trimmed after every call, and each call faults its output
and scratch buffers in anew. Which processes do is decided by their allocation history.

Each problem is timed here in fresh interpreters under three environments: glibc's
defaults, ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` raised, and
``MALLOC_ARENA_MAX=1`` (one arena for every thread), all on one CPU (as
``benchmarks._env`` runs every benchmark). Each row gives NumPy f before and after the
libraries ran, the compiled derivative (CPU clock, one thread, medians) and its minor
page faults per call: the prepared sparse Brusselator Jacobian (N = 1e5), the
Rosenbrock sparse Hessian (n = 1e5), and B4, one replayed Hessian-vector product of
Rosenbrock at n = 1e6.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks._env import XLA_THREAD_FLAGS

ROOT = Path(__file__).resolve().parent.parent
ENVIRONMENTS = {
    "default": {},
    "raised": {"MALLOC_MMAP_THRESHOLD_": str(1 << 26), "MALLOC_TRIM_THRESHOLD_": str(1 << 27)},
    "arena=1": {"MALLOC_ARENA_MAX": "1"},
}


def _child(problem: str, runs: int) -> dict[str, float]:
    """Median CPU seconds of NumPy f and of the compiled prepared call, in this process."""
    import time

    import numpy as np

    from benchmarks.sparse_problems import brusselator, brusselator_y0, rosen

    n = 100_000
    if problem == "bruss":
        f, x = brusselator(np), brusselator_y0(n)
    elif problem == "rosen":
        f, x = rosen(np), np.linspace(-1.0, 2.0, n)
    else:  # B4: one replayed Hessian-vector product at n = 1e6
        rng = np.random.default_rng(0)
        f, x = rosen(np), rng.uniform(-2.0, 2.0, 1_000_000)
        v = rng.standard_normal(x.size)

    def median(fn: object) -> float:
        times = []
        for _ in range(runs):
            began = time.process_time()
            fn()  # type: ignore[operator]
            times.append(time.process_time() - began)
        return float(np.median(times))

    f_first = median(lambda: f(x))  # NumPy and SciPy imported, nothing else run
    import funcdiff.replay as replay
    import funcdiff.sparse as fs

    if problem == "b4":
        hvp = replay.hvp(f, compile=True)

        def call() -> object:
            return hvp(x, v)
    else:
        prepare = fs.prepare_jacobian if problem == "bruss" else fs.prepare_hessian
        prepared = prepare(f, x, replay=True, compile=True)

        def call() -> object:
            return prepared(x)

    for _ in range(4):
        call()
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(runs):
        call()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / runs
    return {"f_first": f_first, "f": median(lambda: f(x)), "call": median(call), "faults": faults}


def measure(problem: str, runs: int, malloc: str) -> dict[str, float]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "XLA_FLAGS": XLA_THREAD_FLAGS,
    }
    for variables in ENVIRONMENTS.values():
        for key in variables:
            env.pop(key, None)
    env.update(ENVIRONMENTS[malloc])
    command = [sys.executable, "-m", "benchmarks.allocator_state", "--child", problem]
    out = subprocess.run(
        command + ["--runs", str(runs)], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="bruss,rosen,b4")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.runs)))
        return
    if hasattr(os, "sched_setaffinity"):  # one CPU, inherited by the children (see _env)
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    print(
        "problem  malloc    f first (ms)  f (ms)  call (ms)  call / f  call / f first"
        "  faults / call"
    )
    for problem in args.problems.split(","):
        for _ in range(args.rounds):
            for malloc in ENVIRONMENTS:
                r = measure(problem, args.runs, malloc)
                print(
                    f"{problem:8} {malloc:8}"
                    f"  {1e3 * r['f_first']:12.2f}  {1e3 * r['f']:6.2f}  {1e3 * r['call']:9.2f}"
                    f"  {r['call'] / r['f']:8.2f}  {r['call'] / r['f_first']:14.2f}"
                    f"  {r['faults']:13.0f}"
                )


if __name__ == "__main__":
    main()
