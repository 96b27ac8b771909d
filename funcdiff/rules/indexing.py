"""Indexing rules: ``x[index]``, ``x[index] = v``, ``where``, ``take``,
``take_along_axis`` and ``bincount``.

The cotangent of ``x[index]`` is scattered back into zeros of ``x``'s shape with
:func:`index_add`, itself a registered primitive whose cotangent is a gather, so
indexing is differentiable to any order. Repeated indices accumulate (the cotangent
of a gather with repeats is a bincount). Batched cotangents are handled by moving
the batch axis to the end, where it rides along every kind of index (basic,
advanced, advanced separated by slices, boolean masks of any rank) without changing
where the indexed axes land.

``x[index] = v`` on a Tensor that is not a leaf requiring grad is recorded as a new
version of ``x``: the overwritten entries get no gradient, ``v`` gets the cotangent
of the entries it landed in (with repeated indices, only the write NumPy keeps).

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> np.sum(x[np.array([0, 2, 0])]).backward()
>>> x.grad
tensor([2., 0., 1.])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from funcdiff._core.backends import (
    as_array,
    copy_array,
    first_foreign,
    is_foreign,
    namespace,
    on_device_of,
)
from funcdiff._core.grad_mode import is_grad_enabled
from funcdiff._core.graph import PartialCotangent
from funcdiff._core.registry import Rule, Structure, batch_ndim, dispatching, register
from funcdiff._core.tensor import Tensor, values_read
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.structure import SELECT


def _plain(i):
    # An index's values (a detached Tensor while a program is traced: see values_read).
    return values_read(i) if isinstance(i, Tensor) else i


def _is_mask(i) -> bool:
    return (isinstance(i, (np.ndarray, np.bool_, bool)) or is_foreign(i)) and as_array(
        i
    ).dtype == bool


def normalize_index(index: Any, ndim: int) -> tuple:
    """``index`` as a tuple without Ellipsis, covering exactly the leading ``ndim`` axes.

    Index Tensors become their (constant) data and lists become arrays.

    Examples
    --------
    >>> normalize_index((Ellipsis, 1), 3)
    (slice(None, None, None), slice(None, None, None), 1)
    """
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(np.asarray(i) if isinstance(i, list) else _plain(i) for i in items)
    consumed = 0
    for i in items:
        if i is None or i is Ellipsis:
            continue
        consumed += np.ndim(i) if _is_mask(i) else 1
    if any(i is Ellipsis for i in items):
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        fill = (slice(None),) * (ndim - consumed)
        items = items[:at] + fill + tuple(i for i in items[at + 1 :] if i is not Ellipsis)
    else:
        items = items + (slice(None),) * (ndim - consumed)
    return items


def _is_basic(index: tuple) -> bool:
    return all(i is None or isinstance(i, (int, np.integer, slice)) for i in index)


# np.transpose with explicit axes, not np.moveaxis: the same permutation at a fraction
# of the Python overhead, on the cotangent of every indexing operation.
def _batch_to_end(a, nb: int):
    if not nb:
        return a
    ndim = a.ndim
    return np.transpose(a, (*range(nb, ndim), *range(nb)))


def _batch_to_front(a, nb: int):
    if not nb:
        return a
    ndim = a.ndim
    return np.transpose(a, (*range(ndim - nb, ndim), *range(ndim - nb)))


@dispatching
def index_add(values: Any, index: tuple, shape: tuple[int, ...]) -> Any:
    """Zeros of ``shape + extra`` with ``values`` added at ``index`` (repeats accumulate).

    ``index`` is normalised (see :func:`normalize_index`); ``values`` may carry extra
    trailing axes beyond ``zeros(shape)[index]``, which ride along (batch axes).

    Examples
    --------
    >>> index_add(np.array([1.0, 2.0, 3.0]), (np.array([0, 2, 0]),), (3,))
    array([4., 0., 2.])
    """
    values = as_array(values)
    # A zero-strided view has the right shape without allocating ``shape`` elements.
    zero = on_device_of(np.zeros((), dtype=bool), values)  # indexed where the index is
    indexed_ndim = np.broadcast_to(zero, shape)[index].ndim
    extra = values.shape[indexed_ndim:]
    out = np.zeros_like(values, shape=tuple(shape) + extra)
    if _is_basic(index):
        out[index] = values
    else:
        # the backend's own add.at: NumPy's ufunc protocol cannot pass a tuple index on
        namespace(values).add.at(out, index, values)
    return out


def take_index(a: Any, index: tuple, nb: int) -> Any:
    """``a[index]`` applied after ``nb`` leading batch axes."""
    return _batch_to_front(_batch_to_end(a, nb)[index], nb)


def scatter(g: Any, ans: Any, index: Any, shape: tuple[int, ...]) -> Any:
    """The cotangent of ``x[index]`` for ``x`` of ``shape``: ``g`` added into zeros.

    ``g`` is the cotangent of the indexed result ``ans`` (batch axes allowed).
    """
    nb = batch_ndim(g, ans)
    idx = normalize_index(index, len(shape))
    if nb and _is_basic(idx):
        # Full slices over the leading batch axes: no transposes around the scatter,
        # whose strided result every later elementwise pass (and a compiled kernel's
        # loops) would read across.
        lead = tuple(np.shape(g)[:nb])
        return index_add(g, (slice(None),) * nb + idx, lead + tuple(shape))
    return _batch_to_front(index_add(_batch_to_end(g, nb), idx, tuple(shape)), nb)


def _index_add_vjp(g, ans, values, index, shape):
    nb = batch_ndim(g, ans)
    return take_index(g, index, nb)


register(
    Rule(
        "index_add",
        index_add.__wrapped__,
        vjps={0: _index_add_vjp},
        nondiff_args=frozenset({1, 2}),
        cases=(
            Case((Arg((3,)), (np.array([0, 2, 0]),), (4,))),
            Case((Arg((2, 2)), (slice(0, 2), slice(None)), (3, 2))),
            Case((Arg((2, 3)), (np.array([1, 1]), slice(None)), (2, 3))),
            Case((Arg((2,)), (np.array([True, False, True]),), (3,))),
            Case((Arg((2, 4)), (np.array([0, 1]), slice(None), np.array([2, 2])), (2, 4, 3))),
        ),
        uses_values=False,
        family="indexing",
        structure=Structure("index_add", "linear"),
        complex=True,
    ),
    index_add,
)


def _getitem_vjp(g, ans, x, index):
    if type(g) is np.ndarray:
        idx = normalize_index(index, np.ndim(x))
        if _is_basic(idx):
            # First order, a basic index: the engine adds g into the input's cotangent
            # in place instead of scattering it into zeros of x's shape first.
            nb = batch_ndim(g, ans)
            return PartialCotangent((slice(None),) * nb + idx, g, g.shape[:nb] + np.shape(x))
    return scatter(g, ans, index, np.shape(x))


def _getitem(x, index):
    return x[index]


def _getitem_jvp(t, ans, x, index):
    # Forward mode: the same selection behind the tangent's batch axes (an index whose
    # advanced parts are apart would move them in front of the batch: declined).
    idx = normalize_index(index, np.ndim(x))
    if not _is_basic(idx):
        return NotImplemented
    return t[(slice(None),) * (np.ndim(t) - np.ndim(x)) + idx]


_MASK_23 = np.array([[True, False, True], [False, True, True]])
register(
    Rule(
        "getitem",
        _getitem,
        vjps={0: _getitem_vjp},
        jvps={0: _getitem_jvp},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((4, 3)), (slice(1, 3), 0))),
            Case((Arg((4, 3)), (Ellipsis, 1))),
            Case((Arg((4, 3)), np.array([0, 2, 2]))),
            Case((Arg((4, 3)), (np.array([0, 3]), np.array([1, 1])))),
            Case((Arg((2, 3, 4)), (np.array([0, 1]), slice(None), np.array([3, 0])))),
            Case((Arg((4, 3)), (None, slice(None, None, -1)))),
            Case((Arg((2, 3)), _MASK_23)),
            # advanced indices separated by a slice, with repeats and broadcasting
            Case((Arg((3, 2, 4)), (np.array([[0], [2]]), slice(None), np.array([1, 1, 3])))),
            # an int next to an array, separated by a slice: both are advanced
            Case((Arg((2, 3, 4)), (0, slice(None, None, -2), np.array([1, 2])))),
            # boolean masks of lower rank than x, at the front and in the middle
            Case((Arg((3, 4)), np.array([True, False, True]))),
            Case((Arg((2, 3, 4)), (slice(None), np.array([False, True, True])))),
            Case((Arg((2, 3, 2)), (_MASK_23, -1))),
            Case((Arg((2, 3, 4)), (Ellipsis, None, np.array([0, -1])))),
            Case((Arg((2, 3)), (np.array([], dtype=int),))),
            Case((Arg(()), ())),
            Case((Arg(()), None)),
            Case((Arg((3,)), True)),
            Case((Arg((3, 4)), (-1, slice(3, 0, -1)))),
            Case((Arg((5,)), [4, -1, 0])),
        ),
        uses_values=False,
        family="indexing",
        structure=SELECT,
        complex=True,
    ),
    "getitem",
)


def _written(shape: tuple, idx: tuple, selected: tuple) -> np.ndarray | None:
    """Which entries of ``x[idx] = v`` NumPy keeps when ``idx`` repeats a position.

    Returns a boolean array of the selection's shape (None when every write is kept).
    """
    n = int(np.prod(selected))
    if n == 0:
        return None
    track = np.full(shape, -1, dtype=np.intp)
    order = np.arange(n, dtype=np.intp).reshape(selected)
    device = first_foreign(idx)  # a device index: track on its device
    if device is not None:
        track, order = on_device_of(track, device), on_device_of(order, device)
    track[idx] = order
    kept = track[idx] == order
    return None if kept.all() else kept


def _setitem_vjp_target(g, ans, x, index, value):
    mask = on_device_of(np.ones(np.shape(x)), g)
    mask[normalize_index(index, np.ndim(x))] = 0.0
    return g * mask


def _setitem_vjp_value(g, ans, x, index, value):
    nb = batch_ndim(g, ans)
    shape = np.shape(x)
    idx = normalize_index(index, len(shape))
    out = take_index(g, idx, nb)
    selected = np.broadcast_to(on_device_of(np.zeros((), dtype=bool), g), shape)[idx].shape
    if not _is_basic(idx):
        kept = _written(shape, idx, selected)
        if kept is not None:
            out = np.where(kept, out, 0.0)
    extra = np.ndim(value) - len(selected)
    if extra > 0:  # NumPy drops leading length-one axes of the value
        out = np.reshape(out, tuple(np.shape(g)[:nb]) + (1,) * extra + selected)
    return out


def _setitem(x, index, value):
    out = copy_array(x)
    out[index] = value
    return out


register(
    Rule(
        "setitem",
        _setitem,
        vjps={0: _setitem_vjp_target, 2: _setitem_vjp_value},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((4, 3)), (slice(1, 3), 0), Arg((2,)))),
            Case((Arg((4, 3)), np.array([0, 2]), Arg((3,)))),
            Case((Arg((4, 3)), np.array([2, 0, 2]), Arg((3, 3)))),
            Case((Arg((2, 3)), _MASK_23, Arg(()))),
            Case((Arg((3, 4)), (np.array([0, 2]), slice(None)), Arg((1, 1, 4)))),
            Case((Arg((2, 3, 4)), (np.array([0, 1]), slice(None), np.array([3, 3])), Arg((3,)))),
            Case((Arg((3,)), Ellipsis, Arg((3,)))),
        ),
        convention="with repeated indices only the write NumPy keeps gets the gradient",
        uses_values=False,
        family="indexing",
        structure=Structure("setitem", "linear"),
        complex=True,
    ),
    "setitem",
)


def _where(condition, *branches):
    return np.where(condition, *branches)


register(
    Rule(
        "where",
        _where,
        vjps={
            1: lambda g, ans, c, x, y: np.where(c, g, 0.0),
            2: lambda g, ans, c, x, y: np.where(c, 0.0, g),
        },
        nondiff_args=frozenset({0}),
        cases=(
            Case((Arg((3, 4), kind="bool"), Arg((3, 4)), Arg((3, 4)))),
            Case((Arg((3, 1), kind="bool"), Arg((4,)), 0.5)),
            Case((Arg((), kind="bool"), Arg((2,)), Arg(()))),
            Case((np.array([True, False]), 1.5, Arg((3, 2)))),
            Case((Arg((0, 2), kind="bool"), Arg((0, 2)), Arg((2,)))),
        ),
        convention=(
            "no NaN or inf leaks from the branch not taken, at any order; "
            "where(condition) with one argument is nonzero(condition), a constant"
        ),
        family="indexing",
        structure=Structure("where", "linear"),
        batch=batching.where,
        complex=True,
    ),
    np.where,
)


# ---------------------------------------------------------------- take and friends
def _take_indices(indices, n: int, mode: str) -> np.ndarray:
    idx = as_array(_plain(indices))
    if mode == "wrap":
        return np.mod(idx, n) if n else idx
    if mode == "clip":
        return np.clip(idx, 0, max(n - 1, 0))
    return idx


def _take(a, indices, axis=None, out=None, mode="raise"):
    if out is not None:
        raise TypeError("numpy.take on Tensors does not support out=; use the returned Tensor")
    return np.take(a, indices, axis=axis, mode=mode)


def _take_vjp(g, ans, a, indices, axis=None, out=None, mode="raise"):
    shape = np.shape(a)
    if axis is None:
        flat = (int(np.prod(shape)),)
        result = scatter(g, ans, (_take_indices(indices, flat[0], mode),), flat)
        return np.reshape(result, tuple(np.shape(g)[: batch_ndim(g, ans)]) + shape)
    ax = int(axis) % len(shape)
    index = (slice(None),) * ax + (_take_indices(indices, shape[ax], mode),)
    return scatter(g, ans, index, shape)


register(
    Rule(
        "take",
        _take,
        vjps={0: _take_vjp},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((2, 3)), np.array([0, 5, 5, 1]))),
            Case((Arg((3, 4)), np.array([[0, -1], [2, 2]])), {"axis": -1}),
            Case((Arg((3, 4)), np.array(1)), {"axis": 0}),
            Case((Arg((2, 3, 2)), [2, 0, 2]), {"axis": 1}),
            Case((Arg((3,)), np.array([-4, 5, 1])), {"mode": "wrap"}),
            Case((Arg((3, 2)), np.array([7, -2])), {"axis": 0, "mode": "clip"}),
            Case((Arg((3,)), np.array([], dtype=int))),
        ),
        convention="repeated indices accumulate",
        uses_values=False,
        family="indexing",
        structure=SELECT,
        complex=True,
    ),
    np.take,
)


def _along_index(indices, shape: tuple, ax: int) -> tuple:
    """The advanced index equivalent to ``take_along_axis(., indices, ax)``."""
    idx = as_array(_plain(indices))
    ndim = len(shape)
    index = []
    for i in range(ndim):
        if i == ax:
            index.append(idx)
        else:
            index.append(np.arange(shape[i]).reshape((1,) * i + (-1,) + (1,) * (ndim - i - 1)))
    return tuple(index)


def _take_along_axis_vjp(g, ans, arr, indices, axis=-1):
    shape = np.shape(arr)
    if axis is None:
        flat = (int(np.prod(shape)),)
        result = scatter(g, ans, _along_index(indices, flat, 0), flat)
        return np.reshape(result, tuple(np.shape(g)[: batch_ndim(g, ans)]) + shape)
    return scatter(g, ans, _along_index(indices, shape, int(axis) % len(shape)), shape)


register(
    Rule(
        "take_along_axis",
        np.take_along_axis,
        vjps={0: _take_along_axis_vjp},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((3, 4)), np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]])), {"axis": 1}),
            Case((Arg((3, 4)), np.array([[2, 0, 0, -1]]), 0)),
            Case((Arg((2, 3)), np.array([5, 0, 0])), {"axis": None}),
            Case((Arg((2, 3, 2)), np.zeros((2, 1, 2), dtype=int)), {"axis": -2}),
        ),
        convention="repeated indices accumulate",
        uses_values=False,
        family="indexing",
        structure=SELECT,
        complex=True,
    ),
)


def _put_along_axis(arr, indices, values, axis):
    """``numpy.put_along_axis`` as ``arr[index] = values``, with the advanced index that
    ``take_along_axis`` reads: a Tensor ``arr`` records the write as any in-place
    ``t[index] = v`` (torch's ``scatter_``), so the gradient reaches ``values`` through
    the written entries and the old ``arr`` through the others."""
    idx = np.asarray(_plain(indices))
    if idx.dtype.kind not in "iu":
        raise IndexError(
            f"numpy.put_along_axis: indices must be an integer array, got dtype {idx.dtype}"
        )
    shape = np.shape(arr)
    if axis is None:
        if idx.ndim != 1:
            raise ValueError("numpy.put_along_axis: with axis=None, indices must be 1-d")
        n = int(np.prod(shape))
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"numpy.put_along_axis: an index is out of bounds for size {n}")
        if np.broadcast_shapes(np.shape(values), idx.shape) != idx.shape:
            raise ValueError(
                f"numpy.put_along_axis: values of shape {np.shape(values)} do not broadcast "
                f"to the shape {idx.shape} of indices"
            )
        index = np.unravel_index(np.where(idx < 0, idx + n, idx), shape)
    else:
        if idx.ndim != len(shape):
            raise ValueError(
                "numpy.put_along_axis: indices and arr must have the same number of "
                f"dimensions, got {idx.ndim} and {len(shape)}"
            )
        index = _along_index(idx, shape, normalize_axis_index(int(axis), len(shape)))
    if not isinstance(arr, Tensor) and isinstance(values, Tensor):
        if values.requires_grad and is_grad_enabled():
            raise RuntimeError(
                "numpy.put_along_axis: arr is an ndarray, which cannot carry the gradient "
                "of values (a Tensor that requires grad); make arr a Tensor "
                "(funcdiff.tensor(arr)) or pass values.detach()"
            )
        values = values_read(values)
    arr[index] = values


register(
    Rule(
        "put_along_axis",
        np.put_along_axis,
        impl=_put_along_axis,
        nondiff_args=frozenset({1, "indices"}),
        cases=(
            Case((Arg((3, 4)), np.array([[1], [3], [0]]), Arg((3, 1)), 1), writes=0),
            Case((Arg((3, 4)), np.array([[2, 0, 1, 2]]), Arg((1, 4)), 0), writes=0),
            Case((Arg((2, 3, 2)), np.array([[[0, 1]], [[2, 2]]]), Arg(()), -2), writes=0),
            Case((Arg((2, 3)), np.array([5, -6, 2]), Arg((3,)), None), writes=0),
            Case((Arg((3, 4)), np.array([[0, 2]]), Arg((3, 2), diff=False), 1), writes=0),
        ),
        convention="in place, as torch's scatter_: the written entries take their gradient "
        "from values, the others from arr; with a repeated index only the write NumPy "
        "keeps gets the gradient",
        family="indexing",
        complex=True,
    ),
)


def _bincount_vjp(g, ans, x, weights=None, minlength=0):
    return take_index(g, (as_array(_plain(x)),), batch_ndim(g, ans))


register(
    Rule(
        "bincount",
        np.bincount,
        vjps={1: _bincount_vjp, "weights": _bincount_vjp},
        nondiff_args=frozenset({0, "minlength"}),
        cases=(
            Case((np.array([0, 3, 3, 1, 0, 3]), Arg((6,)))),
            Case((np.array([2, 2]),), {"weights": Arg((2,)), "minlength": 4}),
        ),
        convention="without weights the counts are integers (constants)",
        uses_values=False,
        family="indexing",
        structure=Structure("bincount", "linear"),
    ),
)
