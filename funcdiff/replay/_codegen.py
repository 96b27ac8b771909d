"""A recorded program as straight-line Python: one line per NumPy call.

Interpreting a program (look up the instruction, dispatch on its kind, fetch slots from
a list) costs a few hundred nanoseconds per call, as much as a NumPy ufunc on a small
array. Written out as the source of one function, with every slot a local variable and
every callable and constant a closure variable, the same calls run with no dispatch at
all. Compiling costs about as much as one eager run of the program, once per program.

Scatters are added straight into the sum they feed (:func:`accumulate_scatters`): the
backward pass of a slice ``x[1:]`` is a scatter into zeros, ``index_add(g, index,
shape)``, which the next instruction adds to another cotangent of the same shape. A copy
of that operand with ``g`` added at ``index`` gives the same numbers with one full-size
pass instead of three. Only the straight-line code does this: the interpreter runs the
instructions as recorded, and in compiled kernels XLA fuses the pair itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core.backends import as_array, copy_array
from funcdiff.replay._tracer import Slot
from funcdiff.rules.indexing import index_add

__all__ = ["accumulate_scatters", "as_call", "compile_program", "scatter_added", "slots_used"]

#: Programs longer than this are interpreted (compiling them would cost more than the
#: interpreter loses over the calls a typical user makes).
MAX_LINES = 60_000

_SCALAR_CONSTANTS = (bool, int, float, type(None), str)


class _Names:
    """Closure names for the callables and constants a program uses."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.index: dict[int, str] = {}

    def name(self, value: Any) -> str:
        key = id(value)
        found = self.index.get(key)
        if found is None:
            found = f"k{len(self.values)}"
            self.values.append(value)
            self.index[key] = found
        return found


def _expr(template: Any, names: _Names) -> str:
    if type(template) is Slot:
        return f"v{template.index}"
    if type(template) in (list, tuple) and any(type(t) is Slot for t in template):
        items = ", ".join(_expr(t, names) for t in template)
        if type(template) is list:
            return f"[{items}]"
        return f"({items}{',' if len(template) == 1 else ''})"
    if type(template) in _SCALAR_CONSTANTS and (
        type(template) is not float or np.isfinite(template)
    ):
        return repr(template)
    return names.name(template)


def compile_program(code: list, inputs: tuple, template: list, outputs: Any, lower: dict) -> Any:
    """The program as a Python function of its input arrays, or None when too long.

    ``lower`` maps the interpreter's opcodes to their names (see ``program``).
    """
    if len(code) > MAX_LINES:
        return None
    code = accumulate_scatters(code, set(_flat(outputs)), lower)
    names = _Names()
    helpers = {
        "_as": lambda x: x if type(x) is np.ndarray else as_array(x),
        "_copyto": np.copyto,
        "_copy": copy_array,
        "_unpack": lower["unpack"],
        "_guard": lower["guard_check"],
    }
    lines = []
    for slot, value in enumerate(template):
        if value is not None:
            lines.append(f"v{slot} = {names.name(value)}")
    # Each intermediate is dropped after its last use, so that its memory is reused as
    # eagerly (a replay holding every intermediate of a large problem would fault in
    # fresh pages at every call).
    keep = set(_flat(outputs)) | set(inputs) | {s for s, v in enumerate(template) if v is not None}
    last: dict[int, int] = {}
    for k, ins in enumerate(code):
        for slot in slots_used(ins, lower):
            last[slot] = k
    drop: dict[int, list[int]] = {}
    for slot, k in last.items():
        if slot not in keep:
            drop.setdefault(k, []).append(slot)
    for k, ins in enumerate(code):
        op = ins[0]
        if op in (lower["unary"], lower["binary"], lower["right"], lower["left"]):
            fn, out = names.name(ins[1]), ins[-1]
            if op == lower["unary"]:
                call = f"{fn}(v{ins[2]})"
            elif op == lower["binary"]:
                call = f"{fn}(v{ins[2]}, v{ins[3]})"
            elif op == lower["right"]:
                call = f"{fn}(v{ins[2]}, {_expr(ins[3], names)})"
            else:
                call = f"{fn}({_expr(ins[2], names)}, v{ins[3]})"
            lines.append(f"v{out} = _as({call})" if ins[-2] else f"v{out} = {call}")
        elif op == lower["general"]:
            _, fn, args_t, kwargs_t, outs = ins
            args = [_expr(a, names) for a in args_t]
            args += [f"{k}={_expr(v, names)}" for k, v in kwargs_t.items()]
            call = f"{names.name(fn)}({', '.join(args)})"
            if outs and getattr(fn, "returns_arrays", False):
                # A compiled kernel: a tuple of ndarrays, one per output.
                lines.append(f"{', '.join(f'v{o}' for o in outs)}, = {call}")
            elif len(outs) == 1:
                lines.append(f"v{outs[0]}, = _unpack({call}, 1)")
            elif outs:
                lines.append(f"{', '.join(f'v{o}' for o in outs)}, = _unpack({call}, {len(outs)})")
            else:
                lines.append(call)
        elif op == lower["guard"]:
            lines.append(f"_guard(v{ins[1]}, {ins[2]!r}, {names.name(ins[3])})")
        elif op == lower["copy_into"]:
            lines.append(f"_copyto(v{ins[1]}, v{ins[2]}, casting='same_kind')")
        elif op == lower["set_item"]:
            lines.append(f"v{ins[1]}[{_expr(ins[2], names)}] = {_expr(ins[3], names)}")
        elif op == lower["inplace"]:
            lines.append(f"{names.name(ins[1])}(v{ins[2]}, {_expr(ins[3], names)}, out=v{ins[2]})")
        else:
            lines.append(f"v{ins[2]} = _copy(v{ins[1]})")
        if k in drop:
            lines.append("del " + ", ".join(f"v{slot}" for slot in drop[k]))
    lines.append(f"return {_result(outputs)}")
    params = ", ".join(f"v{s}" for s in inputs)
    body = "\n".join("        " + line for line in lines)
    closure = ", ".join(f"k{i}" for i in range(len(names.values)))
    source = f"def _make({closure}):\n    def _run({params}):\n{body}\n    return _run\n"
    scope = dict(helpers)
    exec(compile(source, "<funcdiff.replay program>", "exec"), scope)  # noqa: S102
    return scope["_make"](*names.values)


def _result(structure: Any) -> str:
    if structure is None:
        return "None"
    if isinstance(structure, int):
        return f"v{structure}"
    items = ", ".join(_result(s) for s in structure)
    return f"({items}{',' if len(structure) == 1 else ''})"


def _flat(structure: Any) -> list[int]:
    if structure is None:
        return []
    if isinstance(structure, int):
        return [structure]
    return [s for item in structure for s in _flat(item)]


def _template_slots(template: Any) -> list[int]:
    if type(template) is Slot:
        return [template.index]
    if type(template) in (list, tuple):
        return [s for t in template for s in _template_slots(t)]
    if isinstance(template, dict):
        return [s for t in template.values() for s in _template_slots(t)]
    return []


def as_call(ins: tuple, lower: dict) -> tuple | None:
    """A call instruction in one form, ``(fn, args, kwargs, outs)`` with slot references
    in ``args`` and ``kwargs`` (``fn`` None for a copy); None for a guard or an in-place
    write."""
    op, slot = ins[0], lower["slot"]
    if op == lower["unary"]:
        return (ins[1], (slot(ins[2]),), {}, (ins[-1],))
    if op == lower["binary"]:
        return (ins[1], (slot(ins[2]), slot(ins[3])), {}, (ins[-1],))
    if op == lower["right"]:
        return (ins[1], (slot(ins[2]), ins[3]), {}, (ins[-1],))
    if op == lower["left"]:
        return (ins[1], (ins[2], slot(ins[3])), {}, (ins[-1],))
    if op == lower["general"]:
        return (ins[1], ins[2], ins[3], tuple(ins[4]))
    if op == lower["copy"]:
        return (None, (slot(ins[1]),), {}, (ins[2],))
    return None


def slots_used(ins: tuple, lower: dict) -> list[int]:
    """Every slot an instruction reads or writes (its outputs too: a value never read
    is dropped right after the line that made it)."""
    op = ins[0]
    if op in (lower["unary"], lower["binary"], lower["right"], lower["left"]):
        used = [ins[-1]]
        if op == lower["unary"]:
            return used + [ins[2]]
        if op == lower["binary"]:
            return used + [ins[2], ins[3]]
        return used + ([ins[2]] if op == lower["right"] else [ins[3]])
    if op == lower["general"]:
        return list(ins[4]) + _template_slots(ins[2]) + _template_slots(ins[3])
    if op == lower["guard"]:
        return [ins[1]]
    if op == lower["copy_into"]:
        return [ins[1], ins[2]]
    if op == lower["set_item"]:
        return [ins[1]] + _template_slots(ins[2]) + _template_slots(ins[3])
    if op == lower["inplace"]:
        return [ins[2]] + _template_slots(ins[3])
    return [ins[1], ins[2]]


_SCATTERS = {id(index_add), id(getattr(index_add, "__wrapped__", index_add))}


def scatter_added(total: Any, values: Any, index: tuple, shape: tuple) -> Any:
    """``index_add(values, index, shape) + total`` without the array of zeros.

    Equal to it up to the sign of zeros outside ``index`` (``0.0 + -0.0`` is ``0.0``;
    the copy keeps ``-0.0``). Any other case (broadcasting, a dtype the sum changes,
    batch axes riding along, a non-ndarray) is computed as written.
    """
    if (
        type(total) is np.ndarray
        and type(values) is np.ndarray
        and total.shape == tuple(shape)
        and total.dtype == np.result_type(total, values)
    ):
        out = total.copy()
        target = out[index]  # a view, unless every item is an int (a scalar then)
        if type(target) is np.ndarray and target.shape == values.shape:
            target += values
            return out
    return np.add(index_add(values, index, shape), total)


def accumulate_scatters(code: list, outputs: set[int], lower: dict) -> list:
    """``code`` with each scatter whose only reader is an addition merged into that
    addition (a :func:`scatter_added` call in the addition's place).

    ``outputs`` are the slots the program returns; ``lower`` names the opcodes (see
    ``funcdiff.replay.program``).
    """
    general, binary, slot_type = lower["general"], lower["binary"], lower["slot"]
    readers: dict[int, list[int]] = {}
    for k, ins in enumerate(code):
        for s in set(slots_used(ins, lower)):
            readers.setdefault(s, []).append(k)
    writes = [k for k, ins in enumerate(code) if ins[0] in lower["inplace_kinds"]]
    merged: dict[int, tuple] = {}
    dropped: set[int] = set()
    for k, ins in enumerate(code):
        if ins[0] != general or id(ins[1]) not in _SCATTERS or ins[3] or len(ins[4]) != 1:
            continue
        args, result = ins[2], ins[4][0]
        if len(args) != 3 or type(args[0]) is not slot_type or result in outputs:
            continue
        if not _basic(args[1]) or type(args[2]) is slot_type:
            continue  # an index array would make ``out[index]`` a copy, not a view
        users = [u for u in readers.get(result, []) if u != k]
        if len(users) != 1 or users[0] in merged:
            continue
        j = users[0]
        add = code[j]
        if add[1] is not np.add or any(k < w < j for w in writes):
            continue  # (a write in between would change what the scatter reads)
        if add[0] == binary and add[2] != add[3]:
            other: Any = slot_type(add[3] if add[2] == result else add[2])
        elif add[0] == lower["right"]:
            other = add[3]  # a constant of the program: copied, never written
        elif add[0] == lower["left"]:
            other = add[2]
        else:
            continue
        operands = (other, args[0], args[1], args[2])
        merged[j] = (general, scatter_added, operands, {}, (add[-1],))
        dropped.add(k)
    if not merged:
        return code
    return [merged.get(k, ins) for k, ins in enumerate(code) if k not in dropped]


def _basic(index: Any) -> bool:
    """A tuple of ints, slices and None: ``out[index]`` is a view to add into. Stricter
    than the rules' own test: a bool is an int there, but indexes as a mask (a copy)."""
    return type(index) is tuple and all(
        i is None or type(i) in (int, slice) or isinstance(i, np.integer) for i in index
    )
