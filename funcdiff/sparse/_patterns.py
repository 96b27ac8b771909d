"""Sparsity patterns of traced values: which input elements each element depends on.

A :class:`Pattern` is a boolean matrix with one row per element of a value (C order)
and one column per element of the flattened, concatenated inputs. It is stored lazily
as a base matrix and a row map, so that broadcasting a scalar to a million elements, or
slicing, costs an index array and no sparse arithmetic. Everything is vectorised: a
pattern operation is a handful of NumPy or SciPy calls whatever the size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import scipy.sparse as sp

__all__ = ["Pattern", "identity", "union", "product", "broadcast_positions", "positions"]


class Pattern:
    """The dependency pattern of one value: ``rows()`` is ``(value.size, n_inputs)`` bool.

    ``base`` holds distinct rows; ``rowmap`` (None for the identity) says which base row
    each element of the value has, ``-1`` for an element that depends on nothing.
    """

    __slots__ = ("base", "rowmap", "_rows")

    def __init__(self, base: sp.csr_array, rowmap: np.ndarray | None = None) -> None:
        self.base = base
        self.rowmap = rowmap
        self._rows: sp.csr_array | None = base if rowmap is None else None

    @property
    def size(self) -> int:
        return self.base.shape[0] if self.rowmap is None else self.rowmap.size

    @property
    def ncols(self) -> int:
        return self.base.shape[1]

    def rows(self) -> sp.csr_array:
        """The pattern as a ``(size, n_inputs)`` boolean CSR matrix (computed once)."""
        if self._rows is None:
            # rowmap is set: without one, _rows is base from the start
            self._rows = take_rows(self.base, cast(np.ndarray, self.rowmap))
        return self._rows

    def take(self, index: np.ndarray) -> Pattern:
        """The pattern of ``value.ravel()[index]`` (``-1`` entries: constants)."""
        index = np.asarray(index, dtype=np.int64).ravel()
        if self.rowmap is None:
            if index.size == self.size and _is_arange(index):
                return self
            return Pattern(self.base, index)
        mapped = self.rowmap[np.maximum(index, 0)]
        if index.size and index.min() < 0:
            mapped = np.where(index < 0, -1, mapped)
        return Pattern(self.base, mapped)

    def same_as(self, other: Pattern) -> bool:
        """Whether both are the same rows by construction (no comparison of matrices)."""
        if self.base is not other.base:
            return False
        if self.rowmap is None or other.rowmap is None:
            return self.rowmap is other.rowmap
        return self.rowmap is other.rowmap or np.array_equal(self.rowmap, other.rowmap)

    def union_row(self) -> sp.csr_array:
        """A ``(1, n_inputs)`` row: everything any element depends on."""
        base = self.base
        if self.rowmap is not None:
            used = np.unique(self.rowmap[self.rowmap >= 0])
            if used.size < base.shape[0]:
                base = base[used]
        cols = np.unique(base.indices[: base.nnz])
        return _csr_rows([cols], base.shape[1])


def _is_arange(index: np.ndarray) -> bool:
    if index.size == 0:
        return True
    return bool(index[0] == 0 and index[-1] == index.size - 1 and np.all(np.diff(index) == 1))


def _csr(indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    data = np.ones(indices.size, dtype=bool)
    out = sp.csr_array((data, indices, indptr), shape=shape, copy=False)
    out.has_sorted_indices = True  # every constructor here keeps rows sorted
    return out


def _csr_rows(rows: Sequence[np.ndarray], ncols: int) -> sp.csr_array:
    lengths = np.array([r.size for r in rows], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)
    return _csr(indptr, indices, (len(rows), ncols))


def take_rows(base: sp.csr_array, rowmap: np.ndarray) -> sp.csr_array:
    """Rows ``rowmap`` of ``base`` (``-1``: an empty row), as one vectorised gather."""
    if base.shape[0] == 0:  # only constants can be taken from nothing
        return _csr(
            np.zeros(rowmap.size + 1, np.int64), np.zeros(0, np.int64), (rowmap.size, base.shape[1])
        )
    indptr = base.indptr.astype(np.int64, copy=False)
    safe = np.maximum(rowmap, 0)
    lengths = indptr[safe + 1] - indptr[safe]
    if rowmap.size and rowmap.min() < 0:
        lengths = np.where(rowmap < 0, 0, lengths)
    new_indptr = np.zeros(rowmap.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    total = int(new_indptr[-1])
    starts = np.repeat(indptr[safe] - new_indptr[:-1], lengths)
    indices = base.indices[starts + np.arange(total, dtype=np.int64)]
    return _csr(new_indptr, indices, (rowmap.size, base.shape[1]))


def identity(offset: int, size: int, ncols: int) -> Pattern:
    """The pattern of input elements ``offset .. offset + size`` themselves."""
    indptr = np.arange(size + 1, dtype=np.int64)
    return Pattern(_csr(indptr, np.arange(offset, offset + size, dtype=np.int64), (size, ncols)))


def union(patterns: Sequence[Pattern | None]) -> Pattern | None:
    """The element-by-element union of patterns of one size (None: depends on nothing)."""
    live = [p for p in patterns if p is not None]
    if not live:
        return None
    first = live[0]
    if all(p.same_as(first) for p in live[1:]):
        return first
    total = live[0].rows()
    for p in live[1:]:
        total = total + p.rows()
    return Pattern(total)


def product(selector: sp.csr_array, pattern: Pattern) -> Pattern:
    """The pattern of ``S @ value`` for a boolean selector ``S`` (out.size, value.size):
    each output element depends on the union of the elements ``S`` selects."""
    rows = pattern.rows()
    out = sp.csr_array(selector, dtype=bool) @ rows
    out.sort_indices()
    return Pattern(out)


def positions(shape: Sequence[int]) -> np.ndarray:
    """``arange(size).reshape(shape)``: each element holds its own C-order position."""
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(tuple(shape))


def broadcast_positions(shape: Sequence[int], target: Sequence[int]) -> np.ndarray:
    """For each element of ``broadcast_to(value, target)``, its position in ``value``."""
    shape, target = tuple(shape), tuple(target)
    pos = positions(shape)
    if shape == target:
        return pos.ravel()
    return np.broadcast_to(pos, target).ravel()


def fibres(shape: Sequence[int], axes: Sequence[int]) -> sp.csr_array:
    """The selector of a reduction over ``axes``: row ``o`` picks the elements of the
    fibre that output ``o`` (remaining axes in C order) reduces."""
    shape = tuple(shape)
    ndim = len(shape)
    axes = sorted({a % ndim for a in axes}) if ndim else []
    keep = [a for a in range(ndim) if a not in axes]
    pos = positions(shape).transpose(keep + axes)
    nout = int(np.prod([shape[a] for a in keep]))
    fibre = int(np.prod([shape[a] for a in axes]))
    indptr = np.arange(nout + 1, dtype=np.int64) * fibre
    cols: np.ndarray = pos.reshape(nout, fibre)
    cols = np.sort(cols, axis=1).ravel()
    return _csr(indptr, cols, (nout, int(np.prod(shape))))


def prefixes(shape: Sequence[int], axis: int | None) -> sp.csr_array:
    """The selector of a scan along ``axis`` (``cumsum``): element ``i`` of a fibre reads
    elements ``0..i`` of it. ``axis=None`` scans the flattened value."""
    shape = tuple(shape)
    if axis is None:
        shape, axis = (int(np.prod(shape)),), 0
    axis %= len(shape)
    size = int(np.prod(shape))
    if size == 0:
        return sp.csr_array((0, 0), dtype=bool)
    pos = np.moveaxis(positions(shape), axis, -1)
    length = shape[axis]
    lead = pos.reshape(-1, length)
    rows_i, cols_j = np.tril_indices(length)
    # out position of (fibre f, i) reads (fibre f, j) for j <= i
    out_pos = lead[:, rows_i].ravel()
    in_pos = lead[:, cols_j].ravel()
    m = sp.coo_array((np.ones(out_pos.size, bool), (out_pos, in_pos)), shape=(size, size)).tocsr()
    m.sort_indices()
    return m


def selector(out_pos: np.ndarray, in_pos: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """A boolean ``shape`` matrix with ones at ``(out_pos, in_pos)`` (duplicates merged)."""
    m = sp.coo_array((np.ones(out_pos.size, bool), (out_pos, in_pos)), shape=shape).tocsr()
    m.sum_duplicates()
    m.sort_indices()
    return m
