"""funcdiff.sparse.linalg (spsolve, splu) and funcdiff.sparse.csr_array with Tensor data.

Against SciPy's own solves, dense closed forms (``x = A^{-1} b``: ``b_bar = A^{-T} g``,
``A_bar = -b_bar x^T`` read at the stored entries), central differences, torch, and
replay; the errors of inconsistent input.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import funcdiff as fd
import funcdiff.replay as replay
import funcdiff.sparse as fs
from funcdiff import functional as F
from funcdiff.sparse.linalg import splu, spsolve


def _structure():
    """A nonsymmetric 4 x 4 CSR structure with an explicitly stored zero at (1, 3) and a
    duplicate entry at (2, 2); values that keep the matrix well conditioned."""
    indptr = np.array([0, 2, 5, 8, 10])
    indices = np.array([0, 2, 1, 0, 3, 2, 2, 1, 3, 0])
    data = np.array([4.0, 1.0, 5.0, -1.0, 0.0, 3.0, 2.0, 0.5, 6.0, 1.5])
    return data, indices, indptr


def _dense_of(data, indices, indptr, n=4):
    rows = np.repeat(np.arange(n), np.diff(indptr))
    dense = np.zeros((n, n))
    np.add.at(dense, (rows, indices), data)
    return dense, rows


# ---------------------------------------------------------------- spsolve


@pytest.mark.parametrize("shape", [(4,), (4, 3), (4, 1)])
def test_spsolve_matches_scipy_and_the_dense_gradients(shape):
    data0, indices, indptr = _structure()
    dense, rows = _dense_of(data0, indices, indptr)
    rng = np.random.default_rng(0)
    b0 = rng.normal(size=shape)
    expected = spla.spsolve(sp.csc_array(dense), b0)
    data = fd.tensor(data0, requires_grad=True)
    b = fd.tensor(b0, requires_grad=True)
    x = spsolve(fs.csr_array((data, indices, indptr), shape=(4, 4)), b)
    assert x.shape == expected.shape
    np.testing.assert_allclose(x.data, expected, rtol=1e-12)
    g = rng.normal(size=expected.shape)
    g_data, g_b = fd.grad(x, (data, b), grad_outputs=g)
    x2 = np.reshape(expected, (4, -1))
    b_bar = np.linalg.solve(dense.T, np.reshape(g, (4, -1)))
    np.testing.assert_allclose(g_b.numpy(), np.reshape(b_bar, shape), rtol=1e-12)
    assert g_data.shape == data0.shape
    expected_data = -np.sum(b_bar[rows] * x2[indices], axis=1)
    np.testing.assert_allclose(g_data.numpy(), expected_data, rtol=1e-12, atol=1e-14)
    assert g_data.numpy()[4] != 0.0  # the stored zero has a sensitivity
    # The duplicate entries of (2, 2) have the same derivative.
    assert g_data.numpy()[5] == pytest.approx(g_data.numpy()[6])


def test_spsolve_gradient_against_central_differences_and_transposition():
    data0, indices, indptr = _structure()
    b0 = np.array([1.0, -2.0, 0.5, 3.0])
    w = np.array([0.3, -1.0, 2.0, 0.7])

    def loss(values):
        A = fs.csr_array((values, indices, indptr), shape=(4, 4))
        return np.sum(w * spsolve(A, b0) ** 2)

    values = fd.tensor(data0, requires_grad=True)
    (g,) = fd.grad(loss(values), values)
    eps = 1e-6
    for s in range(data0.size):
        e = np.zeros(data0.size)
        e[s] = eps
        fdiff = (loss(data0 + e) - loss(data0 - e)) / (2 * eps)
        assert g.numpy()[s] == pytest.approx(fdiff, rel=1e-6, abs=1e-9)


def test_spsolve_second_derivatives_against_differences_of_the_gradient():
    data0, indices, indptr = _structure()
    b0 = np.array([1.0, -2.0, 0.5, 3.0])

    def loss(values, b):
        A = fs.csr_array((values, indices, indptr), shape=(4, 4))
        x = spsolve(A, b)
        return np.sum(np.sin(x)) + np.sum(x * b)

    def gradient(values, b):
        v = fd.tensor(values, requires_grad=True)
        bt = fd.tensor(b, requires_grad=True)
        gv, gb = fd.grad(loss(v, bt), (v, bt))
        return np.concatenate([gv.numpy(), gb.numpy()])

    H = F.hessian(lambda z: loss(z[:10], z[10:]), np.concatenate([data0, b0]))
    eps = 1e-6
    z0 = np.concatenate([data0, b0])
    for k in (0, 4, 6, 10, 13):
        e = np.zeros(z0.size)
        e[k] = eps
        column = (gradient(*np.split(z0 + e, [10])) - gradient(*np.split(z0 - e, [10]))) / (2 * eps)
        np.testing.assert_allclose(H[:, k], column, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(H, H.T, atol=1e-10)


def test_spsolve_against_torch():
    torch = pytest.importorskip("torch")
    data0, indices, indptr = _structure()
    _, rows = _dense_of(data0, indices, indptr)
    B0 = np.random.default_rng(1).normal(size=(4, 2))

    def loss(values, B):
        x = spsolve(fs.csr_array((values, indices, indptr), shape=(4, 4)), B)
        return np.sum(np.tanh(x) * B)

    values = fd.tensor(data0, requires_grad=True)
    B = fd.tensor(B0, requires_grad=True)
    g_values, g_B = fd.grad(loss(values, B), (values, B))

    tv = torch.tensor(data0, requires_grad=True)
    tB = torch.tensor(B0, requires_grad=True)
    dense = torch.zeros(4, 4, dtype=torch.float64).index_put(
        (torch.tensor(rows), torch.tensor(indices)), tv, accumulate=True
    )
    tx = torch.linalg.solve(dense, tB)
    torch.sum(torch.tanh(tx) * tB).backward()
    np.testing.assert_allclose(g_values.numpy(), tv.grad.numpy(), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(g_B.numpy(), tB.grad.numpy(), rtol=1e-11)


def test_spsolve_with_a_constant_scipy_matrix_and_batched_cotangents():
    A = sp.random_array((6, 6), density=0.4, rng=2, format="lil") + 4 * sp.eye_array(6)
    b0 = np.random.default_rng(3).normal(size=6)
    x_plain = spsolve(A, b0)
    assert type(x_plain) is np.ndarray
    np.testing.assert_allclose(x_plain, spla.spsolve(sp.csc_array(A), b0), rtol=1e-12)
    J = F.jacobian(lambda b: spsolve(A, b), b0, vectorize=True)
    np.testing.assert_allclose(J, np.linalg.inv(A.toarray()), rtol=1e-10, atol=1e-12)
    Jf = F.jacobian(lambda b: spsolve(A, b), b0, strategy="forward-mode")
    np.testing.assert_allclose(Jf, J, rtol=1e-12, atol=1e-14)


def test_spsolve_gradient_with_respect_to_values_stays_sparse_at_scale():
    n = 100_000  # the dense gradient would be 80 GB
    main, off = 2.0 + np.linspace(0.0, 1.0, n), -np.ones(n - 1)
    A = sp.csr_array(sp.diags_array([off, main, off], offsets=[-1, 0, 1]))
    values = fd.tensor(A.data, requires_grad=True)
    b = np.ones(n)
    tracemalloc.start()
    try:
        x = spsolve(fs.csr_array((values, A.indices, A.indptr), shape=(n, n)), b)
        (g,) = fd.grad(np.sum(x), values)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert g.shape == (A.nnz,)
    assert peak < 200 * A.nnz * 8  # a few dozen vectors of nnz, nothing of n * n
    # Spot-check entries against the closed form -b_bar[i] x[j].
    b_bar = spla.spsolve(sp.csc_array(A.T), np.ones(n))
    rows = np.repeat(np.arange(n), np.diff(A.indptr))
    for s in (0, 1, 12345, A.nnz - 1):
        assert g.numpy()[s] == pytest.approx(-b_bar[rows[s]] * x.data[A.indices[s]], rel=1e-10)


def test_singular_matrices_raise_linalg_error():
    data = fd.tensor([1.0, 2.0, 2.0, 4.0], requires_grad=True)
    A = fs.csr_array((data, [0, 1, 0, 1], [0, 2, 4]), shape=(2, 2))
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        spsolve(A, np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        splu(sp.csc_array(np.array([[1.0, 1.0], [1.0, 1.0]])))


def test_spsolve_shape_errors():
    A = sp.csc_array(np.eye(3))
    with pytest.raises(ValueError, match="must be square"):
        spsolve(sp.csc_array(np.ones((2, 3))), np.ones(2))
    with pytest.raises(ValueError, match="dimension mismatch"):
        spsolve(A, fd.tensor(np.ones(4), requires_grad=True))
    with pytest.raises(ValueError, match="1-d or 2-d"):
        spsolve(A, np.ones((3, 1, 1)))
    with pytest.raises(TypeError, match="sparse right-hand side"):
        spsolve(A, A)
    with pytest.raises(TypeError, match="csr_array or a scipy.sparse"):
        spsolve(np.eye(3), np.ones(3))


# ---------------------------------------------------------------- splu


@pytest.mark.parametrize("trans", ["N", "T"])
@pytest.mark.parametrize("shape", [(5,), (5, 2)])
def test_splu_solve_values_and_gradients(trans, shape):
    dense = np.random.default_rng(4).normal(size=(5, 5)) + 5 * np.eye(5)
    lu = splu(sp.csc_matrix(dense))
    b0 = np.random.default_rng(5).normal(size=shape)
    expected = spla.splu(sp.csc_matrix(dense)).solve(b0, trans=trans)
    b = fd.tensor(b0, requires_grad=True)
    x = lu.solve(b, trans=trans)
    np.testing.assert_allclose(x.data, expected, rtol=1e-12)
    g = np.random.default_rng(6).normal(size=shape)
    (gb,) = fd.grad(x, b, grad_outputs=g)
    M = dense if trans == "N" else dense.T
    np.testing.assert_allclose(gb.numpy(), np.linalg.solve(M.T, g), rtol=1e-11)
    assert lu.shape == (5, 5) and lu.nnz > 0 and lu.perm_r.shape == (5,)


def test_splu_second_order_and_forward_mode():
    dense = np.random.default_rng(7).normal(size=(4, 4)) + 4 * np.eye(4)
    lu = splu(sp.csr_array(dense))
    inv = np.linalg.inv(dense)
    b0 = np.random.default_rng(8).normal(size=4)

    def f(b):
        return np.sum(np.exp(lu.solve(b)) + lu.solve(b, trans="T") ** 2)

    H = F.hessian(f, b0)
    x = inv @ b0
    expected = inv.T @ np.diag(np.exp(x)) @ inv + 2 * inv @ inv.T
    np.testing.assert_allclose(H, expected, rtol=1e-10)
    v = np.random.default_rng(9).normal(size=4)
    _, jv = F.jvp(lambda b: lu.solve(b, "T"), b0, v)
    np.testing.assert_allclose(jv, inv.T @ v, rtol=1e-12)


def test_splu_refuses_values_that_require_grad_and_bad_trans():
    data = fd.tensor([2.0, 3.0], requires_grad=True)
    A = fs.csr_array((data, [0, 1], [0, 1, 2]), shape=(2, 2))
    with pytest.raises(TypeError, match="spsolve"):
        splu(A)
    lu = splu(fs.csr_array((data.detach(), [0, 1], [0, 1, 2]), shape=(2, 2)))
    with pytest.raises(ValueError, match="trans"):
        lu.solve(np.ones(2), trans="X")
    np.testing.assert_allclose(lu.solve(np.ones(2), trans="H"), [0.5, 1 / 3])
    with pytest.raises(ValueError, match="dimension mismatch"):
        lu.solve(np.ones(3))


# ---------------------------------------------------------------- csr_array

FORMS = (
    ("K @ x", lambda K, x: K @ x, (4,)),
    ("K @ X", lambda K, x: K @ x, (4, 3)),
    ("K.dot(x)", lambda K, x: K.dot(x), (4,)),
    ("x @ K", lambda K, x: x @ K, (4,)),
    ("X @ K", lambda K, x: x @ K, (2, 4)),
    ("K.T @ x", lambda K, x: K.T @ x, (4,)),
    ("K.T @ X", lambda K, x: K.T @ x, (4, 2)),
)


@pytest.mark.parametrize("operand", ["tensor", "ndarray"])
@pytest.mark.parametrize("form", FORMS, ids=[f[0] for f in FORMS])
def test_csr_array_products_match_scipy_and_dense_gradients(form, operand):
    _, op, shape = form
    data0, indices, indptr = _structure()
    reference = sp.csr_array((data0, indices, indptr), shape=(4, 4))
    rng = np.random.default_rng(10)
    x0 = rng.normal(size=shape)
    expected = op(reference, x0)
    data = fd.tensor(data0, requires_grad=True)
    K = fs.csr_array((data, indices, indptr), shape=(4, 4))
    x = fd.tensor(x0, requires_grad=True) if operand == "tensor" else x0
    y = op(K, x)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y.data, expected, rtol=1e-13)
    g = rng.normal(size=expected.shape)
    wrt = (data, x) if operand == "tensor" else (data,)
    grads = fd.grad(y, wrt, grad_outputs=g)
    assert grads[0].shape == data0.shape
    # Against the same form on the dense matrix built from data by torch-free scatter.
    dense_t = fs.csr_array((fd.tensor(data0, requires_grad=True), indices, indptr), (4, 4))
    dense = dense_t.toarray()
    xd = fd.tensor(x0, requires_grad=True) if operand == "tensor" else x0
    yd = op(_DenseOperand(dense), xd)
    wrt_d = (dense_t.data, xd) if operand == "tensor" else (dense_t.data,)
    for got, want in zip(grads, fd.grad(yd, wrt_d, grad_outputs=g)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


class _DenseOperand:
    """A dense Tensor matrix with the operator forms the tests use."""

    __array_ufunc__ = None  # ndarray @ operand: the operand's __rmatmul__
    __funcdiff_defers_matmul__ = True  # Tensor @ operand: likewise

    def __init__(self, M):
        self.M = M

    def __matmul__(self, x):
        return self.M @ x

    def __rmatmul__(self, x):
        return x @ self.M

    def dot(self, x):
        return self.M @ x

    @property
    def T(self):  # noqa: N802
        return _DenseOperand(np.transpose(self.M))


def test_toarray_and_to_scipy():
    data0, indices, indptr = _structure()
    K = fs.csr_array((fd.tensor(data0, requires_grad=True), indices, indptr), shape=(4, 4))
    dense, _ = _dense_of(data0, indices, indptr)
    np.testing.assert_allclose(K.toarray().data, dense)
    S = K.to_scipy()
    assert isinstance(S, sp.csr_array)
    np.testing.assert_allclose(S.toarray(), dense)
    assert K.nnz == 10 and K.shape == (4, 4) and K.dtype == np.float64
    inferred = fs.csr_array((data0, indices, indptr))
    assert inferred.shape == (4, 4)


def test_patterns_through_csr_array_products():
    data0, indices, indptr = _structure()
    x0 = np.array([1.0, 2.0, 3.0, 4.0])
    rows = np.repeat(np.arange(4), np.diff(indptr))

    def in_values(values):
        return fs.csr_array((values, indices, indptr), shape=(4, 4)) @ x0

    p = fs.jacobian_sparsity(in_values, data0)
    expected = sp.csr_array((np.ones(10, bool), (rows, np.arange(10))), shape=(4, 10))
    assert (p != expected).nnz == 0
    K = fs.csr_array((data0, indices, indptr), shape=(4, 4))
    p_x = fs.jacobian_sparsity(lambda x: K @ x, x0)
    dense, _ = _dense_of(np.ones(10), indices, indptr)
    assert (p_x != sp.csr_array(dense != 0)).nnz == 0  # the stored zero is a dependency
    J = fs.jacobian(in_values, data0)
    np.testing.assert_allclose(J.toarray(), expected.toarray() * x0[indices])


def test_replayed_gradient_with_respect_to_stored_values():
    data0, indices, indptr = _structure()
    b0 = np.array([1.0, 0.0, -1.0, 2.0])

    def loss(values):
        x = spsolve(fs.csr_array((values, indices, indptr), shape=(4, 4)), b0)
        return np.sum(x**2)

    value_and_grad = replay.value_and_grad(loss)
    for scale in (1.0, 1.1, 0.9):
        v = data0 * scale
        value, g = value_and_grad(v)
        vt = fd.tensor(v, requires_grad=True)
        out = loss(vt)
        (g_eager,) = fd.grad(out, vt)
        assert value == pytest.approx(out.item(), rel=1e-13)
        np.testing.assert_allclose(g, g_eager.numpy(), rtol=1e-12)
    assert value_and_grad.trace_count == 1


@pytest.mark.parametrize(
    ("arg1", "shape", "message"),
    [
        (([1.0, 2.0], [0, 1], [0, 1]), (2, 2), "index pointer size"),
        (([1.0, 2.0], [0, 5], [0, 1, 2]), (2, 2), "out of bounds"),
        (([1.0, 2.0], [0, 1], [0, 2, 1]), (2, 2), "non-decreasing|last index pointer"),
        (([1.0, 2.0, 3.0], [0, 1], [0, 1, 2]), (2, 2), "same size"),
        (([1.0, 2.0], [0.0, 1.0], [0, 1, 2]), (2, 2), "integers"),
        ((np.ones((2, 1)), [0, 1], [0, 1, 2]), (2, 2), "1-d"),
        (([1.0, 2.0], [0, 1], [1, 1, 2]), (2, 2), "start with 0"),
        (([1.0, 2.0], [0, 1], [0, 1, 2]), (2, 2, 1), "shape"),
    ],
)
def test_inconsistent_csr_array_input_raises_value_error(arg1, shape, message):
    data, indices, indptr = arg1
    with pytest.raises(ValueError, match=message):
        fs.csr_array((fd.tensor(data, requires_grad=True), indices, indptr), shape=shape)


def test_csr_array_product_errors():
    K = fs.csr_array((fd.tensor([1.0, 2.0], requires_grad=True), [0, 1], [0, 1, 2]), (2, 2))
    with pytest.raises(ValueError, match="dimension mismatch"):
        K @ np.ones(3)
    with pytest.raises(ValueError, match="dimension mismatch"):
        fd.tensor(np.ones(3), requires_grad=True) @ K
    with pytest.raises(ValueError, match="could not interpret"):
        K @ np.ones((2, 2, 2))
    with pytest.raises(TypeError, match="sparse matrix"):
        K @ sp.eye_array(2)
    with pytest.raises(ValueError, match="takes \\(data, indices, indptr\\)"):
        fs.csr_array(np.eye(2))


def test_the_reverse_pass_reuses_the_forward_factorization(monkeypatch):
    calls = []
    original = spla.splu

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(spla, "splu", counting)
    data0, indices, indptr = _structure()
    values = fd.tensor(data0.copy(), requires_grad=True)
    b = fd.tensor(np.ones(4), requires_grad=True)
    x = spsolve(fs.csr_array((values, indices, indptr), shape=(4, 4)), b)
    fd.grad(np.sum(x**2), (values, b))
    assert len(calls) == 1  # one factorization serves the solve and its transpose
    # Values changed in place are never served stale factors.
    array = np.array(data0)
    first = spsolve(fs.csr_array((array, indices, indptr), shape=(4, 4)), np.ones(4))
    array[0] = 10.0
    second = spsolve(fs.csr_array((array, indices, indptr), shape=(4, 4)), np.ones(4))
    dense, _ = _dense_of(array, indices, indptr)
    np.testing.assert_allclose(second, np.linalg.solve(dense, np.ones(4)), rtol=1e-12)
    assert not np.allclose(first, second)


def test_coordinate_form_keeps_the_order_of_data_and_adds_duplicates():
    row = np.array([2, 0, 1, 0, 2, 2])
    col = np.array([1, 2, 0, 0, 1, 2])  # (2, 1) twice
    data0 = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    data = fd.tensor(data0, requires_grad=True)
    K = fs.csr_array((data, (row, col)), shape=(3, 3))
    reference = sp.coo_array((data0, (row, col)), shape=(3, 3))
    np.testing.assert_allclose(K.toarray().data, reference.toarray())
    x0, w = np.array([1.0, -2.0, 3.0]), np.array([0.5, 2.0, -1.0])
    y = K @ x0
    np.testing.assert_allclose(y.data, reference @ x0)
    (g,) = fd.grad(np.sum(w * y), data)
    np.testing.assert_allclose(g.numpy(), w[row] * x0[col])  # in the order given
    assert fs.csr_array((data0, (row, col))).shape == (3, 3)
    from_scipy = fs.csr_array(sp.lil_array(reference))
    np.testing.assert_allclose(from_scipy @ x0, reference @ x0)
    with pytest.raises(ValueError, match="out of bounds"):
        fs.csr_array((data0, (row, col)), shape=(2, 3))
    with pytest.raises(ValueError, match="same length"):
        fs.csr_array((data0[:5], (row, col)), shape=(3, 3))


def test_forward_mode_with_respect_to_stored_values_against_differences():
    data0, indices, indptr = _structure()
    b0 = np.array([1.0, -2.0, 0.5, 3.0])
    v = np.random.default_rng(20).normal(size=data0.size)

    def solve(values):
        return spsolve(fs.csr_array((values, indices, indptr), shape=(4, 4)), b0)

    _, jv = F.jvp(solve, data0, v)
    eps = 1e-6
    fdiff = (solve(data0 + eps * v) - solve(data0 - eps * v)) / (2 * eps)
    np.testing.assert_allclose(jv, fdiff, rtol=1e-6, atol=1e-9)
    J = F.jacobian(solve, data0, strategy="forward-mode")
    np.testing.assert_allclose(J @ v, jv, rtol=1e-12, atol=1e-14)


def test_scaling_a_csr_array_by_a_tensor():
    data0, indices, indptr = _structure()
    t = fd.tensor(3.0, requires_grad=True)
    data = fd.tensor(data0, requires_grad=True)
    K = fs.csr_array((data, indices, indptr), shape=(4, 4))
    x0 = np.array([1.0, 2.0, -1.0, 0.5])
    y = (t * K) @ x0 + (K / t) @ x0 - (-K) @ x0
    dense, _ = _dense_of(data0, indices, indptr)
    np.testing.assert_allclose(y.data, (3.0 + 1 / 3 + 1.0) * dense @ x0, rtol=1e-13)
    g_t, g_data = fd.grad(np.sum(y), (t, data))
    assert g_t.item() == pytest.approx((1.0 - 1 / 9) * np.sum(dense @ x0))
    np.testing.assert_allclose(g_data.numpy(), (3.0 + 1 / 3 + 1.0) * x0[indices], rtol=1e-13)
    with pytest.raises(TypeError, match="scalar"):
        K * np.ones(4)
