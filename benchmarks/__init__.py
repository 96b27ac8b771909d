"""Benchmark suite: funcdiff against plain NumPy and against installed autodiff peers.

Run it from the repository root with ``python -m benchmarks`` (see ``benchmarks/README.md``).
This package imports nothing at import time, so that ``python -m benchmarks`` can pin
threads and clean the BLAS environment before NumPy is loaded.
"""
