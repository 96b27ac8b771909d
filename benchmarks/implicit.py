"""Implicit differentiation through ``funcdiff.optimize``: one gradient against the solve.

``python -m benchmarks.implicit [--quick] [--rounds K] [--json PATH]``

Rows (every gradient is checked against an independent adjoint before it is timed):

* ``bratu 100x100`` and ``bratu 200x200``: the 2-D Bratu problem
  ``L @ u + lam * exp(u) = f`` (``L`` a scipy.sparse 5-point Laplacian, Dirichlet, scaled
  by ``1/h^2``, ``lam = 2``, a smooth source ``f``), solved by
  ``funcdiff.optimize.root(method="krylov", sparse=True)``: the inner Krylov solves are
  preconditioned by the sparse LU of the exact Jacobian (``funcdiff.sparse``,
  refactorised at each Newton step). The gradient is that of ``0.5 * ||u||^2`` with
  respect to ``lam`` and the whole source (10,000 and 40,000 entries), by one implicit
  vjp (which reuses the solve's prepared Jacobian); the reference is the adjoint
  computed with ``scipy.sparse.linalg.spsolve``.
* ``ridge 50 hyper``: ridge regression with 50 per-feature penalties (X 500 x 50), the
  inner ``minimize(method="L-BFGS-B", gtol=1e-10, ftol=1e-15)``; the hypergradient of a validation
  loss (200 samples) with respect to the 50 penalties, against the closed form.

Each round times the forward solve (with Tensor args) and then the gradient of its
result, side by side; the table shows the median of the per-round ratios
gradient / solve. Peak memory is measured in a separate run of each under
``tracemalloc`` (forward solve, then the gradient alone).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)
from benchmarks._timing import parse_arguments, peak_memory, write_results  # noqa: E402


def bratu(N: int) -> dict:
    """The Bratu row for an N x N grid: solve, gradient and reference."""
    import numpy as np
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    import funcdiff as fd
    from funcdiff import optimize

    h = 1.0 / (N + 1)
    T = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(N, N))
    eye = sp.identity(N)
    L = sp.csr_array((sp.kron(eye, T) + sp.kron(T, eye)) / h**2)
    g = np.linspace(h, 1 - h, N)
    X, Y = np.meshgrid(g, g, indexing="ij")
    f0 = (-10.0 * np.sin(np.pi * X) * np.sin(2 * np.pi * Y)).ravel()

    def residual(u: Any, lam: Any, f: Any) -> Any:
        return L @ u + lam * np.exp(u) - f

    def solve() -> tuple:
        lam = fd.tensor(2.0, requires_grad=True)
        f = fd.tensor(f0, requires_grad=True)
        res = optimize.root(
            residual,
            np.zeros(N * N),
            args=(lam, f),
            method="krylov",
            sparse=True,
            options={"fatol": 1e-10},
        )
        if not res.success:
            raise RuntimeError(f"Bratu {N}x{N} did not converge: {res.message}")
        return res.x, lam, f

    def gradient(state: tuple) -> tuple:
        u, lam, f = state
        (0.5 * np.sum(u**2)).backward()
        return lam.grad.data, f.grad.data

    def reference(state: tuple) -> list:
        u = state[0].data
        A = sp.csc_array(L + sp.diags_array(2.0 * np.exp(u)))
        w = spla.spsolve(A.T, u)
        return [np.array(-w @ np.exp(u)), w]

    return {
        "id": f"bratu {N}x{N}",
        "what": f"d 0.5||u||^2 / d(lam, f), {N * N} unknowns",
        "solve": solve,
        "gradient": gradient,
        "reference": reference,
    }


def ridge() -> dict:
    """Ridge regression with 50 per-feature penalties: the hypergradient row."""
    import numpy as np

    import funcdiff as fd
    from funcdiff import optimize

    rng = np.random.default_rng(0)
    m, n = 500, 50
    X = rng.standard_normal((m, n))
    w_true = rng.standard_normal(n)
    y = X @ w_true + 0.5 * rng.standard_normal(m)
    Xv = rng.standard_normal((200, n))
    yv = Xv @ w_true + 0.5 * rng.standard_normal(200)
    lam0 = np.exp(rng.uniform(-2.0, 1.0, n))

    def inner(w: Any, lam: Any) -> Any:
        r = X @ w - y
        return 0.5 * (r @ r) / m + 0.5 * np.sum(lam * w * w)

    def solve() -> tuple:
        lam = fd.tensor(lam0, requires_grad=True)
        res = optimize.minimize(
            inner,
            np.zeros(n),
            args=(lam,),
            method="L-BFGS-B",
            options={"gtol": 1e-10, "ftol": 1e-15},
        )
        return res.x, lam

    def gradient(state: tuple) -> list:
        w, lam = state
        r = Xv @ w - yv
        (0.5 * (r @ r)).backward()
        return [lam.grad.data]

    def reference(state: tuple) -> list:
        H = X.T @ X / m + np.diag(lam0)
        w = np.linalg.solve(H, X.T @ y / m)
        return [-w * np.linalg.solve(H, Xv.T @ (Xv @ w - yv))]

    return {
        "id": "ridge 50 hyper",
        "what": "validation loss / 50 penalties, X 500 x 50",
        "solve": solve,
        "gradient": gradient,
        "reference": reference,
        "rtol": 1e-6,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments("implicit", __doc__, "one round, the small Bratu grid", argv)
    _env.prepare()
    import numpy as np

    rounds = args.rounds or (1 if args.quick else 3)
    rows = [bratu(100), ridge()] if args.quick else [bratu(100), bratu(200), ridge()]
    results = []
    print(
        f"{'row':16} {'what':44} {'check':5} {'solve s':>8} {'grad s':>8} {'grad/solve':>10} "
        f"{'MB solve':>9} {'MB grad':>8} {'mem ratio':>9}"
    )
    for row in rows:
        state = row["solve"]()
        got = [np.asarray(a) for a in row["gradient"](state)]
        want = row["reference"](state)
        rtol = row.get("rtol", 1e-9)
        ok = all(
            np.allclose(g, w, rtol=rtol, atol=rtol * np.abs(w).max()) for g, w in zip(got, want)
        )
        err = max(float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, want))
        solve_s, grad_s, ratios = [], [], []
        for _ in range(rounds):
            start = time.perf_counter()
            state = row["solve"]()
            mid = time.perf_counter()
            row["gradient"](state)
            end = time.perf_counter()
            solve_s.append(mid - start)
            grad_s.append(end - mid)
            ratios.append((end - mid) / (mid - start))
        state, mb_solve = peak_memory(row["solve"])
        _, mb_grad = peak_memory(row["gradient"], state)
        entry = {
            "id": row["id"],
            "what": row["what"],
            "checked": ok,
            "max_rel_error": err,
            "solve_s": statistics.median(solve_s),
            "grad_s": statistics.median(grad_s),
            "grad_over_solve": statistics.median(ratios),
            "peak_mb_solve": mb_solve,
            "peak_mb_grad": mb_grad,
            "grad_over_solve_memory": mb_grad / mb_solve,
        }
        results.append(entry)
        print(
            f"{row['id']:16} {row['what']:44} {'ok' if ok else 'WRONG':5} "
            f"{entry['solve_s']:8.3f} {entry['grad_s']:8.3f} {entry['grad_over_solve']:10.3f} "
            f"{mb_solve:9.1f} {mb_grad:8.1f} {entry['grad_over_solve_memory']:9.2f}",
            flush=True,
        )
    write_results("implicit", args, {"rows": results, "rounds": rounds})
    return 0 if all(r["checked"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
