"""Two lowerings of a replayed program, side by side: XLA through JAX, and numba loops.

``python -m benchmarks.compile_backends [--json PATH]``

The JAX lowering is the one funcdiff ships (``compile=True``, :mod:`funcdiff.replay.jit`).
The numba lowering is a small prototype kept here only for the comparison: runs of
elementwise ufuncs on arrays of one shape become one ``@numba.njit`` loop each (scalar
code per element); everything else (slices, rolls, concatenations, sums) stays a NumPy
call. That is the "regions" variant of the design study, without index maps.

Rows: B5 (value and gradient through 1000 ops on size-10 arrays) and the Brusselator's
compressed Jacobian pass at N = 1e5 (the recorded program of
``prepare_jacobian(replay=True)``, without the decompression). Each cell is process CPU
time, as a multiple of the NumPy forward of the same function measured in the same
round; the compile column is the wall time of lowering and compiling the program once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402  (imports nothing heavy)

HERE = Path(__file__).resolve().parent


def _cpu(fn: Any, budget: float = 0.2) -> float:
    fn()
    count, start = 0, time.process_time()
    while time.process_time() - start < budget:
        fn()
        count += 1
    return (time.process_time() - start) / count


def numba_lower(program: Any) -> tuple[Any, float, int]:
    """The program with its elementwise runs as numba loops (compiled at once)."""
    import numba
    import numpy as np

    from funcdiff.replay import program as P
    from funcdiff.replay._codegen import compile_program

    ops = P._OPCODES
    specs = program.specs
    unary = {np.negative: "-({})", np.sin: "math.sin({})", np.cos: "math.cos({})"}
    unary |= {np.tanh: "math.tanh({})", np.exp: "math.exp({})"}
    binary = {np.add: "({} + {})", np.subtract: "({} - {})", np.multiply: "({} * {})"}
    binary |= {np.divide: "({} / {})"}

    def elementwise(ins: tuple) -> tuple | None:
        op = ins[0]
        if op == ops["unary"] and ins[1] in unary:
            return (ins[-1], unary[ins[1]], [("s", ins[2])])
        if op in (ops["binary"], ops["right"], ops["left"]) and ins[1] in binary:
            a = ("s", ins[2]) if op in (ops["binary"], ops["right"]) else ("c", ins[2])
            b = ("s", ins[3]) if op in (ops["binary"], ops["left"]) else ("c", ins[3])
            return (ins[-1], binary[ins[1]], [a, b])
        return None

    from funcdiff.replay.jit._lower import _Program

    last: dict[int, int] = {}
    for k, reads in enumerate(_Program(program.code, ops).reads):
        for slot in reads:
            last[slot] = k
    final = set(P._flat(program.outputs))
    new_code: list = []
    run: list = []
    kernels = 0

    def close(end: int) -> None:
        nonlocal run, kernels
        if len(run) < 2:
            new_code.extend(ins for _, ins in run)
            run = []
            return
        made = {e[0] for e, _ in run}
        reads = []
        consts: list = []
        for e, _ in run:
            for kind, v in e[2]:
                if kind == "s" and v not in made and v not in reads:
                    reads.append(v)
                elif kind == "c" and np.ndim(v) and not any(v is c for c in consts):
                    consts.append(v)
        outs = [s for s in made if s in final or last.get(s, -1) >= end]
        params = [f"a{s}" for s in reads] + [f"c{j}" for j in range(len(consts))]
        lines = [f"def k({', '.join(params + [f'o{s}' for s in outs])}):"]
        lines.append(f"    for i in range(o{outs[0]}.size):")
        lines += [f"        v{s} = a{s}[i]" for s in reads]

        def operand(kind: str, v: Any) -> str:
            if kind == "s":
                return f"v{v}"
            if np.ndim(v):
                return f"c{next(j for j, c in enumerate(consts) if c is v)}[i]"
            return repr(float(v))

        for e, _ in run:
            args = [operand(kind, v) for kind, v in e[2]]
            lines.append(f"        v{e[0]} = {e[1].format(*args)}")
        lines += [f"        o{s}[i] = v{s}" for s in outs]
        scope: dict = {"math": __import__("math")}
        exec("\n".join(lines), scope)  # noqa: S102  (the prototype's generated loop)
        kernel = numba.njit(cache=False, fastmath=False)(scope["k"])
        shape = specs[outs[0]][0]

        flat = [np.ascontiguousarray(c, dtype=float).reshape(-1) for c in consts]

        def call(*arrays: Any, kernel: Any = kernel, n: int = len(outs), cs: Any = flat) -> tuple:
            results = tuple(np.empty(shape) for _ in range(n))
            kernel(
                *(np.ascontiguousarray(a).reshape(-1) for a in arrays),
                *cs,
                *(r.reshape(-1) for r in results),
            )
            return results

        slot = ops["slot"]
        new_code.append((ops["general"], call, tuple(slot(s) for s in reads), {}, tuple(outs)))
        kernels += 1
        run = []

    shape = None
    for k, ins in enumerate(program.code):
        e = elementwise(ins)
        ok = e is not None and all(
            (specs[v][0] == specs[e[0]][0] and specs[v][1] == np.float64)
            if kind == "s"
            else (np.ndim(v) == 0 or np.shape(v) == specs[e[0]][0])
            for kind, v in e[2]
        )
        if ok and (not run or specs[e[0]][0] == shape):
            run.append((e, ins))
            shape = specs[e[0]][0]
            continue
        close(k)
        if ok:
            run.append((e, ins))
            shape = specs[e[0]][0]
        else:
            new_code.append(ins)
    close(len(program.code))
    fn = compile_program(new_code, program.inputs, program.template, program.outputs, ops)
    start = time.perf_counter()
    fn(*program.example)  # numba compiles at the first call
    return fn, time.perf_counter() - start, kernels


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compile_backends", description=__doc__)
    p.add_argument("--json", default=None, help="where to write results")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    env_report = _env.prepare()
    import numpy as np

    import funcdiff.replay as replay
    import funcdiff.sparse as fs
    from benchmarks import _machine
    from benchmarks.problems import tiny_chain
    from benchmarks.sparse_problems import brusselator, brusselator_y0

    rng = np.random.default_rng(0)
    x5 = rng.uniform(-1.0, 1.0, 10)
    f5 = tiny_chain(np, rng.uniform(0.95, 1.05, 10), rng.uniform(-0.01, 0.01, 10))
    y = brusselator_y0(100_000)
    fb = brusselator(np)

    def b5_program(compile: Any) -> tuple[Any, Any, float]:
        vg = replay.value_and_grad(f5, compile=compile)
        start = time.perf_counter()
        vg(x5)
        first = time.perf_counter() - start
        (program,) = [q for ps in vg._cache.values() for q in ps]
        return program, [x5], first

    def bruss_program(compile: Any) -> tuple[Any, Any, float]:
        J = fs.prepare_jacobian(fb, y, replay=True, compile=compile)
        J(y)
        start = time.perf_counter()
        J(y)
        first = time.perf_counter() - start
        (program,) = [q for q in J._programs.values() if q is not None]
        return program, [y], first

    rows = []
    for name, make, forward in (
        ("B5 value+grad", b5_program, lambda: f5(x5)),
        ("Brusselator N=1e5, compressed pass", bruss_program, lambda: fb(y)),
    ):
        plain, arrays, _ = make(False)
        jaxed, _, jax_first = make(True)
        jaxed.run(arrays)
        jax_compile = jaxed.info["jit"]["seconds"] if jaxed.info["jit"] else None
        jaxed.example = arrays
        numba_fn, numba_compile, numba_kernels = numba_lower(jaxed)
        want = plain.run(arrays)
        got_jax = jaxed.run(arrays)
        got_numba = numba_fn(*arrays)

        def err(got: Any, want: Any = want) -> float:
            pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
            return max(
                float(np.abs(np.asarray(g) - w).max() / max(np.abs(w).max(), 1e-300))
                for g, w in pairs
            )

        cells = {
            "numpy f": forward,
            "replay (NumPy calls)": lambda p=plain, a=arrays: p.run(a),
            "jax/xla": lambda p=jaxed, a=arrays: p.run(a),
            "numba regions": lambda fn=numba_fn, a=arrays: fn(*a),
        }
        per: dict[str, list[float]] = {k: [] for k in cells}
        for _ in range(args.rounds):
            for k, fn in cells.items():
                per[k].append(_cpu(fn))
        ratio = {k: statistics.median(t / f for t, f in zip(per[k], per["numpy f"])) for k in per}
        row = {
            "problem": name,
            "x_numpy_f": ratio,
            "compile_s": {"jax/xla": jax_compile, "numba regions": numba_compile},
            "first_call_s": {"jax/xla": jax_first},
            "max_rel_err": {"jax/xla": err(got_jax), "numba regions": err(got_numba)},
            "kernels": {"jax/xla": jaxed.info["jit"]["kernels"], "numba regions": numba_kernels},
        }
        rows.append(row)
        print(
            f"{name:36} "
            + "  ".join(f"{k} {v:6.2f}x" for k, v in ratio.items())
            + f"  compile jax {jax_compile:.2f}s numba {numba_compile:.2f}s"
            + f"  err jax {row['max_rel_err']['jax/xla']:.1e}"
            + f" numba {row['max_rel_err']['numba regions']:.1e}",
            flush=True,
        )
    if args.json:
        payload = {"machine": _machine.machine(env_report), "rows": rows, "rounds": args.rounds}
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
