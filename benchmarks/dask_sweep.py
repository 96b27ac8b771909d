"""A prepared sparse Jacobian over many points: a plain loop against ``dask.delayed``.

``python -m benchmarks.dask_sweep [--quick] [--json PATH]``

``J = funcdiff.sparse.prepare_jacobian(f, x0)`` for the 1-D Brusselator
(``sparse_problems.brusselator``, 2N unknowns, 8N nonzeros), evaluated at P parameter
points (point k is the Brusselator's initial state perturbed by 5% noise of seed k, made
where it is used). Each task takes a batch of seeds and returns, per point, the infinity
norm of ``J(x)`` (reduced where it is computed: at N = 20000 a matrix of 1.3 MB per
point would otherwise cross the process boundary). Columns, timed side by side in
interleaved rounds (a ratio is the median of the per-round ratios):

* ``loop``: ``[norm(J(x)) for x in points]`` in this process;
* ``threads``: ``dask.delayed`` over the batches, the threaded scheduler, 2 threads;
* ``processes``: the same graph on ``distributed.LocalCluster(processes=True,
  n_workers=2, threads_per_worker=1)`` with distributed's default worker environment,
  ``J`` scattered to both workers once (``client.scatter(J, broadcast=True)``), so the
  workers keep it (and what it records) from one sweep to the next;
* ``processes, malloc``: the same with ``MALLOC_MMAP_THRESHOLD_`` and
  ``MALLOC_TRIM_THRESHOLD_`` raised in the workers' environment (distributed sets
  ``MALLOC_TRIM_THRESHOLD_=65536``, which makes glibc map and unmap every array over
  128 KiB afresh: each temporary of a derivative then faults in new pages).

Each ratio is ``loop`` time over the column's, wall clock; in parentheses the tasks' CPU
time over the loop's (the thread CPU time of the code computing the norms: 1.0 means the
work costs as much in a task as in the loop). On a machine with other load, the
wall-clock ratio measures the share of the cores the workers got; the CPU ratio does not
depend on it.

Rows: the prepared Jacobian evaluated eagerly (``replay=False``) and replayed
(``replay=True``). Every norm is checked against the closed-form Jacobian first, and every
scheduler's results against the loop's.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)

HERE = Path(__file__).resolve().parent
WORKERS = 2
#: Worker environment of the "processes, malloc" column (on top of distributed's own).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": 1 << 26, "MALLOC_TRIM_THRESHOLD_": 1 << 27}


def point(n: int, seed: int) -> Any:
    """Parameter point ``seed``: the Brusselator's initial state, perturbed."""
    import numpy as np

    from benchmarks.sparse_problems import brusselator_y0

    y0 = brusselator_y0(n)
    return y0 * (1.0 + 0.05 * np.random.default_rng(seed).standard_normal(y0.size))


def norms(J: Any, n: int, seeds: list[int]) -> tuple[list[float], float]:
    """The infinity norm of the Jacobian at each point (one task's work), and the CPU
    seconds of the thread that computed them."""
    start = time.thread_time()
    values = [float(abs(J(point(n, k))).sum(axis=1).max()) for k in seeds]
    return values, time.thread_time() - start


def _cluster(extra_env: dict | None) -> tuple[Any, Any]:
    """A local cluster whose workers start with ``extra_env`` in their environment.

    distributed's nanny sets ``MALLOC_TRIM_THRESHOLD_`` in this process's environment
    before it spawns a worker, and a value already there wins over its configuration:
    so the variables are set here, for the spawn, and restored after.
    """
    import distributed

    extra = {k: str(v) for k, v in (extra_env or {}).items()}
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        cluster = distributed.LocalCluster(
            processes=True,
            n_workers=WORKERS,
            threads_per_worker=1,
            dashboard_address=":0",
            silence_logs=50,
        )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    client = distributed.Client(cluster)
    seen = client.run(lambda: {k: os.environ.get(k) for k in extra})
    if any(got != extra for got in seen.values()):
        raise RuntimeError(f"the workers started with {seen}, not {extra}")
    return cluster, client


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.dask_sweep", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a smaller problem, two rounds")
    p.add_argument("--n", type=int, default=None, help="Brusselator grid points (2n unknowns)")
    p.add_argument("--points", type=int, default=64)
    p.add_argument("--batch", type=int, default=8, help="points per task")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--json", default=None, help="where to write results")
    args = p.parse_args(argv)
    _env.prepare(one_cpu=False)  # the workers are processes of their own, a CPU each
    import dask
    import numpy as np

    import funcdiff.sparse as fs
    from benchmarks.sparse_problems import NP, brusselator, brusselator_jacobian, brusselator_y0

    n = args.n or (5000 if args.quick else 20000)
    rounds = args.rounds or (2 if args.quick else 5)
    f = brusselator(NP)
    y0 = brusselator_y0(n)
    seeds = list(range(args.points))
    batches = [seeds[i : i + args.batch] for i in range(0, len(seeds), args.batch)]
    expected = [float(abs(brusselator_jacobian(point(n, k))).sum(axis=1).max()) for k in seeds]

    load_before = os.getloadavg()
    start = time.perf_counter()
    default = _cluster(None)
    tuned = _cluster(MALLOC_ENV)
    startup = (time.perf_counter() - start) / 2
    print(
        f"Brusselator n={n} ({2 * n} unknowns), {len(seeds)} points in {len(batches)} tasks "
        f"of {args.batch}; {WORKERS} workers; cluster start {startup:.2f} s each",
        flush=True,
    )
    clients = {"processes": default[1], "processes, malloc": tuned[1]}
    rows = []
    ok_all = True
    for replay in (False, True):
        J = fs.prepare_jacobian(f, y0, replay=replay)
        for k in seeds[:3]:  # verified, and recorded with replay=True
            J(point(n, k))
        scattered = {}
        first = {}
        for name, client in clients.items():
            t0 = time.perf_counter()
            [scattered[name]] = client.scatter([J], broadcast=True)
            first[name] = time.perf_counter() - t0

        def run(name: str, J: Any = J, scattered: dict = scattered) -> tuple[list, float]:
            """The norms at every point and the CPU seconds the tasks took."""
            if name == "loop":
                return norms(J, n, seeds)
            if name == "threads":
                tasks = [dask.delayed(norms)(J, n, b) for b in batches]
                out = dask.compute(*tasks, scheduler="threads", num_workers=WORKERS)
            else:
                tasks = [dask.delayed(norms)(scattered[name], n, b) for b in batches]
                out = dask.compute(*tasks, scheduler=clients[name])
            return [v for values, _ in out for v in values], sum(cpu for _, cpu in out)

        cells = ("loop", "threads", "processes", "processes, malloc")
        checked = {}
        for name in cells:  # the check doubles as the warm-up (the workers record here)
            t0 = time.perf_counter()
            got = run(name)[0]
            if name in first:
                first[name] += time.perf_counter() - t0
            checked[name] = bool(np.allclose(got, expected, rtol=1e-12)) and (
                name == "loop" or got == run("loop")[0]
            )
        ok = all(checked.values())
        ok_all &= ok
        seconds: dict[str, list[float]] = {name: [] for name in cells}
        cpu: dict[str, list[float]] = {name: [] for name in cells}
        for _ in range(rounds):
            for name in cells:
                t0 = time.perf_counter()
                cpu[name].append(run(name)[1])
                seconds[name].append(time.perf_counter() - t0)
        speedup = {
            name: statistics.median(a / b for a, b in zip(seconds["loop"], seconds[name]))
            for name in cells
        }
        # The tasks' CPU time over the loop's: the cost of running the same work as tasks
        # (1.0: none), which, unlike the wall-clock ratio, other load does not change much.
        cpu_ratio = {
            name: statistics.median(b / a for a, b in zip(cpu["loop"], cpu[name])) for name in cells
        }
        row = {
            "replay": replay,
            "checked": checked,
            "per_point_loop_s": statistics.median(seconds["loop"]) / len(seeds),
            "seconds": {k: statistics.median(v) for k, v in seconds.items()},
            "loop_over": speedup,
            "task_cpu_seconds": {k: statistics.median(v) for k, v in cpu.items()},
            "task_cpu_over_loop_cpu": cpu_ratio,
            "per_round": {"seconds": seconds, "task_cpu_seconds": cpu},
            "first_sweep_s": first,
        }
        rows.append(row)
        label = "replay=True " if replay else "replay=False"
        print(
            f"{label} {'ok' if ok else 'WRONG':5} "
            f"loop {row['per_point_loop_s'] * 1e3:.2f} ms/point  "
            + "  ".join(
                f"loop/{k} {v:.2f} (cpu {cpu_ratio[k]:.2f})"
                for k, v in speedup.items()
                if k != "loop"
            ),
            flush=True,
        )
    for cluster, client in (default, tuned):
        client.close()
        cluster.close()
    out = Path(args.json) if args.json else HERE / "results" / f"dask-sweep-{_dt.date.today()}.json"
    if not args.quick or args.json:
        import distributed

        from benchmarks._machine import machine

        header = machine(dict(_env.REPORT))
        header["dask"] = dask.__version__
        header["distributed"] = distributed.__version__
        record = {
            "machine": header,
            "command": "python -m benchmarks.dask_sweep " + " ".join(argv or sys.argv[1:]),
            "n": n,
            "points": len(seeds),
            "batch": args.batch,
            "workers": WORKERS,
            "rounds": rounds,
            "cluster_start_s": startup,
            # Other processes on the machine take cores from the workers and the loop alike.
            "load_average_before_after": [load_before, os.getloadavg()],
            "malloc_env": MALLOC_ENV,
            "rows": rows,
        }
        out.write_text(json.dumps(record, indent=1, default=str))
        print(f"wrote {out}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
