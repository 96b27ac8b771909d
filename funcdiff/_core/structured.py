"""A structured batch of cotangents: scaled rows of the identity.

A vectorized Jacobian pulls back every row of the identity in one batched pass.
Through elementwise operations those rows stay one-hot, so their batch is the
diagonal ``d`` alone: ``g[b] = d[b - offset] * e_(b - offset)`` for the batch entries
``b`` of one output block, and zero elsewhere. :class:`BasisBatch` carries only
``d``: an elementwise vjp scales it in O(n) instead of O(n^2), and a matrix product
``g @ A`` becomes a row scaling of ``A`` instead of a GEMM.

It is a NumPy duck array: the operations that keep the structure return a
:class:`BasisBatch`, every other NumPy call (and every attribute a rule may read)
sees the dense array, so a rule never gets a wrong answer, only a slower one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["BasisBatch", "densify", "identity_rows"]


class BasisBatch(NDArrayOperatorsMixin):
    """``rows`` cotangents of shape ``d.shape``: row ``offset + j`` is ``d.flat[j]`` at
    flat position ``j`` and zero elsewhere; rows outside ``offset : offset + d.size``
    are zero.

    Examples
    --------
    >>> g = BasisBatch(np.array([1.0, 2.0]), 0, 3)
    >>> np.asarray(g * 10.0)
    array([[10.,  0.],
           [ 0., 20.],
           [ 0.,  0.]])
    """

    __slots__ = ("d", "offset", "rows", "_dense")

    def __init__(self, d: np.ndarray, offset: int, rows: int) -> None:
        self.d = d
        self.offset = offset
        self.rows = rows
        self._dense: np.ndarray | None = None

    # What rules read without computing anything.
    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows, *self.d.shape)

    @property
    def ndim(self) -> int:
        return self.d.ndim + 1

    @property
    def dtype(self) -> np.dtype:
        return self.d.dtype

    @property
    def size(self) -> int:
        return self.rows * self.d.size

    def __len__(self) -> int:
        return self.rows

    def dense(self) -> np.ndarray:
        """The dense array, made once: several rules may ask for it. It is shared, and
        read-only so that no caller can change it for the others."""
        out = self._dense
        if out is None:
            n = self.d.size
            out = np.zeros((self.rows, n), dtype=self.d.dtype)
            j = np.arange(n)
            out[self.offset + j, j] = self.d.reshape(-1)
            out = out.reshape(self.shape)
            out.flags.writeable = False
            self._dense = out
        return out

    def add_to(self, dense: np.ndarray) -> np.ndarray:
        """Add into ``dense`` (of this shape, owned by the caller) in place; return it."""
        if self.d.ndim == 0:
            dense[self.offset] += self.d
            return dense
        j = np.arange(self.d.size)
        # Indices in the full shape: a reshape of a non-contiguous array would be a copy.
        dense[(self.offset + j, *np.unravel_index(j, self.d.shape))] += self.d.reshape(-1)
        return dense

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.dense()
        if copy:
            return out.astype(dtype or out.dtype, copy=True)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getattr__(self, name: str) -> Any:
        # Anything else a rule asks of an array (reshape, T, sum, ...): the dense one.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dense(), name)

    def __getitem__(self, index: Any) -> Any:
        return self.dense()[index]

    def _like(self, d: Any) -> BasisBatch:
        return BasisBatch(np.asarray(d), self.offset, self.rows)

    def _scales(self, other: Any) -> bool:
        """Whether ``other`` multiplies every row without changing the row shape."""
        if isinstance(other, BasisBatch):
            return False
        shape = np.shape(other)
        return len(shape) <= self.d.ndim and np.broadcast_shapes(shape, self.d.shape) == (
            self.d.shape
        )

    def _same_layout(self, other: Any) -> bool:
        return (
            isinstance(other, BasisBatch)
            and other.offset == self.offset
            and other.rows == self.rows
            and other.d.shape == self.d.shape
        )

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            result = self._structured(ufunc, inputs)
            if result is not NotImplemented:
                return result
        dense = [densify(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(densify(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*dense, **kwargs)

    def _structured(self, ufunc: np.ufunc, inputs: tuple) -> Any:
        if len(inputs) == 1:
            if ufunc is np.negative or ufunc is np.positive:
                return self._like(ufunc(self.d))
            return NotImplemented
        a, b = inputs
        if ufunc is np.multiply:
            if a is self and self._scales(b):
                return self._like(self.d * b)
            if b is self and self._scales(a):
                return self._like(a * self.d)
            if a is self and self._same_layout(b):
                return self._like(self.d * b.d)
        elif ufunc is np.true_divide:
            if a is self and self._scales(b):
                return self._like(self.d / b)
        elif ufunc is np.add or ufunc is np.subtract:
            if a is self and self._same_layout(b):
                return self._like(ufunc(self.d, b.d))
        elif ufunc is np.matmul and a is self and self.d.ndim == 1 and np.ndim(b) == 2:
            # The batch of one-hot rows times B picks B's rows, scaled: no product at all.
            if not isinstance(b, np.ndarray):
                return NotImplemented
            n = self.d.size
            scaled = self.d[:, None] * b
            if self.offset == 0 and self.rows == n:
                return scaled
            out = np.zeros((self.rows, b.shape[1]), dtype=scaled.dtype)
            out[self.offset : self.offset + n] = scaled
            return out
        return NotImplemented

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return func(*_densify_all(args), **dict(zip(kwargs, _densify_all(kwargs.values()))))

    def __repr__(self) -> str:
        return f"BasisBatch(rows={self.rows}, offset={self.offset}, d={self.d!r})"


def densify(x: Any) -> Any:
    """The dense array of a :class:`BasisBatch`; anything else unchanged."""
    return x.dense() if type(x) is BasisBatch else x


def _densify_all(items: Any) -> list:
    out = []
    for x in items:
        if type(x) in (list, tuple):
            out.append(type(x)(densify(v) for v in x))
        else:
            out.append(densify(x))
    return out


def identity_rows(shape: tuple[int, ...], dtype: Any, offset: int, rows: int) -> BasisBatch:
    """Rows ``offset : offset + prod(shape)`` of the identity of size ``rows``, as cotangents
    of an output of ``shape``."""
    return BasisBatch(np.ones(shape, dtype=dtype), offset, rows)
