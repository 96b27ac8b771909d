"""``funcdiff.optimize.minimize`` with general constraints: derivatives through the KKT
conditions, against closed forms and central differences of SciPy's own solves."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import funcdiff as fd
from funcdiff import optimize
from funcdiff.functional import hessian, jacobian

A = np.array([1.0, 2.0, -1.0])
B = 0.5
P0 = np.array([0.3, -0.2, 0.7])
PROJECTOR = np.eye(3) - np.outer(A, A) / (A @ A)
TIGHT = {
    "SLSQP": {"tol": 1e-13, "options": {"maxiter": 500}},
    "trust-constr": {"options": {"gtol": 1e-12, "xtol": 1e-14, "maxiter": 3000}},
}


def _distance(x, p):
    return np.sum((x - p) ** 2)


def _plane_solution(p, b=B):
    return p - A * (A @ p - b) / (A @ A)


@pytest.mark.parametrize("method", ["SLSQP", "trust-constr"])
def test_projection_onto_a_plane_against_the_closed_form(method):
    """min ||x - p||^2 s.t. a.x = b: x* = p - a (a.p - b) / |a|^2."""

    def solve(p):
        cons = {"type": "eq", "fun": lambda x: A @ x - B}
        res = optimize.minimize(
            _distance, np.zeros(3), args=(p,), method=method, constraints=cons, **TIGHT[method]
        )
        return res

    res = solve(fd.tensor(P0, requires_grad=True))
    assert isinstance(res.x, fd.Tensor)
    np.testing.assert_allclose(res.x.data, _plane_solution(P0), atol=1e-6)
    np.testing.assert_allclose(jacobian(lambda p: solve(p).x, fd.tensor(P0)), PROJECTOR, atol=1e-9)
    # res.fun = (a.p - b)^2 / |a|^2, through the solution
    p = fd.tensor(P0, requires_grad=True)
    (g,) = fd.grad(solve(p).fun, p)
    np.testing.assert_allclose(g, 2 * A * (A @ P0 - B) / (A @ A), atol=1e-6)


def test_a_parameter_of_the_constraint_through_its_args():
    def solve(p, b):
        cons = {"type": "eq", "fun": lambda x, b: A @ x - b, "args": (b,)}
        return optimize.minimize(
            _distance, np.zeros(3), args=(p,), constraints=cons, **TIGHT["SLSQP"]
        ).x

    jp, jb = jacobian(solve, (fd.tensor(P0), fd.tensor(B)))
    np.testing.assert_allclose(jp, PROJECTOR, atol=1e-9)
    np.testing.assert_allclose(jb, A / (A @ A), atol=1e-9)


@pytest.mark.parametrize("method", ["SLSQP", "trust-constr"])
def test_active_and_inactive_inequalities(method):
    """a.x <= b (active when a.p > b) and a far-away x0 >= -10 (never active)."""

    def solve(p):
        cons = [
            {"type": "ineq", "fun": lambda x: B - A @ x},
            {"type": "ineq", "fun": lambda x: x[0] + 10.0},
        ]
        return optimize.minimize(
            _distance, np.zeros(3), args=(p,), method=method, constraints=cons, **TIGHT[method]
        ).x

    held = P0 + A  # a.p > b: on the plane
    np.testing.assert_allclose(jacobian(solve, fd.tensor(held)), PROJECTOR, atol=1e-7)
    free = P0 - A  # a.p < b: the unconstrained minimum x = p
    np.testing.assert_allclose(jacobian(solve, fd.tensor(free)), np.eye(3), atol=1e-7)


def _sphere(p, r, method, form):
    """min ||x - p||^2 s.t. ||x||^2 = r^2: x* = r p / |p|."""
    if form == "dict":
        cons = {"type": "eq", "fun": lambda x, r: np.sum(x**2) - r**2, "args": (r,)}
    else:
        cons = scipy.optimize.NonlinearConstraint(lambda x: np.sum(x**2), 1.5**2, 1.5**2)
    return optimize.minimize(
        _distance, np.ones(3), args=(p,), method=method, constraints=cons, **TIGHT[method]
    ).x


@pytest.mark.parametrize(
    "method, form", [("SLSQP", "dict"), ("trust-constr", "dict"), ("trust-constr", "object")]
)
def test_nonlinear_equality_against_the_closed_form(method, form):
    r = 1.5
    norm = np.linalg.norm(P0)
    J = jacobian(lambda p: _sphere(p, fd.tensor(r), method, form), fd.tensor(P0))
    expected = r / norm * (np.eye(3) - np.outer(P0, P0) / norm**2)
    np.testing.assert_allclose(J, expected, atol=1e-6)
    if form == "dict":
        jr = jacobian(lambda rr: _sphere(fd.tensor(P0), rr, method, form), fd.tensor(r))
        np.testing.assert_allclose(jr, P0 / norm, atol=1e-6)


def test_second_derivatives_against_the_closed_form():
    """A Hessian with respect to p of a loss of x*(p) = r p / |p| (nonlinear in p)."""
    r, w = 1.5, np.array([0.5, -1.0, 2.0])

    def loss(p):
        return np.sum(w * _sphere(p, r, "SLSQP", "dict") ** 3)

    def closed(p):
        return np.sum(w * (r * p / np.sqrt(np.sum(p**2))) ** 3)

    H = hessian(loss, fd.tensor(P0))
    np.testing.assert_allclose(H, hessian(closed, fd.tensor(P0)), atol=1e-5)


def test_bounds_and_linear_constraints_against_central_differences():
    """A problem without a closed form: an exp-weighted distance, a LinearConstraint on
    x0 + x1 and bounds; the derivative against central differences of the solves."""
    lin = scipy.optimize.LinearConstraint(np.array([[1.0, 1.0, 0.0]]), -np.inf, 0.2)
    bounds = [(None, None), (None, 0.1), (-1.0, 1.0)]

    def f(x, p):
        return np.sum(np.exp(0.3 * x) * (x - p) ** 2) + 0.1 * x[0] * x[2]

    def solve(p):
        return optimize.minimize(
            f,
            np.zeros(3),
            args=(p,),
            method="trust-constr",
            constraints=[lin],
            bounds=bounds,
            **TIGHT["trust-constr"],
        ).x

    def differences(p, h=1e-5):
        out = np.empty((3, 3))
        for j in range(3):
            e = np.zeros(3)
            e[j] = h
            out[:, j] = (np.asarray(solve(p + e)) - np.asarray(solve(p - e))) / (2 * h)
        return out

    # x0 + x1 <= 0.2 holds, x1 <= 0.1 does not: x0 and x1 move along the line
    p = np.array([0.6, 0.5, 0.3])
    x = np.asarray(solve(p))
    assert x[0] + x[1] == pytest.approx(0.2, abs=1e-7) and x[1] < 0.09
    J = np.asarray(jacobian(solve, fd.tensor(p)))
    np.testing.assert_allclose(J, differences(p), atol=1e-5)
    np.testing.assert_allclose(J[0] + J[1], 0.0, atol=1e-9)
    assert np.abs(J[:2, :2]).min() > 0.1
    # both hold: x0 and x1 are fixed, x2 still moves
    p = np.array([0.6, 2.0, 0.3])
    x = np.asarray(solve(p))
    # (trust-constr, an interior-point method, stops just inside the bound)
    assert x[0] == pytest.approx(0.1, abs=1e-5) and x[1] == pytest.approx(0.1, abs=1e-5)
    J = np.asarray(jacobian(solve, fd.tensor(p)))
    # (the differences of interior-point solves carry the barrier's noise, ~1e-5)
    np.testing.assert_allclose(J, differences(p), atol=5e-5)
    np.testing.assert_allclose(J[:2], 0.0, atol=1e-9)
    assert J[2, 2] > 0.5


def test_without_tensor_args_the_result_is_scipys():
    cons = {"type": "eq", "fun": lambda x: A @ x - B}
    res = optimize.minimize(_distance, np.zeros(3), args=(P0,), constraints=cons)
    assert type(res.x) is np.ndarray
    ref = scipy.optimize.minimize(_distance, np.zeros(3), args=(P0,), constraints=cons)
    np.testing.assert_allclose(res.x, ref.x, atol=1e-7)


def test_a_degenerate_inequality_is_refused():
    """The unconstrained minimum sits exactly on the constraint: multiplier zero."""
    cons = {"type": "ineq", "fun": lambda x: B - A @ x}
    p = fd.tensor(_plane_solution(P0), requires_grad=True)
    with pytest.raises(ValueError, match="multiplier is zero"):
        optimize.minimize(_distance, np.zeros(3), args=(p,), constraints=cons, tol=1e-13)


def test_dependent_constraints_are_singular_and_a_false_success_is_caught():
    cons = [
        {"type": "eq", "fun": lambda x: A @ x - B},
        {"type": "eq", "fun": lambda x: 2 * A @ x - 2 * B},
    ]
    p = fd.tensor(P0, requires_grad=True)
    res = optimize.minimize(
        _distance,
        np.zeros(3),
        args=(p,),
        constraints=cons,
        method="trust-constr",
        **TIGHT["trust-constr"],
    )
    np.testing.assert_allclose(res.x.data, _plane_solution(P0), atol=1e-6)
    with pytest.raises(np.linalg.LinAlgError, match="KKT matrix .* singular"):
        fd.grad(res.x.sum(), p)
    # SLSQP reports success at a point that is not a minimum on the plane
    with pytest.raises(RuntimeError, match="not a KKT point"):
        optimize.minimize(_distance, np.zeros(3), args=(p,), constraints=cons, method="SLSQP")


def test_bad_constraints_and_unconverged_results():
    p = fd.tensor(P0, requires_grad=True)
    with pytest.raises(TypeError, match=r"constraints\[0\]"):
        optimize.minimize(_distance, np.zeros(3), args=(p,), constraints=[lambda x: x])
    with pytest.raises(ValueError, match=r"constraints\[0\]\['type'\]"):
        optimize.minimize(
            _distance, np.zeros(3), args=(p,), constraints={"type": "le", "fun": lambda x: x}
        )
    cons = {"type": "eq", "fun": lambda x: A @ x - B}
    with pytest.raises(RuntimeError, match="did not converge"):
        optimize.minimize(
            _distance, np.zeros(3), args=(p,), constraints=cons, options={"maxiter": 1}
        )


def test_forward_mode_agrees_with_reverse_mode():
    def solve(p):
        return _sphere(p, 1.5, "SLSQP", "dict")

    v = np.array([0.2, -1.0, 0.5])
    _, jv = fd.functional.jvp(solve, fd.tensor(P0), fd.tensor(v))
    J = jacobian(solve, fd.tensor(P0))
    np.testing.assert_allclose(jv, np.asarray(J) @ v, atol=1e-12)
    Jf = jacobian(solve, fd.tensor(P0), strategy="forward-mode")
    np.testing.assert_allclose(Jf, J, atol=1e-12)
