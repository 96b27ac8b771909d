"""The two gradient conventions of ``eigh``/``eigvalsh`` against independent truths.

``np.linalg.eigh(a, UPLO)`` and ``scipy.linalg.eigh(a, lower=...)`` read one triangle of
``a``. By default funcdiff differentiates exactly that function (the one-triangle
gradient), so central finite differences of NumPy's own function along any direction,
symmetric or not, are the truth. ``funcdiff.linalg.eigh(..., gradient="symmetric")``
returns the symmetric gradient, checked here against the gradient of the symmetrised
function at the symmetric matrix the triangle stands for.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import funcdiff as fd
from funcdiff import linalg as fdl
from funcdiff.functional import jvp

H = 1e-6


def stands_for(a: np.ndarray, lower: bool) -> np.ndarray:
    """The symmetric matrix that the triangle read of ``a`` stands for."""
    t = np.tril(a) if lower else np.triu(a)
    return t + np.swapaxes(t, -1, -2) - t * np.eye(a.shape[-1])


def unread(n: int, lower: bool) -> np.ndarray:
    """1 on the triangle that is not read (without the diagonal), 0 elsewhere."""
    return np.triu(np.ones((n, n)), 1) if lower else np.tril(np.ones((n, n)), -1)


def general(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A non-symmetric matrix whose triangles are unrelated."""
    return rng.uniform(-2.0, 2.0, size=shape)


def grad_of(f, a0: np.ndarray, **kwargs) -> np.ndarray:
    a = fd.tensor(a0, requires_grad=True)
    (g,) = fd.grad(f(a), a, **kwargs)
    return g.data


def central(f, a0: np.ndarray, d: np.ndarray) -> float:
    return float((f(a0 + H * d) - f(a0 - H * d)) / (2 * H))


def numpy_loss(uplo: str, w_out: np.ndarray):
    """A gauge-invariant scalar of values and vectors: sum(W * V diag(sin l) V^T) + sum l^3."""

    def loss(a):
        lam, v = np.linalg.eigh(a, UPLO=uplo)
        return np.sum(w_out * np.matmul(v * np.sin(lam)[..., None, :], np.swapaxes(v, -1, -2)))

    return loss


def scipy_loss(lower: bool, w_out: np.ndarray, gradient: str = "triangle"):
    def loss(a):
        lam, v = fdl.eigh(a, lower=lower, gradient=gradient)
        return np.sum(w_out * np.matmul(v * np.sin(lam)[..., None, :], np.swapaxes(v, -1, -2)))

    return loss


# ------------------------------------------------------------------ first order
@pytest.mark.parametrize("uplo", ["L", "U", "l", "u"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_numpy_eigh_gradient_is_that_of_numpys_function(uplo: str, shape) -> None:
    rng = np.random.default_rng(20)
    a0, d = general(rng, shape), rng.standard_normal(shape)
    lower = uplo.upper() == "L"
    w_out = rng.standard_normal(shape)
    loss = numpy_loss(uplo, w_out)
    # NumPy reads one triangle: a step on the other leaves its result unchanged.
    assert loss(a0 + unread(shape[-1], lower)) == loss(a0)
    g = grad_of(loss, a0)
    assert np.sum(g * d) == pytest.approx(central(loss, a0, d), rel=1e-7, abs=1e-9)
    assert not np.any(g * unread(shape[-1], lower))
    # along every single entry as well, so no entry can be off by the factor 2
    for i, j in np.ndindex(*shape[-2:]):
        e = np.zeros(shape)
        e[..., i, j] = 1.0
        fd_ij = central(loss, a0, e)
        assert np.sum(g[..., i, j]) == pytest.approx(fd_ij, rel=1e-6, abs=1e-8), (i, j)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_numpy_eigvalsh_gradient_is_that_of_numpys_function(uplo: str) -> None:
    rng = np.random.default_rng(21)
    a0, d, c = general(rng, (5, 5)), rng.standard_normal((5, 5)), rng.standard_normal(5)

    def loss(a):
        return np.sum(c * np.linalg.eigvalsh(a, UPLO=uplo))

    g = grad_of(loss, a0)
    assert np.sum(g * d) == pytest.approx(central(loss, a0, d), rel=1e-7)
    # closed form: V diag(c) V^T of the matrix read, its off-diagonal folded onto the triangle
    _, v = np.linalg.eigh(a0, UPLO=uplo)
    g_sym = (v * c) @ v.T
    lower = uplo == "L"
    expect = np.where(unread(5, not lower) > 0, 2.0 * g_sym, 0.0) + np.diag(np.diag(g_sym))
    np.testing.assert_allclose(g, expect, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lower", [True, False])
def test_funcdiff_linalg_eigh_triangle_gradient_is_that_of_scipys_function(lower: bool) -> None:
    rng = np.random.default_rng(22)
    a0, d, w_out = general(rng, (4, 4)), rng.standard_normal((4, 4)), rng.standard_normal((4, 4))

    def scipy_fn(a):
        lam, v = scipy.linalg.eigh(a, lower=lower)
        return np.sum(w_out * ((v * np.sin(lam)) @ v.T))

    g = grad_of(scipy_loss(lower, w_out), a0)
    assert np.sum(g * d) == pytest.approx(central(scipy_fn, a0, d), rel=1e-7)
    assert not np.any(g * unread(4, lower))
    # the same function as NumPy's with the matching UPLO
    np.testing.assert_allclose(
        g, grad_of(numpy_loss("L" if lower else "U", w_out), a0), rtol=1e-9, atol=1e-12
    )
    c = rng.standard_normal(4)
    g_vals = grad_of(lambda a: np.sum(c * fdl.eigvalsh(a, lower=lower)), a0)
    fd_vals = central(lambda a: np.sum(c * scipy.linalg.eigvalsh(a, lower=lower)), a0, d)
    assert np.sum(g_vals * d) == pytest.approx(fd_vals, rel=1e-7)


def test_funcdiff_linalg_eigh_on_arrays_returns_scipys_result() -> None:
    a0 = general(np.random.default_rng(23), (2, 3, 3))
    for lower in (True, False):
        w, v = scipy.linalg.eigh(a0, lower=lower)
        for gradient in ("triangle", "symmetric"):
            w1, v1 = fdl.eigh(a0, lower=lower, gradient=gradient)
            np.testing.assert_array_equal(w1, w)
            np.testing.assert_array_equal(v1, v)
            np.testing.assert_array_equal(
                fdl.eigvalsh(a0, lower=lower, gradient=gradient),
                scipy.linalg.eigvalsh(a0, lower=lower),
            )


# ------------------------------------------------------------------ symmetric option
@pytest.mark.parametrize("lower", [True, False])
def test_symmetric_option_is_the_symmetric_gradient(lower: bool) -> None:
    rng = np.random.default_rng(24)
    a0, w_out = general(rng, (4, 4)), rng.standard_normal((4, 4))
    g_sym = grad_of(scipy_loss(lower, w_out, "symmetric"), a0)
    np.testing.assert_allclose(g_sym, g_sym.T, rtol=1e-12, atol=1e-13)
    # The symmetric gradient is the entrywise gradient of f(sym(A)) at the symmetric
    # matrix the triangle stands for: an independent route through NumPy's rule.
    s = stands_for(a0, lower)
    truth = grad_of(lambda a: numpy_loss("L", w_out)((a + a.T) * 0.5), s)
    np.testing.assert_allclose(g_sym, truth, rtol=1e-9, atol=1e-12)
    # and the one-triangle gradient folded back: (G + G^T) / 2
    g_tri = grad_of(scipy_loss(lower, w_out), a0)
    np.testing.assert_allclose(g_sym, (g_tri + g_tri.T) * 0.5, rtol=1e-12, atol=1e-13)
    # closed form for the values: V diag(c) V^T
    c = rng.standard_normal(4)
    g_vals = grad_of(lambda a: np.sum(c * fdl.eigvalsh(a, lower=lower, gradient="symmetric")), a0)
    _, v = np.linalg.eigh(s)
    np.testing.assert_allclose(g_vals, (v * c) @ v.T, rtol=1e-10, atol=1e-12)


def test_both_conventions_agree_for_a_matrix_symmetric_by_construction() -> None:
    rng = np.random.default_rng(25)
    b0, w_out = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    grads = [
        grad_of(lambda b, gr=gr: scipy_loss(True, w_out, gr)(b + b.T), b0)
        for gr in ("triangle", "symmetric")
    ]
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)
    d = rng.standard_normal((4, 4))
    fd_b = central(lambda b: numpy_loss("L", w_out)(b + b.T), b0, d)
    assert np.sum(grads[0] * d) == pytest.approx(fd_b, rel=1e-7)


# ------------------------------------------------------------------ second order
def test_hessian_of_sum_of_squared_eigenvalues_closed_form() -> None:
    # sum(l^2) = ||S||_F^2 = sum_i a_ii^2 + 2 sum_{i>j} a_ij^2 for the lower triangle
    rng = np.random.default_rng(26)
    a0, d = general(rng, (4, 4)), rng.standard_normal((4, 4))
    weights = np.tril(np.ones((4, 4)), -1) * 2.0 + np.eye(4)
    a = fd.tensor(a0, requires_grad=True)
    (g,) = fd.grad(np.sum(np.linalg.eigvalsh(a) ** 2), a, create_graph=True)
    np.testing.assert_allclose(g.data, 2.0 * weights * a0, rtol=1e-10, atol=1e-12)
    (hd,) = fd.grad(np.sum(g * d), a)
    np.testing.assert_allclose(hd.data, 2.0 * weights * d, rtol=1e-9, atol=1e-11)
    (g2,) = fd.grad(np.sum(np.linalg.eigh(a, UPLO="U")[0] ** 2), a, create_graph=True)
    (hd2,) = fd.grad(np.sum(g2 * d), a)
    np.testing.assert_allclose(hd2.data, 2.0 * weights.T * d, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_second_order_through_the_vectors_matches_finite_differences_of_the_gradient(uplo):
    rng = np.random.default_rng(27)
    a0, d, w_out = general(rng, (4, 4)), rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    e = rng.standard_normal((4, 4))
    loss = numpy_loss(uplo, w_out)

    def gradient(x):
        return grad_of(loss, x)

    a = fd.tensor(a0, requires_grad=True)
    (g,) = fd.grad(loss(a), a, create_graph=True)
    (hd,) = fd.grad(np.sum(g * d), a)
    fd_hd = (gradient(a0 + H * e) - gradient(a0 - H * e)) / (2 * H)
    # <H d, e> = d/dt <g(a + t e), d>
    assert np.sum(hd.data * e) == pytest.approx(np.sum(fd_hd * d), rel=1e-6)
    lower = uplo == "L"
    assert not np.any(hd.data * unread(4, lower))


def test_second_order_of_the_symmetric_option_along_symmetric_directions() -> None:
    rng = np.random.default_rng(28)
    a0, w_out = general(rng, (4, 4)), rng.standard_normal((4, 4))
    d = rng.standard_normal((4, 4))
    d, e = d + d.T, rng.standard_normal((4, 4))
    e = e + e.T
    loss = scipy_loss(True, w_out, "symmetric")
    a = fd.tensor(a0, requires_grad=True)
    (g,) = fd.grad(loss(a), a, create_graph=True)
    (hd,) = fd.grad(np.sum(g * d), a)
    fd_hd = (grad_of(loss, a0 + H * e) - grad_of(loss, a0 - H * e)) / (2 * H)
    assert np.sum(hd.data * e) == pytest.approx(np.sum(fd_hd * d), rel=1e-6)
    np.testing.assert_allclose(hd.data, hd.data.T, rtol=1e-10, atol=1e-11)


# ------------------------------------------------------------------ forward mode
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_jvp_of_a_general_direction_is_that_of_the_direction_read(uplo: str) -> None:
    rng = np.random.default_rng(29)
    a0, v0 = general(rng, (4, 4)), rng.standard_normal((4, 4))
    lower = uplo == "L"
    # the symmetric direction the triangle of v stands for (tril(v) + tril(v, -1)^T for L)
    v_read = stands_for(v0, lower)

    def values_and_function(a):
        lam, v = np.linalg.eigh(a, UPLO=uplo)
        return lam + 0.0 * np.sum(v), np.matmul(v * np.sin(lam), v.T)

    out, (t_lam, t_fun) = jvp(values_and_function, fd.tensor(a0), fd.tensor(v0))
    _, (r_lam, r_fun) = jvp(values_and_function, fd.tensor(a0), fd.tensor(v_read))
    np.testing.assert_allclose(t_lam.data, r_lam.data, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(t_fun.data, r_fun.data, rtol=1e-12, atol=1e-13)

    def numpy_fun(a):
        lam, v = np.linalg.eigh(a, UPLO=uplo)
        return np.matmul(v * np.sin(lam), v.T)

    fd_fun = (numpy_fun(a0 + H * v0) - numpy_fun(a0 - H * v0)) / (2 * H)
    np.testing.assert_allclose(t_fun.data, fd_fun, rtol=1e-6, atol=1e-8)
    fd_lam = (
        np.linalg.eigvalsh(a0 + H * v0, UPLO=uplo) - np.linalg.eigvalsh(a0 - H * v0, UPLO=uplo)
    ) / (2 * H)
    np.testing.assert_allclose(t_lam.data, fd_lam, rtol=1e-6, atol=1e-8)
    # and the tangent of eigvalsh is the same as that of eigh's values
    _, t_vals = jvp(lambda a: np.linalg.eigvalsh(a, UPLO=uplo), fd.tensor(a0), fd.tensor(v0))
    np.testing.assert_allclose(t_vals.data, t_lam.data, rtol=1e-12, atol=1e-13)


# ------------------------------------------------------------------ bad input
def test_bad_gradient_convention_and_generalized_problem_are_named() -> None:
    a = fd.tensor(np.eye(2), requires_grad=True)
    with pytest.raises(ValueError, match="gradient must be 'triangle' or 'symmetric', got 'sym'"):
        fdl.eigh(a, gradient="sym")
    with pytest.raises(ValueError, match="gradient must be"):
        fdl.eigvalsh(np.eye(2), gradient=None)  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match=r"generalized problem \(b given\)"):
        fdl.eigh(a, np.eye(2))
