"""The table of funcdiff replacements for SciPy functions that refuse Tensors, and the
refusal messages that name them."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy
import scipy.special
import scipy.stats

import funcdiff as fd
from funcdiff._core.alternatives import (
    SCIPY_ALTERNATIVES,
    STATS_METHODS_OF,
    alternative,
)


def _resolve(dotted: str) -> object:
    module_name, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module_name), name)


def _stats_targets() -> list[str]:
    return [
        f"funcdiff.stats.{dist}.{method}"
        for dist in sorted(STATS_METHODS_OF)
        for method in sorted(STATS_METHODS_OF[dist])
        if hasattr(getattr(scipy.stats, dist), method)
    ]


@pytest.mark.parametrize("source", sorted(SCIPY_ALTERNATIVES))
def test_every_scipy_source_and_funcdiff_target_exists(source: str) -> None:
    assert callable(_resolve(source))
    assert callable(_resolve(SCIPY_ALTERNATIVES[source]))


@pytest.mark.parametrize("target", _stats_targets())
def test_every_stats_target_exists(target: str) -> None:
    module, dist, method = target.rsplit(".", 2)
    assert callable(getattr(getattr(importlib.import_module(module), dist), method))


def test_alternative_names_the_stats_method_and_nothing_unknown() -> None:
    assert alternative("scipy.stats.norm.logpdf") == "funcdiff.stats.norm.logpdf"
    assert alternative("scipy.stats.poisson.logpmf") == "funcdiff.stats.poisson.logpmf"
    assert alternative("scipy.stats.norm.rvs") is None
    assert alternative("scipy.stats.weibull_min.logpdf") is None
    assert alternative("scipy.special.spence") is None


def _message(call) -> str:
    with pytest.raises(RuntimeError) as info:
        call()
    return str(info.value)


X = np.array([0.3, 1.2])


@pytest.mark.parametrize(
    ("call", "dist", "method"),
    [
        (lambda v: scipy.stats.norm.logpdf(v), "norm", "logpdf"),
        (lambda v: scipy.stats.norm.logpdf(1.0, loc=v), "norm", "logpdf"),
        (lambda v: scipy.stats.norm(0.0, 2.0).cdf(v), "norm", "cdf"),
        (lambda v: scipy.stats.t.logsf(v, 3.0), "t", "logsf"),
        (lambda v: scipy.stats.gamma.pdf(v, 2.0), "gamma", "pdf"),
        (lambda v: scipy.stats.poisson.logpmf(2.0, v), "poisson", "logpmf"),
        (
            lambda v: scipy.stats.multivariate_normal.logpdf(v, np.zeros(2)),
            "multivariate_normal",
            "logpdf",
        ),
        (
            lambda v: scipy.stats.multivariate_normal(np.zeros(2)).pdf(v),
            "multivariate_normal",
            "pdf",
        ),
        (
            lambda v: scipy.stats.dirichlet.logpdf(np.array([0.3, 0.7]), v + 1.0),
            "dirichlet",
            "logpdf",
        ),
    ],
)
def test_a_stats_method_names_its_funcdiff_stats_replacement(call, dist, method) -> None:
    v = fd.tensor(X, requires_grad=True)
    msg = _message(lambda: call(v))
    assert f"scipy.stats.{dist}.{method} was called on it" in msg
    assert f"use funcdiff.stats.{dist}.{method}, which accepts Tensors" in msg


def test_a_stats_method_without_a_replacement_is_named_as_such() -> None:
    v = fd.tensor(X, requires_grad=True)
    msg = _message(lambda: scipy.stats.weibull_min.logpdf(v, 1.5))
    assert "funcdiff has no rule for scipy.stats.weibull_min.logpdf" in msg


@pytest.mark.parametrize(
    "call",
    [
        lambda t: np.array([t[0], t[1]]),
        lambda t: np.r_[t, 1.0],
        lambda t: np.c_[t, t],
        lambda t: np.asarray(t),
    ],
)
def test_building_an_ndarray_from_tensors_points_to_funcdiff_numpy(call) -> None:
    t = fd.tensor(X, requires_grad=True)
    msg = _message(lambda: call(t))
    assert msg.startswith("Can't convert a Tensor that requires grad to an ndarray")
    assert "use funcdiff.numpy (import funcdiff.numpy as np)" in msg
    assert "scipy." not in msg


def test_float_names_funcdiff_numpy_and_the_scipy_replacement() -> None:
    t = fd.tensor(1.5, requires_grad=True)
    assert "funcdiff.numpy (import funcdiff.numpy as np" in _message(lambda: float(t))
    msg = _message(lambda: scipy.integrate.quad(lambda s: t * s, 0.0, 1.0))
    assert "(scipy.integrate.quad called it" in msg
    assert "funcdiff has no rule for scipy.integrate.quad)" in msg
