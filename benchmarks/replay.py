"""Replayed derivatives against eager funcdiff, the NumPy forward and jax.jit.

``python -m benchmarks.replay [--quick] [--json PATH]``

Rows (every answer is checked against eager funcdiff before it is timed):

* R1 B5, value and gradient through 1000 elementwise ops on size-10 arrays;
* R2 B4, one Hessian-vector product of Rosenbrock, n = 1e6 (``replay.hvp``, which
  returns f's value with it; jax.jit computes the same pair);
* R3 B7, the full Jacobian of a 3-input, 2-output function of size-5 vectors;
* R4 B3, the Hessian of Rosenbrock, n = 100;
* R5 B1, value and gradient of ``sum(tanh(W @ x + b) ** 2)``, W 2000 x 2000;
* R6 the RK4 sensitivity example of ``notebooks/04_ode_sensitivities.ipynb``
  (the Jacobian of 400 RK4 steps with respect to 4 parameters);
* R7 the cost of recording (first call, validation included) against one eager call.

With the ``funcdiff[jit]`` extra installed, a ``compiled`` column times the same
replayed derivative with ``compile=True`` (the program lowered to XLA kernels,
:mod:`funcdiff.replay.jit`), and ``compile_s`` is its first call (record, validate,
lower and compile) in seconds.

jax.jit is timed twice: on device arrays, returning device arrays (``jax.jit``, its own
benchmark convention), and on the same NumPy arrays funcdiff's calls take, returning
NumPy arrays as they do (``jax.jit numpy``).

Times are medians over interleaved rounds; the table shows ratios measured in the same
round (to the NumPy forward of the same function, and eager / replayed).
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
from benchmarks._timing import parse_arguments, write_results  # noqa: E402


def _problems(np: Any) -> list[dict]:
    import funcdiff as fd
    import funcdiff.replay as replay
    from benchmarks.problems import three_two, tiny_chain
    from funcdiff import functional
    from funcdiff.functional import hessian, jacobian

    rng = np.random.default_rng(0)
    rows = []

    x = rng.uniform(-1.0, 1.0, 10)
    c, d = rng.uniform(0.95, 1.05, 10), rng.uniform(-0.01, 0.01, 10)
    f5 = tiny_chain(np, c, d)

    def eager_vg(f, *xs):
        ts = [fd.tensor(v, requires_grad=True) for v in xs]
        y = f(*ts)
        return y.item(), [g.data for g in fd.grad(y, ts)]

    rows.append(
        dict(
            id="R1",
            what="B5: value+grad, 1000 tiny ops",
            numpy=lambda: f5(x),
            eager=lambda: eager_vg(f5, x),
            make=lambda compile: replay.value_and_grad(f5, compile=compile),
            args=(x,),
            jax=("vg", "tiny_chain", (x,), {"c": c, "d": d}),
        )
    )

    def rosen4(v):
        return np.sum(100.0 * (v[1:] - v[:-1] ** 2.0) ** 2.0 + (1 - v[:-1]) ** 2.0)

    x4, v4 = rng.uniform(-2.0, 2.0, 1_000_000), rng.standard_normal(1_000_000)

    def eager_hvp():
        return functional.hvp(rosen4, fd.tensor(x4), fd.tensor(v4))

    rows.append(
        dict(
            id="R2",
            what="B4: one hvp of Rosenbrock, n=1e6",
            numpy=lambda: rosen4(x4),
            eager=eager_hvp,
            make=lambda compile: replay.hvp(rosen4, compile=compile),
            args=(x4, v4),
            jax=("hvp", "rosen", (x4, v4), {}),
        )
    )

    xs3 = tuple(rng.uniform(-1.0, 1.0, 5) for _ in range(3))
    f7 = three_two(np)
    rows.append(
        dict(
            id="R3",
            what="B7: full Jacobian, 3 inputs x 2 outputs",
            numpy=lambda: f7(*xs3),
            eager=lambda: jacobian(f7, tuple(fd.tensor(v) for v in xs3), vectorize=True),
            make=lambda compile: replay.jacobian(f7, argnums=(0, 1, 2), compile=compile),
            args=xs3,
            jax=("jac3", "three_two", xs3, {}),
        )
    )

    def rosen(v):
        return np.sum(100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2)

    xr = rng.uniform(-1.0, 2.0, 100)
    rows.append(
        dict(
            id="R4",
            what="B3: Hessian of Rosenbrock, n=100",
            numpy=lambda: rosen(xr),
            eager=lambda: hessian(rosen, fd.tensor(xr), vectorize=True),
            make=lambda compile: replay.hessian(rosen, compile=compile),
            args=(xr,),
            jax=("hess", "rosen", (xr,), {}),
        )
    )

    n = 2000
    W = rng.standard_normal((n, n)) / np.sqrt(n)
    b, x1 = rng.standard_normal(n), rng.standard_normal(n)

    def f1(v):
        t = np.tanh(W @ v + b)
        return np.sum(t * t)

    rows.append(
        dict(
            id="R5",
            what="B1: value+grad, W 2000x2000 (NumPy-bound)",
            numpy=lambda: f1(x1),
            eager=lambda: eager_vg(f1, x1),
            make=lambda compile: replay.value_and_grad(f1, compile=compile),
            args=(x1,),
        )
    )

    u0 = np.array([10.0, 10.0])
    p0 = np.array([1.1, 0.4, 0.4, 0.1])

    def simulate(p, T=30.0, steps=400):
        dt = T / steps
        growth = np.stack([p[0], -p[2]])
        coupling = np.stack([-p[1], p[3]])

        def rhs(u):
            return u * (growth + coupling * u[::-1])

        u = u0
        states = [u]
        for _ in range(steps):
            k1 = rhs(u)
            k2 = rhs(u + (0.5 * dt) * k1)
            k3 = rhs(u + (0.5 * dt) * k2)
            k4 = rhs(u + dt * k3)
            u = u + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            states.append(u)
        return np.stack(states)

    rows.append(
        dict(
            id="R6",
            what="RK4 sensitivities (notebook 04), dtraj/dp",
            numpy=lambda: simulate(p0),
            eager=lambda: jacobian(simulate, fd.tensor(p0), vectorize=True),
            make=lambda compile: replay.jacobian(simulate, compile=compile),
            args=(p0,),
        )
    )
    return rows


def _as_arrays(value: Any) -> list:
    import numpy as np

    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _as_arrays(v)]
    return [np.asarray(getattr(value, "data", value), dtype=float)]


def _jax_cells(spec: Any) -> dict[str, Any]:
    """``jax.jit`` of the row's derivative, two ways: on device arrays, returning device
    arrays (``jax.jit``), and on the row's NumPy arrays, returning NumPy arrays
    (``jax.jit numpy``: what funcdiff's calls take and return)."""
    import numpy as np

    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)
    from benchmarks import problems

    kind, name, xs, kw = spec
    if name == "tiny_chain":
        f = problems.tiny_chain(jnp, jnp.asarray(kw["c"]), jnp.asarray(kw["d"]))
    elif name == "three_two":
        f = problems.three_two(jnp)
    else:

        def f(v):
            return jnp.sum(100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2)

    if kind == "vg":
        g = jax.jit(jax.value_and_grad(f))
    elif kind == "hvp":

        def hv(v, t):  # what replay.hvp returns: f's value and the product
            return f(v), jax.jvp(jax.grad(f), (v,), (t,))[1]

        g = jax.jit(hv)
    elif kind == "jac3":
        g = jax.jit(jax.jacrev(f, argnums=(0, 1, 2)))
    else:
        g = jax.jit(jax.hessian(f))
    args = tuple(jnp.asarray(v) for v in xs)

    def call() -> Any:
        return jax.block_until_ready(g(*args))

    def call_numpy() -> Any:
        return jax.tree_util.tree_map(np.asarray, g(*xs))

    call()
    call_numpy()
    return {"jax.jit": call, "jax.jit numpy": call_numpy}


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(
        "replay",
        __doc__,
        "short budgets (under a minute)",
        argv,
        {"--no-compile": "leave out the compiled column"},
    )
    _env.prepare()
    import numpy as np

    from benchmarks._timing import FULL, QUICK, measure, per_round

    budget = QUICK if args.quick else FULL
    rounds = args.rounds or (1 if args.quick else 3)
    results = []
    from funcdiff.replay import jit

    for row in _problems(np):
        replayed, call_args = row["make"](False), row["args"]
        start = time.perf_counter()
        first = replayed(*call_args)
        trace = time.perf_counter() - start
        compiled = None
        if jit.available() and not args.no_compile:
            compiled = row["make"](True)
            start = time.perf_counter()
            compiled(*call_args)
            compile_s = time.perf_counter() - start
        start = time.perf_counter()
        row["eager"]()
        eager_once = time.perf_counter() - start
        expected = _as_arrays(row["eager"]())
        got = _as_arrays(replayed(*call_args))
        ok = len(got) == len(expected) and all(
            np.allclose(g, e, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(e).max(initial=0)))
            for g, e in zip(got, expected)
        )
        if compiled is not None:
            got = _as_arrays(compiled(*call_args))
            ok = ok and all(
                np.abs(g - e).max(initial=0) <= 1e-12 * max(np.abs(e).max(initial=0), 1e-300)
                for g, e in zip(got, expected)
            )
        del first
        cells = {
            "numpy": row["numpy"],
            "eager": row["eager"],
            "replay": lambda r=replayed, a=call_args: r(*a),
        }
        if compiled is not None:
            cells["compiled"] = lambda r=compiled, a=call_args: r(*a)
        cells.update(_jax_cells(row["jax"]) if "jax" in row else {})
        per = {k: [] for k in cells}
        for _ in range(rounds):
            for name, fn in cells.items():
                per[name].append(measure(fn, per_round(budget, rounds)).median)
        ratio = {k: statistics.median(t / n for t, n in zip(per[k], per["numpy"])) for k in per}
        eager_over_replay = statistics.median(e / r for e, r in zip(per["eager"], per["replay"]))
        entry = {
            "id": row["id"],
            "what": row["what"],
            "checked": ok,
            "x_numpy": ratio,
            "eager_over_replay": eager_over_replay,
            "trace_over_eager": trace / eager_once,
            "seconds": {k: statistics.median(v) for k, v in per.items()},
        }
        if "jax.jit" in per:
            entry["replay_over_jax_jit"] = statistics.median(
                r / j for r, j in zip(per["replay"], per["jax.jit"])
            )
        if compiled is not None:
            entry["compile_s"] = compile_s
            info = [p.info["jit"] for ps in compiled._cache.values() for p in ps]
            entry["jit"] = info[0] if info else None
            if "jax.jit" in per:
                entry["compiled_over_jax_jit"] = statistics.median(
                    c / j for c, j in zip(per["compiled"], per["jax.jit"])
                )
                entry["compiled_over_jax_jit_numpy"] = statistics.median(
                    c / j for c, j in zip(per["compiled"], per["jax.jit numpy"])
                )
        results.append(entry)
        print(
            f"{row['id']:3} {row['what']:44} {'ok' if ok else 'WRONG':5} "
            + "  ".join(f"{k} {v:7.2f}x" for k, v in ratio.items())
            + f"  eager/replay {eager_over_replay:5.2f}"
            + (f"  replay/jax.jit {entry['replay_over_jax_jit']:5.2f}" if "jax.jit" in per else "")
            + (
                f"  compiled/jax.jit {entry['compiled_over_jax_jit']:5.2f}"
                f" (numpy in and out {entry['compiled_over_jax_jit_numpy']:5.2f})"
                if "compiled_over_jax_jit" in entry
                else ""
            )
            + (f"  compile {entry['compile_s']:5.2f}s" if "compile_s" in entry else "")
            + f"  trace/eager {entry['trace_over_eager']:5.1f}",
            flush=True,
        )
    write_results("replay", args, {"rows": results, "rounds": rounds})
    return 0 if all(r["checked"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
