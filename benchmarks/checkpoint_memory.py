"""Peak memory of a backward pass with and without ``funcdiff.checkpoint``.

``python -m benchmarks.checkpoint_memory [--steps 50] [--n 100000] [--write PATH]``

A time-stepping loop, ``u <- u + dt * (tanh(u * w) - u**3 / 3 + sin(u) * cos(u))``,
over ``--steps`` steps on arrays of ``--n`` float64 elements, then ``sum(u**2)``. Each
step saves several arrays for backward; checkpointing each step keeps only its input
and recomputes the step in backward. ``tracemalloc`` (which sees NumPy's allocations)
measures the peak from the start of the forward pass to the end of backward, and the
gradients of both runs are compared (they must agree to rounding).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import funcdiff as fd  # noqa: E402


def _step(u: fd.Tensor, w: fd.Tensor, dt: float) -> fd.Tensor:
    return u + dt * (np.tanh(u * w) - u**3 / 3.0 + np.sin(u) * np.cos(u))


def run(steps: int, n: int, checkpointed: bool) -> tuple[float, float, np.ndarray]:
    """``(peak MiB, seconds, gradient)`` of one forward and backward pass."""
    rng = np.random.default_rng(0)
    x = fd.tensor(rng.uniform(-1.0, 1.0, n), requires_grad=True)
    w = fd.tensor(rng.uniform(0.5, 1.5, n), requires_grad=True)
    tracemalloc.start()
    start = time.perf_counter()
    u = x
    for _ in range(steps):
        u = fd.checkpoint(_step, u, w, 0.01) if checkpointed else _step(u, w, 0.01)
    (u**2).sum().backward()
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, seconds, np.concatenate([x.grad.data, w.grad.data])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint_memory")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--write", metavar="PATH", default=None, help="also save the table")
    args = parser.parse_args(argv)
    plain = run(args.steps, args.n, False)
    ckpt = run(args.steps, args.n, True)
    agree = np.allclose(plain[2], ckpt[2], rtol=1e-12, atol=1e-14)
    lines = [
        f"{args.steps}-step loop on {args.n} float64 elements: forward + backward, "
        "tracemalloc peak",
        "",
        f"{'':<16}{'peak MiB':>10}{'time ratio':>12}",
        f"{'plain':<16}{plain[0]:>10.1f}{1.0:>12.2f}",
        f"{'checkpointed':<16}{ckpt[0]:>10.1f}{ckpt[1] / plain[1]:>12.2f}",
        "",
        f"peak memory ratio (checkpointed / plain): {ckpt[0] / plain[0]:.2f}; "
        f"gradients agree: {agree}",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        Path(args.write).write_text(text + "\n", encoding="utf-8")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
