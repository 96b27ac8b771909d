"""Sparse Jacobians and Hessians: ``python -m benchmarks.sparse [--quick] ...``.

Measures ``funcdiff.sparse`` against the installed peers (asdex on JAX, CasADi, SciPy's
grouped finite differences) and against dense Jacobians at the small sizes, on the
problems of ``benchmarks/sparse_problems.py``, after checking every answer against the
analytic reference. Prints tables of ratios and writes JSON to
``benchmarks/results/sparse-<date>.json``. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python benchmarks/sparse.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)

HERE = Path(__file__).resolve().parent
LIBS = ("funcdiff", "jax", "asdex", "casadi", "scipy")
PEER_COLUMNS = ("asdex", "casadi", "scipy FD", "jax.jit dense", "funcdiff dense")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.sparse",
        description="Sparse Jacobians and Hessians: funcdiff.sparse against asdex, CasADi, "
        "SciPy's grouped finite differences and dense Jacobians (1 thread, float64). "
        "Every answer is checked before it is timed.",
    )
    p.add_argument("--quick", action="store_true", help="short budgets, one round (< 1 minute)")
    p.add_argument(
        "--only",
        default="",
        help="comma-separated problems, e.g. bruss,'rosen n=1e5' (default: all)",
    )
    p.add_argument(
        "--libs",
        default=",".join(LIBS),
        help=f"comma-separated libraries (default: {','.join(LIBS)})",
    )
    p.add_argument(
        "--json",
        metavar="PATH",
        help="results file (default: benchmarks/results/sparse-<date>.json for a full run; "
        "a --quick run writes JSON only when this is given)",
    )
    p.add_argument("--no-json", action="store_true", help="do not write a results file")
    p.add_argument(
        "--rounds", type=int, default=None, help="interleaved rounds (default 3, 1 with --quick)"
    )
    p.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="wall-clock or process CPU time"
    )
    p.add_argument(
        "--keep-blas-env",
        action="store_true",
        help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE if set (default: unset both)",
    )
    p.add_argument(
        "--verbose", "-v", action="store_true", help="list every setting with its seconds"
    )
    return p.parse_args(argv)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fmt(r: float | None) -> str:
    if r is None:
        return "-"
    return f"{r:.2g}x" if r < 10 else f"{r:.0f}x"


# ----------------------------------------------------------------------------- checking
def _as_matrix(out: Any) -> Any:
    import numpy as np
    import scipy.sparse as sp

    if sp.issparse(out):
        return out
    if hasattr(out, "detach") and hasattr(out, "numpy"):  # funcdiff Tensors
        return out.detach().numpy()
    return np.asarray(out)


def check_cell(cell: Any, p: Any) -> dict:
    """Run a call cell once and compare it with the reference: its results row."""
    import scipy.sparse as sp

    from benchmarks import sparse_problems as SP

    row: dict[str, Any] = {
        "problem": p.key,
        "column": cell.column,
        "setting": cell.setting,
        "kind": cell.kind,
        "status": "ok",
        "error": "",
        **cell.info,
    }
    if cell.fn is None:
        row.update(status="skipped", error=cell.note)
        return row
    try:
        out = cell.fn()
    except NotImplementedError as exc:
        row.update(status="unsupported", error=f"NotImplementedError: {exc}"[:300])
        return row
    except Exception as exc:  # noqa: BLE001  (any failure of a library is a table entry)
        row.update(status="error", error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    if cell.kind == "prepare":
        return row  # its product is checked by the call cells
    got = _as_matrix(cell.check_as(out) if cell.check_as else out)
    row["result_type"] = f"{type(out).__module__}.{type(out).__name__}"
    funcdiff_columns = ("funcdiff sparse", "funcdiff compiled", "funcdiff one-shot")
    if cell.column in funcdiff_columns and not sp.issparse(got):
        row.update(
            status="FAILED", error=f"returned {row['result_type']}, not a SciPy sparse matrix"
        )
        return row
    if cell.exact:
        err = SP.compare_matrix(got, p.reference, p.rtol, p.atol)
    else:
        errors = SP.relative_errors(got, p.reference)
        row.update(errors)
        err = ""
        if errors["normwise_rel_err"] > cell.loose_rtol:
            err = f"normwise relative error {errors['normwise_rel_err']:.3g} > {cell.loose_rtol:g}"
    if err:
        row.update(status="FAILED", error=err)
    return row


# ----------------------------------------------------------------------------- the table
def best_cells(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """The fastest correct setting of each (problem, column).

    CasADi's columns use one symbol type per problem: the one whose build was faster.
    """
    ok = [r for r in rows if r["status"] == "ok" and "median_s" in r and r.get("table", True)]
    best: dict[tuple[str, str], dict] = {}
    builds = {}
    for r in ok:
        if r["column"] == "casadi build":
            key = r["problem"]
            if key not in builds or r["median_s"] < builds[key]["median_s"]:
                builds[key] = r
    for r in ok:
        if r["column"] in ("casadi", "casadi build"):
            chosen = builds.get(r["problem"])
            if chosen is not None and r.get("symbols") != chosen.get("symbols"):
                continue
        key = (r["problem"], r["column"])
        if key not in best or r["median_s"] < best[key]["median_s"]:
            best[key] = r
    return best


def summarise(problems: list[Any], rows: list[dict], best: dict) -> list[dict]:
    """One summary per problem: ratios to NumPy, peer ratios, prepare ratios, colours."""
    from benchmarks.sparse_cells import CALL_COLUMNS, PREPARE_COLUMNS

    out = []
    for p in problems:
        s: dict[str, Any] = {"problem": p.key, "unknowns": p.size, "nnz": int(p.reference.nnz)}
        status = {}
        for r in rows:
            if r["problem"] == p.key:
                status.setdefault(r["column"], set()).add(r["status"])

        def ratio(col: str, key: str = p.key) -> float | None:
            r = best.get((key, col))
            return r["ratio"] if r else None

        def state(col: str, status: dict = status) -> str:
            st = status.get(col, set())
            return next((x for x in ("FAILED", "error", "unsupported", "skipped") if x in st), "-")

        s["call"] = {c: ratio(c) for c in CALL_COLUMNS}
        s["prepare"] = {c: ratio(c) for c in PREPARE_COLUMNS}
        s["missing"] = {c: state(c) for c in (*CALL_COLUMNS, *PREPARE_COLUMNS) if ratio(c) is None}
        fd_call = ratio("funcdiff sparse")
        s["funcdiff_over_peer"] = {
            c: (fd_call / ratio(c) if fd_call and ratio(c) else None) for c in PEER_COLUMNS
        }
        compiled_call = ratio("funcdiff compiled")
        s["compiled_over_peer"] = {
            c: (compiled_call / ratio(c) if compiled_call and ratio(c) else None)
            for c in PEER_COLUMNS
        }
        fd_prep = ratio("funcdiff prepare")
        s["funcdiff_prepare_over"] = {
            c: (fd_prep / ratio(c) if fd_prep and ratio(c) else None)
            for c in ("asdex prepare", "casadi build")
        }
        colours = {}
        for col, name in (
            ("funcdiff sparse", "funcdiff"),
            ("asdex", "asdex"),
            ("casadi", "casadi"),
            ("scipy FD", "scipy"),
        ):
            r = best.get((p.key, col)) or next(
                (
                    x
                    for x in rows
                    if x["problem"] == p.key and x["column"] == col and x.get("ncolors")
                ),
                None,
            )
            if r and r.get("ncolors") is not None:
                colours[name] = {
                    "ncolors": r["ncolors"],
                    "mode": r.get("mode") or r.get("colouring"),
                }
        s["colours"] = colours
        casadi = best.get((p.key, "casadi build"))
        s["casadi_symbols"] = casadi.get("symbols") if casadi else None
        fd_d = next(
            (
                x
                for x in rows
                if x["problem"] == p.key and x["column"] == "scipy FD" and "max_rel_err" in x
            ),
            None,
        )
        s["scipy_fd_max_rel_err"] = fd_d["max_rel_err"] if fd_d else None
        out.append(s)
    return out


def print_tables(summary: list[dict], rows: list[dict], best: dict, verbose: bool) -> None:
    from benchmarks.sparse_cells import CALL_COLUMNS, PREPARE_COLUMNS

    def cell(s: dict, group: str, c: str) -> str:
        v = s[group][c]
        return fmt(v) if v is not None else s["missing"].get(c, "-")

    def table(title: str, head: list[str], lines: list[list[str]], first: int = 12) -> None:
        print(f"\n{title}")
        width = [max(len(h), *(len(line[i]) for line in lines)) + 2 for i, h in enumerate(head)]
        width[0] = max(width[0], first)
        print(
            "".join(
                f"{h:<{width[0]}}" if i == 0 else f"{h:>{w}}"
                for i, (h, w) in enumerate(zip(head, width))
            )
        )
        print("-" * sum(width))
        for line in lines:
            print(
                "".join(
                    f"{v:<{width[0]}}" if i == 0 else f"{v:>{w}}"
                    for i, (v, w) in enumerate(zip(line, width))
                )
            )

    table(
        "Derivative at a new point: time / NumPy forward f(x) (lower is better)",
        ["problem", "unknowns", "nnz", *CALL_COLUMNS],
        [
            [
                s["problem"],
                f"{s['unknowns']:,}",
                f"{s['nnz']:,}",
                *(cell(s, "call", c) for c in CALL_COLUMNS),
            ]
            for s in summary
        ],
    )
    table(
        "One-time preparation: time / NumPy forward f(x); funcdiff prepare / peer",
        ["problem", *PREPARE_COLUMNS, "fd/asdex", "fd/casadi"],
        [
            [
                s["problem"],
                *(cell(s, "prepare", c) for c in PREPARE_COLUMNS),
                fmt(s["funcdiff_prepare_over"]["asdex prepare"]),
                fmt(s["funcdiff_prepare_over"]["casadi build"]),
            ]
            for s in summary
        ],
    )
    table(
        "funcdiff sparse call / peer call (below 1: funcdiff is faster)",
        ["problem", *(f"/ {c}" for c in PEER_COLUMNS)],
        [[s["problem"], *(fmt(s["funcdiff_over_peer"][c]) for c in PEER_COLUMNS)] for s in summary],
    )
    table(
        "funcdiff compiled call (compile=True) / peer call (below 1: funcdiff is faster)",
        ["problem", *(f"/ {c}" for c in PEER_COLUMNS)],
        [[s["problem"], *(fmt(s["compiled_over_peer"][c]) for c in PEER_COLUMNS)] for s in summary],
    )

    def colours(s: dict, name: str) -> str:
        c = s["colours"].get(name)
        return f"{c['ncolors']} ({c['mode']})" if c else "-"

    table(
        "Colours (derivative passes per call)",
        ["problem", "funcdiff", "asdex", "casadi", "scipy", "casadi graph", "scipy FD max rel err"],
        [
            [
                s["problem"],
                colours(s, "funcdiff"),
                colours(s, "asdex"),
                colours(s, "casadi"),
                colours(s, "scipy"),
                s["casadi_symbols"] or "-",
                f"{s['scipy_fd_max_rel_err']:.1e}"
                if s["scipy_fd_max_rel_err"] is not None
                else "-",
            ]
            for s in summary
        ],
    )
    print("\nsettings (* = the one in the table)")
    chosen = {id(r) for r in best.values()}
    for r in rows:
        if r["column"] == "numpy f":
            continue
        if r["status"] == "ok" and "median_s" in r:
            what = f"{fmt(r['ratio'])}"
            if verbose:
                what += f"  {r['median_s']:.3g} s  [{r['repeats']}x{r['number']}]"
            if "cold_prepare_s" in r and r["kind"] == "prepare" and verbose:
                what += f"  (first run {r['cold_prepare_s']:.3g} s)"
        else:
            what = f"{r['status']}: {r['error']}"
        mark = "*" if id(r) in chosen else " "
        print(f" {mark} {r['problem']:<12} {r['column']:<18} {r['setting']:<62} {what}")


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env_report = _env.prepare(args.keep_blas_env)
    started = time.perf_counter()

    import numpy as np  # noqa: F401  (after the environment is set)

    from benchmarks import _machine
    from benchmarks import sparse_problems as SP
    from benchmarks._timing import FULL, QUICK
    from benchmarks.run import (
        _contention,
        _kernel_summary,
        _loadavg,
        time_interleaved,
        write_results,
    )
    from benchmarks.sparse_cells import Libraries, build_cells

    load_start = _loadavg()
    budget = dataclasses.replace(QUICK if args.quick else FULL, clock=args.clock)
    # Preparations take from milliseconds to seconds: a few repetitions each, no more.
    prepare_budget = dataclasses.replace(
        budget,
        seconds=0.3 if args.quick else 1.0,
        min_repeats=1 if args.quick else 3,
        max_repeats=3 if args.quick else 9,
        slow_repeats=1 if args.quick else 3,
    )
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    if rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    wanted = {s.strip() for s in args.libs.split(",") if s.strip()}
    unknown = wanted - set(LIBS)
    if unknown:
        raise SystemExit(
            f"--libs: unknown libraries {sorted(unknown)}; choose from {', '.join(LIBS)}"
        )
    log(f"loading libraries ...   [{time.perf_counter() - started:.0f} s]")
    libs = Libraries(wanted)
    for name, note in libs.notes.items():
        log(f"  {name}: {note}")
    limiter = None
    try:
        import threadpoolctl

        limiter = threadpoolctl.threadpool_limits(1)
    except ImportError:
        pass

    only = {s.strip() for s in args.only.split(",") if s.strip()}
    problems = [p for p in SP.make_problems() if not only or p.key in only or p.pid in only]
    rows: list[dict] = []
    for p in problems:
        log(f"{p.key}: {p.label}   [{time.perf_counter() - started:.0f} s]")
        cells = build_cells(p, libs, wanted, args.quick)
        groups: dict[str, list] = {}
        for kind in ("call", "prepare"):
            np_row = {
                "problem": p.key,
                "column": "numpy f",
                "setting": "forward",
                "kind": kind,
                "status": "ok",
            }
            rows.append(np_row)
            groups[kind] = [(np_row, p.forward)]
        for cell in cells:
            r = check_cell(cell, p)
            rows.append(r)
            if r["status"] == "ok":
                groups[cell.kind].append((r, cell.fn))
            else:
                log(f"  {cell.column:<18} {cell.setting:<55} {r['status']}: {r['error'][:80]}")
        for kind, b in (("call", budget), ("prepare", prepare_budget)):
            t0 = time.perf_counter()
            time_interleaved(groups[kind], p, b, rounds)
            took = time.perf_counter() - t0
            log(f"  {kind}: {len(groups[kind])} callables x {rounds} rounds, {took:.1f} s")
        del cells, groups

    load_end = _loadavg()
    best = best_cells(rows)
    summary = summarise(problems, rows, best)
    contention = _contention([r for r in rows if r.get("kind") == "call"])
    elapsed = time.perf_counter() - started
    date = _dt.date.today().isoformat()
    info = _machine.machine(env_report)
    kernel = _kernel_summary(info["blas"])

    print(
        f"\nfuncdiff sparse benchmarks {date}: {info['cpu'].get('model', '?')}, 1 thread, "
        f"float64; BLAS kernel: {kernel}; clock: {args.clock}"
    )
    print(
        f"versions: numpy {info['numpy']}, "
        + ", ".join(f"{k} {v}" for k, v in libs.versions.items())
    )
    for name, note in libs.notes.items():
        print(f"{name}: {note}")
    busy = max(load_start or 0.0, load_end or 0.0)
    if busy > 0.7 or contention > 1.15:
        advice = (
            "rerun on an idle machine before quoting them"
            if args.clock == "cpu"
            else "rerun on an idle machine, or with --clock cpu, before quoting them"
        )
        print(
            f"WARNING: the machine was busy (load average {load_start} at the start, {load_end} "
            f"at the end; wall/CPU time {contention:.2f}): other processes competed for the "
            f"cores, so the timings are inflated and noisy; {advice}."
        )
    print_tables(summary, rows, best, args.verbose)
    print(f"\ntotal time {elapsed:.0f} s{' (--quick)' if args.quick else ''}")

    result = {
        "date": date,
        "timestamp": _dt.datetime.now().isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "command": " ".join(
            ["python -m benchmarks.sparse", *(argv if argv is not None else sys.argv[1:])]
        ),
        "machine": info,
        "versions": {"numpy": info["numpy"], **libs.versions},
        "skipped_libraries": libs.notes,
        "load_average": {"start": load_start, "end": load_end},
        "wall_over_cpu": contention,
        "method": {
            "cell": "median over interleaved rounds of the median seconds per call; ratio = "
            "median over rounds of cell / NumPy forward measured in the same round; peer "
            "ratios are quotients of those ratios",
            "call_budget": budget.__dict__,
            "prepare_budget": prepare_budget.__dict__,
            "rounds": rounds,
            "clock": args.clock,
            "threads": 1,
            "dtype": "float64",
        },
        "problems": {p.key: p.label for p in problems},
        "summary": summary,
        "rows": rows,
        "elapsed_s": elapsed,
    }
    write_results(result, args, HERE / "results" / f"sparse-{date}.json")
    if limiter is not None:
        limiter.restore_original_limits()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
