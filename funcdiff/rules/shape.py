"""Shape rules: reshaping, joining, splitting, repeating, flipping, padding, diagonals,
clipping and sorting.

Each cotangent is the adjoint rearrangement (reshape back, split what was joined,
sum what was repeated, gather what was scattered), written with NumPy calls that have
rules of their own, so every rule here is differentiable to any order. Axes are
counted from the end (or shifted by the batch rank) so a batch of cotangents rides
along.

Functions that are compositions stay compositions (``Rule(impl=...)`` runs them on the
Tensors): ``hstack`` is ``atleast_1d`` and ``concatenate``, ``diff`` is slicing and
subtraction, ``insert`` and ``delete`` are gathers found by running NumPy on an array
of indices.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([3.0, 1.0, 2.0], requires_grad=True)
>>> y = np.sort(x)
>>> np.sum(y * np.array([1.0, 10.0, 100.0])).backward()
>>> x.grad
tensor([100.,   1.,  10.])
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from funcdiff._tensor import Tensor
from funcdiff.rules._registry import Arg, Case, Rule, batch_ndim, dispatching, register
from funcdiff.rules.indexing import scatter

_FAMILY = "shape"


# ---------------------------------------------------------------- helpers
def _plain(x):
    """The ndarray of a Tensor (for indices and memory layout, never for values)."""
    return x.data if isinstance(x, Tensor) else x


def _batch(g, ans) -> tuple[int, ...]:
    """The batch part of ``g``'s shape: ``()`` or ``(B,)``."""
    return tuple(np.shape(g)[: batch_ndim(g, ans)])


def _axis(axis, ndim: int, name: str = "axis") -> int:
    """``axis`` as a non-negative int, with NumPy's error for one out of range."""
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim, name)
    return axis % ndim


def _from_end(axis, ndim: int) -> int:
    """``axis`` counted from the end: valid for ``g`` with or without batch axes."""
    return _axis(axis, ndim) - ndim


def _axes_tuple(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(_axis(a, ndim) for a in axis)
    return (_axis(axis, ndim),)


def _no_out(out, name: str) -> None:
    if out is not None:
        raise TypeError(
            f"numpy.{name} on Tensors does not support out=; use the returned Tensor instead"
        )


def _resolve_order(a, order) -> str:
    """'C' or 'F' for a reshape ``order`` ('A' looks at ``a``'s memory layout)."""
    order = "C" if order is None else str(order).upper()
    if order == "A":
        data = _plain(a)
        fortran = isinstance(data, np.ndarray) and data.flags.f_contiguous
        return "F" if fortran and not data.flags.c_contiguous else "C"
    return order


def _to_shape_vjp(g, ans, a, *args, **kwargs):
    """Cotangent of any C-order reshape of ``a``: reshape it back."""
    return np.reshape(g, _batch(g, ans) + np.shape(a))


def _rule(name, fn, vjps=None, cases=(), convention="", **kw) -> Rule:
    return Rule(name, fn, vjps=vjps or {}, cases=cases, convention=convention, family=_FAMILY, **kw)


def _layout_rule(name, fn, vjps=None, cases=(), convention="", **kw) -> Rule:
    """A rule whose vjps look at the arguments only for shapes and memory layout, so
    in-place changes after the operation stay legal (nothing is version-checked)."""
    return _rule(name, fn, vjps, cases, convention, uses_values=False, uses_layout=True, **kw)


# ---------------------------------------------------------------- reshaping
def _reshape_vjp(g, ans, a, *args, **kwargs):
    order = args[1] if len(args) > 1 else kwargs.get("order", "C")
    return np.reshape(g, _batch(g, ans) + np.shape(a), order=_resolve_order(a, order))


register(
    _layout_rule(
        "reshape",
        np.reshape,
        {0: _reshape_vjp},
        cases=(
            Case((Arg((3, 4)), (2, 6))),
            Case((Arg((3, 4)), -1)),
            Case((Arg(()), (1, 1))),
            Case((Arg((2, 3, 4)), (4, -1)), {"order": "F"}),
            Case((Arg((2, 6)),), {"shape": (3, 2, 2)}),
            Case((Arg((0, 3)), (3, 0))),
        ),
    )
)


def _k_order_index(data: np.ndarray) -> np.ndarray | None:
    """Flat indices in the order ``ravel(order='K')`` reads ``data``; None for C order."""
    track = np.empty_like(data, dtype=np.intp)
    track[...] = np.arange(data.size).reshape(data.shape)
    flat = track.ravel(order="K")
    return None if np.array_equal(flat, np.arange(data.size)) else flat


def _ravel(a, order="C"):
    order = "C" if order is None else str(order).upper()
    if order == "K":
        data = _plain(a)
        perm = _k_order_index(data) if isinstance(data, np.ndarray) else None
        if perm is not None:
            return np.reshape(a, (-1,))[perm]
        order = "C"
    return np.reshape(a, (-1,), order=_resolve_order(a, order))


register(
    _rule(
        "ravel",
        np.ravel,
        cases=(
            Case((Arg((3, 4)),)),
            Case((Arg((2, 3, 4)), "F")),
            Case((Arg(()),)),
            Case((Arg((2, 3)),), {"order": "K"}),
        ),
        impl=_ravel,
        convention="order 'A' and 'K' follow the memory layout of the Tensor's data",
    ),
    np.ravel,
)


def _transpose(a, axes=None):
    return np.transpose(a, axes)


def _transpose_vjp(g, ans, a, axes=None):
    nb = batch_ndim(g, ans)
    ndim = np.ndim(a)
    perm = tuple(reversed(range(ndim))) if axes is None else tuple(_axis(p, ndim) for p in axes)
    inverse = tuple(int(i) for i in np.argsort(perm))
    return np.transpose(g, tuple(range(nb)) + tuple(nb + i for i in inverse))


register(
    _layout_rule(
        "transpose",
        _transpose,
        {0: _transpose_vjp},
        cases=(
            Case((Arg((3, 4)),)),
            Case((Arg((2, 3, 4)), (1, 2, 0))),
            Case((Arg((2, 3, 4)), (-1, 0, -2))),
            Case((Arg(()),)),
        ),
    ),
    np.transpose,
    *((np.permute_dims,) if hasattr(np, "permute_dims") else ()),
)
if hasattr(np, "matrix_transpose"):
    register(
        _layout_rule(
            "matrix_transpose",
            np.matrix_transpose,
            {0: lambda g, ans, x: np.swapaxes(g, -1, -2)},
            cases=(Case((Arg((3, 4)),)), Case((Arg((2, 3, 4)),))),
        )
    )


def _swapaxes_vjp(g, ans, a, axis1, axis2):
    ndim = np.ndim(a)
    return np.swapaxes(g, _from_end(axis1, ndim), _from_end(axis2, ndim))


register(
    _layout_rule(
        "swapaxes",
        np.swapaxes,
        {0: _swapaxes_vjp},
        cases=(Case((Arg((2, 3, 4)), 0, -1)), Case((Arg((3, 4)), 1, 1))),
    )
)


def _moveaxis_vjp(g, ans, a, source, destination):
    ndim = np.ndim(a)
    src = tuple(_from_end(s, ndim) for s in np.atleast_1d(source))
    dst = tuple(_from_end(d, ndim) for d in np.atleast_1d(destination))
    return np.moveaxis(g, dst, src)


register(
    _layout_rule(
        "moveaxis",
        np.moveaxis,
        {0: _moveaxis_vjp},
        cases=(Case((Arg((2, 3, 4)), 0, -1)), Case((Arg((2, 3, 4)), (0, 1), (2, 0)))),
    )
)


def _rollaxis(a, axis, start=0):
    ndim = np.ndim(a)
    axis = _axis(axis, ndim)
    if not -ndim <= start <= ndim:
        raise np.exceptions.AxisError(f"'start' arg requires {-ndim} <= start < {ndim + 1}")
    start = start + ndim if start < 0 else start
    if axis < start:
        start -= 1
    if axis == start:
        return a
    axes = [i for i in range(ndim) if i != axis]
    axes.insert(start, axis)
    return np.transpose(a, axes)


register(
    _rule(
        "rollaxis",
        np.rollaxis,
        cases=(Case((Arg((2, 3, 4)), 2)), Case((Arg((2, 3, 4)), -1, 1)), Case((Arg((2, 3)), 0, 2))),
        impl=_rollaxis,
    )
)
register(
    _layout_rule(
        "squeeze",
        np.squeeze,
        {0: _to_shape_vjp},
        cases=(
            Case((Arg((3, 1, 4)),)),
            Case((Arg((1, 3)),), {"axis": 0}),
            Case((Arg((1, 3, 1)),), {"axis": (0, -1)}),
            Case((Arg(()),)),
            Case((Arg((1, 0)),), {"axis": 0}),
        ),
    )
)
register(
    _layout_rule(
        "expand_dims",
        np.expand_dims,
        {0: _to_shape_vjp},
        cases=(
            Case((Arg((3, 4)), 1)),
            Case((Arg((3,)), (0, -1))),
            Case((Arg(()), -1)),
        ),
    )
)
register(
    _layout_rule(
        "broadcast_to",
        np.broadcast_to,
        {0: lambda g, ans, array, shape, subok=False: g},
        cases=(
            Case((Arg((3, 1)), (2, 3, 4))),
            Case((Arg(()), (2,))),
            Case((Arg((3,)), (0, 3))),
        ),
        convention="the cotangent is summed over the broadcast axes",
    )
)


def _broadcast_arrays(*args, subok=False):
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    out = []
    for a in args:
        if not isinstance(a, Tensor):
            a = Tensor(np.asarray(a))  # constants come back as (constant) Tensors too
        out.append(a if a.shape == shape else np.broadcast_to(a, shape))
    return tuple(out)


register(
    _rule(
        "broadcast_arrays",
        np.broadcast_arrays,
        cases=(Case((Arg((3, 1)), Arg((4,)))), Case((Arg(()), Arg((2, 3)), Arg((1, 3))))),
        impl=_broadcast_arrays,
    )
)
register(
    _layout_rule(
        "astype",
        lambda a, dtype: a.astype(dtype),
        {0: lambda g, ans, a, dtype: g},
        cases=(Case((Arg((2, 3)), np.dtype(np.float64))), Case((Arg(()), np.dtype(np.float64)))),
    ),
    "astype",
)


def _copy(a, order="K", subok=False):
    return np.array(a, copy=True, order=order, subok=subok)


register(
    _layout_rule(
        "copy",
        _copy,
        {0: lambda g, ans, a, order="K", subok=False: g},
        cases=(Case((Arg((2, 3)),)), Case((Arg(()),))),
    ),
    np.copy,
)


def _atleast(nd: int):
    def promote(a):
        if not isinstance(a, (Tensor, np.ndarray)):
            a = np.asanyarray(a)
        shape = np.shape(a)
        if len(shape) >= nd:
            return a
        if nd == 3 and len(shape) == 2:
            return np.reshape(a, shape + (1,))
        if nd == 3 and len(shape) == 1:
            return np.reshape(a, (1,) + shape + (1,))
        return np.reshape(a, (1,) * (nd - len(shape)) + shape)

    def impl(*arys):
        result = tuple(promote(a) for a in arys)
        return result[0] if len(result) == 1 else result

    return impl


for _nd, _fn in ((1, np.atleast_1d), (2, np.atleast_2d), (3, np.atleast_3d)):
    register(
        _rule(
            _fn.__name__,
            _fn,
            cases=(
                Case((Arg(()),)),
                Case((Arg((3,)),)),
                Case((Arg((2, 3)),)),
                Case((Arg((2, 3, 2)),)),
                Case((Arg(()), Arg((3,)), Arg((2, 2)))),
            ),
            impl=_atleast(_nd),
        )
    )


# ---------------------------------------------------------------- joining and splitting
def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _no_out(out, "concatenate")
    return np.concatenate(arrays, axis=axis, dtype=dtype, casting=casting)


def _per_item(pieces: list, g, ans, arrays):
    """One cotangent per item of a sequence argument; for an array argument (which NumPy
    iterates along its first axis) the pieces stacked back into one cotangent."""
    if isinstance(arrays, (list, tuple)):
        return pieces
    return np.stack(pieces, axis=batch_ndim(g, ans))


def _concatenate_vjp(g, ans, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    shapes = (
        [np.shape(a) for a in arrays]
        if isinstance(arrays, (list, tuple))
        else ([np.shape(arrays)[1:]] * np.shape(arrays)[0])
    )
    if axis is None:
        batch = _batch(g, ans)
        bounds = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
        pieces = np.split(g, [int(b) for b in bounds], axis=-1)
        pieces = [np.reshape(p, batch + s) for p, s in zip(pieces, shapes, strict=True)]
        return _per_item(pieces, g, ans, arrays)
    ndim = len(shapes[0])
    ax = _axis(axis, ndim)
    bounds = np.cumsum([s[ax] for s in shapes])[:-1]
    return _per_item(list(np.split(g, [int(b) for b in bounds], axis=ax - ndim)), g, ans, arrays)


register(
    _layout_rule(
        "concatenate",
        _concatenate,
        {0: _concatenate_vjp},
        cases=(
            Case(([Arg((2, 3)), Arg((4, 3))],)),
            Case(([Arg((2, 3)), Arg((2, 1)), Arg((2, 2), diff=False)],), {"axis": -1}),
            Case(([Arg((2, 3)), Arg((3,)), Arg(())],), {"axis": None}),
            Case(([Arg((0, 3)), Arg((2, 3))],)),
            Case(([Arg((2, 3)), np.ones((1, 3))],)),
            Case((Arg((2, 3, 4)),), {"axis": 1}),  # an array is a sequence of sub-arrays
            Case((Arg((2, 3)),), {"axis": None}),
        ),
    ),
    np.concatenate,
)


def _unstack(g, axis: int) -> list:
    if hasattr(np, "unstack"):
        return list(np.unstack(g, axis=axis))
    n = np.shape(g)[axis]
    tail = (slice(None),) * (-axis - 1)
    return [g[(Ellipsis, i) + tail] for i in range(n)]


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _no_out(out, "stack")
    return np.stack(arrays, axis=axis, dtype=dtype, casting=casting)


def _stack_vjp(g, ans, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return _per_item(_unstack(g, _from_end(axis, np.ndim(ans))), g, ans, arrays)


register(
    _layout_rule(
        "stack",
        _stack,
        {0: _stack_vjp},
        cases=(
            Case(([Arg((2, 3)), Arg((2, 3))],)),
            Case(([Arg((2, 3)), Arg((2, 3)), Arg((2, 3), diff=False)],), {"axis": -1}),
            Case(([Arg(()), Arg(())],)),
            Case(([Arg((0, 2)), Arg((0, 2))],), {"axis": 1}),
            Case((Arg((2, 3, 4)),), {"axis": -1}),
        ),
    ),
    np.stack,
)
if hasattr(np, "unstack"):
    register(
        _layout_rule(
            "unstack",
            np.unstack,
            {0: lambda g, ans, x, axis=0: np.stack(list(g), axis=_from_end(axis, np.ndim(x)))},
            cases=(
                Case((Arg((3, 2)),)),
                Case((Arg((2, 3, 4)),), {"axis": -2}),
                Case((Arg((1,)),)),
            ),
        )
    )


def _hstack(tup, *, dtype=None, casting="same_kind"):
    arrays = [np.atleast_1d(a) for a in tup]
    axis = 0 if arrays and np.ndim(arrays[0]) == 1 else 1
    return np.concatenate(arrays, axis=axis, dtype=dtype, casting=casting)


def _vstack(tup, *, dtype=None, casting="same_kind"):
    return np.concatenate([np.atleast_2d(a) for a in tup], axis=0, dtype=dtype, casting=casting)


def _dstack(tup):
    return np.concatenate([np.atleast_3d(a) for a in tup], axis=2)


def _column_stack(tup):
    arrays = []
    for a in tup:
        ndim = np.ndim(a)
        arrays.append(np.reshape(a, (-1, 1)) if ndim < 2 else a)
    return np.concatenate(arrays, axis=1)


_stack_cases = (
    Case(([Arg((3,)), Arg((2,))],)),
    Case(([Arg((2, 3)), Arg((2, 1))],)),
    Case(([Arg(()), Arg((2,))],)),
)
register(_rule("hstack", np.hstack, cases=_stack_cases, impl=_hstack))
register(
    _rule(
        "vstack",
        np.vstack,
        cases=(
            Case(([Arg((3,)), Arg((3,))],)),
            Case(([Arg((2, 3)), Arg((3,))],)),
            Case(([Arg(()), Arg(())],)),
        ),
        impl=_vstack,
    ),
    np.vstack,
    # np.row_stack: a deprecated alias, present in some NumPy versions
    *(getattr(np, name) for name in ("row_stack",) if hasattr(np, name)),
)
register(
    _rule(
        "dstack",
        np.dstack,
        cases=(Case(([Arg((3,)), Arg((3,))],)), Case(([Arg((2, 3)), Arg((2, 3, 2))],))),
        impl=_dstack,
    )
)
register(
    _rule(
        "column_stack",
        np.column_stack,
        cases=(Case(([Arg((3,)), Arg((3, 2))],)), Case(([Arg(()), Arg((1,))],))),
        impl=_column_stack,
    )
)


def _split_vjp(axis_of):
    """The vjp of a split along ``axis_of(ndim, axis)``: join the cotangents again."""

    def vjp(g, ans, ary, indices_or_sections, axis=0):
        ndim = np.ndim(ary)
        return np.concatenate(list(g), axis=axis_of(ndim, axis) - ndim)

    return vjp


def _fixed_split_vjp(axis_of):
    """The vjp of hsplit/vsplit/dsplit, which take no ``axis`` argument."""
    vjp = _split_vjp(axis_of)
    return lambda g, ans, ary, indices_or_sections: vjp(g, ans, ary, indices_or_sections)


_split_cases = (
    Case((Arg((6, 2)), 3)),
    Case((Arg((2, 5)), [1, 3]), {"axis": -1}),
    Case((Arg((4,)), [0, 4])),
)
register(
    _layout_rule("split", np.split, {0: _split_vjp(lambda n, a: _axis(a, n))}, cases=_split_cases)
)
register(
    _layout_rule(
        "array_split",
        np.array_split,
        {0: _split_vjp(lambda n, a: _axis(a, n))},
        cases=_split_cases + (Case((Arg((2, 5)), 3), {"axis": 1}),),
    )
)
register(
    _layout_rule(
        "hsplit",
        np.hsplit,
        {0: _fixed_split_vjp(lambda n, a: 1 if n > 1 else 0)},
        cases=(Case((Arg((2, 4)), 2)), Case((Arg((6,)), [2]))),
    )
)
register(
    _layout_rule(
        "vsplit",
        np.vsplit,
        {0: _fixed_split_vjp(lambda n, a: 0)},
        cases=(Case((Arg((4, 3)), 2)), Case((Arg((3, 2, 2)), [1]))),
    )
)
register(
    _layout_rule(
        "dsplit",
        np.dsplit,
        {0: _fixed_split_vjp(lambda n, a: 2)},
        cases=(Case((Arg((2, 2, 4)), 2)),),
    )
)


def _append(arr, values, axis=None):
    if axis is None:
        if np.ndim(arr) != 1:
            arr = np.ravel(arr)
        return np.concatenate((arr, np.ravel(values)), axis=0)
    return np.concatenate((arr, values), axis=axis)


register(
    _rule(
        "append",
        np.append,
        cases=(
            Case((Arg((2, 3)), Arg((2,)))),
            Case((Arg((2, 3)), Arg((1, 3))), {"axis": 0}),
            Case((Arg((3,)), 1.5)),
        ),
        impl=_append,
    )
)


def _dtype_of(x) -> np.dtype:
    return x.dtype if isinstance(x, (Tensor, np.ndarray, np.generic)) else np.asarray(x).dtype


def _flat_gather(arrays: list, index: np.ndarray, dtype):
    """``concatenate(ravel(a) for a in arrays)[index]``, cast to ``dtype`` like NumPy."""
    flat = [np.reshape(a, (-1,)) for a in arrays]
    out = (flat[0] if len(flat) == 1 else np.concatenate(flat))[index]
    return out if _dtype_of(out) == dtype else out.astype(dtype)


def _delete(arr, obj, axis=None):
    shape = np.shape(arr)
    labels = np.arange(int(np.prod(shape)), dtype=np.intp).reshape(shape)
    index = np.delete(labels, _plain(obj), axis=axis)
    return _flat_gather([arr], index, _dtype_of(arr))


def _insert(arr, obj, values, axis=None):
    shape, vshape = np.shape(arr), np.shape(values)
    n, m = int(np.prod(shape)), int(np.prod(vshape))
    labels = np.arange(n, dtype=np.intp).reshape(shape)
    vlabels = np.arange(n, n + m, dtype=np.intp).reshape(vshape)
    index = np.insert(labels, _plain(obj), vlabels, axis=axis)
    return _flat_gather([arr, values], index, _dtype_of(arr))


register(
    _rule(
        "delete",
        np.delete,
        cases=(
            Case((Arg((5,)), [0, 3])),
            Case((Arg((3, 4)), 1), {"axis": -1}),
            Case((Arg((3, 4)), slice(0, 2)), {"axis": 0}),
            Case((Arg((2, 3)), 4)),
        ),
        impl=_delete,
        convention="a gather: deleted elements get zero gradient",
    )
)
register(
    _rule(
        "insert",
        np.insert,
        cases=(
            Case((Arg((5,)), 2, Arg(()))),
            Case((Arg((5,)), [1, 1, 4], Arg((3,)))),
            Case((Arg((2, 3)), 1, Arg((2,))), {"axis": 1}),
            Case((Arg((2, 3)), [0, 2], Arg((2, 1))), {"axis": -1}),
            Case((Arg((2, 2)), 1, Arg((3,)))),
        ),
        impl=_insert,
        convention="a gather: a value broadcast into several places sums their gradients",
    )
)


# ---------------------------------------------------------------- repeating
def _tile_vjp(g, ans, A, reps):
    batch = _batch(g, ans)
    nb = len(batch)
    shape = np.shape(A)
    reps = tuple(int(r) for r in np.atleast_1d(_plain(reps)))
    d = max(len(shape), len(reps))
    s = (1,) * (d - len(shape)) + shape
    r = (1,) * (d - len(reps)) + reps
    interleaved = tuple(x for pair in zip(r, s, strict=True) for x in pair)
    summed = np.sum(np.reshape(g, batch + interleaved), axis=tuple(nb + 2 * i for i in range(d)))
    return np.reshape(summed, batch + shape)


register(
    _layout_rule(
        "tile",
        np.tile,
        {0: _tile_vjp},
        cases=(
            Case((Arg((2, 3)), (2, 1))),
            Case((Arg((3,)), (2, 2))),
            Case((Arg((2, 3)), 3)),
            Case((Arg(()), 4)),
            Case((Arg((2, 3)), (0, 1))),
        ),
    )
)


def _repeat_vjp(g, ans, a, repeats, axis=None):
    batch = _batch(g, ans)
    nb = len(batch)
    shape = np.shape(a)
    reps = np.asarray(_plain(repeats))
    if axis is None:
        core, ax = (int(np.prod(shape)),), 0
    else:
        core, ax = shape, _axis(axis, len(shape))
    n = core[ax]
    if reps.size == 1:
        split = batch + core[:ax] + (n, int(reps.reshape(-1)[0])) + core[ax + 1 :]
        out = np.sum(np.reshape(g, split), axis=nb + ax + 1)
    else:
        source = np.repeat(np.arange(n), reps)
        out = scatter(g, ans, (slice(None),) * ax + (source,), core)
    return np.reshape(out, batch + shape)


register(
    _layout_rule(
        "repeat",
        np.repeat,
        {0: _repeat_vjp},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((2, 3)), 2)),
            Case((Arg((2, 3)), 2), {"axis": -1}),
            Case((Arg((2, 3)), np.array([1, 0, 3])), {"axis": 1}),
            Case((Arg((2, 3)), np.array([2, 0, 1, 1, 3, 1]))),
            Case((Arg(()), 3)),
            Case((Arg((3,)), [2])),
        ),
    )
)


# ---------------------------------------------------------------- flipping and rolling
def _flip_vjp(g, ans, m, axis=None):
    ndim = np.ndim(m)
    if ndim == 0:
        return g
    return np.flip(g, tuple(a - ndim for a in _axes_tuple(axis, ndim)))


register(
    _layout_rule(
        "flip",
        np.flip,
        {0: _flip_vjp},
        cases=(
            Case((Arg((2, 3)),)),
            Case((Arg((2, 3)), -1)),
            Case((Arg((2, 3, 4)),), {"axis": (0, 2)}),
            Case((Arg(()),)),
            Case((Arg((0, 3)), 1)),
        ),
    )
)
register(
    _layout_rule(
        "fliplr",
        np.fliplr,
        {0: lambda g, ans, m: np.flip(g, 1 - np.ndim(m))},
        cases=(Case((Arg((2, 3)),)), Case((Arg((2, 3, 2)),))),
    )
)
register(
    _layout_rule(
        "flipud",
        np.flipud,
        {0: lambda g, ans, m: np.flip(g, -np.ndim(m))},
        cases=(Case((Arg((3,)),)), Case((Arg((2, 3)),))),
    )
)


def _rot90_vjp(g, ans, m, k=1, axes=(0, 1)):
    ndim = np.ndim(m)
    return np.rot90(g, -int(k), axes=(_from_end(axes[0], ndim), _from_end(axes[1], ndim)))


register(
    _layout_rule(
        "rot90",
        np.rot90,
        {0: _rot90_vjp},
        cases=(
            Case((Arg((2, 3)),)),
            Case((Arg((2, 3)), 3)),
            Case((Arg((2, 3, 4)), -1), {"axes": (2, 0)}),
            Case((Arg((2, 3)), 2)),
        ),
    )
)


def _roll_vjp(g, ans, a, shift, axis=None):
    back = np.negative(np.asarray(_plain(shift)))
    if axis is None:
        batch = _batch(g, ans)
        flat = np.reshape(g, batch + (-1,))
        return np.reshape(np.roll(flat, back, axis=-1), batch + np.shape(a))
    ndim = np.ndim(a)
    if isinstance(axis, (tuple, list)):
        return np.roll(g, back, axis=tuple(_from_end(x, ndim) for x in axis))
    return np.roll(g, back, axis=_from_end(axis, ndim))


register(
    _layout_rule(
        "roll",
        np.roll,
        {0: _roll_vjp},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((2, 3)), 2)),
            Case((Arg((2, 3)), -1), {"axis": -1}),
            Case((Arg((2, 3, 4)), (1, -2)), {"axis": (0, 2)}),
            Case((Arg((2, 3)), (1, 1)), {"axis": (1, 1)}),
            Case((Arg((4,)), (1, 2))),
        ),
    )
)


# ---------------------------------------------------------------- padding
def _pad_widths(pad_width, ndim: int) -> np.ndarray:
    """``pad_width`` as an int array of shape ``(ndim, 2)`` (before, after)."""
    if isinstance(pad_width, dict):
        widths = np.zeros((ndim, 2), dtype=np.intp)
        for axis, w in pad_width.items():
            widths[_axis(axis, ndim)] = np.broadcast_to(np.asarray(w, dtype=np.intp), (2,))
        return widths
    widths = np.asarray(_plain(pad_width))
    if widths.dtype.kind not in "iub":
        raise TypeError("numpy.pad: `pad_width` must be of integral type")
    return np.broadcast_to(widths.astype(np.intp), (ndim, 2))


def _pad(array, pad_width, mode="constant", **kwargs):
    if callable(mode) or mode != "constant":
        shown = getattr(mode, "__name__", mode)
        raise NotImplementedError(
            f"numpy.pad with mode={shown!r} is not supported on Tensors; only "
            "mode='constant' has a derivative rule in funcdiff (pad a detached copy if no "
            "gradient is needed)"
        )
    unknown = set(kwargs) - {"constant_values"}
    if unknown:
        raise TypeError(f"numpy.pad: unsupported keyword arguments for mode 'constant': {unknown}")
    return np.pad(array, pad_width, mode="constant", **kwargs)


def _pad_vjp(g, ans, array, pad_width, mode="constant", **kwargs):
    shape = np.shape(array)
    widths = _pad_widths(pad_width, len(shape))
    inner = tuple(slice(int(b), int(b) + n) for (b, _), n in zip(widths, shape, strict=True))
    return g[(Ellipsis,) + inner]


def _pad_constant_vjp(g, ans, array, pad_width, mode="constant", **kwargs):
    """Cotangent of ``constant_values``, as an ``(ndim, 2)`` array (summed by the engine)."""
    shape = np.shape(array)
    ndim = len(shape)
    widths = _pad_widths(pad_width, ndim)
    batch = _batch(g, ans)
    if ndim == 0:
        return np.zeros(batch + (0, 2))
    # NumPy fills the pads axis by axis, so a corner holds the value of the last axis
    # whose pad covers it: pad an array of labels to find which value landed where.
    labels = np.pad(
        np.zeros(shape, dtype=np.intp),
        widths,
        constant_values=np.arange(1, 2 * ndim + 1).reshape(ndim, 2),
    )
    core = tuple(range(-ndim, 0))
    parts = [np.sum(np.where(labels == k, g, 0.0), axis=core) for k in range(1, 2 * ndim + 1)]
    return np.reshape(np.stack(parts, axis=-1), batch + (ndim, 2))


register(
    _layout_rule(
        "pad",
        _pad,
        {0: _pad_vjp, "constant_values": _pad_constant_vjp},
        cases=(
            Case((Arg((2, 3)), 1)),
            Case((Arg((2, 3)), ((1, 0), (0, 2)))),
            Case((Arg((3,)), (2, 1)), {"constant_values": Arg(())}),
            Case((Arg((2, 2)), 1), {"constant_values": Arg((2, 2))}),
            Case((Arg((2, 2)), ((1, 1), (0, 1))), {"constant_values": Arg((2,))}),
            Case((Arg(()), 2)),
            Case((Arg((0, 2)), 1)),
        ),
        convention="only mode='constant'; other modes raise NotImplementedError",
    ),
    np.pad,
)


# ---------------------------------------------------------------- diagonals and triangles
def _diagonal_vjp(g, ans, a, offset=0, axis1=0, axis2=1):
    """Put ``g`` back on the diagonal of zeros shaped like ``a``."""
    shape = np.shape(a)
    ndim = len(shape)
    ax1, ax2 = _axis(axis1, ndim, "axis1"), _axis(axis2, ndim, "axis2")
    other = tuple(n for i, n in enumerate(shape) if i not in (ax1, ax2))
    m = np.shape(ans)[-1]
    offset = int(offset)
    rows = np.arange(m) + max(-offset, 0)
    cols = np.arange(m) + max(offset, 0)
    index = (slice(None),) * len(other) + (rows, cols)
    out = scatter(g, ans, index, other + (shape[ax1], shape[ax2]))
    return np.moveaxis(out, (-2, -1), (ax1 - ndim, ax2 - ndim))


register(
    _layout_rule(
        "diagonal",
        np.diagonal,
        {0: _diagonal_vjp},
        cases=(
            Case((Arg((3, 3)),)),
            Case((Arg((3, 4)), 1)),
            Case((Arg((4, 3)), -2)),
            Case((Arg((2, 3, 4)),), {"axis1": -1, "axis2": 0}),
            Case((Arg((2, 3, 3)), 0, 1, 2)),
            Case((Arg((2, 3)), 5)),
        ),
    )
)


def _diag_vjp(g, ans, v, k=0):
    if np.ndim(v) == 1:
        return np.diagonal(g, int(k), -2, -1)
    return _diagonal_vjp(g, ans, v, k, 0, 1)


register(
    _layout_rule(
        "diag",
        np.diag,
        {0: _diag_vjp},
        cases=(
            Case((Arg((3,)),)),
            Case((Arg((3,)), -1)),
            Case((Arg((3, 3)),)),
            Case((Arg((3, 4)), 2)),
            Case((Arg((4, 3)),), {"k": -1}),
        ),
    )
)
_tri_cases = (
    Case((Arg((3, 3)),)),
    Case((Arg((3, 4)), 1)),
    Case((Arg((2, 3, 3)), -1)),
    Case((Arg((3,)),)),
)
register(_layout_rule("tril", np.tril, {0: lambda g, ans, m, k=0: np.tril(g, k)}, cases=_tri_cases))
register(_layout_rule("triu", np.triu, {0: lambda g, ans, m, k=0: np.triu(g, k)}, cases=_tri_cases))


# ---------------------------------------------------------------- clip
def _clip_bounds(a_min, a_max, min, max):  # noqa: A002
    if min is not None:
        if a_min is not None:
            raise TypeError("numpy.clip: pass only one of a_min= and min=")
        a_min = min
    if max is not None:
        if a_max is not None:
            raise TypeError("numpy.clip: pass only one of a_max= and max=")
        a_max = max
    return a_min, a_max


def _clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):  # noqa: A002
    _no_out(out, "clip")
    lo, hi = _clip_bounds(a_min, a_max, min, max)
    return np.clip(a, lo, hi)


def _clip_sources(a, lo, hi):
    """Constant masks (from_a, from_lo, from_hi): where the result comes from.

    NumPy computes ``minimum(maximum(a, lo), hi)``, so ``hi`` wins whenever
    ``max(a, lo) >= hi`` and ``lo`` wins where ``a <= lo``; ties go to the bound.
    """
    false = np.zeros(np.shape(a), dtype=bool)
    from_hi = false if hi is None else (a >= hi) | (False if lo is None else lo >= hi)
    from_lo = false if lo is None else (a <= lo) & ~from_hi
    return ~(from_hi | from_lo), from_lo, from_hi


def _clip_vjp(which: int):
    def vjp(g, ans, a, a_min=None, a_max=None, out=None, *, min=None, max=None):  # noqa: A002
        lo, hi = _clip_bounds(a_min, a_max, min, max)
        return np.where(_clip_sources(a, lo, hi)[which], g, 0.0)

    return vjp


register(
    _rule(
        "clip",
        _clip,
        {
            0: _clip_vjp(0),
            1: _clip_vjp(1),
            2: _clip_vjp(2),
            "a_min": _clip_vjp(1),
            "a_max": _clip_vjp(2),
            "min": _clip_vjp(1),
            "max": _clip_vjp(2),
        },
        cases=(
            Case((Arg((3, 4)), -1.0, 1.0)),
            Case((Arg((3, 4)), None, 0.5)),
            Case((Arg((3, 4)), -0.5, None)),
            Case((Arg((3, 4)), Arg((3, 1), -1.5, -0.5), Arg((4,), 0.5, 1.5))),
            Case((Arg((3, 4)),), {"min": Arg((), -1.0, -0.5), "max": Arg((), 0.5, 1.0)}),
            Case((Arg((5,)), 1.0, Arg((5,), -0.5, 0.5))),
            Case((Arg(()), -1.0, 1.0)),
            Case((Arg((0, 2)), -1.0, 1.0)),
        ),
        convention=(
            "the gradient to x is 0 at and beyond the bounds; a bound gets the gradient "
            "where it is active (the result equals it, ties included); with a_min > a_max "
            "the result, and the gradient, go to a_max, as in NumPy"
        ),
    ),
    np.clip,
)


# ---------------------------------------------------------------- sorting
def _sort_vjp(g, ans, a, axis=-1, kind=None, order=None, *, stable=None):
    batch = _batch(g, ans)
    if axis is None:
        keys, ax = np.reshape(_plain(a), (-1,)), -1
    else:
        keys, ax = _plain(a), _from_end(axis, np.ndim(a))
    perm = np.argsort(keys, axis=ax, kind="stable")
    inverse = np.argsort(perm, axis=ax, kind="stable")
    inverse = np.reshape(inverse, (1,) * len(batch) + inverse.shape)
    out = np.take_along_axis(g, inverse, axis=ax)
    return np.reshape(out, batch + np.shape(a)) if axis is None else out


register(
    _rule(
        "sort",
        np.sort,
        {0: _sort_vjp},
        cases=(
            Case((Arg((5,), kind="distinct"),)),
            Case((Arg((3, 4), kind="distinct"),), {"axis": 0}),
            Case((Arg((2, 3, 4), kind="distinct"), -2)),
            Case((Arg((3, 4), kind="distinct"), None)),
            Case((Arg((0, 3)),)),
        ),
        convention=(
            "the cotangent is permuted back by the stable argsort; tied elements each "
            "receive the cotangent of one of the tied positions"
        ),
    )
)


# ---------------------------------------------------------------- differences
_NOVALUE = np._NoValue


def _diff(a, n=1, axis=-1, prepend=_NOVALUE, append=_NOVALUE):
    if n == 0:
        return a
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    ndim = np.ndim(a)
    if ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = _axis(axis, ndim)
    parts = [a]
    for at, extra in ((0, prepend), (2, append)):
        if extra is not _NOVALUE:
            if np.ndim(extra) == 0:
                shape = list(np.shape(a))
                shape[ax] = 1
                extra = np.broadcast_to(extra, tuple(shape))
            parts.insert(min(at, len(parts)), extra)
    if len(parts) > 1:
        a = np.concatenate(parts, axis=ax)
    upper = (slice(None),) * ax + (slice(1, None),)
    lower = (slice(None),) * ax + (slice(None, -1),)
    op = np.not_equal if np.result_type(a) == np.bool_ else np.subtract
    for _ in range(n):
        a = op(a[upper], a[lower])
    return a


register(
    _rule(
        "diff",
        np.diff,
        cases=(
            Case((Arg((5,)),)),
            Case((Arg((3, 4)), 2), {"axis": 0}),
            Case((Arg((3, 4)),), {"prepend": Arg(()), "append": Arg((3, 2))}),
            Case((Arg((3, 4)),), {"prepend": 0.5}),
            Case((Arg((1, 3)),), {"axis": -2}),
        ),
        impl=_diff,
    )
)


def _ediff1d(ary, to_end=None, to_begin=None):
    flat = np.ravel(ary)
    parts = [flat[1:] - flat[:-1]]
    if to_begin is not None:
        parts.insert(0, np.ravel(to_begin))
    if to_end is not None:
        parts.append(np.ravel(to_end))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


register(
    _rule(
        "ediff1d",
        np.ediff1d,
        cases=(
            Case((Arg((5,)),)),
            Case((Arg((2, 3)),), {"to_begin": Arg(()), "to_end": Arg((2,))}),
        ),
        impl=_ediff1d,
    )
)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    ndim = np.ndim(y)
    ax = _axis(axis, ndim)
    if x is None:
        d = dx
    elif np.ndim(x) == 1:
        shape = [1] * ndim
        shape[ax] = np.shape(x)[0] - 1
        d = np.reshape(np.diff(x), tuple(shape))
    else:
        d = np.diff(x, axis=ax)
    upper = (slice(None),) * ax + (slice(1, None),)
    lower = (slice(None),) * ax + (slice(None, -1),)
    return np.sum(d * (y[upper] + y[lower]) / 2.0, axis=ax)


if hasattr(np, "trapezoid"):
    register(
        _rule(
            "trapezoid",
            np.trapezoid,
            cases=(
                Case((Arg((5,)),)),
                Case((Arg((3, 4)), Arg((4,)))),
                Case((Arg((3, 4)),), {"dx": Arg(()), "axis": 0}),
                Case((Arg((3, 4)), Arg((3, 4))), {"axis": 0}),
            ),
            impl=_trapezoid,
        )
    )


# ---------------------------------------------------------------- products of vectors
def _outer(a, b, out=None):
    _no_out(out, "outer")
    return np.outer(a, b)


register(
    _rule(
        "outer",
        _outer,
        {
            0: lambda g, ans, a, b, out=None: np.reshape(
                np.matmul(g, np.ravel(b)), _batch(g, ans) + np.shape(a)
            ),
            1: lambda g, ans, a, b, out=None: np.reshape(
                np.matmul(np.ravel(a), g), _batch(g, ans) + np.shape(b)
            ),
        },
        cases=(
            Case((Arg((3,)), Arg((4,)))),
            Case((Arg((2, 2)), Arg(()))),
            Case((Arg((0,)), Arg((2,)))),
        ),
    ),
    np.outer,
)


def _kron_layout(g, ans, a, b):
    """``g`` with its axes split into interleaved (a, b) pairs, and a, b shaped to match."""
    batch = _batch(g, ans)
    sa, sb = np.shape(a), np.shape(b)
    d = max(len(sa), len(sb))
    sa = (1,) * (d - len(sa)) + sa
    sb = (1,) * (d - len(sb)) + sb
    pairs = tuple(x for p in zip(sa, sb, strict=True) for x in p)
    a_axes = tuple(2 * i - 2 * d for i in range(d))
    b_axes = tuple(2 * i + 1 - 2 * d for i in range(d))
    a_shaped = np.reshape(a, tuple(x for n in sa for x in (n, 1)))
    b_shaped = np.reshape(b, tuple(x for n in sb for x in (1, n)))
    return batch, np.reshape(g, batch + pairs), a_shaped, b_shaped, a_axes, b_axes


def _kron_vjp_a(g, ans, a, b):
    batch, grid, _, b_shaped, _, b_axes = _kron_layout(g, ans, a, b)
    return np.reshape(np.sum(grid * b_shaped, axis=b_axes), batch + np.shape(a))


def _kron_vjp_b(g, ans, a, b):
    batch, grid, a_shaped, _, a_axes, _ = _kron_layout(g, ans, a, b)
    return np.reshape(np.sum(grid * a_shaped, axis=a_axes), batch + np.shape(b))


register(
    _rule(
        "kron",
        np.kron,
        {0: _kron_vjp_a, 1: _kron_vjp_b},
        cases=(
            Case((Arg((2, 3)), Arg((2, 2)))),
            Case((Arg((3,)), Arg((2, 2)))),
            Case((Arg(()), Arg((3,)))),
            Case((Arg((2,)), Arg((3,)))),
        ),
    )
)


@dispatching
def cross_last(a: Any, b: Any) -> Any:
    """Cross product of 3-vectors along the last axis (with broadcasting)."""
    return np.cross(a, b)


register(
    _rule(
        "cross_last",
        cross_last.__wrapped__,
        {0: lambda g, ans, a, b: cross_last(b, g), 1: lambda g, ans, a, b: cross_last(g, a)},
        cases=(Case((Arg((3,)), Arg((3,)))), Case((Arg((2, 3)), Arg((4, 1, 3))))),
    ),
    cross_last,
)


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    if np.ndim(a) < 1 or np.ndim(b) < 1:
        raise ValueError("At least one array has zero dimension")
    a = np.moveaxis(a, _axis(axisa, np.ndim(a), "axisa"), -1)
    b = np.moveaxis(b, _axis(axisb, np.ndim(b), "axisb"), -1)
    na, nb = np.shape(a)[-1], np.shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if na == 2 or nb == 2:
        warnings.warn(
            "Arrays of 2-dimensional vectors are deprecated. Use arrays of "
            "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
            DeprecationWarning,
            stacklevel=4,
        )
    if na == 2:
        a = np.concatenate([a, np.zeros(np.shape(a)[:-1] + (1,))], axis=-1)
    if nb == 2:
        b = np.concatenate([b, np.zeros(np.shape(b)[:-1] + (1,))], axis=-1)
    c = cross_last(a, b)
    if na == 2 and nb == 2:
        return c[..., 2]
    return np.moveaxis(c, -1, _axis(axisc, np.ndim(c), "axisc"))


register(
    _rule(
        "cross",
        np.cross,
        cases=(
            Case((Arg((3,)), Arg((3,)))),
            Case((Arg((2, 3)), Arg((3,)))),
            Case((Arg((3, 2)), Arg((2, 3))), {"axisa": 0, "axisc": 0}),
            Case((Arg((3, 4)), Arg((3, 4))), {"axis": 0}),
        ),
        impl=_cross,
    )
)
