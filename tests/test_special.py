"""funcdiff.special (logsumexp, softmax, log_softmax, polygamma, multigammaln), the
scipy.special rules end to end on Tensors, and elementwise rules at their kinks and
singular points, where the finite-difference rule table cannot place test points.

Truth comes from SciPy's own functions, closed forms (the softmax Jacobian
``diag(s) - s s^T``, polygamma for derivatives of gammaln) and central differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sp

import funcdiff as fd
from funcdiff import special
from funcdiff.special import log_softmax, logsumexp, softmax

INF = np.inf


def leaf(values) -> fd.Tensor:
    return fd.tensor(np.asarray(values, dtype=float), requires_grad=True)


def jacobian(y: fd.Tensor, x: fd.Tensor, create_graph: bool = False) -> fd.Tensor:
    """Full Jacobian d y / d x, shape y.shape + x.shape, from one batched backward pass."""
    n = y.data.size
    eye = np.eye(n).reshape((n,) + y.shape)
    (rows,) = fd.grad(
        y, x, grad_outputs=eye, is_grads_batched=True, retain_graph=True, create_graph=create_graph
    )
    return np.reshape(rows, y.shape + x.shape)


def central(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Jacobian of array-valued f at x by central differences, shape f(x).shape + x.shape."""
    f0 = np.asarray(f(x))
    out = np.zeros(f0.shape + x.shape)
    for i in np.ndindex(x.shape):
        step = eps * max(1.0, abs(x[i]))
        xp, xm = x.copy(), x.copy()
        xp[i] += step
        xm[i] -= step
        out[(Ellipsis,) + i] = (np.asarray(f(xp)) - np.asarray(f(xm))) / (2 * step)
    return out


def softmax_jacobian(s: np.ndarray) -> np.ndarray:
    return np.diag(s) - np.outer(s, s)


# ====================================================================== logsumexp values
RNG = np.random.default_rng(20240611)
A34 = RNG.uniform(-3, 3, (3, 4))
A234 = RNG.uniform(-3, 3, (2, 3, 4))

VALUE_CASES = [
    (A34, {}),
    (A34, {"axis": 0}),
    (A34, {"axis": -1, "keepdims": True}),
    (A234, {"axis": (0, 2)}),
    (A234, {"axis": (0, 2), "keepdims": True}),
    (np.array(0.7), {}),
    (np.array(0.7), {"keepdims": True}),
    (A34, {"axis": 1, "b": RNG.uniform(0.1, 2.0, (3, 4))}),
    (A34[0], {"axis": -1, "b": RNG.uniform(0.1, 2.0, (2, 4))}),
    (A34, {"axis": 1, "b": np.array([1.0, 0.0, 2.0, 0.5])}),
    (A34, {"axis": 1, "b": np.array([1.0, 0.0, -0.5, 2.0]), "return_sign": True}),
    (A34, {"b": -np.ones((3, 4)), "return_sign": True}),
    (A34, {"axis": 0, "b": 2.5}),
    (np.array([1000.0, 1001.0, 999.5]), {}),
    (np.array([-1000.0, -1001.0]), {}),
    (np.array([0.0, -40.0]), {}),
    (np.array([[0.0, -INF, 1.0], [-INF, -INF, -INF]]), {"axis": 1}),
    (np.array([[0.0, -INF, 1.0], [-INF, -INF, -INF]]), {"axis": 1, "return_sign": True}),
    (np.array([0.0, 1000.0, INF, np.nan]), {"b": np.array([1.0, 0.0, 0.0, 0.0])}),
    (np.array([0.0, 0.0]), {"b": np.array([1.0, -1.0]), "return_sign": True}),
    (np.array([0.0, 1.0]), {"b": np.array([1.0, -1.0])}),
    (np.array([INF, 1.0]), {}),
    (np.array([np.nan, 1.0]), {}),
    (np.zeros((2, 0)), {"axis": 1}),
]


@pytest.mark.parametrize("a, kwargs", VALUE_CASES)
def test_logsumexp_values_match_scipy(a: np.ndarray, kwargs: dict) -> None:
    with np.errstate(all="ignore"):
        expected = sp.logsumexp(a, **kwargs)
        got = logsumexp(fd.tensor(a), **kwargs)
        plain = logsumexp(a, **kwargs)
    if kwargs.get("return_sign"):
        (res, sgn), (eres, esgn) = got, expected
        assert isinstance(res, fd.Tensor) and isinstance(sgn, fd.Tensor)
        np.testing.assert_allclose(res.data, eres, rtol=1e-14, atol=1e-300)
        np.testing.assert_array_equal(sgn.data, esgn)
        np.testing.assert_array_equal(plain[0], eres)
    else:
        assert isinstance(got, fd.Tensor)
        assert got.shape == np.shape(expected)
        np.testing.assert_allclose(got.data, expected, rtol=1e-14, atol=1e-300)
        # Plain arrays go to SciPy and come back as SciPy returns them.
        assert type(plain) is type(expected)
        np.testing.assert_array_equal(plain, expected)


def test_logsumexp_float32_and_weight_tensor() -> None:
    a = RNG.uniform(-2, 2, 5).astype(np.float32)
    got = logsumexp(fd.tensor(a))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.data, sp.logsumexp(a), rtol=1e-6)
    # Only the weights are a Tensor.
    b = leaf(RNG.uniform(0.5, 1.5, 5))
    y = logsumexp(a.astype(float), b=b)
    np.testing.assert_allclose(y.data, sp.logsumexp(a.astype(float), b=b.data), rtol=1e-14)
    (gb,) = fd.grad(y, b)
    np.testing.assert_allclose(gb.data, np.exp(a - y.data), rtol=1e-6)


def test_logsumexp_empty_sum_has_sign_zero() -> None:
    res, sgn = logsumexp(fd.tensor(np.zeros((0,))), return_sign=True)
    assert res.data == -INF and sgn.data == 0.0


# ====================================================================== logsumexp derivatives
def test_logsumexp_gradient_is_softmax_and_hessian_closed_form() -> None:
    a0 = RNG.uniform(-2, 2, 5)
    a = leaf(a0)
    y = logsumexp(a)
    (g,) = fd.grad(y, a, create_graph=True)
    s = sp.softmax(a0)
    np.testing.assert_allclose(g.data, s, rtol=1e-13)
    np.testing.assert_allclose(jacobian(g, a).data, softmax_jacobian(s), rtol=1e-12, atol=1e-15)


def test_logsumexp_third_order_against_differences_of_the_closed_form_hessian() -> None:
    a0 = RNG.uniform(-1, 1, 4)
    a = leaf(a0)
    (g,) = fd.grad(logsumexp(a), a, create_graph=True)
    hess = jacobian(g, a, create_graph=True)
    third = jacobian(hess, a).data
    expected = central(lambda x: softmax_jacobian(sp.softmax(x)), a0)
    np.testing.assert_allclose(third, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("shift", [1e3, -1e3, 3e5])
def test_logsumexp_is_stable_and_exact_at_huge_inputs(shift: float) -> None:
    base = np.array([0.3, -1.2, 0.9, 0.0])
    a = leaf(base + shift)
    y = logsumexp(a)
    np.testing.assert_allclose(y.data, sp.logsumexp(base) + shift, rtol=1e-15)
    (g,) = fd.grad(y, a, create_graph=True)
    s = sp.softmax(a.data - shift)  # the inputs as stored (base + shift is rounded)
    np.testing.assert_allclose(g.data, s, rtol=1e-12)
    np.testing.assert_allclose(jacobian(g, a).data, softmax_jacobian(s), rtol=1e-10, atol=1e-14)


def test_logsumexp_axis_keepdims_batched_gradient() -> None:
    a0 = RNG.uniform(-2, 2, (2, 3, 4))
    a = leaf(a0)
    y = logsumexp(a, axis=(0, 2), keepdims=True)
    assert y.shape == (1, 3, 1)
    (g,) = fd.grad(np.sum(y * np.array([1.0, 2.0, -1.0])[:, None]), a)
    e = np.exp(a0 - sp.logsumexp(a0, axis=(0, 2), keepdims=True))
    np.testing.assert_allclose(g.data, e * np.array([1.0, 2.0, -1.0])[:, None], rtol=1e-13)


def test_logsumexp_neg_inf_entries_get_zero_gradient_at_every_order() -> None:
    a = leaf([[0.0, -INF, 1.0], [-INF, -INF, -INF]])
    y = logsumexp(a, axis=1)
    np.testing.assert_array_equal(y.data[1], -INF)
    (g,) = fd.grad(y[0], a, create_graph=True)
    s = sp.softmax([0.0, 1.0])
    np.testing.assert_allclose(g.data, [[s[0], 0.0, s[1]], [0.0, 0.0, 0.0]], rtol=1e-14)
    (h,) = fd.grad(np.sum(g * np.array([[1.0, 5.0, -2.0], [3.0, 1.0, 1.0]])), a)
    assert np.all(np.isfinite(h.data))
    hs = softmax_jacobian(s) @ np.array([1.0, -2.0])
    np.testing.assert_allclose(h.data, [[hs[0], 0.0, hs[1]], [0.0, 0.0, 0.0]], atol=1e-15)
    # The all -inf slice alone: -inf, gradient 0, no NaN.
    (g2,) = fd.grad(logsumexp(a, axis=1)[1], a)
    np.testing.assert_array_equal(g2.data, 0.0)


@pytest.mark.parametrize("big", [5.0, 50.0])
def test_logsumexp_weights_with_zeros_and_signs(big: float) -> None:
    a0 = np.array([0.2, big, -0.4, 1.1, INF, np.nan])
    b0 = np.array([1.0, 0.0, -0.5, 2.0, 0.0, 0.0])
    # inf and NaN where the weight is 0 are ignored, as in SciPy.
    res, sgn = logsumexp(fd.tensor(a0), b=b0, return_sign=True)
    eres, esgn = sp.logsumexp(a0, b=b0, return_sign=True)
    np.testing.assert_allclose(res.data, eres, rtol=1e-14)
    assert sgn.data == esgn
    # d/da = b exp(a - L) sign and d/db = exp(a - L) sign, exact also where b = 0 (as long
    # as exp(a - max) does not overflow there).
    a1, b1 = a0[:4], b0[:4]
    a, b = leaf(a1), leaf(b1)
    res, sgn = logsumexp(a, b=b, return_sign=True)
    ga, gb = fd.grad(res, [a, b])
    L = sp.logsumexp(a1, b=b1, return_sign=True)[0]
    np.testing.assert_allclose(ga.data, b1 * np.exp(a1 - L) * sgn.data, rtol=1e-12)
    np.testing.assert_allclose(gb.data, np.exp(a1 - L) * sgn.data, rtol=1e-12)
    assert gb.data[1] > np.exp(big - 2.0)
    if big < 10:  # beyond that log|sum| bends too fast near b = 0 for differences
        np.testing.assert_allclose(
            gb.data,
            central(lambda x: sp.logsumexp(a1, b=x, return_sign=True)[0], b1),
            rtol=1e-6,
        )


def test_logsumexp_negative_sum_without_sign_is_nan_like_scipy() -> None:
    a = leaf([0.0, 1.0])
    y = logsumexp(a, b=np.array([1.0, -1.0]))
    assert np.isnan(y.data)


def test_logsumexp_cancelling_weights_give_minus_inf_and_zero_gradient() -> None:
    a = leaf([0.3, 0.3])
    res, sgn = logsumexp(a, b=np.array([2.0, -2.0]), return_sign=True)
    assert res.data == -INF and sgn.data == 0.0
    (g,) = fd.grad(res, a)
    np.testing.assert_array_equal(g.data, 0.0)


def test_logsumexp_value_accuracy_with_log1p() -> None:
    # log(1 + e**-40): a plain log(sum) would return exactly 0.
    y = logsumexp(leaf([0.0, -40.0]))
    np.testing.assert_allclose(y.data, np.log1p(np.exp(-40.0)), rtol=1e-14)


def test_logsumexp_bad_axis_is_a_clear_error() -> None:
    with pytest.raises(np.exceptions.AxisError):
        logsumexp(leaf(np.ones((2, 3))), axis=2)


# ====================================================================== softmax, log_softmax
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_softmax_and_log_softmax_values_match_scipy(axis) -> None:
    x = A34 * 3.0
    np.testing.assert_allclose(
        softmax(fd.tensor(x), axis=axis).data, sp.softmax(x, axis=axis), rtol=1e-14
    )
    np.testing.assert_allclose(
        log_softmax(fd.tensor(x), axis=axis).data, sp.log_softmax(x, axis=axis), rtol=1e-14
    )
    np.testing.assert_array_equal(softmax(x, axis=axis), sp.softmax(x, axis=axis))
    np.testing.assert_array_equal(log_softmax(x, axis=axis), sp.log_softmax(x, axis=axis))


def test_softmax_jacobian_is_diag_minus_outer_and_second_order_matches_differences() -> None:
    x0 = RNG.uniform(-2, 2, 5)
    x = leaf(x0)
    s = softmax(x)
    jac = jacobian(s, x, create_graph=True)
    np.testing.assert_allclose(jac.data, softmax_jacobian(sp.softmax(x0)), rtol=1e-12, atol=1e-15)
    second = jacobian(jac, x).data
    expected = central(lambda z: softmax_jacobian(sp.softmax(z)), x0)
    np.testing.assert_allclose(second, expected, rtol=1e-6, atol=1e-8)


def test_log_softmax_jacobian_and_hessian() -> None:
    x0 = RNG.uniform(-2, 2, 4)
    x = leaf(x0)
    ls = log_softmax(x)
    s = sp.softmax(x0)
    jac = jacobian(ls, x, create_graph=True)
    np.testing.assert_allclose(jac.data, np.eye(4) - s[None, :], rtol=1e-12, atol=1e-15)
    hess = jacobian(jac, x).data  # d^2 ls_i / dx_j dx_k = -(diag(s) - s s^T) for every i
    np.testing.assert_allclose(
        hess, -np.broadcast_to(softmax_jacobian(s), (4, 4, 4)), rtol=1e-11, atol=1e-14
    )


def test_softmax_along_axis_batched_jacobian() -> None:
    x0 = RNG.uniform(-2, 2, (2, 3))
    x = leaf(x0)
    jac = jacobian(softmax(x, axis=1), x).data  # (2, 3, 2, 3)
    for r in range(2):
        np.testing.assert_allclose(
            jac[r, :, r, :], softmax_jacobian(sp.softmax(x0[r])), rtol=1e-12, atol=1e-15
        )
        np.testing.assert_array_equal(jac[r, :, 1 - r, :], 0.0)


@pytest.mark.parametrize("shift", [1e3, -1e3])
def test_softmax_and_log_softmax_stable_at_huge_inputs(shift: float) -> None:
    base = np.array([0.5, -0.25, 1.0])
    x = leaf(base + shift)
    s = softmax(x)
    np.testing.assert_allclose(s.data, sp.softmax(base), rtol=1e-13)
    np.testing.assert_allclose(
        jacobian(s, x).data, softmax_jacobian(sp.softmax(base)), rtol=1e-11, atol=1e-15
    )
    ls = log_softmax(x)
    np.testing.assert_allclose(ls.data, sp.log_softmax(base), rtol=1e-12)
    np.testing.assert_allclose(
        jacobian(ls, x).data, np.eye(3) - sp.softmax(base)[None, :], rtol=1e-11, atol=1e-15
    )


def test_softmax_and_log_softmax_with_neg_inf_entries() -> None:
    x0 = np.array([0.0, -INF, 1.0])
    x = leaf(x0)
    s = softmax(x)
    np.testing.assert_array_equal(s.data, sp.softmax(x0))
    jac = jacobian(s, x, create_graph=True)
    full = np.zeros((3, 3))
    full[np.ix_([0, 2], [0, 2])] = softmax_jacobian(sp.softmax([0.0, 1.0]))
    np.testing.assert_allclose(jac.data, full, rtol=1e-13, atol=1e-16)
    assert np.all(np.isfinite(jacobian(jac, x).data))
    ls = log_softmax(x)
    np.testing.assert_array_equal(ls.data, sp.log_softmax(x0))
    # ls_i = x_i - lse(x): slope 1 in its own entry, -softmax elsewhere (0 for -inf).
    np.testing.assert_allclose(
        jacobian(ls, x).data, np.eye(3) - sp.softmax(x0)[None, :], atol=1e-16
    )


def test_softmax_of_all_neg_inf_is_nan_like_scipy() -> None:
    x0 = np.array([-INF, -INF])
    with np.errstate(invalid="ignore"):
        assert np.all(np.isnan(softmax(fd.tensor(x0)).data))
        assert np.all(np.isnan(log_softmax(fd.tensor(x0)).data))
        assert np.all(np.isnan(sp.softmax(x0)))


# ====================================================================== gamma family
def test_sum_gammaln_gradient_is_digamma() -> None:
    x0 = np.array([0.3, 1.0, 2.5, 7.0, -1.5])
    x = leaf(x0)
    y = np.sum(sp.gammaln(x))
    (g,) = fd.grad(y, x)
    np.testing.assert_allclose(g.data, sp.digamma(x0), rtol=1e-13)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_gammaln_higher_orders_are_polygamma(order: int) -> None:
    x0 = np.array([0.4, 1.3, 4.0])
    x = leaf(x0)
    y = np.sum(sp.gammaln(x))
    for _ in range(order):
        (y,) = fd.grad(np.sum(y) if y.ndim else y, x, create_graph=True)
    np.testing.assert_allclose(y.data, sp.polygamma(order - 1, x0), rtol=1e-12)


def test_polygamma_wrapper_on_arrays_and_tensors() -> None:
    x0 = np.array([0.5, 2.0, 9.0])
    np.testing.assert_array_equal(special.polygamma(2, x0), sp.polygamma(2, x0))
    x = leaf(x0)
    p = special.polygamma(np.array([0, 1, 2]), x)
    assert isinstance(p, fd.Tensor)
    np.testing.assert_allclose(p.data, sp.polygamma([0, 1, 2], x0), rtol=1e-14)
    (g,) = fd.grad(np.sum(p), x, create_graph=True)
    np.testing.assert_allclose(g.data, sp.polygamma([1, 2, 3], x0), rtol=1e-12)
    (h,) = fd.grad(np.sum(g), x)
    np.testing.assert_allclose(h.data, sp.polygamma([2, 3, 4], x0), rtol=1e-12)
    # Against central differences of SciPy's own function.
    np.testing.assert_allclose(
        g.data, np.diag(central(lambda z: sp.polygamma([0, 1, 2], z), x0)), rtol=1e-6
    )


def test_multigammaln_wrapper_gradient_and_second_order() -> None:
    a0 = np.array([2.0, 3.5])
    a = leaf(a0)
    y = special.multigammaln(a, 3)
    np.testing.assert_allclose(y.data, sp.multigammaln(a0, 3), rtol=1e-14)
    (g,) = fd.grad(np.sum(y), a, create_graph=True)
    expected = sum(sp.digamma(a0 - 0.5 * j) for j in range(3))
    np.testing.assert_allclose(g.data, expected, rtol=1e-13)
    (h,) = fd.grad(np.sum(g), a)
    np.testing.assert_allclose(
        h.data, sum(sp.polygamma(1, a0 - 0.5 * j) for j in range(3)), rtol=1e-12
    )
    with pytest.raises(ValueError):
        special.multigammaln(leaf([0.5]), 3)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_rgamma_exact_at_the_poles_of_gamma(n: int) -> None:
    x = leaf(-float(n))
    (d1,) = fd.grad(sp.rgamma(x), x, create_graph=True)
    (d2,) = fd.grad(d1, x)
    assert d1.data == pytest.approx((-1) ** n * math.factorial(n), rel=1e-13)
    # 1/gamma(-n + e) = (-1)**n n! (e - psi(n + 1) e**2 + ...)
    assert d2.data == pytest.approx(
        -2 * (-1) ** n * math.factorial(n) * sp.digamma(n + 1), rel=1e-10, abs=1e-12
    )


# ====================================================================== other scipy.special
def test_scipy_ufuncs_end_to_end_on_tensors() -> None:
    x0 = np.array([0.2, 0.5, 0.9])
    x = leaf(x0)
    cases = [
        (sp.erf, lambda z: 2 / np.sqrt(np.pi) * np.exp(-z * z)),
        (sp.expit, lambda z: sp.expit(z) * (1 - sp.expit(z))),
        (sp.logit, lambda z: 1 / (z * (1 - z))),
        (sp.erfinv, lambda z: np.sqrt(np.pi) / 2 * np.exp(sp.erfinv(z) ** 2)),
        (sp.ndtri, lambda z: np.sqrt(2 * np.pi) * np.exp(sp.ndtri(z) ** 2 / 2)),
        (sp.softplus, sp.expit),  # a Python function calling np.logaddexp(0, x)
        (lambda z: sp.jv(1.5, z), lambda z: sp.jvp(1.5, z)),
        (lambda z: sp.kv(0.5, z), lambda z: sp.kvp(0.5, z)),
        (lambda z: sp.gammainc(2.0, z), lambda z: z * np.exp(-z)),
    ]
    for f, df in cases:
        (g,) = fd.grad(np.sum(f(x)), x)
        np.testing.assert_allclose(g.data, df(x0), rtol=1e-12, err_msg=str(f))


def test_bessel_second_derivatives_against_scipy() -> None:
    x0 = np.array([0.7, 1.9, 3.3])
    for f, n in [(sp.jv, 0.5), (sp.yv, 1.0), (sp.iv, 2.0), (sp.kv, 1.5)]:
        x = leaf(x0)
        (g,) = fd.grad(np.sum(f(n, x)), x, create_graph=True)
        (h,) = fd.grad(np.sum(g), x)
        deriv = {sp.jv: sp.jvp, sp.yv: sp.yvp, sp.iv: sp.ivp, sp.kv: sp.kvp}[f]
        np.testing.assert_allclose(h.data, deriv(n, x0, 2), rtol=1e-10)


def test_derivative_in_a_bessel_order_or_gammainc_shape_raises() -> None:
    x = leaf([1.0, 2.0])
    v = leaf([0.5, 1.5])
    with pytest.raises(NotImplementedError, match="jv"):
        sp.jv(v, x)
    with pytest.raises(NotImplementedError, match="gammainc"):
        sp.gammainc(v, x)
    # A constant order is fine.
    y = sp.jv(v.detach(), x)
    assert y.requires_grad


def test_xlogy_convention_at_zero() -> None:
    x = leaf([0.0, 0.0, 2.0])
    y = leaf([0.0, 3.0, 3.0])
    out = sp.xlogy(x, y)
    np.testing.assert_array_equal(out.data, sp.xlogy(x.data, y.data))
    gx, gy = fd.grad(np.sum(out), [x, y])
    np.testing.assert_allclose(gx.data, [0.0, np.log(3.0), np.log(3.0)])
    np.testing.assert_allclose(gy.data, [0.0, 0.0, 2.0 / 3.0])
    # Entropy-like sums stay finite at zero probabilities.
    p = leaf([0.0, 0.25, 0.75])
    (gp,) = fd.grad(np.sum(sp.xlogy(p, p)), p)
    np.testing.assert_allclose(gp.data, [0.0, np.log(0.25) + 1, np.log(0.75) + 1])


def test_log_ndtr_gradient_far_in_the_tail() -> None:
    x0 = np.array([-40.0, -10.0, 10.0])
    x = leaf(x0)
    (g,) = fd.grad(np.sum(sp.log_ndtr(x)), x)
    with np.errstate(invalid="ignore"):
        mills = np.exp(-0.5 * x0**2) / np.sqrt(2 * np.pi) / sp.ndtr(x0)
    mills[0] = 40.0249688  # phi/Phi ~ -x - 1/x + 2/x**3 for x -> -inf (ndtr underflows)
    np.testing.assert_allclose(g.data, mills, rtol=1e-8)


# ====================================================================== elementwise edges
def nth_derivatives(f, x0: float, n: int) -> list[float]:
    """f', f'', ..., f^(n) at x0 through repeated create_graph."""
    x = leaf(x0)
    y = f(x)
    out = []
    for _ in range(n):
        (y,) = fd.grad(y, x, create_graph=True, allow_unused=True, materialize_grads=True)
        out.append(float(y.data))
        if not y.requires_grad:
            out.extend([0.0] * (n - len(out)))
            break
    return out


def test_square_through_power_at_zero_every_order() -> None:
    assert nth_derivatives(lambda x: x**2, 0.0, 4) == [0.0, 2.0, 0.0, 0.0]
    assert nth_derivatives(lambda x: x**3, 0.0, 4) == [0.0, 0.0, 6.0, 0.0]
    assert nth_derivatives(lambda x: x**1, 0.0, 3) == [1.0, 0.0, 0.0]
    assert nth_derivatives(lambda x: x**0, 0.0, 2) == [0.0, 0.0]
    # Exponents given as arrays take the general path.
    e = np.array(2.0)
    assert nth_derivatives(lambda x: np.power(x, e), 0.0, 3) == [0.0, 2.0, 0.0]


@pytest.mark.parametrize("exponent", [2, 3, -1, -2, 4.0, 0])
def test_negative_base_integer_exponent(exponent) -> None:
    x0 = -1.5
    d1, d2 = nth_derivatives(lambda x: x**exponent, x0, 2)
    p = float(exponent)
    assert d1 == pytest.approx(p * x0 ** (p - 1), rel=1e-14, abs=0)
    assert d2 == pytest.approx(p * (p - 1) * x0 ** (p - 2), rel=1e-14, abs=0)


def test_power_exponent_gradient_convention() -> None:
    x = leaf([2.0, 0.0, -1.5, 0.0])
    y = leaf([1.5, 2.0, 2.0, 0.0])
    gx, gy = fd.grad(np.sum(x**y), [x, y])
    assert np.all(np.isfinite(gx.data)) and np.all(np.isfinite(gy.data))
    np.testing.assert_allclose(gy.data, [2.0**1.5 * np.log(2.0), 0.0, 0.0, 0.0])
    np.testing.assert_allclose(gx.data, [1.5 * 2.0**0.5, 0.0, 2 * -1.5, 0.0])
    # Second order stays finite where the base is 0 or negative.
    gx, gy = fd.grad(np.sum(x**y), [x, y], create_graph=True)
    hx, hy = fd.grad(np.sum(gx) + np.sum(gy), [x, y])
    assert np.all(np.isfinite(hx.data[1:])) and np.all(np.isfinite(hy.data))


def test_sinc_at_zero_every_order() -> None:
    d = nth_derivatives(np.sinc, 0.0, 4)
    expected = [0.0, -(np.pi**2) / 3, 0.0, np.pi**4 / 5]
    np.testing.assert_allclose(d, expected, rtol=1e-12, atol=1e-12)
    # Next to 0, and across the switch to the closed form at |x| = 0.1.
    for x0 in (1e-9, 0.0999, 0.1001, 1.5):
        d1, d2 = nth_derivatives(np.sinc, x0, 2)
        fd1 = central(lambda z: np.sinc(z), np.array([x0]))[0, 0]
        fd2 = central(lambda z: np.array([nth_derivatives(np.sinc, z[0], 1)[0]]), np.array([x0]))[
            0, 0
        ]
        assert d1 == pytest.approx(fd1, rel=1e-7, abs=1e-9)
        assert d2 == pytest.approx(fd2, rel=1e-6, abs=1e-8)


def test_logaddexp_with_infinite_results_has_no_nan() -> None:
    x = leaf([-INF, INF, INF, 0.5])
    y = leaf([-INF, 1.0, INF, -INF])
    ones = np.ones(4)
    out = np.logaddexp(x, y)
    np.testing.assert_array_equal(out.data, [-INF, INF, INF, 0.5])
    gx, gy = fd.grad(out, [x, y], grad_outputs=ones)
    np.testing.assert_array_equal(gx.data, [0.5, 1.0, 0.5, 1.0])
    np.testing.assert_array_equal(gy.data, [0.5, 0.0, 0.5, 0.0])
    gx, gy = fd.grad(np.logaddexp2(x, y), [x, y], grad_outputs=ones)
    np.testing.assert_array_equal(gx.data, [0.5, 1.0, 0.5, 1.0])


def test_arctan2_and_hypot_at_the_origin() -> None:
    y, x = leaf([0.0, 1.0]), leaf([0.0, -1.0])
    gy, gx = fd.grad(np.sum(np.arctan2(y, x)), [y, x])
    np.testing.assert_allclose(gy.data, [0.0, -0.5])
    np.testing.assert_allclose(gx.data, [0.0, -0.5])
    gy, gx = fd.grad(np.sum(np.hypot(y, x)), [y, x])
    np.testing.assert_allclose(gy.data, [0.0, 1 / np.sqrt(2)])


def test_maximum_with_nan_sends_gradient_to_the_nan() -> None:
    x, y = leaf([np.nan, 1.0, 2.0]), leaf([0.0, np.nan, 2.0])
    gx, gy = fd.grad(np.sum(np.maximum(x, y)), [x, y])
    np.testing.assert_array_equal(gx.data, [1.0, 0.0, 0.5])
    np.testing.assert_array_equal(gy.data, [0.0, 1.0, 0.5])


def test_nan_to_num_gradient_and_copy_false() -> None:
    x = leaf([1.0, np.nan, INF, -INF, -2.0])
    y = np.nan_to_num(x, nan=0.5, posinf=9.0, neginf=-9.0)
    np.testing.assert_array_equal(y.data, [1.0, 0.5, 9.0, -9.0, -2.0])
    (g,) = fd.grad(np.sum(y * 3.0), x)
    np.testing.assert_array_equal(g.data, [3.0, 0.0, 0.0, 0.0, 3.0])
    with pytest.raises(ValueError, match="copy=False"):
        np.nan_to_num(x, copy=False)


def test_heaviside_modf_frexp_real() -> None:
    h = leaf([0.3, 0.7, 0.9])
    (g,) = fd.grad(np.sum(np.heaviside(np.array([-1.0, 0.0, 2.0]), h)), h)
    np.testing.assert_array_equal(g.data, [0.0, 1.0, 0.0])
    x = leaf([2.75, -1.25, 0.4])
    frac, whole = np.modf(x)
    (g,) = fd.grad(np.sum(frac) + np.sum(whole), x)
    np.testing.assert_array_equal(g.data, [1.0, 1.0, 1.0])
    mant, expo = np.frexp(x)
    (g,) = fd.grad(np.sum(mant), x)
    np.testing.assert_array_equal(g.data, 2.0**-expo.data)
    r = np.real(x)
    (g,) = fd.grad(np.sum(r * 2.0), x)
    np.testing.assert_array_equal(g.data, 2.0)
    # np.imag of a real Tensor is zero, with a zero gradient (it is not on complex ones).
    (g,) = fd.grad(np.sum(np.imag(x) * 3.0), x)
    np.testing.assert_array_equal(g.data, 0.0)
    # np.real returns a view: changing it in place would silently change x.
    with pytest.raises(RuntimeError):
        r += 1.0
    np.testing.assert_array_equal(x.data, [2.75, -1.25, 0.4])


def test_distinct_numpy_2_aliases_are_registered() -> None:
    from funcdiff.rules import FUNCTION_RULES, UFUNC_RULES

    for name in ("acos", "asin", "atan", "atan2", "acosh", "asinh", "atanh", "pow"):
        assert getattr(np, name) in UFUNC_RULES, name
    for fn in (np.divide, np.mod, np.abs, np.conj, np.radians, np.degrees, np.divmod):
        assert fn in UFUNC_RULES
    for fn in (np.sinc, np.real, np.imag, np.nan_to_num, np.round, np.around, np.i0):
        assert fn in FUNCTION_RULES
