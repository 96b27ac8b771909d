"""The nodes a recorded rule leaves in the graph.

:class:`RuleNode` is the general node of :func:`funcdiff.ops.dispatch.call`;
:class:`PositionalNode` its lean sibling for positional ufunc calls (operators), the
hot path. Both save what the rule's vjps read and refuse, at backward time, a saved
value that was modified in place since.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from funcdiff._core.backends import as_array, is_array, zeros
from funcdiff._core.graph import (
    FREED_GRAPH_MESSAGE,
    INPLACE,
    Node,
    describe_value,
    raise_modified,
    version_of,
)
from funcdiff._core.tensor import Tensor, wrap
from funcdiff.ops.selection import gather_tangent, selection_sources

if TYPE_CHECKING:
    from funcdiff._core.registry import Rule
    from funcdiff.ops.dispatch import _Plan

__all__ = ["RuleNode", "PositionalNode"]

#: Up to this many elements in a batch of tangents, forward mode moves them through a
#: selection with one gather; above, with one call of the rule per tangent (contiguous
#: copies, where a large gather would be slower).
_GATHER_ELEMENTS = 1 << 16

# A positional argument that is not an array operand (an axis, a shape): no slot.
_NOT_OPERAND = object()

# Shared, never mutated: rules receive **kwargs, which Python copies.
_NO_KWARGS: dict[str, Any] = {}


class _SavedNode(Node):
    """A node of a registered :class:`Rule`: what both node kinds save and check.

    ``checks`` is a flat tuple of ``(label, version)`` pairs for the saved values the
    rule reads, where the label ``"ans"`` stands for the node's own output.
    """

    __slots__ = ("rule", "args", "ans", "checks", "epoch")

    # Set by funcdiff.ops.dispatch when it records the node (no __init__: the hot path).
    rule: Rule
    # The call's arguments (Tensors, arrays, constants); None once released.
    args: Any
    # The output (a tuple of them for a multi-output rule), None once released.
    ans: Any
    checks: tuple
    epoch: int

    # Rules are written with NumPy calls, which a BasisBatch answers (densely if need be).
    accepts_structured = True
    # The vjps run on constant saved values unless create_graph: transposing them
    # records a graph of the cotangent only.
    transposes_on_constants = True

    def name(self) -> str:
        return self.rule.node_name

    def saved_value(self, label: Any) -> Any:
        raise NotImplementedError

    def _operand_slots(self, operands: Sequence[Any], keys: Sequence[Any]) -> tuple:
        """Edge index per operand (None for a constant one), skipping the rule's
        non-differentiable arguments (indices, conditions)."""
        slots: list = []
        edge = 0
        nondiff = self.rule.nondiff_args
        for i, a in enumerate(operands):
            if i in nondiff:
                continue
            n = sum(1 for k in keys if k == i)
            if n:
                slots.extend(range(edge, edge + n))
                edge += n
            elif a is None or isinstance(a, (Tensor, np.ndarray, np.generic, int, float, complex)):
                slots.append(None)
        slots.extend(range(edge, len(self.edges)))  # keyword operands, in order
        return tuple(slots)

    def check_saved(self) -> None:
        """Raise if a value this node's rule reads was modified in place since."""
        checks = self.checks
        for k in range(0, len(checks), 2):
            label = checks[k]
            if label == "ans":
                if self.modified:
                    raise_modified(self, "ans", None, None)
                continue
            current = version_of(self.saved_value(label))
            if current != checks[k + 1]:
                raise_modified(self, label, current, checks[k + 1])
        self.epoch = INPLACE.count  # verified as of now

    def tangent_maps(self) -> tuple[tuple | None, bool]:
        """The rule's tangent map for each edge (None when one is missing or cannot
        apply), and whether a batch of tangents must be padded (:meth:`Rule.tangent_maps`)."""
        raise NotImplementedError

    def saved_inputs(self, create_graph: bool) -> tuple[Sequence[Any], dict, Any]:
        """``(args, kwargs, ans)`` for the rule's maps, checked for in-place changes."""
        raise NotImplementedError

    def tangent(self, tangents: list, create_graph: bool, batched: bool) -> list:
        jvps, pad = self.tangent_maps()
        if jvps is not None:
            # The output tangent: each argument's tangent map applied to its tangent, summed.
            args, kwargs, ans = self.saved_inputs(create_graph)
            # A batch of tangents is aligned with the output's axes, as broadcasting
            # aligns the arguments (elementwise rules).
            ndim = len(self.out_meta[0][0]) + 1 if batched and pad else 0
            total = None
            for jvp, t in zip(jvps, tangents):
                if t is None:
                    continue
                if t.ndim < ndim:
                    t = t.reshape(t.shape[:1] + (1,) * (ndim - t.ndim) + t.shape[1:])
                r = jvp(t, ans, *args, **kwargs) if kwargs else jvp(t, ans, *args)
                if r is NotImplemented:  # the map declines: transpose the vjps
                    break
                total = r if total is None else total + r
            else:
                return [total]
        return NotImplemented  # forward mode transposes the vjps


class RuleNode(_SavedNode):
    """A node that differentiates through a registered :class:`Rule`."""

    __slots__ = ("kwargs", "paths", "multi", "nested", "zero_output", "sources")

    kwargs: Any  # the call's keyword arguments; None once released
    # (argument key, index in a list argument or None) of each differentiated input
    paths: tuple[tuple[int | str, int | None], ...]
    multi: bool
    nested: bool
    # Set on first use: f(0) of a selection, the gather sources of its outputs.
    zero_output: list
    sources: Any

    def tangent(self, tangents: list, create_graph: bool, batched: bool) -> list:
        out = super().tangent(tangents, create_graph, batched)  # the rule's tangent maps
        if out is NotImplemented:
            structure = self.rule.structure
            if structure is not None and structure.pattern == "select":
                selected = self._selection_tangent(tangents, batched)
                if selected is None:
                    return NotImplemented
                out = selected
        return out

    def _selection_tangent(self, tangents: list, batched: bool) -> list | None:
        """A selection is affine in its followed arguments: ``J t = f(t) - f(0)``, with
        every other differentiable argument at zero. One call of the rule's own forward
        per tangent (per batch entry), where transposing the vjp would run a backward."""
        if any(type(key) is not int for key, _ in self.paths):
            return None
        if self.rule.name in ("astype", "copy") and len(tangents) == 1:
            return [tangents[0]]  # forward mode casts it to the output's dtype
        args, kwargs, _ = self.saved_inputs(False)
        kwargs = dict(kwargs) if kwargs else {}
        like = next((getattr(t, "data", t) for t in tangents if t is not None), None)
        followed = set(self.paths)
        nested = {key for key, sub in self.paths if sub is not None}
        args = [list(a) if i in nested else a for i, a in enumerate(args)]
        for key in self.rule.vjps:  # constants at differentiable positions: zero
            if isinstance(key, str):
                if key in kwargs:
                    kwargs[key] = np.zeros_like(as_array(kwargs[key]), dtype=float)
            elif key in nested:
                for j, item in enumerate(args[key]):
                    if (key, j) not in followed:
                        args[key][j] = np.zeros_like(as_array(item), dtype=float)
            elif key < len(args) and is_array(args[key]):
                if (key, None) not in followed:
                    args[key] = np.zeros_like(args[key])
        shapes = [self.edges[i][0].out_meta[self.edges[i][1]][0] for i in range(len(self.paths))]
        positional = cast("tuple[tuple[int, int | None], ...]", self.paths)  # checked above

        def placed(ts: list, batch: tuple) -> list:
            call = [list(a) if i in nested else a for i, a in enumerate(args)]
            for (key, sub), t, shape in zip(positional, ts, shapes):
                value = zeros(batch + tuple(shape), np.float64, like) if t is None else t
                if sub is None:
                    call[key] = value
                else:
                    call[key][sub] = value
            return call

        offset = getattr(self, "zero_output", None)  # f(0), once per node
        if offset is None:
            offset = self.rule.fn(*placed([None] * len(self.paths), ()), **kwargs)
            offset = list(offset) if isinstance(offset, (list, tuple)) else [offset]
            offset = [None if not np.any(o) else o for o in offset]
            self.zero_output = offset

        def apply(ts: list) -> list:
            out = self.rule.fn(*placed(ts, ()), **kwargs)
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            return [o if c is None else o - c for o, c in zip(out, offset)]

        if not batched:
            return apply(tangents)
        live = next(t for t in tangents if t is not None)
        if (
            self.rule.name == "concatenate"
            and self.nested
            and not any(c is not None for c in offset)
        ):
            # Joined along the same axis behind the batch axis: one call for the batch.
            axis = kwargs.pop("axis", args[1] if len(args) > 1 else 0)
            batch = (len(live),)
            items = [
                t
                if np.ndim(t) == np.ndim(item) + 1
                else zeros(batch + np.shape(item), np.float64, like)
                for t, item in zip(placed(tangents, batch)[0], args[0])
            ]
            if axis is None:
                items, axis = [np.reshape(t, (len(live), -1)) for t in items], -1
            return [np.concatenate(items, axis=axis + 1 if axis >= 0 else axis)]
        if np.size(live) <= _GATHER_ELEMENTS and not self.nested:
            # Small batches: one gather of the whole batch beats a call per entry.
            keys = [key for key, _ in self.paths]
            gathered = self._gathered(tangents, args, kwargs, keys)
            if gathered is not None:
                return gathered
        rows = [apply([None if t is None else t[b] for t in tangents]) for b in range(len(live))]
        return [np.stack([r[i] for r in rows]) for i in range(len(self.out_meta))]

    def _gathered(self, tangents: list, args: list, kwargs: dict, keys: list) -> list | None:
        sources = getattr(self, "sources", None)
        shapes = [self.edges[i][0].out_meta[self.edges[i][1]][0] for i in range(len(keys))]
        if sources is None:
            variable = [(key, None, shape) for key, shape in zip(keys, shapes)]
            sources = selection_sources(self.rule, args, kwargs, variable) or ()
            self.sources = sources
        if len(sources) != len(self.out_meta):
            return None
        offsets = [0]
        for shape in shapes[:-1]:
            offsets.append(offsets[-1] + int(np.prod(shape)))
        batch = (np.shape(next(t for t in tangents if t is not None))[0],)
        return [
            gather_tangent(tangents, src, offsets, batch, meta[0])
            for src, meta in zip(sources, self.out_meta)
        ]

    def release(self) -> None:
        self.args = None
        self.kwargs = None
        self.ans = None
        self.checks = ()

    def input_slots(self) -> tuple[int | None, ...]:
        args = self.args
        if args is None or any(sub is not None for _, sub in self.paths):
            return super().input_slots()
        keys = [key for key, _ in self.paths]
        # Only array operands count as constants here (not axes, shapes or orders).
        operands = [a if isinstance(a, (Tensor, np.ndarray)) else _NOT_OPERAND for a in args]
        return self._operand_slots(operands, keys)

    def saved_value(self, label: Any) -> Any:
        """The argument saved at ``label`` (a path ``(key, index-in-list)``)."""
        key, sub = label
        value = self.args[key] if isinstance(key, int) else self.kwargs[key]
        return value if sub is None else value[sub]

    def describe_saved(self, label: Any) -> str:
        if label == "ans":
            value = self.ans[0] if self.multi else self.ans
            return f"{describe_value(value)}, which is an output of {self.name()},"
        key = label[0]
        value = self.saved_value(label)
        where = ""
        if isinstance(value, Tensor) and value.grad_fn is not None:
            where = f", which is output {value._output_nr} of {value.grad_fn.name()},"
        return f"argument {key} {describe_value(value)}{where}"

    def _ans_tensors(self) -> Any:
        # Under create_graph the output re-enters the graph as a Tensor produced by
        # this very node, so derivatives of rules that read ``ans`` flow through it.
        if self.multi:
            return tuple(
                wrap(a, a.dtype.kind in "fc", self if a.dtype.kind in "fc" else None, i)
                for i, a in enumerate(self.ans)
            )
        return wrap(self.ans, True, self, 0)

    def tangent_maps(self) -> tuple[tuple | None, bool]:
        if self.multi or any(type(key) is not int or sub is not None for key, sub in self.paths):
            return None, False
        return self.rule.tangent_maps(tuple(key for key, _ in self.paths))

    def saved_inputs(self, create_graph: bool) -> tuple[Sequence[Any], dict, Any]:
        args = self.args
        if args is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        if self.checks and self.epoch != INPLACE.count:
            self.check_saved()
        kwargs = self.kwargs
        if create_graph:
            return args, kwargs, self._ans_tensors()
        if self.nested:
            args = [_data_of(a) for a in args]
        else:
            args = [a.data if type(a) is Tensor else a for a in args]
        if kwargs:
            kwargs = {k: _data_of(v) for k, v in kwargs.items()}
        return args, kwargs, self.ans

    def apply(self, grads: list, create_graph: bool) -> list:
        args, kwargs, ans = self.saved_inputs(create_graph)
        g = tuple(grads) if self.multi else grads[0]
        rule = self.rule
        paths = self.paths
        if rule.vjp_all is not None:
            needs = tuple(any(p[0] == i for p in paths) for i in range(len(args)))
            results = rule.vjp_all(needs, g, ans, *args, **kwargs)
            return [results[k] if sub is None else results[k][sub] for k, sub in paths]
        if len(paths) == 1:
            key, sub = paths[0]
            if kwargs:
                r = rule.vjps[key](g, ans, *args, **kwargs)
            else:
                r = rule.vjps[key](g, ans, *args)
            return [r if sub is None else r[sub]]
        done: dict = {}
        out = []
        for key, sub in paths:
            if key not in done:
                done[key] = rule.vjps[key](g, ans, *args, **kwargs)
            r = done[key]
            out.append(r if sub is None else r[sub])
        return out


def _data_of(obj: Any) -> Any:
    """ndarray for a Tensor; the same for the Tensors inside a list or tuple."""
    if isinstance(obj, Tensor):
        return obj.data
    if type(obj) in (list, tuple) and any(isinstance(o, Tensor) for o in obj):
        return type(obj)(o.data if isinstance(o, Tensor) else o for o in obj)
    return obj


class PositionalNode(_SavedNode):
    """A node of a rule called with positional arguments only: operators and ufuncs.

    The lean sibling of :class:`RuleNode` for the calls that dominate small-array
    code. It keeps the call's own tuple of arguments (Tensors and constants), whose
    arrays the first-order pass reads, and shares its plan. Its check labels are
    argument positions.
    """

    __slots__ = ("plan",)

    plan: _Plan

    def release(self) -> None:
        self.args = None
        self.ans = None

    def input_slots(self) -> tuple[int | None, ...]:
        needs = self.plan.needs
        return self._operand_slots([None] * len(needs), [i for i, n in enumerate(needs) if n])

    def saved_value(self, label: Any) -> Any:
        return self.args[label]

    def describe_saved(self, label: Any) -> str:
        if label == "ans":
            return f"{describe_value(self.ans)}, which is an output of {self.name()},"
        value = self.args[label]
        where = ""
        if isinstance(value, Tensor) and value.grad_fn is not None:
            where = f", which is output {value._output_nr} of {value.grad_fn.name()},"
        return f"argument {label} {describe_value(value)}{where}"

    def apply(self, grads: list, create_graph: bool) -> Sequence[Any]:
        return self.run(grads, create_graph, True)

    def tangent_maps(self) -> tuple[tuple | None, bool]:
        return self.plan.tangent_maps

    def saved_inputs(self, create_graph: bool) -> tuple[Sequence[Any], dict, Any]:
        if self.args is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        if self.epoch != INPLACE.count:
            self.check_saved()
        if create_graph:
            # The output re-enters the graph as a Tensor produced by this very node, so
            # derivatives of rules that read ``ans`` flow through it.
            ans = self.ans if self.ans is None else wrap(self.ans, True, self, 0)
            return self.args, _NO_KWARGS, ans
        return _arrays(self.args), _NO_KWARGS, self.ans

    def run(self, grads: list, create_graph: bool, retain_graph: bool) -> Sequence[Any]:
        if not create_graph and self.plan.vjp is not None:
            return (self.run_single(grads[0], retain_graph),)
        args, _, ans = self.saved_inputs(create_graph)
        result = self._vjps(grads[0], ans, args)
        if not retain_graph:
            self.args = self.ans = None
        return result

    def run_single(self, grad: Any, retain_graph: bool) -> Any:
        vjp = self.plan.vjp
        if vjp is None:  # one vjp for all arguments (``Rule.vjp_all``)
            return self.run([grad], False, retain_graph)[0]
        # saved_inputs' checks, inline: this is every chain link's path.
        args = self.args
        if args is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        if self.epoch != INPLACE.count:
            self.check_saved()
        # Unary and binary calls, the common cases, without building a tuple of arrays.
        if len(args) == 1:
            a = args[0]
            result = vjp(grad, self.ans, a.data if type(a) is Tensor else a)
        elif len(args) == 2:
            a, b = args
            da = a.data if type(a) is Tensor else a
            result = vjp(grad, self.ans, da, b.data if type(b) is Tensor else b)
        else:
            result = vjp(grad, self.ans, *_arrays(args))
        if not retain_graph:
            self.args = self.ans = None
        return result

    def _vjps(self, g: Any, ans: Any, args: Sequence[Any]) -> Sequence[Any]:
        """One cotangent per differentiated argument."""
        plan = self.plan
        if plan.vjp is not None:
            return (plan.vjp(g, ans, *args),)
        if self.rule.vjp_all is not None:
            results = self.rule.vjp_all(plan.needs, g, ans, *args)
            return [results[k] for k in plan.keys]
        vjps = self.rule.vjps
        return [vjps[k](g, ans, *args) for k in plan.keys]


def _arrays(args: tuple) -> tuple:
    """The arguments with each Tensor replaced by its array."""
    if len(args) == 1:
        a = args[0]
        return (a.data if type(a) is Tensor else a,)
    if len(args) == 2:
        a, b = args
        return (a.data if type(a) is Tensor else a, b.data if type(b) is Tensor else b)
    return tuple([a.data if type(a) is Tensor else a for a in args])


# ---------------------------------------------------------------- saved-tensor hooks
class _Packed:
    """A saved value as a saved-tensor hook's ``pack`` returned it."""

    __slots__ = ("packed", "unpack", "array")

    def __init__(self, packed: Any, unpack: Any, array: bool) -> None:
        self.packed = packed
        self.unpack = unpack
        self.array = array  # saved as an ndarray (an output), handed to the hooks as a Tensor

    def value(self) -> Any:
        out = self.unpack(self.packed)
        return out.data if self.array and isinstance(out, Tensor) else out


def _pack_value(value: Any, pack: Any, unpack: Any) -> Any:
    if type(value) is Tensor:
        return _Packed(pack(value), unpack, False)
    if type(value) is np.ndarray:
        return _Packed(pack(wrap(value, False, None, 0)), unpack, True)
    return value


def _unpack_value(value: Any) -> Any:
    return value.value() if type(value) is _Packed else value


def _unpack_tuple(values: Any) -> Any:
    if type(values) is not tuple:
        return _unpack_value(values)
    return tuple([_unpack_value(v) for v in values])


_ARGS_SLOT: Any = _SavedNode.__dict__["args"]  # the slots' own descriptors, under the
_ANS_SLOT: Any = _SavedNode.__dict__["ans"]  # properties below


class _PackedSaved:
    """A node whose saved arguments and output went through saved-tensor hooks: they
    are unpacked each time the node reads them."""

    __slots__ = ()

    @property
    def args(self) -> Any:
        return _unpack_tuple(_ARGS_SLOT.__get__(self))

    @args.setter
    def args(self, value: Any) -> None:
        _ARGS_SLOT.__set__(self, value)

    @property
    def ans(self) -> Any:
        return _unpack_tuple(_ANS_SLOT.__get__(self))

    @ans.setter
    def ans(self, value: Any) -> None:
        _ANS_SLOT.__set__(self, value)


class _PackedPositionalNode(_PackedSaved, PositionalNode):
    __slots__ = ()


class _PackedRuleNode(_PackedSaved, RuleNode):
    __slots__ = ()


def _pack_saved(self: _SavedNode, pack: Any, unpack: Any) -> None:
    if type(self) is PositionalNode:
        packed_type: type = _PackedPositionalNode
    elif type(self) is RuleNode:
        packed_type = _PackedRuleNode
    else:
        return
    args, ans = self.args, self.ans
    if args is not None:
        args = tuple([_pack_value(a, pack, unpack) for a in args])
    if type(ans) is tuple:
        ans = tuple([_pack_value(a, pack, unpack) for a in ans])
    else:
        ans = _pack_value(ans, pack, unpack)
    self.__class__ = packed_type
    self.args = args
    self.ans = ans


_SavedNode.pack_saved = _pack_saved  # type: ignore[method-assign,assignment]
