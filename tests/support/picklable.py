"""Module-level functions for the pickling and Dask tests, with their closed forms.

Plain ``pickle`` stores a function by its module and name, so the functions a pickled
derivative holds must live in an importable module: this one (imported as
``support.picklable``; the Dask tests' worker processes import it too).
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

import funcdiff.replay as replay
from funcdiff import optimize

#: How often :func:`counted_residual` ran (a replayed program does not run it).
CALLS = [0]


def rosen(x):
    """The chained Rosenbrock function (``scipy.optimize.rosen``)."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosen_grad(x: np.ndarray) -> np.ndarray:
    return scipy.optimize.rosen_der(x)


def rosen_hess(x: np.ndarray) -> np.ndarray:
    return scipy.optimize.rosen_hess(x)


def residual(x):
    """``x[1:]**2 - x[:-1]``: a bidiagonal Jacobian."""
    return x[1:] ** 2 - x[:-1]


def residual_jac(x: np.ndarray) -> np.ndarray:
    n = x.size
    jac = np.zeros((n - 1, n))
    jac[np.arange(n - 1), np.arange(n - 1)] = -1.0
    jac[np.arange(n - 1), np.arange(1, n)] = 2.0 * x[1:]
    return jac


def counted_residual(x):
    """:func:`residual`, counting its runs in :data:`CALLS`."""
    CALLS[0] += 1
    return residual(x)


def branchy(x):
    """Another pattern where ``x[0] > 0``: the prepared derivatives keep both."""
    if x[0] > 0:
        return x[1:] * x[:-1]
    return x**3


def branchy_jac(x: np.ndarray) -> np.ndarray:
    if x[0] > 0:
        n = x.size
        jac = np.zeros((n - 1, n))
        jac[np.arange(n - 1), np.arange(n - 1)] = x[1:]
        jac[np.arange(n - 1), np.arange(1, n)] = x[:-1]
        return jac
    return np.diag(3.0 * x**2)


def logistic_losses(w, X, y):
    """Per-sample logistic losses ``log(1 + exp(-s x.w))`` with labels ``s = 2y - 1``."""
    margins = (2.0 * y - 1.0) * (X @ w)
    return np.logaddexp(0.0, -margins)


def logistic_gradients(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Closed form of the per-sample gradients: ``(sigmoid(x.w) - y) x``, one row each."""
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return (p - y)[:, None] * X


@replay.value_and_grad
def replayed_rosen(x):
    """A decorated module-level function: pickled by its name, as functions are."""
    return rosen(x)


def sqrt_condition(x, c):
    return x * x - c


@optimize.custom_root(sqrt_condition)
def newton_sqrt(x0, c):
    """``sqrt(c)`` by Newton's method; its derivative in ``c`` comes from the condition."""
    x = float(x0)
    for _ in range(60):
        x = 0.5 * (x + float(c) / x)
    return x
