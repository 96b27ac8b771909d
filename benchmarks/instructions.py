"""Machine-independent per-call cost: CPU instructions counted by valgrind's callgrind.

``python -m benchmarks.instructions [B5 B7] [--calls N]``

Wall-clock times on a shared virtual machine drift by a factor of two within minutes,
which hides changes of a few percent in funcdiff's per-operation overhead. The number
of instructions a call executes does not drift: this script runs each workload under
``valgrind --tool=callgrind``, counts the instructions of ``--calls`` calls only (not
the imports or the warm-up), and prints them next to the plain NumPy forward of the
same function, counted the same way. Needs ``valgrind`` on the PATH; each workload
takes about a minute, most of it Python's start-up under valgrind.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402

#: problem -> (workloads, operations per call for per-op figures)
PROBLEMS: dict[str, tuple[tuple[str, ...], int]] = {
    "B5": (("B5-numpy", "B5-backward", "B5-grad"), 1000),
    # Where a B5 operation's instructions go: the Tensor call without recording, the
    # call that records (the graph freed unused), and the whole value and gradient.
    "B5-parts": (("B5-numpy", "B5-no-grad", "B5-record", "B5-backward"), 1000),
    "B7": (("B7-numpy", "B7-forward-mode", "B7-reverse-mode"), 1),
}
#: Counting starts and stops with this C function: the measured calls run inside it.
_TOGGLE = "starmap_next"


def workload(name: str) -> tuple[Callable[[], Any], list[np.ndarray]]:
    """The call that workload ``name`` counts, and the arrays its result must equal."""
    import numpy as np  # after _env.prepare(): the thread settings must come first

    import funcdiff as fd
    from benchmarks import problems as P
    from funcdiff import functional as F

    rng = np.random.default_rng(0)
    if name.startswith("B5"):
        x = rng.uniform(-1.0, 1.0, 10)
        c, d = rng.uniform(0.95, 1.05, 10), rng.uniform(-0.01, 0.01, 10)
        f = P.tiny_chain(np, c, d)
        value, gradient = P.chain_reference(c, d, x)
        if name == "B5-numpy":
            return (lambda: f(x)), [value]
        xt = fd.tensor(x, requires_grad=True)
        if name == "B5-no-grad":

            def no_grad_call() -> Any:
                with fd.no_grad():
                    return f(xt)

            return no_grad_call, [value]
        if name == "B5-record":
            return (lambda: f(xt)), [value]
        if name == "B5-grad":
            return (lambda: fd.grad(f(xt), xt)), [gradient]

        def backward_call() -> Any:
            xt.grad = None
            f(xt).backward()
            return xt.grad

        return backward_call, [gradient]
    f7 = P.three_two(np)
    arrays = [rng.standard_normal(5) for _ in range(3)]
    if name == "B7-numpy":
        return (lambda: f7(*arrays)), [np.asarray(o) for o in f7(*arrays)]
    xs = tuple(fd.tensor(a) for a in arrays)
    strategy = "forward-mode" if name == "B7-forward-mode" else "reverse-mode"
    call = lambda: F.jacobian(f7, xs, vectorize=True, strategy=strategy)  # noqa: E731
    return call, P.three_two_reference(*arrays)


def run_worker(name: str, calls: int) -> None:
    """Check the answer, warm up, then make ``calls`` calls inside ``itertools.starmap``
    (the only calls that are counted)."""
    from benchmarks._common import compare, to_arrays

    call, want = workload(name)
    problem = compare(to_arrays(call()), want, rtol=1e-9, atol=1e-12)
    if problem:
        raise SystemExit(f"{name} gave a wrong answer: {problem}")
    for _ in range(2):
        call()
    list(itertools.starmap(call, [()] * calls))


_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def parse_collected(stderr: str) -> int:
    """The instruction count that callgrind reports at exit ("Collected : N")."""
    found = _COLLECTED.findall(stderr)
    if not found:
        raise RuntimeError(f"no 'Collected' line in callgrind's output:\n{stderr[-2000:]}")
    return int(found[-1])


def count(name: str, calls: int) -> int:
    """Instructions of ``calls`` calls of workload ``name``, under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            f"--toggle-collect={_TOGGLE}",
            f"--callgrind-out-file={Path(tmp) / 'callgrind.out'}",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--worker",
            name,
            "--calls",
            str(calls),
        ]
        root = Path(__file__).resolve().parent.parent
        # A fixed hash seed: dict and set layouts, hence the counts, repeat exactly.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed under valgrind:\n{done.stderr[-2000:]}")
    return parse_collected(done.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__)
    p.add_argument("problems", nargs="*", help=f"any of {', '.join(PROBLEMS)} (default: all)")
    p.add_argument("--calls", type=int, default=10, help="counted calls per workload")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    _env.prepare()
    if args.worker:
        run_worker(args.worker, args.calls)
        return 0
    unknown = [name for name in args.problems if name not in PROBLEMS]
    if unknown:
        p.error(f"unknown problems {unknown}; choose from {', '.join(PROBLEMS)}")
    if shutil.which("valgrind") is None:
        print("valgrind is not on the PATH (Debian: apt-get install valgrind); nothing counted")
        return 1
    problems = args.problems or list(PROBLEMS)
    names = list(dict.fromkeys(name for problem in problems for name in PROBLEMS[problem][0]))
    # One valgrind per core: each is single-threaded, and the counts do not depend on
    # what else runs.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(names, pool.map(lambda n: count(n, args.calls), names)))
    for problem in problems:
        workloads, ops = PROBLEMS[problem]
        unit = "per op" if ops > 1 else "per call"
        numpy_forward = counts[workloads[0]] / args.calls / ops
        for name in workloads:
            per = counts[name] / args.calls / ops
            ratio = per / numpy_forward
            print(f"{name:18s} {per:12,.0f} instructions {unit}  ({ratio:.1f}x the NumPy forward)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
