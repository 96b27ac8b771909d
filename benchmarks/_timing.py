"""Adaptive timing: median seconds per call over repeats sized to a time budget; and
what every script shares: its command line, peak memory, and the results JSON."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import json
import math
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Timing:
    """Per-call statistics of one measured callable (seconds)."""

    median: float
    best: float
    q1: float
    q3: float
    repeats: int
    number: int
    cpu_median: float
    wall_median: float
    gc_share: float = 0.0  # share of the timed wall-clock time spent in garbage collection

    def as_dict(self) -> dict[str, float | int]:
        return {
            "median_s": self.median,
            "min_s": self.best,
            "q1_s": self.q1,
            "q3_s": self.q3,
            "repeats": self.repeats,
            "number": self.number,
            "cpu_median_s": self.cpu_median,
            "wall_median_s": self.wall_median,
            "gc_share": self.gc_share,
        }


@dataclass(frozen=True)
class Budget:
    """How long to spend on one cell.

    ``seconds`` is the target total; ``block`` the shortest timed block (short calls are
    looped ``number`` times per block so the clock's resolution does not matter);
    ``min_repeats`` applies to calls shorter than ``slow``, ``slow_repeats`` to longer ones.
    ``clock`` picks the statistic reported as ``median``: wall-clock time, or the process
    CPU time, which ignores time spent waiting for a core (everything runs on one thread,
    so on an idle machine the two agree). ``gc_freeze`` moves every object alive before the
    timing into the collector's permanent generation, so that full collections triggered
    by the timed code walk only what that code allocates, not the whole process's heap.
    """

    seconds: float = 0.4
    block: float = 0.002
    min_repeats: int = 5
    max_repeats: int = 41
    slow: float = 0.25
    slow_repeats: int = 3
    clock: str = "wall"  # or "cpu": process CPU time, steadier on a shared machine
    gc_freeze: bool = True  # gc.freeze() before timing: full collections skip older objects


FULL = Budget()
QUICK = Budget(seconds=0.06, block=0.001, min_repeats=3, max_repeats=15, slow_repeats=1)


def measure(fn: Callable[[], object], budget: Budget = FULL) -> Timing:
    """Time ``fn()``: one probe call sizes the loop, then the median of the repeats.

    The caller has already run ``fn`` once (the correctness check), so caches, JIT
    compilation and first-touch page faults are outside the timed region. Wall-clock
    time is the measure; the process CPU time of the same blocks is kept alongside,
    because on a busy machine the two part ways (wall >> CPU means the run was
    competing for a core).
    """
    gc.collect()
    if budget.gc_freeze:
        gc.freeze()
    c0 = time.process_time()
    t0 = time.perf_counter()
    fn()
    probe = time.perf_counter() - t0
    probe_cpu = time.process_time() - c0
    number = 1
    if probe < budget.block:
        number = max(1, math.ceil(budget.block / max(probe, 1e-7)))
    per_block = probe * number
    floor = budget.min_repeats if probe < budget.slow else budget.slow_repeats
    repeats = int(min(budget.max_repeats, max(floor, budget.seconds // max(per_block, 1e-9))))
    if probe >= budget.slow and budget.slow_repeats == 1:
        # A slow call in quick mode: the probe is the measurement.
        t = probe_cpu if budget.clock == "cpu" else probe
        return Timing(t, t, t, t, 1, 1, probe_cpu, probe)
    wall, cpu = [], []
    perf, proc = time.perf_counter, time.process_time
    in_gc = _GcClock()
    gc.callbacks.append(in_gc)
    try:
        for _ in range(repeats):
            c0 = proc()
            t0 = perf()
            for _ in range(number):
                fn()
            wall.append((perf() - t0) / number)
            cpu.append((proc() - c0) / number)
    finally:
        gc.callbacks.remove(in_gc)
    samples = cpu if budget.clock == "cpu" else wall
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else samples * 3
    return Timing(
        statistics.median(samples),
        min(samples),
        q[0],
        q[2],
        repeats,
        number,
        statistics.median(cpu),
        statistics.median(wall),
        in_gc.total / (sum(wall) * number) if wall else 0.0,
    )


def combine(rounds: list[Timing]) -> Timing:
    """One Timing from the measurements of the same callable in several rounds.

    The median is the median of the rounds' medians, so a round that ran while the
    machine was slower moves it less than pooling the samples would.
    """
    if len(rounds) == 1:
        return rounds[0]
    median = statistics.median
    return Timing(
        median([t.median for t in rounds]),
        min(t.best for t in rounds),
        median([t.q1 for t in rounds]),
        median([t.q3 for t in rounds]),
        sum(t.repeats for t in rounds),
        rounds[0].number,
        median([t.cpu_median for t in rounds]),
        median([t.wall_median for t in rounds]),
        statistics.fmean(t.gc_share for t in rounds),
    )


def per_round(budget: Budget, rounds: int) -> Budget:
    """The share of ``budget`` that one of ``rounds`` interleaved rounds gets."""
    if rounds <= 1:
        return budget
    return dataclasses.replace(
        budget,
        seconds=budget.seconds / rounds,
        min_repeats=max(1, math.ceil(budget.min_repeats / rounds)),
        max_repeats=max(1, math.ceil(budget.max_repeats / rounds)),
        slow_repeats=max(1, budget.slow_repeats // rounds),
    )


class _GcClock:
    """A ``gc.callbacks`` entry that adds up the wall-clock time of collections."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._start


# ---------------------------------------------------------------- scripts


def parse_arguments(
    prog: str,
    description: str | None,
    quick: str,
    argv: list[str] | None,
    flags: dict[str, str] | None = None,
) -> argparse.Namespace:
    """The options every benchmark script takes: ``--quick`` (described by ``quick``),
    ``--rounds N`` and ``--json PATH``, plus the script's own switches ``flags``
    (``{"--no-compile": "help text"}``)."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{prog}", description=description)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", default=None, help="where to write results")
    for flag, help_text in (flags or {}).items():
        parser.add_argument(flag, action="store_true", help=help_text)
    return parser.parse_args(argv)


def write_results(
    name: str, args: argparse.Namespace, record: dict, extra: dict | None = None
) -> Path | None:
    """Write ``record`` with the machine header (plus ``extra`` entries) to
    ``--json`` or ``results/NAME-DATE.json``; a ``--quick`` run without ``--json``
    writes nothing."""
    if args.quick and not args.json:
        return None
    from benchmarks import _env
    from benchmarks._machine import machine

    header = machine(dict(_env.REPORT))
    header.update(extra or {})
    out = Path(args.json) if args.json else RESULTS / f"{name}-{datetime.date.today()}.json"
    out.write_text(json.dumps({"machine": header, **record}, indent=1, default=str))
    print(f"wrote {out}")
    return out


def peak_memory(call: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``call(*args)`` and the peak of its Python allocations (tracemalloc) in MB."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = call(*args)
        return out, tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
