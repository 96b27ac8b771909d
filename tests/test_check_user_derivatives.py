"""check_derivatives(jac=, hess=): hand-written derivatives; fast mode at scale; no warnings.

Truth comes from closed forms (Rosenbrock's gradient and Hessian from SciPy, exp, sin)
and from scipy.optimize.check_grad; wrong derivatives carry one planted mistake, so the
test knows which element must be named.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize as so

from funcdiff.check import check_derivatives


def with_wrong_element(grad, k, factor=1.01):
    def wrong(*args):
        g = np.array(grad(*args), dtype=float)
        g[k] *= factor
        return g

    return wrong


X7 = np.array([-1.2, 1.0, 0.3, -0.5, 0.8, 1.5, 0.1])


# ---------------------------------------------------------------------- jac=
class TestJac:
    def test_correct_gradient_passes_and_report_names_it(self) -> None:
        report = check_derivatives(so.rosen, X7, jac=so.rosen_der)
        (pair,) = report.pairs
        assert report.verdict == "pass" and pair.verdict == "pass"
        assert report.name == "rosen (jac: rosen_der)"
        assert any(n.startswith("jac: rosen_der") for n in report.notes)
        assert "Derivative check of rosen (jac: rosen_der): PASS" in str(report)
        # Central differences with step selection: the largest error is over a hundred
        # times below check_grad's (the norm of a forward-difference error).
        scipy_err = so.check_grad(so.rosen, so.rosen_der, X7)
        assert pair.max_abs_error < 1e-2 * scipy_err
        assert pair.worst.ad == so.rosen_der(X7)[pair.worst.input_index]

    @pytest.mark.parametrize("k", [0, 3, 6])
    def test_one_wrong_element_is_named(self, k: int) -> None:
        report = check_derivatives(so.rosen, X7, jac=with_wrong_element(so.rosen_der, k))
        (pair,) = report.pairs
        assert report.verdict == "fail" and pair.n_failed == 1
        assert pair.worst.input_index == (k,) and pair.worst.label == f"f, x[{k}]"
        true = so.rosen_der(X7)[k]
        assert pair.worst.fd == pytest.approx(true, rel=1e-7)
        assert pair.worst.ad == pytest.approx(1.01 * true, rel=1e-14)
        # scipy's check_grad sees the same mistake as the norm of the difference.
        assert so.check_grad(so.rosen, with_wrong_element(so.rosen_der, k), X7) > 0.5 * abs(
            0.01 * true
        )

    def test_wrong_shape_raises_naming_jac(self) -> None:
        with pytest.raises(ValueError, match=r"jac returned an array of shape \(6,\).*\(7,\)"):
            check_derivatives(so.rosen, X7, jac=lambda x: so.rosen_der(x)[:-1])

    def test_jacobian_of_vector_output_and_two_inputs(self) -> None:
        A = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
        x, y = np.array([0.3, -0.2, 0.9]), np.array(1.7)

        def f(x, y):
            return np.sin(A @ x) * y

        def jac(x, y):
            c = np.cos(A @ x)
            return (c[:, None] * A * y, np.sin(A @ x))

        assert check_derivatives(f, (x, y), jac=jac).verdict == "pass"

        def wrong(x, y):
            jx, jy = jac(x, y)
            jx = jx.copy()
            jx[1, 2] *= 1.01
            return jx, jy

        report = check_derivatives(f, (x, y), jac=wrong)
        dx, dy = report.pairs
        assert dx.verdict == "fail" and dy.verdict == "pass"
        assert dx.worst.output_index == (1,) and dx.worst.input_index == (2,)
        with pytest.raises(ValueError, match="jac returned an array of shape .*for df/dy"):
            check_derivatives(f, (x, y), jac=lambda x, y: (jac(x, y)[0], np.zeros(3)))
        with pytest.raises(ValueError, match="one entry per differentiated input"):
            check_derivatives(f, (x, y), jac=lambda x, y: jac(x, y)[0])

    def test_several_outputs(self) -> None:
        def f(x):
            return np.sum(x**2), np.exp(x)

        def jac(x):
            return 2 * x, np.diag(np.exp(x))

        x = np.array([0.1, 0.7, -0.4])
        report = check_derivatives(f, x, jac=jac)
        assert [p.verdict for p in report.pairs] == ["pass", "pass"]
        with pytest.raises(ValueError, match="one entry per output of func"):
            check_derivatives(f, x, jac=lambda x: 2 * x)

    def test_functions_funcdiff_cannot_trace(self) -> None:
        def with_floats(x):  # float() on every element: no Tensor survives
            return sum(math.sin(float(v)) * float(v) for v in x)

        def with_floats_grad(x):
            return np.array([math.cos(v) * v + math.sin(v) for v in x])

        x = np.array([0.2, 1.1, -0.7, 2.0])
        assert check_derivatives(with_floats, x, jac=with_floats_grad).verdict == "pass"
        # Without jac funcdiff traces it, and float() of a traced element refuses to
        # drop the derivative.
        with pytest.raises(RuntimeError, match=r"Can't call float\(\) on a Tensor"):
            check_derivatives(with_floats, x)

        def gaussian_integral(a):  # F(a) = int_0^1 exp(-a t^2) dt, by quadrature
            return scipy.integrate.quad(lambda t: np.exp(-a * t * t), 0.0, 1.0)[0]

        def gaussian_integral_grad(a):
            return scipy.integrate.quad(lambda t: -t * t * np.exp(-a * t * t), 0.0, 1.0)[0]

        report = check_derivatives(gaussian_integral, 0.8, jac=gaussian_integral_grad)
        assert report.verdict == "pass"
        wrong = check_derivatives(
            gaussian_integral, 0.8, jac=lambda a: 1.01 * gaussian_integral_grad(a)
        )
        assert wrong.verdict == "fail"

    @pytest.mark.parametrize("method", ["central", "richardson", "complex-step"])
    def test_methods_tolerances_and_top_k(self, method: str) -> None:
        f = lambda x: np.sum(np.exp(x) * np.sin(x))  # noqa: E731
        g = lambda x: np.exp(x) * (np.sin(x) + np.cos(x))  # noqa: E731
        x = np.linspace(-1.0, 1.0, 6)
        assert check_derivatives(f, x, jac=g, method=method).verdict == "pass"
        report = check_derivatives(
            f, x, jac=with_wrong_element(g, 4, 1.001), method=method, top_k=1
        )
        (pair,) = report.pairs
        assert pair.verdict == "fail" and pair.worst.input_index == (4,) and len(pair.top) == 1
        # A 0.1% error passes a 1% relative tolerance.
        loose = check_derivatives(
            f, x, jac=with_wrong_element(g, 4, 1.001), method=method, rtol=1e-2
        )
        assert loose.verdict == "pass"

    def test_order_2_with_jac_needs_hess(self) -> None:
        with pytest.raises(ValueError, match="needs hess="):
            check_derivatives(so.rosen, X7, jac=so.rosen_der, order=2)
        with pytest.raises(ValueError, match="pass order=2"):
            check_derivatives(so.rosen, X7, jac=so.rosen_der, hess=so.rosen_hess)


# ---------------------------------------------------------------------- hess=
class TestHess:
    def test_correct_hessian_passes(self) -> None:
        report = check_derivatives(so.rosen, X7, order=2, jac=so.rosen_der, hess=so.rosen_hess)
        assert report.verdict == "pass"
        assert [p.kind for p in report.pairs] == ["jacobian", "hessian"]
        assert report.name == "rosen (jac: rosen_der) (hess: rosen_hess)"
        assert any("finite differences of jac (rosen_der)" in n for n in report.notes)

    def test_wrong_symmetric_pair_is_caught(self) -> None:
        def wrong_hess(x):
            H = so.rosen_hess(x)
            H[1, 2] *= 1.01
            H[2, 1] *= 1.01  # symmetric, so only finite differences can see it
            return H

        report = check_derivatives(so.rosen, X7, order=2, jac=so.rosen_der, hess=wrong_hess)
        hpair = report.pairs[1]
        assert hpair.verdict == "fail" and hpair.n_failed == 2
        assert {hpair.top[0].output_index, hpair.top[1].output_index} == {(1,), (2,)}
        assert hpair.worst.fd == pytest.approx(
            so.rosen_hess(X7)[hpair.worst.output_index[0], hpair.worst.input_index[0]], rel=1e-6
        )
        symmetry = [c for c in report.checks if "symmetry" in c.name]
        assert symmetry[0].verdict == "pass"

    def test_asymmetric_hessian_fails_the_symmetry_check(self) -> None:
        def wrong_hess(x):
            H = so.rosen_hess(x)
            H[0, 1] += 5.0
            return H

        report = check_derivatives(so.rosen, X7, order=2, jac=so.rosen_der, hess=wrong_hess)
        assert report.pairs[1].worst.output_index == (0,)
        assert report.pairs[1].worst.input_index == (1,)
        (symmetry,) = [c for c in report.checks if "symmetry" in c.name]
        assert symmetry.verdict == "fail" and symmetry.abs_error == pytest.approx(5.0)

    def test_hess_without_jac_uses_funcdiff_gradient(self) -> None:
        def rosen(x):
            return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

        report = check_derivatives(rosen, X7, order=2, hess=so.rosen_hess)
        assert report.verdict == "pass"
        assert any("funcdiff's gradient" in n for n in report.notes)

    def test_two_inputs_tuple_of_tuples(self) -> None:
        def f(x, y):
            return np.sum(x**2) * y**3

        def jac(x, y):
            return 2 * x * y**3, np.sum(x**2) * 3 * y**2

        def hess(x, y):
            hxx = 2 * y**3 * np.eye(2)
            hxy = 6 * x * y**2
            return ((hxx, hxy), (hxy, np.sum(x**2) * 6 * y))

        inputs = (np.array([0.5, -1.0]), np.array(1.3))
        report = check_derivatives(f, inputs, order=2, jac=jac, hess=hess)
        assert report.verdict == "pass" and len(report.pairs) == 2 + 4
        with pytest.raises(
            ValueError, match=r"hess returned an array of shape \(2, 2\) for d2f/dx dy"
        ):
            check_derivatives(
                f,
                inputs,
                order=2,
                jac=jac,
                hess=lambda x, y: ((hess(x, y)[0][0],) * 2, hess(x, y)[1]),
            )

    def test_hess_needs_a_scalar_function(self) -> None:
        with pytest.raises(ValueError, match="one scalar"):
            check_derivatives(
                np.sin, X7, order=2, jac=lambda x: np.diag(np.cos(x)), hess=lambda x: x
            )


# ---------------------------------------------------------------------- fast mode at scale
def sin2(x):
    return np.sum(np.sin(x) ** 2)


def sin2_grad(x):
    return np.sin(2.0 * x)


@pytest.mark.parametrize("n", [10**3, 10**4, 10**5])
def test_fast_mode_evaluations_do_not_grow_with_n(n: int) -> None:
    x = np.linspace(-2.0, 2.0, n)
    report = check_derivatives(sin2, x, fast_mode=True)
    (pair,) = report.pairs
    assert report.verdict == "pass" and pair.fast_mode and pair.worst is None
    assert report.nfev <= 64, report.nfev  # 64,968 at n = 5000 before the rounding floor


@pytest.mark.parametrize("n", [10**4, 10**5])
def test_fast_mode_catches_one_wrong_element_at_scale(n: int) -> None:
    x = np.linspace(-2.0, 2.0, n)
    k = n // 3 + 7
    report = check_derivatives(sin2, x, fast_mode=True, jac=sin2_grad)
    assert report.verdict == "pass" and report.nfev <= 64
    wrong = with_wrong_element(sin2_grad, k, 1.01)
    fast = check_derivatives(sin2, x, fast_mode=True, jac=wrong)
    (pair,) = fast.pairs
    # The projection flags the block; the element-wise re-run of that block names k.
    assert fast.verdict == "fail" and pair.fast_mode and pair.n_failed == 1
    assert "fast mode flagged this block (mismatch" in pair.notes[0]
    assert pair.worst.input_index == (k,)
    assert pair.worst.fd == pytest.approx(sin2_grad(x)[k], rel=1e-6)


def test_rounding_floor_is_reported_and_below_the_planted_error() -> None:
    x = np.linspace(-2.0, 2.0, 10**5)
    report = check_derivatives(sin2, x, fast_mode=True)
    note = report.pairs[0].notes[0]
    assert "rounding floor" in note
    # 6 eps |f| / h with |f| = sum sin^2 and h = 2**-16 (|x| in [1, 2]).
    floor = 6 * np.finfo(float).eps * sin2(x) / 2.0**-16
    assert f"{floor:.2g}" in note
    assert floor < 1e-4  # far below a 1% error of an O(1) component


# ---------------------------------------------------------------------- warnings
def _inf_on_both_sides(x):
    with np.errstate(all="ignore"):
        return np.sum(np.where(np.abs(x - 1.0) > 1e-12, np.inf, 0.0) + x)


WARNING_CASES = [
    (lambda x: np.sum(np.log(x)), np.array([1e-6, 2e-6, 3.0])),
    (lambda x: np.sum(1.0 / x), np.array([1e-7, 2.0])),
    (lambda x: np.sum(np.abs(x)), np.array([0.0, 1.0])),
    (lambda x: np.sum(np.arccos(x)), np.array([1.0 - 1e-9, 0.2])),
    (_inf_on_both_sides, np.array([1.0, 1.0])),  # inf - inf in the quotients (was a leak)
    (lambda x: np.exp(x), np.array([709.0, 1.0])),  # overflow in fast mode's v^T J d (was a leak)
]


@pytest.mark.parametrize("case", range(len(WARNING_CASES)))
def test_no_runtime_warning_leaks_from_the_checker(case: int) -> None:
    func, x = WARNING_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for kwargs in (
            {},
            {"method": "richardson"},
            {"method": "complex-step"},
            {"order": 2},
            {"fast_mode": True},
        ):
            xs = np.tile(x, 5) if kwargs.get("fast_mode") else x
            report = check_derivatives(func, xs, **kwargs)
            assert report.verdict in ("pass", "inconclusive"), (kwargs, str(report))
            str(report)
            report.step_sweep()
