"""Differentiable ``scipy.stats`` distributions: log-likelihoods that accept Tensors.

SciPy's distribution methods convert their inputs with ``np.asarray``, so
``scipy.stats.norm.logpdf(t)`` cannot reach funcdiff. This module has the same names and
call signatures::

    funcdiff.stats.norm.logpdf(x, loc=0, scale=1)
    funcdiff.stats.gamma.logpdf(x, a, loc=0, scale=1)
    funcdiff.stats.poisson.logpmf(k, mu, loc=0)
    funcdiff.stats.multivariate_normal.logpdf(x, mean=None, cov=1)
    funcdiff.stats.dirichlet.logpdf(x, alpha)

When no argument is a Tensor the call goes to ``scipy.stats`` and returns exactly
SciPy's result. Otherwise it is computed with recorded NumPy and ``scipy.special``
calls and is differentiable to any order in the data and in every continuous parameter
(``loc``, ``scale``, shapes), with these exceptions, which raise ``NotImplementedError``
when the argument requires grad (values and other derivatives still work):

* ``gamma``, ``chi2``: ``logcdf``, ``cdf``, ``logsf``, ``sf`` in the shape (``a``,
  ``df``): ``d/da gammainc(a, x)`` has no closed form;
* ``t``: the same four in ``df``; ``beta``: the same four in ``a`` and ``b``.

``poisson``'s ``k`` and ``loc`` are integers: constants, whose gradient is zero.

SciPy's conventions hold: ``nan`` for invalid parameters (``scale <= 0``) and ``nan``
data, ``-inf`` log-density outside the support, CDFs of 0 and 1 beyond it. Those
entries, and entries whose value is infinite (the log-density at a support edge, a
log-CDF whose CDF underflows), have gradient 0, never NaN, and raise no warning. The
formulas are SciPy's, so values agree with SciPy's to rounding; the log-densities of
``laplace`` stay finite far in the tails, where SciPy's underflow to ``-inf``.

Calling a distribution freezes its parameters: ``norm(loc, scale).logpdf(x)``.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> from funcdiff import stats
>>> mu = fd.tensor(0.5, requires_grad=True)
>>> x = np.array([0.1, 1.2, 0.7])
>>> nll = -np.sum(stats.norm.logpdf(x, loc=mu, scale=2.0))
>>> (g,) = fd.grad(nll, mu)
>>> bool(np.isclose(g.data, -np.sum(x - 0.5) / 4.0))
True
>>> stats.norm.logpdf(0.0)  # plain input: SciPy's result
np.float64(-0.9189385332046727)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.stats

from funcdiff._core.tensor import Tensor
from funcdiff.rules import stats as _rules

__all__ = [
    "norm",
    "t",
    "gamma",
    "beta",
    "chi2",
    "expon",
    "lognorm",
    "laplace",
    "cauchy",
    "poisson",
    "multivariate_normal",
    "dirichlet",
    "Continuous",
    "Discrete",
    "Frozen",
]


def _any_tensor(*values: Any) -> bool:
    return any(isinstance(v, Tensor) for v in values)


class _Univariate:
    """Shared argument handling of :class:`Continuous` and :class:`Discrete`."""

    _params: tuple[str, ...] = ()

    def __init__(self, name: str) -> None:
        self.name = name
        self._spec = _rules.SPECS[name]
        self._scipy = getattr(scipy.stats, name)
        self.shapes = self._spec.shapes

    def __repr__(self) -> str:
        return f"funcdiff.stats.{self.name}"

    def _bind(self, method: str, args: tuple, kwds: dict) -> tuple[tuple, dict]:
        """SciPy's parameters by position or keyword -> (shapes, {loc, scale})."""
        names = self.shapes + self._params
        if len(args) > len(names):
            raise TypeError(
                f"funcdiff.stats.{self.name}.{method} takes at most {len(names)} parameters "
                f"after the data ({', '.join(names)}), got {len(args)}"
            )
        bound = dict(zip(names, args))
        for key, value in kwds.items():
            if key not in names:
                raise TypeError(
                    f"funcdiff.stats.{self.name}.{method} got an unexpected keyword argument "
                    f"{key!r}; its parameters are {', '.join(names)}"
                )
            if key in bound:
                raise TypeError(
                    f"funcdiff.stats.{self.name}.{method} got multiple values for {key!r}"
                )
            bound[key] = value
        missing = [s for s in self.shapes if s not in bound]
        if missing:
            raise TypeError(
                f"funcdiff.stats.{self.name}.{method} is missing the shape parameter(s) "
                f"{', '.join(missing)}"
            )
        shapes = tuple(bound.pop(s) for s in self.shapes)
        return shapes, bound

    def _call(self, method: str, x: Any, args: tuple, kwds: dict) -> Any:
        shapes, rest = self._bind(method, args, kwds)
        if not _any_tensor(x, *shapes, *rest.values()):
            return getattr(self._scipy, method)(x, *args, **kwds)
        return _rules.METHOD_FUNCTIONS[self.name, method](x, *shapes, **rest)

    def logcdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Log of the cumulative distribution function, as ``scipy.stats``."""
        return self._call("logcdf", x, args, kwds)

    def cdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Cumulative distribution function, as ``scipy.stats``."""
        return self._call("cdf", x, args, kwds)

    def logsf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Log of the survival function ``1 - cdf``, as ``scipy.stats``."""
        return self._call("logsf", x, args, kwds)

    def sf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Survival function ``1 - cdf``, as ``scipy.stats``."""
        return self._call("sf", x, args, kwds)

    def __call__(self, *args: Any, **kwds: Any) -> Frozen:
        """Freeze the parameters: ``dist(*args, **kwds).logpdf(x)``."""
        self._bind("__call__", args, kwds)
        return Frozen(self, args, kwds)


class Continuous(_Univariate):
    """A continuous distribution with ``scipy.stats``'s methods, accepting Tensors.

    Every method takes ``(x, *shapes, loc=0, scale=1)`` as SciPy's does.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.stats import gamma
    >>> a = fd.tensor(2.0, requires_grad=True)
    >>> lp = gamma.logpdf(1.5, a, scale=2.0)
    >>> (g,) = fd.grad(lp, a)   # log(x / scale) - digamma(a)
    >>> import scipy.special
    >>> bool(np.isclose(g.data, np.log(0.75) - scipy.special.digamma(2.0)))
    True
    """

    _params = ("loc", "scale")

    def logpdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Log of the probability density function, as ``scipy.stats``."""
        return self._call("logpdf", x, args, kwds)

    def pdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """Probability density function, as ``scipy.stats``."""
        return self._call("pdf", x, args, kwds)


class Discrete(_Univariate):
    """A discrete distribution with ``scipy.stats``'s methods, accepting Tensors.

    Every method takes ``(k, *shapes, loc=0)``; ``k`` and ``loc`` are integers and
    constants (a Tensor there gets gradient 0).

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.stats import poisson
    >>> mu = fd.tensor(2.0, requires_grad=True)
    >>> (g,) = fd.grad(np.sum(poisson.logpmf(np.array([1, 3]), mu)), mu)
    >>> float(g.data)  # sum(k) / mu - n
    0.0
    """

    _params = ("loc",)

    def logpmf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """Log of the probability mass function, as ``scipy.stats``."""
        return self._call("logpmf", k, args, kwds)

    def pmf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """Probability mass function, as ``scipy.stats``."""
        return self._call("pmf", k, args, kwds)


class Frozen:
    """A distribution with its parameters fixed: ``norm(loc, scale)``.

    Examples
    --------
    >>> import funcdiff as fd
    >>> from funcdiff.stats import norm
    >>> s = fd.tensor(2.0, requires_grad=True)
    >>> fd.grad(norm(0.0, s).logpdf(0.0), s)[0]   # d/ds (-log s) = -1/s
    tensor(-0.5)
    """

    def __init__(self, dist: Any, args: tuple, kwds: dict) -> None:
        self.dist = dist
        self.args = args
        self.kwds = kwds

    def __repr__(self) -> str:
        return f"{self.dist!r}(*{self.args!r}, **{self.kwds!r})"

    def _method(self, name: str) -> Any:
        return getattr(self.dist, name)

    def entropy(self) -> Any:
        """The entropy of the frozen distribution (``multivariate_normal(m, c).entropy()``)."""
        return self.dist.entropy(*self.args, **self.kwds)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or not hasattr(type(self.dist), name) or name == "__call__":
            raise AttributeError(f"{self!r} has no method {name!r}")
        method = getattr(self.dist, name)

        def frozen(x: Any) -> Any:
            return method(x, *self.args, **self.kwds)

        frozen.__name__ = name
        return frozen


class MultivariateNormal:
    """``scipy.stats.multivariate_normal`` with a ``logpdf`` that accepts Tensors.

    ``cov`` is a scalar (``cov * I``), a vector (the diagonal) or a symmetric positive
    definite matrix. On Tensors the matrix is read through its symmetric part, so the
    gradient with respect to it is symmetric; it costs one factorisation and one solve.
    ``allow_singular=True`` accepts a singular ``cov`` (the pseudo-determinant and
    pseudo-inverse on its support, as SciPy); its derivatives are then those along
    perturbations that keep the rank.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.stats import multivariate_normal
    >>> m = fd.tensor([0.0, 0.0], requires_grad=True)
    >>> cov = np.array([[2.0, 0.0], [0.0, 4.0]])
    >>> fd.grad(multivariate_normal.logpdf([1.0, 2.0], m, cov), m)[0]   # cov^-1 (x - m)
    tensor([0.5, 0.5])
    """

    def __repr__(self) -> str:
        return "funcdiff.stats.multivariate_normal"

    def logpdf(self, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        """Log of the probability density function, as ``scipy.stats``."""
        if not _any_tensor(x, mean, cov):
            return scipy.stats.multivariate_normal.logpdf(x, mean, cov, allow_singular)
        return _rules.multivariate_normal_logpdf(x, mean, cov, allow_singular)

    def pdf(self, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        """Probability density function, ``exp(logpdf)``."""
        if not _any_tensor(x, mean, cov):
            return scipy.stats.multivariate_normal.pdf(x, mean, cov, allow_singular)
        return np.exp(_rules.multivariate_normal_logpdf(x, mean, cov, allow_singular))

    def entropy(self, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        """Differential entropy, as ``scipy.stats``: ``(k (1 + log 2 pi) + log det cov) / 2``."""
        if not _any_tensor(mean, cov):
            return scipy.stats.multivariate_normal(mean, cov, allow_singular).entropy()
        return _rules.multivariate_normal_entropy(mean, cov, allow_singular)

    def __call__(self, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Frozen:
        """Freeze the parameters: ``multivariate_normal(mean, cov).logpdf(x)``."""
        return Frozen(self, (mean, cov, allow_singular), {})


class Dirichlet:
    """``scipy.stats.dirichlet`` with a ``logpdf`` that accepts Tensors.

    As in SciPy, ``x`` holds the components along its first axis; with one component
    fewer than ``alpha`` the last one is ``1 - sum(x)``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.stats import dirichlet
    >>> alpha = fd.tensor([1.0, 1.0, 1.0], requires_grad=True)
    >>> lp = dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), alpha)
    >>> bool(np.isclose(lp.data, np.log(2.0)))   # uniform on the simplex: 1 / (1/2!)
    True
    """

    def __repr__(self) -> str:
        return "funcdiff.stats.dirichlet"

    def logpdf(self, x: Any, alpha: Any) -> Any:
        """Log of the probability density function, as ``scipy.stats``."""
        if not _any_tensor(x, alpha):
            return scipy.stats.dirichlet.logpdf(x, alpha)
        return _rules.dirichlet_logpdf(x, alpha)

    def pdf(self, x: Any, alpha: Any) -> Any:
        """Probability density function, ``exp(logpdf)``."""
        if not _any_tensor(x, alpha):
            return scipy.stats.dirichlet.pdf(x, alpha)
        return np.exp(_rules.dirichlet_logpdf(x, alpha))

    def __call__(self, alpha: Any) -> Frozen:
        """Freeze the parameters: ``dirichlet(alpha).logpdf(x)``."""
        return Frozen(self, (alpha,), {})


norm = Continuous("norm")
t = Continuous("t")
gamma = Continuous("gamma")
beta = Continuous("beta")
chi2 = Continuous("chi2")
expon = Continuous("expon")
lognorm = Continuous("lognorm")
laplace = Continuous("laplace")
cauchy = Continuous("cauchy")
poisson = Discrete("poisson")
multivariate_normal = MultivariateNormal()
dirichlet = Dirichlet()
