"""Pattern rules: the pattern of an operation's outputs from the patterns of its inputs.

One function per structure kind of :mod:`funcdiff.rules.structure`. They read the
shapes of the traced values and the values of constant arguments (index arrays,
``where`` conditions, the zeros of a constant matrix), never the values of traced
inputs: a pattern holds at every point that takes the same branches. Anything a rule
cannot place exactly (an index computed from the input, an unusual call form) gives
the dense pattern of that operation, which is always correct.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from funcdiff._core.tensor import Tensor
from funcdiff.ops.selection import plain, selection_sources
from funcdiff.rules.structure import Structure
from funcdiff.sparse import _contract
from funcdiff.sparse._hessian import HessianAccumulator
from funcdiff.sparse._patterns import (
    Pattern,
    broadcast_positions,
    fibres,
    positions,
    prefixes,
    product,
    selector,
    union,
)

__all__ = ["propagate", "dense_outputs"]


class Fallback(Exception):
    """This call is not placed exactly: the operation's outputs become dense."""


class Inputs:
    """The Tensor arguments of one call, with their patterns and taint."""

    def __init__(self, rule: Any, paths: list, tensors: list, infos: list) -> None:
        self.rule = rule
        self.paths = paths
        self.tensors = tensors
        self.infos = infos

    def variable(self) -> list[tuple[Any, Any, Tensor, Pattern]]:
        """``(key, index in list, tensor, pattern)`` of the differentiated arguments."""
        out = []
        for (key, sub), t, (pattern, _) in zip(self.paths, self.tensors, self.infos):
            if pattern is not None and key not in self.rule.nondiff_args:
                out.append((key, sub, t, pattern))
        return out

    def tainted_at(self, key: Any) -> bool:
        """Whether the argument at ``key`` (or an item of it) depends on the inputs."""
        return any(k == key and tainted for (k, _), (_, tainted) in zip(self.paths, self.infos))


def _arg(args: tuple, kwargs: dict, key: Any, default: Any = None) -> Any:
    if isinstance(key, str):
        return kwargs.get(key, default)
    return args[key] if key < len(args) else default


_data = plain


def dense_outputs(inputs: Inputs, outputs: list[Tensor], acc: HessianAccumulator | None) -> list:
    """Every output element depends on everything any differentiated input depends on."""
    live = [p for _, _, _, p in inputs.variable()]
    if not live:
        return [None] * len(outputs)
    row = cast(Pattern, union([Pattern(p.union_row()) for p in live]))  # live: not None
    result = []
    for o in outputs:
        p = Pattern(row.rows(), np.zeros(o.data.size, np.int64))
        result.append(p)
    if acc is not None:
        acc.square(Pattern(row.rows()))
    return result


# ---------------------------------------------------------------- elementwise


def _elementwise(rule, struct, args, kwargs, inputs, outputs, acc):
    shape = outputs[0].data.shape
    aligned = {}
    for key, sub, t, p in inputs.variable():
        if sub is not None:
            raise Fallback
        aligned[key] = p.take(broadcast_positions(t.data.shape, shape))
    out = union(list(aligned.values()))
    if acc is not None and out is not None:
        kind = struct.curvature
        if kind == "nonlinear":
            acc.square(out)
        elif kind == "bilinear" and len(aligned) == 2:
            a, b = aligned.values()
            acc.cross(a, b)
        elif kind == "quotient":
            acc.quotient(aligned.get(0), aligned.get(1))
    return [out] * len(outputs)


# ---------------------------------------------------------------- selections


def _select(rule, struct, args, kwargs, inputs, outputs, acc):
    """Each output element copies one input element, or is a constant: its pattern row
    is that element's (see :func:`funcdiff.ops.selection.selection_sources`)."""
    variable = inputs.variable()
    if any(inputs.tainted_at(key) for key in rule.nondiff_args):
        raise Fallback  # an index computed from the input: any element may be read
    if rule.name in ("astype", "copy") and len(variable) == 1:
        return [variable[0][3]]
    sources = selection_sources(
        rule, args, kwargs, [(key, sub, t.data.shape) for key, sub, t, _ in variable]
    )
    if sources is None or len(sources) != len(outputs):
        raise Fallback
    if len(variable) == 1:
        stacked = variable[0][3]
    else:
        stacked = Pattern(sp.vstack([p.rows() for *_, p in variable], format="csr"))
    return [stacked.take(source) for source in sources]


# ---------------------------------------------------------------- reductions and scans


def _first(inputs: Inputs) -> tuple[Tensor, Pattern]:
    variable = inputs.variable()
    if len(variable) != 1 or variable[0][0] != 0 or variable[0][1] is not None:
        raise Fallback
    return variable[0][2], variable[0][3]


def _reduce(rule, struct, args, kwargs, inputs, outputs, acc):
    t, p = _first(inputs)
    shape = t.data.shape
    if rule.name == "trace":
        # The diagonals (offset, axis1, axis2) first, then a sum along them.
        offset = int(kwargs.get("offset", args[1] if len(args) > 1 else 0))
        axis1, axis2 = struct.axes(args, kwargs, len(shape))
        diagonals = np.diagonal(positions(shape), offset, axis1, axis2)
        p = p.take(diagonals.ravel())
        shape, axes = diagonals.shape, (diagonals.ndim - 1,)
    else:
        axes = struct.axes(args, kwargs, len(shape)) if struct.axes else tuple(range(len(shape)))
    sel = fibres(shape, axes)
    if sel.shape[0] != outputs[0].data.size:
        raise Fallback
    out = product(sel, p)
    if acc is not None and struct.curvature == "nonlinear":
        acc.square(out)
    return [out] * len(outputs)


def _scan(rule, struct, args, kwargs, inputs, outputs, acc):
    t, p = _first(inputs)
    axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
    sel = prefixes(t.data.shape, None if axis is None else int(axis))
    out = product(sel, p)
    if acc is not None and struct.curvature == "nonlinear":
        acc.square(out)
    return [out]


def _fibre(rule, struct, args, kwargs, inputs, outputs, acc):
    """Each output element reads the whole fibre (along the declared axis) of every
    argument broadcast to the output's shape."""
    out_shape = outputs[0].data.shape
    ndim = len(out_shape)
    axis_none = rule.name == "sort" and _arg(args, kwargs, 1, kwargs.get("axis", -1)) is None
    axes = tuple(range(ndim)) if axis_none else struct.axes(args, kwargs, ndim)
    if any(o.data.shape != out_shape for o in outputs):
        raise Fallback
    aligned = []
    for _, sub, t, p in inputs.variable():
        if sub is not None:
            raise Fallback
        if axis_none:
            aligned.append(p)
            continue
        aligned.append(p.take(broadcast_positions(t.data.shape, out_shape)))
    joined = union(aligned)
    if joined is None:
        return [None] * len(outputs)
    sel = fibres(out_shape, axes)
    per_fibre = product(sel, joined)
    kept = [a for a in range(ndim) if a not in axes]
    ids = positions([out_shape[a] for a in kept])
    ids = (
        np.broadcast_to(np.expand_dims(ids, tuple(axes)), out_shape)
        if kept
        else np.zeros(out_shape, np.int64)
    )
    out = per_fibre.take(ids.ravel())
    if acc is not None and struct.curvature != "piecewise":
        acc.square(per_fibre)
    return [out] * len(outputs)


# ---------------------------------------------------------------- contractions


def _contract_rule(rule, struct, args, kwargs, inputs, outputs, acc):
    name = rule.name
    spec_args = args
    if name == "einsum" and isinstance(args[0], str):
        keys = list(range(1, len(args)))
    elif name == "einsum":
        spec_args = _einsum_string(args)  # the sublist form: operands at even positions
        keys = list(range(0, 2 * (len(spec_args) - 1), 2))
    else:
        keys = [0, 1]
    values = [_arg(args, kwargs, k) for k in keys]
    shapes = [np.shape(_data(v)) for v in values]
    if name == "vdot":
        shapes = [(int(np.prod(s)),) for s in shapes]
    try:
        letters, out_letters = _contract.lower(name, shapes, spec_args, kwargs)
    except _contract.NotLowered as exc:
        raise Fallback from exc
    by_key = {key: (t, p) for key, sub, t, p in inputs.variable() if sub is None}
    operands = []
    for k, v, s, lt in zip(keys, values, shapes, letters):
        if k in by_key:
            t, p = by_key[k]
            operands.append(_contract.Operand(lt, s, p, None, id(t)))
        else:
            data = np.asarray(_data(v))
            operands.append(_contract.Operand(lt, s, None, (data != 0).reshape(s), -1))
    out = _contract.contract(operands, out_letters, outputs[0].data.size, acc)
    if out is not None and out.size != outputs[0].data.size:
        raise Fallback
    return [out]


def _einsum_string(args: tuple) -> tuple:
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as ``einsum("ab,bc->ac", a, b)``."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    output = None
    if len(args) % 2:
        args, output = args[:-1], args[-1]
    operands, terms = list(args[0::2]), list(args[1::2])
    try:
        spec = ",".join("".join(letters[int(i)] for i in t) for t in terms)
        if output is not None:
            spec += "->" + "".join(letters[int(i)] for i in output)
    except (TypeError, ValueError, IndexError) as exc:
        raise Fallback from exc  # Ellipsis in a sublist
    return (spec, *operands)


def _outer(rule, struct, args, kwargs, inputs, outputs, acc):
    a, b = (np.asarray(_data(_arg(args, kwargs, k))) for k in (0, 1))
    na, nb = a.size, b.size
    index = {0: np.repeat(np.arange(na), nb), 1: np.tile(np.arange(nb), na)}
    return _product_of_elements(inputs, index, acc)


def _kron(rule, struct, args, kwargs, inputs, outputs, acc):
    a, b = (np.asarray(_data(_arg(args, kwargs, k))) for k in (0, 1))
    ia = np.kron(positions(a.shape) + 1, np.ones(b.shape, np.int64)) - 1
    ib = np.kron(np.ones(a.shape, np.int64), positions(b.shape) + 1) - 1
    return _product_of_elements(inputs, {0: ia.ravel(), 1: ib.ravel()}, acc)


def _product_of_elements(inputs, index, acc):
    """Each output element is a product of one element of each argument."""
    aligned = {}
    for key, sub, _, p in inputs.variable():
        if sub is not None or key not in index:
            raise Fallback
        aligned[key] = p.take(index[key])
    if acc is not None and len(aligned) == 2:
        acc.cross(aligned[0], aligned[1])
    return [union(list(aligned.values()))]


def _convolve(rule, struct, args, kwargs, inputs, outputs, acc):
    """Full N-d convolution: ``out[i + j]`` sums ``a[i] * b[j]``."""
    a, b = (np.asarray(_data(_arg(args, kwargs, k))) for k in (0, 1))
    out_shape = outputs[0].data.shape
    if a.ndim != b.ndim or len(out_shape) != a.ndim:
        raise Fallback
    variable = {key: p for key, sub, _, p in inputs.variable() if sub is None}
    size = outputs[0].data.size
    parts = []
    for key, own, other in ((0, a, b), (1, b, a)):
        if key not in variable:
            continue
        mine = np.array(np.unravel_index(np.arange(own.size), own.shape)).T
        support = np.ones(other.shape, bool) if (1 - key) in variable else other != 0
        theirs = np.argwhere(support)
        at = mine[:, None, :] + theirs[None, :, :]
        rows = np.ravel_multi_index(tuple(at.reshape(-1, own.ndim).T), out_shape)
        cols = np.repeat(np.arange(own.size), theirs.shape[0])
        parts.append(product(selector(rows, cols, (size, own.size)), variable[key]))
    if acc is not None and len(variable) == 2:
        acc.cross(Pattern(variable[0].union_row()), Pattern(variable[1].union_row()))
    return [union(parts)]


# ---------------------------------------------------------------- special rules


def _where(rule, struct, args, kwargs, inputs, outputs, acc):
    shape = outputs[0].data.shape
    size = outputs[0].data.size
    branches = {}
    for key, sub, t, p in inputs.variable():
        if sub is not None or key not in (1, 2):
            raise Fallback
        branches[key] = p.take(broadcast_positions(t.data.shape, shape))
    if not branches:
        return [None]
    if inputs.tainted_at(0):
        return [union(list(branches.values()))]  # either branch, wherever
    condition = np.broadcast_to(np.asarray(_data(args[0]), dtype=bool), shape).ravel()
    here = np.arange(size)
    if len(branches) == 2:
        stacked = Pattern(sp.vstack([branches[1].rows(), branches[2].rows()], format="csr"))
        return [stacked.take(np.where(condition, here, here + size))]
    ((key, p),) = branches.items()
    return [p.take(np.where(condition if key == 1 else ~condition, here, -1))]


def _full_like(rule, struct, args, kwargs, inputs, outputs, acc):
    shape = outputs[0].data.shape
    for key, sub, t, p in inputs.variable():
        if key in (1, "fill_value") and sub is None:
            return [p.take(broadcast_positions(t.data.shape, shape))]
    return [None]


def _index_add(rule, struct, args, kwargs, inputs, outputs, acc):
    t, p = _first(inputs)
    if inputs.tainted_at(1):
        raise Fallback
    index = _data(args[1])
    shape = tuple(args[2])
    target = positions(shape)[index]
    source = broadcast_positions(t.data.shape, target.shape)
    size = int(np.prod(shape))
    return [product(selector(target.ravel(), source, (size, t.data.size)), p)]


def _bincount(rule, struct, args, kwargs, inputs, outputs, acc):
    if inputs.tainted_at(0):
        raise Fallback
    variable = inputs.variable()
    if len(variable) != 1:
        raise Fallback
    _, _, t, p = variable[0]
    x = np.asarray(_data(args[0])).ravel()
    size = outputs[0].data.size
    return [product(selector(x, np.arange(x.size), (size, x.size)), p)]


def assigned_positions(shape: tuple, region: tuple) -> np.ndarray:
    """For each element of an indexed region, the element of the assigned value that
    lands there (NumPy drops the value's leading length-one axes first)."""
    shape = tuple(shape)
    while len(shape) > len(region) and shape[0] == 1:
        shape = shape[1:]
    if not shape:
        return np.zeros(int(np.prod(region)), np.int64)
    return broadcast_positions(shape, region)


def setitem_pattern(
    old: Pattern | None,
    old_shape: tuple,
    index: Any,
    index_tainted: bool,
    value: Pattern | None,
    value_shape: tuple,
) -> Pattern | None:
    """The pattern of ``t`` after ``t[index] = value``."""
    if old is None and value is None:
        return None
    size = int(np.prod(old_shape))
    if index_tainted:
        # Any element may have been written, by any element of the value.
        parts = [old] if old is not None else []
        if value is not None:
            parts.append(Pattern(value.union_row(), np.zeros(size, np.int64)))
        return union(parts)
    codes = positions(old_shape) + 1
    vsize = int(np.prod(value_shape))
    codes[_data(index)] = positions(value_shape) + size + 1 if value is not None else 0
    source = codes.ravel() - 1
    ncols = cast(Pattern, old or value).ncols  # not both None (above)
    old_rows = old.rows() if old is not None else sp.csr_array((size, ncols), dtype=bool)
    value_rows = value.rows() if value is not None else sp.csr_array((vsize, ncols), dtype=bool)
    return Pattern(sp.vstack([old_rows, value_rows], format="csr")).take(source)


def _setitem_rule(rule, struct, args, kwargs, inputs, outputs, acc):
    """The functional form ``setitem(x, index, value)`` (the in-place form reports to
    the tracer directly)."""
    x, index, value = args[0], args[1], args[2]
    shape = np.shape(_data(x))
    variable = {key: (t, p) for key, sub, t, p in inputs.variable() if sub is None}
    old = variable[0][1] if 0 in variable else None
    vpattern, vshape = None, np.shape(_data(value))
    if 2 in variable:
        region = np.empty(shape, np.int8)[_data(index)].shape
        vpattern = variable[2][1].take(assigned_positions(vshape, region))
        vshape = region
    return [setitem_pattern(old, shape, index, inputs.tainted_at(1), vpattern, vshape)]


KINDS: dict[str, Callable] = {
    "setitem": _setitem_rule,
    "elementwise": _elementwise,
    "select": _select,
    "reduce": _reduce,
    "scan": _scan,
    "fibre": _fibre,
    "contract": _contract_rule,
    "outer": _outer,
    "kron": _kron,
    "convolve": _convolve,
    "where": _where,
    "full_like": _full_like,
    "index_add": _index_add,
    "bincount": _bincount,
}


def propagate(
    rule: Any,
    struct: Structure | None,
    args: Sequence[Any],
    kwargs: dict,
    inputs: Inputs,
    outputs: list[Tensor],
    acc: HessianAccumulator | None,
) -> list:
    """The outputs' patterns (one per output Tensor); dense when not placed exactly."""
    kind = KINDS.get(struct.pattern) if struct is not None else None
    if kind is not None:
        try:
            result = kind(rule, struct, tuple(args), dict(kwargs), inputs, outputs, acc)
            if len(result) == len(outputs) and all(
                p is None or p.size == o.data.size for p, o in zip(result, outputs)
            ):
                return result
        except Fallback:
            pass
    return dense_outputs(inputs, outputs, acc)
