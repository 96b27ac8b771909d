"""funcdiff.integrate on stiff problems: Van der Pol (mu = 1000) and Robertson.

The adjoint runs on the forward solve's dense output (never integrating the state
backward), so it stays finite where a backsolve adjoint blows up; it must agree with
forward sensitivities to the tolerances, and both with central differences of SciPy
solves at tighter tolerances.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate as si

import funcdiff as fd
from funcdiff.integrate import solve_ivp


def van_der_pol(t, y, mu):
    return np.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


def robertson(t, y, k):
    y1, y2, y3 = y
    r1 = k[0] * y1
    r2 = k[1] * y2 * y2
    r3 = k[2] * y2 * y3
    return np.stack([r3 - r1, r1 - r2 - r3, r2])


def _gradients(fun, span, y0, params, t_eval, method, modes, **tol):
    out = {}
    for mode in modes:
        y = fd.tensor(y0, requires_grad=True)
        p = fd.tensor(params, requires_grad=True)
        res = solve_ivp(
            fun, span, y, method=method, t_eval=t_eval, args=(p,), sensitivity=mode, **tol
        )
        assert res.success
        grads = fd.grad(np.sum(res.y[0]) + np.sum(res.y**2), (y, p))
        out[mode] = np.concatenate([np.ravel(g.data) for g in grads])
    return out


def test_van_der_pol_mu_1000_radau_adjoint_is_finite_and_matches_forward() -> None:
    # Outputs on the slow branch, before the first relaxation jump.
    t_eval = np.linspace(100.0, 700.0, 7)
    grads = _gradients(
        lambda t, y, p: van_der_pol(t, y, p[0]),
        (0.0, 700.0),
        [2.0, 0.0],
        [1000.0],
        t_eval,
        "Radau",
        ("forward", "adjoint"),
        rtol=1e-8,
        atol=1e-10,
    )
    assert np.all(np.isfinite(grads["adjoint"]))
    np.testing.assert_allclose(grads["adjoint"], grads["forward"], rtol=1e-6)


@pytest.mark.slow
def test_van_der_pol_gradient_matches_central_differences_of_scipy() -> None:
    t_eval = np.linspace(100.0, 700.0, 7)

    def scipy_loss(x: np.ndarray) -> float:
        r = si.solve_ivp(
            van_der_pol,
            (0.0, 700.0),
            x[:2],
            "Radau",
            t_eval,
            args=(x[2],),
            rtol=1e-12,
            atol=1e-14,
        )
        return float(np.sum(r.y[0]) + np.sum(r.y**2))

    x0 = np.array([2.0, 0.0, 1000.0])
    reference = np.array(
        [
            (scipy_loss(x0 + e) - scipy_loss(x0 - e)) / (2 * e.max())
            for e in np.diag([1e-5, 1e-5, 1e-3])
        ]
    )
    grads = _gradients(
        lambda t, y, p: van_der_pol(t, y, p[0]),
        (0.0, 700.0),
        [2.0, 0.0],
        [1000.0],
        t_eval,
        "Radau",
        ("forward", "adjoint"),
        rtol=1e-10,
        atol=1e-12,
    )
    for mode in ("forward", "adjoint"):
        np.testing.assert_allclose(grads[mode], reference, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["BDF", "Radau", "LSODA"])
def test_robertson_forward_and_adjoint_agree_over_ten_decades(method) -> None:
    t_eval = np.logspace(-5, 5, 20)
    grads = _gradients(
        robertson,
        (0.0, 1e5),
        [1.0, 0.0, 0.0],
        [0.04, 3e7, 1e4],
        t_eval,
        method,
        ("forward", "adjoint"),
        rtol=1e-8,
        atol=1e-10,
    )
    # Rates that differ by ten orders of magnitude: componentwise relative errors.
    f, a = grads["forward"], grads["adjoint"]
    assert np.all(np.abs(a - f) <= 2e-5 * np.abs(f)), (f, a)
