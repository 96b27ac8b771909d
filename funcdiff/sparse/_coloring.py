"""Graph colouring for compressed evaluation of sparse Jacobians and Hessians.

A colouring groups the columns (or rows) of a sparsity pattern so that one Jacobian-vector
product (or vector-Jacobian product) per colour recovers every structurally nonzero entry
exactly. Three schemes are offered:

* ``"column"``: partial distance-2 colouring of the columns; two columns that share a row
  get different colours, so each entry is read directly from ``J @ seeds.T``.
* ``"row"``: the same for rows (reverse mode), read from ``seeds @ J``.
* ``"star"``: symmetric star colouring of a Hessian (a distance-1 colouring in which every
  path on four vertices uses at least three colours); every entry ``H[i, j]`` is read
  directly from ``H @ seeds.T`` either at row ``i`` or, by symmetry, at row ``j``.

``"dense"`` marks a colouring that saves nothing (as many colours as columns); it has the
column layout with ``colors = arange(n)``.

Every colouring is verified (vectorised, O(nnz)) before it is returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["Coloring", "color_hessian", "color_jacobian", "verify"]

_KINDS = ("column", "row", "star", "dense")
_JACOBIAN_MODES = ("auto", "forward", "reverse")
_HESSIAN_METHODS = ("star", "column")
_ORDERS = ("largest_first", "smallest_last", "natural")


@dataclass(frozen=True)
class Coloring:
    """A colouring of a sparsity pattern and where each stored entry lands when compressed.

    Attributes
    ----------
    kind : str
        ``"column"`` (one JVP per colour), ``"row"`` (one VJP per colour), ``"star"``
        (symmetric Hessian, one HVP per colour) or ``"dense"`` (no compression; column
        layout with ``colors = arange(n)``).
    colors : numpy.ndarray
        int64, the colour of each column (``column``/``star``/``dense``) or row (``row``).
        Colours are 0-based; a column (row) with no stored entry needs no product and gets
        ``-1``.
    ncolors : int
        Number of colours, i.e. of products to evaluate.
    gather : numpy.ndarray
        int64 of shape ``(nnz,)``: for each stored entry of the pattern, in CSR order, its
        flat index into ``compressed.ravel()``.

    Notes
    -----
    For ``column``/``star``/``dense`` the compressed matrix has shape ``(ncolors, m)`` with
    ``compressed[c, i] = sum(A[i, j] for j with colors[j] == c)``, i.e. ``(A @ seeds.T).T``.
    For ``row`` it has shape ``(ncolors, n)`` with
    ``compressed[c, j] = sum(A[i, j] for i with colors[i] == c)``, i.e. ``seeds @ A``.
    """

    kind: str
    colors: np.ndarray
    ncolors: int
    gather: np.ndarray

    def seeds(self, size: int) -> np.ndarray:
        """The 0/1 seed matrix ``seeds[c, j] = colors[j] == c``, of shape ``(ncolors, size)``.

        Parameters
        ----------
        size : int
            Number of columns (rows for ``kind="row"``); must equal ``len(colors)``.

        Returns
        -------
        numpy.ndarray
            float64 of shape ``(ncolors, size)``.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> from funcdiff.sparse._coloring import color_jacobian
        >>> c = color_jacobian(sp.csr_array(np.eye(3, dtype=bool)))
        >>> c.seeds(3)
        array([[1., 1., 1.]])
        """
        size = _as_count(size, "size")
        if size != self.colors.shape[0]:
            what = "rows" if self.kind == "row" else "columns"
            raise ValueError(
                f"size must equal the number of coloured {what} ({self.colors.shape[0]}), "
                f"got {size}"
            )
        out = np.zeros((self.ncolors, size))
        used = np.flatnonzero(self.colors >= 0)
        out[self.colors[used], used] = 1.0
        return out


# --------------------------------------------------------------------------- input checks


def _as_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise TypeError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _as_pattern(pattern: Any, name: str = "pattern") -> sp.csr_array:
    """Canonical CSR (sorted indices, no duplicates); every stored entry is structural."""
    if sp.issparse(pattern):
        if pattern.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {pattern.shape}")
        csr = sp.csr_array(pattern)
        if csr.format != "csr" or not csr.has_canonical_format:
            csr = csr.copy()
            csr.sum_duplicates()
    else:
        try:
            dense = np.asarray(pattern)
        except Exception as exc:  # pragma: no cover - exotic objects
            raise TypeError(f"{name} must be a scipy sparse array or array-like") from exc
        if dense.ndim != 2 or dense.dtype == object:
            raise ValueError(
                f"{name} must be a 2-D sparse or numeric array, got shape {dense.shape}"
            )
        csr = sp.csr_array(dense != 0)
    # Structure only: explicit zeros stay, values are irrelevant.
    nnz = int(csr.indptr[-1])
    return sp.csr_array((np.ones(nnz, dtype=bool), csr.indices[:nnz], csr.indptr), shape=csr.shape)


def _check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def _rows_of(csr: sp.csr_array) -> np.ndarray:
    return np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))


# --------------------------------------------------------------------------- vertex orders


def _order(degree: np.ndarray, order: str, graph: sp.csr_array | None = None) -> np.ndarray:
    """Vertex visiting order; ties are broken by index so results are reproducible."""
    if order == "natural":
        return np.arange(degree.shape[0], dtype=np.int64)
    if order == "largest_first":
        return np.argsort(-degree, kind="stable").astype(np.int64)
    assert graph is not None
    return _smallest_last(graph)


def _smallest_last(graph: sp.csr_array) -> np.ndarray:
    """Matula-Beck smallest-last order of a symmetric graph without self loops, O(n + nnz).

    Repeatedly removes a vertex of minimum remaining degree (the smallest index among
    them); the order is the reverse of the removals.
    """
    n = graph.shape[0]
    ptr = graph.indptr.tolist()
    idx = graph.indices.tolist()
    degree = np.diff(graph.indptr).tolist()
    maxdeg = max(degree, default=0)
    # Buckets of vertices by current degree; stale entries are skipped when popped.
    buckets: list[list[int]] = [[] for _ in range(maxdeg + 1)]
    for v in range(n - 1, -1, -1):
        buckets[degree[v]].append(v)
    removed = [False] * n
    removal: list[int] = []
    low = 0
    while len(removal) < n:
        while not buckets[low]:
            low += 1
        v = buckets[low].pop()
        if removed[v] or degree[v] != low:
            continue
        removed[v] = True
        removal.append(v)
        for w in idx[ptr[v] : ptr[v + 1]]:
            if not removed[w]:
                d = degree[w] - 1
                degree[w] = d
                buckets[d].append(w)
                if d < low:
                    low = d
    return np.asarray(removal[::-1], dtype=np.int64)


def _column_graph(csr: sp.csr_array) -> sp.csr_array:
    """Column intersection graph (columns adjacent iff they share a row), no self loops."""
    csc = sp.csr_array((np.ones(csr.nnz, dtype=np.int32), csr.indices, csr.indptr), shape=csr.shape)
    gram = (csc.T @ csc).tocsr()
    gram.setdiag(0)
    gram.eliminate_zeros()
    gram.sort_indices()
    return gram


# --------------------------------------------------------------------------- column colouring


def _group_columns_fast() -> Any:
    """scipy's compiled Curtis-Powell-Reid grouping (private API), or None if unavailable."""
    try:
        from scipy.optimize._numdiff import group_columns
    except Exception:  # pragma: no cover - depends on the scipy build
        return None
    return group_columns


def _greedy_columns_python(csr: sp.csr_array, order: np.ndarray) -> np.ndarray:
    """First-fit partial distance-2 colouring of the columns, in ``order`` (pure Python)."""
    m, n = csr.shape
    csc = csr.tocsc()
    cptr, crow = csc.indptr.tolist(), csc.indices.tolist()
    rptr, rcol = csr.indptr.tolist(), csr.indices.tolist()
    colors = [-1] * n
    forbidden = [-1] * (n + 1)
    for v in order.tolist():
        for r in crow[cptr[v] : cptr[v + 1]]:
            for x in rcol[rptr[r] : rptr[r + 1]]:
                c = colors[x]
                if c >= 0:
                    forbidden[c] = v
        c = 0
        while forbidden[c] == v:
            c += 1
        colors[v] = c
    return np.asarray(colors, dtype=np.int64)


def _compact(colors: np.ndarray, used: np.ndarray) -> tuple[np.ndarray, int]:
    """Unused vertices get -1; the remaining colours are renumbered 0..k-1 in order."""
    out = np.full(colors.shape[0], -1, dtype=np.int64)
    if not used.any():
        return out, 0
    present, inverse = np.unique(colors[used], return_inverse=True)
    out[used] = inverse
    return out, int(present.shape[0])


def _column_colors(csr: sp.csr_array, order: str) -> tuple[np.ndarray, int]:
    """Partial distance-2 colouring of the columns of ``csr``: (colors, ncolors)."""
    m, n = csr.shape
    col_count = np.bincount(csr.indices, minlength=n)
    used = col_count > 0
    if csr.nnz == 0:
        return np.full(n, -1, dtype=np.int64), 0
    row_count = np.diff(csr.indptr)
    colors: np.ndarray | None
    if row_count.max() == int(used.sum()):
        # One row touches every used column: no compression is possible.
        colors = np.full(n, -1, dtype=np.int64)
        colors[used] = np.arange(int(used.sum()))
        return colors, int(used.sum())
    if order == "largest_first":
        # Number of (row, other column) incidences: an upper bound on the distance-2
        # degree that costs O(nnz) instead of forming the column intersection graph.
        degree = csr.T @ row_count.astype(np.int64) - col_count
        visit = _order(degree, order)
    elif order == "smallest_last":
        visit = _order(col_count, order, _column_graph(csr))
    else:
        visit = _order(col_count, order)
    group_columns = _group_columns_fast()
    colors = None
    if group_columns is not None:
        try:
            candidate = np.asarray(group_columns(csr, order=visit), dtype=np.int64)
        except Exception:  # pragma: no cover - private API changed
            candidate = None
        if candidate is not None and candidate.shape == (n,):
            candidate, k = _compact(candidate, used)
            if _column_conflicts(csr, candidate, k) == 0:
                colors = candidate
    if colors is None:
        colors = _greedy_columns_python(csr, visit)
    return _compact(colors, used)


def _column_conflicts(csr: sp.csr_array, colors: np.ndarray, ncolors: int) -> int:
    """Number of stored entries sharing a (row, colour) with an earlier one; 0 iff valid."""
    if csr.nnz == 0:
        return 0
    entry_colors = colors[csr.indices]
    if (entry_colors < 0).any() or (entry_colors >= ncolors).any():
        return csr.nnz
    counts = _key_counts(_rows_of(csr) * ncolors + entry_colors, csr.shape[0] * ncolors)
    return int(np.count_nonzero(counts > 1))


def _key_counts(keys: np.ndarray, size: int) -> np.ndarray:
    """For each key (in ``[0, size)``), how many keys equal it; O(nnz) when ``size`` is small."""
    if size <= 8 * keys.shape[0] + 1024:
        return np.bincount(keys, minlength=size)[keys]
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return counts[inverse]


def _column_coloring(csr: sp.csr_array, order: str) -> Coloring:
    colors, ncolors = _column_colors(csr, order)
    m, n = csr.shape
    if ncolors >= n and n > 0:
        return _dense_coloring(csr)
    gather = colors[csr.indices] * m + _rows_of(csr)
    return Coloring("column", colors, ncolors, gather)


def _dense_coloring(csr: sp.csr_array) -> Coloring:
    m, n = csr.shape
    colors = np.arange(n, dtype=np.int64)
    return Coloring("dense", colors, n, csr.indices.astype(np.int64) * m + _rows_of(csr))


def _row_coloring(csr: sp.csr_array, order: str) -> Coloring:
    transposed = csr.T.tocsr()
    transposed.sort_indices()
    colors, ncolors = _column_colors(transposed, order)
    n = csr.shape[1]
    gather = colors[_rows_of(csr)] * n + csr.indices.astype(np.int64)
    return Coloring("row", colors, ncolors, gather)


# --------------------------------------------------------------------------- star colouring


def _adjacency(csr: sp.csr_array) -> sp.csr_array:
    """The off-diagonal part of a symmetric pattern: the adjacency graph, no self loops."""
    rows = _rows_of(csr)
    keep = rows != csr.indices
    counts = np.bincount(rows[keep], minlength=csr.shape[0])
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_array(
        (np.ones(int(keep.sum()), dtype=bool), csr.indices[keep], indptr), shape=csr.shape
    )


def _star_lower_bound(graph: sp.csr_array, nused: int) -> int:
    """A cheap lower bound on the star chromatic number.

    Any edge needs 2 colours; an edge whose two ends both have another neighbour lies on a
    path of 4 vertices or a triangle, either of which needs 3 colours.
    """
    if graph.nnz == 0:
        return min(nused, 1)
    degree = np.diff(graph.indptr)
    rows = _rows_of(graph)
    return 3 if ((degree[rows] >= 2) & (degree[graph.indices] >= 2)).any() else 2


def _star_greedy(graph: sp.csr_array, visit: np.ndarray) -> np.ndarray:
    """Greedy star colouring following the 2-coloured-stars scheme of Gebremedhin, Tarafdar,
    Manne and Pothen (2007, Algorithm 4.1).

    Each vertex ``v`` takes the smallest colour not forbidden, where the forbidden colours
    are those of its neighbours, plus those that would close a 2-coloured path on four
    vertices: if two neighbours of ``v`` share a colour, ``v`` becomes the hub of their
    star and every colour around them is forbidden; if a neighbour ``w`` is a leaf of a star
    whose hub is ``x``, the colour of ``x`` is forbidden. Per-vertex maps (colour -> a
    neighbour with that colour; colours of the hubs a vertex is a leaf of) keep every step
    independent of the degree of high-degree vertices such as the hub of an arrowhead.
    """
    n = graph.shape[0]
    ptr = graph.indptr.tolist()
    idx = graph.indices.tolist()
    color = [-1] * n
    forbidden = [-1] * (n + 1)
    first_v = [-1] * (n + 1)  # first_v[c] == v: v has already met a neighbour of colour c ...
    first_w = [-1] * (n + 1)  # ... namely first_w[c]
    treated = [-1] * n
    around: list[dict[int, int]] = [{} for _ in range(n)]  # colour -> first neighbour of it
    hub_colors: list[set[int] | None] = [None] * n  # colours of the hubs v is a leaf of
    star: dict[int, int] = {}  # edge key min*n + max -> star id
    hub: list[int] = []  # star id -> hub vertex (-1 while the star is a single edge)

    for v in visit.tolist():
        neighbours = idx[ptr[v] : ptr[v + 1]]
        for w in neighbours:
            cw = color[w]
            if cw < 0:
                continue
            forbidden[cw] = v
            if first_v[cw] == v:
                q = first_w[cw]
                if treated[q] != v:
                    for c in around[q]:
                        forbidden[c] = v
                    treated[q] = v
                for c in around[w]:
                    forbidden[c] = v
                treated[w] = v
            else:
                first_v[cw] = v
                first_w[cw] = w
                hubs = hub_colors[w]
                if hubs:
                    for c in hubs:
                        forbidden[c] = v
        cv = 0
        while forbidden[cv] == v:
            cv += 1
        color[v] = cv
        # Grow the 2-coloured stars with the new edges (v, w), then record v around w.
        mine = around[v]
        for w in neighbours:
            cw = color[w]
            if cw < 0:
                continue
            key = v * n + w if v < w else w * n + v
            theirs = around[w]
            x = theirs.get(cv)
            if x is not None:  # x - w - v is 2-coloured: w is the hub
                s = star[x * n + w if x < w else w * n + x]
                if hub[s] < 0:
                    hub[s] = w
                    leaf_of = hub_colors[x]
                    if leaf_of is None:
                        hub_colors[x] = {cw}
                    else:
                        leaf_of.add(cw)
                star[key] = s
                leaf_of = hub_colors[v]
                if leaf_of is None:
                    hub_colors[v] = {cw}
                else:
                    leaf_of.add(cw)
            else:
                theirs[cv] = v
                q = first_w[cw]
                if first_v[cw] == v and q != w:  # q - v - w is 2-coloured: v is the hub
                    s = star[v * n + q if v < q else q * n + v]
                    if hub[s] < 0:
                        hub[s] = v
                        leaf_of = hub_colors[q]
                        if leaf_of is None:
                            hub_colors[q] = {cv}
                        else:
                            leaf_of.add(cv)
                    star[key] = s
                    leaf_of = hub_colors[w]
                    if leaf_of is None:
                        hub_colors[w] = {cv}
                    else:
                        leaf_of.add(cv)
                else:
                    star[key] = len(hub)
                    hub.append(-1)
            if cw not in mine:
                mine[cw] = w
    return np.asarray(color, dtype=np.int64)


def _symmetric_gather(csr: sp.csr_array, colors: np.ndarray, ncolors: int) -> np.ndarray | None:
    """Gather for symmetric direct recovery, or None if some entry cannot be recovered.

    Entry ``(i, j)`` is direct at row ``i`` when row ``i`` holds no other entry whose column
    has the colour of ``j``; then ``compressed[colors[j], i] == H[i, j]``. Each pair
    ``{i, j}`` reads one entry for both ``(i, j)`` and ``(j, i)``: row ``min(i, j)`` if it
    is direct there, otherwise row ``max(i, j)``.
    """
    n = csr.shape[0]
    rows = _rows_of(csr)
    cols = csr.indices.astype(np.int64)
    if csr.nnz == 0:
        return np.zeros(0, dtype=np.int64)
    col_colors = colors[cols]
    if (col_colors < 0).any() or (col_colors >= ncolors).any():
        return None
    direct = _key_counts(rows * ncolors + col_colors, n * ncolors) == 1
    # direct status of the transposed entry (j, i), found by its key j * n + i
    flat = rows * n + cols
    transposed_flat = cols * n + rows
    pos = np.searchsorted(flat, transposed_flat)  # CSR order is sorted by flat index
    pos = np.minimum(pos, csr.nnz - 1)
    if not np.array_equal(flat[pos], transposed_flat):
        raise ValueError("pattern must be structurally symmetric for a Hessian colouring")
    direct_t = direct[pos]
    low, high = np.minimum(rows, cols), np.maximum(rows, cols)
    # direct status of the entry stored at row `low`, column `high`
    direct_low = np.where(rows <= cols, direct, direct_t)
    direct_high = np.where(rows <= cols, direct_t, direct)
    if not (direct_low | direct_high).all():
        return None
    use_low = direct_low
    src_row = np.where(use_low, low, high)
    src_col = np.where(use_low, high, low)
    return colors[src_col] * n + src_row


def _star_coloring(csr: sp.csr_array, order: str) -> Coloring:
    n = csr.shape[0]
    used = np.diff(csr.indptr) > 0
    nused = int(used.sum())
    if csr.nnz == 0:
        return Coloring("star", np.full(n, -1, dtype=np.int64), 0, np.zeros(0, dtype=np.int64))
    graph = _adjacency(csr)
    # A distance-2 colouring (columns of H + I) is a star colouring and comes from compiled
    # code; when it already meets the lower bound the star greedy cannot do better.
    with_diagonal = _as_pattern(csr + sp.eye_array(n, dtype=bool, format="csr"))
    best, best_k = _column_colors(with_diagonal, order)
    best, best_k = _compact(best, used)
    if best_k > _star_lower_bound(graph, nused):
        degree = np.diff(graph.indptr)
        visit = _order(degree, order, graph)
        visit = visit[used[visit]]
        colors, k = _compact(_star_greedy(graph, visit), used)
        if k <= best_k:
            best, best_k = colors, k
    if best_k >= n:
        return _dense_coloring(csr)
    gather = _symmetric_gather(csr, best, best_k)
    if gather is None:  # pragma: no cover - would be a bug in the colouring
        raise RuntimeError("internal error: star colouring failed verification")
    return Coloring("star", best, best_k, gather)


# --------------------------------------------------------------------------- public API


def color_jacobian(pattern: Any, mode: str = "auto", order: str = "largest_first") -> Coloring:
    """Colour a Jacobian sparsity pattern for compressed forward or reverse evaluation.

    Parameters
    ----------
    pattern : scipy.sparse array or array-like, shape (m, n)
        Sparsity pattern; every stored entry (of a sparse input) or nonzero (of a dense
        input) is structurally nonzero.
    mode : {"auto", "forward", "reverse"}
        ``"forward"``: column colouring (one JVP per colour); ``"reverse"``: row colouring
        (one VJP per colour); ``"auto"``: both, keeping the one with fewer colours (column
        on a tie).
    order : {"largest_first", "smallest_last", "natural"}
        Vertex order of the greedy colouring. ``"smallest_last"`` forms the column
        intersection graph, which costs O(sum of squared row counts).

    Returns
    -------
    Coloring
        Verified. A column colouring with as many colours as columns is returned as
        ``kind="dense"``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> pattern = sp.csr_array(np.eye(4, dtype=bool) | np.eye(4, k=1, dtype=bool))
    >>> c = color_jacobian(pattern, mode="forward")
    >>> c.kind, c.ncolors, c.colors
    ('column', 2, array([1, 0, 1, 0]))
    >>> J = np.diag([1.0, 2, 3, 4]) + np.diag([5.0, 6, 7], k=1)
    >>> (J @ c.seeds(4).T).T.ravel()[c.gather]  # the stored entries, in CSR order
    array([1., 5., 2., 6., 3., 7., 4.])
    """
    _check_choice(mode, "mode", _JACOBIAN_MODES)
    _check_choice(order, "order", _ORDERS)
    csr = _as_pattern(pattern)
    if mode == "forward":
        result = _column_coloring(csr, order)
    elif mode == "reverse":
        result = _row_coloring(csr, order)
    else:
        column = _column_coloring(csr, order)
        row = _row_coloring(csr, order)
        result = row if row.ncolors < column.ncolors else column
    verify(result, csr)
    return result


def color_hessian(pattern: Any, method: str = "star", order: str = "largest_first") -> Coloring:
    """Colour a symmetric Hessian sparsity pattern for compressed evaluation.

    Parameters
    ----------
    pattern : scipy.sparse array or array-like, shape (n, n)
        Structurally symmetric sparsity pattern (diagonal included where nonzero).
    method : {"star", "column"}
        ``"star"``: symmetric star colouring; each entry is recovered directly from one of
        its two symmetric positions, so the result is exactly symmetric. It tries a
        distance-2 colouring too and keeps whichever has fewer colours. ``"column"``:
        partial distance-2 colouring of the columns, as for a Jacobian.
    order : {"largest_first", "smallest_last", "natural"}
        Vertex order of the greedy colouring.

    Returns
    -------
    Coloring
        Verified; ``kind="dense"`` when there are as many colours as columns.

    Examples
    --------
    An arrowhead (variable 0 couples with all others) needs 2 star colours but ``n``
    column colours:

    >>> import numpy as np, scipy.sparse as sp
    >>> n = 6
    >>> a = np.eye(n, dtype=bool); a[0, :] = a[:, 0] = True
    >>> color_hessian(sp.csr_array(a)).ncolors
    2
    >>> color_hessian(sp.csr_array(a), method="column").kind
    'dense'
    """
    _check_choice(method, "method", _HESSIAN_METHODS)
    _check_choice(order, "order", _ORDERS)
    csr = _as_pattern(pattern)
    if csr.shape[0] != csr.shape[1]:
        raise ValueError(f"pattern must be square for a Hessian, got shape {csr.shape}")
    if csr.nnz and (csr != csr.T).nnz:
        raise ValueError("pattern must be structurally symmetric for a Hessian colouring")
    if method == "column":
        result = _column_coloring(csr, order)
    else:
        result = _star_coloring(csr, order)
    verify(result, csr)
    return result


def verify(coloring: Coloring, pattern: Any) -> None:
    """Check that ``coloring`` recovers every entry of ``pattern`` exactly.

    Column, row and dense colourings: no two stored entries of a row (column) share a
    colour, and ``gather`` points at them. Star colourings: a round trip of random
    symmetric values through explicit compression and the gather is exact.

    Raises
    ------
    ValueError
        If the colouring is invalid for ``pattern``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> p = sp.csr_array(np.ones((2, 2), dtype=bool))
    >>> bad = Coloring("column", np.array([0, 0]), 1, np.array([0, 1, 0, 1]))
    >>> verify(bad, p)
    Traceback (most recent call last):
    ...
    ValueError: invalid column colouring: 4 stored entries share a row and a colour
    """
    if not isinstance(coloring, Coloring):
        raise TypeError(f"coloring must be a Coloring, got {type(coloring).__name__}")
    csr = _as_pattern(pattern)
    m, n = csr.shape
    kind = _check_choice(coloring.kind, "coloring.kind", _KINDS)
    colors = np.asarray(coloring.colors)
    k = coloring.ncolors
    size = m if kind == "row" else n
    if colors.shape != (size,) or colors.dtype.kind not in "iu":
        raise ValueError(f"coloring.colors must be an integer array of shape ({size},)")
    if kind == "star" and m != n:
        raise ValueError(f"a star colouring needs a square pattern, got shape {csr.shape}")
    if colors.size and (colors.min() < -1 or colors.max() >= k):
        raise ValueError(f"coloring.colors must lie in [-1, {k}), ncolors={k}")
    if kind == "dense" and not np.array_equal(colors, np.arange(n)):
        raise ValueError("a dense colouring has colors == arange(n)")
    gather = np.asarray(coloring.gather)
    if gather.shape != (csr.nnz,):
        raise ValueError(f"coloring.gather must have shape ({csr.nnz},), got {gather.shape}")
    rows = _rows_of(csr)
    if kind == "row":
        bad = _column_conflicts(csr.T.tocsr(), colors, k) if csr.nnz else 0
        expected = colors[rows] * n + csr.indices
    elif kind in ("column", "dense"):
        bad = _column_conflicts(csr, colors, k)
        expected = colors[csr.indices] * m + rows
    else:
        bad = 0
        expected = None
    if bad:
        raise ValueError(
            f"invalid {kind} colouring: {bad} stored entries share a "
            f"{'column' if kind == 'row' else 'row'} and a colour"
        )
    if expected is not None:
        if not np.array_equal(gather, expected):
            raise ValueError("coloring.gather does not point at the compressed entries")
        return
    # Star: exact round trip of random symmetric values.
    if csr.nnz == 0:
        return
    if ((colors[rows] == colors[csr.indices]) & (rows != csr.indices)).any():
        raise ValueError("invalid star colouring: two adjacent vertices share a colour")
    values = np.random.default_rng(0).uniform(1.0, 2.0, csr.nnz)
    upper = sp.csr_array((values, csr.indices, csr.indptr), shape=csr.shape)
    matrix = sp.triu(upper, format="csr")
    matrix = (matrix + sp.triu(matrix, k=1, format="csr").T).tocsr()
    matrix.sort_indices()
    compressed = (matrix @ coloring.seeds(n).T).T
    if gather.size and (gather.min() < 0 or gather.max() >= compressed.size):
        raise ValueError("coloring.gather points outside the compressed matrix")
    recovered = compressed.ravel().take(gather)  # the stored entries, in CSR order
    if (
        matrix.nnz != csr.nnz
        or not np.array_equal(matrix.indices, csr.indices)
        or not np.array_equal(recovered, matrix.data)
    ):
        raise ValueError("invalid star colouring: the symmetric round trip is not exact")
