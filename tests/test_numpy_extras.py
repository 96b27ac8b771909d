"""NumPy and SciPy functions added as one rule entry each, against independent truth:
NumPy's own values, closed forms, central differences and torch where it is installed.

The rule-table tests (tests/test_rules.py, test_complex_rules.py, test_sparse_patterns.py)
check every one of them against finite differences at first and second order; these
tests add what a case cannot express (nested lists, a branch of real_if_close) and
agreement with other libraries.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.special

import funcdiff as fd
from funcdiff import linalg
from funcdiff.check import gradcheck, gradgradcheck

RNG = np.random.default_rng(7)


def _grad(f, x):
    t = fd.tensor(x, requires_grad=True)
    (g,) = fd.grad(f(t), t)
    return g.numpy()


def _central(f, x, h=1e-6):
    """Central differences of the scalar f at x (ndarray in, ndarray out)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


# ---------------------------------------------------------------- values equal NumPy's
@pytest.mark.parametrize(
    "call",
    [
        lambda np_, a: np_.median(a, axis=1),
        lambda np_, a: np_.median(a, axis=(0, 1), keepdims=True),
        lambda np_, a: np_.quantile(a, [0.1, 0.7], axis=0, keepdims=True),
        lambda np_, a: np_.percentile(a, 33.0),
        lambda np_, a: np_.cov(a),
        lambda np_, a: np_.cov(a, rowvar=False, ddof=0),
        lambda np_, a: np_.corrcoef(a),
        lambda np_, a: np_.partition(a, 2, axis=1),
        lambda np_, a: np_.compress([1, 0, 1], a, axis=0),
        lambda np_, a: np_.diagflat(a[:2, :2], 1),
        lambda np_, a: np_.nancumsum(a, axis=0),
        lambda np_, a: np_.unwrap(4 * a, axis=0),
        lambda np_, a: np_.vander(a[0], 4),
        lambda np_, a: np_.linspace(a[0], a[1], 4, axis=1),
    ],
)
def test_values_equal_numpys(call) -> None:
    a = RNG.normal(size=(3, 5))
    got = call(np, fd.tensor(a, requires_grad=True))
    np.testing.assert_allclose(got.detach().numpy(), call(np, a), rtol=1e-12, atol=1e-12)


def test_nan_statistics_skip_nan_and_give_it_no_gradient() -> None:
    a = RNG.normal(size=(3, 4))
    a[0, 1] = a[2, 3] = np.nan
    t = fd.tensor(a, requires_grad=True)
    np.testing.assert_allclose(
        np.nanvar(t, axis=1, ddof=1).detach().numpy(), np.nanvar(a, axis=1, ddof=1)
    )
    np.testing.assert_allclose(np.nanstd(t).detach().numpy(), np.nanstd(a))
    (g,) = fd.grad(np.nanvar(t), t)
    # d/dx_i of the mean squared deviation over the n present entries: 2 (x_i - mean) / n.
    present = ~np.isnan(a)
    expected = np.where(present, 2 * (a - np.nanmean(a)) / present.sum(), 0.0)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-14)


def test_nested_block_matches_numpy_and_gradchecks() -> None:
    a, b, c = RNG.normal(size=(2, 2)), RNG.normal(size=(2, 1)), RNG.normal(size=(1, 3))
    ta, tb, tc = (fd.tensor(x, requires_grad=True) for x in (a, b, c))
    np.testing.assert_array_equal(
        np.block([[ta, tb], [tc]]).detach().numpy(), np.block([[a, b], [c]])
    )
    assert gradcheck(lambda x, y, z: np.block([[x, y], [z]]), (ta, tb, tc))
    assert gradgradcheck(lambda x, y, z: np.block([[x * x, y], [z]]), (ta, tb, tc))
    with pytest.raises(ValueError, match="depths are mismatched"):
        np.block([[ta], tb])


def test_real_if_close_takes_the_real_part_only_when_it_is_close() -> None:
    z = fd.tensor(np.array([1.0 + 1e-18j, 2.0 - 1e-17j]), requires_grad=True)
    out = np.real_if_close(z)
    assert out.dtype.kind == "f"
    (g,) = fd.grad(np.sum(out * out), z)
    np.testing.assert_allclose(g.numpy(), 2 * np.real(z.detach().numpy()))
    far = fd.tensor(np.array([1.0 + 0.5j]), requires_grad=True)
    assert np.real_if_close(far).dtype.kind == "c"


# ---------------------------------------------------------------- closed forms
def test_linspace_gradient_in_its_endpoints() -> None:
    start = fd.tensor(0.5, requires_grad=True)
    stop = fd.tensor(2.0, requires_grad=True)
    y = np.linspace(start, stop, 5)
    assert y.data[-1] == 2.0  # the last sample is stop exactly, as NumPy's
    gs, gt = fd.grad(np.sum(y * np.arange(5.0)), (start, stop))
    t = np.arange(5) / 4
    np.testing.assert_allclose(gs.numpy(), np.sum(np.arange(5.0) * (1 - t)))
    np.testing.assert_allclose(gt.numpy(), np.sum(np.arange(5.0) * t))


def test_vander_gradient_is_the_derivative_of_the_powers() -> None:
    x = np.array([0.0, 0.5, -1.5])
    g = _grad(lambda t: np.sum(np.vander(t, 4)), x)
    np.testing.assert_allclose(g, 3 * x**2 + 2 * x + 1)


def test_select_choose_compress_send_the_gradient_to_the_picked_entries() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    g = _grad(lambda t: np.sum(np.select([x > 2, x > 1], [t * t, 3 * t], default=-t)), x)
    np.testing.assert_allclose(g, [-1.0, 3.0, 6.0, 8.0])
    g = _grad(lambda t: np.sum(np.choose([1, 0, 1, 0], [t, 5 * t])), x)
    np.testing.assert_allclose(g, [5.0, 1.0, 5.0, 1.0])
    g = _grad(lambda t: np.sum(np.compress([True, False, True], t)), x)
    np.testing.assert_allclose(g, [1.0, 0.0, 1.0, 0.0])


def test_unwrap_has_the_identity_as_jacobian() -> None:
    p = np.array([0.1, 3.0, 6.5, 9.1, 12.9])
    t = fd.tensor(p, requires_grad=True)
    (g,) = fd.grad(np.sum(np.unwrap(t) * np.arange(5.0)), t)
    np.testing.assert_allclose(g.numpy(), np.arange(5.0))


def test_median_and_quantile_gradients_against_central_differences() -> None:
    a = RNG.permutation(np.linspace(-1, 1, 12)).reshape(3, 4)
    for f in (
        lambda x: np.sum(np.median(x, axis=1) ** 2),
        lambda x: np.sum(np.quantile(x, [0.2, 0.9], axis=0) ** 3),
        lambda x: np.percentile(x, 40.0),
    ):
        np.testing.assert_allclose(_grad(f, a), _central(f, a), atol=1e-8)


def test_solve_sylvester_with_diagonal_coefficients() -> None:
    # a = diag(p), b = diag(r): x_ij = q_ij / (p_i + r_j), so dx_ij/dq_ij = 1 / (p_i + r_j).
    p, r = np.array([1.0, 2.0, 3.0]), np.array([0.5, 4.0])
    q = RNG.normal(size=(3, 2))
    x = linalg.solve_sylvester(np.diag(p), np.diag(r), fd.tensor(q))
    np.testing.assert_allclose(x.numpy(), q / (p[:, None] + r[None, :]))
    g = _grad(lambda t: np.sum(linalg.solve_sylvester(np.diag(p), np.diag(r), t)), q)
    np.testing.assert_allclose(g, 1 / (p[:, None] + r[None, :]))
    ga = _grad(lambda t: np.sum(linalg.solve_sylvester(t, np.diag(r), q)), np.diag(p))
    f = lambda t: np.sum(scipy.linalg.solve_sylvester(t, np.diag(r), q))  # noqa: E731
    np.testing.assert_allclose(ga, _central(f, np.diag(p)), atol=1e-7)


def test_solve_banded_matches_the_dense_solve() -> None:
    n = 5
    a = np.diag(4.0 + RNG.uniform(size=n)) + np.diag(RNG.uniform(size=n - 1), 1)
    a += np.diag(RNG.uniform(size=n - 1), -1) + np.diag(RNG.uniform(size=n - 2), -2)
    lower, upper = 2, 1
    ab = np.zeros((lower + upper + 1, n))
    for i in range(n):
        for j in range(max(0, i - lower), min(n, i + upper + 1)):
            ab[upper + i - j, j] = a[i, j]
    b = RNG.normal(size=(n, 2))
    x = linalg.solve_banded((lower, upper), fd.tensor(ab), b)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b))
    w = RNG.normal(size=(n, 2))
    gb = _grad(lambda t: np.sum(w * linalg.solve_banded((lower, upper), ab, t)), b)
    np.testing.assert_allclose(gb, np.linalg.solve(a.T, w))
    gab = _grad(lambda t: np.sum(w * linalg.solve_banded((lower, upper), t, b)), ab)
    dense = -np.linalg.solve(a.T, w) @ np.linalg.solve(a, b).T
    expected = np.zeros_like(ab)
    for i in range(n):
        for j in range(max(0, i - lower), min(n, i + upper + 1)):
            expected[upper + i - j, j] = dense[i, j]
    np.testing.assert_allclose(gab, expected, atol=1e-12)
    assert gradgradcheck(
        lambda t, v: linalg.solve_banded((lower, upper), t, v),
        (fd.tensor(ab, requires_grad=True), fd.tensor(b, requires_grad=True)),
    )


def test_sqrtm_real_and_complex() -> None:
    a = RNG.normal(size=(3, 3))
    a = a @ a.T + np.eye(3)
    x = linalg.sqrtm(fd.tensor(a))
    np.testing.assert_allclose(x.numpy(), scipy.linalg.sqrtm(a))
    f = lambda m: np.sum(np.sin(scipy.linalg.sqrtm(m)))  # noqa: E731
    g = _grad(lambda t: np.sum(np.sin(linalg.sqrtm(t))), a)
    np.testing.assert_allclose(g, _central(f, a), atol=1e-7)
    z = fd.tensor(a + 0.3j * RNG.normal(size=(3, 3)), requires_grad=True)
    assert gradcheck(lambda m: linalg.sqrtm(m), (z,))
    assert gradgradcheck(lambda m: linalg.sqrtm(m), (z,))


def test_gammasgn_is_a_constant() -> None:
    x = fd.tensor([-0.5, 1.5, -1.5], requires_grad=True)
    s = scipy.special.gammasgn(x)
    np.testing.assert_array_equal(s.numpy(), [-1.0, 1.0, 1.0])
    assert not s.requires_grad


def test_complex_erf_derivative_is_the_gaussian() -> None:
    z = fd.tensor(np.array([0.3 + 0.4j, -1.0 + 0.2j]), requires_grad=True)
    assert gradcheck(lambda t: scipy.special.erf(t), (z,))
    assert gradgradcheck(lambda t: scipy.special.erfc(t), (z,))


def test_multivariate_normal_entropy_and_singular_covariance() -> None:
    from scipy import stats

    from funcdiff.stats import multivariate_normal as mvn

    c = np.array([[2.0, 0.3], [0.3, 1.0]])
    t = fd.tensor(c, requires_grad=True)
    np.testing.assert_allclose(
        mvn.entropy(cov=t).data, stats.multivariate_normal(None, c).entropy()
    )
    (g,) = fd.grad(mvn.entropy(cov=t), t)
    np.testing.assert_allclose(g.numpy(), 0.5 * np.linalg.inv(c))  # d log det / 2
    np.testing.assert_allclose(mvn(None, t).entropy().data, mvn.entropy(cov=c))
    # A singular covariance: pseudo-determinant and pseudo-inverse on the support.
    s = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    x = np.array([[0.3, 0.3, 0.1], [0.2, 0.5, 0.0]])  # the second is off the support
    got = mvn.logpdf(fd.tensor(x), cov=s, allow_singular=True)
    np.testing.assert_allclose(
        got.numpy(), stats.multivariate_normal.logpdf(x, cov=s, allow_singular=True)
    )
    np.testing.assert_allclose(
        mvn.entropy(cov=fd.tensor(s), allow_singular=True).numpy(),
        stats.multivariate_normal(None, s, allow_singular=True).entropy(),
    )
    # Along the support (directions (1, 1, 0) and (0, 0, 1)) the gradient matches SciPy's
    # differences.
    x0 = np.array([0.3, 0.3, 0.1])
    g = _grad(lambda v: mvn.logpdf(v, cov=s, allow_singular=True), x0)
    for d in (np.array([1.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])):
        f = lambda h, d=d: stats.multivariate_normal.logpdf(x0 + h * d, cov=s, allow_singular=True)  # noqa: E731
        np.testing.assert_allclose(g @ d, (f(1e-6) - f(-1e-6)) / 2e-6, rtol=1e-6)


# ---------------------------------------------------------------- torch
def test_against_torch() -> None:
    torch = pytest.importorskip("torch")
    a = RNG.normal(size=(3, 6))
    for ours, theirs in (
        (lambda x: np.sum(np.cov(x) ** 2), lambda x: torch.sum(torch.cov(x) ** 2)),
        (lambda x: np.sum(np.corrcoef(x) ** 3), lambda x: torch.sum(torch.corrcoef(x) ** 3)),
        (
            lambda x: np.sum(np.quantile(x, 0.3, axis=1) ** 2),
            lambda x: torch.sum(torch.quantile(x, 0.3, dim=1) ** 2),
        ),
        (lambda x: np.sum(np.var(x, axis=0)), lambda x: torch.sum(torch.var(x, 0, correction=0))),
    ):
        t = torch.tensor(a, requires_grad=True)
        theirs(t).backward()
        np.testing.assert_allclose(_grad(ours, a), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    z = a[:, :3] + 1j * RNG.normal(size=(3, 3))
    for ours, theirs in (
        (lambda x: np.sum(np.var(x, axis=1)), lambda x: torch.sum(torch.var(x, 1, correction=0))),
        (lambda x: np.std(x), lambda x: torch.std(x, correction=0)),
    ):
        t = torch.tensor(z, requires_grad=True)
        theirs(t).backward()
        # torch's gradient of a real loss of complex z is the conjugate Wirtinger form,
        # the same convention as funcdiff's public .grad.
        np.testing.assert_allclose(_grad(ours, z), t.grad.numpy(), rtol=1e-10, atol=1e-12)
