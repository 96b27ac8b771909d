"""Choosing elements: ``select``, ``choose``, ``compress`` and ``partition``.

Each is a composition (``Rule(impl=...)``) of rules that exist: the positions it picks
depend on conditions or indices only, never on the differentiated values (except
``partition``, whose order is that of ``argpartition``, a constant), so the gradient
flows to the picked elements through ``where``, ``take`` and ``take_along_axis``.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> np.sum(np.select([np.array([True, False, True])], [x * x], default=0.0)).backward()
>>> x.grad
tensor([2., 0., 6.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core.backends import as_array, on_device_of
from funcdiff._core.registry import Rule, register
from funcdiff._core.tensor import Tensor, values_read
from funcdiff.rules.cases import Arg, Case

_FAMILY = "indexing"


def _constant(x: Any, func: str, argument: str) -> np.ndarray:
    """The values of a condition or index argument; refused if it requires grad."""
    if isinstance(x, Tensor):
        if x.requires_grad:
            raise TypeError(
                f"numpy.{func}: {argument} is not differentiable; pass it as a constant "
                "(or detach() it)"
            )
        return values_read(x)
    return as_array(x)


# ---------------------------------------------------------------- select
def _select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError("numpy.select: list of cases must be same length as list of conditions")
    if len(choicelist) == 0:
        raise ValueError("numpy.select: select with an empty condition list is not possible")
    conditions = [_constant(c, "select", "condlist") for c in condlist]
    for c in conditions:
        if c.dtype != np.bool_:
            raise TypeError(
                f"numpy.select: invalid entry in condlist: should be boolean ndarray, not {c.dtype}"
            )
    result = default
    # The first true condition wins: apply them from the last to the first.
    for condition, choice in zip(reversed(conditions), reversed(list(choicelist)), strict=True):
        result = np.where(condition, choice, result)
    shape = np.broadcast_shapes(*(np.shape(c) for c in (*conditions, *choicelist)))
    return np.broadcast_to(result, shape) if np.shape(result) != shape else result


register(
    Rule(
        "select",
        np.select,
        impl=_select,
        cases=(
            Case(
                (
                    [np.array([True, False, False, True]), np.array([False, True, False, True])],
                    [Arg((4,)), Arg((4,))],
                ),
            ),
            Case(
                ([np.array([[True], [False]])], [Arg((2, 3))]),
                {"default": Arg((3,))},
            ),
        ),
        nondiff_args=frozenset({0, "condlist"}),
        convention="the first true condition picks; a condition is a constant",
        family=_FAMILY,
        complex=True,
    ),
    np.select,
)


# ---------------------------------------------------------------- choose
def _choose(a, choices, out=None, mode="raise"):
    if out is not None:
        raise TypeError("numpy.choose on Tensors does not support out=")
    index = _constant(a, "choose", "a")
    if not isinstance(choices, (list, tuple)):
        choices = list(choices) if isinstance(choices, Tensor) else list(as_array(choices))
    n = len(choices)
    try:  # NumPy's own index modes (raise, wrap, clip) map the indices
        index = np.take(on_device_of(np.arange(n), index), index, mode=mode)
    except IndexError:
        raise ValueError("numpy.choose: invalid entry in choice array") from None
    result = choices[0]
    for k in range(1, n):
        result = np.where(index == k, choices[k], result)
    shape = np.broadcast_shapes(np.shape(index), *(np.shape(c) for c in choices))
    return np.broadcast_to(result, shape) if np.shape(result) != shape else result


register(
    Rule(
        "choose",
        np.choose,
        impl=_choose,
        cases=(
            Case((np.array([0, 2, 1, 0]), [Arg((4,)), Arg((4,)), Arg((4,))])),
            Case((np.array([[0], [1]]), [Arg((3,)), Arg((2, 3))])),
            Case((np.array([0, 3, -1]), [Arg((3,)), Arg((3,))]), {"mode": "wrap"}),
        ),
        nondiff_args=frozenset({0, "a"}),
        convention="the index array is a constant",
        family=_FAMILY,
        complex=True,
    ),
    np.choose,
)


# ---------------------------------------------------------------- compress
def _compress(condition, a, axis=None, out=None):
    if out is not None:
        raise TypeError("numpy.compress on Tensors does not support out=")
    keep = np.ravel(_constant(condition, "compress", "condition")).astype(bool)
    if axis is None:
        a = np.ravel(a)
        axis = 0
    size = np.shape(a)[axis]
    if keep.size > size:
        raise IndexError(
            f"numpy.compress: condition has {keep.size} entries, axis {axis} only {size}"
        )
    return np.take(a, np.flatnonzero(keep), axis=axis)


register(
    Rule(
        "compress",
        np.compress,
        impl=_compress,
        cases=(
            Case((np.array([True, False, True]), Arg((3, 2))), {"axis": 0}),
            Case((np.array([False, True]), Arg((3, 2))), {"axis": 1}),
            Case((np.array([1, 0, 0, 1, 1]), Arg((2, 3)))),
        ),
        nondiff_args=frozenset({0, "condition"}),
        convention="the condition is a constant",
        family=_FAMILY,
        complex=True,
    ),
    np.compress,
)


# ---------------------------------------------------------------- partition
def _partition(a, kth, axis=-1, kind="introselect", order=None):
    if order is not None:
        raise TypeError("numpy.partition on Tensors does not support order=")
    if axis is None:
        a = np.ravel(a)
        axis = -1
    # The order is argpartition's, a constant; the values follow it.
    index = np.argpartition(values_read(a) if isinstance(a, Tensor) else a, kth, axis=axis)
    return np.take_along_axis(a, index, axis=axis)


register(
    Rule(
        "partition",
        np.partition,
        impl=_partition,
        cases=(
            Case((Arg((6,), kind="distinct"), 2)),
            Case((Arg((3, 5), kind="distinct"), (1, 3)), {"axis": 1}),
            Case((Arg((4, 3), kind="distinct"), 0), {"axis": 0}),
            Case((Arg((2, 3), kind="distinct"), 4), {"axis": None}),
        ),
        nondiff_args=frozenset({1, "kth"}),
        convention="the order is numpy.argpartition's (a constant); at ties the gradient "
        "goes to the entry that order puts in place",
        family=_FAMILY,
    ),
    np.partition,
)
