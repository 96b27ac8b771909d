"""Numbers that follow the floating-point precision: machine epsilon, default tolerances."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "FD_TRUST_FACTOR",
    "complex_dtype_for",
    "default_rtol",
    "lowest_precision",
    "machine_eps",
]

# A finite-difference quotient is trusted to within this multiple of its error estimate.
FD_TRUST_FACTOR = 3.0
# Default relative tolerances of check_derivatives, by dtype of the comparison.
_DEFAULT_RTOL = {
    np.dtype(np.float64): 1e-5,
    np.dtype(np.float32): 2e-3,
    np.dtype(np.float16): 5e-2,
}


def machine_eps(dtype: Any) -> float:
    """Machine epsilon of a floating dtype (float64's for anything else)."""
    dt = np.dtype(dtype)
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    return float(np.finfo(dt).eps)


def lowest_precision(dtypes: Sequence[Any]) -> np.dtype:
    """The floating dtype with the largest machine epsilon among ``dtypes``."""
    best = np.dtype(np.float64)
    for d in dtypes:
        d = np.dtype(d)
        if d.kind == "c":
            d = np.dtype(d.char.lower()) if d.char in "FD" else np.dtype(np.float64)
            d = np.dtype(np.float32) if d == np.dtype(np.complex64) else d
        if d.kind == "f" and machine_eps(d) > machine_eps(best):
            best = d
    return best


def default_rtol(rtol: float | None, dtype: np.dtype) -> float:
    """``rtol`` if given, else the default relative tolerance for ``dtype``."""
    return float(rtol) if rtol is not None else _DEFAULT_RTOL.get(dtype, 1e-5)


def complex_dtype_for(dtype: Any) -> type[np.complexfloating]:
    """The complex type of the same precision as a real dtype (for the complex step)."""
    return np.complex64 if dtype == np.float32 else np.complex128
