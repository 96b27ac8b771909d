"""scipy.optimize adapters: exact derivatives against SciPy's own Rosenbrock derivatives."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.optimize as so
from scipy.sparse.linalg import LinearOperator

import funcdiff as fd
from funcdiff import optimize


def rosen(x):
    # The same formula as scipy.optimize.rosen, which itself calls np.asarray and so
    # cannot run on Tensors.
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


class Counted:
    """Counts calls of the wrapped NumPy function."""

    def __init__(self, f):
        self.f = f
        self.calls = 0

    def __call__(self, *a, **k):
        self.calls += 1
        return self.f(*a, **k)


class TestDerivatives:
    @pytest.mark.parametrize("seed", [0, 1, 2])
    def test_against_scipy_rosenbrock_derivatives(self, seed) -> None:
        rng = np.random.default_rng(seed)
        x = rng.uniform(-2, 2, 12)
        p = rng.standard_normal(12)
        d = optimize.derivatives(rosen)
        assert d.fun(x) == pytest.approx(so.rosen(x), rel=1e-15)
        np.testing.assert_allclose(d.jac(x), so.rosen_der(x), rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(d.hess(x), so.rosen_hess(x), rtol=1e-13, atol=1e-11)
        np.testing.assert_allclose(d.hessp(x, p), so.rosen_hess_prod(x, p), rtol=1e-12, atol=1e-11)

    def test_one_forward_pass_per_point(self) -> None:
        f = Counted(rosen)
        d = optimize.derivatives(f)
        x = np.array([0.5, 1.5, -0.2])
        d.fun(x)
        d.jac(x.copy())  # equal values, different array: still the same point
        d.hess(x)
        d.hessp(x, np.ones(3))
        d.fun_and_jac(x)
        assert f.calls == 1 and d.n_forward == 1
        d.jac(x + 1.0)
        assert f.calls == 2

    def test_return_types_are_plain_float64(self) -> None:
        d = optimize.derivatives(rosen)
        x = np.array([0.5, 1.5, -0.2], dtype=np.float32)
        assert type(d.fun(x)) is float
        for value in (d.jac(x), d.hess(x), d.hessp(x, np.ones(3))):
            assert type(value) is np.ndarray and value.dtype == np.float64

    def test_vector_function_jacobian(self) -> None:
        # Wide (m < n, reverse mode) and tall (m > n, forward-mode products) Jacobians.
        def wide(x):
            return np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0]]) @ np.sin(x)

        def tall(x):
            return np.exp(np.outer(np.arange(1.0, 6.0), x)).ravel()

        x = np.array([0.1, 0.2, 0.3, 0.4])
        J = optimize.derivatives(wide).jac(x)
        np.testing.assert_allclose(
            J, np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0]]) * np.cos(x), rtol=1e-14
        )
        x2 = np.array([0.1, -0.2])
        t = np.arange(1.0, 6.0)
        J2 = optimize.derivatives(tall).jac(x2)
        expected = np.zeros((10, 2))
        for i in range(5):
            for j in range(2):
                expected[2 * i + j, j] = t[i] * np.exp(t[i] * x2[j])
        np.testing.assert_allclose(J2, expected, rtol=1e-13)

    def test_extra_args(self) -> None:
        d = optimize.derivatives(lambda x, a, b: np.sum(a * x**2) + b)
        a = np.array([1.0, 3.0])
        assert d.fun(np.array([1.0, 2.0]), a, 5.0) == 18.0
        np.testing.assert_allclose(d.jac(np.array([1.0, 2.0]), a, 5.0), [2.0, 12.0])

    def test_errors(self) -> None:
        d = optimize.derivatives(lambda x: x**2)
        with pytest.raises(ValueError, match="scalar-valued"):
            d.hess(np.array([1.0, 2.0]))
        with pytest.raises(TypeError, match="one number or array"):
            optimize.derivatives(lambda x: (np.sum(x), x)).fun(np.ones(2))
        with pytest.raises(TypeError, match="callable"):
            optimize.derivatives(3.0)
        with pytest.raises(ValueError, match="p has 3 elements"):
            optimize.derivatives(rosen).hessp(np.ones(2), np.ones(3))

    def test_constant_function(self) -> None:
        d = optimize.derivatives(lambda x: 3.0)
        np.testing.assert_array_equal(d.jac(np.ones(2)), np.zeros(2))
        np.testing.assert_array_equal(d.hess(np.ones(2)), np.zeros((2, 2)))


class TestMinimize:
    x0 = np.full(100, 0.5)

    def test_trust_ncg_with_hessp_converges_n100(self) -> None:
        res = optimize.minimize(rosen, self.x0, method="trust-ncg", options={"gtol": 1e-10})
        assert res.success
        assert np.max(np.abs(res.x - 1.0)) < 1e-8
        assert res.nhev > 0  # funcdiff's hessp was used
        assert type(res.x) is np.ndarray and res.x.dtype == np.float64
        assert type(res.jac) is np.ndarray and res.jac.dtype == np.float64

    def test_exact_derivatives_beat_bfgs_with_finite_differences(self) -> None:
        bfgs_fd = so.minimize(rosen, self.x0, method="BFGS")  # jac by finite differences
        newton = optimize.minimize(rosen, self.x0, method="Newton-CG", options={"xtol": 1e-10})
        exact = optimize.minimize(rosen, self.x0, method="trust-exact")
        for res in (newton, exact):
            assert res.success
            assert np.max(np.abs(res.x - 1.0)) < 1e-6
            assert res.nfev < bfgs_fd.nfev / 50
        # With finite differences BFGS does not even get this close.
        assert np.max(np.abs(bfgs_fd.x - 1.0)) > 1e-6

    def test_bfgs_with_exact_gradient(self) -> None:
        res = optimize.minimize(rosen, self.x0[:10], method="BFGS", options={"gtol": 1e-9})
        assert res.success and np.max(np.abs(res.x - 1.0)) < 1e-7
        assert res.nfev == res.njev  # one function evaluation per gradient

    def test_lbfgsb_with_bounds(self) -> None:
        res = optimize.minimize(rosen, np.zeros(5), method="L-BFGS-B", bounds=[(-2.0, 0.8)] * 5)
        assert res.success
        assert np.all(res.x <= 0.8 + 1e-12)
        np.testing.assert_allclose(res.jac, so.rosen_der(res.x), rtol=1e-12, atol=1e-10)

    def test_derivative_free_methods_get_no_derivatives(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # SciPy warns if it receives an unused jac
            res = optimize.minimize(
                lambda x: np.sum((x - 2.0) ** 2), np.zeros(2), method="Nelder-Mead"
            )
        np.testing.assert_allclose(res.x, [2.0, 2.0], atol=1e-3)

    def test_user_supplied_jac_is_respected(self) -> None:
        res = optimize.minimize(rosen, np.zeros(4), method="BFGS", jac="2-point")
        exact = optimize.minimize(rosen, np.zeros(4), method="BFGS")
        assert res.nfev > exact.nfev  # the finite-difference gradient costs evaluations

    def test_dogleg_uses_dense_hessian(self) -> None:
        # Convex quadratic: dogleg needs a positive-definite dense Hessian.
        Q = np.array([[3.0, 1.0], [1.0, 2.0]])
        b = np.array([1.0, -1.0])
        res = optimize.minimize(lambda x: 0.5 * x @ Q @ x - b @ x, np.zeros(2), method="dogleg")
        np.testing.assert_allclose(res.x, np.linalg.solve(Q, b), rtol=1e-10)

    def test_trust_constr_with_constraint(self) -> None:
        # The closest point of the unit disc to (2, 2) is (1, 1)/sqrt(2).
        con = so.NonlinearConstraint(lambda x: x[0] ** 2 + x[1] ** 2, -np.inf, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # SciPy's BFGS on the constraint
            res = optimize.minimize(
                lambda x: np.sum((x - 2.0) ** 2),
                np.array([0.1, 0.1]),
                method="trust-constr",
                constraints=[con],
                options={"gtol": 1e-10},
            )
        assert res.nhev > 0  # the objective's exact hessp was used
        np.testing.assert_allclose(res.x, [np.sqrt(0.5)] * 2, atol=1e-8)


class TestLeastSquaresAndRoot:
    t = np.linspace(0.0, 2.0, 15)
    y = 3.0 * np.exp(-0.7 * t) + 0.5

    def residuals(self, p):
        return p[0] * np.exp(-p[1] * self.t) + p[2] - self.y

    def test_least_squares_exact_jacobian(self) -> None:
        res = optimize.least_squares(self.residuals, np.array([1.0, 1.0, 0.0]))
        np.testing.assert_allclose(res.x, [3.0, 0.7, 0.5], rtol=1e-9)
        p = res.x
        e = np.exp(-p[1] * self.t)
        expected = np.column_stack([e, -p[0] * self.t * e, np.ones_like(self.t)])
        np.testing.assert_allclose(res.jac, expected, rtol=1e-12, atol=1e-14)
        lm = optimize.least_squares(self.residuals, np.array([1.0, 1.0, 0.0]), method="lm")
        np.testing.assert_allclose(lm.x, [3.0, 0.7, 0.5], rtol=1e-9)

    def test_least_squares_with_linear_operator(self) -> None:
        res = optimize.least_squares(
            self.residuals,
            np.array([1.0, 1.0, 0.0]),
            tr_solver="lsmr",
            jac=lambda p: optimize.jacobian_operator(self.residuals, p),
        )
        np.testing.assert_allclose(res.x, [3.0, 0.7, 0.5], rtol=1e-7)

    def test_root_uses_exact_jacobian(self) -> None:
        def system(x):
            return np.stack([x[0] ** 2 + x[1] - 3.0, x[0] - x[1] ** 3 + 7.0])

        for method in ("hybr", "lm"):
            res = optimize.root(system, np.array([1.0, 1.0]), method=method)
            assert res.success
            np.testing.assert_allclose(system(res.x), 0.0, atol=1e-10)
        res = optimize.root(system, np.array([1.0, 1.0]))
        assert res.njev >= 1
        x = res.x
        np.testing.assert_allclose(res.fjac @ res.fjac.T, np.eye(2), atol=1e-12)
        J = np.array([[2 * x[0], 1.0], [1.0, -3 * x[1] ** 2]])
        np.testing.assert_allclose(optimize.derivatives(system).jac(x), J, rtol=1e-14)


class TestOperators:
    def test_jacobian_operator(self) -> None:
        M = np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]])

        def f(x):
            return M @ np.sin(x) * x[0]

        x = np.array([0.3, 0.6, -0.2])
        J = M * np.cos(x) * x[0]
        J[:, 0] += M @ np.sin(x)
        op = optimize.jacobian_operator(f, x)
        assert isinstance(op, LinearOperator) and op.shape == (2, 3)
        v = np.array([1.0, -2.0, 0.5])
        u = np.array([0.3, 2.0])
        np.testing.assert_allclose(op.matvec(v), J @ v, rtol=1e-14)
        np.testing.assert_allclose(op.rmatvec(u), J.T @ u, rtol=1e-14)
        np.testing.assert_allclose(op.matmat(np.eye(3)), J, rtol=1e-14)
        np.testing.assert_allclose(op.rmatmat(np.eye(2)), J.T, rtol=1e-14)

    def test_hessian_operator_against_scipy(self) -> None:
        rng = np.random.default_rng(1)
        x = rng.uniform(-1, 1, 8)
        op = optimize.hessian_operator(rosen, x)
        p = rng.standard_normal(8)
        np.testing.assert_allclose(op.matvec(p), so.rosen_hess_prod(x, p), rtol=1e-12)
        np.testing.assert_allclose(op.rmatvec(p), so.rosen_hess_prod(x, p), rtol=1e-12)
        np.testing.assert_allclose(op.matmat(np.eye(8)), so.rosen_hess(x), rtol=1e-12, atol=1e-12)
        with pytest.raises(ValueError, match="scalar-valued"):
            optimize.hessian_operator(lambda x: x, x)

    def test_hessian_operator_in_newton_cg(self) -> None:
        res = optimize.minimize(
            rosen,
            np.full(6, 0.5),
            method="Newton-CG",
            hess=lambda x: optimize.hessian_operator(rosen, x),
            options={"xtol": 1e-10},
        )
        assert res.success and np.max(np.abs(res.x - 1.0)) < 1e-6

    def test_custom_function_operator_is_not_batched(self) -> None:
        # A backward written for one cotangent must still give right matmat results.
        B = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])

        class Lin(fd.Function):
            @staticmethod
            def forward(ctx, x):
                return B @ (x.data if isinstance(x, fd.Tensor) else x)

            @staticmethod
            def backward(ctx, g):
                return fd.tensor(B.T) @ g

        op = optimize.jacobian_operator(Lin.apply, np.array([0.5, -1.0]))
        np.testing.assert_allclose(op.rmatmat(np.eye(3)), B.T)
        np.testing.assert_allclose(op.matmat(np.eye(2)), B)
