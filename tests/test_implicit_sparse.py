"""Implicit differentiation with sparse Jacobians and Hessians (n >= 100, sparse LU).

Every derivative is compared with the dense implicit-function computation in NumPy
(or an unrolled iteration, or central differences of exact gradients).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import funcdiff as fd
from funcdiff import functional as F
from funcdiff import optimize

N = 11  # an 11 x 11 grid: 121 unknowns, 5 nonzeros a row
H = 1.0 / (N + 1)
_T = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(N, N))
LAP = sp.csr_array((sp.kron(sp.identity(N), _T) + sp.kron(_T, sp.identity(N))) / H**2)
_G = np.linspace(H, 1 - H, N)
SOURCE = (-10.0 * np.outer(np.sin(np.pi * _G), np.sin(2 * np.pi * _G))).ravel()


def bratu(u, lam, f):
    return LAP @ u + lam * np.exp(u) - f


def bratu_solution(lam, f, **kw):
    return optimize.root(bratu, np.zeros(N * N), args=(lam, f), tol=1e-12, **kw)


def condition_of(x):
    return x.grad_fn.ctx.condition


def test_bratu_gradient_is_the_adjoint_and_the_solve_is_sparse() -> None:
    lam = fd.tensor(2.0, requires_grad=True)
    f = fd.tensor(SOURCE, requires_grad=True)
    u = bratu_solution(lam, f).x
    (0.5 * np.sum(u**2)).backward()
    assert condition_of(u).factors()[0] == "sparse"
    # Dense adjoint: A^T w = u, dL/dlam = -w . exp(u), dL/df = w.
    ud = u.data
    A = LAP.toarray() + np.diag(2.0 * np.exp(ud))
    w = np.linalg.solve(A.T, ud)
    np.testing.assert_allclose(lam.grad.data, -w @ np.exp(ud), rtol=1e-10)
    np.testing.assert_allclose(f.grad.data, w, rtol=1e-10, atol=1e-14)


def test_bratu_forward_mode_and_second_order() -> None:
    rng = np.random.default_rng(1)
    direction = rng.standard_normal(N * N)

    def loss(lam, f):
        u = bratu_solution(lam, f).x
        return np.sum(np.sin(u)) + 0.1 * np.sum(u**3)

    lam0 = fd.tensor(2.0)
    f0 = fd.tensor(SOURCE)
    _, (g_lam, g_f) = F.vjp(loss, (lam0, f0), fd.tensor(1.0))
    _, jv = F.jvp(loss, (lam0, f0), (fd.tensor(0.0), fd.tensor(direction)))
    np.testing.assert_allclose(jv.data, g_f.data @ direction, rtol=1e-9)
    # d^2 loss / d lam^2 against central differences of the exact gradient.
    eps = 1e-4

    def dlam(lam):
        return F.vjp(loss, (fd.tensor(lam), f0), fd.tensor(1.0))[1][0].data

    second = (dlam(2.0 + eps) - dlam(2.0 - eps)) / (2 * eps)
    _, hv = F.hvp(loss, (lam0, f0), (fd.tensor(1.0), fd.tensor(np.zeros(N * N))))
    np.testing.assert_allclose(hv[0].data, second, rtol=1e-6)
    # The mixed block against differences of the source gradient along lam.
    mixed = (
        F.vjp(loss, (fd.tensor(2.0 + eps), f0), fd.tensor(1.0))[1][1].data
        - F.vjp(loss, (fd.tensor(2.0 - eps), f0), fd.tensor(1.0))[1][1].data
    ) / (2 * eps)
    np.testing.assert_allclose(hv[1].data, mixed, rtol=1e-5, atol=1e-10)


def test_root_reuses_the_prepared_jacobian_of_its_solve() -> None:
    lam = fd.tensor(1.5, requires_grad=True)
    res = bratu_solution(lam, SOURCE, sparse=True)
    condition = condition_of(res.x)
    assert condition.prepared is not None
    (d,) = fd.grad(res.x.sum(), lam)
    ud = res.x.data
    A = LAP.toarray() + np.diag(1.5 * np.exp(ud))
    np.testing.assert_allclose(d.data, -np.ones(N * N) @ np.linalg.solve(A, np.exp(ud)), rtol=1e-10)


def chain(x, a):
    """A banded objective: n = 150, tridiagonal Hessian."""
    return np.sum((x[1:] - x[:-1]) ** 2) + np.sum(np.cosh(x - a)) + 0.1 * np.sum(x**4)


def test_minimize_with_a_sparse_hessian_against_the_dense_implicit_derivative() -> None:
    n = 150
    a0 = np.sin(np.arange(n) / 7.0)
    a = fd.tensor(a0, requires_grad=True)
    res = optimize.minimize(
        chain, np.zeros(n), args=(a,), method="Newton-CG", options={"xtol": 1e-12}
    )
    assert condition_of(res.x).factors()[0] == "sparse"
    weights = np.cos(np.arange(n))
    (res.x @ weights).backward()
    x = res.x.data
    Hxx = F.hessian(lambda x: chain(x, a0), fd.tensor(x)).data
    # d/da of grad_x f = -diag(cosh(x - a))
    Bxa = -np.diag(np.cosh(x - a0))
    np.testing.assert_allclose(a.grad.data, -Bxa.T @ np.linalg.solve(Hxx.T, weights), rtol=1e-7)


def test_sparse_least_squares_against_the_dense_exact_hessian() -> None:
    n = 120
    t = np.linspace(0.0, 1.0, n)

    def residual(x, s):
        smooth = x[1:] - x[:-1]
        return np.concatenate([np.exp(0.3 * x) - s * np.cos(3 * t), 2.0 * smooth])

    s0 = 1.3
    res = optimize.least_squares(
        residual,
        np.zeros(n),
        args=(fd.tensor(s0, requires_grad=True),),
        method="lm",
        xtol=1e-15,
        ftol=1e-15,
        gtol=1e-15,
    )
    assert condition_of(res.x).factors()[0] == "sparse"
    (dx,) = fd.grad(res.x.sum(), res.x.grad_fn.ctx.saved_tensors[1])
    phi = lambda x, s: 0.5 * np.sum(residual(x, s) ** 2)  # noqa: E731
    Hd = F.hessian(phi, (fd.tensor(res.x.data), fd.tensor(s0)))
    sens = -np.linalg.solve(Hd[0][0].data, Hd[0][1].data)
    np.testing.assert_allclose(dx.data, sens.sum(), rtol=1e-8)


def test_sparse_nonsymmetric_fixed_point_against_its_unrolled_iteration() -> None:
    n = 130
    B = sp.diags_array([0.3, 0.1, -0.25], offsets=[-1, 0, 2], shape=(n, n)).tocsr()

    def step(x, p):
        return np.tanh(B @ x + p)

    p0 = np.cos(np.arange(n) / 5.0)

    def unrolled(p):
        x = np.zeros(n)
        for _ in range(80):
            x = step(x, p)
        return x

    weights = np.linspace(-1.0, 1.0, n)
    p = fd.tensor(p0, requires_grad=True)
    x = optimize.fixed_point(step, np.zeros(n), args=(p,), xtol=1e-14)
    assert condition_of(x).factors()[0] == "sparse"
    (g,) = fd.grad(x @ weights, p)
    pu = fd.tensor(p0, requires_grad=True)
    (g_unrolled,) = fd.grad(unrolled(pu) @ weights, pu)
    np.testing.assert_allclose(g.data, g_unrolled.data, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("sparse", [True, "auto", False])
def test_every_sparse_setting_gives_the_same_gradient(sparse) -> None:
    lam = fd.tensor(2.0, requires_grad=True)
    res = bratu_solution(lam, SOURCE, sparse=sparse)
    (d,) = fd.grad(np.sum(res.x**2), lam)
    ud = res.x.data
    A = LAP.toarray() + np.diag(2.0 * np.exp(ud))
    want = -np.linalg.solve(A.T, 2 * ud) @ np.exp(ud)
    np.testing.assert_allclose(d.data, want, rtol=1e-10)


def test_minimize_reuses_its_prepared_sparse_hessian() -> None:
    n = 150
    a0 = np.sin(np.arange(n) / 7.0)
    a = fd.tensor(a0, requires_grad=True)
    res = optimize.minimize(
        chain, np.zeros(n), args=(a,), method="Newton-CG", sparse=True, options={"xtol": 1e-12}
    )
    assert condition_of(res.x).prepared is not None
    (g,) = fd.grad(res.x.sum(), a)
    x = res.x.data
    Hxx = F.hessian(lambda x: chain(x, a0), fd.tensor(x)).data
    np.testing.assert_allclose(
        g.data, np.diag(np.cosh(x - a0)) @ np.linalg.solve(Hxx, np.ones(n)), rtol=1e-7
    )


def test_least_squares_kwargs_and_replay_with_tensor_args() -> None:
    t = np.linspace(0.0, 1.0, 6)

    def residual(w, s, scale=1.0):
        return scale * (w[0] + w[1] * t - s * t**2)

    s = fd.tensor(2.0, requires_grad=True)
    res = optimize.least_squares(residual, np.zeros(2), args=(s,), kwargs={"scale": 3.0})
    (d,) = fd.grad(res.x.sum(), s)
    # The fit is linear in s: w(s) = s * lstsq([1, t], t^2).
    V = np.stack([np.ones_like(t), t], axis=1)
    np.testing.assert_allclose(d.data, np.linalg.lstsq(V, t**2, rcond=None)[0].sum(), rtol=1e-9)
    res = optimize.root(lambda x, s: x**3 - s, np.ones(1), args=(s,), replay=True)
    (d,) = fd.grad(res.x.sum(), s)
    np.testing.assert_allclose(d.data, 2.0 ** (-2 / 3) / 3, rtol=1e-9)


def test_krylov_with_sparse_is_preconditioned_by_the_exact_jacobian() -> None:
    lam = fd.tensor(2.0, requires_grad=True)
    res = optimize.root(
        bratu,
        np.zeros(N * N),
        args=(lam, SOURCE),
        method="krylov",
        sparse=True,
        options={"fatol": 1e-11},
    )
    assert res.success and res.nit <= 6  # Newton steps, each with an exact sparse LU
    assert condition_of(res.x).prepared is not None
    (d,) = fd.grad(np.sum(res.x**2), lam)
    ud = res.x.data
    A = LAP.toarray() + np.diag(2.0 * np.exp(ud))
    np.testing.assert_allclose(d.data, -np.linalg.solve(A.T, 2 * ud) @ np.exp(ud), rtol=1e-8)
    plain = optimize.root(
        bratu,
        np.zeros(N * N),
        args=(2.0, SOURCE),
        method="krylov",
        sparse=True,
        options={"fatol": 1e-11},
    )
    np.testing.assert_allclose(plain.x, ud, rtol=1e-12)
