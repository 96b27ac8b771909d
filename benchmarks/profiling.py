"""Where funcdiff spends its time: cProfile of the benchmark problems.

``python -m benchmarks.profiling [B1 B2 B5 dispatch ...] [--top N] [--calls N]``

For each problem the funcdiff call (its best setting in the suite) runs in a loop under
cProfile; the report lists the functions with the most time of their own (tottime) and
the most time including callees (cumtime), each as a percentage of the profiled total.
cProfile adds overhead per Python call, so the percentages overstate Python-heavy parts
a little; they are a map, and the benchmark's timings are the measure.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402

CHOICES = ("B1", "B2", "B2-1000", "B5", "dispatch", "dispatch-grad", "B3", "B4", "B6", "B7")


def _workloads(names: list[str]) -> dict[str, tuple[Any, int]]:
    import numpy as np

    import funcdiff as fd
    from benchmarks import problems as P

    try:
        from funcdiff import functional as F
    except ImportError:
        F = None
    probs = {p.key: p for p in P.make_problems()}
    out: dict[str, tuple[Any, int]] = {}
    for name in names:
        if name == "B1":
            d = probs["B1"].data
            f = P.b1_loss(P.NP, d["W"], d["b"])
            xt = fd.tensor(d["x"], requires_grad=True)

            def b1(f=f, xt=xt):
                v = f(xt)
                return fd.grad(v, xt)

            out[name] = (b1, 200)
        elif name in ("B2", "B2-1000"):
            d = probs["B2 n=300" if name == "B2" else "B2 n=1000"].data
            f = P.tanh_mv(P.NP, d["A"])
            x0 = fd.tensor(d["x"])
            if F is not None:
                out[name] = (
                    (lambda f=f, x0=x0: F.jacobian(f, x0, vectorize=True)),
                    100 if name == "B2" else 10,
                )
            else:  # what jacobian(vectorize=True) does: one batched backward pass
                n = d["x"].size

                def b2(f=f, x=d["x"], n=n):
                    xt = fd.tensor(x, requires_grad=True)
                    y = f(xt)
                    return fd.grad(y, xt, np.eye(n), is_grads_batched=True)

                out[name] = (b2, 100 if name == "B2" else 10)
        elif name == "B3" and F is not None:
            x0 = fd.tensor(probs["B3 n=100"].data["x"])
            out[name] = ((lambda x0=x0: F.hessian(P.rosen(P.NP), x0, vectorize=True)), 200)
        elif name == "B4" and F is not None:
            d = probs["B4"].data
            x0, v0 = fd.tensor(d["x"]), fd.tensor(d["v"])
            out[name] = ((lambda x0=x0, v0=v0: F.vhp(P.rosen(P.NP), x0, v0)), 5)
        elif name == "B6" and F is not None:
            d = probs["B6 jvp"].data
            f = P.tanh_mv(P.NP, d["A"])
            x0, v0, u0 = fd.tensor(d["x"]), fd.tensor(d["v"]), fd.tensor(d["u"])
            out["B6-jvp"] = ((lambda f=f, x0=x0, v0=v0: F.jvp(f, x0, v0)), 300)
            out["B6-vjp"] = ((lambda f=f, x0=x0, u0=u0: F.vjp(f, x0, u0)), 300)
        elif name == "B7" and F is not None:
            d = probs["B7"].data
            xs = tuple(fd.tensor(d[k]) for k in ("x", "y", "z"))
            f = P.three_two(P.NP)
            out[name] = ((lambda f=f, xs=xs: F.jacobian(f, xs, vectorize=True)), 500)
        elif name == "B5":
            d = probs["B5"].data
            f = P.tiny_chain(P.NP, d["c"], d["d"])
            xt = fd.tensor(d["x"], requires_grad=True)

            def b5(f=f, xt=xt):
                xt.grad = None
                f(xt).backward()

            out[name] = (b5, 30)
        elif name in ("dispatch", "dispatch-grad"):
            t = fd.tensor(np.linspace(-1, 1, 10), requires_grad=name == "dispatch-grad")

            def disp(t=t):
                for _ in range(1000):
                    np.tanh(t)

            out[name] = (disp, 50)
        else:
            print(f"{name}: needs funcdiff.functional, skipped", file=sys.stderr)
    return out


def report(name: str, fn: Any, calls: int, top: int) -> str:
    fn()  # warm up
    t0 = time.perf_counter()
    for _ in range(max(1, calls // 5)):
        fn()
    plain = (time.perf_counter() - t0) / max(1, calls // 5)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():
        where = f"{os.path.relpath(file) if file.startswith('/') else file}:{line}({func})"
        rows.append((tt, ct, nc, where))
    buf = io.StringIO()
    buf.write(
        f"\n=== {name}: {calls} calls, {plain * 1e3:.3f} ms per call unprofiled, "
        f"{total / calls * 1e3:.3f} ms per call profiled\n"
    )
    for title, idx in (("own time (tottime)", 0), ("including callees (cumtime)", 1)):
        buf.write(f"--- top {top} by {title}\n")
        buf.write(f"{'%':>6} {'s/call':>10} {'ncalls/call':>11}  function\n")
        for r in sorted(rows, key=lambda r: r[idx], reverse=True)[:top]:
            buf.write(
                f"{100 * r[idx] / total:6.1f} {r[idx] / calls:10.2e} {r[2] / calls:11.1f}  {r[3]}\n"
            )
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profiling", description=__doc__)
    p.add_argument(
        "problems",
        nargs="*",
        default=["B1", "B2", "B5", "dispatch"],
        help=f"any of {', '.join(CHOICES)}",
    )
    p.add_argument("--top", type=int, default=15)
    p.add_argument(
        "--calls", type=int, default=None, help="calls per problem (default: per problem)"
    )
    args = p.parse_args(argv)
    _env.prepare()
    for name, (fn, calls) in _workloads(args.problems).items():
        print(report(name, fn, args.calls or calls, args.top), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
