"""Process environment for benchmarking: one thread everywhere, OpenBLAS's native kernel.

Everything here must run before NumPy, SciPy, torch or jax are imported, because BLAS
libraries and XLA read their thread settings when they load. Nothing here imports them.
"""

from __future__ import annotations

import os
import sys

#: Thread settings applied to every library (read by OpenBLAS, MKL, OpenMP, XLA).
THREAD_VARS = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}
XLA_THREAD_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

#: Set on some machines to keep old OpenBLAS builds safe; they force a slower generic
#: kernel on a current NumPy, so the benchmark process runs without them (both together).
SLOW_BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

_HEAVY_MODULES = ("numpy", "scipy", "torch", "jax", "autograd", "funcdiff")

#: What :func:`prepare` changed, for the results file.
REPORT: dict[str, object] = {}


def prepare(keep_blas_env: bool = False, one_cpu: bool = True) -> dict[str, object]:
    """Pin threads to 1 and drop the slow OpenBLAS overrides for this process.

    With ``one_cpu`` (where the OS allows it) the process may run on one CPU only. XLA
    does not honour its thread flags: it sizes its thread pool by the CPUs the process
    may use and splits large kernels across them (the compiled Brusselator Jacobian
    took 1.6 CPU-seconds per second on two cores), so only the CPU affinity makes a
    JAX-compiled call a one-thread figure, comparable with NumPy's. Threads started
    later, XLA's included, inherit it.

    If a BLAS-backed library was imported before this call (so its settings are already
    fixed), the process re-executes itself with the cleaned environment instead.
    """
    if one_cpu and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    env = dict(os.environ)
    removed = {}
    if not keep_blas_env:
        for name in SLOW_BLAS_VARS:
            if name in env:
                removed[name] = env.pop(name)
    env.update(THREAD_VARS)
    flags = env.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        env["XLA_FLAGS"] = (flags + " " + XLA_THREAD_FLAGS).strip()
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    loaded = [m for m in _HEAVY_MODULES if m in sys.modules]
    if loaded and env != dict(os.environ) and not os.environ.get("FUNCDIFF_BENCH_REEXEC"):
        # Too late to change the settings in this process: start over with them.
        env["FUNCDIFF_BENCH_REEXEC"] = "1"
        for name, value in removed.items():
            env[f"FUNCDIFF_BENCH_REMOVED_{name}"] = value
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)

    if not keep_blas_env:
        for name in SLOW_BLAS_VARS:
            os.environ.pop(name, None)
    for name in SLOW_BLAS_VARS:
        carried = os.environ.pop(f"FUNCDIFF_BENCH_REMOVED_{name}", None)
        if carried is not None:
            removed[name] = carried
    for name in (*THREAD_VARS, "XLA_FLAGS", "JAX_PLATFORMS", "TF_CPP_MIN_LOG_LEVEL"):
        os.environ[name] = env[name]
    REPORT.clear()
    REPORT.update(
        {
            "thread_vars": {k: os.environ[k] for k in (*THREAD_VARS, "XLA_FLAGS")},
            "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "removed_blas_vars": removed,
            "kept_blas_vars": {k: os.environ[k] for k in SLOW_BLAS_VARS if k in os.environ},
        }
    )
    return REPORT
