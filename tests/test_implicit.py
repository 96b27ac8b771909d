"""Implicit differentiation through funcdiff.optimize against closed forms.

Each solver's solution is differentiated with respect to Tensor ``args`` and compared
with the derivative of the closed-form solution (computed by hand, by central
differences of re-solves, or by torch on the closed form), in every mode: grad,
jacobian (reverse, forward, vectorized), vjp, jvp, hessian, hvp.
"""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
from funcdiff import functional as F
from funcdiff import optimize

TIGHT = {"tol": 1e-13}


def _fd_jacobian(solve, p, eps=1e-6):
    """Central differences of re-solves: columns d solve / d p_j."""
    cols = []
    for e in np.eye(p.size):
        cols.append((solve(p + eps * e) - solve(p - eps * e)) / (2 * eps))
    return np.array(cols).T


# ---------------------------------------------------------------- cubic roots (Cardano)


def cardano(p, q):
    """The real root of x^3 + p x + q = 0 for p > 0 (NumPy)."""
    s = np.sqrt(q**2 / 4 + p**3 / 27)
    return np.cbrt(-q / 2 + s) + np.cbrt(-q / 2 - s)


def cubic_root(pq):
    res = optimize.root(lambda x, pq: x**3 + pq[0] * x + pq[1], np.zeros(1), args=(pq,), **TIGHT)
    return res.x[0]


PQ = np.array([1.5, -2.0])


def test_cubic_root_value_and_gradient_against_cardano() -> None:
    pq = fd.tensor(PQ, requires_grad=True)
    x = cubic_root(pq)
    assert isinstance(x, fd.Tensor)
    np.testing.assert_allclose(x.data, cardano(*PQ), rtol=1e-12)
    x.backward()
    # d x / d(p, q) = -(x, 1) / (3 x^2 + p)
    xs = cardano(*PQ)
    np.testing.assert_allclose(pq.grad.data, -np.array([xs, 1.0]) / (3 * xs**2 + PQ[0]), rtol=1e-9)


def test_cubic_root_second_order_against_torch() -> None:
    torch = pytest.importorskip("torch")

    def cardano_t(v):
        p, q = v[0], v[1]
        s = torch.sqrt(q**2 / 4 + p**3 / 27)
        a, b = -q / 2 + s, -q / 2 - s
        cbrt = lambda z: torch.sign(z) * torch.abs(z) ** (1 / 3)  # noqa: E731
        return cbrt(a) + cbrt(b)

    v = torch.tensor(PQ, dtype=torch.float64)
    g_t = torch.func.grad(cardano_t)(v).numpy()
    H_t = torch.func.hessian(cardano_t)(v).numpy()
    pq = fd.tensor(PQ)
    np.testing.assert_allclose(F.jacobian(cubic_root, pq).data, g_t, rtol=1e-9)
    np.testing.assert_allclose(F.hessian(cubic_root, pq).data, H_t, rtol=1e-7, atol=1e-10)
    u = np.array([0.3, -1.2])
    _, hv = F.hvp(cubic_root, pq, fd.tensor(u))
    np.testing.assert_allclose(hv.data, H_t @ u, rtol=1e-7, atol=1e-10)
    _, jv = F.jvp(cubic_root, pq, fd.tensor(u))
    np.testing.assert_allclose(jv.data, g_t @ u, rtol=1e-9)


# ------------------------------------------------- a quadratic with a parameter-dependent matrix

A0 = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
P0 = np.array([1.3, 0.7, -0.4, 2.0])


def quadratic(x, p):
    # A(p) = A0 + p0 * diag(1, 2, 3) is positive definite for p0 > 0; b(p) = p[1:].
    A = A0 + p[0] * np.diag([1.0, 2.0, 3.0])
    return 0.5 * x @ (A @ x) - x @ p[1:]


def quad_result(p, method="BFGS"):
    return optimize.minimize(
        quadratic, np.zeros(3), args=(p,), method=method, options={"gtol": 1e-12}
    )


def quad_closed(p):
    return np.linalg.solve(A0 + p[0] * np.diag([1.0, 2.0, 3.0]), p[1:])


@pytest.mark.parametrize("method", ["BFGS", "trust-exact", "Newton-CG", "L-BFGS-B"])
def test_quadratic_minimizer_jacobian_every_strategy(method) -> None:
    # Newton-CG with exact Hessian products is at the minimiser to rounding within a few
    # steps; asked for smaller steps (SciPy 1.17: xtol under 1e-5) its line search then
    # reports precision loss (no progress possible), which minimize refuses.
    options = {"xtol": 1e-5} if method == "Newton-CG" else {"gtol": 1e-12}
    if method == "L-BFGS-B":
        options = {"gtol": 1e-13, "ftol": 1e-15}

    def solve(p):
        return optimize.minimize(
            quadratic, np.zeros(3), args=(p,), method=method, options=options
        ).x

    truth = _fd_jacobian(quad_closed, P0)
    p = fd.tensor(P0)
    np.testing.assert_allclose(F.jacobian(solve, p).data, truth, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        F.jacobian(solve, p, strategy="forward-mode").data, truth, rtol=1e-6, atol=1e-8
    )
    np.testing.assert_allclose(
        F.jacobian(solve, p, vectorize=True).data, truth, rtol=1e-6, atol=1e-8
    )


def test_quadratic_against_torch_first_and_second_order() -> None:
    torch = pytest.importorskip("torch")
    D = torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    At = torch.tensor(A0)

    def closed_t(p):
        return torch.linalg.solve(At + p[0] * D, p[1:])

    def loss_t(p):
        x = closed_t(p)
        return torch.sum(torch.sin(x) * x) + x[0] * p[0]

    def loss(p):
        x = quad_result(p).x
        return np.sum(np.sin(x) * x) + x[0] * p[0]

    pt = torch.tensor(P0)
    p = fd.tensor(P0)
    np.testing.assert_allclose(
        F.jacobian(lambda p: quad_result(p).x, p).data,
        torch.func.jacrev(closed_t)(pt).numpy(),
        rtol=1e-8,
        atol=1e-10,
    )
    np.testing.assert_allclose(
        F.hessian(loss, p).data, torch.func.hessian(loss_t)(pt).numpy(), rtol=1e-6, atol=1e-8
    )
    v = np.array([0.2, -0.5, 1.0, 0.3])
    _, vj = F.vjp(lambda p: quad_result(p).x, p, fd.tensor(v[:3]))
    np.testing.assert_allclose(
        vj.data, torch.func.jacrev(closed_t)(pt).numpy().T @ v[:3], rtol=1e-8, atol=1e-10
    )
    _, hv = F.hvp(loss, p, fd.tensor(v))
    np.testing.assert_allclose(
        hv.data, torch.func.hessian(loss_t)(pt).numpy() @ v, rtol=1e-6, atol=1e-8
    )


def test_minimize_fun_follows_the_envelope_theorem() -> None:
    torch = pytest.importorskip("torch")
    D = torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    At = torch.tensor(A0)

    def value_t(p):  # min of 0.5 x'Ax - b'x is -0.5 b'A^{-1}b
        return -0.5 * p[1:] @ torch.linalg.solve(At + p[0] * D, p[1:])

    p = fd.tensor(P0, requires_grad=True)
    res = quad_result(p)
    assert isinstance(res.fun, fd.Tensor) and res.fun.shape == ()
    res.fun.backward()
    pt = torch.tensor(P0)
    np.testing.assert_allclose(p.grad.data, torch.func.grad(value_t)(pt).numpy(), rtol=1e-8)
    H = F.hessian(lambda p: quad_result(p).fun, fd.tensor(P0))
    np.testing.assert_allclose(H.data, torch.func.hessian(value_t)(pt).numpy(), rtol=1e-6)


def test_args_that_were_silently_constant_now_differentiate() -> None:
    # A Tensor in args used to reach the solver and drop its gradient; now it is a
    # parameter of the solution.
    L = fd.tensor(np.array([[2.0, -1.0], [-1.0, 2.0]]), requires_grad=True)  # symmetric
    b = np.array([1.0, 3.0])
    res = optimize.minimize(lambda x, L: 0.5 * x @ L @ x - b @ x, np.zeros(2), args=(L,))
    x = res.x
    x.sum().backward()
    # x = L^{-1} b, d(1'x)/dL = -L^{-T} 1 x^T
    xs = np.linalg.solve(L.data, b)
    np.testing.assert_allclose(x.data, xs, rtol=1e-6)
    # Only L's symmetric part S enters the gradient of x'Lx: x = S^{-1} b and
    # d(1'x)/dL = -(v x' + x v') / 2 with v = S^{-1} 1.
    v = np.linalg.solve(L.data, np.ones(2))
    np.testing.assert_allclose(L.grad.data, -(np.outer(v, xs) + np.outer(xs, v)) / 2, rtol=1e-5)


# ------------------------------------------------------------- linear least squares


def test_linear_least_squares_with_a_residual_against_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    X0 = rng.standard_normal((8, 3))
    y0 = rng.standard_normal(8)

    def solve(X, y):
        return optimize.least_squares(lambda w, X, y: X @ w - y, np.zeros(3), args=(X, y)).x

    def closed_t(X, y):
        return torch.linalg.solve(X.T @ X, X.T @ y)

    Xt, yt = torch.tensor(X0), torch.tensor(y0)
    jX_t, jy_t = torch.func.jacrev(closed_t, argnums=(0, 1))(Xt, yt)
    jX, jy = F.jacobian(solve, (fd.tensor(X0), fd.tensor(y0)))
    np.testing.assert_allclose(jX.data, jX_t.numpy(), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(jy.data, jy_t.numpy(), rtol=1e-7, atol=1e-9)
    # The residual is far from zero: the term Gauss-Newton drops matters for dX.
    assert np.linalg.norm(X0 @ np.linalg.lstsq(X0, y0, rcond=None)[0] - y0) > 0.5
    X = fd.tensor(X0, requires_grad=True)
    res = optimize.least_squares(lambda w, X: X @ w - y0, np.zeros(3), args=(X,))
    res.cost.backward()  # envelope: d cost / dX = r w^T
    r = X0 @ res.x.data - y0
    np.testing.assert_allclose(X.grad.data, np.outer(r, res.x.data), rtol=1e-6, atol=1e-9)


def test_nonlinear_least_squares_uses_the_exact_hessian_not_gauss_newton() -> None:
    t = np.linspace(0.0, 2.0, 12)
    y = np.exp(-0.8 * t) + 0.3 * np.cos(5 * t)  # a model that cannot fit: large residual

    def residual(w, s):
        return w[0] * np.exp(-w[1] * t) - y * (1.0 + s * t)

    def solve(s):
        return optimize.least_squares(
            residual, np.array([1.0, 1.0]), args=(s,), xtol=1e-15, ftol=1e-15, gtol=1e-15
        ).x

    s0 = 0.3
    w = solve(fd.tensor(s0)).data
    # The dense implicit-function computation, with the exact Hessian of 0.5 ||r||^2.
    phi = lambda w, s: 0.5 * np.sum(residual(w, s) ** 2)  # noqa: E731
    H = F.hessian(phi, (fd.tensor(w), fd.tensor(s0)))
    truth = -np.linalg.solve(H[0][0].data, H[0][1].data)
    dw = F.jacobian(solve, fd.tensor(s0)).data
    np.testing.assert_allclose(dw, truth, rtol=1e-8)
    assert np.linalg.norm(residual(w, s0)) > 0.3
    # Gauss-Newton: (J^T J) dw = -J^T dr/ds, which differs here.
    J = np.stack([np.exp(-w[1] * t), -w[0] * t * np.exp(-w[1] * t)], axis=1)
    gn = np.linalg.solve(J.T @ J, J.T @ (y * t))
    assert np.max(np.abs(gn - dw)) > 1e-3 * np.max(np.abs(dw))  # far beyond rtol=1e-8


# --------------------------------------------------------------- nonsymmetric conditions


W = np.array([[0.2, 0.5, -0.1], [-0.3, 0.1, 0.4], [0.05, -0.2, 0.3]])


def contraction(x, p):
    return np.tanh(W @ x + p)


def test_fixed_point_against_its_unrolled_iteration() -> None:
    p0 = np.array([0.3, -0.7, 1.1])

    def unrolled(p):
        x = np.zeros(3)
        for _ in range(200):
            x = contraction(x, p)
        return x

    def implicit(p):
        return optimize.fixed_point(contraction, np.zeros(3), args=(p,), xtol=1e-14)

    p = fd.tensor(p0)
    J_unrolled = F.jacobian(unrolled, p).data
    np.testing.assert_allclose(F.jacobian(implicit, p).data, J_unrolled, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        F.jacobian(implicit, p, strategy="forward-mode").data, J_unrolled, rtol=1e-10, atol=1e-12
    )
    # The transposed solve matters: I - dg/dx is not symmetric.
    loss = lambda p: np.sum(np.sin(implicit(p)))  # noqa: E731
    loss_u = lambda p: np.sum(np.sin(unrolled(p)))  # noqa: E731
    np.testing.assert_allclose(F.hessian(loss, p).data, F.hessian(loss_u, p).data, rtol=1e-8)


def test_general_root_against_finite_differences_of_resolves() -> None:
    M = np.array([[3.0, 1.0, 0.0], [-1.0, 2.0, 0.5], [0.4, 0.0, 1.5]])

    def fun(x, p):
        return M @ x + 0.1 * x**3 - p[0] * np.array([1.0, 2.0, -1.0]) - p[1:] ** 2

    def solve(p):
        return optimize.root(fun, np.zeros(3), args=(p,), **TIGHT).x

    p0 = np.array([0.5, 1.0, -0.3, 0.8])
    plain = lambda p: optimize.root(fun, np.zeros(3), args=(p,), **TIGHT).x  # noqa: E731
    truth = _fd_jacobian(plain, p0)
    p = fd.tensor(p0)
    np.testing.assert_allclose(F.jacobian(solve, p).data, truth, rtol=1e-6, atol=1e-9)
    u = np.array([1.0, -2.0, 0.5])
    _, vj = F.vjp(solve, p, fd.tensor(u))
    np.testing.assert_allclose(vj.data, truth.T @ u, rtol=1e-6, atol=1e-9)
    # Second order: the Hessian of a scalar of the root against differences of gradients.
    loss = lambda p: np.sum(solve(p) ** 2)  # noqa: E731
    grad_of = lambda q: F.jacobian(loss, fd.tensor(q)).data  # noqa: E731
    np.testing.assert_allclose(
        F.hessian(loss, p).data, _fd_jacobian(grad_of, p0), rtol=1e-5, atol=1e-8
    )


# ------------------------------------------------------------------- root_scalar, custom_root


@pytest.mark.parametrize(
    "kw",
    [{"bracket": (0.0, 3.0)}, {"x0": 1.0, "method": "newton"}, {"x0": 1.0, "method": "halley"}],
)
def test_root_scalar_square_root(kw) -> None:
    def root_of(c):
        return optimize.root_scalar(lambda x, c: x**2 - c, args=(c,), xtol=1e-14, **kw).root

    c = fd.tensor(2.0)
    np.testing.assert_allclose(root_of(c).data, np.sqrt(2.0), rtol=1e-12)
    np.testing.assert_allclose(F.jacobian(root_of, c).data, 0.5 / np.sqrt(2.0), rtol=1e-9)
    np.testing.assert_allclose(F.hessian(root_of, c).data, -0.25 * 2.0**-1.5, rtol=1e-7)


def newton_cubic_solver(x0, a):
    x = np.array(x0, dtype=float)
    for _ in range(60):
        x = x - (x**3 + x - a) / (3 * x**2 + 1)
    return x


def test_custom_root_first_and_second_order() -> None:
    solver = optimize.custom_root(lambda x, a: x**3 + x - a)(newton_cubic_solver)
    a0 = np.array([2.0, 10.0])
    a = fd.tensor(a0)
    x = solver(np.ones(2), a).data
    np.testing.assert_allclose(x**3 + x, a0, rtol=1e-14)
    J = F.jacobian(lambda a: solver(np.ones(2), a), a).data
    np.testing.assert_allclose(J, np.diag(1 / (3 * x**2 + 1)), rtol=1e-12)
    H = F.hessian(lambda a: solver(np.ones(2), a).sum(), a).data
    # d2x/da2 = -6x (dx/da)^2 / (3x^2 + 1)
    np.testing.assert_allclose(H, np.diag(-6 * x / (3 * x**2 + 1) ** 3), rtol=1e-10)
    # Plain args: the solver's own output, untouched.
    assert type(solver(np.ones(2), a0)) is np.ndarray


def test_custom_root_refuses_a_condition_of_the_wrong_size() -> None:
    solver = optimize.custom_root(lambda x, a: np.concatenate([x - a, x]))(newton_cubic_solver)
    with pytest.raises(ValueError, match=r"returned 4 values.*2 values"):
        solver(np.ones(2), fd.tensor(np.ones(2), requires_grad=True))


# --------------------------------------------------------- plain behaviour, no_grad, backward()


def test_without_tensor_args_results_stay_plain() -> None:
    res = optimize.minimize(quadratic, np.zeros(3), args=(P0,))
    assert type(res.x) is np.ndarray and isinstance(res.fun, float)
    res = optimize.root(lambda x: x**3 - 8.0, np.ones(1))
    assert type(res.x) is np.ndarray
    x = optimize.fixed_point(lambda x: np.cos(x), 0.5)
    assert type(x) is np.ndarray
    sol = optimize.root_scalar(lambda x: x**2 - 2.0, bracket=(0.0, 2.0))
    assert isinstance(sol.root, float)


def test_under_no_grad_a_tensor_without_a_graph() -> None:
    p = fd.tensor(P0, requires_grad=True)
    with fd.no_grad():
        res = quad_result(p)
    assert isinstance(res.x, fd.Tensor) and not res.x.requires_grad
    np.testing.assert_allclose(res.x.data, quad_closed(P0), rtol=1e-8)


def test_accumulates_into_several_args_with_backward() -> None:
    a = fd.tensor(2.0, requires_grad=True)
    b = fd.tensor(np.array([1.0, -1.0]), requires_grad=True)
    res = optimize.root(lambda x, a, k, b: a * x + x**3 - b * k, np.zeros(2), args=(a, 3.0, b))
    res.x.sum().backward()
    x = res.x.data
    den = a.data + 3 * x**2
    np.testing.assert_allclose(a.grad.data, np.sum(-x / den), rtol=1e-9)
    np.testing.assert_allclose(b.grad.data, 3.0 / den, rtol=1e-9)


def test_a_batch_of_cotangents_under_create_graph() -> None:
    # Jacobian rows pulled back together and kept differentiable: their derivative is
    # the second derivative of the solution, as from one cotangent at a time.
    def solve(p):
        return optimize.root(lambda x, p: x**3 + p[0] * x - p[1:], np.ones(2), args=(p,), **TIGHT).x

    p0 = np.array([1.5, 2.0, -1.0])

    def jac_sum(p):
        return F.jacobian(solve, p, create_graph=True, vectorize=True).sum()

    def jac_sum_rows(p):
        return F.jacobian(solve, p, create_graph=True, strict=True).sum()

    g_batched = F.jacobian(jac_sum, fd.tensor(p0)).data
    g_rows = F.jacobian(jac_sum_rows, fd.tensor(p0)).data
    np.testing.assert_allclose(g_batched, g_rows, rtol=1e-10)
    grad_of = lambda q: F.jacobian(solve, fd.tensor(q)).data.sum()  # noqa: E731
    np.testing.assert_allclose(
        g_batched, _fd_jacobian(lambda q: np.atleast_1d(grad_of(q)), p0)[0], rtol=1e-6
    )
