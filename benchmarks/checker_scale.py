"""Fast-mode derivative checks at scale: evaluations and time against the input's size.

``python -m benchmarks.checker_scale`` checks ``f(x) = sum(sin(x)**2)`` on
``linspace(-2, 2, n)`` with ``check_derivatives(..., fast_mode=True)`` at n = 10^3,
10^4, 10^5 (``--sizes`` to change), three ways: funcdiff's gradient, a correct
hand-written gradient (``jac=``), and a hand-written gradient with one wrong element
(which fast mode must name). Each row gives the function evaluations, the seconds of
the check, and the ratio of that time to one evaluation of ``f`` measured in the same
run (absolute times drift with the machine; the ratio much less).
``--write PATH`` also saves the table as text.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np

from funcdiff.check import check_derivatives


def loss(x: np.ndarray) -> np.ndarray:
    return np.sum(np.sin(x) ** 2)


def loss_grad(x: np.ndarray) -> np.ndarray:
    return np.sin(2.0 * x)


def _one_wrong(k: int) -> Callable[[np.ndarray], np.ndarray]:
    def wrong(x: np.ndarray) -> np.ndarray:
        g = loss_grad(x)
        g[k] *= 1.01
        return g

    return wrong


def _seconds_per_call(func: Callable[[], object], budget: float = 0.2) -> float:
    """Median seconds per call over repeats that fill about ``budget`` seconds."""
    func()
    start = time.perf_counter()
    func()
    once = max(time.perf_counter() - start, 1e-7)
    reps = max(5, min(1000, int(budget / once)))
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def run(sizes: Sequence[int]) -> list[str]:
    header = (
        f"{'n':>8}  {'derivative checked':<28}{'verdict':<9}{'worst element':<16}"
        f"{'evaluations':>12}{'seconds':>10}{'check / f(x)':>14}"
    )
    lines = [header, "-" * len(header)]
    for n in sizes:
        x = np.linspace(-2.0, 2.0, n)
        k = n // 3 + 7
        one_call = _seconds_per_call(lambda x=x: loss(x))
        cases = [
            ("funcdiff's gradient", None),
            ("jac=, correct", loss_grad),
            (f"jac=, x[{k}] 1% off", _one_wrong(k)),
        ]
        for label, jac in cases:
            start = time.perf_counter()
            report = check_derivatives(loss, x, fast_mode=True, jac=jac)
            seconds = time.perf_counter() - start
            (pair,) = report.pairs
            worst = f"x[{pair.worst.input_index[0]}]" if pair.worst else "-"
            lines.append(
                f"{n:>8}  {label:<28}{report.verdict:<9}{worst:<16}{report.nfev:>12}"
                f"{seconds:>10.3f}{seconds / one_call:>14.0f}"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checker_scale", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**3, 10**4, 10**5])
    parser.add_argument("--write", metavar="PATH", default=None, help="also save the table")
    args = parser.parse_args(argv)
    lines = run(args.sizes)
    text = "\n".join(
        ["check_derivatives(sum(sin(x)**2), linspace(-2, 2, n), fast_mode=True)", ""] + lines
    )
    print(text)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
