"""Indexing rules: ``x[index]``, ``x[index] = v``, ``where``.

The cotangent of ``x[index]`` is scattered back into zeros of ``x``'s shape with
:func:`index_add`, itself a registered primitive whose cotangent is a gather, so
indexing is differentiable to any order. Batched cotangents are handled by moving
the batch axis to the end, where it rides along every kind of index (basic,
advanced, boolean) without changing where the indexed axes land.
"""

from __future__ import annotations

import numpy as np

from funcdiff._tensor import Tensor
from funcdiff.rules._registry import Arg, Case, Rule, batch_ndim, dispatching, register


def _plain(i):
    return i.data if isinstance(i, Tensor) else i


def normalize_index(index, ndim: int) -> tuple:
    """``index`` as a tuple without Ellipsis, covering exactly the leading ``ndim`` axes.

    Index Tensors become their (constant) data.
    """
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(np.asarray(i) if isinstance(i, list) else _plain(i) for i in items)
    consumed = 0
    for i in items:
        if i is None or i is Ellipsis:
            continue
        is_mask = isinstance(i, (np.ndarray, np.bool_, bool)) and np.asarray(i).dtype == bool
        consumed += np.ndim(i) if is_mask else 1
    if any(i is Ellipsis for i in items):
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        fill = (slice(None),) * (ndim - consumed)
        items = items[:at] + fill + tuple(i for i in items[at + 1 :] if i is not Ellipsis)
    else:
        items = items + (slice(None),) * (ndim - consumed)
    return items


def _is_basic(index: tuple) -> bool:
    return all(i is None or isinstance(i, (int, np.integer, slice)) for i in index)


def _batch_to_end(a, nb: int):
    return np.moveaxis(a, tuple(range(nb)), tuple(range(-nb, 0))) if nb else a


def _batch_to_front(a, nb: int):
    return np.moveaxis(a, tuple(range(-nb, 0)), tuple(range(nb))) if nb else a


@dispatching
def index_add(values, index, shape):
    """Zeros of ``shape + extra`` with ``values`` added at ``index`` (repeats accumulate).

    ``index`` is normalised (see :func:`normalize_index`); ``values`` may carry extra
    trailing axes beyond ``zeros(shape)[index]``, which ride along (batch axes).
    """
    values = np.asarray(values)
    indexed_ndim = np.zeros(shape, dtype=bool)[index].ndim
    extra = values.shape[indexed_ndim:]
    out = np.zeros(tuple(shape) + extra, dtype=values.dtype)
    if _is_basic(index):
        out[index] = values
    else:
        np.add.at(out, index, values)
    return out


def take_index(a, index, nb: int):
    """``a[index]`` applied after ``nb`` leading batch axes."""
    return _batch_to_front(_batch_to_end(a, nb)[index], nb)


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
        ),
        family="indexing",
    ),
    index_add,
)


def _getitem_vjp(g, ans, x, index):
    nb = batch_ndim(g, ans)
    idx = normalize_index(index, np.ndim(x))
    return _batch_to_front(index_add(_batch_to_end(g, nb), idx, np.shape(x)), nb)


def _getitem(x, index):
    return x[index]


register(
    Rule(
        "getitem",
        _getitem,
        vjps={0: _getitem_vjp},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((4, 3)), (slice(1, 3), 0))),
            Case((Arg((4, 3)), (Ellipsis, 1))),
            Case((Arg((4, 3)), np.array([0, 2, 2]))),
            Case((Arg((4, 3)), (np.array([0, 3]), np.array([1, 1])))),
            Case((Arg((2, 3, 4)), (np.array([0, 1]), slice(None), np.array([3, 0])))),
            Case((Arg((4, 3)), (None, slice(None, None, -1)))),
            Case((Arg((2, 3)), np.array([[True, False, True], [False, True, True]]))),
        ),
        family="indexing",
    ),
    "getitem",
)


def _setitem_vjp_target(g, ans, x, index, value):
    mask = np.ones(np.shape(x))
    mask[normalize_index(index, np.ndim(x))] = 0.0
    return g * mask


def _setitem_vjp_value(g, ans, x, index, value):
    return take_index(g, normalize_index(index, np.ndim(x)), batch_ndim(g, ans))


def _setitem(x, index, value):
    out = np.array(x, copy=True)
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
        ),
        family="indexing",
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
        ),
        convention="no NaN or inf leaks from the branch not taken, at any order",
        family="indexing",
    ),
    np.where,
)
