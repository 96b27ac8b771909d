"""Shape rules: reshaping, transposing, broadcasting, joining and splitting.

Each cotangent is the adjoint rearrangement (reshape back, split what was joined,
transpose back), written with NumPy calls that have rules of their own, so every rule
here is differentiable to any order. Axes are counted from the end (or shifted by the
batch rank) so a batch of cotangents rides along.

Functions that are compositions stay compositions (``Rule(impl=...)`` runs them on the
Tensors): ``hstack`` is ``atleast_1d`` and ``concatenate``, ``insert`` and ``delete``
are gathers found by running NumPy on an array of indices.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
>>> y = np.concatenate([x.T, 2 * x.T])
>>> np.sum(y * np.arange(6.0)[:, None]).backward()
>>> x.grad
tensor([[ 6.,  9., 12.]])
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.arrays import is_foreign_array
from funcdiff._core.backends import is_array, is_foreign, on_device_of
from funcdiff._core.registry import Rule, batch_ndim, register
from funcdiff._core.tensor import Tensor, values_read
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.structure import SELECT

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
    """A selection: every output element is a copy of one input element or a constant,
    at positions that depend on shapes only (``structure=SELECT``, complex-linear, so
    complex values are accepted); its vjps look at the arguments only for shapes and
    memory layout, so in-place changes after the operation stay legal (nothing is
    version-checked). Keywords override these defaults."""
    kw = {"structure": SELECT, "complex": True, **kw}
    return _rule(name, fn, vjps, cases, convention, uses_values=False, uses_layout=True, **kw)


# ---------------------------------------------------------------- reshaping
def _reshape_vjp(g, ans, a, *args, **kwargs):
    order = args[1] if len(args) > 1 else kwargs.get("order", "C")
    return np.reshape(g, _batch(g, ans) + np.shape(a), order=_resolve_order(a, order))


def _reshape_jvp(t, ans, a, *args, **kwargs):
    # Forward mode: the tangent reshaped the same way, behind its batch axes.
    order = args[1] if len(args) > 1 else kwargs.get("order", "C")
    if _resolve_order(a, order) != "C":
        return NotImplemented
    return np.reshape(t, np.shape(t)[: np.ndim(t) - np.ndim(a)] + np.shape(ans))


register(
    _layout_rule(
        "reshape",
        np.reshape,
        {0: _reshape_vjp},
        jvps={0: _reshape_jvp},
        batch=batching.reshape,
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
        batch=batching.ravel,
        cases=(
            Case((Arg((3, 4)),)),
            Case((Arg((2, 3, 4)), "F")),
            Case((Arg(()),)),
            Case((Arg((2, 3)),), {"order": "K"}),
        ),
        impl=_ravel,
        convention="order 'A' and 'K' follow the memory layout of the Tensor's data",
        complex=True,
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
        batch=batching.transpose,
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
        batch=batching.swapaxes,
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
        batch=batching.moveaxis,
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
        complex=True,
    )
)
register(
    _layout_rule(
        "squeeze",
        np.squeeze,
        {0: _to_shape_vjp},
        batch=batching.squeeze,
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
        batch=batching.expand_dims,
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
        batch=batching.broadcast_to,
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
        complex=True,
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
    if is_foreign(a):
        return a.copy()  # a device array's own copy, on its device
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
        if not isinstance(a, (Tensor, np.ndarray)) and not is_foreign_array(a):
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
            complex=True,
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
        batch=batching.concatenate,
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
        batch=batching.stack,
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
register(_rule("hstack", np.hstack, cases=_stack_cases, impl=_hstack, complex=True))
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
        complex=True,
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
        complex=True,
    )
)
register(
    _rule(
        "column_stack",
        np.column_stack,
        cases=(Case(([Arg((3,)), Arg((3, 2))],)), Case(([Arg(()), Arg((1,))],))),
        impl=_column_stack,
        complex=True,
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
    if not (isinstance(values, Tensor) or is_array(values)):
        values = on_device_of(np.asarray(values), arr)  # numbers join arr on its device
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
        complex=True,
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
    index = np.delete(labels, values_read(obj), axis=axis)
    return _flat_gather([arr], index, _dtype_of(arr))


def _insert(arr, obj, values, axis=None):
    shape, vshape = np.shape(arr), np.shape(values)
    n, m = int(np.prod(shape)), int(np.prod(vshape))
    labels = np.arange(n, dtype=np.intp).reshape(shape)
    vlabels = np.arange(n, n + m, dtype=np.intp).reshape(vshape)
    index = np.insert(labels, values_read(obj), vlabels, axis=axis)
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
        complex=True,
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
        complex=True,
    )
)


# ---------------------------------------------------------------- block
def _block_depth(arrays, where: str = "arrays") -> int:
    """How deep the lists nest (NumPy's rules: lists only, all leaves at one depth)."""
    if isinstance(arrays, tuple):
        raise TypeError(f"{where} is a tuple. Only lists can be used to arrange blocks.")
    if not isinstance(arrays, list):
        return 0
    if not arrays:
        raise ValueError(f"List at {where} cannot be empty")
    depths = {_block_depth(a, f"{where}[{i}]") for i, a in enumerate(arrays)}
    if len(depths) != 1:
        raise ValueError(f"List depths are mismatched at {where}")
    return depths.pop() + 1


def _block_leaves(arrays):
    if isinstance(arrays, list):
        for a in arrays:
            yield from _block_leaves(a)
    else:
        yield arrays


def _block(arrays):
    depth = _block_depth(arrays)
    ndim = max([depth] + [np.ndim(a) for a in _block_leaves(arrays)])

    def assemble(item, level):
        if level == depth:  # a leaf, with leading axes of length 1 up to ndim
            return np.reshape(item, (1,) * (ndim - np.ndim(item)) + tuple(np.shape(item)))
        parts = [assemble(a, level + 1) for a in item]
        return np.concatenate(parts, axis=level - depth)

    return assemble(arrays, 0)


register(
    _rule(
        "block",
        np.block,
        # The test cases draw flat lists; nested ones are checked in tests/test_numpy_extras.py.
        cases=(
            Case(([Arg((2,)), Arg((3,))],)),
            Case(([Arg((2, 2)), Arg((2, 1))],)),
            Case(([Arg(()), Arg((2,))],)),
        ),
        impl=_block,
        complex=True,
    )
)
