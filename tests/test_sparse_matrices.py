"""scipy.sparse matrices in differentiated code: ``A @ x`` with a constant sparse ``A``.

Every format, the ``*_array`` and ``*_matrix`` classes, each operator form, against
SciPy's own values and shapes on ndarrays and against the dense ``A.toarray()``
derivatives; higher orders, batched cotangents, forward mode, exact sparsity patterns,
replay, and the errors.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import funcdiff as fd
import funcdiff.replay as replay
import funcdiff.sparse as fs
from funcdiff import functional as F

FORMATS = ("csr", "csc", "coo", "dia", "bsr", "lil", "dok")
KINDS = ("array", "matrix")


def _dense(m: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(-2.0, 2.0, (m, n)) * (rng.uniform(size=(m, n)) < 0.5)


def _sparse(dense: np.ndarray, fmt: str, kind: str):
    cls = getattr(sp, f"{fmt}_{kind}")
    return cls(dense)


def _laplacian_2d(n: int) -> sp.csr_array:
    """The 5-point Laplacian on an ``n x n`` grid (Dirichlet), scaled by ``1/h^2``."""
    h = 1.0 / (n + 1)
    d = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(n, n))
    eye = sp.eye_array(n)
    return sp.csr_array((sp.kron(d, eye) + sp.kron(eye, d)) / h**2)


# ---------------------------------------------------------------- forms and values

# (name, the form on the sparse matrix and a Tensor or ndarray, operand shape)
FORMS = (
    ("A @ x", lambda A, x: A @ x, (4,)),
    ("A.dot(x)", lambda A, x: A.dot(x), (4,)),
    ("A @ X", lambda A, x: A @ x, (4, 3)),
    ("A @ column", lambda A, x: A @ x, (4, 1)),
    ("A.dot(X)", lambda A, x: A.dot(x), (4, 2)),
    ("x @ A", lambda A, x: x @ A, (5,)),
    ("X @ A", lambda A, x: x @ A, (2, 5)),
    ("A.T @ x", lambda A, x: A.T @ x, (5,)),
    ("A.T @ X", lambda A, x: A.T @ x, (5, 2)),
)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("form", FORMS, ids=[f[0] for f in FORMS])
def test_every_format_and_form_matches_scipy_and_the_dense_derivative(fmt, kind, form):
    _, op, shape = form
    dense = _dense(5, 4)
    A = _sparse(dense, fmt, kind)
    rng = np.random.default_rng(1)
    x0 = rng.normal(size=shape)
    expected = op(A, x0)  # SciPy on an ndarray
    x = fd.tensor(x0, requires_grad=True)
    y = op(A, x)
    assert isinstance(y, fd.Tensor)
    assert y.shape == np.shape(expected)
    np.testing.assert_allclose(y.data, expected, rtol=1e-13, atol=1e-13)
    # The vjp with a random cotangent against the same form on the dense matrix.
    g = rng.normal(size=np.shape(expected))
    (grad,) = fd.grad(y, x, grad_outputs=g)
    xd = fd.tensor(x0, requires_grad=True)
    yd = op(fd.tensor(dense), xd) if "T" not in form[0] else np.transpose(dense) @ xd
    (grad_dense,) = fd.grad(yd, xd, grad_outputs=g)
    np.testing.assert_allclose(grad, grad_dense, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_old_matrix_classes_multiply_with_star(fmt):
    dense = _dense(3, 4, seed=2)
    A = _sparse(dense, fmt, "matrix")
    x = fd.tensor(np.arange(4.0), requires_grad=True)
    y = A * x  # the matrix product for spmatrix
    np.testing.assert_allclose(y.data, dense @ np.arange(4.0))
    np.sum(y**2).backward()
    np.testing.assert_allclose(x.grad, 2 * dense.T @ (dense @ np.arange(4.0)))


def test_coo_batches_over_leading_axes_like_scipy():
    A = sp.coo_array(_dense(3, 4, seed=3))
    x0 = np.random.default_rng(0).normal(size=(2, 4, 5))
    for op in (lambda a, v: a @ v, lambda a, v: a.dot(v)):
        expected = op(A, x0)
        x = fd.tensor(x0, requires_grad=True)
        y = op(A, x)
        assert y.shape == expected.shape
        np.testing.assert_allclose(y.data, expected, rtol=1e-13)
        g = np.random.default_rng(1).normal(size=expected.shape)
        (grad,) = fd.grad(y, x, grad_outputs=g)
        np.testing.assert_allclose(np.sum(grad * x0), np.sum(g * expected), rtol=1e-12)
    left = np.random.default_rng(2).normal(size=(2, 5, 3))
    y = fd.tensor(left, requires_grad=True) @ A
    np.testing.assert_allclose(y.data, left @ A, rtol=1e-13)


@pytest.mark.parametrize("fmt", ["coo", "csr"])
def test_one_dimensional_sparse_arrays(fmt):
    a = getattr(sp, f"{fmt}_array")(np.array([1.0, 0.0, 2.0]))
    x = fd.tensor([3.0, 4.0, 5.0], requires_grad=True)
    y = a @ x
    assert y.shape == () and y.item() == pytest.approx(a @ x.data)
    y.backward()
    np.testing.assert_allclose(x.grad, [1.0, 0.0, 2.0])
    X0 = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose((a @ fd.tensor(X0)).data, a @ X0)
    np.testing.assert_allclose((fd.tensor(X0.T) @ a).data, X0.T @ a)


def test_integer_matrix_and_float32_operand_follow_numpy_dtypes():
    A = sp.csr_array(np.array([[1, 0, 2], [0, 3, 0]]))
    x0 = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    y = A @ fd.tensor(x0, requires_grad=True)
    assert y.dtype == (A @ x0).dtype


def test_plain_operands_are_left_to_scipy():
    A = sp.csr_array(_dense(3, 3, seed=4))
    assert type(A @ np.ones(3)) is np.ndarray
    assert sp.issparse(A @ A)
    assert sp.issparse(A.dot(A))
    assert type(A.dot(np.ones(3))) is np.ndarray
    np.testing.assert_allclose(np.ones(3) @ A, A.T @ np.ones(3))
    # A Tensor that does not require grad still gives a Tensor (a constant).
    y = A @ fd.tensor(np.ones(3))
    assert isinstance(y, fd.Tensor) and not y.requires_grad


# ---------------------------------------------------------------- higher orders


def test_hessian_of_a_nonlinear_function_through_the_product():
    dense = _dense(6, 4, seed=5)
    A = sp.csr_array(dense)
    x0 = np.random.default_rng(3).normal(size=4)

    def f(x):
        return np.sum(np.sin(A @ x)) + np.sum((x @ A.T) ** 3)

    H = F.hessian(f, x0)
    z = dense @ x0
    expected = dense.T @ np.diag(-np.sin(z) + 6 * z) @ dense
    np.testing.assert_allclose(H, expected, rtol=1e-11, atol=1e-11)


def test_third_derivative_along_a_direction_against_the_closed_form():
    dense = _dense(4, 4, seed=6)
    A = sp.csc_matrix(dense)
    x0 = np.random.default_rng(4).normal(size=4)
    v = np.random.default_rng(5).normal(size=4)
    x = fd.tensor(x0, requires_grad=True)
    y = np.sum(np.exp(A @ x))
    (g,) = fd.grad(y, x, create_graph=True)
    (hv,) = fd.grad(np.sum(g * v), x, create_graph=True)
    (t,) = fd.grad(np.sum(hv * v), x)
    z, av = dense @ x0, dense @ v
    np.testing.assert_allclose(t, dense.T @ (np.exp(z) * av**2), rtol=1e-12)
    # The backward of the product is the same operation (A.T @ g), recorded as such.
    assert g.grad_fn.name() == "SparseMatmulBackward"


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_in_both_modes_is_the_matrix(strategy, vectorize):
    dense = _dense(5, 3, seed=7)
    A = sp.lil_array(dense)
    x0 = np.random.default_rng(6).normal(size=(3, 2))
    J = F.jacobian(lambda x: A @ x, x0, strategy=strategy, vectorize=vectorize)
    expected = np.einsum("il,jr->ijlr", dense, np.eye(2)).reshape(5, 2, 3, 2)
    np.testing.assert_allclose(J, expected, atol=1e-14)


def test_jvp_and_hvp_against_dense():
    dense = _dense(4, 4, seed=8)
    A = sp.bsr_array(dense)
    x0 = np.random.default_rng(7).normal(size=4)
    v = np.random.default_rng(8).normal(size=4)
    _, jv = F.jvp(lambda x: np.tanh(x @ A), x0, v)
    np.testing.assert_allclose(jv, (1 - np.tanh(x0 @ dense) ** 2) * (v @ dense), rtol=1e-12)
    _, hv = F.hvp(lambda x: np.sum(np.cos(A @ x)), x0, v)
    np.testing.assert_allclose(hv, dense.T @ (-np.cos(dense @ x0) * (dense @ v)), rtol=1e-12)


def test_reaction_diffusion_residual_against_central_differences():
    L = _laplacian_2d(5)
    x0 = np.random.default_rng(9).uniform(0.0, 0.5, 25)

    def residual(u, lam):
        return L @ u + lam * np.exp(u)

    lam = fd.tensor(2.0, requires_grad=True)
    u = fd.tensor(x0, requires_grad=True)
    w = np.random.default_rng(10).normal(size=25)
    loss = np.sum(w * residual(u, lam) ** 2) * 1e-4
    gu, glam = (g.numpy() for g in fd.grad(loss, (u, lam)))

    def plain(v, lam_value):
        return 1e-4 * np.sum(w * (L @ v + lam_value * np.exp(v)) ** 2)

    eps = 1e-6
    for i in (0, 7, 12, 24):
        e = np.zeros(25)
        e[i] = eps
        fdiff = (plain(x0 + e, 2.0) - plain(x0 - e, 2.0)) / (2 * eps)
        assert gu[i] == pytest.approx(fdiff, rel=1e-6)
    fdiff = (plain(x0, 2.0 + eps) - plain(x0, 2.0 - eps)) / (2 * eps)
    assert float(glam) == pytest.approx(fdiff, rel=1e-6)


def test_against_torch():
    torch = pytest.importorskip("torch")
    dense = _dense(6, 5, seed=11)
    A = sp.csr_matrix(dense)
    x0 = np.random.default_rng(12).normal(size=(5, 2))

    def f(x):
        return np.sum(np.sin(A @ x) * (A @ x))

    H = F.hessian(f, x0)
    At = torch.tensor(dense)

    def ft(x):
        y = At @ x
        return torch.sum(torch.sin(y) * y)

    Ht = torch.autograd.functional.hessian(ft, torch.tensor(x0)).numpy()
    np.testing.assert_allclose(H, Ht, rtol=1e-11, atol=1e-12)


# ---------------------------------------------------------------- sparsity and replay


def test_jacobian_sparsity_is_exactly_the_matrix_pattern():
    L = _laplacian_2d(6)
    pattern = fs.jacobian_sparsity(lambda u: L @ u, np.zeros(36))
    assert (pattern != (L != 0)).nnz == 0
    assert pattern.nnz == L.nnz
    # Through the other forms, and a rectangular matrix with an explicit zero.
    A = sp.csr_array(_dense(5, 4, seed=13))
    A.data[0] = 0.0  # stored, but contributes nothing
    nonzero = sp.csr_array(A.toarray() != 0)
    p = fs.jacobian_sparsity(lambda x: x @ A.T, np.ones(4))
    assert (p != nonzero).nnz == 0
    p2 = fs.jacobian_sparsity(lambda X: A @ X, np.ones((4, 3)))
    expected = sp.kron(nonzero, sp.eye_array(3), format="csr").astype(bool)
    assert (p2 != expected).nnz == 0


def test_sparse_jacobian_and_hessian_through_the_product():
    L = _laplacian_2d(8)
    lam = 2.0

    def residual(u):
        return L @ u + lam * np.exp(u)

    u0 = np.random.default_rng(14).uniform(0.0, 0.3, 64)
    J = fs.prepare_jacobian(residual, u0)
    expected = L + sp.diags_array(lam * np.exp(u0))
    assert abs(J(u0) - expected).max() < 1e-9
    assert J.ncolors < 10  # a few compressed passes, not one per column
    H = fs.hessian(lambda u: np.sum(np.exp(L @ u) * 1e-3), u0)
    dense = L.toarray()
    np.testing.assert_allclose(
        H.toarray(), dense.T @ np.diag(1e-3 * np.exp(dense @ u0)) @ dense, rtol=1e-10, atol=1e-8
    )
    hp = fs.hessian_sparsity(lambda u: np.sum(np.exp(L @ u)), u0)
    assert (hp != ((L.T @ L) != 0)).nnz == 0


def test_replayed_gradient_jacobian_and_hessian():
    L = _laplacian_2d(4)
    w = np.random.default_rng(15).normal(size=16)

    def loss(u):
        return np.sum(w * np.tanh(L @ u * 1e-2)) + np.sum((u @ L) ** 2) * 1e-4

    value_and_grad = replay.value_and_grad(loss)
    hess = replay.hessian(loss)
    for seed in (16, 17, 18):
        u0 = np.random.default_rng(seed).normal(size=16)
        value, g = value_and_grad(u0)
        ut = fd.tensor(u0, requires_grad=True)
        expected = loss(ut)
        (g_eager,) = fd.grad(expected, ut)
        assert value == pytest.approx(expected.item(), rel=1e-13)
        np.testing.assert_allclose(g, g_eager, rtol=1e-12)
        np.testing.assert_allclose(hess(u0), F.hessian(loss, u0), rtol=1e-11, atol=1e-12)
    assert value_and_grad.trace_count == 1
    jac = replay.jacobian(lambda u: L @ u)
    np.testing.assert_allclose(jac(np.ones(16)), L.toarray())


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("fmt", ["csr", "coo", "lil"])
def test_dimension_mismatches_raise_value_error(fmt):
    A = _sparse(_dense(3, 4), fmt, "array")
    with pytest.raises(ValueError, match="dimension mismatch"):
        A @ fd.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match="dimension mismatch"):
        A @ fd.tensor(np.ones((5, 2)), requires_grad=True)
    with pytest.raises(ValueError, match="dimension mismatch"):
        fd.tensor(np.ones(4), requires_grad=True) @ A
    with pytest.raises(ValueError, match="dimension mismatch"):
        A.dot(fd.tensor(np.ones(2), requires_grad=True))


def test_three_dimensional_operands_raise_like_scipy():
    A = sp.csr_array(_dense(3, 4))
    with pytest.raises(ValueError, match="could not interpret dimensions"):
        A @ fd.tensor(np.ones((2, 4, 1)), requires_grad=True)
    with pytest.raises(ValueError, match="could not interpret dimensions"):
        A.dot(fd.tensor(np.ones((2, 4, 1)), requires_grad=True))
    with pytest.raises(ValueError, match="could not interpret dimensions"):
        np.ones((2, 4, 3)) @ A  # SciPy's own message, for comparison


def test_a_zero_dimensional_tensor_is_refused_with_a_clear_error():
    A = sp.csr_matrix(_dense(3, 3))
    with pytest.raises(TypeError, match="0-d Tensor"):
        A * fd.tensor(2.0, requires_grad=True)


@pytest.mark.parametrize("fmt", ["csr", "coo", "dia"])
def test_tensor_on_the_left_of_star_is_the_matrix_product_for_matrix_classes(fmt):
    dense = _dense(3, 4, seed=9)
    x0 = np.random.default_rng(19).normal(size=3)
    x = fd.tensor(x0, requires_grad=True)
    y = x * _sparse(dense, fmt, "matrix")  # spmatrix: * is the matrix product
    np.testing.assert_allclose(y.data, x0 @ dense)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, dense.sum(axis=1))


def test_elementwise_operators_with_sparse_arrays_are_refused_not_garbage():
    A = sp.csr_array(_dense(2, 2, seed=10))
    x = fd.tensor(np.ones(2), requires_grad=True)
    # NumPy would build an object array of matrices; SciPy's own operators refuse instead.
    with pytest.raises((RuntimeError, TypeError, NotImplementedError, ValueError)):
        x * A
    with pytest.raises((RuntimeError, TypeError, NotImplementedError, ValueError)):
        x + A


def test_the_handover_is_installed_once_on_every_class_that_dispatches():
    from funcdiff.rules import sparse_matmul as handover

    before = {
        (cls, name): cls.__dict__[name]
        for cls in handover._sparse_classes()
        for name in ("_matmul_dispatch", "_rmatmul_dispatch", "dot")
        if name in cls.__dict__
    }
    assert before and all(hasattr(m, "__funcdiff_original__") for m in before.values())
    handover.install_handover()  # again: nothing is wrapped twice
    for (cls, name), method in before.items():
        assert cls.__dict__[name] is method
    # SciPy's own answer for ndarrays, bit for bit.
    A = sp.coo_array(_dense(4, 3, seed=21))
    x0 = np.arange(3.0)
    owner = next(c for c in type(A).__mro__ if "_matmul_dispatch" in c.__dict__)
    original = owner.__dict__["_matmul_dispatch"].__funcdiff_original__
    assert np.array_equal(A @ x0, original(A, x0))


@pytest.mark.parametrize("scipy_first", [False, True])
def test_the_handover_works_whichever_is_imported_first(scipy_first):
    """``import funcdiff`` leaves scipy.sparse unloaded; the hand-over is installed when
    SciPy's sparse package loads (or at once, when it was loaded before)."""
    program = f"""
import json, sys
if {scipy_first}:
    import scipy.sparse
import numpy as np
import funcdiff as fd
light = "scipy.sparse" not in sys.modules
import scipy.sparse as sp
L = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(3, 3), format="csr")
x = fd.tensor([1.0, 2.0, 4.0], requires_grad=True)
(g,) = fd.grad(np.sum((L @ x) ** 2 + x @ L), x)
hooks = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_AfterImport"]
print(json.dumps({{"light": light, "grad": g.data.tolist(), "hooks": hooks}}))
"""
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    L = np.array([[-2.0, 1.0, 0.0], [1.0, -2.0, 1.0], [0.0, 1.0, -2.0]])
    x0 = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(got["grad"], 2 * L.T @ (L @ x0) + L.sum(axis=1))
    assert got["light"] is not scipy_first
    assert got["hooks"] == []  # the post-import hook removes itself once it has run
