"""The Hessian pattern, accumulated over a program as it runs.

Every second-order interaction of a program is created at one nonlinear operation and
only carried along linearly afterwards (the chain rule: the Hessian of ``f(v(x))`` is
``J_v^T (d2f) J_v + sum_k (df/dv_k) d2v_k``). So each operation adds, for its output
elements, the pairs of input elements that its own second derivative can couple, and
the union over the program is the pattern: for an elementwise ``sin(u)``, every pair of
elements ``u_k`` depends on; for ``u * w``, the pairs of one dependency of ``u_k`` and
one of ``w_k``; for a linear operation, nothing. This over-approximates (a value
computed and never used still counts) and never misses an entry.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from funcdiff.sparse._patterns import Pattern

__all__ = ["HessianAccumulator"]


class HessianAccumulator:
    """Collects the pairs each operation contributes; :meth:`pattern` unites them."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []

    def _add(self, m: sp.csr_array) -> None:
        coo = m.tocoo()
        self._rows.append(coo.row.astype(np.int64))
        self._cols.append(coo.col.astype(np.int64))

    def square(self, p: Pattern | None) -> None:
        """Every pair of dependencies of each element (a nonlinear function of them)."""
        if p is None:
            return
        rows = _distinct_rows(p)
        self._add(rows.T @ rows)

    def cross(self, a: Pattern | None, b: Pattern | None) -> None:
        """Pairs of one dependency of ``a[k]`` and one of ``b[k]`` (``a[k] * b[k]``)."""
        if a is None or b is None:
            return
        if a.same_as(b):
            self.square(a)
            return
        ra, rb = a.rows(), b.rows()
        m = ra.T @ rb
        self._add(m)
        self._add(m.T)

    def quotient(self, x: Pattern | None, y: Pattern | None) -> None:
        """``x[k] / y[k]``: linear in ``x``, so no ``x``-``x`` pairs."""
        if y is None:
            return
        self.cross(x, y)
        self.square(y)

    def pattern(self) -> sp.csr_array:
        """The symmetric boolean ``(n, n)`` pattern of everything added."""
        if self._rows:
            rows = np.concatenate(self._rows)
            cols = np.concatenate(self._cols)
        else:
            rows = cols = np.zeros(0, np.int64)
        m = sp.coo_array((np.ones(rows.size, bool), (rows, cols)), shape=(self.n, self.n))
        m = m.tocsr()
        m = (m + m.T).astype(bool)
        m.sum_duplicates()
        m.sort_indices()
        return m


def _distinct_rows(p: Pattern) -> sp.csr_array:
    """The rows of ``p`` with each base row once (a broadcast scalar counts once)."""
    if p.rowmap is None:
        return p.base
    used = np.unique(p.rowmap[p.rowmap >= 0])
    if used.size == p.base.shape[0]:
        return p.base
    return p.base[used]
