"""Sparsity detection: run the function once on Tensors and follow every operation.

:class:`PatternTracer` is installed as the thread's tracer
(:func:`funcdiff._core.tracing.installed`) for one run of the user's function. Each
operation reports itself after it ran; the tracer looks up its inputs' patterns,
applies the operation's pattern rule and stores the outputs' patterns. It also
records every conversion of a Tensor to a Python value (the branches the program
takes) as a guard, which a prepared object checks at every call.

Taint: a value computed from the inputs, even one with no derivative (a comparison,
``argmax``), is *tainted*. An index or a condition that is tainted may differ at
another point, so the rules that read one give the dense pattern instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from funcdiff._core import grad_mode
from funcdiff._core.tensor import Tensor
from funcdiff._core.tracing import BaseTracer, installed
from funcdiff.ops.selection import plain
from funcdiff.rules.structure import structure_of
from funcdiff.sparse._hessian import HessianAccumulator
from funcdiff.sparse._pattern_rules import (
    Inputs,
    assigned_positions,
    propagate,
    setitem_pattern,
)
from funcdiff.sparse._patterns import Pattern, identity, union

__all__ = ["PatternTracer", "GuardRecorder", "Guard", "run_traced", "same_outcome"]

#: What a conversion of a Tensor gave: ("bool", True), ("int", 3), ("array", copy) ...
Guard = tuple


def _frozen(kind: str, value: Any) -> Any:
    if kind == "array":
        return np.array(value, copy=True)
    return value


def same_outcome(a: Guard, b: Guard) -> bool:
    """Whether two conversions gave the same thing (kind and value)."""
    if a[0] != b[0]:
        return False
    if a[0] == "array":
        x, y = a[1], b[1]
        return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True)
    x, y = a[1], b[1]
    return x == y or (x != x and y != y)  # nan converts to nan


class GuardRecorder(BaseTracer):
    """Records every conversion of a Tensor to a Python value, in order (an observer;
    as :class:`PatternTracer`'s base, a tracer)."""

    def __init__(self) -> None:
        self.seen: list[tuple[Guard, bool]] = []

    def concretize(self, tensor: Tensor, kind: str, value: Any) -> None:
        self.seen.append(((kind, _frozen(kind, value)), True))

    def outcomes(self) -> list[Guard]:
        return [g for g, _ in self.seen]


class PatternTracer(GuardRecorder):
    """Propagates patterns through one run; see the module docstring.

    Parameters
    ----------
    inputs : sequence of Tensor
        The differentiated inputs; their elements, flattened in C order and
        concatenated, are the pattern's columns.
    hessian : bool
        Also accumulate the Hessian pattern.
    """

    #: Detection runs no backward pass of its own.
    graph_free = False

    def __init__(self, inputs: Sequence[Tensor], hessian: bool = False) -> None:
        super().__init__()
        self.ncols = sum(int(t.data.size) for t in inputs)
        self.info: dict[int, tuple[Pattern | None, bool]] = {}
        self.keep: list[Any] = []  # every Tensor seen stays alive, so ids stay unique
        self.acc = HessianAccumulator(self.ncols) if hessian else None
        self.fallbacks: list[str] = []
        self._everything: Pattern | None = None
        offset = 0
        for t in inputs:
            self._set(t, identity(offset, int(t.data.size), self.ncols), True)
            offset += int(t.data.size)

    # ------------------------------------------------------------------ bookkeeping
    def _set(self, t: Tensor, pattern: Pattern | None, tainted: bool) -> None:
        self.info[id(t)] = (pattern, tainted)
        self.keep.append(t)

    def lookup(self, t: Tensor) -> tuple[Pattern | None, bool]:
        """``(pattern, tainted)`` of a Tensor argument."""
        found = self.info.get(id(t))
        if found is not None:
            return found
        if t.requires_grad and t.grad_fn is not None:
            # Made by something the tracer did not see: it may depend on anything.
            return self._dense(t.data.size), True
        return None, False

    def _dense(self, size: int) -> Pattern:
        if self._everything is None:
            row = sp.csr_array(np.ones((1, self.ncols), dtype=bool))
            self._everything = Pattern(row)
        return Pattern(self._everything.base, np.zeros(size, np.int64))

    def pattern_of(self, value: Any) -> Pattern | None:
        """The pattern of an output of the function (None: independent of the inputs)."""
        if not isinstance(value, Tensor):
            return None
        return self.lookup(value)[0]

    # ------------------------------------------------------------------ events
    def op(
        self, rule: Any, args: Sequence, kwargs: dict, paths: list, tensors: list, outputs: list
    ) -> None:
        infos = [self.lookup(t) for t in tensors]
        tainted = any(t for _, t in infos)
        if not tainted:
            for o in outputs:
                self._set(o, None, False)
            return
        live = [o.requires_grad for o in outputs]
        if not any(live):
            for o in outputs:
                self._set(o, None, True)
            return
        # Installed on every registered rule; a rule made later is looked up once here.
        struct = rule.structure or structure_of(rule)
        if struct is None or struct.pattern == "dense":
            self.fallbacks.append(rule.name)
        inputs = Inputs(rule, paths, tensors, infos)
        patterns = propagate(rule, struct, args, kwargs, inputs, outputs, self.acc)
        for o, p, is_live in zip(outputs, patterns, live):
            self._set(o, p if is_live else None, True)

    def derived(self, out: Tensor, sources: Sequence[Any]) -> None:
        """``out`` was computed from ``sources`` with no derivative (``detach``)."""
        tainted = any(self.lookup(s)[1] for s in sources if isinstance(s, Tensor))
        kept = self.info.get(id(out))
        pattern = kept[0] if kept is not None and any(s is out for s in sources) else None
        self._set(out, pattern, tainted or (kept is not None and kept[1]))

    def foreign(self, func: Any, args: Sequence, kwargs: dict, outputs: Sequence[Tensor]) -> None:
        """A NumPy function without a rule ran on data (no input required grad): its
        outputs are constants to funcdiff's derivatives, tainted by their inputs."""
        sources = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        for a in (*args, *kwargs.values()):
            if type(a) in (list, tuple):
                sources += [item for item in a if isinstance(item, Tensor)]
        for o in outputs:
            self.derived(o, sources)

    def inplace(self, ufunc: Any, t: Tensor, other: Any) -> None:
        """``t op= other`` that records nothing (nothing requires grad, or no_grad)."""
        self.derived(t, (t, other))

    def alias(self, new: Tensor, source: Tensor) -> None:
        """``new`` stands for the value of ``source`` (an in-place history rebase)."""
        self._set(new, *self.lookup(source))

    def opaque(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """A custom Function: outputs depend on all of its inputs' dependencies."""
        infos = [self.lookup(t) for t in inputs]
        tainted = any(t for _, t in infos)
        rows = union([Pattern(p.union_row()) for p, _ in infos if p is not None])
        for o in outputs:
            pattern = None
            if rows is not None and o.requires_grad:
                pattern = Pattern(rows.rows(), np.zeros(o.data.size, np.int64))
                if self.acc is not None:
                    self.acc.square(Pattern(rows.rows()))
            self._set(o, pattern, tainted)
        self.fallbacks.append("custom Function")

    def setitem(self, t: Tensor, index: Any, value: Any) -> None:
        """``t[index] = value``, reported before the write."""
        old, old_tainted = self.lookup(t)
        index_tainted = _any_tainted(self, index)
        if isinstance(value, Tensor):
            vpattern, vtainted = self.lookup(value)
            vshape = value.data.shape
        else:
            vpattern, vtainted, vshape = None, False, np.shape(value)
        if vpattern is not None:
            # The value broadcasts to the indexed region.
            region = np.empty(t.data.shape, dtype=np.int8)[plain(index)].shape
            vpattern = vpattern.take(assigned_positions(vshape, region))
            vshape = region
        new = setitem_pattern(old, t.data.shape, index, index_tainted, vpattern, vshape)
        self._set(t, new, old_tainted or vtainted or index_tainted)

    def refuse(self, what: str) -> None:
        """Hooks change gradients, never which inputs an output depends on."""

    def concretize(self, tensor: Tensor, kind: str, value: Any) -> None:
        tainted = self.lookup(tensor)[1] or id(tensor) not in self.info
        self.seen.append(((kind, _frozen(kind, value)), tainted))

    def guards(self) -> list[tuple[Guard, bool]]:
        """Every conversion in order, with whether it depended on the inputs."""
        return list(self.seen)


def _any_tainted(tracer: PatternTracer, index: Any) -> bool:
    if isinstance(index, Tensor):
        return tracer.lookup(index)[1]
    if isinstance(index, (tuple, list)):
        return any(_any_tainted(tracer, i) for i in index)
    return False


def run_traced(
    f: Callable[..., Any], inputs: Sequence[Tensor], args: Sequence[Any], hessian: bool
) -> tuple[Any, PatternTracer]:
    """Run ``f(*inputs, *args)`` under a fresh tracer; returns ``(output, tracer)``."""
    tracer = PatternTracer(inputs, hessian)
    with grad_mode.enable_grad(), installed(tracer):
        out = f(*inputs, *args)
    return out, tracer
