"""Batching rules: how ``funcdiff.func.vmap`` runs a rule on many examples at once.

A batching rule is a function ``batch(rule, args, kwargs, flags, size)``. Each batched
argument arrives as its *physical* array, the examples stacked on axis 0 (an ndarray,
or a Tensor or a batched value of an outer ``vmap``: batching rules are written with
NumPy calls, which dispatch, exactly as derivative rules are); an unbatched argument
arrives as it is. ``flags`` has one entry per positional argument: whether it is
batched, or a tuple of flags for a list or tuple of arrays (``concatenate``). Keyword
arguments are never batched (a batched keyword argument runs the loop). The rule
returns the result with the batch on axis 0 (every array of a tuple result), or
``NotImplemented`` to have the examples run one by one (the loop, which warns).

A rule declares its batching rule in its entry (``Rule(..., batch=...)``) only where the
default of its structure (:func:`default_batch`) is wrong or slow:

========================  ==============================================================
structure                 default
========================  ==============================================================
elementwise, any ufunc    :func:`elementwise`: unbatched operands as they are, size-1
                          axes inserted after the batch axis of lower-rank batched ones
reduce, scan, fibre       :func:`shift_axis` when the rule reads its axes from an
                          ``axis`` argument: the axes shift by one, ``None`` means every
                          axis of one example
select                    :func:`gather`: the rule runs once on the positions of the
                          elements, and every example gathers its elements by them
                          (the frequent ones declare axis arithmetic instead:
                          :func:`reshape`, :func:`transpose`, :func:`stack` ...)
composite (``impl``)      the composite runs on the batched values themselves
anything else             the loop over examples
========================  ==============================================================

Examples
--------
>>> import numpy as np
>>> from funcdiff._core.registry import FUNCTION_RULES, UFUNC_RULES
>>> x = np.arange(6.0).reshape(2, 3)            # two examples of shape (3,)
>>> elementwise(UFUNC_RULES[np.add], (x, np.ones(3)), {}, (True, False), 2)
array([[1., 2., 3.],
       [4., 5., 6.]])
>>> default_batch(FUNCTION_RULES[np.sum])(FUNCTION_RULES[np.sum], (x,), {}, (True,), 2)
array([ 3., 12.])
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from funcdiff._core.registry import Rule

__all__ = [
    "BatchRule",
    "default_batch",
    "elementwise",
    "shift_axis",
    "gather",
    "stacked",
    "gufunc",
    "like",
    "matmul",
    "einsum",
    "solve",
    "outer",
    "dot",
    "inner",
    "vdot",
    "where",
    "shift_axes",
    "reshape",
    "ravel",
    "transpose",
    "swapaxes",
    "moveaxis",
    "squeeze",
    "expand_dims",
    "broadcast_to",
    "stack",
    "concatenate",
    "loop",
    "logical_ndim",
]

#: ``batch(rule, args, kwargs, flags, size) -> result with the batch on axis 0``.
BatchRule = Callable[[Rule, tuple, dict, tuple, int], Any]


def logical_ndim(a: Any, batched: bool) -> int:
    """The rank of one example of ``a`` (its physical rank less the batch axis)."""
    return np.ndim(a) - 1 if batched else np.ndim(a)


def _pad(a: Any, batched: bool, ndim: int) -> Any:
    """A batched ``a`` with size-1 axes after the batch axis, up to ``ndim`` logical axes
    (so that NumPy's right-aligned broadcasting lines up the logical axes)."""
    if not batched:
        return a
    shape = a.shape
    missing = ndim - (len(shape) - 1)
    if missing <= 0:
        return a
    return np.reshape(a, (shape[0],) + (1,) * missing + tuple(shape[1:]))


def _is_array(a: Any) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype")


def elementwise(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """Broadcasting rule of an elementwise function (every ufunc): run the forward on the
    physical arrays, batched operands of lower rank padded after their batch axis."""
    ndim = 0
    for a, f in zip(args, flags):
        if f is True or _is_array(a):
            ndim = max(ndim, logical_ndim(a, f is True))
    padded = tuple(_pad(a, f is True, ndim) for a, f in zip(args, flags))
    return rule.fn(*padded, **kwargs)


def _core_dims(signature: str) -> list[int]:
    inputs = signature.split("->")[0]
    return [len([d for d in part.split(",") if d]) for part in inputs.strip("()").split("),(")]


def gufunc(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """A generalized ufunc (``vecdot``, ``matvec``): the batch is one more loop axis, so
    batched operands are padded to the largest loop rank."""
    func: Any = rule.fn
    core = _core_dims(func.signature)
    if len(core) != len(args) or "?" in func.signature:
        return NotImplemented
    loop = [logical_ndim(a, f is True) - c for a, f, c in zip(args, flags, core)]
    top = max(loop)
    padded = tuple(_pad(a, f is True, top + c) for a, f, c in zip(args, flags, core))
    return func(*padded, **kwargs)


def like(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """Rules whose result has the shape of their batched first argument and whose other
    arguments are not arrays of the example (``zeros_like``, ``astype``, ``copy``): run
    the forward on the physical array."""
    if any(f is not False for f in flags[1:]) or flags[0] is not True:
        return NotImplemented
    if kwargs.get("shape") is not None:  # a new shape per example
        shape = kwargs["shape"]
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        kwargs = {**kwargs, "shape": (size, *shape)}
    return rule.fn(*args, **kwargs)


def stacked(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """Linear algebra that acts on the last axes of a stack (``inv``, ``det``,
    ``cholesky``, ``eigh``, ``svd``, ``qr``): the batch is one more stack axis."""
    if flags[0] is not True or any(f is not False for f in flags[1:]):
        return NotImplemented
    return rule.fn(*args, **kwargs)


def shift_axis(
    position: int = 1,
    name: str = "axis",
    default: Any = None,
    *,
    tuples: bool = True,
    keepdims: int | None = None,
) -> BatchRule:
    """The batching rule of a reduction, scan or fibre rule of its first argument over
    the axes of an ``axis`` argument at ``position`` (or ``name``): the axes shift by
    one. ``None`` means every axis of one example: a tuple of them when the function
    takes tuples (``tuples``), else the example flattened (``cumsum``, ``argmax``,
    norms); ``keepdims`` is then the position of a ``keepdims`` argument, whose
    length-one axes are put back."""

    def batch(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
        if flags[0] is not True or any(f is not False for f in flags[1:]):
            return NotImplemented
        x = args[0]
        ndim = np.ndim(x) - 1
        call = list(args)
        kwargs = dict(kwargs)
        if name in kwargs:
            axis = kwargs[name]
        elif len(args) > position:
            axis = args[position]
        else:
            axis = default
        if axis is None:
            if tuples:
                new: Any = tuple(range(1, ndim + 1))
            else:
                call[0] = np.reshape(x, (size, -1))
                new = 1
        elif isinstance(axis, (tuple, list)):
            new = tuple(normalize_axis_index(int(a), ndim) + 1 for a in axis)
        else:
            new = normalize_axis_index(int(axis), ndim) + 1
        if len(call) > position and name not in kwargs:
            call[position] = new
        else:
            kwargs[name] = new
        out = rule.fn(*call, **kwargs)
        if axis is None and not tuples and keepdims is not None:
            keep = kwargs.get("keepdims", call[keepdims] if len(call) > keepdims else False)
            if keep:
                out = np.reshape(out, (size,) + (1,) * ndim)
        return out

    return batch


def _positions(shape: tuple, start: int, offset: float) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    return (np.arange(start, start + n, dtype=np.float64) + offset).reshape(shape)


def gather(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """Default of a selection: every output element is an input element or a constant at
    positions fixed by the shapes and constant arguments, so the forward runs once on
    the elements' positions (twice, with two offsets, to tell constants apart) and each
    example gathers its elements by them.

    Arguments in ``nondiff_args`` (indices) must be unbatched; the arrays among the
    others are the data, unbatched ones shared by every example."""
    leaves: list[tuple[Any, bool]] = []
    slots: list[Any] = []
    for i, (a, f) in enumerate(zip(args, flags)):
        if i in rule.nondiff_args:
            if f is not False:
                return NotImplemented
            slots.append(None)
        elif isinstance(f, tuple):
            slots.append([len(leaves) + k for k in range(len(a))])
            leaves.extend((item, g) for item, g in zip(a, f))
        elif f is True or _is_array(a):
            slots.append(len(leaves))
            leaves.append((a, f))
        else:
            slots.append(None)
    shapes = [tuple(a.shape[1:]) if f else tuple(a.shape) for a, f in leaves]
    total = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
    step = float(2**40)
    if total >= step:
        return NotImplemented

    def run(offset: float) -> Any:
        starts = np.cumsum([0] + [int(np.prod(s, dtype=np.int64)) for s in shapes])
        pos = [_positions(s, int(st), offset) for s, st in zip(shapes, starts)]
        call = []
        for a, slot in zip(args, slots):
            if slot is None:
                call.append(a)
            elif isinstance(slot, list):
                call.append(type(a)(pos[k] for k in slot))
            else:
                call.append(pos[slot])
        return rule.fn(*call, **kwargs)

    first, second = run(step), run(2 * step)
    flat = [
        np.broadcast_to(np.reshape(a, (1, -1)), (size, int(np.prod(s, dtype=np.int64))))
        if not f
        else np.reshape(a, (size, -1))
        for (a, f), s in zip(leaves, shapes)
    ]
    table = flat[0] if len(flat) == 1 else np.concatenate(flat, axis=1)
    dtype = np.result_type(*[a.dtype for a, _ in leaves])

    def pick(o1: Any, o2: Any) -> Any:
        o1, o2 = np.asarray(o1), np.asarray(o2)
        chosen = (o2 - o1) == step
        if not np.all(np.where(chosen, o1 == np.floor(o1), True)):
            return NotImplemented  # not a selection after all: loop rather than guess
        if not chosen.any():  # constants only (an empty array padded)
            return np.repeat(o1.astype(dtype)[np.newaxis], size, axis=0)
        index = np.where(chosen, o1 - step, 0).astype(np.intp)
        out = np.take(table, index.reshape(-1), axis=1).reshape((size,) + o1.shape)
        if not chosen.all():
            out = np.where(chosen, out, o1.astype(dtype))
        return out

    if isinstance(first, (tuple, list)):
        picked = [pick(a, b) for a, b in zip(first, second)]
        if any(p is NotImplemented for p in picked):
            return NotImplemented
        return type(first)(picked)
    return pick(first, second)


# ---------------------------------------------------------------- selections by axes
# The selections that programs (and the vjps of matmul, sums and broadcasts) use most,
# as axis arithmetic on the physical array: views, not the gathers of the default.
def _only_first(flags: tuple) -> bool:
    return flags[0] is True and all(f is False for f in flags[1:])


def _argument(args: tuple, kwargs: dict, position: int, name: str, default: Any) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[position] if len(args) > position else default


def _norm(axis: Any, ndim: int) -> Any:
    if isinstance(axis, (tuple, list)):
        return tuple(normalize_axis_index(int(a), ndim) + 1 for a in axis)
    return normalize_axis_index(int(axis), ndim) + 1


def reshape(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``reshape``: the batch size in front of the new shape (``order="F"`` reshapes with
    the batch axis last, where Fortran order leaves it alone)."""
    if not _only_first(flags):
        return NotImplemented
    x = args[0]
    shape = _argument(args, kwargs, 1, "shape", None)
    if shape is None:
        shape = kwargs.get("newshape")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    order = _argument(args, kwargs, 2, "order", "C")
    if order == "C":
        return np.reshape(x, (size, *shape))
    if order == "F":
        moved = np.reshape(np.moveaxis(x, 0, -1), (*shape, size), order="F")
        return np.moveaxis(moved, -1, 0)
    return NotImplemented


def ravel(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``ravel``: each example flattened (C order)."""
    if not _only_first(flags) or _argument(args, kwargs, 1, "order", "C") != "C":
        return NotImplemented
    return np.reshape(args[0], (size, -1))


def transpose(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``transpose``: the logical axes permuted (reversed by default), the batch first."""
    if not _only_first(flags):
        return NotImplemented
    x = args[0]
    ndim = np.ndim(x) - 1
    axes = _argument(args, kwargs, 1, "axes", None)
    order = tuple(range(ndim, 0, -1)) if axes is None else _norm(axes, ndim)
    return np.transpose(x, (0, *order))


def swapaxes(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``swapaxes``: both axes shift by one."""
    if not _only_first(flags):
        return NotImplemented
    ndim = np.ndim(args[0]) - 1
    a = _norm(_argument(args, kwargs, 1, "axis1", None), ndim)
    b = _norm(_argument(args, kwargs, 2, "axis2", None), ndim)
    return np.swapaxes(args[0], a, b)


def moveaxis(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``moveaxis``: sources and destinations shift by one."""
    if not _only_first(flags):
        return NotImplemented
    ndim = np.ndim(args[0]) - 1
    source = _norm(_argument(args, kwargs, 1, "source", None), ndim)
    destination = _norm(_argument(args, kwargs, 2, "destination", None), ndim)
    return np.moveaxis(args[0], source, destination)


def squeeze(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``squeeze``: the length-one axes of one example (never the batch axis)."""
    if not _only_first(flags):
        return NotImplemented
    x = args[0]
    shape = tuple(x.shape[1:])
    axis = _argument(args, kwargs, 1, "axis", None)
    if axis is None:
        axes = tuple(i + 1 for i, n in enumerate(shape) if n == 1)
    else:
        axes = _norm(axis if isinstance(axis, (tuple, list)) else (axis,), len(shape))
    return np.squeeze(x, axis=axes) if axes else x


def expand_dims(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``expand_dims``: the new axes counted in the result of one example."""
    if not _only_first(flags):
        return NotImplemented
    axis = _argument(args, kwargs, 1, "axis", None)
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    return np.expand_dims(args[0], _norm(axes, np.ndim(args[0]) - 1 + len(axes)))


def broadcast_to(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``broadcast_to``: each example to the shape, behind the batch axis."""
    if not _only_first(flags) or kwargs.get("subok"):
        return NotImplemented
    shape = _argument(args, kwargs, 1, "shape", None)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return np.broadcast_to(_pad(args[0], True, len(shape)), (size, *shape))


def _joined(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """The arrays to join, each with the batch in front (unbatched ones broadcast)."""
    items = args[0]
    marks = flags[0] if isinstance(flags[0], tuple) else None
    if marks is None or any(f is not False for f in flags[1:]) or kwargs.get("out") is not None:
        return None
    return [
        a if f else np.broadcast_to(np.expand_dims(a, 0), (size, *np.shape(a)))
        for a, f in zip(items, marks)
    ]


def stack(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``stack``: the new axis counted in the result of one example."""
    items = _joined(rule, args, kwargs, flags, size)
    if items is None or not items:
        return NotImplemented
    axis = _argument(args, kwargs, 1, "axis", 0)
    extra = {k: v for k, v in kwargs.items() if k not in ("axis", "out")}
    return rule.fn(items, axis=_norm(axis, np.ndim(items[0])), **extra)


def concatenate(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``concatenate``: the axis shifts by one; ``axis=None`` joins flattened examples."""
    items = _joined(rule, args, kwargs, flags, size)
    if items is None or not items:
        return NotImplemented
    axis = _argument(args, kwargs, 1, "axis", 0)
    extra = {k: v for k, v in kwargs.items() if k not in ("axis", "out")}
    if axis is None:
        return rule.fn([np.reshape(a, (size, -1)) for a in items], axis=1, **extra)
    return rule.fn(items, axis=_norm(axis, np.ndim(items[0]) - 1), **extra)


def matmul(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``matmul``: a batched 1-D operand facing a batched one is promoted per example (a
    row for ``a``, a column for ``b``) and the added axis removed afterwards; stacks of
    lower rank are padded after the batch axis."""
    a, b = args[0], args[1]
    fa, fb = flags[0] is True, flags[1] is True
    if logical_ndim(a, fa) == 0 or logical_ndim(b, fb) == 0:
        return NotImplemented
    return _matmul(rule.fn, a, b, fa, fb, args[2:], kwargs)


def _matmul(fn: Callable, a: Any, b: Any, fa: bool, fb: bool, rest: tuple, kwargs: dict) -> Any:
    na, nb = logical_ndim(a, fa), logical_ndim(b, fb)
    drop: tuple[int, ...] = ()
    if fa and na == 1 and (fb or nb > 2):
        a, na = np.expand_dims(a, 1), 2
        drop = (-2,)
    if fb and nb == 1:
        b, nb = np.expand_dims(b, -1), 2
        drop += (-1,)
    if na >= 2 and nb >= 2:  # stacks of matrices: line up the stack axes
        top = max(na, nb)
        a, b = _pad(a, fa, top), _pad(b, fb, top)
    out = fn(a, b, *rest, **kwargs)
    return np.squeeze(out, axis=drop) if drop else out


def dot(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``dot``: a product with a scalar is elementwise, vectors and matrices are
    ``matmul``'s; higher ranks (a sum over the last axis of ``a`` and the second-to-last
    of ``b``, every other axis kept) loop."""
    a, b = args[0], args[1]
    fa, fb = flags[0] is True, flags[1] is True
    na, nb = logical_ndim(a, fa), logical_ndim(b, fb)
    if kwargs.get("out") is not None or len(args) > 2:
        return NotImplemented
    if na == 0 or nb == 0:
        top = max(na, nb)
        return np.multiply(_pad(a, fa, top), _pad(b, fb, top))
    if na <= 2 and nb <= 2:
        return _matmul(np.matmul, a, b, fa, fb, (), {})
    return NotImplemented


def inner(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``inner`` of vectors (or a scalar): the sum of the elementwise product."""
    a, b = args[0], args[1]
    fa, fb = flags[0] is True, flags[1] is True
    na, nb = logical_ndim(a, fa), logical_ndim(b, fb)
    if na == 0 or nb == 0:
        top = max(na, nb)
        return np.multiply(_pad(a, fa, top), _pad(b, fb, top))
    if na == 1 and nb == 1:
        return np.sum(np.multiply(a, b), axis=-1)
    return NotImplemented


def vdot(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``vdot``: each example's operands flattened, the first conjugated, summed."""
    a, b = args[0], args[1]
    fa, fb = flags[0] is True, flags[1] is True
    a = np.reshape(a, (size, -1) if fa else (-1,))
    b = np.reshape(b, (size, -1) if fb else (-1,))
    return np.sum(np.multiply(np.conj(a), b), axis=-1)


def where(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``where(condition, x, y)`` is elementwise; ``where(condition)`` (the indices of
    the non-zeros, a different length per example) loops."""
    if len(args) != 3:
        return NotImplemented
    return elementwise(rule, args, kwargs, flags, size)


def shift_axes(*arguments: tuple[int, str, int]) -> BatchRule:
    """The batching rule of a function of its first argument along the axes of several
    axis arguments (``trace``'s ``axis1`` and ``axis2``), each ``(position, name,
    default)``: every axis shifts by one."""

    def batch(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
        if flags[0] is not True or any(f is not False for f in flags[1:]):
            return NotImplemented
        ndim = np.ndim(args[0]) - 1
        call = list(args)
        kwargs = dict(kwargs)
        for position, name, default in arguments:
            if name in kwargs:
                kwargs[name] = normalize_axis_index(int(kwargs[name]), ndim) + 1
            elif len(call) > position:
                call[position] = normalize_axis_index(int(call[position]), ndim) + 1
            else:
                kwargs[name] = normalize_axis_index(default, ndim) + 1
        return rule.fn(*call, **kwargs)

    return batch


def einsum(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``einsum`` with a subscripts string: batched operands and the output get a fresh
    letter in front."""
    spec = args[0]
    if not isinstance(spec, str) or flags[0] is not False:
        return NotImplemented
    spec = spec.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(args) - 1:
        return NotImplemented
    if not arrow:
        letters = inputs.replace(",", "").replace(".", "")
        output = ("..." if "..." in inputs else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1)
        )
    free = next(c for c in string.ascii_letters if c not in spec)
    terms = [free + t if f is True else t for t, f in zip(terms, flags[1:])]
    return rule.fn(",".join(terms) + "->" + free + output, *args[1:], **kwargs)


def outer(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``outer``: each example's operands flattened, then one broadcast product."""
    a, b = args[0], args[1]
    fa, fb = flags[0] is True, flags[1] is True
    a = np.reshape(a, (size, -1, 1) if fa else (-1, 1))
    b = np.reshape(b, (size, 1, -1) if fb else (1, -1))
    return np.multiply(a, b)


def solve(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """``linalg.solve`` with NumPy 2's rule per example: ``b`` is a vector only when it
    is 1-D in one example."""
    a, b = args[0], args[1]
    fa, fb = flags[0] is True, flags[1] is True
    if logical_ndim(b, fb) == 1:
        if fb:  # a column per example, its stack lined up with a's
            column = _pad(np.expand_dims(b, -1), True, max(logical_ndim(a, fa), 2))
            return np.squeeze(rule.fn(a, column, **kwargs), axis=-1)
        if fa:  # one vector for a stack of matrices: a column for every example
            out = rule.fn(a, np.broadcast_to(np.expand_dims(b, -1), (size, b.shape[0], 1)))
            return np.squeeze(out, axis=-1)
    na, nb = logical_ndim(a, fa), logical_ndim(b, fb)
    top = max(na, nb)
    return rule.fn(_pad(a, fa, top), _pad(b, fb, top), **kwargs)


def loop(rule: Rule, args: tuple, kwargs: dict, flags: tuple, size: int) -> Any:
    """No batching rule: the examples run one by one (``vmap`` warns once per call)."""
    return NotImplemented


def default_batch(rule: Rule) -> BatchRule | None:
    """The batching rule of ``rule``: its own ``batch`` entry, else its structure's
    default; None for a composite (it runs on the batched values) and ``loop`` where
    no default applies."""
    if rule.batch is not None:
        return rule.batch
    if rule.impl is not None:
        return None
    structure = rule.structure
    if isinstance(rule.fn, np.ufunc):
        return elementwise if rule.fn.signature is None else gufunc
    if structure is None:
        return loop
    if structure.pattern == "elementwise":
        return elementwise
    if structure.pattern in ("reduce", "scan", "fibre"):
        where = getattr(structure.axes, "argument", None)
        if where is not None:
            return shift_axis(*where, tuples=structure.pattern == "reduce")
        return loop
    if structure.pattern == "select":
        return gather
    return loop
