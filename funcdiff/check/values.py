"""What user functions take and return, seen as NumPy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor

__all__ = ["as_array", "as_list", "is_float_output"]


def as_array(value: Any) -> np.ndarray:
    """The data of a Tensor, or anything else as an ndarray."""
    return value.data if isinstance(value, Tensor) else np.asarray(value)


def as_list(result: Any) -> list:
    """A function's result as a list of outputs: a tuple or list is several, else one."""
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def is_float_output(o: Any) -> bool:
    """Floating arrays and Tensors, and plain Python numbers (constants)."""
    if isinstance(o, Tensor):
        return o.data.dtype.kind == "f"
    if isinstance(o, bool):
        return False
    if isinstance(o, (float, int)):
        return True
    if isinstance(o, (np.ndarray, np.generic)):
        return o.dtype.kind == "f"
    return False
