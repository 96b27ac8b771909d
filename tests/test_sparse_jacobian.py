"""funcdiff.sparse on the problems it is for, against dense derivatives and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import rosen_hess
from support.problems import brusselator

import funcdiff as fd
import funcdiff.sparse as fs
from funcdiff.functional import hessian, jacobian
from funcdiff.sparse import SparsityError, SparsityGuardError


def brusselator_jacobian(y):
    """The Jacobian written out by hand."""
    n = y.shape[0] // 2
    u, v = y[:n], y[n:]
    c = 0.02 * n**2
    lap = sp.diags([np.ones(n - 1), -2 * np.ones(n), np.ones(n - 1)], [-1, 0, 1]).tolil()
    lap[0, n - 1] = lap[n - 1, 0] = 1.0
    lap = c * sp.csr_array(lap)
    return sp.block_array(
        [
            [sp.diags_array(2 * u * v - 4.4) + lap, sp.diags_array(u * u)],
            [sp.diags_array(3.4 - 2 * u * v), sp.diags_array(-u * u) + lap],
        ]
    ).toarray()


def bratu(u):
    n = int(round(np.sqrt(u.size)))
    grid = u.reshape(n, n)
    padded = np.pad(grid, 1)
    lap = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * grid
    return (lap + 0.5 * np.exp(grid)).ravel()


def rosen(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def arrowhead(x):
    return np.sum((x[0] * x[1:]) ** 2) + np.sum(x**4)


def grid_energy(u):
    n = int(round(np.sqrt(u.size)))
    g = u.reshape(n, n)
    return (
        np.sum(np.cos(g[1:, :] - g[:-1, :])) + np.sum(np.cos(g[:, 1:] - g[:, :-1])) + np.sum(g**4)
    )


def dense_jacobian(f, x):
    return np.asarray(jacobian(f, fd.tensor(x), vectorize=True).data).reshape(-1, x.size)


def dense_hessian(f, x):
    return np.asarray(hessian(f, fd.tensor(x)).data)


RNG = np.random.default_rng(0)


def test_brusselator_pattern_values_and_colours() -> None:
    y = RNG.uniform(0.5, 3.0, 100)
    pattern = fs.jacobian_sparsity(brusselator, y)
    truth = brusselator_jacobian(y) != 0
    assert pattern.dtype == bool and (pattern.toarray() == truth).all()
    J = fs.prepare_jacobian(brusselator, y)
    assert (J.ncolors, J.mode) == (6, "forward")
    for point in (y, RNG.uniform(0.5, 3.0, 100)):
        np.testing.assert_allclose(
            J(point).toarray(), brusselator_jacobian(point), rtol=1e-12, atol=1e-12
        )


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_both_modes_equal_the_dense_jacobian(mode) -> None:
    u = RNG.uniform(0, 1, 400)
    J = fs.prepare_jacobian(bratu, u, mode=mode)
    assert J.mode == mode and J.ncolors <= 7
    np.testing.assert_allclose(J(u).toarray(), dense_jacobian(bratu, u), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "f, n, colors",
    [(rosen, 200, 3), (arrowhead, 200, 2), (grid_energy, 400, 5)],
    ids=["rosenbrock", "arrowhead", "grid"],
)
def test_hessians_and_their_star_colourings(f, n, colors) -> None:
    x = RNG.uniform(-1, 1, n)
    H = fs.prepare_hessian(f, x)
    assert H.ncolors == colors and H.mode == "star"
    values = H(x)
    assert isinstance(values, sp.csr_array)
    np.testing.assert_allclose(values.toarray(), dense_hessian(f, x), rtol=0, atol=1e-10)
    assert (values != values.T).nnz == 0  # exactly symmetric
    p = RNG.standard_normal(n)
    np.testing.assert_allclose(H.hessp(x, p), dense_hessian(f, x) @ p, rtol=1e-12, atol=1e-10)


def test_rosenbrock_hessian_equals_scipy_and_is_tridiagonal() -> None:
    x = RNG.uniform(-1, 2, 300)
    H = fs.hessian(rosen, x)
    np.testing.assert_allclose(H.toarray(), rosen_hess(x), rtol=1e-12, atol=1e-9)
    assert fs.hessian_sparsity(rosen, x).nnz == 3 * 300 - 2


def test_column_colouring_of_an_arrowhead_is_no_compression() -> None:
    x = RNG.uniform(-1, 1, 50)
    H = fs.prepare_hessian(arrowhead, x, coloring="column")
    assert H.ncolors == 50
    np.testing.assert_allclose(H(x).toarray(), dense_hessian(arrowhead, x), atol=1e-10)


def test_the_structure_is_the_same_at_every_call() -> None:
    # Entries that happen to be zero stay stored, so a factorization can reuse its
    # analysis (and scipy gets the same indices every time).
    J = fs.prepare_jacobian(lambda x: x**2, np.ones(4))
    a, b = J(np.ones(4)), J(np.array([0.0, 1.0, 0.0, 2.0]))
    assert b.nnz == a.nnz == 4
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(b.toarray(), np.diag([0.0, 2.0, 0.0, 4.0]))


def test_patterns_are_structural_not_local() -> None:
    # Traced at zeros, x0 * x1 still depends on both.
    p = fs.jacobian_sparsity(lambda x: x[:1] * x[1:], np.zeros(2))
    assert p.toarray().tolist() == [[True, True]]
    # Every branch of a value-switching op counts.
    for f in (lambda x: np.maximum(x[:2], x[2:]), lambda x: np.where(x[:2] > x[2:], x[:2], x[2:])):
        assert fs.jacobian_sparsity(f, np.array([1.0, 1.0, 0.0, 0.0])).nnz == 4
    # An index computed from x may pick any element.
    p = fs.jacobian_sparsity(lambda x: x[np.argmax(x)] * np.ones(2), np.arange(3.0))
    assert p.toarray().all()
    # A constant matrix's zeros are structural zeros of the product.
    A = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]])
    assert (fs.jacobian_sparsity(lambda x: A @ x, np.ones(3)).toarray() == (A != 0)).all()
    assert (fs.hessian_sparsity(lambda x: x @ x, np.ones(3)).toarray() == np.eye(3)).all()


def test_in_place_writes_are_followed() -> None:
    def f(x):
        y = np.zeros_like(x)
        y[0] = x[2]
        y[2] = x[0] * x[1]
        z = x * 1.0
        z[1:] = z[1:] + x[:-1]
        return np.concatenate([y, z])

    x = RNG.uniform(1, 2, 4)
    pattern = fs.jacobian_sparsity(f, x).toarray()
    assert (pattern == (dense_jacobian(f, x) != 0)).all()


def test_a_branch_change_is_redetected_or_raises() -> None:
    def f(x):
        if x[0] > 0:
            return x**2
        return x[::-1] * 1.0

    x = np.ones(3)
    J = fs.prepare_jacobian(f, x)
    np.testing.assert_array_equal(J(x).toarray(), 2 * np.eye(3))
    np.testing.assert_array_equal(J(-x).toarray(), np.eye(3)[::-1])
    assert J.info["redetections"] == 1
    np.testing.assert_array_equal(J(x).toarray(), 2 * np.eye(3))  # the first path is kept
    assert J.info["redetections"] == 1
    strict = fs.prepare_jacobian(f, x, on_guard_failure="raise")
    with pytest.raises(SparsityGuardError, match="other branches"):
        strict(-x)


def test_a_given_pattern_is_used_and_a_wrong_one_caught() -> None:
    f = lambda x: np.cumsum(x)  # noqa: E731
    full = np.tril(np.ones((4, 4), bool))
    J = fs.prepare_jacobian(f, np.ones(4), sparsity=sp.csr_array(full))
    np.testing.assert_array_equal(J(np.ones(4)).toarray(), full.astype(float))
    wrong = fs.prepare_jacobian(f, np.ones(4), sparsity=np.eye(4, dtype=bool))
    with pytest.raises(SparsityError, match="misses entries"):
        wrong(np.ones(4))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: fs.jacobian(np.sin, np.ones(3), sparsity=np.ones((2, 3))), ValueError, "sparsity"),
        (lambda: fs.prepare_jacobian(np.sin, np.ones(3), sparsity="yes"), TypeError, "sparsity"),
        (lambda: fs.prepare_jacobian(np.sin, np.ones(3), mode="both"), ValueError, "mode"),
        (
            lambda: fs.prepare_hessian(np.sum, np.ones(3), coloring="acyclic"),
            ValueError,
            "coloring",
        ),
        (lambda: fs.prepare_jacobian(3, np.ones(3)), TypeError, "f must be callable"),
        (lambda: fs.jacobian(np.sin, "abc"), TypeError, "x must be an array"),
        (lambda: fs.jacobian(np.sin, np.array([1j, 2.0])), TypeError, "x must be real"),
        (lambda: fs.jacobian(lambda x: np.exp(1j * x), np.ones(2)), TypeError, "real output"),
        (lambda: fs.hessian(np.sin, np.ones(3)), ValueError, "one output element"),
        (lambda: fs.prepare_jacobian(np.sin, np.ones(3))(np.ones(4)), ValueError, "shape"),
        (
            lambda: fs.prepare_hessian(np.sum, np.ones(3)).hessp(np.ones(3), np.ones(2)),
            ValueError,
            "p must",
        ),
    ],
)
def test_bad_input_is_named(call, error, match) -> None:
    with pytest.raises(error, match=match):
        call()


def test_several_dimensions_flatten_in_c_order() -> None:
    x = RNG.uniform(1, 2, (3, 4))
    f = lambda m: np.sum(m**2, axis=1)  # noqa: E731
    J = fs.jacobian(f, x)
    assert J.shape == (3, 12)
    np.testing.assert_allclose(J.toarray(), dense_jacobian(lambda v: f(v.reshape(3, 4)), x.ravel()))


def test_extra_arguments_are_constants() -> None:
    scale = np.array([1.0, 2.0, 3.0])
    J = fs.prepare_jacobian(lambda x, s: s * x**2, np.ones(3), args=(scale,))
    np.testing.assert_allclose(J(np.ones(3)).toarray(), np.diag(2 * scale))
    np.testing.assert_allclose(J(np.ones(3), 2 * scale).toarray(), np.diag(4 * scale))


def test_a_custom_function_is_dense_over_its_inputs() -> None:
    class Shift(fd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g

    J = fs.prepare_jacobian(lambda x: Shift.apply(x[:2]) + x[2:], np.ones(4))
    assert J.sparsity.toarray().tolist() == [[True, True, True, False], [True, True, False, True]]
    assert "custom Function" in J.info["dense_ops"]
    np.testing.assert_allclose(J(np.ones(4)).toarray(), [[1, 0, 1, 0], [0, 1, 0, 1]])


def test_a_constant_output_has_an_empty_jacobian() -> None:
    J = fs.jacobian(lambda x: np.ones(2), np.ones(3))
    assert J.shape == (2, 3) and J.nnz == 0


def test_detection_leaves_no_tracer_behind() -> None:
    from funcdiff._core import tracing

    with pytest.raises(ZeroDivisionError):
        fs.jacobian_sparsity(lambda x: 1 / 0, np.ones(2))
    assert tracing.current_tracer() is None and tracing.current_observer() is None
    y = fd.tensor([1.0, 2.0], requires_grad=True)
    (np.sin(y) * y).sum().backward()
    np.testing.assert_allclose(
        y.grad.data, np.sin([1.0, 2.0]) + np.array([1.0, 2.0]) * np.cos([1.0, 2.0])
    )


def test_other_further_arguments_are_detected_again() -> None:
    pick = fs.prepare_jacobian(lambda x, idx: x[idx], np.arange(3.0), args=(np.array([0, 1]),))
    np.testing.assert_array_equal(pick(np.arange(3.0)).toarray(), [[1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(
        pick(np.arange(3.0), np.array([2, 2])).toarray(), [[0, 0, 1], [0, 0, 1]]
    )
    assert pick.info["redetections"] == 1
    times = fs.prepare_jacobian(lambda x, A: A @ x, np.ones(3), args=(np.eye(3),))
    times(np.ones(3))
    np.testing.assert_array_equal(times(np.ones(3), np.ones((3, 3))).toarray(), np.ones((3, 3)))
    np.testing.assert_array_equal(times(np.ones(3), np.eye(3)).toarray(), np.eye(3))
    assert times.info["redetections"] == 1  # the identity's entry was kept


def test_replayed_prepared_derivatives_equal_eager_and_respect_branches() -> None:
    y = RNG.uniform(0.5, 3.0, 60)
    J = fs.prepare_jacobian(brusselator, y, replay=True)
    for _ in range(5):
        point = RNG.uniform(0.5, 3.0, 60)
        np.testing.assert_allclose(
            J(point).toarray(), brusselator_jacobian(point), rtol=1e-12, atol=1e-12
        )
    assert any(p is not None for p in J._programs.values())  # later calls replayed

    def f(x):
        if x[0] > 0:
            return x**2
        return x[::-1] * 3.0

    Jb = fs.prepare_jacobian(f, np.ones(3), replay=True)
    for _ in range(3):
        np.testing.assert_array_equal(Jb(np.ones(3)).toarray(), 2 * np.eye(3))
    np.testing.assert_array_equal(Jb(-np.ones(3)).toarray(), 3 * np.eye(3)[::-1])
    np.testing.assert_array_equal(Jb(np.full(3, 2.0)).toarray(), 4 * np.eye(3))
    x = RNG.uniform(-1, 1, 50)
    H = fs.prepare_hessian(rosen, x, replay=True)
    for _ in range(4):
        point = RNG.uniform(-1, 2, 50)
        np.testing.assert_allclose(H(point).toarray(), rosen_hess(point), rtol=1e-12, atol=1e-9)


@pytest.mark.slow
def test_memory_grows_with_the_nonzeros_not_with_n_squared() -> None:
    import tracemalloc

    n = 100_000  # a dense Jacobian would be 80 GB
    y = RNG.uniform(0.5, 3.0, 2 * n)
    tracemalloc.start()
    J = fs.prepare_jacobian(brusselator, y)
    values = J(y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert values.nnz == 8 * n and J.ncolors == 6
    # The compressed pass holds ncolors x size tangents (about 10 MB each here).
    assert peak < 400e6, f"peak {peak / 1e6:.0f} MB"
    # spot-check rows against the closed form
    rows = [0, n - 1, n, 2 * n - 1]
    exact = sp.csr_array(brusselator_jacobian_rows(y, rows))
    np.testing.assert_allclose(values[rows].toarray(), exact.toarray(), rtol=1e-12, atol=1e-12)


def brusselator_jacobian_rows(y, rows):
    """Rows of the Brusselator's Jacobian, written out (no n x n matrix)."""
    n = y.shape[0] // 2
    u, v = y[:n], y[n:]
    c = 0.02 * n**2
    out = np.zeros((len(rows), 2 * n))
    for r, i in enumerate(rows):
        k = i % n
        base = 0 if i < n else n
        out[r, base + (k - 1) % n] += c
        out[r, base + (k + 1) % n] += c
        out[r, base + k] += -2 * c
        if i < n:
            out[r, k] += 2 * u[k] * v[k] - 4.4
            out[r, n + k] += u[k] ** 2
        else:
            out[r, k] += 3.4 - 2 * u[k] * v[k]
            out[r, n + k] += -(u[k] ** 2)
    return out


def test_the_probe_ignores_round_off_where_terms_cancel() -> None:
    # v / v is 1: its derivative is zero up to round-off in either pass.
    J = fs.prepare_jacobian(lambda x: np.exp(x) / np.exp(x), RNG.uniform(-1, 1, 5))
    np.testing.assert_allclose(J(RNG.uniform(-1, 1, 5)).toarray(), 0.0, atol=1e-12)


@pytest.mark.parametrize("replay", [False, True])
def test_matrices_are_indexed_as_scipys_own_constructor_indexes_them(replay: bool) -> None:
    # 32-bit indices where they fit: each call copies the index arrays, and a matrix
    # indexed as SciPy indexes it combines with SciPy's without conversions.
    def f(x):
        return x * np.roll(x, 1) - np.sin(x)

    x = np.linspace(0.1, 1.0, 50)
    jac = fs.prepare_jacobian(f, x, replay=replay, compile=False)
    for _ in range(3):  # with replay, the later calls run the recorded program
        J = jac(x)
    want = sp.csr_array(J.toarray())
    assert J.indices.dtype == J.indptr.dtype == want.indices.dtype == want.indptr.dtype
    np.testing.assert_array_equal(J.indices, want.indices)
    np.testing.assert_array_equal(J.indptr, want.indptr)


@pytest.mark.parametrize("replay", [False, True])
def test_the_point_is_read_in_place_never_written_or_returned(replay: bool) -> None:
    def f(x):
        return x  # the value is the point itself

    x = np.linspace(0.0, 1.0, 6)
    keep = x.copy()
    prepared = fs.prepare_jacobian(f, x, replay=replay, compile=False)
    for _ in range(3):  # with replay, the later calls run the recorded program
        value, J = prepared.value_and_jacobian(x)
        np.testing.assert_array_equal(value, keep)
        np.testing.assert_array_equal(J.toarray(), np.eye(6))
        assert not np.shares_memory(value, x)
        value[:] = -1.0
    np.testing.assert_array_equal(x, keep)


def _switch_path_after(monkeypatch, name: str, prepared, entry) -> None:
    """Make ``funcdiff.sparse._prepared``'s ``name`` switch ``prepared``'s current path to
    ``entry`` after each call, as a call on that path in another thread would."""
    from funcdiff.sparse import _prepared

    compute = getattr(_prepared, name)

    def then_another_thread_switches(*a, **k):
        result = compute(*a, **k)
        prepared._entry = entry
        return result

    monkeypatch.setattr(_prepared, name, then_another_thread_switches)


def test_a_program_is_recorded_for_the_path_its_call_evaluated(monkeypatch) -> None:
    # Under threads, a call on the other path may switch the prepared Jacobian's current
    # path between this call's evaluation and its recording of the program: the program
    # must be recorded for the path this call evaluated.
    from support import picklable as pk

    x = np.linspace(0.1, 1.0, 6)  # x[0] > 0: one path ...
    y = -x  # ... and the other
    jac = fs.prepare_jacobian(pk.branchy, x, replay=True, compile=False)
    jac(x)  # x's path evaluated and verified
    jac(y)
    _switch_path_after(monkeypatch, "_compressed_jacobian", jac, jac._entry)  # y's path
    np.testing.assert_allclose(jac(x).toarray(), pk.branchy_jac(x), rtol=1e-13)
    monkeypatch.undo()
    for point in (x + 0.05, y - 0.05, x):
        np.testing.assert_allclose(jac(point).toarray(), pk.branchy_jac(point), rtol=1e-13)


def test_a_hessian_program_is_recorded_for_the_path_its_call_evaluated(monkeypatch) -> None:
    # The prepared Hessian's form of the race above.
    def f(x):
        if x[0] > 0:
            return np.sum(x[1:] ** 2 * x[:-1])
        return np.sum(x**4)

    x = np.linspace(0.1, 1.0, 6)
    y = -x
    hess = fs.prepare_hessian(f, x, replay=True, compile=False)
    hess(x)
    evaluated = hess._entry  # x's path
    hess(y)
    _switch_path_after(monkeypatch, "push_tangents", hess, hess._entry)  # y's path
    np.testing.assert_allclose(hess(x).toarray(), dense_hessian(f, x), rtol=1e-13, atol=1e-13)
    # recorded for x's path (validated against x's products, it would be dropped for y's)
    assert hess._programs.get(id(evaluated)) is not None
    monkeypatch.undo()
    for point in (x + 0.05, y - 0.05, x):
        want = dense_hessian(f, point)
        np.testing.assert_allclose(hess(point).toarray(), want, rtol=1e-13, atol=1e-13)
