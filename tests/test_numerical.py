"""``np.interp``, ``np.polyval`` and ``np.gradient`` on Tensors: NumPy's values, and
derivatives against closed forms (the rule cases check finite differences)."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd

XP = np.array([0.0, 1.0, 2.5, 4.0])
FP = np.array([1.0, 3.0, 0.0, 2.0])
SLOPES = np.diff(FP) / np.diff(XP)


class TestInterp:
    def test_values_equal_numpy(self) -> None:
        x = np.array([-1.0, 0.0, 0.3, 1.0, 2.0, 2.5, 3.9, 4.0, 5.0, np.nan])
        for kwargs in ({}, {"left": -7.0, "right": 9.0}, {"period": 3.0}):
            got = np.interp(fd.tensor(x, requires_grad=True), XP, FP, **kwargs)
            np.testing.assert_array_equal(got.data, np.interp(x, XP, FP, **kwargs))

    def test_slope_at_knots_is_the_right_segment_and_the_last_at_the_end(self) -> None:
        x = fd.tensor(XP.copy(), requires_grad=True)
        np.sum(np.interp(x, XP, FP)).backward()
        np.testing.assert_array_equal(x.grad.data, [SLOPES[0], SLOPES[1], SLOPES[2], SLOPES[2]])

    def test_slope_between_knots_and_zero_outside(self) -> None:
        x = fd.tensor([-0.5, 0.5, 1.7, 3.0, 4.5], requires_grad=True)
        np.sum(np.interp(x, XP, FP)).backward()
        np.testing.assert_array_equal(x.grad.data, [0.0, SLOPES[0], SLOPES[1], SLOPES[2], 0.0])

    def test_fp_gradient_is_the_hat_weights(self) -> None:
        fp = fd.tensor(FP, requires_grad=True)
        x = np.array([0.25, 2.5, 3.25, -1.0, 9.0])
        w = np.array([1.0, 10.0, 100.0, 1000.0, 10000.0])
        np.sum(np.interp(x, XP, fp) * w).backward()
        # 0.25: 3/4 fp0 + 1/4 fp1; 2.5: fp2; 3.25: fp2/2 + fp3/2; -1: fp0; 9: fp3
        expected = [0.75 + 1000.0, 0.25, 10.0 + 50.0, 50.0 + 10000.0]
        np.testing.assert_allclose(fp.grad.data, expected, rtol=1e-14)

    def test_left_and_right_tensors_receive_the_outside_points(self) -> None:
        left = fd.tensor(-1.0, requires_grad=True)
        right = fd.tensor(5.0, requires_grad=True)
        # NumPy dispatches on x, xp and fp only: one of them must be a Tensor.
        x = fd.tensor([-2.0, -1.0, 1.0, 6.0])
        y = np.interp(x, XP, FP, left=left, right=right)
        np.testing.assert_array_equal(y.data, [-1.0, -1.0, 3.0, 5.0])
        gl, gr = fd.grad(np.sum(y), (left, right))
        assert gl.item() == 2.0 and gr.item() == 1.0

    def test_mixed_second_derivative_in_x_and_fp(self) -> None:
        x = fd.tensor(1.5, requires_grad=True)
        fp = fd.tensor(FP, requires_grad=True)
        (gx,) = fd.grad(np.interp(x, XP, fp), x, create_graph=True)
        (h,) = fd.grad(gx, fp)  # d slope_1 / d fp = (0, -1, 1, 0) / 1.5
        np.testing.assert_allclose(h.data, [0.0, -1 / 1.5, 1 / 1.5, 0.0], rtol=1e-14)

    def test_xp_that_requires_grad_is_refused(self) -> None:
        xp = fd.tensor(XP, requires_grad=True)
        with pytest.raises(TypeError, match="numpy.interp is not differentiable in xp"):
            np.interp(fd.tensor(1.0, requires_grad=True), xp, FP)
        # a constant xp Tensor is fine
        y = np.interp(fd.tensor(1.5), fd.tensor(XP), FP)
        assert y.item() == np.interp(1.5, XP, FP)

    def test_bad_shapes_raise_numpys_errors(self) -> None:
        x = fd.tensor(1.0, requires_grad=True)
        with pytest.raises(ValueError, match="not of the same length"):
            np.interp(x, XP, FP[:3])
        with pytest.raises(ValueError, match="empty"):
            np.interp(x, np.array([]), np.array([]))


class TestPolyval:
    def test_value_and_gradients(self) -> None:
        p = fd.tensor([2.0, -1.0, 3.0, 0.5], requires_grad=True)
        x = fd.tensor([0.5, -1.5, 2.0], requires_grad=True)
        y = np.polyval(p, x)
        np.testing.assert_allclose(y.data, np.polyval(p.data, x.data), rtol=1e-14)
        gp, gx = fd.grad(np.sum(y), (p, x))
        xs = x.data
        np.testing.assert_allclose(gp.data, [np.sum(xs**3), np.sum(xs**2), np.sum(xs), 3.0])
        np.testing.assert_allclose(gx.data, 6.0 * xs**2 - 2.0 * xs + 3.0, rtol=1e-14)

    def test_second_derivative_in_x(self) -> None:
        x = fd.tensor(0.7, requires_grad=True)
        (g,) = fd.grad(np.polyval([2.0, -1.0, 3.0, 0.5], x), x, create_graph=True)
        (h,) = fd.grad(g, x)
        assert h.item() == pytest.approx(12.0 * 0.7 - 2.0, rel=1e-14)


class TestGradient:
    @pytest.mark.parametrize(
        "args, kwargs",
        [
            ((), {}),
            ((0.5,), {"edge_order": 2}),
            ((np.array([0.0, 0.3, 1.0, 1.2, 2.0, 3.5]),), {}),
            ((np.array([0.0, 0.3, 1.0, 1.2, 2.0, 3.5]),), {"edge_order": 2}),
        ],
    )
    def test_1d_values_equal_numpy(self, args, kwargs) -> None:
        f = np.sin(np.linspace(0.0, 3.0, 6))
        got = np.gradient(fd.tensor(f, requires_grad=True), *args, **kwargs)
        np.testing.assert_allclose(got.data, np.gradient(f, *args, **kwargs), rtol=1e-13)

    def test_nd_returns_one_tensor_per_axis(self) -> None:
        f = np.arange(12.0).reshape(3, 4) ** 2
        got = np.gradient(fd.tensor(f, requires_grad=True), 2.0, np.array([0.0, 1.0, 3.0, 4.0]))
        want = np.gradient(f, 2.0, np.array([0.0, 1.0, 3.0, 4.0]))
        assert isinstance(got, tuple) and len(got) == 2
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a.data, b, rtol=1e-13)

    def test_gradient_is_the_transpose_of_the_difference_matrix(self) -> None:
        n = 5
        dense = np.gradient(np.eye(n), 0.5, axis=0, edge_order=2)  # column j: response to e_j
        f = fd.tensor(np.zeros(n), requires_grad=True)
        w = np.arange(1.0, n + 1)
        np.sum(np.gradient(f, 0.5, edge_order=2) * w).backward()
        np.testing.assert_allclose(f.grad.data, dense.T @ w, rtol=1e-13)

    def test_spacing_that_requires_grad_is_refused(self) -> None:
        f = fd.tensor(np.arange(4.0), requires_grad=True)
        with pytest.raises(TypeError, match="numpy.gradient is not differentiable in the spacing"):
            np.gradient(f, fd.tensor(0.5, requires_grad=True))

    def test_too_short_axis_raises_numpys_error(self) -> None:
        with pytest.raises(ValueError, match="too small"):
            np.gradient(fd.tensor([1.0, 2.0], requires_grad=True), edge_order=2)
