"""The sparse-derivative problems: functions, data and analytic references.

Each function is written once against a small namespace ``m`` (``m.roll``,
``m.concatenate``, ``m.sum``), so that NumPy, funcdiff (which runs the NumPy version
unchanged), JAX and CasADi all evaluate the same formula with their own primitives.
The references are closed forms assembled with ``scipy.sparse.diags``; each is checked
against an independent directional derivative (the complex step for the Brusselator,
``scipy.optimize.rosen_hess_prod`` / ``rosen_hess`` for Rosenbrock) when it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import scipy.optimize
import scipy.sparse as sp

NP = SimpleNamespace(roll=np.roll, concatenate=np.concatenate, sum=np.sum)


# --------------------------------------------------------------------- the functions
def brusselator(m: Any) -> Callable:
    """Right-hand side of the 1-D periodic Brusselator, ``y = [u; v]`` (2N unknowns)."""

    def f(y):
        n = y.shape[0] // 2
        u, v = y[:n], y[n:]
        c = 0.02 * n**2
        du = 1.0 + u * u * v - 4.4 * u + c * (m.roll(u, 1) - 2.0 * u + m.roll(u, -1))
        dv = 3.4 * u - u * u * v + c * (m.roll(v, 1) - 2.0 * v + m.roll(v, -1))
        return m.concatenate([du, dv])

    return f


def rosen(m: Any) -> Callable:
    """The chained Rosenbrock function in ``scipy.optimize.rosen``'s formula."""

    def f(x):
        return m.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)

    return f


# --------------------------------------------------------------------- references
def brusselator_y0(n: int) -> np.ndarray:
    """``u = 1 + 0.5 sin(2 pi i / N)``, ``v = 3 + 0.1 cos(2 pi i / N)``."""
    t = 2.0 * np.pi * np.arange(n) / n
    return np.concatenate([1.0 + 0.5 * np.sin(t), 3.0 + 0.1 * np.cos(t)])


def _periodic_laplacian(n: int, c: float) -> sp.csr_array:
    """``c * (roll(w, 1) - 2 w + roll(w, -1))`` as a matrix (periodic corners included)."""
    one = np.full(n, c)
    return sp.diags_array(
        [one[:1], one[:-1], -2.0 * one, one[:-1], one[:1]],
        offsets=[-(n - 1), -1, 0, 1, n - 1],
        shape=(n, n),
        format="csr",
    )


def brusselator_jacobian(y: np.ndarray) -> sp.csr_array:
    """The analytic Jacobian of :func:`brusselator` at ``y`` (8N nonzeros)."""
    n = y.shape[0] // 2
    u, v = y[:n], y[n:]
    c = 0.02 * n**2
    lap = _periodic_laplacian(n, c)
    duu = sp.diags_array(2.0 * u * v - 4.4) + lap
    duv = sp.diags_array(u * u)
    dvu = sp.diags_array(3.4 - 2.0 * u * v)
    dvv = sp.diags_array(-u * u) + lap
    return sp.block_array([[duu, duv], [dvu, dvv]], format="csr")


def rosen_hessian(x: np.ndarray) -> sp.csr_array:
    """The tridiagonal Hessian of Rosenbrock, from ``scipy.optimize.rosen_hess``'s formula."""
    diag = np.zeros_like(x)
    diag[:-1] = 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    diag[1:] += 200.0
    off = -400.0 * x[:-1]
    return sp.diags_array([off, diag, off], offsets=[-1, 0, 1], format="csr")


def _check_brusselator_reference(y: np.ndarray, J: sp.csr_array) -> None:
    """Compare ``J @ p`` with the complex-step derivative of ``f`` along ``p``."""
    p = np.random.default_rng(1).standard_normal(y.size)
    h = 1e-30
    want = brusselator(NP)(y + 1j * h * p).imag / h
    got = J @ p
    if not np.allclose(got, want, rtol=1e-10, atol=1e-8 * np.abs(want).max()):
        raise AssertionError("the analytic Brusselator Jacobian disagrees with the complex step")


def _check_rosen_reference(x: np.ndarray, H: sp.csr_array) -> None:
    if x.size <= 2000:
        ok = np.allclose(H.toarray(), scipy.optimize.rosen_hess(x), rtol=1e-13, atol=1e-10)
    else:
        p = np.random.default_rng(2).standard_normal(x.size)
        ok = np.allclose(H @ p, scipy.optimize.rosen_hess_prod(x, p), rtol=1e-12, atol=1e-8)
    if not ok:
        raise AssertionError("the analytic Rosenbrock Hessian disagrees with scipy.optimize")


# --------------------------------------------------------------------- problem table
@dataclass
class SparseProblem:
    """One row of the sparse results table.

    ``kind`` is ``"jacobian"`` or ``"hessian"``; ``x`` the evaluation point, ``x0`` the
    point the sparse preparations see (a different point, so a cached answer would
    fail the check); ``dense`` says whether the dense-matrix cells run at this size.
    """

    key: str
    pid: str
    label: str
    kind: str
    x: np.ndarray
    x0: np.ndarray
    function: Callable[[Any], Callable]  # namespace -> f
    reference: sp.csr_array
    dense: bool
    rtol: float = 1e-10
    atol: float = 1e-8
    ops: int = 1  # for benchmarks.run.time_interleaved
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def f(self) -> Callable:
        """The NumPy version of the function (what funcdiff and SciPy run)."""
        return self.function(NP)

    def forward(self) -> Any:
        return self.f(self.x)

    @property
    def size(self) -> int:
        return self.x.size


def make_problems() -> list[SparseProblem]:
    problems = []
    for n in (1000, 100_000):
        y = brusselator_y0(n)
        y0 = y * (1.0 + 0.01 * np.cos(np.arange(2 * n)))
        J = brusselator_jacobian(y)
        _check_brusselator_reference(y, J)
        problems.append(
            SparseProblem(
                f"bruss N={n:.0e}".replace("e+0", "e"),
                "bruss",
                f"Jacobian of the 1-D periodic Brusselator, N={n} (2N={2 * n} unknowns, "
                f"{J.nnz} nonzeros)",
                "jacobian",
                y,
                y0,
                brusselator,
                J,
                dense=n <= 1000,
                atol=1e-10 * np.abs(J.data).max(),
            )
        )
    rng = np.random.default_rng(20261204)
    for n in (1000, 100_000):
        x = rng.uniform(-2.0, 2.0, n)
        x0 = rng.uniform(-2.0, 2.0, n)
        H = rosen_hessian(x)
        _check_rosen_reference(x, H)
        problems.append(
            SparseProblem(
                f"rosen n={n:.0e}".replace("e+0", "e"),
                "rosen",
                f"Hessian of chained Rosenbrock, n={n} (tridiagonal, {H.nnz} nonzeros)",
                "hessian",
                x,
                x0,
                rosen,
                H,
                dense=n <= 1000,
            )
        )
    return problems


def compare_matrix(got: Any, want: sp.csr_array, rtol: float, atol: float) -> str:
    """Empty string when ``got`` (sparse or dense) equals ``want`` within the tolerances.

    Elementwise ``|got - want| <= atol + rtol |want|`` over the union of both patterns,
    computed on sparse matrices so that N = 1e5 is never densified.
    """
    if sp.issparse(got):
        g = sp.csr_array(got, dtype=np.float64)
    else:
        g = np.asarray(got, dtype=np.float64)
        if g.size > 4e7:
            return f"dense result of shape {g.shape} is too big to compare"
        g = sp.csr_array(g)
    if g.shape != want.shape:
        return f"shape {g.shape}, expected {want.shape}"
    if not np.all(np.isfinite(g.data)):
        return "non-finite values"
    excess = abs(g - want) - rtol * abs(want)
    worst = excess.max() if excess.nnz else 0.0
    if worst > atol:
        err = abs(g - want)
        return f"max abs err {err.max():.3g} (tolerance {atol:.3g} + {rtol:.0e} * |ref|)"
    return ""


def relative_errors(got: Any, want: sp.csr_array) -> dict[str, float]:
    """Max elementwise relative error on the reference's nonzeros, and the normwise one."""
    g = sp.csr_array(got, dtype=np.float64)
    diff = sp.csr_array(abs(g - want))
    # power(-1) acts on the stored entries only: diff / |want| on want's pattern.
    rel = diff.multiply(abs(want).power(-1.0))
    return {
        "max_rel_err": float(rel.max()) if rel.nnz else 0.0,
        "normwise_rel_err": float(diff.max() / np.abs(want.data).max()) if diff.nnz else 0.0,
    }
