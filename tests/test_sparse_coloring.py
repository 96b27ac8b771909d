"""Graph colourings for sparse Jacobians and Hessians: validity against brute force, exact
recovery of random matrices, the colour counts of the standard test structures, and the
pure-Python fallback."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from funcdiff.sparse import _coloring as coloring_module
from funcdiff.sparse._coloring import Coloring, color_hessian, color_jacobian, verify
from funcdiff.sparse._decompress import decompress

# --------------------------------------------------------------------------- structures


def canonical(matrix: sp.sparray) -> sp.csr_array:
    out = sp.csr_array(matrix).astype(bool)
    out.sum_duplicates()
    out.sort_indices()
    return out


def brusselator(n: int) -> sp.csr_array:
    """Jacobian pattern of the periodic 1-D Brusselator with unknowns [u; v]."""
    i = np.arange(n)
    eye = sp.eye_array(n, dtype=bool, format="csr")
    ring = sp.csr_array((np.ones(n, dtype=bool), (i, (i + 1) % n)), shape=(n, n))
    band = eye + ring + ring.T
    return canonical(sp.block_array([[band, eye], [eye, band]]))


def five_point(n: int) -> sp.csr_array:
    """5-point stencil on an n x n grid (C order, Dirichlet): also the grid-energy Hessian."""
    tri = sp.diags_array([1, 1, 1], offsets=[-1, 0, 1], shape=(n, n), dtype=bool)
    eye = sp.eye_array(n, dtype=bool)
    return canonical(sp.kron(tri, eye) + sp.kron(eye, tri))


def tridiagonal(n: int) -> sp.csr_array:
    return canonical(sp.diags_array([1, 1, 1], offsets=[-1, 0, 1], shape=(n, n), dtype=bool))


def arrowhead(n: int) -> sp.csr_array:
    rest = np.arange(1, n)
    rows = np.concatenate([np.arange(n), np.zeros(n - 1, dtype=int), rest])
    cols = np.concatenate([np.arange(n), rest, np.zeros(n - 1, dtype=int)])
    return canonical(sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, n)))


def random_pattern(shape: tuple[int, int], density: float, seed: int) -> sp.csr_array:
    return canonical(sp.random_array(shape, density=density, format="csr", rng=seed))


def random_symmetric(n: int, density: float, seed: int, diagonal: bool = True) -> sp.csr_array:
    p = sp.random_array((n, n), density=density, format="csr", rng=seed)
    p = p + p.T
    if diagonal:
        p = p + sp.eye_array(n)
    return canonical(p)


# --------------------------------------------------------------------------- brute force


def assert_partial_distance2(pattern: sp.csr_array, colors: np.ndarray) -> None:
    """No two columns sharing a row have the same colour; used columns are coloured."""
    dense = pattern.toarray()
    used = dense.any(axis=0)
    assert (colors[used] >= 0).all()
    for row in dense:
        cols = np.flatnonzero(row)
        assert len(set(colors[cols].tolist())) == cols.size


def assert_star(pattern: sp.csr_array, colors: np.ndarray) -> None:
    """Distance-1 colouring in which every path on 4 vertices uses at least 3 colours."""
    dense = pattern.toarray()
    np.fill_diagonal(dense, False)
    n = dense.shape[0]
    nbrs = [np.flatnonzero(dense[v]).tolist() for v in range(n)]
    for b in range(n):
        for c in nbrs[b]:
            assert colors[b] != colors[c], f"edge {b}-{c} is monochromatic"
            for a, d in itertools.product(nbrs[b], nbrs[c]):
                if len({a, b, c, d}) == 4:
                    assert not (colors[a] == colors[c] and colors[b] == colors[d]), (
                        f"path {a}-{b}-{c}-{d} uses 2 colours"
                    )


def random_values(pattern: sp.csr_array, seed: int) -> sp.csr_array:
    values = np.random.default_rng(seed).standard_normal(pattern.nnz)
    return sp.csr_array((values, pattern.indices, pattern.indptr), shape=pattern.shape)


def symmetric_values(pattern: sp.csr_array, seed: int) -> sp.csr_array:
    upper = sp.triu(random_values(pattern, seed), format="csr")
    out = (upper + sp.triu(upper, k=1).T).tocsr()
    out.sort_indices()
    return out


def compress(c: Coloring, matrix: sp.csr_array, dense: bool = False) -> np.ndarray:
    """The products an AD engine would evaluate, formed explicitly from the seeds."""
    m, n = matrix.shape
    a = matrix.toarray() if dense else matrix
    if c.kind == "row":
        return np.asarray(c.seeds(m) @ a)
    return np.asarray((a @ c.seeds(n).T).T)


def assert_recovers(c: Coloring, pattern: sp.csr_array, matrix: sp.csr_array) -> None:
    for dense in (False, True) if matrix.shape[0] * matrix.shape[1] <= 250_000 else (False,):
        out = decompress(c, pattern, compress(c, matrix, dense))
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out.indices, pattern.indices)
        np.testing.assert_array_equal(out.indptr, pattern.indptr)
        np.testing.assert_array_equal(out.data, matrix.data)  # exact, not approximate


# --------------------------------------------------------------------------- Jacobians

RANDOM_CASES = [
    ((40, 30), 0.2, 0),
    ((30, 60), 0.05, 1),
    ((200, 150), 0.01, 2),
    ((500, 400), 0.001, 3),  # mostly empty rows and columns
    ((1, 1), 1.0, 4),
    ((1, 7), 0.5, 5),
    ((9, 1), 0.5, 6),
]


@pytest.mark.parametrize(("shape", "density", "seed"), RANDOM_CASES)
@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_random_jacobian_colourings_are_valid_and_exact(shape, density, seed, mode) -> None:
    pattern = random_pattern(shape, density, seed)
    c = color_jacobian(pattern, mode=mode)
    assert c.colors.dtype == np.int64 and c.gather.dtype == np.int64
    target = canonical(pattern.T) if c.kind == "row" else pattern
    assert_partial_distance2(target, c.colors)
    if c.kind == "dense":
        assert c.ncolors == shape[1]
    else:
        assert c.ncolors == len(set(c.colors[c.colors >= 0].tolist()))
    # a row (column) with k entries needs k colours
    assert c.ncolors >= (np.diff(target.indptr).max() if pattern.nnz else 0)
    assert_recovers(c, pattern, random_values(pattern, seed))


@pytest.mark.parametrize("order", ["largest_first", "smallest_last", "natural"])
def test_every_order_gives_valid_colourings(order) -> None:
    pattern = random_pattern((80, 70), 0.08, 7)
    for mode in ("forward", "reverse"):
        c = color_jacobian(pattern, mode=mode, order=order)
        assert_recovers(c, pattern, random_values(pattern, 1))
    sym = random_symmetric(50, 0.05, 8)
    for method in ("star", "column"):
        c = color_hessian(sym, method=method, order=order)
        assert_recovers(c, sym, symmetric_values(sym, 2))


def test_empty_pattern_needs_no_colour() -> None:
    pattern = sp.csr_array((5, 4), dtype=bool)
    for mode in ("forward", "reverse", "auto"):
        c = color_jacobian(pattern, mode=mode)
        assert c.ncolors == 0 and c.gather.shape == (0,)
        size = 5 if c.kind == "row" else 4
        assert c.seeds(size).shape == (0, size)
        out = decompress(c, pattern, np.zeros((0, 4 if c.kind == "row" else 5)))
        assert out.shape == (5, 4) and out.nnz == 0
    h = color_hessian(sp.csr_array((3, 3), dtype=bool))
    assert h.ncolors == 0


def test_dense_pattern_is_dense() -> None:
    pattern = sp.csr_array(np.ones((4, 6), dtype=bool))
    c = color_jacobian(pattern, mode="forward")
    assert c.kind == "dense" and c.ncolors == 6
    np.testing.assert_array_equal(c.colors, np.arange(6))
    np.testing.assert_array_equal(c.seeds(6), np.eye(6))
    assert_recovers(c, pattern, random_values(pattern, 3))
    full = sp.csr_array(np.ones((5, 5), dtype=bool))
    for method in ("star", "column"):
        h = color_hessian(full, method=method)
        assert h.kind == "dense" and h.ncolors == 5
        assert_recovers(h, full, symmetric_values(full, 4))


def test_auto_picks_forward_for_a_dense_column_and_reverse_for_a_dense_row() -> None:
    # A dense column conflicts with every other column but needs only one JVP of its own;
    # every row meets it, so reverse mode would need one VJP per row (and vice versa).
    n = 50
    dense_column = np.eye(n, dtype=bool)
    dense_column[:, 0] = True
    pattern = canonical(sp.csr_array(dense_column))
    c = color_jacobian(pattern)
    assert (c.kind, c.ncolors) == ("column", 2)
    assert color_jacobian(pattern, mode="reverse").ncolors == n
    assert_recovers(c, pattern, random_values(pattern, 5))
    pattern = canonical(sp.csr_array(dense_column.T))
    c = color_jacobian(pattern)
    assert (c.kind, c.ncolors) == ("row", 2)
    assert color_jacobian(pattern, mode="forward").kind == "dense"
    assert_recovers(c, pattern, random_values(pattern, 6))


def test_auto_prefers_forward_on_a_tie() -> None:
    pattern = tridiagonal(30)
    assert color_jacobian(pattern).kind == "column"
    assert color_jacobian(pattern, mode="reverse").ncolors == color_jacobian(pattern).ncolors


def test_brusselator_needs_six_colours() -> None:
    pattern = brusselator(1000)
    c = color_jacobian(pattern, mode="forward")
    assert c.ncolors <= 6
    assert c.ncolors >= np.diff(pattern.indptr).max()  # 4 entries per row
    assert_recovers(c, pattern, random_values(pattern, 6))


@pytest.mark.parametrize("n", [30, 100])
def test_five_point_stencil_needs_at_most_seven_colours(n) -> None:
    pattern = five_point(n)
    for mode in ("forward", "auto"):
        c = color_jacobian(pattern, mode=mode)
        assert 5 <= c.ncolors <= 7
    assert_recovers(c, pattern, random_values(pattern, 7))


# --------------------------------------------------------------------------- fallback


@pytest.fixture
def no_scipy_grouping(monkeypatch):
    monkeypatch.setattr(coloring_module, "_group_columns_fast", lambda: None)


@pytest.mark.usefixtures("no_scipy_grouping")
@pytest.mark.parametrize(("shape", "density", "seed"), RANDOM_CASES)
def test_fallback_colourings_are_valid(shape, density, seed) -> None:
    pattern = random_pattern(shape, density, seed)
    for mode in ("forward", "reverse"):
        c = color_jacobian(pattern, mode=mode)
        target = pattern.T.tocsr() if c.kind == "row" else pattern
        assert_partial_distance2(target, c.colors)
        assert_recovers(c, pattern, random_values(pattern, seed))


def test_fallback_matches_the_compiled_greedy(monkeypatch) -> None:
    pattern = brusselator(300)
    fast = color_jacobian(pattern, mode="forward")
    monkeypatch.setattr(coloring_module, "_group_columns_fast", lambda: None)
    slow = color_jacobian(pattern, mode="forward")
    np.testing.assert_array_equal(fast.colors, slow.colors)
    assert color_hessian(five_point(20)).ncolors <= 5


def test_a_wrong_fast_grouping_is_rejected(monkeypatch) -> None:
    def all_in_one_group(matrix, order):
        return np.zeros(matrix.shape[1], dtype=np.intp)

    monkeypatch.setattr(coloring_module, "_group_columns_fast", lambda: all_in_one_group)
    pattern = five_point(10)
    c = color_jacobian(pattern, mode="forward")
    assert c.ncolors > 1
    assert_partial_distance2(pattern, c.colors)


# --------------------------------------------------------------------------- Hessians


@pytest.mark.parametrize(
    ("n", "density", "seed", "diagonal"),
    [(30, 0.05, 0, True), (40, 0.1, 1, False), (60, 0.03, 2, True), (25, 0.3, 3, True)],
)
@pytest.mark.parametrize("method", ["star", "column"])
def test_random_hessian_recovery_is_exact_and_symmetric(n, density, seed, diagonal, method):
    pattern = random_symmetric(n, density, seed, diagonal)
    c = color_hessian(pattern, method=method)
    if c.kind == "star":
        assert_star(pattern, c.colors)
    else:
        assert_partial_distance2(pattern, c.colors)
    h = symmetric_values(pattern, seed)
    assert_recovers(c, pattern, h)
    out = decompress(c, pattern, compress(c, h))
    assert (out != out.T).nnz == 0


@pytest.mark.parametrize("seed", range(6))
def test_star_greedy_is_a_star_colouring(seed) -> None:
    # The greedy alone (color_hessian may keep a distance-2 colouring instead).
    pattern = random_symmetric(40, 0.06 + 0.02 * seed, seed)
    graph = coloring_module._adjacency(pattern)
    order = np.random.default_rng(seed).permutation(40)
    colors = coloring_module._star_greedy(graph, order)
    assert_star(pattern, colors)
    star = Coloring(
        "star",
        colors,
        int(colors.max()) + 1,
        coloring_module._symmetric_gather(pattern, colors, int(colors.max()) + 1),
    )
    verify(star, pattern)
    assert_recovers(star, pattern, symmetric_values(pattern, seed))


@pytest.mark.parametrize("n", [1000, 10_000, 100_000])
def test_tridiagonal_hessian_needs_three_star_colours(n) -> None:
    pattern = tridiagonal(n)
    c = color_hessian(pattern)
    assert (c.kind, c.ncolors) == ("star", 3)
    assert_recovers_fast(c, pattern)
    # the star greedy itself, not only the distance-2 shortcut
    graph = coloring_module._adjacency(pattern)
    assert coloring_module._star_greedy(graph, np.arange(n)).max() + 1 == 3


def assert_recovers_fast(c: Coloring, pattern: sp.csr_array) -> None:
    h = symmetric_values(pattern, 11)
    out = decompress(c, pattern, compress(c, h))
    np.testing.assert_array_equal(out.data, h.data)


@pytest.mark.parametrize("n", [1000, 10_000])
def test_arrowhead_hessian_needs_two_star_colours(n) -> None:
    pattern = arrowhead(n)
    c = color_hessian(pattern)
    assert (c.kind, c.ncolors) == ("star", 2)
    assert_recovers_fast(c, pattern)
    column = color_hessian(pattern, method="column")
    assert (column.kind, column.ncolors) == ("dense", n)
    np.testing.assert_array_equal(column.colors, np.arange(n))


@pytest.mark.parametrize("n", [30, 100])
def test_grid_energy_hessian_needs_five_star_colours(n) -> None:
    pattern = five_point(n)
    c = color_hessian(pattern)
    assert c.kind == "star" and 3 <= c.ncolors <= 5
    assert_recovers_fast(c, pattern)
    if n == 30:
        assert_star(pattern, c.colors)


def test_diagonal_and_one_by_one_hessians() -> None:
    diag = canonical(sp.eye_array(7))
    c = color_hessian(diag)
    assert c.ncolors == 1
    assert_recovers(c, diag, symmetric_values(diag, 0))
    one = canonical(sp.csr_array(np.ones((1, 1))))
    c = color_hessian(one)
    assert c.kind == "dense" and c.ncolors == 1
    assert_recovers(c, one, symmetric_values(one, 0))


def test_vertex_without_entries_gets_no_colour() -> None:
    a = np.zeros((4, 4), dtype=bool)
    a[0, 1] = a[1, 0] = a[1, 1] = True  # vertices 2 and 3 have no entries
    pattern = sp.csr_array(a)
    c = color_hessian(pattern)
    assert c.ncolors == 2 and (c.colors[2:] == -1).all()
    assert not c.seeds(4)[:, 2:].any()
    assert_recovers(c, pattern, symmetric_values(pattern, 0))


# --------------------------------------------------------------------------- decompress


def test_decompress_keeps_explicit_zeros_and_copies_the_structure() -> None:
    pattern = tridiagonal(6)
    c = color_jacobian(pattern, mode="forward")
    values = random_values(pattern, 0)
    values.data[::3] = 0.0
    out = decompress(c, pattern, compress(c, values))
    assert out.nnz == pattern.nnz
    np.testing.assert_array_equal(out.data, values.data)
    assert not np.shares_memory(out.indices, pattern.indices)
    assert not np.shares_memory(out.indptr, pattern.indptr)


def test_decompress_rejects_wrong_shapes() -> None:
    pattern = tridiagonal(6)
    c = color_jacobian(pattern, mode="forward")
    with pytest.raises(ValueError, match="compressed"):
        decompress(c, pattern, np.zeros((c.ncolors, 5)))
    with pytest.raises(ValueError, match="pattern"):
        decompress(c, tridiagonal(7), np.zeros((c.ncolors, 7)))
    with pytest.raises(TypeError, match="compressed"):
        decompress(c, pattern, np.zeros((c.ncolors, 6), dtype=complex))
    with pytest.raises(TypeError, match="coloring"):
        decompress("column", pattern, np.zeros((c.ncolors, 6)))
    with pytest.raises(ValueError, match="size"):
        c.seeds(5)


# --------------------------------------------------------------------------- verify and bad input


def test_verify_rejects_invalid_colourings() -> None:
    pattern = tridiagonal(4)
    good = color_jacobian(pattern, mode="forward")
    verify(good, pattern)
    clash = Coloring("column", np.zeros(4, dtype=np.int64), 1, good.gather)
    with pytest.raises(ValueError, match="share a row"):
        verify(clash, pattern)
    wrong_gather = Coloring("column", good.colors, good.ncolors, good.gather[::-1].copy())
    with pytest.raises(ValueError, match="gather"):
        verify(wrong_gather, pattern)
    # the path 0-1-2-3 coloured 0,1,0,1 is a proper colouring but not a star colouring
    two = np.array([0, 1, 0, 1])
    rows = coloring_module._rows_of(pattern)
    naive = Coloring("star", two, 2, two[pattern.indices] * 4 + rows)
    with pytest.raises(ValueError, match="star"):
        verify(naive, pattern)
    with pytest.raises(ValueError, match="colors"):
        verify(Coloring("column", np.array([0, 1, 2, 5]), 3, good.gather), pattern)


def test_bad_arguments_name_the_argument() -> None:
    square = tridiagonal(5)
    with pytest.raises(ValueError, match="pattern.*square"):
        color_hessian(random_pattern((4, 5), 0.5, 0))
    with pytest.raises(ValueError, match="mode"):
        color_jacobian(square, mode="sideways")
    with pytest.raises(ValueError, match="method"):
        color_hessian(square, method="acyclic")
    with pytest.raises(ValueError, match="order"):
        color_jacobian(square, order="random")
    with pytest.raises(ValueError, match="symmetric"):
        color_hessian(sp.csr_array(np.triu(np.ones((3, 3)))))
    with pytest.raises(ValueError, match="pattern"):
        color_jacobian(np.ones(3))


def test_dense_and_non_canonical_inputs_are_accepted() -> None:
    dense = np.array([[1.0, 0, 2], [0, 3, 0]])
    c = color_jacobian(dense, mode="forward")
    assert c.ncolors == 2
    duplicated = sp.coo_array(([1, 1, 1], ([0, 0, 1], [2, 2, 1])), shape=(2, 3))
    c = color_jacobian(duplicated, mode="forward")
    assert c.gather.shape == (2,)
