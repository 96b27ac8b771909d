"""Test problems and eager references shared by several test modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import funcdiff as fd


def brusselator(y: Any) -> Any:
    """The 1-D Brusselator right-hand side on ``len(y) // 2`` grid points (periodic)."""
    n = y.shape[0] // 2
    u, v = y[:n], y[n:]
    c = 0.02 * n**2
    du = 1.0 + u * u * v - 4.4 * u + c * (np.roll(u, 1) - 2.0 * u + np.roll(u, -1))
    dv = 3.4 * u - u * u * v + c * (np.roll(v, 1) - 2.0 * v + np.roll(v, -1))
    return np.concatenate([du, dv])


def eager_value_and_grad(f: Callable[[Any], Any], x: np.ndarray) -> tuple[float, np.ndarray]:
    """Eager funcdiff's value and gradient of a scalar ``f`` at ``x`` (zeros for a
    constant result)."""
    t = fd.tensor(x, requires_grad=True)
    y = f(t)
    if not isinstance(y, fd.Tensor) or not y.requires_grad:
        return float(np.asarray(getattr(y, "data", y))), np.zeros_like(x)
    (g,) = fd.grad(y, t, allow_unused=True)
    return y.item(), np.zeros_like(x) if g is None else g.data
