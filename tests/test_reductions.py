"""Reductions against closed forms: products with zeros, ties, norms at zero, moments.

The rule table (tests/test_rules.py) already checks every reduction against finite
differences at random points; these tests cover the points where finite differences
say little (kinks, zeros, degeneracies) and the NumPy-level behaviour (signatures,
errors, ufunc methods, Tensor methods).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import funcdiff as fd


def gradient(f, x0: np.ndarray) -> np.ndarray:
    x = fd.tensor(x0, requires_grad=True)
    (g,) = fd.grad(f(x), x)
    return g.data


def hessian(f, x0: np.ndarray) -> np.ndarray:
    """Full Hessian of scalar ``f`` at ``x0`` through create_graph (rows by a batched pass)."""
    x = fd.tensor(x0, requires_grad=True)
    (g,) = fd.grad(f(x), x, create_graph=True)
    n = x0.size
    if not g.requires_grad:
        return np.zeros((n, n))
    eye = np.eye(n).reshape((n,) + x0.shape)
    (h,) = fd.grad(
        g, x, grad_outputs=eye, is_grads_batched=True, allow_unused=True, materialize_grads=True
    )
    return h.data.reshape(n, n)


def others_product(x: np.ndarray, skip: tuple[int, ...]) -> float:
    return float(np.prod(np.delete(x, list(skip))))


# ---------------------------------------------------------------- prod
@pytest.mark.parametrize(
    "x0",
    [
        np.array([2.0, 0.0, 3.0, 4.0]),  # one zero
        np.array([2.0, 0.0, 3.0, 0.0, 5.0]),  # two zeros
        np.array([0.0, 0.0, 0.0]),  # all zeros
        np.array([1.5, -2.0, 0.5]),  # no zero
    ],
)
def test_prod_with_zeros_matches_the_product_of_the_others(x0: np.ndarray) -> None:
    n = x0.size
    expected_g = [others_product(x0, (i,)) for i in range(n)]
    expected_h = np.array(
        [[0.0 if i == j else others_product(x0, (i, j)) for j in range(n)] for i in range(n)]
    )
    g = gradient(np.prod, x0)
    h = hessian(np.prod, x0)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(h))
    np.testing.assert_allclose(g, expected_g, rtol=1e-14, atol=0)
    np.testing.assert_allclose(h, expected_h, rtol=1e-14, atol=0)


def test_prod_along_an_axis_with_zeros_in_a_slice() -> None:
    x0 = np.array([[2.0, 0.0, 3.0], [0.0, 4.0, 0.0], [1.0, 2.0, 3.0]])
    w = np.array([1.0, -2.0, 0.5])
    g = gradient(lambda x: np.sum(w * np.prod(x, axis=-1)), x0)
    expected = np.array([[w[r] * others_product(x0[r], (c,)) for c in range(3)] for r in range(3)])
    np.testing.assert_array_equal(g, expected)
    h = hessian(lambda x: np.sum(w * np.prod(x, axis=1)), x0)
    for (r1, c1), (r2, c2) in itertools.product(np.ndindex(3, 3), repeat=2):
        want = 0.0 if r1 != r2 or c1 == c2 else w[r1] * others_product(x0[r1], (c1, c2))
        assert h[r1 * 3 + c1, r2 * 3 + c2] == want


def test_prod_of_tuple_axes_and_keepdims_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0.5, 1.5, size=(2, 3, 4))
    x0[1, 2, 0] = 0.0
    x = fd.tensor(x0, requires_grad=True)
    y = np.prod(x, axis=(0, -1), keepdims=True)
    np.testing.assert_array_equal(y.data, np.prod(x0, axis=(0, -1), keepdims=True))
    (g,) = fd.grad(np.sum(y), x)
    for idx in np.ndindex(x0.shape):
        block = x0[:, idx[1], :].copy()
        block[idx[0], idx[2]] = 1.0
        assert g.data[idx] == pytest.approx(np.prod(block), rel=1e-14)


# ---------------------------------------------------------------- cumprod and cumsum
def test_cumprod_with_zeros_matches_the_closed_form_at_two_orders() -> None:
    x0 = np.array([2.0, 0.0, 3.0, 0.0, 1.5])
    w = np.array([0.3, -1.0, 2.0, 0.7, -0.4])
    n = x0.size

    def f(x):
        return np.sum(w * np.cumprod(x))

    # d y_i/dx_k = prod_{j<=i, j!=k} x_j (k <= i); second order drops one more factor.
    expected_g = [
        sum(w[i] * others_product(x0[: i + 1], (k,)) for i in range(k, n)) for k in range(n)
    ]
    expected_h = np.zeros((n, n))
    for k, m in itertools.permutations(range(n), 2):
        expected_h[k, m] = sum(
            w[i] * others_product(x0[: i + 1], (k, m)) for i in range(max(k, m), n)
        )
    np.testing.assert_allclose(gradient(f, x0), expected_g, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(hessian(f, x0), expected_h, rtol=1e-14, atol=1e-15)


def test_cumsum_and_cumprod_with_axis_none_flatten() -> None:
    rng = np.random.default_rng(1)
    x0 = rng.uniform(-1.0, 1.0, size=(2, 3))
    w = rng.standard_normal(6)
    g = gradient(lambda x: np.sum(w * np.cumsum(x)), x0)
    np.testing.assert_allclose(g, np.cumsum(w[::-1])[::-1].reshape(2, 3), rtol=1e-14)
    x = fd.tensor(x0, requires_grad=True)
    assert np.cumprod(x).shape == (6,)
    np.testing.assert_allclose(np.cumprod(x).data, np.cumprod(x0), rtol=1e-15)


def test_cumsum_gradient_along_a_negative_axis() -> None:
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((2, 3, 4))
    w = rng.standard_normal((2, 3, 4))
    g = gradient(lambda x: np.sum(w * np.cumsum(x, axis=-2)), x0)
    np.testing.assert_allclose(g, np.flip(np.cumsum(np.flip(w, 1), axis=1), 1), rtol=1e-13)


def test_linear_recurrence_against_a_plain_loop() -> None:
    from funcdiff.rules.scans import linear_recurrence

    a = np.array([7.0, 0.0, 2.0, -1.0, 0.5])
    b = np.array([1.0, 2.0, 0.0, 3.0, -1.0])
    forward = np.zeros(5)
    backward = np.zeros(5)
    for k in range(5):
        forward[k] = b[k] + (a[k] * forward[k - 1] if k else 0.0)
    for k in reversed(range(5)):
        backward[k] = b[k] + (a[k + 1] * backward[k + 1] if k < 4 else 0.0)
    np.testing.assert_array_equal(linear_recurrence(a, b), forward)
    np.testing.assert_array_equal(linear_recurrence(a, b, True), backward)


# ---------------------------------------------------------------- max / min / ptp
@pytest.mark.parametrize("func", [np.max, np.amax])
def test_max_ties_split_evenly(func) -> None:
    assert gradient(func, np.array([1.0, 3.0, 3.0, 2.0])).tolist() == [0.0, 0.5, 0.5, 0.0]
    x0 = np.array([[1.0, 4.0, 4.0, 4.0], [5.0, 2.0, 5.0, 0.0]])
    g = gradient(lambda x: np.sum(np.array([[3.0], [6.0]]) * func(x, axis=-1, keepdims=True)), x0)
    np.testing.assert_array_equal(g, [[0.0, 1.0, 1.0, 1.0], [3.0, 0.0, 3.0, 0.0]])


@pytest.mark.parametrize("func", [np.min, np.amin])
def test_min_ties_split_evenly_and_second_order_is_zero(func) -> None:
    x0 = np.array([[2.0, -1.0], [-1.0, 0.5]])
    np.testing.assert_array_equal(gradient(func, x0), [[0.0, 0.5], [0.5, 0.0]])
    np.testing.assert_array_equal(hessian(func, x0), np.zeros((4, 4)))


def test_max_tensor_method_and_tuple_axis() -> None:
    x0 = np.array([[[1.0, 2.0], [2.0, 0.0]], [[-1.0, 2.0], [0.0, 1.0]]])
    x = fd.tensor(x0, requires_grad=True)
    y = x.max(axis=(0, 2), keepdims=True)
    np.testing.assert_array_equal(y.data, np.max(x0, axis=(0, 2), keepdims=True))
    (g,) = fd.grad(np.sum(y), x)
    expected = np.zeros_like(x0)
    expected[0, 0, 1] = expected[1, 0, 1] = 0.5  # slice 0: two entries tie at 2
    expected[0, 1, 0] = 1.0  # slice 1: a single maximum
    np.testing.assert_array_equal(g.data, expected)


def test_max_with_nan_sends_the_gradient_to_the_nan() -> None:
    g = gradient(np.max, np.array([1.0, np.nan, 3.0]))
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0])
    g = gradient(np.nanmax, np.array([1.0, np.nan, 3.0, 3.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.5, 0.5])


def test_ptp_is_max_minus_min_with_ties() -> None:
    x0 = np.array([[1.0, 5.0, 5.0], [0.0, 0.0, 2.0]])
    x = fd.tensor(x0, requires_grad=True)
    y = np.ptp(x, axis=1)
    np.testing.assert_array_equal(y.data, np.ptp(x0, axis=1))
    (g,) = fd.grad(np.sum(y), x)
    np.testing.assert_array_equal(g.data, [[-1.0, 0.5, 0.5], [-0.5, -0.5, 1.0]])


# ---------------------------------------------------------------- var / std
@pytest.mark.parametrize("ddof", [0, 1])
def test_var_and_std_match_their_closed_forms(ddof: int) -> None:
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal(6)
    n = x0.size
    centered = x0 - x0.mean()
    dof = n - ddof
    np.testing.assert_allclose(gradient(lambda x: np.var(x, ddof=ddof), x0), 2 * centered / dof)
    s = np.std(x0, ddof=ddof)
    np.testing.assert_allclose(gradient(lambda x: np.std(x, ddof=ddof), x0), centered / (dof * s))
    h_var = 2.0 / dof * (np.eye(n) - 1.0 / n)
    np.testing.assert_allclose(hessian(lambda x: np.var(x, ddof=ddof), x0), h_var, atol=1e-14)
    # std = sqrt(var): H = H_var / (2 s) - g_var g_var^T / (4 s^3)
    g_var = 2 * centered / dof
    h_std = h_var / (2 * s) - np.outer(g_var, g_var) / (4 * s**3)
    np.testing.assert_allclose(hessian(lambda x: np.std(x, ddof=ddof), x0), h_std, atol=1e-13)


def test_std_at_zero_variance_has_gradient_zero_at_two_orders() -> None:
    x0 = np.full((2, 3), 1.25)
    g = gradient(lambda x: np.sum(np.std(x, axis=1)), x0)
    np.testing.assert_array_equal(g, np.zeros((2, 3)))
    h = hessian(lambda x: np.sum(np.std(x, axis=1)), x0)
    assert np.all(np.isfinite(h))
    np.testing.assert_array_equal(h, np.zeros((6, 6)))


def test_var_with_correction_and_tensor_methods() -> None:
    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((3, 4))
    x = fd.tensor(x0, requires_grad=True)
    np.testing.assert_allclose(np.var(x, axis=0, correction=1).data, np.var(x0, axis=0, ddof=1))
    np.testing.assert_allclose(x.var(axis=1, ddof=1).data, np.var(x0, axis=1, ddof=1))
    np.testing.assert_allclose(
        x.std(axis=-1, keepdims=True).data, np.std(x0, axis=-1, keepdims=True)
    )
    (g,) = fd.grad(np.sum(np.var(x, axis=0, correction=1)), x)
    np.testing.assert_allclose(g.data, 2 * (x0 - x0.mean(axis=0)) / 2)


# ---------------------------------------------------------------- average
def test_average_with_weights_matches_the_formula() -> None:
    rng = np.random.default_rng(5)
    a0 = rng.standard_normal((3, 4))
    w0 = rng.uniform(0.5, 2.0, size=4)
    a = fd.tensor(a0, requires_grad=True)
    w = fd.tensor(w0, requires_grad=True)
    avg = np.average(a, axis=1, weights=w)
    np.testing.assert_allclose(avg.data, np.average(a0, axis=1, weights=w0), rtol=1e-15)
    v = np.array([1.0, -2.0, 0.5])
    ga, gw = fd.grad(avg, (a, w), grad_outputs=v)
    s = w0.sum()
    np.testing.assert_allclose(ga.data, v[:, None] * w0[None, :] / s)
    expected_w = np.sum(v[:, None] * (a0 - avg.data[:, None]) / s, axis=0)
    np.testing.assert_allclose(gw.data, expected_w, atol=1e-15)


def test_average_returned_gives_the_sum_of_weights() -> None:
    a = fd.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    w = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
    avg, total = np.average(a, axis=1, weights=w, returned=True)
    ref_avg, ref_total = np.average(a.data, axis=1, weights=w.data, returned=True)
    np.testing.assert_allclose(avg.data, ref_avg)
    np.testing.assert_array_equal(total.data, ref_total)
    (gw,) = fd.grad(np.sum(total), w)
    np.testing.assert_array_equal(gw.data, [2.0, 2.0, 2.0])


def test_average_errors_are_clear() -> None:
    a = fd.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ZeroDivisionError, match="sum to zero"):
        np.average(a, axis=1, weights=np.array([1.0, -1.0, 0.0]))
    with pytest.raises(TypeError, match="axis"):
        np.average(a, weights=np.ones(3))
    with pytest.raises(ValueError, match="shape of weights"):
        np.average(a, axis=0, weights=np.ones(3))


# ---------------------------------------------------------------- trace, nan-reductions
@pytest.mark.parametrize("offset, axis1, axis2", [(0, 0, 1), (1, 0, 1), (-1, 1, 0), (2, -1, 0)])
def test_trace_gradient_is_the_shifted_identity(offset: int, axis1: int, axis2: int) -> None:
    x0 = np.arange(12.0).reshape(3, 4)
    g = gradient(lambda x: np.trace(x, offset, axis1, axis2), x0)
    eye = np.eye(x0.shape[axis1], x0.shape[axis2], k=offset)
    expected = eye if axis1 % 2 < axis2 % 2 else eye.T
    np.testing.assert_array_equal(g, expected)


def test_nansum_and_nanmean_give_nan_entries_gradient_zero() -> None:
    x0 = np.array([[1.0, np.nan, 2.0], [np.nan, np.nan, 4.0]])
    x = fd.tensor(x0, requires_grad=True)
    np.testing.assert_array_equal(np.nansum(x, axis=1).data, np.nansum(x0, axis=1))
    np.testing.assert_array_equal(np.nanmean(x, axis=1).data, np.nanmean(x0, axis=1))
    (g,) = fd.grad(np.nansum(x), x)
    np.testing.assert_array_equal(g.data, [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    (g,) = fd.grad(np.sum(np.nanmean(x, axis=1)), x)
    np.testing.assert_array_equal(g.data, [[0.5, 0.0, 0.5], [0.0, 0.0, 1.0]])


def test_nanmean_of_an_all_nan_slice_is_nan_with_a_finite_gradient() -> None:
    x0 = np.array([[np.nan, np.nan], [1.0, 3.0]])
    x = fd.tensor(x0, requires_grad=True)
    y = np.nanmean(x, axis=1)
    assert np.isnan(y.data[0]) and y.data[1] == 2.0
    (g,) = fd.grad(y, x, grad_outputs=np.array([0.0, 1.0]), create_graph=True)
    np.testing.assert_array_equal(g.data, [[0.0, 0.0], [0.5, 0.5]])


# ---------------------------------------------------------------- norms
ZERO_NORMS = [
    ((4,), {}),
    ((4,), {"ord": 2}),
    ((4,), {"ord": 1}),
    ((4,), {"ord": np.inf}),
    ((4,), {"ord": -np.inf}),
    ((4,), {"ord": 3}),
    ((4,), {"ord": 0.5}),
    ((4,), {"ord": -2}),
    ((4,), {"ord": 0}),
    ((2, 3), {}),
    ((2, 3), {"ord": "fro"}),
    ((2, 3), {"ord": 1}),
    ((2, 3), {"ord": -np.inf}),
    ((2, 3), {"ord": "nuc"}),
    ((2, 3), {"ord": 2}),
    ((2, 3), {"ord": -2}),
    ((2, 3, 2), {"axis": -1, "keepdims": True}),
    ((2, 3, 2), {"ord": 4, "axis": 1}),
    ((2, 3, 2), {"axis": (0, 2)}),
]


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # NumPy's own, ord < 0
@pytest.mark.parametrize("shape, kwargs", ZERO_NORMS, ids=lambda p: str(p))
def test_norm_at_zero_has_gradient_zero_at_two_orders(shape, kwargs) -> None:
    x0 = np.zeros(shape)

    def f(x):
        return np.sum(np.linalg.norm(x, **kwargs))

    assert float(f(x0)) == 0.0
    g = gradient(f, x0)
    assert np.all(np.isfinite(g))
    np.testing.assert_array_equal(g, np.zeros(shape))
    if kwargs.get("ord") in ("nuc", 2, -2) and len(shape) == 2:
        from funcdiff.rules import FUNCTION_RULES  # second order needs the SVD's rule

        if np.linalg.svd not in FUNCTION_RULES:
            return
    h = hessian(f, x0)
    assert np.all(np.isfinite(h))
    np.testing.assert_array_equal(h, np.zeros((x0.size, x0.size)))


def test_norm_with_some_zero_entries_is_finite() -> None:
    x0 = np.array([0.0, 3.0, -4.0, 0.0])
    np.testing.assert_allclose(gradient(np.linalg.norm, x0), x0 / 5.0)
    h = hessian(np.linalg.norm, x0)
    np.testing.assert_allclose(h, (np.eye(4) - np.outer(x0, x0) / 25.0) / 5.0, atol=1e-15)
    g = gradient(lambda x: np.linalg.norm(x, 0.5), x0)  # zero entries get 0 (p < 1)
    n = np.linalg.norm(x0, 0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(x0 != 0, np.sign(x0) * (np.abs(x0) / n) ** -0.5, 0.0)
    np.testing.assert_allclose(g, expected)


def test_general_p_norm_matches_the_formula() -> None:
    rng = np.random.default_rng(6)
    x0 = rng.standard_normal(5)
    for p in (3.0, 1.5, -1.0):
        n = np.sum(np.abs(x0) ** p) ** (1 / p)
        expected = np.sign(x0) * np.abs(x0) ** (p - 1) * n ** (1 - p)
        np.testing.assert_allclose(gradient(lambda x, p=p: np.linalg.norm(x, p), x0), expected)


def test_inf_norm_ties_across_signs() -> None:
    g = gradient(lambda x: np.linalg.norm(x, np.inf), np.array([-2.0, 1.0, 2.0]))
    np.testing.assert_array_equal(g, [-0.5, 0.0, 0.5])


def test_nuclear_norm_gradient_is_u_vt_and_min_norm_when_rank_deficient() -> None:
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal((3, 4))
    u, _, vh = np.linalg.svd(x0, full_matrices=False)
    np.testing.assert_allclose(gradient(lambda x: np.linalg.norm(x, "nuc"), x0), u @ vh, atol=1e-12)
    rank1 = np.outer([1.0, 2.0, -1.0], [0.5, 0.0, 1.0, 2.0])
    g = gradient(lambda x: np.linalg.norm(x, "nuc"), rank1)
    expected = rank1 / np.linalg.norm(rank1)  # u1 v1^T of a rank-one matrix
    np.testing.assert_allclose(g, expected, atol=1e-12)
    g2 = gradient(lambda x: np.linalg.norm(x, 2), x0)
    np.testing.assert_allclose(g2, np.outer(u[:, 0], vh[0]), atol=1e-12)


def test_matrix_one_and_inf_norms_match_numpy_and_pick_the_extreme_column() -> None:
    x0 = np.array([[1.0, -5.0], [2.0, 0.5]])
    x = fd.tensor(x0, requires_grad=True)
    for ord_ in (1, -1, np.inf, -np.inf, "fro", 2, -2, "nuc"):
        assert np.linalg.norm(x, ord_).data == pytest.approx(np.linalg.norm(x0, ord_), rel=1e-14)
    g = gradient(lambda x: np.linalg.norm(x, 1), x0)  # column 1 has |.| sum 5.5
    np.testing.assert_array_equal(g, [[0.0, -1.0], [0.0, 1.0]])
    g = gradient(lambda x: np.linalg.norm(x, np.inf), x0)  # row 0 has |.| sum 6
    np.testing.assert_array_equal(g, [[1.0, -1.0], [0.0, 0.0]])


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"keepdims": True},
        {"axis": 1},
        {"axis": -1, "keepdims": True, "ord": 3},
        {"axis": (2, 0), "ord": "fro"},
        {"axis": (0, 1), "ord": np.inf, "keepdims": True},
        {"axis": (1, 2), "ord": "nuc"},
    ],
)
def test_norm_values_and_shapes_match_numpy(kwargs) -> None:
    x0 = np.random.default_rng(8).standard_normal((2, 3, 4))
    y = np.linalg.norm(fd.tensor(x0, requires_grad=True), **kwargs)
    ref = np.linalg.norm(x0, **kwargs)
    assert y.shape == np.shape(ref)
    np.testing.assert_allclose(y.data, ref, rtol=1e-14)


def test_norm_rejects_bad_orders_and_axes() -> None:
    x = fd.tensor(np.ones((2, 3, 4)), requires_grad=True)
    with pytest.raises(ValueError, match="vectors"):
        np.linalg.norm(x, "fro", axis=0)
    with pytest.raises(ValueError, match="matrices"):
        np.linalg.norm(x, 3, axis=(0, 1))
    with pytest.raises(ValueError, match="axis"):
        np.linalg.norm(x, 2)
    with pytest.raises(np.exceptions.AxisError):
        np.linalg.norm(x, axis=3)


def test_array_api_vector_and_matrix_norms() -> None:
    x0 = np.random.default_rng(9).standard_normal((2, 3, 4))
    x = fd.tensor(x0, requires_grad=True)
    for kw in ({}, {"axis": (0, 2), "ord": 1.5, "keepdims": True}, {"axis": 1, "ord": -np.inf}):
        ref = np.linalg.vector_norm(x0, **kw)
        np.testing.assert_allclose(np.linalg.vector_norm(x, **kw).data, ref, rtol=1e-14)
    for kw in ({}, {"ord": "nuc"}, {"ord": np.inf, "keepdims": True}):
        ref = np.linalg.matrix_norm(x0, **kw)
        np.testing.assert_allclose(np.linalg.matrix_norm(x, **kw).data, ref, rtol=1e-14)


# ---------------------------------------------------------------- signatures and routes
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda x: np.sum(x, out=np.zeros(3)), "out"),
        (lambda x: np.sum(x, where=np.ones((2, 3), bool)), "where"),
        (lambda x: np.mean(x, where=np.ones((2, 3), bool)), "where"),
        (lambda x: np.prod(x, initial=2.0), "initial"),
        (lambda x: np.max(x, initial=0.0), "initial"),
        (lambda x: np.min(x, axis=0, where=np.ones((2, 3), bool), initial=9.0), "initial"),
        (lambda x: np.var(x, mean=np.zeros((1, 3))), "mean"),
        (lambda x: np.cumsum(x, out=np.zeros(6)), "out"),
        (lambda x: np.trace(x, out=np.zeros(())), "out"),
    ],
)
def test_unsupported_keywords_raise_a_type_error_naming_them(call, name: str) -> None:
    x = fd.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(TypeError, match=f"{name}="):
        call(x)


def test_unknown_keywords_raise_type_error() -> None:
    x = fd.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(TypeError, match="bogus"):
        np.sum(x, bogus=1)


def test_sum_initial_and_explicit_keepdims_default() -> None:
    x = fd.tensor(np.ones((2, 3)), requires_grad=True)
    y = np.sum(x, axis=1, initial=1.5)
    np.testing.assert_array_equal(y.data, [4.5, 4.5])
    (g,) = fd.grad(np.sum(y), x)
    np.testing.assert_array_equal(g.data, np.ones((2, 3)))


@pytest.mark.parametrize(
    "method",
    [
        lambda a: np.add.reduce(a),
        lambda a: np.add.reduce(a, axis=1, keepdims=True),
        lambda a: np.multiply.reduce(a, 1),
        lambda a: np.maximum.reduce(a, axis=None),
        lambda a: np.minimum.reduce(a),
        lambda a: np.add.accumulate(a, 1),
        lambda a: np.multiply.accumulate(a),
    ],
)
def test_ufunc_methods_follow_numpy_axis_defaults(method) -> None:
    x0 = np.array([[1.0, 0.0, 3.0], [2.0, 5.0, -1.0]])
    x = fd.tensor(x0, requires_grad=True)
    y = method(x)
    np.testing.assert_array_equal(y.data, method(x0))
    (g,) = fd.grad(np.sum(y), x)
    eps = 1e-6
    fd_grad = np.zeros_like(x0)
    for idx in np.ndindex(x0.shape):
        xp, xm = x0.copy(), x0.copy()
        xp[idx] += eps
        xm[idx] -= eps
        fd_grad[idx] = (np.sum(method(xp)) - np.sum(method(xm))) / (2 * eps)
    np.testing.assert_allclose(g.data, fd_grad, atol=1e-8)


def test_tensor_methods_reach_the_rules() -> None:
    x0 = np.array([[1.0, 2.0, 2.0], [0.0, -1.0, 3.0]])
    x = fd.tensor(x0, requires_grad=True)
    np.testing.assert_array_equal(x.sum(axis=0).data, x0.sum(axis=0))
    np.testing.assert_array_equal(x.prod(axis=-1, keepdims=True).data, x0.prod(-1, keepdims=True))
    np.testing.assert_array_equal(x.min(axis=1).data, x0.min(axis=1))
    np.testing.assert_array_equal(x.cumsum(axis=1).data, x0.cumsum(axis=1))
    (g,) = fd.grad(x.max(axis=1, keepdims=True).sum(), x)
    np.testing.assert_array_equal(g.data, [[0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])
    assert x.prod().grad_fn.name() == "ProdBackward"


def test_float32_gradients_keep_their_dtype() -> None:
    x = fd.tensor(np.array([1.0, 0.0, 2.0], dtype=np.float32), requires_grad=True)
    (g,) = fd.grad(np.prod(x) + np.linalg.norm(x) + np.max(x), x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g.data, [0.0 + 1 / 5**0.5, 2.0, 2 / 5**0.5 + 1.0], rtol=1e-6)
