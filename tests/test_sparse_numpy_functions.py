"""NumPy's own functions called with a scipy.sparse matrix and a Tensor.

NumPy takes a sparse matrix for a 0-d object array: ``np.dot(A, v)`` on an ndarray ``v``
is an object array of matrices, ``np.matmul(A, v)`` fails inside NumPy. With a Tensor,
``np.dot`` and ``np.matmul`` (and ``x.dot(A)``) are the matrix product a user means,
recorded by the same rule as ``A @ x``; every other NumPy function or ufunc refuses with
a TypeError naming the call and pointing to ``A @ x``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.special as special

import funcdiff as fd
import funcdiff.replay as replay
import funcdiff.sparse as fs

FORMATS = ("csr", "csc", "coo", "dia", "bsr", "lil", "dok")
KINDS = ("array", "matrix")

# (name, the call on the matrix and the operand, operand shape, the dense truth)
CALLS = (
    ("np.dot(A, x)", lambda A, x: np.dot(A, x), (4,), lambda D, x: D @ x),
    ("np.dot(A, X)", lambda A, x: np.dot(A, x), (4, 3), lambda D, x: D @ x),
    ("np.matmul(A, x)", lambda A, x: np.matmul(A, x), (4,), lambda D, x: D @ x),
    ("np.matmul(A, X)", lambda A, x: np.matmul(A, x), (4, 2), lambda D, x: D @ x),
    ("np.dot(x, A)", lambda A, x: np.dot(x, A), (5,), lambda D, x: x @ D),
    ("np.matmul(X, A)", lambda A, x: np.matmul(x, A), (3, 5), lambda D, x: x @ D),
    ("x.dot(A)", lambda A, x: x.dot(A), (5,), lambda D, x: x @ D),
    ("X.dot(A)", lambda A, x: x.dot(A), (2, 5), lambda D, x: x @ D),
    ("np.linalg.matmul(A, X)", lambda A, x: np.linalg.matmul(A, x), (4, 2), lambda D, x: D @ x),
)


def _dense(m: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(-2.0, 2.0, (m, n)) * (rng.uniform(size=(m, n)) < 0.5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("call", CALLS, ids=[c[0] for c in CALLS])
def test_dot_and_matmul_are_the_matrix_product(fmt, kind, call):
    _, op, shape, truth = call
    dense = _dense(5, 4)
    A = getattr(sp, f"{fmt}_{kind}")(dense)
    rng = np.random.default_rng(1)
    x0 = rng.normal(size=shape)
    x = fd.tensor(x0, requires_grad=True)
    y = op(A, x)
    expected = truth(dense, x0)
    assert isinstance(y, fd.Tensor) and y.dtype == np.float64
    assert y.shape == expected.shape
    np.testing.assert_allclose(y.data, expected, rtol=1e-13, atol=1e-13)
    # vjp with a random cotangent: the transposed product with the dense matrix
    g = rng.normal(size=expected.shape)
    (grad,) = fd.grad(y, x, grad_outputs=g)
    want = dense.T @ g if shape[0] == 4 else g @ dense.T
    np.testing.assert_allclose(grad, want, rtol=1e-13, atol=1e-13)


def test_the_jacobian_and_its_sparsity_through_np_dot():
    L = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(6, 6)).tocsr()
    u0 = np.linspace(0.1, 0.6, 6)

    def residual(u):
        return np.dot(L, u) + np.exp(u)

    J = fd.functional.jacobian(residual, fd.tensor(u0))
    np.testing.assert_allclose(J, L.toarray() + np.diag(np.exp(u0)), rtol=1e-14)
    pattern = fs.jacobian_sparsity(lambda u: np.matmul(L, u), u0)
    assert (pattern != 0).toarray().tolist() == (L != 0).toarray().tolist()
    value_and_grad = replay.value_and_grad(lambda u: np.sum(np.dot(L, u) ** 2))
    for point in (u0, 2 * u0):
        value, g = value_and_grad(point)
        assert value == pytest.approx(np.sum((L @ point) ** 2), rel=1e-14)
        np.testing.assert_allclose(g, 2 * L.T @ (L @ point), rtol=1e-13)
    assert value_and_grad.trace_count == 1


def test_a_zero_dimensional_tensor_is_refused_by_dot_too():
    A = sp.csr_array(_dense(3, 3))
    t = fd.tensor(2.0, requires_grad=True)
    for call in (lambda: np.dot(A, t), lambda: np.dot(t, A)):
        with pytest.raises(TypeError, match="0-d Tensor"):
            call()


REFUSED = (
    ("numpy.inner", lambda A, x: np.inner(A, x)),
    ("numpy.vdot", lambda A, x: np.vdot(x, A)),
    ("numpy.outer", lambda A, x: np.outer(A, x)),
    ("numpy.kron", lambda A, x: np.kron(A, x)),
    ("numpy.tensordot", lambda A, x: np.tensordot(A, x, 1)),
    ("numpy.einsum", lambda A, x: np.einsum("ij,j->i", A, x)),
    ("numpy.multiply", lambda A, x: np.multiply(A, x)),
    ("numpy.add", lambda A, x: np.add(x, A)),
    ("numpy.add.outer", lambda A, x: np.add.outer(A, x)),
    ("numpy.xlogy", lambda A, x: special.xlogy(A, x)),
    ("numpy.dot", lambda A, x: np.dot(A, x, out=np.empty(3))),
    ("numpy.add", lambda A, x: np.add(x, A, out=fd.tensor(np.zeros(3)))),
    *((("numpy.matvec", lambda A, x: np.matvec(A, x)),) if hasattr(np, "matvec") else ()),
    *((("numpy.vecdot", lambda A, x: np.vecdot(A, x)),) if hasattr(np, "vecdot") else ()),
)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("refused", REFUSED, ids=[r[0] for r in REFUSED])
def test_other_numpy_calls_refuse_naming_the_call(kind, refused):
    """NumPy would compute an object array of matrices (a silent wrong answer)."""
    name, op = refused
    A = getattr(sp, f"csr_{kind}")(_dense(3, 3))
    x = fd.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match=rf"{name}\b.*A @ x"):
        op(A, x)


def test_replayed_ufunc_calls_hand_the_matrix_over_or_refuse():
    A = sp.csr_array(_dense(3, 3))
    value_and_grad = replay.value_and_grad(lambda u: np.sum(np.matmul(A, u) ** 2))
    u0 = np.array([0.5, -1.0, 2.0])
    value, g = value_and_grad(u0)
    assert value == pytest.approx(np.sum((A @ u0) ** 2), rel=1e-14)
    np.testing.assert_allclose(g, 2 * A.T @ (A @ u0), rtol=1e-13)
    with pytest.raises(TypeError, match="numpy.multiply"):
        replay.value_and_grad(lambda u: np.sum(np.multiply(A, u)))(u0)
