"""ODE sensitivities through ``funcdiff.integrate.solve_ivp`` against SciPy and CVODES.

``python -m benchmarks.ode [--quick] [--rounds N] [--json PATH]``

Problems:

* **Robertson** (3 states; inputs: the 3 rates and the 3 initial values), 20
  log-spaced outputs in [1e-5, 1e5], BDF, rtol 1e-8, atol 1e-10;
* **1-D Brusselator** (500 grid points, 1000 unknowns; inputs: the 2 parameters and
  the 1000 initial values), outputs at t = 1..10, BDF, rtol 1e-6, atol 1e-8.

The loss is ``sum(Y**2)`` over all outputs. Cells: SciPy's ``solve_ivp`` with a
hand-written exact Jacobian (sparse for the Brusselator) and the same right-hand side;
funcdiff's plain solve (its own exact Jacobian); funcdiff's gradient by forward
sensitivities and by the adjoint; CasADi CVODES (when installed): solve, reverse
(adjoint) gradient, forward Jacobian of the outputs. Every answer is checked first:
funcdiff's plain solve against SciPy's, its gradients forward against adjoint and against
CVODES's. Then the cells are timed in interleaved rounds (one call of each per round,
process CPU time, one thread); the ratios are medians of the per-round ratios.

Memory: the peak of Python allocations (tracemalloc) during the adjoint's backward
pass, against the size of the forward solve's dense output.
"""

from __future__ import annotations

import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)
from benchmarks._timing import parse_arguments, write_results  # noqa: E402


# ---------------------------------------------------------------- problems
def robertson(np: Any) -> dict:
    import scipy.integrate as si

    def rhs(t, y, k):
        y1, y2, y3 = y
        r1 = k[0] * y1
        r2 = k[1] * y2 * y2
        r3 = k[2] * y2 * y3
        return np.stack([r3 - r1, r1 - r2 - r3, r2])

    def jac(t, y, k):
        y1, y2, y3 = y
        return np.array(
            [
                [-k[0], k[2] * y3, k[2] * y2],
                [k[0], -2 * k[1] * y2 - k[2] * y3, -k[2] * y2],
                [0.0, 2 * k[1] * y2, 0.0],
            ]
        )

    k0 = np.array([0.04, 3e7, 1e4])
    y0 = np.array([1.0, 0.0, 0.0])
    t_eval = np.logspace(-5, 5, 20)
    options = {"method": "BDF", "rtol": 1e-8, "atol": 1e-10}

    def scipy_solve() -> Any:
        return si.solve_ivp(rhs, (0.0, 1e5), y0, t_eval=t_eval, args=(k0,), jac=jac, **options).y

    return {
        "name": "Robertson",
        "rhs": rhs,
        "span": (0.0, 1e5),
        "y0": y0,
        "params": [k0],
        "t_eval": t_eval,
        "options": options,
        "scipy": scipy_solve,
        "casadi": lambda: _casadi_robertson(t_eval, options),
    }


def brusselator(np: Any, points: int = 500) -> dict:
    import scipy.integrate as si
    import scipy.sparse as sp

    c = (points + 1) ** 2 / 50.0

    def rhs(t, u, a, b):
        x, y = u[:points], u[points:]
        lap_x = np.diff(x, 2, prepend=a, append=a)
        lap_y = np.diff(y, 2, prepend=b / a, append=b / a)
        xxy = x * x * y
        return np.concatenate([a + xxy - (b + 1) * x + c * lap_x, b * x - xxy + c * lap_y])

    ones = np.ones(points)
    lap = sp.diags([ones[1:], -2 * ones, ones[1:]], [-1, 0, 1]) * c

    def jac(t, u, a, b):
        x, y = u[:points], u[points:]
        return sp.bmat(
            [
                [sp.diags(2 * x * y - (b + 1)) + lap, sp.diags(x * x)],
                [sp.diags(b - 2 * x * y), sp.diags(-x * x) + lap],
            ],
            format="csc",
        )

    grid = np.linspace(0.0, 1.0, points + 2)[1:-1]
    u0 = np.concatenate([1 + np.sin(2 * np.pi * grid), np.full(points, 3.0)])
    t_eval = np.arange(1.0, 11.0)
    options = {"method": "BDF", "rtol": 1e-6, "atol": 1e-8}

    def scipy_solve() -> Any:
        return si.solve_ivp(
            rhs, (0.0, 10.0), u0, t_eval=t_eval, args=(1.0, 3.0), jac=jac, **options
        ).y

    return {
        "name": f"Brusselator 1-D, {2 * points} unknowns",
        "rhs": rhs,
        "span": (0.0, 10.0),
        "y0": u0,
        "params": [np.asarray(1.0), np.asarray(3.0)],
        "t_eval": t_eval,
        "options": options,
        "scipy": scipy_solve,
        "casadi": lambda: _casadi_brusselator(points, u0, t_eval, options),
    }


# ---------------------------------------------------------------- CasADi CVODES
def _casadi_robertson(t_eval: Any, options: dict) -> dict | None:
    try:
        import casadi as ca
    except ImportError:
        return None
    y = ca.SX.sym("y", 3)
    k = ca.SX.sym("k", 3)
    r1, r2, r3 = k[0] * y[0], k[1] * y[1] ** 2, k[2] * y[1] * y[2]
    ode = ca.vertcat(r3 - r1, r1 - r2 - r3, r2)
    return _casadi_cells(ca, y, k, ode, t_eval, options, [0.04, 3e7, 1e4], [1.0, 0.0, 0.0])


def _casadi_brusselator(points: int, u0: Any, t_eval: Any, options: dict) -> dict | None:
    try:
        import casadi as ca
    except ImportError:
        return None
    u = ca.SX.sym("u", 2 * points)
    p = ca.SX.sym("p", 2)
    a, b = p[0], p[1]
    c = (points + 1) ** 2 / 50.0
    x, y = u[:points], u[points:]
    xp = ca.vertcat(a, x, a)
    yp = ca.vertcat(b / a, y, b / a)
    lap_x = xp[2:] - 2 * xp[1:-1] + xp[:-2]
    lap_y = yp[2:] - 2 * yp[1:-1] + yp[:-2]
    xxy = x * x * y
    ode = ca.vertcat(a + xxy - (b + 1) * x + c * lap_x, b * x - xxy + c * lap_y)
    return _casadi_cells(ca, u, p, ode, t_eval, options, [1.0, 3.0], list(u0), jacobian=False)


def _casadi_cells(
    ca: Any,
    x: Any,
    p: Any,
    ode: Any,
    t_eval: Any,
    options: dict,
    p0: list,
    x0: list,
    jacobian: bool = True,
) -> dict:
    import numpy as np

    opts = {"reltol": options["rtol"], "abstol": options["atol"], "max_num_steps": 100000}
    integ = ca.integrator("F", "cvodes", {"x": x, "p": p, "ode": ode}, 0.0, list(t_eval), opts)
    X0 = ca.MX.sym("x0", x.shape[0])
    P = ca.MX.sym("p", p.shape[0])
    out = integ(x0=X0, p=P)["xf"]
    loss = ca.sumsqr(out)
    inputs = ca.vertcat(X0, P)
    solve = ca.Function("solve", [X0, P], [out])
    grad = ca.Function("grad", [X0, P], [loss, ca.gradient(loss, inputs)])
    cells = {
        "solve": lambda: np.asarray(solve(x0, p0)),
        "gradient": lambda: np.asarray(grad(x0, p0)[1]).ravel(),
    }
    if jacobian:
        jac = ca.Function("jacobian", [X0, P], [ca.jacobian(ca.vec(out), inputs)])
        cells["jacobian"] = lambda: np.asarray(jac(x0, p0))
    return cells


# ---------------------------------------------------------------- funcdiff cells
def _funcdiff_cells(problem: dict) -> dict:
    import numpy as np

    import funcdiff as fd
    from funcdiff.integrate import solve_ivp

    rhs, span, y0 = problem["rhs"], problem["span"], problem["y0"]
    params, t_eval, options = problem["params"], problem["t_eval"], problem["options"]

    def plain() -> Any:
        return solve_ivp(rhs, span, y0, t_eval=t_eval, args=tuple(params), **options).y

    def gradient(mode: str) -> Any:
        x = fd.tensor(y0, requires_grad=True)
        ps = [fd.tensor(p, requires_grad=True) for p in params]
        res = solve_ivp(rhs, span, x, t_eval=t_eval, args=tuple(ps), sensitivity=mode, **options)
        grads = fd.grad(np.sum(res.y**2), [x, *ps])
        return np.concatenate([np.ravel(g.data) for g in grads])

    return {
        "plain": plain,
        "forward": lambda: gradient("forward"),
        "adjoint": lambda: gradient("adjoint"),
    }


def _adjoint_memory(problem: dict) -> dict:
    """Peak Python allocations of the adjoint's backward pass vs the dense output."""
    import numpy as np

    import funcdiff as fd
    from funcdiff.integrate import solve_ivp

    rhs, span, y0 = problem["rhs"], problem["span"], problem["y0"]
    params, t_eval, options = problem["params"], problem["t_eval"], problem["options"]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    args = tuple(params)
    dense = solve_ivp(rhs, span, y0, t_eval=t_eval, args=args, dense_output=True, **options)
    dense_bytes = tracemalloc.get_traced_memory()[0] - base
    del dense
    x = fd.tensor(y0, requires_grad=True)
    ps = [fd.tensor(p, requires_grad=True) for p in params]
    res = solve_ivp(rhs, span, x, t_eval=t_eval, args=tuple(ps), sensitivity="adjoint", **options)
    loss = np.sum(res.y**2)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    fd.grad(loss, [x, *ps])
    peak = tracemalloc.get_traced_memory()[1] - held
    tracemalloc.stop()
    return {"dense_output_bytes": dense_bytes, "backward_peak_bytes": peak}


# ---------------------------------------------------------------- running
def _relative(a: Any, b: Any) -> float:
    import numpy as np

    # Relative to the largest entry: gradient entries that nearly vanish are only as
    # accurate as the tolerances allow in absolute terms.
    a, b = np.ravel(a), np.ravel(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _run_problem(problem: dict, rounds: int, skip: set[str]) -> dict:
    cells = {"scipy plain (hand-written jac)": problem["scipy"]}
    ours = _funcdiff_cells(problem)
    cells["funcdiff plain (exact jac)"] = ours["plain"]
    if "forward" not in skip:
        cells["funcdiff gradient, forward"] = ours["forward"]
    cells["funcdiff gradient, adjoint"] = ours["adjoint"]
    casadi = problem["casadi"]()
    if casadi is not None:
        cells["CVODES solve"] = casadi["solve"]
        cells["CVODES gradient, reverse"] = casadi["gradient"]
        if "jacobian" in casadi:
            cells["CVODES Jacobian, forward"] = casadi["jacobian"]

    # Check first (this is also the warm-up).
    answers = {name: fn() for name, fn in cells.items()}
    checks = {
        "plain vs scipy": _relative(
            answers["funcdiff plain (exact jac)"], answers["scipy plain (hand-written jac)"]
        )
    }
    adjoint = answers["funcdiff gradient, adjoint"]
    if "funcdiff gradient, forward" in answers:
        checks["adjoint vs forward"] = _relative(adjoint, answers["funcdiff gradient, forward"])
    if "CVODES gradient, reverse" in answers:
        checks["adjoint vs CVODES"] = _relative(adjoint, answers["CVODES gradient, reverse"])

    times: dict[str, list[float]] = {name: [] for name in cells}
    for _ in range(rounds):
        for name, fn in cells.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)

    def ratio(a: str, b: str) -> float | None:
        if a not in times or b not in times:
            return None
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    plain = "funcdiff plain (exact jac)"
    ratios = {
        "funcdiff plain / scipy plain": ratio(plain, "scipy plain (hand-written jac)"),
        "forward gradient / funcdiff plain": ratio("funcdiff gradient, forward", plain),
        "adjoint gradient / funcdiff plain": ratio("funcdiff gradient, adjoint", plain),
        "adjoint gradient / CVODES reverse gradient": ratio(
            "funcdiff gradient, adjoint", "CVODES gradient, reverse"
        ),
        "forward gradient / CVODES forward Jacobian": ratio(
            "funcdiff gradient, forward", "CVODES Jacobian, forward"
        ),
    }
    memory = _adjoint_memory(problem)
    memory["ratio"] = memory["backward_peak_bytes"] / max(memory["dense_output_bytes"], 1)
    return {
        "problem": problem["name"],
        "checks": checks,
        "median_cpu_seconds": {k: statistics.median(v) for k, v in times.items()},
        "ratios": {k: v for k, v in ratios.items() if v is not None},
        "adjoint_memory": memory,
    }


def _print(result: dict) -> None:
    print(f"\n{result['problem']}")
    for name, value in result["checks"].items():
        print(f"  check {name:<38s} max difference / max entry {value:.1e}")
    for name, value in result["median_cpu_seconds"].items():
        print(f"  {name:<44s} {value * 1e3:9.1f} ms")
    for name, value in result["ratios"].items():
        print(f"  {name:<44s} {value:9.2f} x")
    mem = result["adjoint_memory"]
    print(
        f"  adjoint backward peak / dense output          {mem['ratio']:9.2f} x  "
        f"({mem['backward_peak_bytes'] / 1e6:.1f} MB / {mem['dense_output_bytes'] / 1e6:.1f} MB)"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments("ode", __doc__, "one round, Robertson only", argv)
    _env.prepare()
    import numpy as np

    rounds = args.rounds or (1 if args.quick else 5)
    problems = [(robertson(np), set())]
    if not args.quick:
        # Forward sensitivities of 1002 inputs would be a system of a million states.
        problems.append((brusselator(np), {"forward"}))
    results = []
    for problem, skip in problems:
        result = _run_problem(problem, rounds, skip)
        _print(result)
        results.append(result)
    try:
        import casadi

        extra = {"casadi": casadi.__version__}
    except ImportError:
        extra = {"casadi": None}
    write_results("ode", args, {"rounds": rounds, "problems": results}, extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
