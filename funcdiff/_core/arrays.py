"""Array types of other transforms that a Tensor's data may be.

``funcdiff.func.vmap``'s batched values stand for a batch of arrays and report the
shape of one example; a Tensor's data may be one (``grad`` inside ``vmap`` records one
graph for the whole batch). The core never converts them to ndarrays; the helpers
here tell them apart and answer a rule's fast-path test for the whole batch.
Such a type is recognised by its ``whole_batch()`` method, which returns the array
of every example together.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor

__all__ = ["is_foreign_array", "everywhere", "anywhere"]


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
    if isinstance(mask, Tensor):
        mask = mask.data
    if is_foreign_array(mask):
        return everywhere(mask.whole_batch())
    return bool(np.all(mask))


def anywhere(mask: Any) -> bool:
    """Whether ``mask`` is true anywhere (in any example, under ``vmap``): see
    :func:`everywhere`."""
    if isinstance(mask, Tensor):
        mask = mask.data
    if is_foreign_array(mask):
        return anywhere(mask.whole_batch())
    return bool(np.any(mask))
