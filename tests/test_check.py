"""Derivative verification: gradcheck, gradgradcheck and check_derivatives.

Every failing case is built from a hand-written (custom Function) derivative with a
known, deliberate mistake, so the test knows which element must be named; every
passing case is a correct function whose derivatives are known in closed form.
"""

from __future__ import annotations

import json
import math
import sys
import warnings

import numpy as np
import pytest

import funcdiff as fd
from funcdiff.check import (
    DerivativeReport,
    GradcheckError,
    check_derivatives,
    gradcheck,
    gradgradcheck,
)


def leaf(values, dtype=float) -> fd.Tensor:
    return fd.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


def _data(x):
    return x.data if isinstance(x, fd.Tensor) else np.asarray(x, dtype=float)


# ---------------------------------------------------------------------- custom Functions
def weighted_sine(c: np.ndarray, wrong: dict[int, float]):
    """f(x) = sum(c * sin(x)) with a hand-written gradient scaled by ``wrong`` at some k."""

    class WeightedSine(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = np.array(_data(x))
            return np.asarray(np.sum(c * np.sin(ctx.x)))

        @staticmethod
        def backward(ctx, g):
            gr = c * np.cos(ctx.x)
            for k, factor in wrong.items():
                gr[k] *= factor
            return g * fd.tensor(gr)

    return WeightedSine.apply


class CubeWrongSecond(fd.Function):
    """x**3 with a right first derivative (3x^2) whose own derivative is wrong (3x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x.detach()


A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]])


class MatVecTransposed(fd.Function):
    """y = A x whose backward returns A g instead of A^T g (a transposed Jacobian)."""

    @staticmethod
    def forward(ctx, x):
        return A @ _data(x)

    @staticmethod
    def backward(ctx, g):
        return fd.tensor(A) @ g


class AbsWrongSubgradient(fd.Function):
    """|x| whose derivative is 5 everywhere: outside [-1, 1] at the kink."""

    @staticmethod
    def forward(ctx, x):
        return np.abs(_data(x))

    @staticmethod
    def backward(ctx, g):
        return g * 5.0


# ====================================================================== check_derivatives
class TestCatchesWrongDerivatives:
    def test_one_percent_error_in_small_component_of_large_vector(self) -> None:
        n, k = 1500, 417
        rng = np.random.default_rng(3)
        c = rng.uniform(0.5, 2.0, n)
        c[k] = 2e-3  # the wrong component is small compared with the others
        x = rng.uniform(-1.0, 1.0, n)
        report = check_derivatives(weighted_sine(c, {k: 1.01}), x)
        (pair,) = report.pairs
        assert not report.ok and pair.verdict == "fail"
        assert pair.n_failed == 1 and pair.n_elements == n
        assert pair.worst.input_index == (k,) and pair.worst.output_index == ()
        assert pair.worst.label == f"f, x[{k}]"
        true = c[k] * math.cos(x[k])
        assert pair.worst.fd == pytest.approx(true, rel=1e-8)
        assert pair.worst.ad == pytest.approx(1.01 * true, rel=1e-12)
        assert pair.worst.rel_error == pytest.approx(0.01 / 1.01, rel=1e-5)
        assert pair.max_abs_index == ((), (k,))

    def test_one_percent_error_caught_in_fast_mode(self) -> None:
        n, k = 1500, 88
        rng = np.random.default_rng(4)
        c = rng.uniform(0.5, 2.0, n)
        x = rng.uniform(-1.0, 1.0, n)
        report = check_derivatives(weighted_sine(c, {k: 1.01}), x, fast_mode=True, seed=7)
        (pair,) = report.pairs
        assert pair.verdict == "fail" and pair.fast_mode
        assert pair.worst.input_index == (k,)
        assert "fast mode flagged this block" in pair.notes[0]

    def test_fast_mode_flags_small_component_too(self) -> None:
        # The wrong component is 1e3 times smaller than the others: a plain projection
        # with a relative tolerance cannot see it, the FD error estimate does.
        n, k = 800, 5
        rng = np.random.default_rng(5)
        c = rng.uniform(0.5, 2.0, n)
        c[k] = 1e-3
        x = rng.uniform(-1.0, 1.0, n)
        report = check_derivatives(weighted_sine(c, {k: 1.01}), x, fast_mode=True)
        assert report.pairs[0].verdict == "fail"
        assert report.pairs[0].worst.input_index == (k,)

    def test_fast_mode_on_correct_function_stays_projected(self) -> None:
        n = 2000
        rng = np.random.default_rng(6)
        c = rng.uniform(0.5, 2.0, n)
        x = rng.uniform(-1.0, 1.0, n)
        report = check_derivatives(lambda t: np.sum(c * np.sin(t)), x, fast_mode=True)
        (pair,) = report.pairs
        assert report.ok and pair.verdict == "pass" and pair.fast_mode
        assert pair.worst is None and "certified along 2 random directions" in pair.notes[0]
        # Two steps along each of two directions (6 + 2 and 8 points), not 4 * n.
        assert report.nfev <= 20

    def test_wrong_second_derivative(self) -> None:
        x0 = np.array([0.7, -1.3, 2.1])
        report = check_derivatives(lambda x: np.sum(CubeWrongSecond.apply(x)), x0, order=2)
        first, second = report.pairs
        assert first.kind == "jacobian" and first.verdict == "pass"
        assert second.kind == "hessian" and second.verdict == "fail"
        # H is diagonal 6x; the hand-written one gives 3x, so the largest |x| is worst.
        assert second.n_failed == 3 and second.n_elements == 9
        assert second.worst.output_index == (2,) and second.worst.input_index == (2,)
        assert second.worst.fd == pytest.approx(6 * 2.1, rel=1e-8)
        assert second.worst.ad == pytest.approx(3 * 2.1, rel=1e-12)
        with pytest.raises(GradcheckError, match=r"^Hessian mismatch for output 0"):
            report.raise_if_failed()

    def test_transposed_jacobian(self) -> None:
        x0 = np.array([0.1, 0.2, 0.3])
        report = check_derivatives(MatVecTransposed.apply, x0)
        (pair,) = report.pairs
        assert pair.verdict == "fail"
        off_diagonal = int(np.sum(A != A.T))
        assert pair.n_failed == off_diagonal
        out_i, in_j = pair.worst.output_index, pair.worst.input_index
        # The worst element is where A and A^T differ most; FD gives A, AD gives A^T.
        diff = np.abs(A - A.T)
        assert diff[out_i + in_j] == diff.max()
        assert pair.worst.fd == pytest.approx(A[out_i + in_j], rel=1e-9)
        assert pair.worst.ad == pytest.approx(A.T[out_i + in_j], rel=1e-12)
        with pytest.raises(GradcheckError, match=r"^Jacobian mismatch for output 0 with respect"):
            report.raise_if_failed()

    def test_non_linear_backward_fails_dot_product_test(self) -> None:
        # The rows of the Jacobian (cotangents e_k) are right, but a backward that is not
        # linear in g breaks <u, J v> = <J^T u, v>: only the adjoint test sees it.
        class NonLinear(fd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.x = np.array(_data(x))
                return np.asarray(2.0 * ctx.x)

            @staticmethod
            def backward(ctx, g):
                return 2.0 * g * np.abs(g)

        report = check_derivatives(NonLinear.apply, np.array([0.5, 1.5]), order=2)
        assert all(p.verdict == "pass" for p in report.pairs if p.kind == "jacobian")
        dot = next(c for c in report.checks if c.name.startswith("dot product"))
        assert dot.verdict == "fail" and not report.ok


# Correct functions at inputs near 1e-6 and near 1e6.
BADLY_SCALED = [
    (lambda x: np.sum(np.log(x)), 1e-6),
    (lambda x: np.sum(1.0 / x), 1e-6),
    (lambda x: np.sum(np.exp(x)), 1e-6),
    (lambda x: np.sum(np.cos(x)), 1e-6),
    (lambda x: np.sqrt(x), 1e-6),
    (lambda x: np.sum(x**2), 1e6),
    (lambda x: np.sum(np.sin(x)), 1e6),
    (lambda x: np.sum(np.exp(x * 1e-6)), 1e6),
    (lambda x: np.tanh(x * 1e-6), 1e6),
    (lambda x: np.sum(np.logaddexp(0.0, x * 1e-6)), 1e6),
]


class TestNeverFailsCorrectFunctions:
    @pytest.mark.parametrize("func, scale", BADLY_SCALED)
    def test_badly_scaled_inputs(self, func, scale) -> None:
        x = np.random.default_rng(8).uniform(1.0, 3.0, 5) * scale
        for order in (1, 2):
            report = check_derivatives(func, x, order=order)
            assert report.ok, str(report)
            assert report.verdict == "pass", str(report)

    def test_mixed_scales_in_one_vector(self) -> None:
        x = np.array([1e6, 1e-6, 3e3, 2e-4])
        report = check_derivatives(lambda x: x**2 * np.log(x) + 1.0 / x, x, order=2)
        assert report.verdict == "pass", str(report)

    def test_sum_of_huge_and_tiny_terms_is_not_a_failure(self) -> None:
        # f is ~1e13, so finite differences cannot resolve d/dx[1] = 1 to 1e-5: the
        # honest answer is "inconclusive", never "fail".
        x = np.array([1e6, 1.0])
        report = check_derivatives(lambda x: np.sum(x**2 * np.log(x)), x)
        assert report.ok
        assert report.pairs[0].verdict in ("pass", "inconclusive")

    def test_float32_inputs_use_float32_steps_and_tolerances(self) -> None:
        x = np.array([0.5, 1.5, -2.0], dtype=np.float32)
        report = check_derivatives(lambda x: np.sum(np.sin(x) * x**2), x, order=2)
        assert report.verdict == "pass", str(report)
        assert report.dtype == np.float32 and report.rtol == 2e-3
        # The step follows float32's eps**(1/3), not float64's.
        step = report.pairs[0].worst.step
        assert 1e-3 < step < 2e-2
        d1 = 2 * x * np.sin(x) + x**2 * np.cos(x)
        np.testing.assert_allclose(report.pairs[0]._ad[()], d1.astype(float), rtol=1e-6)


class TestKinks:
    def test_abs_at_zero_is_inconclusive(self) -> None:
        report = check_derivatives(np.abs, 0.0)
        (pair,) = report.pairs
        assert pair.verdict == "inconclusive" and report.verdict == "inconclusive"
        assert report.ok  # inconclusive is not a failure
        assert "kink" in pair.worst.note
        assert pair.worst.ad == 0.0  # funcdiff's convention abs'(0) = 0

    def test_only_the_kink_element_is_inconclusive(self) -> None:
        report = check_derivatives(lambda x: np.maximum(x, 0.0), np.array([0.0, 1.5, -2.0]))
        (pair,) = report.pairs
        assert pair.verdict == "inconclusive" and pair.n_inconclusive == 1
        assert pair.worst.output_index == (0,) and pair.worst.input_index == (0,)

    def test_derivative_outside_the_one_sided_interval_fails(self) -> None:
        report = check_derivatives(AbsWrongSubgradient.apply, 0.0)
        assert report.pairs[0].verdict == "fail"
        assert "outside" in report.pairs[0].worst.note


# ---------------------------------------------------------------------- fast mode
# The chain of springs of notebooks/03_verifying_derivatives.ipynb: 500 nodes in the
# plane, rest length 1, a small gravity term; x holds the nodes' (x, y) coordinates.
REST, GRAVITY = 1.0, 0.05


def spring_energy(x):
    p = x.reshape(-1, 2)
    d = p[1:] - p[:-1]
    length = np.sqrt(np.sum(d**2, axis=1))
    return 0.5 * np.sum((length - REST) ** 2) + GRAVITY * np.sum(p[:, 1])


def spring_energy_grad(x, last_y_factor=1.0):
    """The closed-form gradient; ``last_y_factor`` plants a bug in d/dy of the last node."""
    p = x.reshape(-1, 2)
    d = p[1:] - p[:-1]
    length = np.sqrt(np.sum(d**2, axis=1))
    t = ((length - REST) / length)[:, None] * d
    g = np.zeros_like(p)
    g[1:] += t
    g[:-1] -= t
    g[:, 1] += GRAVITY
    g[-1, 1] *= last_y_factor
    return g.ravel()


def spring_chain() -> np.ndarray:
    rng = np.random.default_rng(0)
    nodes = np.stack([1.1 * np.arange(500.0), np.zeros(500)], axis=1)
    return (nodes + 0.1 * rng.normal(size=nodes.shape)).ravel()


def hand_written(f, grad_f):
    """``f`` differentiated with the hand-written ``grad_f`` (both on ndarrays)."""

    class HandWritten(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = np.array(_data(x))
            return fd.tensor(f(ctx.x))

        @staticmethod
        def backward(ctx, g):
            return g * fd.tensor(grad_f(ctx.x))

    return HandWritten.apply


def tanh_layer(A: np.ndarray, wrong: dict[tuple[int, int], float]):
    """y = tanh(A x) with a hand-written Jacobian scaled by ``wrong`` at some (i, k)."""

    class TanhLayer(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = np.array(_data(x))
            return np.tanh(A @ ctx.x)

        @staticmethod
        def backward(ctx, g):
            jac = (1.0 - np.tanh(A @ ctx.x) ** 2)[:, None] * A
            for ik, factor in wrong.items():
                jac[ik] *= factor
            return g @ fd.tensor(jac)

    return TanhLayer.apply


class TestFastMode:
    """fast_mode passes a block on its projections only with a certificate."""

    @pytest.mark.parametrize("seed", range(5))
    def test_spring_chain_one_percent_error_is_caught(self, seed: int) -> None:
        # Regression: the wrong component (d/dy of the last node, 0.035) moved a
        # projection along an |x|-scaled direction by 8e-6, under the 1e-3 error of its
        # central difference, and the block was certified against rtol * sum|v_k J_k d_k|:
        # fast mode passed this gradient for seeds 0-4.
        x = spring_chain()
        f = hand_written(spring_energy, lambda t: spring_energy_grad(t, 1.01))
        report = check_derivatives(f, x, fast_mode=True, seed=seed)
        (pair,) = report.pairs
        assert report.verdict == "fail" and pair.fast_mode
        assert pair.notes[0].startswith("fast mode flagged this block (mismatch")
        assert pair.n_failed == 1 and pair.worst.input_index == (999,)
        true = spring_energy_grad(x)[999]
        assert pair.worst.fd == pytest.approx(true, rel=1e-7)
        assert pair.worst.ad == pytest.approx(1.01 * true, rel=1e-12)

    @pytest.mark.parametrize("seed", range(5))
    def test_spring_chain_correct_gradient_is_certified(self, seed: int) -> None:
        x = spring_chain()
        report = check_derivatives(
            hand_written(spring_energy, spring_energy_grad), x, fast_mode=True, seed=seed
        )
        (pair,) = report.pairs
        assert report.verdict == "pass" and pair.fast_mode and pair.worst is None
        assert "certified along 2 random directions" in pair.notes[0]
        assert report.nfev < 100  # the element-wise check takes more than 4000

    def test_spring_chain_in_gradcheck_fast_mode(self) -> None:
        x = leaf(spring_chain())
        wrong = hand_written(spring_energy, lambda t: spring_energy_grad(t, 1.01))
        right = hand_written(spring_energy, spring_energy_grad)
        assert gradcheck(right, (x,))  # element by element: the closed form is right
        for seed in range(5):
            with pytest.raises(GradcheckError) as info:
                gradcheck(wrong, (x,), fast_mode=True, seed=seed)
            assert "input index (999,)" in str(info.value) and "fast mode" in str(info.value)
            assert gradcheck(right, (x,), fast_mode=True, seed=seed)

    @pytest.mark.parametrize(
        "n, k, small, factor",
        [(1000, 17, 1e-5, 1.01), (300, 250, 1e-3, 1.0002), (2000, 1999, 1.0, 1.0001)],
    )
    def test_error_just_over_tolerance_fails_as_element_wise(self, n, k, small, factor) -> None:
        # Errors of a few times the element tolerance (atol = sqrt(eps) max|g| for the
        # first, rtol = 1e-5 for the others): fast mode must agree with the full check.
        rng = np.random.default_rng(n)
        c = rng.uniform(0.5, 2.0, n)
        c[k] = small
        x = rng.uniform(-1.0, 1.0, n)
        f = weighted_sine(c, {k: factor})
        full = check_derivatives(f, x)
        fast = check_derivatives(f, x, fast_mode=True)
        assert full.verdict == fast.verdict == "fail"
        assert full.pairs[0].worst.input_index == fast.pairs[0].worst.input_index == (k,)

    @pytest.mark.parametrize("func, scale", BADLY_SCALED)
    def test_badly_scaled_inputs(self, func, scale) -> None:
        x = np.random.default_rng(8).uniform(1.0, 3.0, 200) * scale
        for order in (1, 2):
            report = check_derivatives(func, x, order=order, fast_mode=True)
            assert report.verdict == "pass", str(report)

    def test_mixed_scales_in_one_vector(self) -> None:
        x = np.tile([1e6, 1e-6, 3e3, 2e-4], 5)
        report = check_derivatives(lambda x: x**2 * np.log(x) + 1.0 / x, x, order=2, fast_mode=True)
        assert report.verdict == "pass", str(report)

    @pytest.mark.parametrize("scale", [1e-6, 1e6])
    def test_one_percent_error_caught_on_badly_scaled_input(self, scale: float) -> None:
        x = np.random.default_rng(9).uniform(1.0, 3.0, 300) * scale

        def wrong(t):
            g = 1.0 / t
            g[123] *= 1.01
            return g

        log_sum = lambda t: np.sum(np.log(t))  # noqa: E731
        report = check_derivatives(hand_written(log_sum, wrong), x, fast_mode=True)
        assert report.verdict == "fail" and report.pairs[0].worst.input_index == (123,)
        right = check_derivatives(hand_written(log_sum, lambda t: 1.0 / t), x, fast_mode=True)
        assert right.verdict == "pass" and right.pairs[0].worst is None

    def test_wrong_element_of_a_jacobian(self) -> None:
        rng = np.random.default_rng(10)
        m, n, i, k = 40, 100, 7, 61
        A = rng.normal(size=(m, n))
        A[i, k] = 1e-3  # a small element of the Jacobian
        x = rng.normal(size=n) / np.sqrt(n)
        report = check_derivatives(tanh_layer(A, {(i, k): 1.01}), x, fast_mode=True)
        (pair,) = report.pairs
        assert pair.verdict == "fail" and pair.fast_mode and pair.n_failed == 1
        assert pair.worst.output_index == (i,) and pair.worst.input_index == (k,)
        right = check_derivatives(tanh_layer(A, {}), x, fast_mode=True)
        assert right.verdict == "pass" and right.pairs[0].worst is None

    def test_gradcheck_error_just_over_torch_tolerance(self) -> None:
        # J[24, 25] ~ 1e-3 is 3% off: 2.7 times torch's atol + rtol*|J|. The projection
        # weights of seed 0 (Gaussian u, v before) once hid it under the FD error.
        rng = np.random.default_rng(12)
        m, n = 40, 100
        i, k = int(rng.integers(m)), int(rng.integers(n))
        A = rng.normal(size=(m, n))
        A[i, k] = 1e-3
        x = leaf(rng.normal(size=n) / np.sqrt(n))
        with pytest.raises(GradcheckError) as info:
            gradcheck(tanh_layer(A, {(i, k): 1.03}), (x,), fast_mode=True)
        assert f"output index ({i},), input index ({k},)" in str(info.value)
        with pytest.raises(GradcheckError):
            gradcheck(tanh_layer(A, {(i, k): 1.03}), (x,))  # the slow mode agrees
        assert gradcheck(tanh_layer(A, {}), (x,), fast_mode=True)

    def test_kink_is_inconclusive(self) -> None:
        x = np.random.default_rng(1).uniform(-1.0, 1.0, 500)
        x[17] = 0.0
        report = check_derivatives(lambda t: np.sum(np.abs(t)), x, fast_mode=True)
        (pair,) = report.pairs
        assert report.verdict == "inconclusive" and report.ok
        assert pair.n_inconclusive == 1 and pair.worst.input_index == (17,)
        assert "kink" in pair.notes[0] and "kink" in pair.worst.note
        x[17] = 0.3
        smooth = check_derivatives(lambda t: np.sum(np.abs(t)), x, fast_mode=True)
        assert smooth.verdict == "pass" and smooth.pairs[0].worst is None


# Squire & Trapp's test function; f'(1.5) = 4.05342789389862 (their closed form).
def squire_trapp(x):
    return np.exp(x) / np.sqrt(np.sin(x) ** 3 + np.cos(x) ** 3)


SQUIRE_TRAPP_DERIVATIVE = 4.05342789389862


class TestMethods:
    def test_ad_matches_the_closed_form(self) -> None:
        x = leaf(1.5)
        (g,) = fd.grad(squire_trapp(x), x)
        assert g.item() == pytest.approx(SQUIRE_TRAPP_DERIVATIVE, rel=1e-13)

    def test_richardson_and_complex_step_are_more_accurate_than_central(self) -> None:
        errors = {}
        for method in ("central", "richardson", "complex-step"):
            report = check_derivatives(squire_trapp, 1.5, method=method)
            assert report.verdict == "pass"
            errors[method] = abs(report.pairs[0].worst.fd - SQUIRE_TRAPP_DERIVATIVE)
        assert errors["central"] < 1e-8
        assert errors["richardson"] < errors["central"] / 10
        assert errors["complex-step"] < 1e-13

    def test_complex_step_falls_back_to_central_where_not_analytic(self) -> None:
        # |x| on complex input is the modulus: the complex step gives 0, which is wrong.
        x = np.array([1.0, -1.0, 0.5])
        report = check_derivatives(lambda x: np.sum(np.abs(x) * x), x, method="complex-step")
        (pair,) = report.pairs
        assert pair.verdict == "pass"
        assert any("complex step disagreed" in n for n in pair.notes)
        assert pair.worst.fd == pytest.approx(2 * abs(x[pair.worst.input_index]), rel=1e-8)

    def test_complex_step_needs_complex_support(self) -> None:
        with pytest.raises(ValueError, match="complex ndarrays"):
            check_derivatives(
                lambda x: np.sum(np.floor(x) + x), np.array([0.3]), method="complex-step"
            )

    def test_complex_step_on_second_order_uses_central_for_hessian(self) -> None:
        report = check_derivatives(squire_trapp, 1.5, method="complex-step", order=2)
        assert report.verdict == "pass"
        assert any("Hessian blocks use central" in n for n in report.notes)


class TestReport:
    @staticmethod
    def two(a, b):
        return a * b, np.sum(np.exp(a) * b**2)

    def make(self, **kw) -> DerivativeReport:
        a = np.array([0.1, 0.2])
        b = np.array([[1.0, 2.0], [3.0, 4.0]])
        return check_derivatives(self.two, (a, b), **kw)

    def test_pairs_shapes_and_labels(self) -> None:
        report = self.make(order=2)
        labels = [p.label for p in report.pairs]
        assert labels[:4] == ["df0/da", "df0/db", "df1/da", "df1/db"]
        assert "d2f1/db da" in labels and len(labels) == 4 + 8
        pair = report.pairs[1]
        assert pair.output_shape == (2, 2) and pair.input_shape == (2, 2)
        assert pair.n_elements == 16
        # d(a*b)[i,j]/db[k,l] = a[j] delta_ik delta_jl: the AD block is exact.
        expected = np.einsum("ik,jl,j->ijkl", np.eye(2), np.eye(2), np.array([0.1, 0.2]))
        np.testing.assert_array_equal(pair._ad, expected)
        assert report.ok and report.verdict == "pass"

    def test_to_dict_is_json_and_matches_the_report(self) -> None:
        report = check_derivatives(MatVecTransposed.apply, np.array([0.1, 0.2, 0.3]), order=2)
        d = json.loads(json.dumps(report.to_dict(), allow_nan=False))
        assert d["ok"] is False and d["verdict"] == "fail" and d["order"] == 2
        p = d["pairs"][0]
        assert p["verdict"] == "fail" and p["n_failed"] == report.pairs[0].n_failed
        worst = report.pairs[0].worst
        assert p["worst"]["input_index"] == list(worst.input_index)
        assert p["worst"]["ad"] == worst.ad and p["worst"]["fd"] == worst.fd
        assert p["max_abs_index"] == {
            "output": list(report.pairs[0].max_abs_index[0]),
            "input": list(report.pairs[0].max_abs_index[1]),
        }
        assert {c["name"] for c in d["checks"]} >= {"dot product <u, J v> = <J^T u, v>"}

    def test_str_is_a_table_naming_the_worst_element(self) -> None:
        n, k = 50, 17
        c = np.linspace(1.0, 2.0, n)
        report = check_derivatives(weighted_sine(c, {k: 1.5}), np.linspace(-1, 1, n))
        text = str(report)
        assert text.startswith("Derivative check of WeightedSine")
        assert "FAIL" in text and f"f, x[{k}]" in text
        assert "1/50" in text  # one element out of tolerance
        assert "pair" in text and "worst element" in text and "FD err est" in text
        assert len(text.splitlines()) < 40  # compact: no full matrices

    def test_raise_if_failed_returns_self_when_ok(self) -> None:
        report = self.make()
        assert report.raise_if_failed() is report

    def test_bad_arguments(self) -> None:
        with pytest.raises(ValueError, match="order"):
            check_derivatives(np.sin, 1.0, order=3)
        with pytest.raises(ValueError, match="method"):
            check_derivatives(np.sin, 1.0, method="five-point")
        with pytest.raises(TypeError, match="callable"):
            check_derivatives("sin", 1.0)
        with pytest.raises(ValueError, match="no input to differentiate"):
            check_derivatives(lambda s: 1.0, ("text",))
        with pytest.raises(TypeError, match="no floating-point output"):
            check_derivatives(lambda x: "nope", 1.0)
        with pytest.raises(ValueError, match="argnums"):
            check_derivatives(np.sin, (1.0,), argnums=3)

    def test_argnums_and_constant_arguments(self) -> None:
        def f(x, n, label):
            assert label == "keep"
            return x**n

        report = check_derivatives(f, (np.array([1.5, 2.0]), 3, "keep"), argnums=0)
        assert [p.label for p in report.pairs] == ["df/dx"]
        np.testing.assert_allclose(np.diagonal(report.pairs[0]._ad), 3 * np.array([1.5, 2.0]) ** 2)

    def test_forward_values_must_agree_between_tensors_and_numpy(self) -> None:
        # A dispatch bug shows as different forward values on Tensors and on ndarrays.
        def two_faced(x):
            return x * (2.0 if isinstance(x, fd.Tensor) else 2.5)

        report = check_derivatives(two_faced, np.array([1.0, 2.0]))
        primal = report.checks[0]
        assert primal.name.startswith("forward values") and primal.verdict == "fail"
        assert primal.abs_error == pytest.approx(1.0)
        assert not report.ok

    def test_integer_input_is_promoted(self) -> None:
        report = check_derivatives(lambda x: x**3, np.array([1, 2]))
        assert report.verdict == "pass"
        np.testing.assert_allclose(np.diagonal(report.pairs[0]._ad), [3.0, 12.0])


class TestStepSweep:
    def test_v_shape(self) -> None:
        report = check_derivatives(squire_trapp, 1.5)
        sweep = report.step_sweep()
        assert sweep.ad == pytest.approx(SQUIRE_TRAPP_DERIVATIVE, rel=1e-13)
        fwd, cen, cs = (sweep.errors[m] for m in ("forward", "central", "complex-step"))
        # Forward differences are best near sqrt(eps), central near eps**(1/3).
        assert 1e-9 < sweep.best_step["forward"] < 1e-6 and sweep.best_error["forward"] < 1e-7
        assert 1e-7 < sweep.best_step["central"] < 1e-3 and sweep.best_error["central"] < 1e-9
        assert sweep.best_error["complex-step"] < 1e-14
        # Both ends of the V are far worse than its bottom.
        i_small = int(np.argmin(np.abs(np.log10(sweep.steps / 1.5) + 14)))
        i_large = int(np.argmin(np.abs(np.log10(sweep.steps / 1.5) + 1)))
        for e in (fwd, cen):
            assert e[i_small] > 1e3 * np.nanmin(e) and e[i_large] > 1e3 * np.nanmin(e)
        # The complex step has the truncation branch but no rounding branch: no V.
        assert np.nanmax(cs[sweep.steps < 1e-7]) < 1e-13
        assert cs[i_large] > 1e3 * cs[i_small]
        assert sweep.check_step == pytest.approx(report.pairs[0].worst.step)
        json.dumps(sweep.to_dict(), allow_nan=False)
        assert "best central" in str(sweep)

    def test_plot_writes_a_png(self, tmp_path) -> None:
        report = check_derivatives(squire_trapp, 1.5)
        path = tmp_path / "sweep.png"
        assert report.plot_step_sweep(path) == path
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1024

    def test_plot_without_matplotlib_says_how_to_install(self, monkeypatch, tmp_path) -> None:
        report = check_derivatives(squire_trapp, 1.5)
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        with pytest.raises(ImportError, match=r"pip install funcdiff\[plot\]"):
            report.plot_step_sweep(tmp_path / "x.png")

    def test_sweep_of_a_chosen_element_and_bad_element(self) -> None:
        report = check_derivatives(lambda x: x[0] * x[1] ** 3, np.array([2.0, 0.5]))
        sweep = report.step_sweep(0, ((), (1,)), methods=("central",))
        assert sweep.ad == pytest.approx(3 * 2.0 * 0.25)
        assert list(sweep.errors) == ["central"]
        with pytest.raises(ValueError, match="outside the block"):
            report.step_sweep(0, ((), (5,)))
        with pytest.raises(ValueError, match="methods"):
            report.step_sweep(methods=("backward",))


# ====================================================================== gradcheck
class TestGradcheck:
    def test_passes_on_correct_functions(self) -> None:
        x, y = leaf([0.3, -1.2, 2.0]), leaf([[0.5, 1.5], [2.5, -0.5]])
        c = np.array([1.0, 2.0, 3.0])  # a constant input (not a Tensor)
        assert gradcheck(lambda a, b, k: (np.sin(a) * k, b @ b, np.sum(a) * b), (x, y, c))
        assert gradcheck(lambda a: a**3, x, fast_mode=True)

    def test_failure_message_names_the_worst_element(self) -> None:
        c = np.linspace(1.0, 2.0, 30)
        x = leaf(np.linspace(-1, 1, 30))
        with pytest.raises(GradcheckError) as info:
            gradcheck(weighted_sine(c, {11: 1.5}), (x,))
        msg = str(info.value)
        assert isinstance(info.value, RuntimeError)
        assert msg.startswith("Jacobian mismatch for output 0 with respect to input 0,")
        assert "1 of 30 elements differ" in msg and "input index (11,)" in msg
        assert "analytical" in msg and "numerical" in msg
        assert len(msg.splitlines()) < 10  # a table of the worst elements, not matrices

    def test_raise_exception_false_returns_false(self) -> None:
        x = leaf([0.1, 0.2, 0.3])
        assert gradcheck(MatVecTransposed.apply, (x,), raise_exception=False) is False

    def test_input_index_counts_all_inputs(self) -> None:
        c = np.linspace(1.0, 2.0, 4)
        x = leaf(np.linspace(-1, 1, 4))
        f = weighted_sine(c, {2: 2.0})
        with pytest.raises(GradcheckError, match="with respect to input 1"):
            gradcheck(lambda k, t: f(t) * k, (np.array(3.0), x))

    def test_fast_mode_catches_one_percent_error(self) -> None:
        n, k = 1000, 321
        rng = np.random.default_rng(9)
        c = rng.uniform(0.5, 2.0, n)
        x = leaf(rng.uniform(-1, 1, n))
        with pytest.raises(GradcheckError) as info:
            gradcheck(weighted_sine(c, {k: 1.01}), (x,), fast_mode=True)
        assert f"input index ({k},)" in str(info.value) and "fast mode" in str(info.value)

    def test_requires_a_differentiable_input(self) -> None:
        with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
            gradcheck(np.sin, (fd.tensor([1.0]),))

    def test_flag_dependencies(self) -> None:
        x = leaf([1.0])
        with pytest.raises(ValueError, match="at least one of check_forward_ad"):
            gradcheck(np.sin, x, check_backward_ad=False)
        with pytest.raises(ValueError, match="check_batched_grad"):
            gradcheck(
                np.sin, x, check_batched_grad=True, check_backward_ad=False, check_forward_ad=True
            )
        with pytest.raises(ValueError, match="check_batched_forward_grad"):
            gradcheck(np.sin, x, check_batched_forward_grad=True)

    def test_float32_input_warns(self) -> None:
        x = leaf([0.5], dtype=np.float32)
        with pytest.warns(UserWarning, match="not a double precision"):
            gradcheck(lambda t: t * 2.0, (x,), atol=1e-2, rtol=1e-2)

    def test_forward_mode_check(self) -> None:
        x = leaf([0.1, 0.2, 0.3])
        assert gradcheck(lambda t: np.exp(t) * t[0], (x,), check_forward_ad=True)
        with pytest.raises(GradcheckError, match="computed with forward mode mismatch"):
            gradcheck(MatVecTransposed.apply, (x,), check_forward_ad=True, check_backward_ad=False)

    def test_batched_grad_check_catches_batch_unaware_backward(self) -> None:
        # backward written for one cotangent but declared batch-aware: under a batch
        # (B, 3) the product A^T @ g mixes the batch axis with the output axis.
        class OneCotangent(fd.Function):
            batched_backward = True

            @staticmethod
            def forward(ctx, x):
                return A @ _data(x)

            @staticmethod
            def backward(ctx, g):
                return fd.tensor(A.T) @ g

        x = leaf([0.1, 0.2, 0.3])
        assert gradcheck(OneCotangent.apply, (x,))  # the row-by-row Jacobian is right
        with pytest.raises(GradcheckError, match="Batched grad mismatch"):
            gradcheck(OneCotangent.apply, (x,), check_batched_grad=True)

    def test_batched_forward_grad_check(self) -> None:
        x = leaf([0.1, 0.2, 0.3])
        assert gradcheck(
            lambda t: np.exp(t) * t[0], (x,), check_forward_ad=True, check_batched_forward_grad=True
        )

        # Forward-mode products differentiate the recorded backward pass. A Function in
        # it that claims to handle a batch of cotangents but copies row 0 over the batch
        # breaks only the batched products.
        class FirstRowOnly(fd.Function):
            batched_backward = True

            @staticmethod
            def forward(ctx, t):
                return fd.tensor(_data(t))

            @staticmethod
            def backward(ctx, g):
                rows = _data(g).reshape(-1, 3)
                return fd.tensor(np.broadcast_to(rows[0], g.shape).copy())

        class OneCotangent(fd.Function):
            @staticmethod
            def forward(ctx, x):
                return A @ _data(x)

            @staticmethod
            def backward(ctx, g):
                return FirstRowOnly.apply(g * 1.0) @ fd.tensor(A)

        x = leaf([0.1, 0.2, 0.3])
        assert gradcheck(OneCotangent.apply, (x,), check_forward_ad=True)
        with pytest.raises(GradcheckError, match="Batched forward grad mismatch"):
            gradcheck(
                OneCotangent.apply, (x,), check_forward_ad=True, check_batched_forward_grad=True
            )

    def test_nondeterministic_backward(self) -> None:
        rng = np.random.default_rng(0)

        class Noisy(fd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.x = np.array(_data(x))
                return np.asarray(2.0 * ctx.x)

            @staticmethod
            def backward(ctx, g):
                return g * (2.0 + 1e-12 * rng.standard_normal())

        x = leaf([0.5, 1.5])
        with pytest.raises(GradcheckError, match="Backward is not reentrant"):
            gradcheck(Noisy.apply, (x,))
        assert gradcheck(Noisy.apply, (x,), nondet_tol=1e-9)

    def test_backward_must_multiply_by_grad_output(self) -> None:
        class IgnoresG(fd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.x = np.array(_data(x))
                return np.asarray(np.sum(ctx.x**2))

            @staticmethod
            def backward(ctx, g):
                return fd.tensor(2.0 * ctx.x)  # right for g = 1 only

        with pytest.raises(GradcheckError, match="backward not multiplied by grad_output"):
            gradcheck(IgnoresG.apply, (leaf([0.5, 1.5]),))

    def test_output_cut_from_the_graph(self) -> None:
        def detached(t):
            return fd.tensor(np.sin(t.data))  # the gradient is silently dropped

        with pytest.raises(
            GradcheckError, match="Numerical gradient for function expected to be zero"
        ):
            gradcheck(detached, (leaf([0.5, 1.5]),))

    def test_masked_and_layout_options_are_accepted(self) -> None:
        x = leaf([0.5, 1.5])
        assert gradcheck(np.sin, x, masked=False, check_grad_dtypes=True, check_undefined_grad=True)


class TestGradgradcheck:
    def test_passes_on_correct_function(self) -> None:
        x, y = leaf([0.3, -1.2, 2.0]), leaf([0.5, 1.5, 2.5])
        assert gradgradcheck(lambda a, b: (np.exp(a) * b**2, np.sum(a * b)), (x, y))

    def test_catches_wrong_second_derivative(self) -> None:
        x = leaf([0.7, -1.3, 2.1])
        with pytest.raises(
            GradcheckError,
            match=r"^Jacobian mismatch for output 0 with "
            r"respect to input 0,",
        ) as info:
            gradgradcheck(CubeWrongSecond.apply, (x,))
        assert "input index (2,)" in str(info.value)
        assert gradgradcheck(CubeWrongSecond.apply, (x,), raise_exception=False) is False

    def test_given_grad_outputs(self) -> None:
        x = leaf([0.3, -1.2])
        v = fd.tensor([1.0, -2.0], requires_grad=True)
        assert gradgradcheck(lambda a: np.sin(a) * a, (x,), (v,))
        with pytest.raises(ValueError, match="shape"):
            gradgradcheck(lambda a: np.sin(a), (x,), (fd.tensor([1.0], requires_grad=True),))

    def test_fast_mode_and_forward_over_reverse(self) -> None:
        x = leaf([0.3, -1.2, 2.0])
        assert gradgradcheck(lambda a: np.tanh(a) * a, (x,), fast_mode=True)
        assert gradgradcheck(lambda a: np.tanh(a) * a, (x,), check_fwd_over_rev=True)


def test_no_warnings_from_user_code_at_perturbed_points() -> None:
    # log at 1e-6 with a step that leaves the domain must not leak RuntimeWarnings.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = check_derivatives(lambda x: np.sum(np.log(x)), np.array([1e-6, 2e-6]))
    assert report.verdict == "pass"
