"""Recording a computation once and replaying it: the public recording API.

:func:`recording` installs a :class:`ReplayTracer` for one eager run on Tensors (the
function's forward and, for a derivative, the engine's backward with
``create_graph=True``); :func:`build` turns the trace into a :class:`Program` that keeps
only the instructions the requested outputs (and the guards) depend on, specialises
the common call shapes (one or two slot arguments, no keywords) and lays out a
template of the slot list with the constants in place. :meth:`Program.run` copies the
template, puts the inputs in, and runs the instructions in order; a guard that comes
out differently raises :class:`GuardFailure` at once, before any later instruction
could fail on a value of another shape. :mod:`funcdiff.replay` and
``funcdiff.sparse(replay=True)`` record their programs this way.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> with recording() as tracer:
...     x = fd.tensor([1.0, 2.0], requires_grad=True)
...     slot = tracer.input(x)
...     y = np.sin(x) * x
>>> program = build(tracer, tracer.slot_of(y))
>>> program.run([np.array([0.0, 3.0])])
array([0.        , 0.42336002])
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from funcdiff._core import grad_mode, tracing
from funcdiff._core.backends import as_array, copy_array, is_foreign
from funcdiff.replay import jit
from funcdiff.replay._codegen import compile_program
from funcdiff.replay._folding import folded
from funcdiff.replay._tracer import (
    CALL,
    COPY,
    COPY_INTO,
    GUARD,
    INPLACE_UFUNC,
    SET_ITEM,
    ReplayTracer,
    Slot,
    TraceError,
)

__all__ = ["Program", "GuardFailure", "ReplayTracer", "TraceError", "build", "recording"]

_ARRAYS = (np.ndarray, np.generic)
#: Runs of a program before it is compiled (the validation run counts).
COMPILE_AFTER = 3

# Runner opcodes (specialised CALLs first: they are most of every program).
_UNARY, _BINARY, _BINARY_CONST_RIGHT, _BINARY_CONST_LEFT, _GENERAL = range(5)
_COPY_INTO, _SET_ITEM, _INPLACE, _GUARD, _COPY = range(5, 10)


class GuardFailure(Exception):
    """A replayed conversion came out differently than when the program was recorded."""

    def __init__(self, kind: str, expected: Any, got: Any) -> None:
        super().__init__(f"{kind} guard: recorded {expected!r}, got {got!r}")
        self.kind, self.expected, self.got = kind, expected, got


def _unpack(result: Any, count: int) -> list:
    """The arrays of an operation's result, as the eager run wrapped them."""
    if isinstance(result, _ARRAYS) or is_foreign(result):
        return [result if type(result) is np.ndarray else as_array(result)]
    if isinstance(result, (tuple, list)):
        return [
            o if type(o) is np.ndarray else as_array(o)
            for o in result
            if isinstance(o, _ARRAYS) or is_foreign(o)
        ]
    return []


def _fill(template: Any, v: list) -> Any:
    if type(template) is Slot:
        return v[template.index]
    if type(template) in (list, tuple):
        return type(template)(_fill(t, v) for t in template)
    return template


def _gather(structure: Any, v: list) -> Any:
    """The values of an output structure (slot numbers, nested tuples, None)."""
    if structure is None or isinstance(structure, int):
        return None if structure is None else v[structure]
    return tuple(_gather(s, v) for s in structure)


def _uses(template: Any) -> list[int]:
    if type(template) is Slot:
        return [template.index]
    if type(template) in (list, tuple):
        return [i for t in template for i in _uses(t)]
    if isinstance(template, dict):
        return [i for t in template.values() for i in _uses(t)]
    return []


class Program:
    """A recorded computation, replayable on new input arrays of the same signature."""

    def __init__(
        self,
        template: list,
        inputs: tuple,
        code: list,
        outputs: Any,
        n_recorded: int,
        specs: list | None = None,
        compile: bool | str = False,
    ) -> None:
        self.template = template
        self.inputs = inputs
        self.code = code
        self.outputs = outputs  # a nested structure of slot indices (None: no value)
        self.copies = _copies(outputs, template, set(inputs))
        self.compiled: Any = None
        self.runs = 0
        # Each used slot's recorded (shape, dtype), for the compiled backend.
        self.specs = specs
        self.compile_mode = jit.check_compile(compile) if specs is not None else False
        # The XLA-compiled form (funcdiff.replay.jit): None until the first run, then a
        # function or False. Rebuilt lazily, never stored with the program.
        self.kernels: Any = None
        self.info: dict[str, Any] = {
            "instructions": len(code),
            "recorded": n_recorded,
            "guards": sum(1 for c in code if c[0] == _GUARD),
            "compiled": False,
            "folded": 0,
            "jit": None,
        }

    def run(self, arrays: Sequence[np.ndarray], copy: bool = True) -> Any:
        """The outputs for ``arrays`` (raises :class:`GuardFailure` off the path).

        ``copy=False`` may return inputs, constants of the program or read-only
        views of a kernel's buffers as they are: for a caller that only reads the
        outputs before its next call (it saves a copy of each).

        The first runs interpret the instructions; a program that is replayed again is
        compiled to straight-line Python (see :mod:`funcdiff.replay._codegen`), which
        pays for itself within a few calls. With ``compile`` set, the first run lowers
        the program to XLA kernels (:mod:`funcdiff.replay.jit`) and checks them against
        the NumPy calls.
        """
        if self.compile_mode is not False:
            kernels = self.kernels
            if kernels is None:
                return self._first_compiled_run(arrays)
            if kernels is not False:
                try:
                    result = kernels(*arrays)
                    return _emit(result, self.copies) if copy else result
                except GuardFailure:
                    raise
                except Exception:  # noqa: BLE001
                    # A NumPy call ahead of a guard (the kernels reorder them) failed on
                    # the values of another path: the instructions in their own order
                    # raise the GuardFailure, or the error, as uncompiled.
                    return self.interpret(arrays)
        if self.compiled is not None:
            result = self.compiled(*arrays)
            return _emit(result, self.copies) if copy else result
        self.runs += 1
        if self.runs >= COMPILE_AFTER:
            self.compiled = self._numpy_code()
            if self.compiled is not None:
                self.info["compiled"] = True
                return _emit(self.compiled(*arrays), self.copies)
            self.runs = -(1 << 62)  # too long to compile: interpret from now on
        return self.interpret(arrays)

    def _first_compiled_run(self, arrays: Sequence[np.ndarray]) -> Any:
        """Lower the program, run it both ways, and keep the kernels if they agree."""
        # Off the path here (GuardFailure): nothing is compiled until a run on it.
        expected = self.interpret(arrays)
        self.runs += 1  # an interpreted run, as those that lead to compile_program
        self.kernels = False
        summary: dict = {}
        try:
            lowered = jit.lower(
                self.code,
                self.inputs,
                self.template,
                _flat(self.outputs),
                self.specs or [],
                _OPCODES,
                self.compile_mode,
            )
            if lowered is None:
                return expected
            code, summary = lowered
            fn = compile_program(code, self.inputs, self.template, self.outputs, _OPCODES)
            if fn is None:
                return expected
            kernels = jit.runner(fn)
            got = _emit(kernels(*arrays), self.copies)
        except GuardFailure:
            got = None
        except Exception as error:  # noqa: BLE001
            # The default ("auto") must not fail where NumPy calls work: it replays them.
            if self.compile_mode is True:
                raise
            self.info["jit"] = {"kernels": 0, "failed": f"{type(error).__name__}: {error}"}
            return expected
        if got is None or not jit.agree(got, expected):
            self.info["jit"] = {**summary, "kernels": 0, "disagreed": True}
        elif self.compile_mode == "auto" and not self._kernels_pay(kernels, arrays):
            self.info["jit"] = {**summary, "kernels": 0, "slower": True}
        else:
            self.kernels = kernels
            self.info["jit"] = summary
        return expected

    def _kernels_pay(self, kernels: Any, arrays: Sequence[np.ndarray]) -> bool:
        """Whether the kernels run faster than the NumPy calls (``compile="auto"``).

        Small programs and those made of a few large BLAS or SciPy calls can replay
        faster as NumPy calls (XLA's fixed cost per kernel call is microseconds, and
        its products are no faster than NumPy's); both are timed on these inputs,
        alternately, best of several runs each (up to 25 for programs of microseconds,
        whose first runs vary most: three picked NumPy calls for B3's Hessian, whose
        kernels run in 0.6x their time). The NumPy form is kept as generated code when
        it wins.
        """
        numpy_run = self._numpy_code()
        if numpy_run is None:
            return True
        kernels(*arrays)  # untimed: a kernel compiles for an alignment met again here
        best = {"kernels": np.inf, "numpy": np.inf}
        started = time.perf_counter()
        for rounds in range(1, 26):
            for name, fn in (("kernels", kernels), ("numpy", numpy_run)):
                began = time.perf_counter()
                fn(*arrays)
                best[name] = min(best[name], time.perf_counter() - began)
            if best["kernels"] + best["numpy"] > 0.05:
                break  # long runs: one each decides
            if rounds >= 3 and time.perf_counter() - started > 0.02:
                break
        if best["kernels"] < best["numpy"]:
            return True
        self.compiled = numpy_run
        self.info["compiled"] = True
        return False

    def _numpy_code(self) -> Any:
        """The program as generated NumPy code, its instructions of constants alone
        computed once (:mod:`funcdiff.replay._folding`); None when too long."""
        code, template = folded(self.code, self.template, set(_flat(self.outputs)), _OPCODES)
        self.info["folded"] = len(self.code) - len(code)
        return compile_program(code, self.inputs, template, self.outputs, _OPCODES)

    def interpret(self, arrays: Sequence[np.ndarray]) -> Any:
        """:meth:`run` by the instruction loop (for programs too long to compile)."""
        v = self.template.copy()
        for slot, a in zip(self.inputs, arrays):
            v[slot] = a
        for ins in self.code:
            op = ins[0]
            if op == _BINARY:
                v[ins[5]] = ins[1](v[ins[2]], v[ins[3]])
            elif op == _UNARY:
                v[ins[4]] = ins[1](v[ins[2]])
            elif op == _BINARY_CONST_RIGHT:
                v[ins[5]] = ins[1](v[ins[2]], ins[3])
            elif op == _BINARY_CONST_LEFT:
                v[ins[5]] = ins[1](ins[2], v[ins[3]])
            elif op == _GENERAL:
                result = ins[1](*_fill(ins[2], v), **{k: _fill(t, v) for k, t in ins[3].items()})
                for slot, value in zip(ins[4], _unpack(result, len(ins[4]))):
                    v[slot] = value
                continue
            elif op == _GUARD:
                _guard(v[ins[1]], ins[2], ins[3])
                continue
            elif op == _COPY_INTO:
                np.copyto(v[ins[1]], v[ins[2]], casting="same_kind")
                continue
            elif op == _SET_ITEM:
                v[ins[1]][_fill(ins[2], v)] = _fill(ins[3], v)
                continue
            elif op == _INPLACE:
                ins[1](v[ins[2]], _fill(ins[3], v), out=v[ins[2]])
                continue
            elif op == _COPY:
                v[ins[2]] = copy_array(v[ins[1]])
                continue
            if ins[-2]:  # a ufunc of 0-d arrays returns a NumPy scalar: a 0-d array, as eagerly
                v[ins[-1]] = as_array(v[ins[-1]])
        return _emit(_gather(self.outputs, v), self.copies)


def _guard(value: Any, kind: str, expected: Any) -> None:
    """Raise :class:`GuardFailure` unless the conversion gives what it gave when recorded."""
    if kind == "bool":
        got = bool(value)
    elif kind == "int":
        got = value.__index__()
    elif kind == "item":
        got = value.item()
    else:
        if not (value.shape == expected.shape and np.array_equal(value, expected, equal_nan=True)):
            raise GuardFailure(kind, expected, value)
        return
    if got != expected and not (got != got and expected != expected):
        raise GuardFailure(kind, expected, got)


def _emit(values: Any, copies: Any) -> Any:
    """The outputs handed to the caller: never an input, a constant of the program or a
    view of one (a later call, or the caller, could change it)."""
    if values is None:
        return None
    if isinstance(copies, bool):
        if copies or (values.base is not None and not jit.kernel_output(values)):
            return copy_array(values)
        if type(values) is np.ndarray and not values.flags.writeable:
            return copy_array(values)  # a constant the program computed once (_folding)
        return values
    return tuple(_emit(v, c) for v, c in zip(values, copies))


def _flat(structure: Any) -> list[int]:
    if structure is None:
        return []
    if isinstance(structure, int):
        return [structure]
    return [s for item in structure for s in _flat(item)]


def _spec(value: Any) -> tuple | None:
    if isinstance(value, (np.ndarray, np.generic)):
        return (tuple(value.shape), value.dtype)
    return None


def _copies(structure: Any, template: list, inputs: set) -> Any:
    if structure is None:
        return None
    if isinstance(structure, int):
        return structure in inputs or template[structure] is not None
    return tuple(_copies(s, template, inputs) for s in structure)


@contextlib.contextmanager
def recording(graph_free: bool = False) -> Iterator[ReplayTracer]:
    """Record every operation of this thread on Tensors, grad mode on, into the
    :class:`ReplayTracer` it yields; mark inputs with ``tracer.input(t)``.

    ``graph_free`` lets the engine run a backward pass traced under ``create_graph``
    without recording a graph of it (a first-order derivative). Raises RuntimeError
    inside another recording or sparsity detection.
    """
    tracer = ReplayTracer(graph_free=graph_free)
    with tracing.installed(tracer), grad_mode.enable_grad():
        yield tracer


def build(tracer: ReplayTracer, outputs: Any, compile: bool | str = False) -> Program:
    """The program computing ``outputs`` (a nested structure of slot indices).

    ``compile`` (``False``, ``True`` or ``"auto"``, resolved by
    :func:`funcdiff.replay.jit.resolve`) lowers it to XLA kernels at its first run.
    """
    needed: set[int] = set()

    def want(structure: Any) -> None:
        if isinstance(structure, int):
            needed.add(structure)
        elif structure is not None:
            for s in structure:
                want(s)

    want(outputs)
    kept: list[tuple] = []
    for ins in reversed(tracer.code):
        kind = ins[0]
        if kind == CALL:
            _, fn, args_t, kwargs_t, outs, used = ins
            if not any(o in needed for o in outs):
                continue
            needed.update(used if used is not None else _uses(args_t) + _uses(kwargs_t))
        elif kind == GUARD:
            needed.add(ins[1])
        elif kind in (COPY_INTO, SET_ITEM, INPLACE_UFUNC):
            # Kept whatever is needed: a view of the target taken earlier sees the
            # change, as it does eagerly.
            if kind == COPY_INTO:
                needed.update((ins[1], ins[2]))
            elif kind == SET_ITEM:
                needed.add(ins[1])
                needed.update(_uses(ins[2]) + _uses(ins[3]))
            else:
                needed.add(ins[2])
                needed.update(_uses(ins[3]))
        elif kind == COPY:
            if ins[2] not in needed:
                continue
            needed.add(ins[1])
        kept.append(ins)
    kept.reverse()

    template: list = [None] * len(tracer.values)
    for slot in needed:
        if tracer.kind[slot] == "const":
            template[slot] = tracer.values[slot]
    code = [_lower(ins, tracer) for ins in kept]
    specs = None
    if compile is not False:
        specs = [_spec(value) for value in tracer.values]
    return Program(template, tuple(tracer.inputs), code, outputs, len(tracer.code), specs, compile)


def _lower(ins: tuple, tracer: ReplayTracer) -> tuple:
    kind = ins[0]
    if kind == CALL:
        _, fn, args_t, kwargs_t, outs, _ = ins
        if not kwargs_t and len(outs) == 1 and isinstance(fn, np.ufunc) and fn.nout == 1:
            slots = [type(a) is Slot for a in args_t]
            wrap = np.ndim(tracer.values[outs[0]]) == 0
            out = outs[0]
            if len(args_t) == 1 and slots[0]:
                return (_UNARY, fn, args_t[0].index, wrap, out)
            if len(args_t) == 2 and all(_plain(a) for a in args_t):
                if slots == [True, True]:
                    return (_BINARY, fn, args_t[0].index, args_t[1].index, wrap, out)
                if slots == [True, False]:
                    return (_BINARY_CONST_RIGHT, fn, args_t[0].index, args_t[1], wrap, out)
                if slots == [False, True]:
                    return (_BINARY_CONST_LEFT, fn, args_t[0], args_t[1].index, wrap, out)
        return (_GENERAL, fn, args_t, kwargs_t, outs)
    if kind == GUARD:
        return (_GUARD, ins[1], ins[2], ins[3])
    if kind == COPY_INTO:
        return (_COPY_INTO, ins[1], ins[2])
    if kind == SET_ITEM:
        return (_SET_ITEM, ins[1], ins[2], ins[3])
    if kind == INPLACE_UFUNC:
        return (_INPLACE, ins[1], ins[2], ins[3])
    return (_COPY, ins[1], ins[2])


def _plain(arg: Any) -> bool:
    """A slot or a constant that is not a sequence (which a ufunc would convert anew)."""
    return type(arg) is Slot or not isinstance(arg, (list, tuple))


_OPCODES = {
    "unary": _UNARY,
    "binary": _BINARY,
    "right": _BINARY_CONST_RIGHT,
    "left": _BINARY_CONST_LEFT,
    "general": _GENERAL,
    "guard": _GUARD,
    "copy_into": _COPY_INTO,
    "set_item": _SET_ITEM,
    "inplace": _INPLACE,
    "copy": _COPY,
    "unpack": _unpack,
    "fill": _fill,
    "guard_check": _guard,
    "slot": Slot,
    "inplace_kinds": (_COPY_INTO, _SET_ITEM, _INPLACE),
}
