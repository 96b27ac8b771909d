"""What the results were measured on: CPU, memory, Python, NumPy/SciPy and their BLAS."""

from __future__ import annotations

import contextlib
import io
import os
import platform
import sys
from typing import Any


def _cpuinfo() -> dict[str, Any]:
    info: dict[str, Any] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            text = fh.read()
    except OSError:
        return {"model": platform.processor() or platform.machine()}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and "model" not in info:
            info["model"] = value
        elif key == "flags" and "simd" not in info:
            flags = set(value.split())
            info["simd"] = sorted(
                f for f in flags if f in {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16"}
            )
        elif key == "cpu MHz" and "mhz" not in info:
            info["mhz"] = value
        elif key == "cache size" and "cache" not in info:
            info["cache"] = value
    return info


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    return None


def blas_info() -> list[dict[str, Any]]:
    """Loaded BLAS/OpenMP libraries (threadpoolctl), or NumPy's build configuration."""
    try:
        import threadpoolctl
    except ImportError:
        import numpy as np

        try:
            cfg = np.show_config(mode="dicts")
            return [
                {
                    "source": "numpy.show_config",
                    "blas": cfg.get("Build Dependencies", {}).get("blas"),
                }
            ]
        except TypeError:  # older NumPy without mode=
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                np.show_config()
            return [{"source": "numpy.show_config", "text": buf.getvalue()}]
    keep = (
        "user_api",
        "internal_api",
        "prefix",
        "version",
        "architecture",
        "num_threads",
        "threading_layer",
        "filepath",
    )
    return [{k: d.get(k) for k in keep if k in d} for d in threadpoolctl.threadpool_info()]


def machine(env_report: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import scipy

    return {
        "cpu": _cpuinfo(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "blas": blas_info(),
        "environment": env_report,
    }
