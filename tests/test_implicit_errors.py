"""Implicit differentiation: bounds, constraints and every refusal (never a wrong number)."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
from funcdiff import functional as F
from funcdiff import optimize

# ------------------------------------------------------------------------------ bounds


def shifted(x, a):
    return np.sum((x - a) ** 2) + 0.5 * x[0] * x[1]


def test_inactive_bounds_give_the_unconstrained_derivative() -> None:
    a0 = np.array([1.0, 2.0])

    def solve(a, bounds):
        return optimize.minimize(
            shifted,
            np.zeros(2),
            args=(a,),
            method="L-BFGS-B",
            bounds=bounds,
            options={"gtol": 1e-12, "ftol": 1e-15},
        ).x

    free = F.jacobian(lambda a: solve(a, None), fd.tensor(a0)).data
    boxed = F.jacobian(lambda a: solve(a, [(-5.0, 5.0), (-5.0, 5.0)]), fd.tensor(a0)).data
    # grad = 2(x - a) + 0.5 (x1, x0) = 0: x = (2I + 0.5 P)^{-1} 2a
    M = np.array([[2.0, 0.5], [0.5, 2.0]])
    np.testing.assert_allclose(free, 2 * np.linalg.inv(M), rtol=1e-8)
    np.testing.assert_allclose(boxed, free, rtol=1e-8)


@pytest.mark.parametrize("method", ["L-BFGS-B", "TNC", "SLSQP", "trust-constr", "Powell"])
def test_an_active_bound_has_a_zero_derivative(method) -> None:
    a0 = np.array([1.0, 2.0])

    def solve(a):
        return optimize.minimize(
            shifted,
            np.zeros(2),
            args=(a,),
            method=method,
            bounds=[(-5.0, 0.5), (None, None)],
            tol=1e-14,
        ).x

    x = solve(fd.tensor(a0)).data
    assert x[0] == pytest.approx(0.5, abs=1e-5)  # trust-constr stops just inside
    J = F.jacobian(solve, fd.tensor(a0)).data
    # x0 is held at 0.5; x1 minimises (x1 - a1)^2 + 0.25 x1: x1 = a1 - 0.125
    np.testing.assert_allclose(J, [[0.0, 0.0], [0.0, 1.0]], atol=1e-9)


def test_active_bounds_in_least_squares() -> None:
    def solve(c):
        return optimize.least_squares(
            lambda w, c: w - c, np.zeros(2), args=(c,), bounds=([-1.0, -1.0], [1.0, 1.0])
        ).x

    J = F.jacobian(solve, fd.tensor(np.array([3.0, 0.25]))).data
    np.testing.assert_allclose(J, [[0.0, 0.0], [0.0, 1.0]], atol=1e-9)


def test_a_degenerate_bound_is_refused() -> None:
    # The unconstrained minimiser sits exactly on the bound: no derivative.
    a = fd.tensor(np.array([0.0, 1.0]), requires_grad=True)
    with pytest.raises(ValueError, match="degenerate"):
        optimize.minimize(
            lambda x, a: np.sum((x - a) ** 2),
            np.ones(2),
            args=(a,),
            method="L-BFGS-B",
            bounds=[(0.0, None), (None, None)],
        )


def test_constraints_are_differentiated_through_the_kkt_conditions() -> None:
    """min (x - a)^2 + x0 x1 / 2 s.t. x0 + x1 = 1: on the line x = (t, 1 - t) the
    constrained minimum is t = (2 a0 - 2 a1 + 1.5) / 3, a closed form."""
    a = fd.tensor(np.array([1.0, 2.0]), requires_grad=True)
    cons = [{"type": "eq", "fun": lambda x: x[0] + x[1] - 1.0}]
    res = optimize.minimize(
        shifted, np.zeros(2), args=(a,), method="SLSQP", constraints=cons, tol=1e-13
    )
    # f(t) = (t - a0)^2 + (1 - t - a1)^2 + t (1 - t) / 2, f'(t) = 0:
    # 2 (t - a0) - 2 (1 - t - a1) + 1/2 - t = 0  ->  t = (2 a0 - 2 a1 + 1.5) / 3
    t = (2 * 1.0 - 2 * 2.0 + 1.5) / 3
    np.testing.assert_allclose(res.x.data, [t, 1 - t], atol=1e-7)
    (g,) = fd.grad(res.x[0], a)
    np.testing.assert_allclose(g, [2 / 3, -2 / 3], atol=1e-9)
    # Without Tensor args the constrained solve is SciPy's, as before.
    res = optimize.minimize(shifted, np.zeros(2), args=(a.data,), method="SLSQP", constraints=cons)
    assert type(res.x) is np.ndarray
    assert res.success and abs(res.x.sum() - 1.0) < 1e-8


# ------------------------------------------------------------------------ unconverged


def test_an_unconverged_solve_raises_quoting_scipy() -> None:
    a = fd.tensor(np.array([1.0, 2.0]), requires_grad=True)

    def rosen(x, a):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (a[0] - x[:-1]) ** 2) + a[1] * x[0]

    with pytest.raises(RuntimeError, match="did not converge.*Maximum number of iterations"):
        optimize.minimize(
            rosen, np.array([-1.0, 1.5]), args=(a,), method="BFGS", options={"maxiter": 2}
        )
    with pytest.raises(RuntimeError, match="root did not converge"):
        optimize.root(
            lambda x, a: np.cos(x) * 5 + a * x, np.array([7.0]), args=(a[0],), options={"maxfev": 3}
        )


def test_allow_unconverged_differentiates_at_the_returned_point() -> None:
    # A linear root F(x, p) = M x - p: the IFT is dx/dp = M^{-1} at any point.
    M = np.array([[2.0, 1.0], [0.0, 3.0]])
    p = fd.tensor(np.array([1.0, 1.0]), requires_grad=True)
    res = optimize.root(
        lambda x, p: M @ x + 0.1 * x**3 - p,
        np.array([5.0, 5.0]),
        args=(p,),
        options={"maxfev": 2},
        allow_unconverged=True,
    )
    assert not res.success
    x = res.x.data
    A = M + np.diag(0.3 * x**2)
    J = F.jacobian(
        lambda p: (
            optimize.root(
                lambda x, p: M @ x + 0.1 * x**3 - p,
                np.array([5.0, 5.0]),
                args=(p,),
                options={"maxfev": 2},
                allow_unconverged=True,
            ).x
        ),
        fd.tensor(p.data),
    ).data
    np.testing.assert_allclose(J, np.linalg.inv(A), rtol=1e-10)


def test_root_scalar_unconverged() -> None:
    c = fd.tensor(2.0, requires_grad=True)
    with pytest.raises(RuntimeError, match="root_scalar did not converge"):
        optimize.root_scalar(
            lambda x, c: x**2 - c,
            args=(c,),
            x0=1.0,
            method="newton",
            maxiter=1,
            options={"disp": False},
        )


# ---------------------------------------------------------------------------- singular


def test_redundant_equations_are_singular() -> None:
    p = fd.tensor(1.0, requires_grad=True)

    def fun(x, p):  # both equations say x0 + x1 = p
        s = x[0] + x[1] - p
        return np.stack([s, 2 * s])

    res = optimize.root(fun, np.zeros(2), args=(p,), method="lm")
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        res.x.sum().backward()


def test_a_flat_direction_of_the_objective_is_singular() -> None:
    a = fd.tensor(1.0, requires_grad=True)
    res = optimize.minimize(lambda x, a: (x[0] - a) ** 2 + 0.0 * x[1], np.zeros(2), args=(a,))
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        res.x.sum().backward()


def test_a_singular_sparse_jacobian_is_refused() -> None:
    n = 150
    p = fd.tensor(np.ones(n), requires_grad=True)

    def fun(x, p):  # a path-graph Laplacian with free ends: constant vectors are its kernel
        lap = np.concatenate([x[:1] - x[1:2], 2 * x[1:-1] - x[:-2] - x[2:], x[-1:] - x[-2:-1]])
        return lap + 0.0 * p

    res = optimize.root(fun, np.zeros(n), args=(p,), allow_unconverged=True)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        res.x.sum().backward()


# ------------------------------------------------------------------- closures and shapes


def test_a_closed_over_tensor_is_refused_with_advice() -> None:
    a = fd.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"not passed in args.*args=\(\.\.\.\)"):
        optimize.minimize(lambda x: np.sum((x - a) ** 2), np.zeros(2))
    with pytest.raises(RuntimeError, match="not passed in args"):
        optimize.root(lambda x: x - a, np.zeros(2))
    with pytest.raises(RuntimeError, match="not passed in args"):
        optimize.fixed_point(lambda x: 0.5 * x + a, np.zeros(2))
    with pytest.raises(RuntimeError, match="not passed in args"):
        optimize.least_squares(lambda x: x - a, np.zeros(2))
    with pytest.raises(RuntimeError, match="not passed in args"):
        optimize.root_scalar(lambda x: x - a[0], bracket=(0.0, 3.0))
    # Detached, it is a constant, as the message says.
    b = a.detach()
    res = optimize.minimize(lambda x: np.sum((x - b) ** 2), np.zeros(2))
    np.testing.assert_allclose(res.x, [1.0, 2.0], atol=1e-6)


def test_a_tensor_inside_a_container_is_refused() -> None:
    a = fd.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(TypeError, match=r"args\[0\] is a list holding a Tensor"):
        optimize.minimize(lambda x, c: np.sum((x - c[0]) ** 2), np.zeros(2), args=([a],))


def test_root_with_more_equations_than_unknowns_is_refused() -> None:
    a = fd.tensor(1.0, requires_grad=True)
    with pytest.raises(ValueError, match="3 values for 2 unknowns"):
        optimize.root(
            lambda x, a: np.concatenate([x - a, x[:1] - a]), np.zeros(2), args=(a,), method="lm"
        )


def test_a_robust_loss_is_not_implemented() -> None:
    a = fd.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(NotImplementedError, match="loss='soft_l1'"):
        optimize.least_squares(lambda w, a: w - a, np.zeros(2), args=(a,), loss="soft_l1")


def test_modifying_an_arg_in_place_after_the_solve_is_caught() -> None:
    a = fd.tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = a * 1.0
    res = optimize.root(lambda x, c: x**3 - c, np.ones(2), args=(c,))
    c += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        res.x.sum().backward()


def test_a_point_that_is_not_a_bounded_minimum_is_refused() -> None:
    from funcdiff.optimize._solvers import _active_bounds

    # x[1] is far from its bounds with a gradient of 0.5: not a minimum.
    with pytest.raises(RuntimeError, match=r"x\[1\].*held by no bound"):
        _active_bounds(
            np.array([0.0, 0.3]), np.array([1.0, 0.5]), 1.0, [(0.0, 1.0)] * 2, True, True
        )
    active, bound = _active_bounds(
        np.array([0.0, 0.3]), np.array([1.0, 0.5]), 1.0, [(0.0, 1.0)] * 2, True, False
    )
    assert active.tolist() == [True, False] and bound[0] == 0.0


def test_custom_root_refuses_a_solver_that_closes_over_a_tensor() -> None:
    b = fd.tensor(2.0, requires_grad=True)

    @optimize.custom_root(lambda x, a: x - a)
    def solver(x0, a):
        return a + 0.0 * b  # b reaches the result outside args

    with pytest.raises(RuntimeError, match="not passed in args"):
        solver(0.0, fd.tensor(1.0, requires_grad=True))
