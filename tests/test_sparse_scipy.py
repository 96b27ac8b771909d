"""Prepared sparse derivatives inside SciPy's solvers and funcdiff.optimize's sparse=."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from scipy.integrate import solve_ivp
from test_sparse_jacobian import brusselator, rosen

import funcdiff.sparse as fs
from funcdiff import optimize


def start(n):
    i = np.arange(n)
    return np.concatenate(
        [1.0 + 0.5 * np.sin(2 * np.pi * i / n), 3.0 + 0.1 * np.cos(2 * np.pi * i / n)]
    )


def test_solve_ivp_bdf_with_a_prepared_jacobian_agrees_with_finite_differences() -> None:
    y0 = start(100)
    J = fs.prepare_jacobian(brusselator, y0)
    exact = solve_ivp(
        lambda t, y: brusselator(y),
        (0, 2),
        y0,
        method="BDF",
        jac=lambda t, y: J(y),
        rtol=1e-8,
        atol=1e-10,
    )
    approx = solve_ivp(lambda t, y: brusselator(y), (0, 2), y0, method="BDF", rtol=1e-8, atol=1e-10)
    assert exact.success and approx.success
    np.testing.assert_allclose(exact.y[:, -1], approx.y[:, -1], rtol=1e-5, atol=1e-6)
    assert exact.njev < 50  # the Jacobian is reused across steps, as BDF does


def test_least_squares_with_the_sparse_jacobian_finds_the_steady_state() -> None:
    y0 = start(100)
    J = fs.prepare_jacobian(brusselator, y0)
    res = scipy.optimize.least_squares(
        brusselator, y0, jac=J, method="trf", ftol=1e-14, xtol=1e-14, gtol=1e-14
    )
    assert res.success and np.abs(brusselator(res.x)).max() < 1e-9
    # the homogeneous steady state u = 1, v = 3.4 solves it
    np.testing.assert_allclose(res.x, np.r_[np.ones(100), 3.4 * np.ones(100)], atol=1e-8)
    assert sp.issparse(res.jac)


def test_trust_constr_with_a_prepared_sparse_hessian() -> None:
    x0 = np.zeros(200)
    H = fs.prepare_hessian(rosen, x0)
    g = lambda x: optimize.derivatives(rosen).jac(x)  # noqa: E731
    res = scipy.optimize.minimize(
        rosen, x0, jac=g, hess=H, method="trust-constr", options={"maxiter": 3000, "gtol": 1e-10}
    )
    assert res.success
    np.testing.assert_allclose(res.x, 1.0, atol=1e-6)


@pytest.mark.parametrize("method", ["trf", "dogbox", "lm"])
def test_optimize_least_squares_sparse(method) -> None:
    y0 = start(60)
    # Tight tolerances: at SciPy's defaults trf and dogbox stop wherever the scaled gradient
    # is below 1e-8, which lets the sparse path (an lsmr trust-region solve) and the dense
    # path stop 1e-7 apart on some BLAS builds; converged, both agree to round-off.
    tol = {"ftol": 1e-14, "xtol": 1e-14, "gtol": 1e-14}
    dense = optimize.least_squares(brusselator, y0, method=method, **tol)
    sparse = optimize.least_squares(brusselator, y0, method=method, sparse=True, **tol)
    np.testing.assert_allclose(sparse.x, dense.x, atol=1e-11)
    assert sparse.success
    if method != "lm":
        assert sp.issparse(sparse.jac)


def test_optimize_least_squares_passes_kwargs_to_the_sparse_path() -> None:
    f = lambda x, scale=1.0: scale * (x**2 - 4.0)  # noqa: E731
    res = optimize.least_squares(f, np.ones(150), kwargs={"scale": 2.0}, sparse=True)
    np.testing.assert_allclose(res.x, 2.0, atol=1e-9)


def test_optimize_auto_goes_sparse_only_when_it_pays() -> None:
    res = optimize.least_squares(brusselator, start(60), sparse="auto")
    assert sp.issparse(res.jac)
    small = optimize.least_squares(lambda x: x - np.sum(x), np.ones(5), sparse="auto")
    assert isinstance(small.jac, np.ndarray)


@pytest.mark.parametrize("method", ["trust-constr", "newton-cg", "trust-exact", "dogleg"])
def test_optimize_minimize_sparse_hessian(method) -> None:
    # dogleg needs a positive definite Hessian all the way: start inside the valley
    x0 = np.full(30, 1.05 if method == "dogleg" else 0.5)
    options = {"xtol": 1e-12} if method == "newton-cg" else {"maxiter": 5000}
    sparse = optimize.minimize(rosen, x0, method=method, sparse=True, options=options)
    dense = optimize.minimize(rosen, x0, method=method, options=options)
    assert sparse.success
    np.testing.assert_allclose(sparse.x, 1.0, atol=1e-6)
    np.testing.assert_allclose(sparse.x, dense.x, atol=1e-8)


def test_optimize_root_sparse() -> None:
    f = lambda x: x**3 + np.roll(x, 1) - 2.0  # noqa: E731
    res = optimize.root(f, np.full(120, 1.2), sparse=True)
    np.testing.assert_allclose(res.x, 1.0, atol=1e-9)


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: optimize.minimize(rosen, np.zeros(3), method="BFGS", sparse=True),
            "takes a Hessian",
        ),
        (lambda: optimize.least_squares(brusselator, start(5), sparse="yes"), "sparse must be"),
    ],
)
def test_optimize_sparse_bad_input(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_optimize_refuses_complex_starting_points() -> None:
    with pytest.raises(TypeError, match="x0 must be real"):
        optimize.minimize(rosen, np.array([1j, 2.0]))
