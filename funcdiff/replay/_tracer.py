"""Recording a computation on Tensors as a flat list of NumPy calls on slots.

:class:`ReplayTracer` is installed as the thread's tracer while the computation runs
once, eagerly: the function's forward and, for a derivative, the engine's own backward
with ``create_graph=True``, in which every vjp runs as recorded NumPy calls. Each
reported operation becomes an instruction ``fn(*args) -> slots``, where ``args`` holds
slot references in place of Tensors and keeps every other argument as a constant. So
the program is exactly the sequence of NumPy calls the eager run made.

A Tensor is found by its identity or by its array's (the engine re-wraps saved arrays
in new Tensors); a Tensor the tracer never saw is a constant of the program (created
inside the function from literals, or zeros the engine made up). Conversions of values
computed from the inputs to Python values (``if``, ``item()``) become guards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from funcdiff._core.backends import copy_array
from funcdiff._core.tensor import Tensor

__all__ = ["ReplayTracer", "Slot", "TraceError"]


class TraceError(RuntimeError):
    """The function does something replay cannot reproduce."""


class Slot:
    """A reference to a value of the program, in an instruction's argument template."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"v{self.index}"


# Instruction kinds.
CALL = 0  # outs = unpack(fn(*args, **kwargs))
COPY_INTO = 1  # np.copyto(v[target], v[source]): an in-place change of a value
SET_ITEM = 2  # v[target][index] = value
INPLACE_UFUNC = 3  # ufunc(v[target], other, out=v[target])
GUARD = 4  # check a conversion's outcome
COPY = 5  # outs = np.array(v[a], copy=True)


class ReplayTracer:
    """Records the instructions of one run (see the module docstring)."""

    def __init__(self, graph_free: bool = False) -> None:
        # Whether the engine may run the traced backward pass without recording a graph
        # of it (a first-order derivative: nothing differentiates the result again).
        self.graph_free = graph_free
        self.values: list[Any] = []  # the trace-time value of every slot
        self.depends: list[bool] = []  # whether a slot's value depends on an input
        self.kind: list[str] = []  # "input", "const" or "op"
        self.by_tensor: dict[int, int] = {}
        self.by_array: dict[int, int] = {}
        self.keep: list[Any] = []  # every Tensor and array seen stays alive: ids stay unique
        self.code: list[tuple] = []
        self.inputs: list[int] = []

    # ------------------------------------------------------------------ slots
    def _new(self, value: Any, depends: bool, kind: str) -> int:
        self.values.append(value)
        self.depends.append(depends)
        self.kind.append(kind)
        return len(self.values) - 1

    def _bind(self, t: Tensor, slot: int) -> None:
        self.by_tensor[id(t)] = slot
        self.by_array[id(t.data)] = slot
        self.keep.append(t)

    def input(self, t: Tensor) -> int:
        """Make ``t`` an input of the program."""
        slot = self._new(t.data, True, "input")
        self._bind(t, slot)
        self.inputs.append(slot)
        return slot

    def slot_of(self, t: Tensor) -> int:
        """The slot of a Tensor argument (a new constant for one never seen)."""
        slot = self.by_tensor.get(id(t))
        if slot is None:
            slot = self.by_array.get(id(t.data))
            if slot is None:
                slot = self._new(t.data, False, "const")
                self.by_array[id(t.data)] = slot
                self.keep.append(t.data)
            self.by_tensor[id(t)] = slot
            self.keep.append(t)
        return slot

    def _template(self, value: Any) -> Any:
        """An argument with slot references in place of Tensors (one level into lists)."""
        if isinstance(value, Tensor):
            return Slot(self.slot_of(value))
        if type(value) in (list, tuple):
            if any(isinstance(v, Tensor) for v in value):
                return type(value)(self._template(v) for v in value)
        return value

    def _depends(self, template: Any) -> bool:
        if isinstance(template, Slot):
            return self.depends[template.index]
        if type(template) in (list, tuple):
            return any(self._depends(v) for v in template)
        return False

    def outputs_of(self, outputs: Sequence[Tensor], depends: bool) -> tuple[int, ...]:
        slots = []
        for o in outputs:
            slot = self._new(o.data, depends, "op")
            self._bind(o, slot)
            slots.append(slot)
        return tuple(slots)

    # ------------------------------------------------------------------ events
    def op(
        self, rule: Any, args: Sequence, kwargs: dict, paths: list, tensors: list, outputs: list
    ) -> None:
        """An operation of ``call``: the Tensors at ``paths`` (positions, or positions
        and an index in a list) become slot references."""
        depends = False
        args_t: Any = args
        kwargs_t: Any = kwargs or {}
        used: list[int] = []
        if tensors:
            args_t, kwargs_t = list(args), dict(kwargs) if kwargs else {}
            by_tensor, flags = self.by_tensor, self.depends
            for (key, sub), t in zip(paths, tensors):
                slot = by_tensor.get(id(t))
                if slot is None:
                    slot = self.slot_of(t)
                depends = depends or flags[slot]
                used.append(slot)
                target = kwargs_t if isinstance(key, str) else args_t
                if sub is None:
                    target[key] = Slot(slot)
                else:
                    items = list(target[key])
                    items[sub] = Slot(slot)
                    target[key] = type(target[key])(items)
        outs = self.outputs_of(outputs, depends)
        self.code.append((CALL, rule.fn, tuple(args_t), kwargs_t, outs, used))

    def foreign(self, func: Any, args: Sequence, kwargs: dict, outputs: Sequence[Tensor]) -> None:
        args_t = tuple(self._template(a) for a in args)
        kwargs_t = {k: self._template(v) for k, v in kwargs.items()}
        depends = self._depends(args_t) or self._depends(tuple(kwargs_t.values()))
        outs = self.outputs_of(outputs, depends)
        # Run as eagerly: on the arrays themselves (the function has no rule).
        self.code.append((CALL, func, args_t, kwargs_t, outs, None))

    def derived(self, out: Tensor, sources: Sequence[Any]) -> None:
        """``out = source.detach()``: the same array, so the same slot."""
        source = sources[0]
        if not isinstance(source, Tensor) or out.data is not source.data:
            raise TraceError("a Tensor was derived from another outside funcdiff's operations")
        self.by_tensor[id(out)] = self.slot_of(source)
        self.keep.append(out)

    def alias(self, new: Tensor, source: Tensor) -> None:
        if new.data is source.data:
            self.by_tensor[id(new)] = self.slot_of(source)
            self.keep.append(new)
        elif id(new) in self.by_tensor or id(new.data) in self.by_array:
            # ``t op= x`` recorded: the new value is copied into t's own array, as eagerly
            # (views of t see it).
            target, src = self.slot_of(new), self.slot_of(source)
            self.code.append((COPY_INTO, target, src))
            self.depends[target] = self.depends[target] or self.depends[src]
        else:
            # A snapshot of t's value before an in-place change: a copy.
            src = self.slot_of(source)
            slot = self._new(new.data, self.depends[src], "op")
            self._bind(new, slot)
            self.code.append((COPY, src, slot))

    def setitem(self, t: Tensor, index: Any, value: Any) -> None:
        target = self.slot_of(t)
        index_t, value_t = self._template(index), self._template(value)
        self.code.append((SET_ITEM, target, index_t, value_t))
        self.depends[target] = (
            self.depends[target] or self._depends(index_t) or self._depends(value_t)
        )

    def inplace(self, ufunc: Any, t: Tensor, other: Any) -> None:
        target = self.slot_of(t)
        other_t = self._template(other)
        self.code.append((INPLACE_UFUNC, ufunc, target, other_t))
        self.depends[target] = self.depends[target] or self._depends(other_t)

    def opaque(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        # A custom Function: its forward ran on Tensors and was recorded op by op; its
        # outputs are those Tensors, or new ones around the same arrays.
        for o in outputs:
            if id(o) not in self.by_tensor and id(o.data) not in self.by_array:
                raise TraceError(
                    "a custom Function returned an array funcdiff did not see computed; "
                    "replay records a Function's forward only when it runs on Tensors"
                )
            if id(o) not in self.by_tensor:  # then its array was seen (checked above)
                self.by_tensor[id(o)] = self.by_array[id(o.data)]
            self.keep.append(o)

    def refuse(self, what: str) -> None:
        """Something a replay cannot reproduce: raised at trace time."""
        raise TraceError(
            f"{what} inside a replayed function: a hook runs in the recorded backward pass "
            "once, at trace time, and never again in a replay. Register hooks outside, "
            "or differentiate eagerly with funcdiff.grad."
        )

    def concretize(self, tensor: Tensor, kind: str, value: Any) -> None:
        slot = self.by_tensor.get(id(tensor), self.by_array.get(id(tensor.data)))
        if slot is None or not self.depends[slot]:
            return  # a constant: the same at every call
        expected = copy_array(value) if kind == "array" else value
        self.code.append((GUARD, slot, kind, expected))
