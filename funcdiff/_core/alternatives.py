"""Which funcdiff function to use instead of a SciPy function that refuses Tensors.

SciPy's Python-level functions (``scipy.linalg.expm``, ``scipy.special.logsumexp``,
``scipy.stats.norm.logpdf``) convert their arguments with ``np.asarray`` and do not
dispatch to Tensors. When such a call meets a Tensor that requires grad, the refusal
message names the funcdiff function that does the same on Tensors, looked up here.

The table is data (names as strings): the core imports nothing above itself, and a
test checks that every target exists in its funcdiff module.
"""

from __future__ import annotations

__all__ = [
    "SCIPY_ALTERNATIVES",
    "STATS_DISTRIBUTIONS",
    "STATS_METHODS",
    "STATS_METHODS_OF",
    "NUMPY_CONSTRUCTION_HINT",
    "alternative",
    "stats_method_name",
]

# funcdiff.linalg.__all__ (the core may not import it; tests/test_graph_exits.py compares)
_LINALG = (
    "expm solve_triangular cho_factor cho_solve solve inv det eigh eigvalsh sqrtm "
    "solve_sylvester solve_banded"
).split()
_SIGNAL = ("convolve", "correlate")
_SPECIAL = ("logsumexp", "softmax", "log_softmax", "polygamma", "multigammaln", "zeta")

#: Public SciPy function -> the funcdiff function that accepts Tensors in its place.
SCIPY_ALTERNATIVES: dict[str, str] = {
    **{f"scipy.linalg.{name}": f"funcdiff.linalg.{name}" for name in _LINALG},
    **{f"scipy.special.{name}": f"funcdiff.special.{name}" for name in _SPECIAL},
    **{f"scipy.signal.{name}": f"funcdiff.signal.{name}" for name in _SIGNAL},
}

#: The ``scipy.stats`` distributions whose density methods funcdiff.stats provides.
_CONTINUOUS = frozenset("logpdf pdf logcdf cdf logsf sf".split())
#: The scipy.stats distributions funcdiff.stats provides, and their methods.
STATS_METHODS_OF: dict[str, frozenset[str]] = {
    **dict.fromkeys("norm t gamma beta chi2 expon lognorm laplace cauchy".split(), _CONTINUOUS),
    "poisson": frozenset("logpmf pmf logcdf cdf logsf sf".split()),
    "multivariate_normal": frozenset({"logpdf", "pdf"}),
    "dirichlet": frozenset({"logpdf", "pdf"}),
}
STATS_DISTRIBUTIONS = frozenset(STATS_METHODS_OF)
#: Every method name above: a method outside it is never a scipy.stats call we name.
STATS_METHODS = frozenset().union(*STATS_METHODS_OF.values()) | {"logpmf", "pmf"}

#: Where an ndarray built from Tensors (``np.array([t1, t2])``, ``np.r_``) is the cause.
NUMPY_CONSTRUCTION_HINT = (
    "To build an array from Tensors (np.array([t1, t2]), np.r_[t, 1.0], np.c_), use "
    "funcdiff.numpy (import funcdiff.numpy as np), whose constructors record."
)


def alternative(public_name: str) -> str | None:
    """The funcdiff replacement for the SciPy function ``public_name``, or None.

    Examples
    --------
    >>> alternative("scipy.special.logsumexp")
    'funcdiff.special.logsumexp'
    >>> alternative("scipy.stats.norm.logpdf")
    'funcdiff.stats.norm.logpdf'
    >>> alternative("scipy.linalg.eigvals") is None
    True
    """
    found = SCIPY_ALTERNATIVES.get(public_name)
    if found is not None:
        return found
    parts = public_name.split(".")
    if len(parts) == 4 and parts[:2] == ["scipy", "stats"]:
        if parts[3] in STATS_METHODS_OF.get(parts[2], ()):
            return f"funcdiff.stats.{parts[2]}.{parts[3]}"
    return None


def stats_method_name(method: str, instance: object) -> str | None:
    """``scipy.stats.<dist>.<method>`` for a method running on a ``scipy.stats``
    distribution object (or its frozen form), or None if it is none of those.

    ``rv_continuous``/``rv_discrete`` objects carry ``.name`` (frozen ones ``.dist``);
    the multivariate ones are named by their class (``multivariate_normal_gen``).

    Examples
    --------
    >>> class norm_gen:
    ...     name = "norm"
    >>> norm_gen.__module__ = "scipy.stats._continuous_distns"
    >>> stats_method_name("logpdf", norm_gen())
    'scipy.stats.norm.logpdf'
    >>> stats_method_name("logpdf", object()) is None
    True
    """
    if method not in STATS_METHODS:
        return None
    cls = type(instance)
    if not getattr(cls, "__module__", "").startswith("scipy.stats"):
        return None
    dist = getattr(instance, "dist", instance)
    name = getattr(dist, "name", None)
    if not isinstance(name, str):
        name = cls.__name__.removesuffix("_gen").removesuffix("_frozen")
    return f"scipy.stats.{name}.{method}"
