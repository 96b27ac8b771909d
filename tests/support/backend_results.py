"""Comparing results computed on another array type with NumPy's: shared by the tests on
the strict stand-in array and the CuPy tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import funcdiff as fd


def flat(result: Any) -> list:
    """The arrays of a (nested) result, Tensors unwrapped to their data."""
    if isinstance(result, (tuple, list)):
        return [y for r in result for y in flat(r)]
    return [result.data if isinstance(result, fd.Tensor) else result]


def assert_same(
    reference: Any,
    got: Any,
    array_type: type,
    to_host: Callable[[Any], np.ndarray],
    tol: float = 1e-10,
) -> None:
    """Every array of ``got`` is an ``array_type`` and equals the NumPy ``reference``."""
    ref, out = flat(reference), flat(got)
    assert len(ref) == len(out)
    for a, b in zip(ref, out):
        assert isinstance(b, array_type), type(b)
        np.testing.assert_allclose(to_host(b), np.asarray(a), rtol=tol, atol=1e-12)
