"""``r_`` and ``c_`` that concatenate Tensors through the recorded ``np.concatenate``.

NumPy's ``np.r_[...]`` is an object's ``__getitem__``: no dispatch protocol reaches it,
so it converts Tensors to plain arrays. These objects give the same results for what
``np.r_``/``np.c_`` are commonly used with (slices, with a step or a complex count as
in NumPy; numbers; arrays; Tensors) and record the concatenation when a Tensor is among
the pieces. Without a Tensor, NumPy's own ``r_``/``c_`` run, string directives included.
"""

from __future__ import annotations

from typing import Any

import numpy

from funcdiff._core.tensor import Tensor
from funcdiff.numpy._creation import contains_tensor, lift

__all__ = ["RClass", "CClass", "r_", "c_"]


class _Concatenator:
    """Shared ``__getitem__``: pieces made at least ``ndmin``-d, joined along ``axis``."""

    _numpy: Any
    _axis: int
    _ndmin: int
    _name: str

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        if not any(contains_tensor(item) for item in items):
            return self._numpy[key]
        if any(isinstance(item, str) for item in items):
            raise ValueError(
                f"{self._name}[...]: string directives ('r', 'c', '0,2,1' ...) are not "
                f"supported with Tensors; use np.concatenate or np.stack with an axis"
            )
        pieces = [self._piece(item, i) for i, item in enumerate(items)]
        return numpy.concatenate(pieces, axis=self._axis)

    def _piece(self, item: Any, position: int) -> Any:
        if isinstance(item, slice):
            # NumPy's own arange/linspace semantics (a complex step is a count).
            item = self._numpy[item]
        item = lift(item, f"{self._name}[...] item {position}")
        if not isinstance(item, Tensor):
            item = numpy.asarray(item)
        if item.ndim >= self._ndmin:
            return item
        if item.ndim == 0:
            return item.reshape((1,) * self._ndmin)
        # A 1-d piece of c_ becomes a column, as in NumPy.
        return item.reshape(item.shape + (1,) * (self._ndmin - item.ndim))

    def __len__(self) -> int:
        return 0


class RClass(_Concatenator):
    """``np.r_``: join pieces along the first axis; numbers become 1-d.

    Examples
    --------
    >>> import funcdiff as fd
    >>> import funcdiff.numpy as np
    >>> w = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> b = fd.tensor(3.0, requires_grad=True)
    >>> np.r_[w, b, 0:2, 7.0]
    tensor([1., 2., 3., 0., 1., 7.], grad_fn=<ConcatenateBackward>)
    >>> np.r_[0:1:3j]  # no Tensor: NumPy's own r_
    array([0. , 0.5, 1. ])
    """

    _numpy = numpy.r_
    _axis = 0
    _ndmin = 1
    _name = "r_"


class CClass(_Concatenator):
    """``np.c_``: join pieces along the last axis; 1-d pieces become columns.

    Examples
    --------
    >>> import funcdiff as fd
    >>> import funcdiff.numpy as np
    >>> w = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> np.c_[w, [3.0, 4.0]]
    tensor([[1., 3.],
            [2., 4.]], grad_fn=<ConcatenateBackward>)
    """

    _numpy = numpy.c_
    _axis = -1
    _ndmin = 2
    _name = "c_"


r_ = RClass()
c_ = CClass()
