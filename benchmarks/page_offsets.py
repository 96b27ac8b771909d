"""How a compiled kernel's speed depends on where its inputs start within a page.

``python -m benchmarks.page_offsets [--n 1000000] [--rounds 7]``

XLA reads an argument in place only when it starts on a 64-byte boundary; NumPy maps a
large array 16 bytes past a page boundary, so funcdiff hands such an argument over
widened to the boundary before it, and the kernel compiled for that shift slices it back
(``funcdiff.replay.jit._handover``). This times B4, one replayed and compiled
Hessian-vector product of Rosenbrock (``replay.hvp`` with ``compile=True``), with ``x``
and ``v`` cut from one buffer at chosen offsets within their pages, as multiples of the
NumPy forward of the same ``x`` (wall clock, one CPU, medians of ``--rounds`` blocks).
It needs the ``funcdiff[jit]`` extra.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)

#: (x's offset, v's offset) in bytes past a page boundary.
LAYOUTS = ((0, 0), (16, 16), (48, 48), (16, 1040), (16, 24), (16, 48), (0, 48), (16, 816))
PAGE = 4096


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    _env.prepare()
    import numpy as np

    from funcdiff import replay

    def rosen(v: np.ndarray) -> float:
        return np.sum(100.0 * (v[1:] - v[:-1] ** 2.0) ** 2.0 + (1 - v[:-1]) ** 2.0)

    n = args.n
    rng = np.random.default_rng(0)
    xs, vs = rng.uniform(-2.0, 2.0, n), rng.standard_normal(n)
    span = (-(-n * 8 // PAGE) + 2) * PAGE  # whole pages: v's offset is its own
    memory = np.empty(2 * span + PAGE, dtype=np.uint8)
    first = -memory.ctypes.data % PAGE  # the first page boundary inside the buffer

    def placed(offset: int, start: int, values: np.ndarray) -> np.ndarray:
        at = first + start + offset
        array = memory[at : at + n * 8].view(np.float64)
        array[...] = values
        return array

    def best(fn: object) -> float:
        times = timeit.repeat(fn, number=10, repeat=args.rounds)  # type: ignore[arg-type]
        return sorted(times)[len(times) // 2] / 10

    print("x offset  v offset  compiled hvp / f")
    for x_offset, v_offset in LAYOUTS:
        x = placed(x_offset, 0, xs)
        v = placed(v_offset, span, vs)
        hvp = replay.hvp(rosen, compile=True)
        for _ in range(4):  # record, validate and compile, then run the kernels
            hvp(x, v)
        ratio = best(lambda h=hvp, x=x, v=v: h(x, v)) / best(lambda x=x: rosen(x))
        print(f"{x.ctypes.data % PAGE:8d}  {v.ctypes.data % PAGE:8d}  {ratio:16.2f}")


if __name__ == "__main__":
    main()
