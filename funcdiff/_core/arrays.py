"""Array types of other transforms that a Tensor's data may be.

``funcdiff.func.vmap``'s batched values stand for a batch of arrays and report the
shape of one example; a Tensor's data may be one (``grad`` inside ``vmap`` records one
graph for the whole batch). The core never converts them to ndarrays; the helpers
here tell them apart and answer a rule's fast-path test for the whole batch.
Such a type is recognised by its ``whole_batch()`` method, which returns the array
of every example together, and has a ``settle(owner)`` method (see :func:`settled`).
A Tensor is recognised by its ``data`` (this module imports no Tensor: the graph
module below the Tensor uses it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["is_foreign_array", "everywhere", "anywhere", "settled", "zeros"]


def is_foreign_array(x: Any) -> bool:
    """Whether ``x`` is a batched value of ``funcdiff.func.vmap`` (used as it is, never
    converted to an ndarray).

    Examples
    --------
    >>> is_foreign_array(np.ones(2)), is_foreign_array(1.0)
    (False, False)
    """
    return hasattr(type(x), "whole_batch")


def everywhere(mask: Any) -> bool:
    """Whether ``mask`` is true everywhere: the test of a rule's fast path.

    Under ``funcdiff.func.vmap`` a mask holds one value per example, and the test asks
    about every example of the batch at once (the fast path must be right for all of
    them; the general path is right for any); anywhere else, ``bool(np.all(mask))``.

    Examples
    --------
    >>> everywhere(np.array([True, False])), anywhere(np.array([True, False]))
    (False, True)
    """
    data: Any = getattr(mask, "data", None)
    if is_foreign_array(data):
        return everywhere(data.whole_batch())
    if is_foreign_array(mask):
        return everywhere(mask.whole_batch())
    return bool(np.all(mask))


def anywhere(mask: Any) -> bool:
    """Whether ``mask`` is true anywhere (in any example, under ``vmap``): see
    :func:`everywhere`."""
    data: Any = getattr(mask, "data", None)
    if is_foreign_array(data):
        return anywhere(data.whole_batch())
    if is_foreign_array(mask):
        return anywhere(mask.whole_batch())
    return bool(np.any(mask))


def settled(g: Any, shape: Any) -> Any:
    """A cotangent (an array, or a Tensor) as it reaches a value of shape ``shape`` in a
    node's record.

    A batched value's shape records the ``vmap`` calls it is batched in. A batched
    cotangent of a call that has returned (``grad`` of a vmapped function) reaching a
    value that call did not batch (one the examples shared) is summed over the batch;
    inside the call (``vmap(grad)``) it stays batched: one gradient per example.
    Anything else is returned as it is.
    """
    data: Any = getattr(g, "data", None)
    if is_foreign_array(data):
        return data.settle(g, shape)
    if is_foreign_array(g):
        return g.settle(g, shape)
    return g


def zeros(shape: Any, dtype: Any) -> Any:
    """Zeros of a recorded ``shape``: batched like the value it was read from.

    Examples
    --------
    >>> zeros((2,), np.float64)
    array([0., 0.])
    """
    make = getattr(shape, "zeros", None)
    return make(dtype) if make is not None else np.zeros(shape, dtype)
