"""Lowering a recorded program's NumPy calls to XLA kernels through JAX.

Every instruction JAX can run on float64 (or boolean) values is a *candidate*; one
abstract trace of the whole program (a *probe*, nothing compiled) finds those whose
``jax.numpy`` namesake refuses them or computes another shape or dtype. The rest stay
the NumPy calls they were: guards, in-place writes (and everything before the last
one, whose views must see it), functions without a JAX namesake, integer and complex
values.

The program is then *scheduled* in alternating phases: the NumPy instructions that
can run, in their order, then one *kernel* holding every candidate whose inputs are
ready (following the data, not the program order, so that a NumPy call in the middle
of a program costs one more kernel, not a cut at every place it occurs), up to a cap on
the size of its expressions (:data:`MAX_UNFOLDED`; past it XLA's fusion would recompute
values exponentially often, and a new kernel starts from stored values). Each kernel is
traced once into one ``jax.jit`` function of the values it reads and compiled by XLA,
which fuses its elementwise operations, slices, concatenations and reductions into a
few loops. Kernels are pure and their shapes fixed, so they may run before a guard
that precedes them in the program: the guard still raises before any result is used,
and NumPy instructions keep their order relative to every guard.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from funcdiff.replay._codegen import as_call
from funcdiff.replay.jit._arrays import (
    Traced,
    Unsupported,
    constant,
    scatter_add,
    structured,
    unwrap,
)
from funcdiff.replay.jit._handover import (
    aligned,
    misalignment,
    narrowing,
    packing,
    results,
    unpacking,
    widened,
)
from funcdiff.rules.indexing import index_add

# The recorded function is the rule's own (the public name dispatches on Tensors).
_INDEX_ADD = getattr(index_add, "__wrapped__", index_add)

__all__ = ["kernels_at_least", "lower", "x64"]

#: Values a segment computes with; anything else stays NumPy (its promotion rules and
#: integer semantics differ from JAX's).
DTYPES = frozenset({np.dtype(np.float64), np.dtype(np.bool_)})
#: Products NumPy hands to BLAS (multithreaded, tuned): single-threaded XLA loops are
#: slower, and the matrix would be read anew in the kernel's layout.
BLAS_PRODUCTS = frozenset(
    {"matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "matvec", "vecmat", "kron"}
)
#: Constant arrays up to this size are folded into the kernel; larger ones are
#: arguments, converted once.
FOLD_SIZE = 64
#: Kernels computing more distinct shapes than this compile with XLA's older loop
#: emitters: its fusion emitters make loops that are faster to run, but they compile
#: a kernel of many small differently shaped loops 3-5x slower (seconds per kernel).
MANY_SHAPES = 24
MANY_SHAPES_OPTIONS: dict[str, Any] = {
    "xla_backend_optimization_level": 0,
    "xla_cpu_use_fusion_emitters": False,
    "xla_cpu_enable_concurrency_optimized_scheduler": False,
}
#: The most evaluations per element that XLA's fusion may make of a kernel's values
#: (as :class:`_Unfolding` counts them). XLA recomputes a cheap producer (an addition, a
#: product, a slice, ``sin``) in each consumer instead of storing it, and where a
#: value is read both as it is and moved (reversed, sliced, broadcast), the two reads
#: are two computations of everything before it. A chain of steps that each read their
#: input moved and unmoved, such as the stages of a Runge-Kutta loop, thus costs
#: exponentially in its length: about 55 times more per RK4 step on 4-element states,
#: where one kernel of eight steps (10^15) never finished running (or, with XLA's older
#: loop emitters, compiling). An instruction that would pass the cap starts the next
#: kernel, which reads its inputs from memory, and the count restarts there. The rule
#: table's cases count under 2 000 and the Hessians of the tests under 10^6, so they
#: stay one kernel each; an RK4 loop gets two steps per kernel.
MAX_UNFOLDED = 1 << 22
#: Operations whose results XLA stores rather than recomputes in each consumer (its
#: "expensive" instructions, which it does not duplicate): reductions, and the
#: elementwise functions it computes by long polynomial or iterative code.
STORED = frozenset(
    {"tanh", "divide", "true_divide", "sqrt", "cbrt", "expm1", "log1p", "arctan2"}
    | {"remainder", "fmod", "sum", "prod", "max", "min", "amax", "amin", "mean"}
)
#: Options for every kernel. XLA's CPU backend hands reductions to YNNPACK, which needs
#: its operands in memory: a sum at the end of a fused loop then costs two extra passes
#: over its operands (a replayed Rosenbrock hvp at n=1e6 ran 2.2x slower with it). The
#: option is experimental; a JAX that does not know it compiles without it.
KERNEL_OPTIONS: dict[str, Any] = {"xla_cpu_experimental_ynn_fusion_type": ""}
#: Kernels computing at most this many elements (summed over their instructions' results)
#: return their small float64 results packed into one array: each result XLA returns
#: costs it a loop and a buffer (B7's Jacobian, six 5 x 5 blocks, replayed in 45 us
#: instead of 110), while the packing costs at most a nanosecond or two per element.
PACK_WORK = 4096
#: Options for a kernel compiled for widened arguments (see ``_handover``). Where two
#: arguments share a shift, XLA reads them at one index expression, and LLVM's
#: optimisation level 2 then makes the loop scalar: B4's hvp at n=1e6 took 0.73-0.79x
#: NumPy f with x and v both 16 bytes past a page boundary (NumPy's usual place), and
#: 0.37-0.41x at level 1, which vectorises it, as fast as the other layouts
#: (``python -m benchmarks.page_offsets``). Level 1 for every kernel gained nothing on
#: the aligned ones and cost the sparse Brusselator 5%.
WIDENED_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 1}
#: Bytes above which a kernel's ndarray argument is handed to JAX with device_put.
LARGE_ARGUMENT = 1 << 16
#: How many alignments of its large arguments a kernel is compiled for besides the
#: aligned one (see ``_handover``), each once it is met a second time; others are
#: copied to aligned memory by JAX. NumPy places a large array 16 bytes past a page
#: boundary or anywhere on a 16-byte boundary, so one or two are the common cases.
MAX_ALIGNMENTS = 2
#: Kernels with fewer instructions stay NumPy (a kernel call costs a few microseconds).
MIN_SEGMENT = 2
#: How many times the schedule may be redone (a kernel too small, or one that failed to
#: trace after the probe found what JAX runs) before the program stays NumPy.
MAX_RETRIES = 16


class _Fail(Exception):
    def __init__(self, position: int, why: str) -> None:
        super().__init__(f"instruction {position}: {why}")
        self.position = position
        self.why = why


def x64() -> Any:
    """A context manager: float64 inside JAX for its block only (no global setting
    changes)."""
    import jax

    return jax.enable_x64(True)


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
    if type(template) is np.ndarray and template.size > FOLD_SIZE:
        return constant(template)
    return template


class _Program:
    """A program's instructions in one form: ``(kind, fn, args, kwargs, outs)``."""

    def __init__(self, code: list, ops: dict) -> None:
        self.ops = ops
        # The constant slots computed inside kernels, by slot (set by ``lower``).
        self.built: dict[int, Callable[[], Any]] = {}
        slot = ops["slot"]
        self.calls: list[tuple | None] = []
        self.reads: list[list[int]] = []
        for ins in code:
            op = ins[0]
            call = as_call(ins, ops)
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
        if getattr(fn, "__name__", "").lstrip("_") in BLAS_PRODUCTS:
            continue
        slots = list(outs) + prog.reads[k]
        if all(specs[s] is not None and specs[s][1] in DTYPES for s in slots):
            out[k] = True
    return out


def _schedule(
    prog: _Program,
    specs: list,
    flags: list[bool],
    guard: list[bool],
    start: int,
    produced_by: dict[int, int],
) -> list:
    """Steps ``("numpy", k)`` and ``("kernel", [k, ...])`` running the program.

    NumPy instructions keep their order; each kernel holds every candidate whose
    inputs are ready when it starts, in program order, up to the first whose
    expression, unfolded inside the kernel, would pass :data:`MAX_UNFOLDED` (the first
    ready candidate never does: it reads stored values only, so the schedule always
    moves on). A guard after ``start``
    (where nothing writes in place any more) runs as soon as its value is ready, so
    that guards do not chain the kernels of independent parts; one before keeps its
    place among the NumPy calls.
    """
    n = len(flags)
    ready_slot: set[int] = set()
    numpy_items = [k for k in range(n) if not flags[k] and not (guard[k] and k >= start)]
    waiting = [k for k in range(start, n) if guard[k]]
    candidates = [k for k in range(n) if flags[k]]
    steps: list = []
    cursor = 0

    def ready(k: int) -> bool:
        return all(s in ready_slot or s not in produced_by for s in prog.reads[k])

    def finish(k: int) -> None:
        call = prog.calls[k]
        if call is not None:
            ready_slot.update(call[3])

    def guards() -> None:
        nonlocal waiting
        for k in waiting:
            if ready(k):
                steps.append(("numpy", k))
        waiting = [k for k in waiting if not ready(k)]

    guards()
    while cursor < len(numpy_items) or candidates:
        while cursor < len(numpy_items) and ready(numpy_items[cursor]):
            steps.append(("numpy", numpy_items[cursor]))
            finish(numpy_items[cursor])
            cursor += 1
            guards()
        kernel: list[int] = []
        rest: list[int] = []
        unfolding = _Unfolding(prog, specs)
        for i, k in enumerate(candidates):  # program order: producers come first
            if ready(k):
                size, value = unfolding.size(k)
                if size > MAX_UNFOLDED:
                    # The kernel ends here (not only for this candidate's dependents):
                    # the next one starts at the same place in each step of a loop,
                    # so the kernels repeat and compile once.
                    rest.extend(candidates[i:])
                    break
                kernel.append(k)
                finish(k)
                unfolding.add(k, value)
            else:
                rest.append(k)
        candidates = rest
        if kernel:
            steps.append(("kernel", kernel))
            guards()
        elif cursor < len(numpy_items) and not ready(numpy_items[cursor]):
            raise AssertionError("replay.jit: the schedule is stuck")  # pragma: no cover
    steps.extend(("numpy", k) for k in waiting)  # (none: every value is ready by now)
    return steps


class _Unfolding:
    """The evaluations per element that XLA's fusion may make of a kernel's values, as
    counted by :data:`MAX_UNFOLDED`, for the instructions added so far.

    Each value holds the depth of its chain of elementwise operations (a value read
    twice at the same element is computed once: the chain's length counts, not its
    paths) and the set of *moves* it reaches along that chain: instructions that read
    their inputs at other elements (slices, reversals, broadcasts, concatenations,
    reductions). A move's inputs are evaluated anew for it, so it costs one plus
    everything its inputs cost, and two moves of the same value cost twice. Values of
    :data:`STORED` operations are read from memory and cost nothing more.
    """

    def __init__(self, prog: _Program, specs: list) -> None:
        self.prog, self.specs = prog, specs
        self.values: dict[int, tuple[int, frozenset]] = {}  # slot -> (depth, moves)
        self.moves: dict[int, int] = {}  # a move's instruction -> its cost
        self.largest = 0

    def _cost(self, value: tuple[int, frozenset]) -> int:
        return value[0] + sum(self.moves[m] for m in value[1])

    def size(self, k: int) -> tuple[int, tuple[int, frozenset]]:
        """Instruction ``k``'s count, and the value its results would hold."""
        fn, _, _, outs = self.prog.calls[k]  # type: ignore[misc]
        inside = [self.values[s] for s in self.prog.reads[k] if s in self.values]
        shape = self.specs[outs[0]][0] if outs and self.specs[outs[0]] is not None else None
        same = all(
            self.specs[s] is not None and self.specs[s][0] == shape
            for s in self.prog.reads[k]
            if s in self.values
        )
        if (fn is None or isinstance(fn, np.ufunc)) and same:
            depth = 1 + max((v[0] for v in inside), default=0)
            moves: frozenset = frozenset().union(*(v[1] for v in inside))
            value = (depth, moves)
            return self._cost(value), value
        cost = 1 + sum(self._cost(v) for v in inside)
        self.moves[k] = cost
        return cost, (0, frozenset({k}))

    def add(self, k: int, value: tuple[int, frozenset]) -> None:
        """Add instruction ``k``, whose results hold ``value`` (from :meth:`size`)."""
        call = self.prog.calls[k]
        self.largest = max(self.largest, self._cost(value))
        if getattr(call[0], "__name__", "").lstrip("_") in STORED:  # type: ignore[index]
            value = (0, frozenset())
        self.values.update(dict.fromkeys(call[3], value))  # type: ignore[index]


def _unfolded(prog: _Program, specs: list, positions: list[int]) -> int:
    """The largest count of a kernel's values (see :data:`MAX_UNFOLDED`)."""
    unfolding = _Unfolding(prog, specs)
    for k in positions:
        unfolding.add(k, unfolding.size(k)[1])
    return unfolding.largest


def kernels_at_least(code: list, template: list, specs: list, ops: dict) -> int:
    """How many kernels the program needs at least: its candidates in program order,
    cut where a count passes :data:`MAX_UNFOLDED` (the schedule cuts more where NumPy
    calls sit between them). One linear pass, nothing traced."""
    prog = _Program(code, ops)
    flags = _candidates(code, prog, specs, template)
    for s, value in enumerate(template):
        if type(value) is np.ndarray and value.size > FOLD_SIZE:
            build = structured(value)
            if build is not None:
                prog.built[s] = build
    kernels = 0
    unfolding: _Unfolding | None = None
    for k, flag in enumerate(flags):
        if not flag or code[k][0] == ops["guard"]:
            continue
        if unfolding is None:
            unfolding, kernels = _Unfolding(prog, specs), kernels + 1
        size, value = unfolding.size(k)
        if size > MAX_UNFOLDED:
            unfolding, kernels = _Unfolding(prog, specs), kernels + 1
            size, value = unfolding.size(k)
        unfolding.add(k, value)
    return kernels


class _Segment:
    """Instructions (at ``positions``, in program order) traced into one XLA kernel."""

    def __init__(
        self,
        positions: list[int],
        prog: _Program,
        specs: list,
        template: list,
        needed: Callable[[int, set], bool],
    ) -> None:
        self.positions = positions
        produced: set[int] = set()
        reads: list[int] = []
        made: list[int] = []
        for k in positions:
            for s in prog.reads[k]:
                if s not in produced and s not in reads:
                    reads.append(s)
            outs = prog.calls[k][3]  # type: ignore[index]
            produced.update(outs)
            made.extend(outs)
        inside = set(positions)
        self.outs = [s for s in made if needed(s, inside)]
        self.folded = {
            s: template[s]
            for s in reads
            if template[s] is not None and np.size(template[s]) <= FOLD_SIZE
        }
        # Large constants with a structure are computed in the kernel (see
        # ``_arrays.structured``); the others are arguments, converted once.
        self.built = {s: prog.built[s] for s in reads if s in prog.built}
        self.ins = [s for s in reads if s not in self.folded and s not in self.built]
        self.prog, self.specs, self.slot_type = prog, specs, prog.ops["slot"]
        self.many_shapes = len({specs[s][0] for s in made}) > MANY_SHAPES
        # A small kernel's float64 results come back packed into one array (see
        # ``_handover``). XLA fuses the concatenation with the loops that compute its
        # operands: a result the kernel also reads would be computed again for it (an
        # RK4 loop, whose stages feed each other, ran a thousand times slower), and a
        # large kernel's loops would no longer vectorise (B5's value and gradient took
        # twice as long). So only small kernels pack, and only results read outside.
        work = sum(math.prod(specs[s][0]) for s in made)
        read_inside = {s for k in positions for s in prog.reads[k]}
        packed = [
            specs[s][1] == np.float64
            and 0 < math.prod(specs[s][0])
            and not self.large(s)
            and s not in read_inside
            for s in self.outs
        ]
        if work > PACK_WORK or sum(packed) < 2:
            packed = [False] * len(packed)
        self.packed = packed
        self.returned = packing(packed) if any(packed) else tuple

    def large(self, s: int) -> bool:
        """Whether slot ``s`` is large enough to be handed over in place (``_handover``)."""
        shape, dtype = self.specs[s]
        return math.prod(shape) * dtype.itemsize > LARGE_ARGUMENT

    def step(self, k: int, env: dict) -> list:
        """Instruction ``k`` on the traced values of ``env``: its results, checked
        against the recorded shapes and dtypes (:class:`_Fail` where JAX differs)."""
        fn, args_t, kwargs_t, outs = self.prog.calls[k]  # type: ignore[misc]
        slot_type = self.slot_type
        try:
            if fn is None:  # a copy: values are immutable here
                results = [env[args_t[0].index]]
            else:
                args = _fill(args_t, env, slot_type)
                kwargs = {key: _fill(v, env, slot_type) for key, v in kwargs_t.items()}
                if fn is _INDEX_ADD:
                    result = scatter_add(*args, **kwargs)
                else:
                    result = unwrap(fn(*args, **kwargs))
                results = _arrays(result)
        except Exception as error:  # noqa: BLE001  (anything JAX refuses stays NumPy)
            name = getattr(fn, "__name__", fn)
            raise _Fail(k, f"{name}: {type(error).__name__}: {error}") from None
        if len(results) != len(outs):
            raise _Fail(k, "a different number of results")
        for s, r in zip(outs, results):
            shape, dtype = self.specs[s]
            if tuple(np.shape(r)) != shape or np.result_type(r) != dtype:
                raise _Fail(k, f"{np.shape(r)} {np.result_type(r)}, recorded {shape} {dtype}")
        return results

    def body(self, *values: Any) -> tuple:
        env: dict[int, Any] = dict(zip(self.ins, values))
        env.update(self.folded)
        env.update((s, build()) for s, build in self.built.items())
        for k in self.positions:
            env.update(zip(self.prog.calls[k][3], self.step(k, env)))  # type: ignore[index]
        return self.returned(tuple(env[s] for s in self.outs))

    def probe(self, skip: list[bool], failed: dict[int, str]) -> Any:
        """Trace every instruction once (abstractly, nothing is compiled) and note in
        ``failed`` those JAX cannot run; their results, and those of the instructions
        in ``skip``, are traced placeholders of the recorded shape, so that one failure
        does not hide what follows. Returns the trace (this segment's kernel when
        nothing failed or was skipped)."""
        import jax
        import jax.numpy as jnp

        def placeholder(s: int) -> Any:
            spec = self.specs[s]
            return None if spec is None else jnp.zeros(*spec)  # a tracer, not a constant

        def run(*args: Any) -> tuple:
            env: dict[int, Any] = dict(zip(self.ins, args))
            env.update(self.folded)
            env.update((s, build()) for s, build in self.built.items())
            for k in self.positions:
                outs = self.prog.calls[k][3]  # type: ignore[index]
                if not skip[k]:
                    try:
                        env.update(zip(outs, self.step(k, env)))
                        continue
                    except _Fail as fail:
                        failed[k] = fail.why
                env.update((s, placeholder(s)) for s in outs)
            return self.returned(tuple(env[s] for s in self.outs))

        avals = [jax.ShapeDtypeStruct(*self.specs[s]) for s in self.ins]
        return jax.jit(run).trace(*avals)

    def compile(
        self, template: list, traced: Any = None, compiled_by_text: dict | None = None
    ) -> Callable[..., tuple]:
        """The kernel: ``traced`` (a probe's trace of this very segment) or a new trace
        of :meth:`body`, compiled by XLA, or the executable of an identical kernel from
        ``compiled_by_text`` (keyed by the kernel's StableHLO text)."""
        import jax

        if traced is None:
            avals = [jax.ShapeDtypeStruct(*self.specs[s]) for s in self.ins]
            traced = jax.jit(self.body).trace(*avals)
        options = dict(KERNEL_OPTIONS)
        if self.many_shapes:
            options.update(MANY_SHAPES_OPTIONS)
        lowered = traced.lower()
        # The steps of a loop make the same kernel again and again (the same operations
        # on the same shapes and constants): XLA compiles it once.
        key = (lowered.as_text(), self.many_shapes)
        cache = {} if compiled_by_text is None else compiled_by_text
        compiled = cache.get(key)
        if compiled is None:
            compiled = cache[key] = _compile(lowered, options)
        constants = [(i, template[s]) for i, s in enumerate(self.ins) if template[s] is not None]
        fixed = {i: jax.device_put(value) for i, value in constants}
        free = [i for i in range(len(self.ins)) if i not in fixed]
        count = len(self.ins)
        no_shifts = (0,) * len(free)
        by_shifts = {no_shifts: compiled}

        met: dict[tuple[int, ...], int] = {}

        def shifted(shifts: tuple[int, ...]) -> Any:
            """The kernel for arguments widened by ``shifts`` (see ``_handover``),
            compiled for the first few alignments met twice, else None. (The arrays a
            NumPy call makes may start anywhere: an alignment met once may not recur,
            while a caller's arrays, allocated once, keep theirs.)"""
            executable = by_shifts.get(shifts)
            if executable is not None or len(by_shifts) > MAX_ALIGNMENTS:
                return executable
            met[shifts] = met.get(shifts, 0) + 1
            if met[shifts] < 2:
                return None
            every = [0] * count
            for i, k in zip(free, shifts):
                every[i] = k
            specs = [self.specs[s] for s in self.ins]
            avals = [
                jax.ShapeDtypeStruct((math.prod(shape) + k,) if k else shape, dtype)
                for (shape, dtype), k in zip(specs, every)
            ]
            body = narrowing(self.body, [shape for shape, _ in specs], every)
            executable = by_shifts[shifts] = _compile(
                jax.jit(body).trace(*avals).lower(), {**options, **WIDENED_OPTIONS}
            )
            return executable

        # A large ndarray argument is handed over as it is where it starts on an aligned
        # address, or widened to start on one: XLA reads it in place. One that cannot be
        # (at an alignment without its kernel) goes through device_put, which copies it
        # to aligned memory (the executable's own conversion copies it synchronously, 4x
        # slower). A small one goes as it is: a device_put costs more than the copy and
        # stalls the dispatch (B5's kernel call took 1.6x as long with one).
        put, asarray, array = jax.device_put, np.asarray, np.array
        large_in = [self.large(self.ins[i]) for i in free]
        packed = self.packed
        packed_shapes = [self.specs[s][0] for s, p in zip(self.outs, packed) if p]
        unpacked = unpacking(packed_shapes)
        large_out = [
            self.specs[s] if self.large(s) else None for s, p in zip(self.outs, packed) if not p
        ]
        some_large_out = any(spec is not None for spec in large_out)
        given: list[Any] = [fixed.get(i) for i in range(count)]

        def outputs_of(outputs: Any, full: Sequence[Any]) -> tuple:
            if packed_shapes:
                pieces = iter(unpacked(outputs[0]))
                outputs = outputs[1:]
            if some_large_out:
                rest = iter(results(outputs, full, large_out))
            else:
                rest = iter([asarray(o) for o in outputs])
            if not packed_shapes:
                return tuple(rest)
            return tuple(next(pieces) if p else next(rest) for p in packed)

        if not (any(large_in) or fixed):
            # Every argument read as it is: the call costs little more than the
            # executable's own.
            if some_large_out or packed_shapes:

                def small(*arrays: Any) -> tuple:
                    return outputs_of(compiled(*arrays), arrays)

            else:

                def small(*arrays: Any) -> tuple:
                    # Each result copied out of XLA's buffer into an array of its own,
                    # which the caller keeps as it is.
                    return tuple([array(o) for o in compiled(*arrays)])

            small.returns_arrays = True  # type: ignore[attr-defined]
            return small

        def run(*arrays: Any) -> tuple:
            full = given.copy()
            shifts = tuple(misalignment(v) if big else 0 for v, big in zip(arrays, large_in))
            executable = compiled if shifts == no_shifts else shifted(shifts)
            if executable is None:
                executable, shifts = compiled, no_shifts
            for i, value, big, k in zip(free, arrays, large_in, shifts):
                if k:
                    full[i] = widened(value, k)
                elif big and not aligned(value):
                    full[i] = put(value)
                else:
                    full[i] = value
            return outputs_of(executable(*full), full)

        # A tuple of ndarrays, one per output: the generated code unpacks it as it is.
        run.returns_arrays = True  # type: ignore[attr-defined]
        return run


def _compile(lowered: Any, options: dict[str, Any]) -> Any:
    """``lowered`` compiled with ``options``; an option this XLA does not know (they are
    experimental) is dropped, for this kernel and the next ones."""
    try:
        return lowered.compile(compiler_options=options or None)
    except Exception as error:  # noqa: BLE001
        if "compile option" not in str(error):
            raise
    KERNEL_OPTIONS.clear()
    kept = {k: v for k, v in options.items() if k in MANY_SHAPES_OPTIONS}
    return lowered.compile(compiler_options=kept or None)


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
    """The program with its candidates as XLA kernels, and what was lowered.

    ``ops`` names the program's opcodes (see ``funcdiff.replay.program``); ``specs``
    holds each slot's recorded ``(shape, dtype)``. Returns the new instruction list
    (the same instructions where nothing lowered) and a summary.
    """
    prog = _Program(code, ops)
    flags = _candidates(code, prog, specs, template)
    for s, value in enumerate(template):
        if type(value) is np.ndarray and value.size > FOLD_SIZE:
            build = structured(value)
            if build is not None:
                prog.built[s] = build
    barriers = [k for k, ins in enumerate(code) if ins[0] in ops["inplace_kinds"]]
    barrier = barriers[-1] + 1 if barriers else 0
    guard = [ins[0] == ops["guard"] for ins in code]
    flags = [f and not g for f, g in zip(flags, guard)]
    produced_by: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    for k, call in enumerate(prog.calls):
        if call is not None:
            for s in call[3]:
                produced_by[s] = k
        for s in prog.reads[k]:
            readers.setdefault(s, []).append(k)
    final = set(outputs)

    def needed(slot: int, inside: set) -> bool:
        return slot in final or any(k not in inside for k in readers.get(slot, ()))

    failures: list[str] = []
    began = time.perf_counter()
    probed = 0.0
    kernels: dict[int, tuple[_Segment, Callable[..., tuple]]] = {}
    compiled_by_text: dict = {}
    with x64():
        positions = [k for k in range(len(code)) if flags[k]]
        traced = None
        if positions:
            first = positions[0]
            span = [k for k in range(first, len(code)) if not guard[k]]
            whole = _Segment(span, prog, specs, template, needed)
            failed: dict[int, str] = {}
            traced = whole.probe([not flags[k] for k in range(len(code))], failed)
            probed = time.perf_counter() - began
            for k, why in failed.items():
                flags[k] = False
                failures.append(why)
        for _ in range(MAX_RETRIES):
            steps = _schedule(prog, specs, flags, guard, barrier, produced_by)
            small = [
                k for kind, ks in steps if kind == "kernel" and len(ks) < MIN_SEGMENT for k in ks
            ]
            if small:
                for k in small:
                    flags[k] = False
                continue
            try:
                for kind, ks in steps:
                    if kind != "kernel" or ks[0] in kernels:
                        continue
                    segment = _Segment(ks, prog, specs, template, needed)
                    reuse = traced if positions and ks == whole.positions else None
                    kernel = segment.compile(template, reuse, compiled_by_text)
                    kernels[ks[0]] = (segment, kernel)
            except _Fail as fail:
                failures.append(fail.why)
                flags[fail.position] = False
                kernels.clear()
                continue
            break
        else:
            steps = [("numpy", k) for k in range(len(code))]
            kernels.clear()
    new_code: list = []
    slot = ops["slot"]
    lowered = 0
    for kind, ks in steps:
        if kind == "numpy":
            new_code.append(code[ks])
            continue
        segment, kernel = kernels[ks[0]]
        args = tuple(slot(s) for s in segment.ins if template[s] is None)
        new_code.append((ops["general"], kernel, args, {}, tuple(segment.outs)))
        lowered += len(ks)
    summary = {
        "kernels": sum(1 for kind, _ in steps if kind == "kernel"),
        "executables": len(compiled_by_text),
        "lowered": lowered,
        "numpy": sum(1 for ins in code if ins[0] != ops["guard"]) - lowered,
        "failures": sorted({why.split(":")[0] for why in failures}),
        "unfolded": max(
            (_unfolded(prog, specs, ks) for kind, ks in steps if kind == "kernel"), default=0
        ),
        "trace_seconds": probed,
        "seconds": time.perf_counter() - began,
    }
    return new_code, summary
