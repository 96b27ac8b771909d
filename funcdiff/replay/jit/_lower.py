"""Lowering a recorded program's NumPy calls to XLA kernels through JAX.

The program is cut into *segments*: maximal runs of instructions that JAX can run on
float64 (or boolean) values. Each segment is traced once into one ``jax.jit`` function
of the values it reads and compiled by XLA, which fuses its elementwise operations,
slices, concatenations and reductions into a few loops. The segment then takes the
place of its instructions as one call in the program, and everything else (guards,
in-place writes, functions without a JAX namesake, integer and complex values) stays
the NumPy call it was. Guards inside a segment are checked right after it: a segment's
shapes are fixed, so it cannot fail on the values of another path before its guards
say so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from funcdiff.replay.jit._arrays import Traced, Unsupported, unwrap
from funcdiff.rules.indexing import index_add

# The recorded function is the rule's own (the public name dispatches on Tensors).
_INDEX_ADD = getattr(index_add, "__wrapped__", index_add)

__all__ = ["lower", "x64"]

#: Values a segment computes with; anything else stays NumPy (its promotion rules and
#: integer semantics differ from JAX's).
DTYPES = frozenset({np.dtype(np.float64), np.dtype(np.bool_)})
#: Constant arrays up to this size are folded into the kernel; larger ones are
#: arguments, converted once.
FOLD_SIZE = 64
#: Segments with fewer instructions stay NumPy (a kernel call costs a few microseconds).
MIN_SEGMENT = 2
#: How many instructions may fail to lower before the rest of the program stays NumPy.
MAX_FAILURES = 64


class _Fail(Exception):
    def __init__(self, position: int, why: str) -> None:
        super().__init__(f"instruction {position}: {why}")
        self.position = position
        self.why = why


@contextlib.contextmanager
def x64() -> Iterator[None]:
    """float64 inside JAX for this block only (no global setting changes)."""
    import jax

    with jax.enable_x64(True):
        yield


def _slots(template: Any, slot_type: Any) -> list[int]:
    if type(template) is slot_type:
        return [template.index]
    if type(template) in (list, tuple):
        return [s for t in template for s in _slots(t, slot_type)]
    if isinstance(template, dict):
        return [s for t in template.values() for s in _slots(t, slot_type)]
    return []


def _fill(template: Any, env: dict, slot_type: Any) -> Any:
    if type(template) is slot_type:
        return Traced(env[template.index])
    if type(template) in (list, tuple):
        return type(template)(_fill(t, env, slot_type) for t in template)
    return template


class _Program:
    """A program's instructions in one form: ``(kind, fn, args, kwargs, outs)``."""

    def __init__(self, code: list, ops: dict) -> None:
        self.ops = ops
        slot = ops["slot"]
        self.calls: list[tuple | None] = []
        self.reads: list[list[int]] = []
        for ins in code:
            op = ins[0]
            call: tuple | None
            if op == ops["unary"]:
                call = (ins[1], (slot(ins[2]),), {}, (ins[-1],))
            elif op == ops["binary"]:
                call = (ins[1], (slot(ins[2]), slot(ins[3])), {}, (ins[-1],))
            elif op == ops["right"]:
                call = (ins[1], (slot(ins[2]), ins[3]), {}, (ins[-1],))
            elif op == ops["left"]:
                call = (ins[1], (ins[2], slot(ins[3])), {}, (ins[-1],))
            elif op == ops["general"]:
                call = (ins[1], ins[2], ins[3], tuple(ins[4]))
            elif op == ops["copy"]:
                call = (None, (slot(ins[1]),), {}, (ins[2],))
            else:
                call = None
            self.calls.append(call)
            if call is not None:
                self.reads.append(_slots(call[1], slot) + _slots(call[2], slot))
            elif op == ops["guard"]:
                self.reads.append([ins[1]])
            elif op == ops["copy_into"]:
                self.reads.append([ins[1], ins[2]])
            elif op == ops["set_item"]:
                self.reads.append([ins[1]] + _slots(ins[2], slot) + _slots(ins[3], slot))
            else:
                self.reads.append([ins[2]] + _slots(ins[3], slot))


def _candidates(code: list, prog: _Program, specs: list, template: list) -> list[bool]:
    """Which instructions a segment may hold, from their kinds and dtypes alone."""
    ops = prog.ops
    barriers = [k for k, ins in enumerate(code) if ins[0] in ops["inplace_kinds"]]
    # An in-place write changes every view of its target taken before, so everything
    # up to the last one runs as eagerly, on NumPy's arrays.
    start = barriers[-1] + 1 if barriers else 0
    out = [False] * len(code)
    for k in range(start, len(code)):
        call = prog.calls[k]
        if code[k][0] == ops["guard"]:
            out[k] = True
            continue
        if call is None:
            continue
        fn, _, _, outs = call
        if isinstance(fn, np.ufunc) and getattr(np, fn.__name__, None) is not fn:
            continue  # a SciPy ufunc: no JAX namesake
        slots = list(outs) + prog.reads[k]
        if all(specs[s] is not None and specs[s][1] in DTYPES for s in slots):
            out[k] = True
    return out


def _runs(flags: list[bool], guard: list[bool]) -> list[tuple[int, int]]:
    runs, start = [], None
    for k, ok in enumerate([*flags, False]):
        if ok and start is None:
            start = k
        elif not ok and start is not None:
            runs.append((start, k))
            start = None
    # Guards at the ends of a run need no segment of their own.
    trimmed = []
    for a, b in runs:
        while a < b and guard[a]:
            a += 1
        while b > a and guard[b - 1]:
            b -= 1
        if sum(1 for k in range(a, b) if not guard[k]) >= MIN_SEGMENT:
            trimmed.append((a, b))
    return trimmed


def _jax_index_add(values: Any, index: tuple, shape: tuple) -> Any:
    """:func:`funcdiff.rules.indexing.index_add` with a constant index, in JAX."""
    import jax.numpy as jnp

    values = unwrap(values)
    indexed_ndim = np.broadcast_to(np.zeros((), dtype=bool), shape)[index].ndim
    extra = tuple(values.shape[indexed_ndim:])
    return jnp.zeros(tuple(shape) + extra, dtype=values.dtype).at[index].add(values)


class _Segment:
    """One run of instructions, traced and compiled into one XLA kernel."""

    def __init__(
        self,
        a: int,
        b: int,
        prog: _Program,
        code: list,
        specs: list,
        template: list,
        needed_after: Callable[[int, int], bool],
    ) -> None:
        self.a, self.b = a, b
        slot_type = prog.ops["slot"]
        produced: set[int] = set()
        reads: list[int] = []
        guards: list[int] = []
        for k in range(a, b):
            if code[k][0] == prog.ops["guard"]:
                guards.append(k)
                continue
            for s in prog.reads[k]:
                if s not in produced and s not in reads:
                    reads.append(s)
            produced.update(prog.calls[k][3])  # type: ignore[index]
        guarded = {code[k][1] for k in guards}
        self.guards = guards
        self.outs = [s for s in _ordered(prog, a, b) if s in guarded or needed_after(s, b)]
        self.folded = {
            s: template[s]
            for s in reads
            if template[s] is not None and np.size(template[s]) <= FOLD_SIZE
        }
        self.ins = [s for s in reads if s not in self.folded]
        self.prog, self.code, self.specs, self.slot_type = prog, code, specs, slot_type

    def body(self, *values: Any) -> tuple:
        env: dict[int, Any] = dict(zip(self.ins, values))
        env.update(self.folded)
        specs, slot_type = self.specs, self.slot_type
        for k in range(self.a, self.b):
            call = self.prog.calls[k]
            if call is None:
                continue
            fn, args_t, kwargs_t, outs = call
            try:
                if fn is None:  # a copy: values are immutable here
                    results = [env[args_t[0].index]]
                else:
                    args = _fill(args_t, env, slot_type)
                    kwargs = {key: _fill(v, env, slot_type) for key, v in kwargs_t.items()}
                    if fn is _INDEX_ADD:
                        result = _jax_index_add(*args, **kwargs)
                    else:
                        result = unwrap(fn(*args, **kwargs))
                    results = _arrays(result)
            except _Fail:
                raise
            except Exception as error:  # noqa: BLE001  (anything JAX refuses stays NumPy)
                name = getattr(fn, "__name__", fn)
                raise _Fail(k, f"{name}: {type(error).__name__}: {error}") from None
            if len(results) != len(outs):
                raise _Fail(k, "a different number of results")
            for s, r in zip(outs, results):
                shape, dtype = specs[s]
                if tuple(np.shape(r)) != shape or np.result_type(r) != dtype:
                    raise _Fail(k, f"{np.shape(r)} {np.result_type(r)}, recorded {shape} {dtype}")
                env[s] = r
        return tuple(env[s] for s in self.outs)

    def compile(self, template: list) -> Callable[..., tuple]:
        import jax

        avals = [jax.ShapeDtypeStruct(*self.specs[s]) for s in self.ins]
        compiled = jax.jit(self.body).lower(*avals).compile()
        constants = [(i, template[s]) for i, s in enumerate(self.ins) if template[s] is not None]
        fixed = {i: jax.device_put(value) for i, value in constants}
        order = list(range(len(self.ins)))
        asarray = np.asarray

        if not fixed:

            def run(*arrays: Any) -> tuple:
                return tuple(asarray(o) for o in compiled(*arrays))

            return run
        free = [i for i in order if i not in fixed]

        def run_fixed(*arrays: Any) -> tuple:
            full = [None] * len(order)
            for i, value in fixed.items():
                full[i] = value
            for i, value in zip(free, arrays):
                full[i] = value
            return tuple(asarray(o) for o in compiled(*full))

        return run_fixed


def _ordered(prog: _Program, a: int, b: int) -> list[int]:
    out: list[int] = []
    for k in range(a, b):
        call = prog.calls[k]
        if call is not None:
            out.extend(call[3])
    return out


def _arrays(result: Any) -> list:
    import jax

    if isinstance(result, (jax.Array, np.ndarray, np.generic)):
        return [result]
    if isinstance(result, (tuple, list)):
        return [r for r in result if isinstance(r, (jax.Array, np.ndarray, np.generic))]
    raise Unsupported(f"a result of type {type(result).__name__}")


def lower(
    code: list, inputs: tuple, template: list, outputs: list[int], specs: list, ops: dict
) -> tuple[list, dict]:
    """The program with its segments as XLA kernels, and what was lowered.

    ``ops`` names the program's opcodes (see ``funcdiff.replay.program``); ``specs``
    holds each slot's recorded ``(shape, dtype)``. Returns the new instruction list
    (the same instructions where nothing lowered) and a summary.
    """
    prog = _Program(code, ops)
    flags = _candidates(code, prog, specs, template)
    guard = [ins[0] == ops["guard"] for ins in code]
    last: dict[int, int] = {}
    for k, reads in enumerate(prog.reads):
        for s in reads:
            last[s] = k
    final = set(outputs)

    def needed_after(slot: int, b: int) -> bool:
        return slot in final or last.get(slot, -1) >= b

    segments: list[tuple[_Segment, Callable[..., tuple]]] = []
    failures: list[str] = []
    queue = _runs(flags, guard)
    with x64():
        while queue:
            a, b = queue.pop(0)
            segment = _Segment(a, b, prog, code, specs, template, needed_after)
            try:
                kernel = segment.compile(template)
            except _Fail as fail:
                failures.append(fail.why)
                if len(failures) > MAX_FAILURES:
                    break
                flags[fail.position] = False
                parts = _runs(flags[a:b], guard[a:b])
                queue = [(a + x, a + y) for x, y in parts] + queue
                continue
            segments.append((segment, kernel))
    segments.sort(key=lambda sk: sk[0].a)
    new_code: list = []
    slot = ops["slot"]
    k = 0
    for segment, kernel in segments:
        new_code.extend(code[k : segment.a])
        args = tuple(slot(s) for s in segment.ins if template[s] is None)
        new_code.append((ops["general"], kernel, args, {}, tuple(segment.outs)))
        new_code.extend(code[g] for g in segment.guards)
        k = segment.b
    new_code.extend(code[k:])
    lowered = sum(
        1 for seg, _ in segments for k in range(seg.a, seg.b) if code[k][0] != ops["guard"]
    )
    summary = {
        "kernels": len(segments),
        "lowered": lowered,
        "numpy": sum(1 for ins in code if ins[0] != ops["guard"]) - lowered,
        "failures": failures[:8],
    }
    return new_code, summary
