"""What ``import funcdiff`` costs next to the libraries it cannot avoid.

``python -m benchmarks.import_time [--runs N] [--statement STMT]``

Every command-line call and every worker process pays the import. funcdiff needs NumPy and
``scipy.special`` (its rules are keyed by their functions), so the figure is the ratio of
``import funcdiff`` to ``import numpy, scipy.special``, each timed in a fresh interpreter.
The two are run alternately, ``--runs`` times each, so that a change in the machine's load
moves both sides alike; the ratio is that of the medians. A shared machine makes single
runs drift by tens of percent; the medians of alternating runs are stable to a few.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "import numpy, scipy.special"
#: Times the statement alone, after the interpreter has started.
_PROGRAM = (
    "import sys, time; sys.path.insert(0, {root!r}); "
    "t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
)


def seconds(statement: str) -> float:
    """Seconds that ``statement`` takes in a fresh interpreter (start-up not counted)."""
    program = _PROGRAM.format(root=str(ROOT), statement=statement)
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def ratio(statement: str = "import funcdiff", runs: int = 7) -> tuple[float, float, float]:
    """Median seconds of ``statement``, of the baseline, and their ratio, from alternating runs."""
    measured, baseline = [], []
    for _ in range(runs):
        baseline.append(seconds(BASELINE))
        measured.append(seconds(statement))
    m, b = statistics.median(measured), statistics.median(baseline)
    return m, b, m / b


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each side (default 7)")
    parser.add_argument("--statement", default="import funcdiff", help="what to time")
    args = parser.parse_args(argv)
    m, b, r = ratio(args.statement, args.runs)
    print(f"{args.statement}: {m * 1e3:.0f} ms (median of {args.runs})")
    print(f"{BASELINE}: {b * 1e3:.0f} ms (median of {args.runs})")
    print(f"ratio: {r:.2f}")


if __name__ == "__main__":
    main()
