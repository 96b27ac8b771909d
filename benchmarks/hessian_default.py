"""The default ``hessian`` against ``vectorize=True``, the row loop and NumPy's forward.

``python -m benchmarks.hessian_default [--sizes 200 1000 2000] [--no-loop]``

For each size and function it times, side by side in one run: the default
``hessian(f, x)``, ``hessian(f, x, vectorize=True)``, the row-by-row loop (which
``strict=True`` still runs: one backward pass per row) and the NumPy forward ``f(x)``,
and prints the ratios. It also checks that the default equals ``vectorize=True``
exactly.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import funcdiff as fd
from funcdiff.functional import hessian


def sin_chain(x):
    """``sum(sin(x)**2) + sum(x[1:] * x[:-1])``."""
    return np.sum(np.sin(x) ** 2) + np.sum(x[1:] * x[:-1])


def rosenbrock(x):
    """``sum(100 (x[1:] - x[:-1]**2)**2 + (1 - x[:-1])**2)``."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


FUNCTIONS: dict[str, Callable] = {"sin_chain": sin_chain, "rosenbrock": rosenbrock}


def best_of(repeats: int, call: Callable, *args: object, **kwargs: object) -> float:
    """The shortest of ``repeats`` wall-clock times of ``call(*args, **kwargs)``, in s."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return min(times)


def _many(f: Callable, x: np.ndarray, number: int) -> None:
    for _ in range(number):
        f(x)


def forward_time(f: Callable, x: np.ndarray) -> float:
    """Seconds per call of ``f`` on the ndarray ``x`` (many calls, best of five)."""
    number = 200
    return best_of(5, _many, f, x, number) / number


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1000, 2000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-loop", action="store_true", help="skip the (slow) row loop")
    args = parser.parse_args(argv)
    header = (
        f"{'function':<11} {'n':>5} {'default s':>10} {'vect. s':>9} {'loop s':>9} "
        f"{'default/vect':>13} {'loop/default':>13} {'default/forward':>16}"
    )
    print(header)
    for name, f in FUNCTIONS.items():
        for n in args.sizes:
            x = fd.tensor(np.linspace(-1.0, 1.5, n))
            h_default = hessian(f, x)
            h_vector = hessian(f, x, vectorize=True)
            if not np.array_equal(h_default.numpy(), h_vector.numpy()):
                raise SystemExit(f"{name} n={n}: the default differs from vectorize=True")
            t_default = best_of(args.repeats, hessian, f, x)
            t_vector = best_of(args.repeats, hessian, f, x, vectorize=True)
            t_loop = float("nan") if args.no_loop else best_of(1, hessian, f, x, strict=True)
            t_forward = forward_time(f, x.numpy())
            print(
                f"{name:<11} {n:>5} {t_default:>10.4f} {t_vector:>9.4f} {t_loop:>9.3f} "
                f"{t_default / t_vector:>13.2f} {t_loop / t_default:>13.1f} "
                f"{t_default / t_forward:>16.0f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
