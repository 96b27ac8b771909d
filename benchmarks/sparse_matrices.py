"""scipy.sparse matrices in the graph: ``python -m benchmarks.sparse_matrices [--quick]``.

On the 5-point Laplacian ``L`` of an ``n x n`` grid (10,000 and 40,000 unknowns), side by
side in one run, with the plain SciPy call of the same round as the unit:

* ``L @ u``: SciPy on an ndarray; funcdiff on a Tensor that requires grad (the recorded
  product); the gradient of ``sum(w * (L @ u))`` (forward and backward);
* ``spsolve``: SciPy's ``scipy.sparse.linalg.spsolve``; funcdiff's on a ``csr_array``
  whose values are a Tensor; the gradient of ``sum(w * x)`` with respect to the stored
  values and the right-hand side (forward and backward, one factorization);
* the peak memory (tracemalloc) of funcdiff's gradient over that of its forward solve
  (SuperLU's factors are traced inside ``splu``, not inside SciPy's ``spsolve``, so the
  two libraries' figures are not comparable).

Every answer is checked against SciPy (values) and the adjoint closed form (gradients)
before it is timed. Prints a table of ratios and writes JSON to
``benchmarks/results/sparse-matrices-<date>.json`` (``--no-json``: do not).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)

HERE = Path(__file__).resolve().parent


def laplacian(n: int) -> Any:
    import scipy.sparse as sp

    h = 1.0 / (n + 1)
    d = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(n, n))
    eye = sp.eye_array(n)
    return sp.csr_array((sp.kron(d, eye) + sp.kron(eye, d)) / h**2)


def cells(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``{name: callable}`` (checked), and the problem's facts."""
    import numpy as np
    import scipy.sparse.linalg as spla

    import funcdiff as fd
    import funcdiff.sparse as fs
    from funcdiff.sparse.linalg import spsolve

    L = laplacian(n)
    A = (-L).tocsr()  # positive definite
    rng = np.random.default_rng(0)
    u0 = rng.uniform(size=n * n)
    w = rng.normal(size=n * n)
    b0 = rng.uniform(size=n * n)

    def scipy_product() -> Any:
        return L @ u0

    def funcdiff_product() -> Any:
        return L @ fd.tensor(u0, requires_grad=True)

    def funcdiff_product_gradient() -> Any:
        u = fd.tensor(u0, requires_grad=True)
        (g,) = fd.grad(np.sum(w * (L @ u)), u)
        return g

    def scipy_solve() -> Any:
        return spla.spsolve(A, b0)

    def funcdiff_solve() -> Any:
        values = fd.tensor(A.data, requires_grad=True)
        return spsolve(fs.csr_array((values, A.indices, A.indptr), shape=A.shape), b0)

    def funcdiff_solve_gradient() -> Any:
        values = fd.tensor(A.data, requires_grad=True)
        b = fd.tensor(b0, requires_grad=True)
        x = spsolve(fs.csr_array((values, A.indices, A.indptr), shape=A.shape), b)
        return fd.grad(np.sum(w * x), (values, b))

    # Checks: values against SciPy, gradients against the adjoint closed form.
    x = spla.spsolve(A, b0)
    adjoint = spla.spsolve(A.T.tocsc(), w)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    assert np.allclose(funcdiff_product().data, L @ u0, rtol=1e-13)
    assert np.allclose(funcdiff_product_gradient().numpy(), L.T @ w, rtol=1e-12)
    assert np.allclose(funcdiff_solve().data, x, rtol=1e-10)
    g_values, g_b = funcdiff_solve_gradient()
    assert np.allclose(g_b.numpy(), adjoint, rtol=1e-9)
    assert np.allclose(g_values.numpy(), -adjoint[rows] * x[A.indices], rtol=1e-8, atol=1e-14)

    found = {
        "L @ u: SciPy": scipy_product,
        "L @ u: funcdiff": funcdiff_product,
        "L @ u: funcdiff gradient": funcdiff_product_gradient,
        "spsolve: SciPy": scipy_solve,
        "spsolve: funcdiff": funcdiff_solve,
        "spsolve: funcdiff gradient (values and b)": funcdiff_solve_gradient,
    }
    return found, {"unknowns": n * n, "nnz": int(L.nnz)}


def peak_bytes(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sparse_matrices")
    p.add_argument("--quick", action="store_true", help="short budgets, one round")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3)")
    p.add_argument("--no-json", action="store_true", help="do not write a results file")
    args = p.parse_args(argv)
    env_report = _env.prepare()
    from benchmarks import _machine
    from benchmarks._timing import FULL, QUICK, combine, measure, per_round

    rounds = args.rounds or (1 if args.quick else 3)
    budget = per_round(QUICK if args.quick else FULL, rounds)
    results: list[dict[str, Any]] = []
    for n in (100, 200):
        found, facts = cells(n)
        timings: dict[str, list] = {name: [] for name in found}
        ratios: dict[str, list] = {name: [] for name in found}
        for _ in range(rounds):  # interleaved: each ratio pairs times of one round
            measured = {name: measure(fn, budget) for name, fn in found.items()}
            for name, t in measured.items():
                timings[name].append(t)
                unit = "L @ u: SciPy" if name.startswith("L @ u") else "spsolve: SciPy"
                ratios[name].append(t.median / measured[unit].median)
        forward_peak = peak_bytes(found["spsolve: funcdiff"])
        gradient_peak = peak_bytes(found["spsolve: funcdiff gradient (values and b)"])
        print(f"\n{n} x {n} grid: {facts['unknowns']:,} unknowns, {facts['nnz']:,} nonzeros")
        for name in found:
            t = combine(timings[name])
            ratio = sorted(ratios[name])[len(ratios[name]) // 2]
            print(f"  {name:45s} {t.median * 1e3:9.3f} ms   {ratio:6.2f}x SciPy")
            results.append({"grid": n, **facts, "cell": name, "ratio": ratio, **t.as_dict()})
        memory = gradient_peak / forward_peak
        print(f"  peak memory, funcdiff's spsolve gradient / its forward solve: {memory:.2f}x")
        results.append({"grid": n, **facts, "cell": "peak memory ratio", "ratio": memory})
    if not args.no_json and not args.quick:
        out = HERE / "results" / f"sparse-matrices-{_dt.date.today().isoformat()}.json"
        out.parent.mkdir(exist_ok=True)
        payload = {"machine": _machine.machine(env_report), "rows": results}
        out.write_text(json.dumps(payload, indent=1, default=str))
        print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
