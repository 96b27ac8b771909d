"""Run the benchmark suite: ``python -m benchmarks [--quick] [--chart PATH] ...``.

Measures funcdiff, the plain NumPy forward and every installed peer (torch, HIPS
autograd, jax) on the problems of ``benchmarks/problems.py``, after checking each answer
against an independent reference. Prints a table, writes JSON to
``benchmarks/results/<date>.json`` and, with ``--chart``, a PNG of the ratios.
See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)

HERE = Path(__file__).resolve().parent
PEERS = ("torch", "autograd", "jax")
COLUMNS = ("funcdiff", "torch.autograd", "torch.func", "autograd", "jax", "jax.jit")
EAGER = ("torch.autograd", "torch.func", "autograd", "jax")
EXTRAS = ("dispatch", "chain", "memory", "graph")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="funcdiff against plain NumPy and installed autodiff peers "
        "(1 thread, float64). Every answer is checked before it is timed.",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="short budgets, chains up to 1e5 ops (about 30-60 s in all)",
    )
    p.add_argument(
        "--only",
        default="",
        help="comma-separated problems to run, e.g. B1,B5,dispatch (default: all; "
        f"extras are {', '.join(EXTRAS)})",
    )
    p.add_argument(
        "--libs",
        default="funcdiff," + ",".join(PEERS),
        help="comma-separated libraries (default: funcdiff and every peer)",
    )
    p.add_argument(
        "--json",
        metavar="PATH",
        help="results file (default: benchmarks/results/<date>.json for a full "
        "run; a --quick run writes JSON only when this is given)",
    )
    p.add_argument("--no-json", action="store_true", help="do not write a results file")
    p.add_argument("--chart", metavar="PATH", help="write a PNG chart of the ratios (matplotlib)")
    p.add_argument(
        "--keep-blas-env",
        action="store_true",
        help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE if set (default: unset both)",
    )
    p.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall-clock time (default) or process CPU time, which is steadier "
        "when other processes share the machine",
    )
    p.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="do not move the objects of the loaded libraries out of the garbage "
        "collector's reach (gc.freeze) before timing",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="interleaved timing rounds per problem; ratios are medians over rounds of "
        "times measured in the same round (default: 3, 1 with --quick)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="print every setting's time")
    return p.parse_args(argv)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- formatting
def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.3g} us"
    if s < 1.0:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_ratio(r: float | None) -> str:
    return "" if r is None else f" ({r:.2g}x)" if r < 10 else f" ({r:.0f}x)"


# ----------------------------------------------------------------------------- running
def check_variant(variant: Any, problem: Any, ref: list) -> dict:
    """Run ``variant`` once and compare its answer with the reference: its table row."""
    from benchmarks._common import compare, to_arrays

    row: dict[str, Any] = {
        "problem": problem.key,
        "pid": problem.pid,
        "column": variant.column,
        "setting": variant.setting,
        "status": "ok",
        "error": "",
    }
    if variant.fn is None:
        row.update(status="skipped", error=variant.note)
        return row
    try:
        out = variant.fn()
        got = to_arrays(out)
        del out
    except NotImplementedError as exc:
        row.update(status="unsupported", error=f"NotImplementedError: {exc}"[:300])
        return row
    except Exception as exc:  # noqa: BLE001  (any failure of a library is a table entry)
        row.update(status="error", error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    want = variant.ref_pick(ref) if variant.ref_pick else ref
    got = variant.pick(got) if variant.pick else got
    err = compare(got, want, problem.rtol, problem.atol)
    del got
    if err:
        row.update(status="FAILED", error=err)
    return row


def time_interleaved(timed: list[tuple[dict, Any]], problem: Any, budget: Any, rounds: int) -> None:
    """Time every checked callable of one problem, in ``rounds`` interleaved rounds.

    ``timed[0]`` is the plain NumPy forward. Each round measures every entry once, and
    a ratio is the median over rounds of (entry / NumPy forward) measured in the same
    round, so a machine that drifts faster or slower during the run shifts both sides
    of a ratio alike. The rows are updated in place.
    """
    from benchmarks._timing import combine, measure, per_round

    share = per_round(budget, rounds)
    samples: list[list] = [[] for _ in timed]
    for _ in range(rounds):
        for k, (_, fn) in enumerate(timed):
            samples[k].append(measure(fn, share))
    base = samples[0]
    for (row, _), ts in zip(timed, samples):
        row.update(combine(ts).as_dict())
        row["ratio"] = statistics.median(t.median / b.median for t, b in zip(ts, base))
        if problem.ops > 1:
            row["us_per_op"] = row["median_s"] / problem.ops * 1e6
        row["rounds"] = rounds


def load_libraries(names: list[str]) -> tuple[list[Any], dict[str, str], dict[str, str]]:
    """Import the adapters; a missing peer is skipped with a note, funcdiff is required."""
    libs, versions, notes = [], {}, {}
    for name in names:
        module = importlib.import_module(f"benchmarks.impl_{name}")
        try:
            versions.update(module.load())
        except Exception as exc:
            if name == "funcdiff":
                raise SystemExit(f"funcdiff failed to import: {type(exc).__name__}: {exc}") from exc
            if not isinstance(exc, ImportError):
                notes[name] = f"failed to load: {type(exc).__name__}: {exc}"
                log(f"  {name}: skipped, {notes[name]}")
                continue
            notes[name] = f"not installed ({exc.name or exc})"
            log(f"  {name}: skipped, not installed")
            continue
        libs.append(module)
    return libs, versions, notes


def best_rows(rows: list[dict]) -> dict[tuple[str, str], dict]:
    best: dict[tuple[str, str], dict] = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        key = (r["problem"], r["column"])
        if key not in best or r["median_s"] < best[key]["median_s"]:
            best[key] = r
    return best


# ----------------------------------------------------------------------------- targets
#: NumPy forward times of the problems with absolute targets, on the machine where the
#: targets were set (issue 5's table: B5 0.41 us per op over 1000 ops, B7 5.6 us).
REFERENCE_NUMPY_S = {"B5": 0.41e-6 * 1000, "B7": 5.6e-6}


def evaluate_targets(problems: list[Any], base: dict, best: dict, extras: dict) -> list[dict]:
    """funcdiff's targets from the performance issues; informational, never asserted."""
    out: list[dict] = []

    def fd(key: str) -> dict | None:
        return best.get((key, "funcdiff"))

    def add(name: str, target: str, value: str, met: bool | None) -> None:
        out.append(
            {
                "target": name,
                "goal": target,
                "measured": value,
                "met": None if met is None else bool(met),
            }
        )

    def at_reference_speed(key: str, r: dict) -> str:
        # The absolute targets were set on a machine where NumPy's forward took
        # REFERENCE_NUMPY_S; scaled by this run's NumPy time, the figure says how far
        # the code is from the target independently of how fast this machine is today.
        numpy_s = base.get(key)
        if not numpy_s:
            return ""
        scaled = r["median_s"] * REFERENCE_NUMPY_S[key] / numpy_s
        if key == "B5":
            per_op = scaled / next(p.ops for p in problems if p.key == key) * 1e6
            return f" ({per_op:.2f} us/op at the reference NumPy speed)"
        return f" ({fmt_time(scaled)} at the reference NumPy speed)"

    keys = {p.key for p in problems}
    ratio_goals = {"B1": 2.3, "B4": 8.0, "B6 jvp": 3.5, "B6 vjp": 2.6}
    for key, goal in ratio_goals.items():
        if key in keys:
            r = fd(key)
            add(
                key,
                f"<= {goal}x numpy forward",
                f"{r['ratio']:.2f}x" if r else "no result",
                r and r["ratio"] <= goal,
            )
    for key in ("B2 n=300", "B2 n=1000", "B3 n=100", "B3 n=500"):
        if key not in keys:
            continue
        r = fd(key)
        peers = {c: best[(key, c)]["median_s"] for c in EAGER if (key, c) in best}
        if r and peers:
            fastest = min(peers, key=peers.get)
            add(
                key,
                "faster than every eager peer",
                f"{fmt_time(r['median_s'])} vs {fastest} {fmt_time(peers[fastest])}",
                r["median_s"] < peers[fastest],
            )
        else:
            add(
                key,
                "faster than every eager peer",
                "no result" if not r else "no peers",
                None if r else False,
            )
        if key == "B2 n=1000":
            jit = best.get((key, "jax.jit"))
            if r and jit:
                q = r["median_s"] / jit["median_s"]
                add(key, "within 1.3x of jax.jit", f"{q:.2f}x jax.jit", q <= 1.3)
    if "B5" in keys:
        r = fd("B5")
        add(
            "B5",
            "<= 3 us per op",
            f"{r['us_per_op']:.2f} us/op{at_reference_speed('B5', r)}" if r else "no result",
            r and r["us_per_op"] <= 3.0,
        )
    if "B7" in keys:
        r = fd("B7")
        add(
            "B7",
            "<= 150 us",
            f"{fmt_time(r['median_s'])}{at_reference_speed('B7', r)}" if r else "no result",
            r and r["median_s"] <= 150e-6,
        )
    d = extras.get("dispatch")
    if d:
        ok = d.get("status") == "ok"
        add(
            "dispatch",
            "np.tanh(t) - np.tanh(a) <= 1.5 us",
            f"{d['overhead_us']:.2f} us (requires_grad: {d['overhead_requires_grad_us']:.2f} us)"
            if ok
            else d.get("status", "?"),
            ok and d["overhead_us"] <= 1.5,
        )
    c = extras.get("chain")
    if c and "growth" in c:
        add(
            "chain",
            "backward time per op flat (longest/shortest <= 1.5)",
            f"{c['growth']:.2f}",
            c["growth"] <= 1.5,
        )
    m = extras.get("memory")
    if m and m.get("rows"):
        r = m["rows"][0]
        ok = r["status"] == "ok"
        add(
            "memory",
            "extra peak <= 3x the Jacobian (chunk_size=100, n=m=2000)",
            f"{r['ratio']:.2f}x" if ok else r["status"],
            ok and r["ratio"] <= 3.0,
        )
    return out


# ----------------------------------------------------------------------------- output
def print_table(
    problems: list[Any],
    base: dict,
    rows: list[dict],
    best: dict,
    loaded_columns: list[str],
    verbose: bool,
) -> None:
    cols = ["numpy f", *loaded_columns]
    width = 19
    head = f"{'problem':<11}" + "".join(f"{c:>{width}}" for c in cols)
    print(head)
    print("-" * len(head))
    by_cell: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        by_cell.setdefault((r["problem"], r["column"]), []).append(r)
    for p in problems:
        b = base[p.key]
        per_op = p.ops > 1
        unit = p.ops if per_op else 1
        cells = [fmt_time(b / unit) + ("/op" if per_op else "")]
        for c in loaded_columns:
            r = best.get((p.key, c))
            if r is not None:
                cell = fmt_time(r["median_s"] / unit) + ("/op" if per_op else "")
                cell += fmt_ratio(r["ratio"])
                if any(x["status"] == "FAILED" for x in by_cell.get((p.key, c), [])):
                    cell += "!"
            else:
                statuses = {x["status"] for x in by_cell.get((p.key, c), [])}
                cell = next(
                    (s for s in ("FAILED", "error", "unsupported", "skipped") if s in statuses), "-"
                )
            cells.append(cell)
        print(f"{p.key:<11}" + "".join(f"{cell:>{width}}" for cell in cells))
    print(
        "(ratio) = time / plain NumPy forward of the same f in this run; "
        "'!' = another setting FAILED its check"
    )
    fd_best = {p.key: best.get((p.key, "funcdiff")) for p in problems}
    print(
        "\nfuncdiff's best settings: "
        + "; ".join(f"{k}: {r['setting']}" for k, r in fd_best.items() if r)
    )
    shown = rows if verbose else [r for r in rows if r["column"] == "funcdiff"]
    print("\nfuncdiff settings" if not verbose else "\nall settings")
    for r in shown:
        if r["status"] == "ok":
            what = f"{fmt_time(r['median_s'])}{fmt_ratio(r['ratio'])}"
            what += f"  [{r['repeats']}x{r['number']}, gc {100 * r.get('gc_share', 0):.0f}%]"
        else:
            what = f"{r['status']}: {r['error']}"
        print(f"  {r['problem']:<10} {r['column']:<15} {r['setting']:<45} {what}")
    bad = [r for r in rows if r["status"] in ("FAILED", "error") and r["column"] != "funcdiff"]
    if bad and not verbose:
        print("\npeer settings that failed or raised")
        for r in bad:
            print(
                f"  {r['problem']:<10} {r['column']:<15} {r['setting']:<30} "
                f"{r['status']}: {r['error']}"
            )


def print_extras(extras: dict) -> None:
    d = extras.get("dispatch")
    if d:
        print("\nDispatch overhead (issue 3): np.tanh on a 10-element Tensor vs the ndarray")
        if d["status"] == "ok":
            print(
                f"  ndarray {d['ndarray_us']:.2f} us; Tensor {d['tensor_us']:.2f} us "
                f"(+{d['overhead_us']:.2f} us); Tensor requiring grad "
                f"{d['tensor_requires_grad_us']:.2f} us (+{d['overhead_requires_grad_us']:.2f} us,"
                " records a node)"
            )
        else:
            print(f"  {d['status']}: {d.get('error', '')}")
    c = extras.get("chain")
    if c:
        print("\nBackward over a chain of recorded ops (issue 8): time per op should be flat")
        for r in c["rows"]:
            if r["status"] == "ok":
                print(
                    f"  {r['ops']:>9,} ops: backward {fmt_time(r['backward_s'])} = "
                    f"{r['backward_us_per_op']:.2f} us/op (forward recording "
                    f"{r['forward_us_per_op']:.2f} us/op) [{r['repeats']} run(s)]"
                )
            else:
                print(f"  {r['ops']:>9,} ops: {r['status']}: {r.get('error', '')}")
        if "growth" in c:
            print(f"  longest/shortest per-op time: {c['growth']:.2f}")
        for note in c.get("notes", []):
            print(f"  {note}")
    m = extras.get("memory")
    if m:
        print("\nMemory (issue 5): jacobian(vectorize=True, chunk_size=k) at n=m=2000, tracemalloc")
        if m.get("status") != "ok":
            print(f"  {m['status']}: {m.get('note', '')}")
        for r in m.get("rows", []):
            if r["status"] == "error":
                print(f"  {r['setting']:<35} error: {r['error']}")
                continue
            print(
                f"  {r['setting']:<35} extra peak {r['extra_peak_bytes'] / 2**20:.1f} MiB = "
                f"{r['ratio']:.2f}x the Jacobian ({r['jacobian_bytes'] / 2**20:.1f} MiB)"
                + (f"  {r['status']}: {r['error']}" if r["status"] != "ok" else "")
            )
    g = extras.get("graph")
    if g:
        print("\nGraph memory: B5's chain of elementwise ops on 1e6 elements, tracemalloc")
        print(
            f"  {g['ops']} ops hold {g['held_bytes'] / 2**20:.0f} MiB after the forward pass = "
            f"{g['arrays_held']:.1f} arrays of {g['array_bytes'] / 2**20:.1f} MiB"
            + (f"  {g['status']}: {g['error']}" if g["status"] != "ok" else "")
        )


def print_targets(targets: list[dict]) -> None:
    if not targets:
        return
    print("\nfuncdiff targets (informational)")
    for t in targets:
        mark = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
        print(f"  {mark:<7} {t['target']:<10} {t['goal']:<55} {t['measured']}")


def write_chart(path: str, problems: list[Any], best: dict, columns: list[str], title: str) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no chart"
    import numpy as np

    keys = [p.key for p in problems]
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(keys) * max(1, len(columns)) / 3 + 1.5))
    height = 0.8 / max(1, len(columns))
    y = np.arange(len(keys))
    for i, c in enumerate(columns):
        vals = [best[(k, c)]["ratio"] if (k, c) in best else np.nan for k in keys]
        pos = y + (i - (len(columns) - 1) / 2) * height
        ax.barh(pos, vals, height, label=c)
        if c == "funcdiff":
            for yy, v in zip(pos, vals, strict=True):
                if np.isfinite(v):
                    ax.text(v * 1.08, yy, f"{v:.3g}x", va="center", fontsize=7)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(y, keys)
    ax.invert_yaxis()
    ax.set_xlabel("time / plain NumPy forward of the same function (log scale; lower is better)")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"chart written to {path}"


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env_report = _env.prepare(args.keep_blas_env)
    started = time.perf_counter()
    load_start = _loadavg()

    import numpy as np  # noqa: F401  (after the environment is set)

    from benchmarks import _machine, extras
    from benchmarks import problems as P
    from benchmarks._timing import FULL, QUICK

    # gc_freeze: torch, jax and friends leave hundreds of thousands of objects on the heap;
    # every full collection would walk them, charging the libraries that allocate Python
    # objects per operation (funcdiff, HIPS autograd) for the peers that happen to be loaded.
    budget = dataclasses.replace(
        QUICK if args.quick else FULL, clock=args.clock, gc_freeze=not args.no_gc_freeze
    )
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    if rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    names = [n.strip() for n in args.libs.split(",") if n.strip()]
    unknown = set(names) - {"funcdiff", *PEERS}
    if unknown:
        raise SystemExit(
            f"--libs: unknown libraries {sorted(unknown)}; choose from funcdiff, "
            + ", ".join(PEERS)
        )
    if "funcdiff" not in names:
        names.insert(0, "funcdiff")
    log(f"loading libraries ...   [{time.perf_counter() - started:.0f} s]")
    libs, versions, lib_notes = load_libraries(names)
    limiter = None
    try:
        import threadpoolctl

        limiter = threadpoolctl.threadpool_limits(1)  # belt and braces after the env vars
    except ImportError:
        pass
    fdmod = importlib.import_module("benchmarks.impl_funcdiff")
    log(f"loaded   [{time.perf_counter() - started:.0f} s]")
    loaded_columns = [c for c in COLUMNS if any(c in lib.COLUMNS for lib in libs)]

    only = {s.strip() for s in args.only.split(",") if s.strip()}

    def wanted(key: str, pid: str) -> bool:
        return not only or key in only or pid in only

    problems = [p for p in P.make_problems() if wanted(p.key, p.pid)]

    rows: list[dict] = []
    base: dict[str, float] = {}
    for p in problems:
        log(f"{p.key}: {p.label}   [{time.perf_counter() - started:.0f} s]")
        ref = p.reference()
        np_row = {
            "problem": p.key,
            "pid": p.pid,
            "column": "numpy f",
            "setting": "forward",
            "status": "ok",
        }
        rows.append(np_row)
        timed: list[tuple[dict, Any]] = [(np_row, p.forward)]
        for lib in libs:
            try:
                variants = lib.variants(p)
            except Exception as exc:  # noqa: BLE001
                for c in lib.COLUMNS:
                    rows.append(
                        {
                            "problem": p.key,
                            "pid": p.pid,
                            "column": c,
                            "setting": "setup",
                            "status": "error",
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                    )
                continue
            for v in variants:
                if args.quick and not v.quick:
                    rows.append(
                        {
                            "problem": p.key,
                            "pid": p.pid,
                            "column": v.column,
                            "setting": v.setting,
                            "status": "skipped",
                            "error": "left out of --quick runs",
                        }
                    )
                    continue
                r = check_variant(v, p, ref)
                rows.append(r)
                if r["status"] == "ok":
                    timed.append((r, v.fn))
                else:
                    log(f"  {v.column:<15} {v.setting:<45} {r['status']:>10}")
        t0 = time.perf_counter()
        time_interleaved(timed, p, budget, rounds)
        base[p.key] = np_row["median_s"]
        for r, _ in timed[1:]:
            log(f"  {r['column']:<15} {r['setting']:<45} {fmt_time(r['median_s']):>10}")
        log(f"  ({len(timed)} callables x {rounds} rounds: {time.perf_counter() - t0:.1f} s)")

    extra: dict[str, Any] = {}
    fd = fdmod.fd
    if wanted("dispatch", "dispatch"):
        log(f"dispatch overhead ...   [{time.perf_counter() - started:.0f} s]")
        extra["dispatch"] = extras.dispatch(fd, budget)
    if wanted("chain", "chain"):
        lengths = (10_000, 100_000) if args.quick else (10_000, 100_000, 1_000_000)
        reps = {10_000: 3, 100_000: 1} if args.quick else {10_000: 5, 100_000: 3, 1_000_000: 1}
        log(f"chain scaling {lengths} ...   [{time.perf_counter() - started:.0f} s]")
        extra["chain"] = extras.chain(fd, lengths, reps, args.clock)
        if args.quick:
            extra["chain"]["notes"] = ["--quick: the 1e6-op chain is left out"]
    if wanted("memory", "memory"):
        log(f"jacobian memory ...   [{time.perf_counter() - started:.0f} s]")
        extra["memory"] = extras.memory(fdmod.F, fd, 2000, 100, unchunked=not args.quick)
    if wanted("graph", "graph"):
        log(f"graph memory ...   [{time.perf_counter() - started:.0f} s]")
        extra["graph"] = extras.graph_memory(fd)

    load_end = _loadavg()
    best = best_rows(rows)
    contention = _contention(rows)
    targets = evaluate_targets(problems, base, best, extra)
    elapsed = time.perf_counter() - started
    date = _dt.date.today().isoformat()
    info = _machine.machine(env_report)
    kernel = _kernel_summary(info["blas"])

    print()
    print(
        f"funcdiff benchmarks {date}: {info['cpu'].get('model', '?')}, 1 thread, float64; "
        f"BLAS kernel: {kernel}; clock: {args.clock}"
    )
    removed = env_report.get("removed_blas_vars") or {}
    if removed:
        print(f"(unset for this run: {', '.join(f'{k}={v}' for k, v in removed.items())})")
    kept = env_report.get("kept_blas_vars") or {}
    if kept:
        print(f"(kept by --keep-blas-env: {', '.join(f'{k}={v}' for k, v in kept.items())})")
    print(
        f"versions: numpy {info['numpy']}, scipy {info['scipy']}, "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
    )
    for name, note in lib_notes.items():
        print(f"{name}: {note}")
    busy = max(load_start or 0.0, load_end or 0.0)
    if busy > 0.7 or (contention or 1.0) > 1.15:
        print(
            f"WARNING: the machine was busy (load average {load_start} at the start, "
            f"{load_end} at the end; wall/CPU time over the cells {contention:.2f}): "
            "other processes competed for the cores, so the timings are inflated and noisy. "
            + (
                "Rerun on an idle machine before quoting them."
                if args.clock == "cpu"
                else "Rerun on an idle machine, or with --clock cpu, before quoting them."
            )
        )
    if fdmod.F_MISSING:
        print(f"note: {fdmod.F_MISSING}; those funcdiff cells are skipped")
    print()
    print_table(problems, base, rows, best, loaded_columns, args.verbose)
    print_extras(extra)
    print_targets(targets)
    print(f"\ntotal time {elapsed:.0f} s{' (--quick)' if args.quick else ''}")

    result = {
        "date": date,
        "timestamp": _dt.datetime.now().isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "command": " ".join(
            ["python -m benchmarks", *(argv if argv is not None else sys.argv[1:])]
        ),
        "machine": info,
        "versions": {"numpy": info["numpy"], "scipy": info["scipy"], **versions},
        "skipped_libraries": lib_notes,
        "funcdiff_functional": fdmod.F_MISSING or "available",
        "load_average": {"start": load_start, "end": load_end},
        "wall_over_cpu": contention,
        "method": {
            "cell": "median over interleaved rounds of the median seconds per call over "
            "adaptive repeats; ratio = median over rounds of cell / plain NumPy forward of "
            "the same function measured in the same round",
            "budget": budget.__dict__,
            "rounds": rounds,
            "clock": args.clock,
            "gc_freeze": not args.no_gc_freeze,
            "threads": 1,
            "dtype": "float64",
        },
        "problems": {p.key: p.label for p in problems},
        "numpy_forward_s": base,
        "rows": rows,
        "best": {
            f"{k[0]} | {k[1]}": {
                "setting": r["setting"],
                "median_s": r["median_s"],
                "ratio": r["ratio"],
            }
            for k, r in best.items()
        },
        "extras": extra,
        "targets": targets,
        "elapsed_s": elapsed,
    }
    write_results(result, args, HERE / "results" / f"{date}.json")
    if args.chart:
        title = (
            f"funcdiff benchmarks {date}, {info['cpu'].get('model', '?')}, 1 thread, "
            f"float64, clock: {args.clock}, {kernel}"
        )
        chart_cols = [c for c in loaded_columns if any(k[1] == c for k in best)]
        print(write_chart(args.chart, problems, best, chart_cols, title))
    if limiter is not None:
        limiter.restore_original_limits()
    return 0


def _kernel_summary(blas: list[dict]) -> str:
    """'numpy: openblas 0.3.31 SkylakeX; scipy: ...' from threadpoolctl's records."""
    parts = []
    for b in blas:
        if b.get("user_api") != "blas":
            continue
        path = str(b.get("filepath", ""))
        owner = next((m for m in ("numpy", "scipy", "torch", "jaxlib") if f"/{m}" in path), "?")
        parts.append(f"{owner}: {b.get('internal_api')} {b.get('version')} {b.get('architecture')}")
    if not parts and blas:
        return "see np.show_config in the results file"
    return "; ".join(sorted(parts)) or "?"


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _contention(rows: list[dict]) -> float:
    """Total wall time / total process CPU time over the timed cells (about 1 when idle)."""
    timed = [r for r in rows if r.get("cpu_median_s", 0) > 0 and r.get("wall_median_s")]
    cpu = sum(r["cpu_median_s"] for r in timed)
    return sum(r["wall_median_s"] for r in timed) / cpu if cpu else 1.0


def write_results(result: dict, args: argparse.Namespace, default: Path) -> None:
    """Write ``result`` as JSON: to ``--json``, else to ``default`` unless ``--quick``;
    never with ``--no-json``."""
    json_path = args.json
    if json_path is None and not args.quick:
        json_path = str(default)
    if json_path and not args.no_json:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        with open(json_path, "w") as fh:
            json.dump(result, fh, indent=1, default=_jsonable)
            fh.write("\n")
        print(f"results written to {os.path.relpath(json_path)}")


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


if __name__ == "__main__":
    raise SystemExit(main())
