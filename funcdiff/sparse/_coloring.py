"""TEMPORARY stub (not committed): replaced by the helper's module."""
from dataclasses import dataclass
import numpy as np, scipy.sparse as sp
from scipy.optimize._numdiff import group_columns

@dataclass(frozen=True)
class Coloring:
    kind: str
    colors: np.ndarray
    ncolors: int
    gather: np.ndarray
    def seeds(self, size):
        s = np.zeros((self.ncolors, size)); s[self.colors, np.arange(size)] = 1.0; return s

def _col(p):
    m, n = p.shape
    if p.nnz == 0:
        return np.zeros(n, np.int64), 0
    order = np.argsort(-np.diff(p.tocsc().indptr), kind="stable")
    g = group_columns(p, order=order).astype(np.int64)
    return g, int(g.max()) + 1

def color_jacobian(pattern, mode="auto", order="largest_first"):
    p = sp.csr_array(pattern, dtype=bool); p.sort_indices()
    rows = np.repeat(np.arange(p.shape[0]), np.diff(p.indptr)); cols = p.indices
    cc, kc = _col(p)
    rc, kr = _col(sp.csr_array(p.T))
    if mode == "reverse" or (mode == "auto" and kr < kc):
        return Coloring("row", rc, kr, rc[rows] * p.shape[1] + cols)
    return Coloring("column", cc, kc, cc[cols] * p.shape[0] + rows)

def color_hessian(pattern, method="star", order="largest_first"):
    c = color_jacobian(pattern, "forward")
    return Coloring("column", c.colors, c.ncolors, c.gather)

def decompress(coloring, pattern, compressed):
    data = np.asarray(compressed).ravel().take(coloring.gather)
    return sp.csr_array((data, pattern.indices.copy(), pattern.indptr.copy()), shape=pattern.shape)
