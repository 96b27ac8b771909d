"""funcdiff.stats: SciPy's values, exact derivatives, edge conventions, errors, a fit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import funcdiff as fd
from funcdiff import optimize, stats
from funcdiff.functional import hessian

CONTINUOUS = ["norm", "t", "gamma", "beta", "chi2", "expon", "lognorm", "laplace", "cauchy"]
METHODS = ["logpdf", "pdf", "logcdf", "cdf", "logsf", "sf"]
DISCRETE_METHODS = ["logpmf", "pmf", "logcdf", "cdf", "logsf", "sf"]
SHAPES = {"t": (3.5,), "gamma": (2.2,), "beta": (1.5, 2.5), "chi2": (3.0,), "lognorm": (0.7,)}
NO_CLOSED_FORM = {"t": {"df"}, "gamma": {"a"}, "beta": {"a", "b"}, "chi2": {"df"}}
# Standardised points: tails, the support's edges and outside it.
POINTS = {
    "norm": [-30.0, -3.0, 0.2, 5.0, 40.0],
    "t": [-50.0, -2.0, 0.3, 4.0, 1e4],
    "gamma": [-1.0, 0.0, 1e-3, 0.5, 3.0, 40.0],
    "beta": [-0.1, 0.0, 0.01, 0.5, 0.99, 1.0, 1.2],
    "chi2": [-1.0, 0.0, 0.3, 5.0, 80.0],
    "expon": [-1.0, 0.0, 0.3, 5.0, 40.0],
    "lognorm": [-1.0, 0.0, 0.01, 1.0, 20.0],
    "laplace": [-30.0, -3.0, 0.5, 4.0, 30.0],
    "cauchy": [-1e200, -5.0, 0.3, 0.9, 1e10],
}
LOC, SCALE = 0.1, 1.3


def quiet(f, *args, **kwargs):
    """SciPy's own value (SciPy itself warns at some of these points)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kwargs)


def frozen_shape(name: str, method: str, shape: str) -> bool:
    return method in ("logcdf", "cdf", "logsf", "sf") and shape in NO_CLOSED_FORM.get(name, ())


def tensors(name: str, method: str, values: tuple) -> list:
    return [
        fd.tensor(v, requires_grad=not frozen_shape(name, method, s))
        for s, v in zip(st_shapes(name), values)
    ]


def st_shapes(name: str) -> tuple[str, ...]:
    return stats.__dict__[name].shapes


def assert_like_scipy(got: np.ndarray, ref: np.ndarray) -> None:
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape
    finite = np.isfinite(ref)
    np.testing.assert_array_equal(got[~finite], ref[~finite])
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", CONTINUOUS)
def test_values_equal_scipy_and_gradients_are_finite(name: str, method: str) -> None:
    x = np.array(POINTS[name]) * SCALE + LOC
    shapes = SHAPES.get(name, ())
    ref = getattr(getattr(st, name), method)(x, *shapes, loc=LOC, scale=SCALE)
    xt = fd.tensor(x, requires_grad=True)
    loc, scale = fd.tensor(LOC, requires_grad=True), fd.tensor(SCALE, requires_grad=True)
    shape_ts = tensors(name, method, shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = getattr(stats.__dict__[name], method)(xt, *shape_ts, loc=loc, scale=scale)
        assert_like_scipy(out.data, ref)
        wanted = [xt, loc, scale] + [s for s in shape_ts if s.requires_grad]
        grads = fd.grad(out.sum(), wanted, allow_unused=True, materialize_grads=True)
    for g in grads:
        assert not np.any(np.isnan(g.data)), (name, method, g)
    # Where SciPy's value is not finite (outside the support, an edge), the gradient is 0.
    assert np.all(grads[0].data[~np.isfinite(ref)] == 0.0)


@pytest.mark.parametrize("method", DISCRETE_METHODS)
def test_poisson_values_equal_scipy(method: str) -> None:
    k = np.array([-1.0, 0.0, 1.0, 2.5, 3.0, 20.0, 60.0])
    for mu in (0.0, 2.5, 40.0):
        ref = getattr(st.poisson, method)(k, mu)
        mt = fd.tensor(mu, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = getattr(stats.poisson, method)(k, mt)
            assert_like_scipy(out.data, ref)
            (g,) = fd.grad(out.sum(), mt)
        assert np.isfinite(g.data)


def test_norm_logcdf_deep_in_the_tail() -> None:
    x = fd.tensor([-30.0, -1e3], requires_grad=True)
    out = stats.norm.logcdf(x)
    assert_like_scipy(out.data, st.norm.logcdf(x.data))
    (g,) = fd.grad(out.sum(), x)
    # d/dx log Phi(x) = phi(x) / Phi(x) -> -x for x -> -inf (Mills ratio).
    np.testing.assert_allclose(g.data, -x.data, rtol=2e-3)


def test_laplace_log_density_is_finite_where_scipy_underflows() -> None:
    x = fd.tensor([-800.0, 800.0], requires_grad=True)
    out = stats.laplace.logpdf(x)
    np.testing.assert_allclose(out.data, -800.0 - np.log(2.0), rtol=1e-15)
    (g,) = fd.grad(out.sum(), x)
    np.testing.assert_array_equal(g.data, [1.0, -1.0])


def test_plain_inputs_return_scipy_results_exactly() -> None:
    x = np.linspace(-1.0, 4.0, 7)
    for name in CONTINUOUS:
        for method in METHODS:
            ours = getattr(stats.__dict__[name], method)(x, *SHAPES.get(name, ()), 0.2, 1.5)
            ref = getattr(getattr(st, name), method)(x, *SHAPES.get(name, ()), 0.2, 1.5)
            assert type(ours) is type(ref)
            np.testing.assert_array_equal(ours, ref)
    assert type(stats.norm.logpdf(0.5)) is type(st.norm.logpdf(0.5))
    assert stats.gamma.cdf(2.0, a=3.0, scale=2.0) == st.gamma.cdf(2.0, a=3.0, scale=2.0)
    np.testing.assert_array_equal(stats.poisson.logpmf([0, 2], 1.5), st.poisson.logpmf([0, 2], 1.5))
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    assert stats.multivariate_normal.logpdf([0.1, 0.2], [0, 0], cov) == (
        st.multivariate_normal.logpdf([0.1, 0.2], [0, 0], cov)
    )
    assert stats.dirichlet.logpdf([0.2, 0.8], [2.0, 3.0]) == st.dirichlet.logpdf(
        [0.2, 0.8], [2.0, 3.0]
    )


def test_norm_logpdf_gradient_matches_the_closed_form() -> None:
    x = np.array([-1.0, 0.5, 2.0])
    loc = fd.tensor(0.3, requires_grad=True)
    scale = fd.tensor(1.7, requires_grad=True)
    xt = fd.tensor(x, requires_grad=True)
    out = stats.norm.logpdf(xt, loc=loc, scale=scale)
    gx, gl, gs = fd.grad(out.sum(), [xt, loc, scale])
    r = x - 0.3
    np.testing.assert_allclose(gx.data, -r / 1.7**2, rtol=1e-14)
    np.testing.assert_allclose(gl.data, np.sum(r) / 1.7**2, rtol=1e-14)
    np.testing.assert_allclose(gs.data, np.sum(-1 / 1.7 + r**2 / 1.7**3), rtol=1e-14)


def test_gamma_logpdf_gradient_in_the_shape_is_log_x_minus_digamma() -> None:
    a = fd.tensor(2.5, requires_grad=True)
    (g,) = fd.grad(stats.gamma.logpdf(3.0, a, scale=2.0), a)
    np.testing.assert_allclose(g.data, np.log(1.5) - sp.digamma(2.5), rtol=1e-14)


# Points inside the support (standardised) for the finite-difference checks.
INSIDE = {
    "norm": 0.7,
    "t": -1.2,
    "gamma": 1.4,
    "beta": 0.35,
    "chi2": 2.1,
    "expon": 0.8,
    "lognorm": 1.6,
    "laplace": -0.6,
    "cauchy": 1.9,
}


def _parameters(name: str, method: str) -> tuple[list[float], list[bool]]:
    """(x, loc, scale, *shapes) at a test point, and which are differentiated."""
    shapes = list(SHAPES.get(name, ()))
    values = [INSIDE[name] * SCALE + LOC, LOC, SCALE, *shapes]
    diff = [True, True, True] + [not frozen_shape(name, method, s) for s in st_shapes(name)]
    return values, diff


def _function(name: str, method: str, values: list, diff: list):
    def f(v):
        full = list(values)
        for i, j in enumerate([k for k, d in enumerate(diff) if d]):
            full[j] = v[i]
        x, loc, scale, *shapes = full
        return getattr(stats.__dict__[name], method)(x, *shapes, loc=loc, scale=scale)

    return f


def _central(f, v: np.ndarray, h: float = 1e-5) -> np.ndarray:
    out = []
    for i in range(v.size):
        e = np.zeros_like(v)
        e[i] = h
        out.append((np.asarray(f(v + e)) - np.asarray(f(v - e))) / (2 * h))
    return np.stack(out, axis=-1)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", CONTINUOUS)
def test_first_and_second_derivatives_match_finite_differences(name: str, method: str) -> None:
    values, diff = _parameters(name, method)
    f = _function(name, method, values, diff)
    v0 = np.array([v for v, d in zip(values, diff) if d])

    def grad_of(v):
        vt = fd.tensor(v, requires_grad=True)
        return fd.grad(f(vt), vt)[0].data

    np.testing.assert_allclose(grad_of(v0), _central(lambda v: f(v), v0), rtol=1e-6, atol=1e-8)
    h = hessian(f, fd.tensor(v0)).data
    np.testing.assert_allclose(h, h.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h, _central(grad_of, v0), rtol=1e-5, atol=1e-7)


def test_multivariate_normal_gradients_match_the_closed_forms() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 3))
    cov = a @ a.T + np.eye(3)
    x = rng.standard_normal((4, 3))
    mean = fd.tensor(rng.standard_normal(3), requires_grad=True)
    ct = fd.tensor(cov, requires_grad=True)
    out = stats.multivariate_normal.logpdf(x, mean, ct)
    np.testing.assert_allclose(
        out.data, st.multivariate_normal.logpdf(x, mean.data, cov), rtol=1e-12
    )
    gm, gc = fd.grad(out.sum(), [mean, ct])
    inv = np.linalg.inv(cov)
    d = x - mean.data
    np.testing.assert_allclose(gm.data, inv @ d.sum(0), rtol=1e-10)
    expected = sum(-0.5 * (inv - inv @ np.outer(r, r) @ inv) for r in d)
    np.testing.assert_allclose(gc.data, expected, rtol=1e-10, atol=1e-12)
    # Second order: the Hessian in the mean is -n cov^-1.
    h = hessian(lambda m: np.sum(stats.multivariate_normal.logpdf(x, m, cov)), mean.detach())
    np.testing.assert_allclose(h.data, -4 * inv, rtol=1e-10)


def test_dirichlet_gradient_in_alpha_is_log_x_minus_digammas() -> None:
    x = np.array([0.2, 0.3, 0.5])
    alpha = fd.tensor([0.8, 2.0, 3.5], requires_grad=True)
    out = stats.dirichlet.logpdf(x, alpha)
    np.testing.assert_allclose(out.data, st.dirichlet.logpdf(x, alpha.data), rtol=1e-13)
    (g,) = fd.grad(out, alpha)
    expected = np.log(x) - sp.digamma(alpha.data) + sp.digamma(alpha.data.sum())
    np.testing.assert_allclose(g.data, expected, rtol=1e-12)
    # With k - 1 components the last is 1 - sum: d/dx_i = (a_i - 1)/x_i - (a_k - 1)/x_k.
    xt = fd.tensor(x[:2], requires_grad=True)
    (gx,) = fd.grad(stats.dirichlet.logpdf(xt, alpha.detach()), xt)
    a = alpha.data
    np.testing.assert_allclose(gx.data, (a[:2] - 1) / x[:2] - (a[2] - 1) / x[2], rtol=1e-12)


@pytest.mark.parametrize(
    "call, name, argument",
    [
        (lambda s: stats.gamma.cdf(1.0, s), "gamma.cdf", "a"),
        (lambda s: stats.gamma.logsf(1.0, a=s), "gamma.logsf", "a"),
        (lambda s: stats.chi2.sf(1.0, s), "chi2.sf", "df"),
        (lambda s: stats.t.cdf(1.0, s), "t.cdf", "df"),
        (lambda s: stats.beta.logcdf(0.3, s, 2.0), "beta.logcdf", "a"),
        (lambda s: stats.beta.cdf(0.3, 2.0, s), "beta.cdf", "b"),
    ],
)
def test_derivatives_without_a_closed_form_raise(call, name: str, argument: str) -> None:
    s = fd.tensor(2.0, requires_grad=True)
    with pytest.raises(NotImplementedError) as info:
        call(s)
    message = str(info.value)
    assert f"funcdiff.stats.{name} is differentiable in x, loc and scale" in message
    assert f"not in the shape {argument}" in message
    assert "no closed form" in message
    # Without grad the value is SciPy's, and other arguments stay differentiable.
    with fd.no_grad():
        assert call(s).data == pytest.approx(call(2.0), rel=1e-14)
    assert call(s.detach()).data == pytest.approx(call(2.0), rel=1e-14)


def test_gamma_cdf_is_differentiable_in_x_with_a_constant_shape() -> None:
    x = fd.tensor(1.3, requires_grad=True)
    (g,) = fd.grad(stats.gamma.cdf(x, 2.0, scale=0.5), x)
    np.testing.assert_allclose(g.data, st.gamma.pdf(1.3, 2.0, scale=0.5), rtol=1e-13)


def test_support_edges_and_invalid_parameters_give_scipy_values_and_zero_gradients() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = fd.tensor(2.0, requires_grad=True)
        scale = fd.tensor(1.0, requires_grad=True)
        x = fd.tensor([-1.0, 0.0, 1.0], requires_grad=True)
        out = stats.gamma.logpdf(x, a, scale=scale)
        assert_like_scipy(out.data, quiet(st.gamma.logpdf, [-1.0, 0.0, 1.0], 2.0))
        gx, ga, gs = fd.grad(out.sum(), [x, a, scale])
        np.testing.assert_array_equal(gx.data, [0.0, 0.0, 0.0])  # (a - 1)/x - 1 = 0 at x = 1
        assert ga.data == pytest.approx(-sp.digamma(2.0))  # only x = 1 contributes
        assert gs.data == pytest.approx(-1.0)  # -(a - 1) - 1 + x = -1 at x = 1
        # Exponential (a = 1) at x = 0: a finite value, slope -1 from the right.
        x0 = fd.tensor(0.0, requires_grad=True)
        (g0,) = fd.grad(stats.gamma.logpdf(x0, 1.0), x0)
        assert g0.data == -1.0
        # scale <= 0 and a <= 0 give nan, as SciPy, with gradient 0.
        bad = fd.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        out = stats.norm.logpdf(0.5, scale=bad)
        assert_like_scipy(out.data, quiet(st.norm.logpdf, 0.5, scale=[-1.0, 0.0, 2.0]))
        (gb,) = fd.grad(out.sum(), bad)
        np.testing.assert_array_equal(gb.data[:2], [0.0, 0.0])
        shape = fd.tensor([-1.0, 2.0], requires_grad=True)
        out = stats.gamma.logpdf(1.0, shape)
        assert np.isnan(out.data[0])
        assert fd.grad(out[1], shape)[0].data[0] == 0.0
        # Beta and lognorm at the edges; a nan datum stays nan.
        xb = fd.tensor([0.0, 1.0, np.nan], requires_grad=True)
        out = stats.beta.logpdf(xb, 2.0, 3.0)
        assert_like_scipy(out.data, quiet(st.beta.logpdf, [0.0, 1.0, np.nan], 2.0, 3.0))
        np.testing.assert_array_equal(fd.grad(out.sum(), xb)[0].data, [0.0, 0.0, 0.0])
        out = stats.lognorm.pdf(fd.tensor([0.0, 1.0], requires_grad=True), 0.5)
        assert_like_scipy(out.data, quiet(st.lognorm.pdf, [0.0, 1.0], 0.5))
        # CDFs beyond the support are the constants 0 and 1.
        xc = fd.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        out = stats.beta.cdf(xc, 2.0, 3.0)
        np.testing.assert_array_equal(out.data, [0.0, 0.0, 1.0])
        np.testing.assert_array_equal(fd.grad(out.sum(), xc)[0].data, [0.0, 0.0, 0.0])
        # Poisson at mu = 0: pmf(0) = 1 with slope -1; pmf(k > 0) = 0 with slope 0 (k = 1: 1).
        mu = fd.tensor(0.0, requires_grad=True)
        out = stats.poisson.logpmf(np.array([0.0, 2.0]), mu)
        assert_like_scipy(out.data, quiet(st.poisson.logpmf, [0.0, 2.0], 0.0))
        assert fd.grad(out.sum(), mu)[0].data == -1.0


def test_frozen_distributions_and_argument_errors() -> None:
    s = fd.tensor(2.0, requires_grad=True)
    frozen = stats.gamma(3.0, scale=s)
    np.testing.assert_allclose(frozen.logpdf(1.5).data, st.gamma.logpdf(1.5, 3.0, scale=2.0))
    np.testing.assert_allclose(frozen.sf(1.5).data, st.gamma.sf(1.5, 3.0, scale=2.0))
    (g,) = fd.grad(frozen.logpdf(1.5), s)
    np.testing.assert_allclose(g.data, -3.0 / 2.0 + 1.5 / 4.0, rtol=1e-14)
    m = fd.tensor([0.0, 1.0], requires_grad=True)
    mvn = stats.multivariate_normal(m, np.eye(2))
    np.testing.assert_allclose(
        mvn.logpdf([0.5, 0.5]).data, st.multivariate_normal.logpdf([0.5, 0.5], [0, 1])
    )
    assert stats.norm(0.0, 2.0).cdf(1.0) == st.norm(0.0, 2.0).cdf(1.0)
    with pytest.raises(AttributeError, match="pmf"):
        getattr(stats.norm(0.0, 1.0), "pmf")  # noqa: B009
    with pytest.raises(TypeError, match="missing the shape parameter"):
        stats.gamma.logpdf(fd.tensor(1.0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'sigma'"):
        stats.norm.logpdf(fd.tensor(1.0), sigma=2.0)
    with pytest.raises(ValueError, match="positive definite"):
        stats.multivariate_normal.logpdf(fd.tensor([0.0, 0.0]), cov=-np.eye(2))
    with pytest.raises(ValueError, match="sum to 1"):
        stats.dirichlet.logpdf(fd.tensor([0.2, 0.2]), [1.0, 2.0])


def test_maximum_likelihood_fit_of_a_gamma_distribution() -> None:
    rng = np.random.default_rng(12)
    data = st.gamma.rvs(3.0, scale=1.5, size=4000, random_state=rng)

    def nll(theta):
        # Log-parameters keep a and scale positive during the search.
        return -np.mean(stats.gamma.logpdf(data, np.exp(theta[0]), scale=np.exp(theta[1])))

    res = optimize.minimize(nll, np.array([0.0, 0.0]), method="trust-exact")
    assert res.success
    a_hat, scale_hat = np.exp(res.x)
    ref_a, _, ref_scale = st.gamma.fit(data, floc=0.0)
    np.testing.assert_allclose([a_hat, scale_hat], [ref_a, ref_scale], rtol=1e-5)
    np.testing.assert_allclose([a_hat, scale_hat], [3.0, 1.5], rtol=0.08)


def test_maximum_likelihood_fit_of_a_t_distribution() -> None:
    rng = np.random.default_rng(5)
    data = st.t.rvs(4.0, loc=1.0, scale=0.5, size=3000, random_state=rng)

    def nll(theta):
        df, loc, scale = np.exp(theta[0]), theta[1], np.exp(theta[2])
        return -np.sum(stats.t.logpdf(data, df, loc=loc, scale=scale))

    res = optimize.minimize(nll, np.array([1.0, 0.0, 0.0]), method="BFGS")
    df, loc, scale = np.exp(res.x[0]), res.x[1], np.exp(res.x[2])
    np.testing.assert_allclose([df, loc, scale], [4.0, 1.0, 0.5], rtol=0.15)
    assert np.linalg.norm(optimize.derivatives(nll).jac(res.x)) < 1e-3
