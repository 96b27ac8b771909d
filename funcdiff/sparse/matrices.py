"""Sparse matrices whose stored values are a Tensor: :class:`csr_array`.

``funcdiff.sparse.csr_array((data, indices, indptr), shape=(m, n))`` takes SciPy's
constructor form; ``data`` may be a Tensor (a conductivity field, the weights of a
graph) and every product and solve with the matrix is differentiable with respect to
it, to any order. A product ``K @ x`` is the sum, row by row, of ``data * x[indices]``:
a gather, an elementwise product and a constant row selector (a recorded
``scipy.sparse`` product), so the gradient with respect to ``data`` has ``data``'s
shape and is never formed as a dense matrix, and :mod:`funcdiff.sparse` sees the
matrix's exact pattern.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> import funcdiff.sparse as fs
>>> data = fd.tensor([2.0, 1.0, 0.0, 3.0], requires_grad=True)
>>> K = fs.csr_array((data, np.array([0, 2, 1, 2]), np.array([0, 2, 3, 4])), shape=(3, 3))
>>> K
<funcdiff.sparse.csr_array of shape (3, 3) with 4 stored elements, data requires grad>
>>> y = K @ np.array([1.0, 2.0, 3.0])
>>> y
tensor([5., 0., 9.], grad_fn=<SparseMatmulBackward>)
>>> y.sum().backward()
>>> data.grad                                  # one entry per stored value
tensor([1., 3., 2., 3.])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from funcdiff._core.tensor import Tensor
from funcdiff.rules.sparse_linalg import entry_rows
from funcdiff.rules.sparse_matmul import DEFERS_MATMUL, sparse_matmul

__all__ = ["csr_array"]


def _index_array(value: Any, name: str) -> np.ndarray:
    if isinstance(value, Tensor):
        value = value.detach().numpy()
    array = np.asarray(value)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise ValueError(
            f"csr_array: {name} must be a 1-d array of integers, got shape {array.shape} "
            f"and dtype {array.dtype}"
        )
    return array.astype(np.int64, copy=False)


def _checked_structure(
    data: Any, indices: np.ndarray, indptr: np.ndarray, shape: Any
) -> tuple[int, int]:
    """Validate like SciPy; returns the shape (inferred when ``shape`` is None)."""
    if np.ndim(data) != 1:
        raise ValueError(f"csr_array: data must be 1-d, got shape {np.shape(data)}")
    nnz = np.shape(data)[0]
    if indices.size != nnz:
        raise ValueError(
            f"csr_array: indices and data should have the same size ({indices.size} != {nnz})"
        )
    if indptr.size == 0:
        raise ValueError("csr_array: index pointer size 0 should be at least 1")
    if shape is None:
        m = indptr.size - 1
        n = int(indices.max()) + 1 if indices.size else 0
    else:
        if len(tuple(shape)) != 2:
            raise ValueError(f"csr_array: shape must be (m, n), got {shape!r}")
        m, n = (int(s) for s in shape)
        if m < 0 or n < 0:
            raise ValueError(f"csr_array: shape must be non-negative, got {shape!r}")
    if indptr.size != m + 1:
        raise ValueError(
            f"csr_array: index pointer size {indptr.size} should be {m + 1} for {m} rows"
        )
    if indptr[0] != 0:
        raise ValueError("csr_array: index pointer should start with 0")
    if indptr[-1] != nnz:
        raise ValueError(
            f"csr_array: the last index pointer ({indptr[-1]}) should equal the number of "
            f"stored values ({nnz})"
        )
    if np.any(np.diff(indptr) < 0):
        raise ValueError("csr_array: index pointer values must form a non-decreasing sequence")
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise ValueError(f"csr_array: column index out of bounds for {n} columns")
    return m, n


def _from_coordinates(arg1: tuple, shape: Any) -> tuple[tuple, tuple[int, int]]:
    """``(data, (row, col))`` as ``(data, indices, indptr)``: the entries sorted by row
    (then column) with a recorded gather of ``data``; duplicates stay and add."""
    data, coordinates = arg1
    if not (isinstance(coordinates, tuple) and len(coordinates) == 2):
        raise ValueError("csr_array: the coordinate form is (data, (row, col))")
    row, col = (_index_array(c, name) for c, name in zip(coordinates, ("row", "col")))
    if not isinstance(data, Tensor):
        data = np.asarray(data)
    if np.ndim(data) != 1 or not (row.size == col.size == np.shape(data)[0]):
        raise ValueError(
            f"csr_array: row, column and data arrays must have the same length "
            f"({row.size}, {col.size}, {np.shape(data)[0] if np.ndim(data) else 'scalar'})"
        )
    if shape is None:
        shape = (int(row.max()) + 1 if row.size else 0, int(col.max()) + 1 if col.size else 0)
    m, n = (int(s) for s in shape)
    if row.size and (row.min() < 0 or row.max() >= m or col.min() < 0 or col.max() >= n):
        raise ValueError(f"csr_array: a row or column index is out of bounds for {(m, n)}")
    order = np.lexsort((col, row))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=m))]).astype(np.int64)
    return (data[order], col[order], indptr), (m, n)


class csr_array:  # noqa: N801  (SciPy's name)
    """A CSR sparse matrix whose stored values may be a Tensor.

    Parameters
    ----------
    arg1 : tuple or scipy.sparse array or matrix
        ``(data, indices, indptr)``, SciPy's CSR form: the values of row ``i`` are
        ``data[indptr[i]:indptr[i + 1]]``, in the columns ``indices[indptr[i]:indptr[i + 1]]``;
        or ``(data, (row, col))``, the coordinate form (the entries are put in CSR order
        by a recorded gather, so ``data``'s gradient keeps the order given); or a
        scipy.sparse matrix (constant values). ``data`` is a Tensor (differentiated) or
        an array; duplicate entries add and explicitly stored zeros are kept (they have a
        derivative).
    shape : tuple of int, optional
        ``(m, n)``; inferred from ``indptr`` and ``indices`` when omitted.

    Raises
    ------
    ValueError
        Inconsistent sizes, indices out of range, a decreasing ``indptr``: the checks of
        ``scipy.sparse.csr_array``.

    Notes
    -----
    Supports ``K @ x`` and ``x @ K`` with ndarrays and Tensors of shape ``(n,)`` or
    ``(n, k)`` (SciPy's shapes), ``K.dot(x)``, scaling by a number or a 0-d Tensor
    (``t * K``, ``K / t``, ``-K``), ``K.T`` (the stored values permuted
    into the transpose's order, a recorded gather), :func:`funcdiff.sparse.linalg.spsolve`
    and :meth:`toarray`. Gradients with respect to ``data`` have ``data``'s shape.
    Products cost a gather and a sparse product per call, ``O(nnz * k)``.
    """

    format = "csr"
    ndim = 2
    # ndarray @ K and ndarray * K give way to K's own reflected operators.
    __array_ufunc__ = None

    def __init__(self, arg1: Any, shape: Any = None) -> None:
        if isinstance(arg1, (sp.sparray, sp.spmatrix)):
            converted = sp.csr_array(arg1)
            arg1 = (converted.data, converted.indices, converted.indptr)
            shape = converted.shape if shape is None else shape
        elif isinstance(arg1, tuple) and len(arg1) == 2:
            arg1, shape = _from_coordinates(arg1, shape)
        if not (isinstance(arg1, tuple) and len(arg1) == 3):
            raise ValueError(
                "funcdiff.sparse.csr_array takes (data, indices, indptr) or "
                "(data, (row, col)), SciPy's forms, or a scipy.sparse matrix; "
                f"got {type(arg1).__name__}"
            )
        data, indices, indptr = arg1
        if not isinstance(data, Tensor):
            data = np.asarray(data)
        self.indices = _index_array(indices, "indices")
        self.indptr = _index_array(indptr, "indptr")
        self.shape = _checked_structure(data, self.indices, self.indptr, shape)
        self.data = data
        self._rows: np.ndarray | None = None
        self._selector: sp.csr_array | None = None

    # ------------------------------------------------------------ attributes
    @property
    def nnz(self) -> int:
        """The number of stored values, explicit zeros and duplicates included."""
        return int(self.indices.size)

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the stored values."""
        return self.data.dtype

    def __repr__(self) -> str:
        grad = isinstance(self.data, Tensor) and self.data.requires_grad
        return (
            f"<funcdiff.sparse.csr_array of shape {self.shape} with {self.nnz} stored "
            f"elements{', data requires grad' if grad else ''}>"
        )

    def entry_rows(self) -> np.ndarray:
        """The row of each stored value (``indices`` holds the columns)."""
        if self._rows is None:
            self._rows = entry_rows(self.indptr)
        return self._rows

    def _row_selector(self) -> sp.csr_array:
        """The constant ``m x nnz`` matrix that adds each row's products."""
        if self._selector is None:
            self._selector = sp.csr_array(
                (np.ones(self.nnz), np.arange(self.nnz), self.indptr),
                shape=(self.shape[0], self.nnz),
            )
        return self._selector

    # ------------------------------------------------------------ conversions
    def to_scipy(self) -> sp.csr_array:
        """The matrix as a ``scipy.sparse.csr_array`` of the current values (a constant:
        no derivative flows through it)."""
        values = self.data.detach().numpy() if isinstance(self.data, Tensor) else self.data
        return sp.csr_array((np.array(values), self.indices, self.indptr), shape=self.shape)

    def toarray(self) -> Any:
        """The dense matrix (a Tensor when ``data`` is one, differentiable; duplicates add).

        Examples
        --------
        >>> K = csr_array(([1.0, 2.0], [1, 0], [0, 1, 2]), shape=(2, 2))
        >>> K.toarray()
        array([[0., 1.],
               [2., 0.]])
        """
        m, n = self.shape
        place = sp.csr_array(
            (np.ones(self.nnz), (self.entry_rows() * n + self.indices, np.arange(self.nnz))),
            shape=(m * n, self.nnz),
        )
        return np.reshape(sparse_matmul(place, self.data), (m, n))

    # ------------------------------------------------------------ products
    @property
    def T(self) -> csr_array:  # noqa: N802
        """The transpose, in CSR: ``data`` gathered into the transpose's order."""
        return self.transpose()

    def transpose(self) -> csr_array:
        """The transpose (see :attr:`T`)."""
        m, n = self.shape
        order = np.argsort(self.indices, kind="stable")  # by column, rows in order
        counts = np.bincount(self.indices, minlength=n)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return csr_array((self.data[order], self.entry_rows()[order], indptr), shape=(n, m))

    def _times(self, x: Any) -> Any:
        """``self @ x`` for ``x`` of shape ``(n,)`` or ``(n, k)``."""
        if isinstance(x, (csr_array, sp.sparray, sp.spmatrix)):
            raise TypeError(
                "funcdiff.sparse.csr_array @ a sparse matrix is not supported: "
                "multiply by a dense array or Tensor"
            )
        if not isinstance(x, Tensor):
            x = np.asarray(x)
        if np.ndim(x) == 0:
            raise ValueError("Scalar operands are not allowed, use '*' instead")
        if np.ndim(x) > 2:
            raise ValueError("could not interpret dimensions")
        n = self.shape[1]
        if np.shape(x)[0] != n:
            tail = "1?" if np.ndim(x) == 1 else "m"
            raise ValueError(
                f"matmul: dimension mismatch with signature "
                f"(n,k={n}),(k={np.shape(x)[0]},{tail})->(n,{tail})"
            )
        gathered = x[self.indices]
        values = self.data if np.ndim(x) == 1 else np.reshape(self.data, (-1, 1))
        return sparse_matmul(self._row_selector(), values * gathered)

    def __matmul__(self, other: Any) -> Any:
        return self._times(other)

    def __rmatmul__(self, other: Any) -> Any:
        if np.ndim(other) == 1:
            return self.T._times(other)
        if np.ndim(other) != 2:
            raise ValueError("could not interpret dimensions")
        return np.transpose(self.T._times(np.transpose(other)))

    def dot(self, other: Any) -> Any:
        """``self @ other``."""
        return self._times(other)

    # ------------------------------------------------------------ scaling
    def _scaled(self, factor: Any, name: str) -> csr_array:
        if np.ndim(factor) != 0 or isinstance(factor, (csr_array, sp.sparray, sp.spmatrix)):
            raise TypeError(
                f"funcdiff.sparse.csr_array {name} takes a scalar (a number or a 0-d Tensor); "
                "for a matrix product use @"
            )
        return csr_array((self.data * factor, self.indices, self.indptr), shape=self.shape)

    def __mul__(self, other: Any) -> csr_array:
        return self._scaled(other, "*")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> csr_array:
        return self._scaled(1.0 / other, "/")

    def __neg__(self) -> csr_array:
        return csr_array((-self.data, self.indices, self.indptr), shape=self.shape)


setattr(csr_array, DEFERS_MATMUL, True)  # tensor @ K reaches K.__rmatmul__
