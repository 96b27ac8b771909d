"""Recovering a sparse matrix from its compressed products.

A colouring (:mod:`funcdiff.sparse._coloring`) says where each stored entry of the
pattern sits in the products of the matrix with the colours' seed vectors (its
``gather``); decompression reads the entries there and puts them around the pattern.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from funcdiff.sparse._coloring import Coloring, _as_pattern

__all__ = ["Decompressor", "decompress"]


def decompress(coloring: Coloring, pattern: Any, compressed: Any) -> sp.csr_array:
    """Recover the sparse matrix from its compressed products.

    Parameters
    ----------
    coloring : Coloring
        As returned by :func:`color_jacobian` or :func:`color_hessian` for ``pattern``.
    pattern : scipy.sparse array or array-like, shape (m, n)
        The pattern that was coloured.
    compressed : array_like
        ``(ncolors, m)`` for column/star/dense colourings (row ``c`` is the product with
        seed ``c``), ``(ncolors, n)`` for row colourings.

    Returns
    -------
    scipy.sparse.csr_array
        float64 with a copy of the pattern's indices and indptr; explicit zeros are kept.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from funcdiff.sparse._coloring import color_hessian
    >>> H = sp.csr_array(np.array([[2.0, 1, 0], [1, 3, 4], [0, 4, 5]]))
    >>> c = color_hessian(H != 0)
    >>> decompress(c, H != 0, (H @ c.seeds(3).T).T).toarray()
    array([[2., 1., 0.],
           [1., 3., 4.],
           [0., 4., 5.]])
    """
    return Decompressor(coloring, pattern)(compressed)


class Decompressor:
    """:func:`decompress` prepared for one colouring and pattern, for many calls.

    The pattern is checked and made canonical once; each call gathers the compressed
    values into the pattern's stored entries and returns a new ``csr_array`` with its
    own copies of the indices (so a caller may change them).

    Parameters
    ----------
    coloring, pattern
        As for :func:`decompress`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from funcdiff.sparse._coloring import color_hessian
    >>> H = sp.csr_array(np.array([[2.0, 1, 0], [1, 3, 4], [0, 4, 5]]))
    >>> d = Decompressor(color_hessian(H != 0), H != 0)
    >>> d((H @ d.coloring.seeds(3).T).T).toarray()[1]
    array([1., 3., 4.])
    """

    def __init__(self, coloring: Coloring, pattern: Any) -> None:
        if not isinstance(coloring, Coloring):
            raise TypeError(f"coloring must be a Coloring, got {type(coloring).__name__}")
        csr = _as_pattern(pattern)
        m, n = csr.shape
        if coloring.gather.shape != (csr.nnz,):
            raise ValueError(
                f"pattern has {csr.nnz} stored entries but coloring was made for "
                f"{coloring.gather.shape[0]}: colour this pattern"
            )
        self.coloring = coloring
        self.shape = csr.shape
        self.expected = (coloring.ncolors, n if coloring.kind == "row" else m)
        self._gather = np.ascontiguousarray(coloring.gather, dtype=np.intp)
        # The matrices handed out index with 32-bit integers where they fit, as SciPy's
        # own constructors do: each call copies the index arrays, and at 800,000
        # entries (the Brusselator's) int64 copies took a tenth of a compiled call.
        fits = max(csr.nnz, m, n) <= np.iinfo(np.int32).max
        index_type = np.int32 if fits else np.int64
        self._indices = csr.indices.astype(index_type)
        self._indptr = csr.indptr.astype(index_type)

    def __call__(self, compressed: Any) -> sp.csr_array:
        """The matrix from its compressed products (shape ``(ncolors, m)``, or
        ``(ncolors, n)`` for a row colouring); float64, explicit zeros kept."""
        if np.iscomplexobj(compressed):
            raise TypeError("compressed must be real (float64)")
        values = np.asarray(compressed, dtype=np.float64)
        if values.shape != self.expected:
            raise ValueError(f"compressed must have shape {self.expected}, got {values.shape}")
        return self.assemble(values.ravel().take(self._gather))

    @property
    def gather(self) -> np.ndarray:
        """Where each stored entry of the pattern (in CSR order) sits in the raveled
        compressed products: ``assemble(compressed.ravel()[gather])`` is this call."""
        return self._gather

    def assemble(self, data: np.ndarray) -> sp.csr_array:
        """The matrix from the values of the pattern's stored entries, in CSR order
        (``data`` becomes the result's own: pass a fresh array)."""
        if np.shape(data) != self._gather.shape:
            raise ValueError(
                f"data must hold one value per stored entry, shape {self._gather.shape}, "
                f"got {np.shape(data)}"
            )
        out = sp.csr_array(
            (data, self._indices.copy(), self._indptr.copy()), shape=self.shape, copy=False
        )
        out.has_sorted_indices = True  # canonical: the pattern was made so once
        return out
