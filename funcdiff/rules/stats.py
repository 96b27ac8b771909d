"""scipy.stats rules: log-densities, densities, CDFs and survival functions as composites.

SciPy's distribution methods convert their inputs with ``np.asarray``, so they cannot
dispatch to Tensors; ``funcdiff.stats`` exposes the functions below under SciPy's names
and signatures. Each is a composite (``Rule(impl=...)``): it is written with NumPy and
``scipy.special`` calls that have rules (``xlogy``, ``gammaln``, ``betaln``,
``log_ndtr``, ``gammainc``, ``betainc``, ``stdtr``, ...), so every order of derivative in
the data, ``loc``, ``scale`` and the shape parameters comes from those rules.

SciPy's conventions are kept: ``nan`` for invalid parameters (``scale <= 0``, a shape
outside its range) and for ``nan`` data, ``-inf`` log-density outside the support, and
the CDF's 0 and 1 below and above it. Those entries, and entries whose value is not
finite (a log-density of ``-inf`` at a support edge, a CDF that underflows), are
constants with gradient 0. The formula is evaluated there at a safe interior point and
the result discarded (the double ``where``), so no NaN reaches the gradient of the other
entries and no warning is raised.

Derivatives without a closed form raise ``NotImplementedError`` when the argument
requires grad: the CDFs of ``gamma`` and ``chi2`` in their shape (``d/da gammainc``),
of ``t`` in ``df`` (``d/d(df) stdtr``), of ``beta`` in ``a`` and ``b``. Values and all
other derivatives work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.special as sp

from funcdiff._core.backends import as_array, is_array, is_foreign, on_device_of
from funcdiff._core.grad_mode import is_grad_enabled
from funcdiff._core.lazy import scipy  # scipy.stats is imported on first use
from funcdiff._core.registry import Rule, register
from funcdiff._core.tensor import Tensor, values_read
from funcdiff.rules.cases import Arg, Case

LOG_PI = float(np.log(np.pi))
LOG_2 = float(np.log(2.0))
LOG_SQRT_2PI = float(0.5 * np.log(2.0 * np.pi))
SQRT_2PI = float(np.sqrt(2.0 * np.pi))
LOG_SQRT_PI = float(0.5 * np.log(np.pi))

METHODS = ("logpdf", "pdf", "logcdf", "cdf", "logsf", "sf")
DISCRETE_METHODS = ("logpmf", "pmf", "logcdf", "cdf", "logsf", "sf")


def _data(v: Any) -> Any:
    if isinstance(v, Tensor):
        return values_read(v)
    return v if is_array(v) else np.asarray(v)[()]  # a number: a NumPy scalar


def needs_grad(v: Any) -> bool:
    """Whether ``v`` is a Tensor whose gradient would be computed."""
    return isinstance(v, Tensor) and v.requires_grad and is_grad_enabled()


@dataclass(frozen=True)
class Spec:
    """A distribution: its standardised formulas (in ``z = (x - loc) / scale``) and support.

    ``formulas`` maps ``logpdf``, ``logcdf``, ``cdf``, ``logsf``, ``sf`` (and optionally
    ``pdf``) to functions of ``(z, *shapes)``; a missing log form is the log of the plain
    one, a missing ``pdf`` is ``exp(logpdf)``. ``no_closed_form`` maps a shape name to
    the reason its CDF derivative is not available. ``median`` (a function of the
    shapes' values) places the seam of SciPy's default ``logcdf``/``logsf`` with
    ``scipy.special`` functions, which run on every backend's arrays; without it the
    seam comes from SciPy's ``ppf``, which runs on the host only.
    """

    name: str
    shapes: tuple[str, ...]
    lower: float
    upper: float
    z0: float
    formulas: dict[str, Callable]
    argcheck: Callable | None = None
    open_pdf: bool = False
    no_closed_form: dict[str, str] = field(default_factory=dict)
    discrete: bool = False
    median: Callable | None = None

    def check(self, *shapes: np.ndarray) -> np.ndarray:
        if self.argcheck is not None:
            return as_array(self.argcheck(*shapes))
        ok: Any = np.True_  # a NumPy scalar: it combines with arrays of any backend
        for s in shapes:
            ok = ok & (s > 0)
        return ok

    def formula(self, method: str) -> Callable:
        f = self.formulas
        if method in f:
            return f[method]
        if method in ("pdf", "pmf"):
            log = f["logpmf" if self.discrete else "logpdf"]
            return lambda z, *s: np.exp(log(z, *s))
        if self.discrete:
            base = f[method[3:]]  # logcdf -> log(cdf), as SciPy's discrete distributions
            return lambda z, *s: np.log(base(z, *s))
        return _log_tail(self, method)


def _log_tail(spec: Spec, method: str) -> Callable:
    """SciPy's default continuous ``logcdf``/``logsf``: on the far side of the median the
    log of the complement (``log1p(-sf)``), which keeps the digits of a value near 1.

    The median only selects the branch (a constant); each branch runs at a point where it
    is finite (the median elsewhere), so the discarded one passes no NaN to the gradient.
    """
    cdf, sf = spec.formulas["cdf"], spec.formulas["sf"]
    near, far = (cdf, sf) if method == "logcdf" else (sf, cdf)
    dist = getattr(scipy.stats, spec.name)

    def f(z, *shapes):
        zd = _data(z)
        if spec.median is not None:
            median = spec.median(*[_data(s) for s in shapes])
        else:
            median = np.asarray(dist.ppf(0.5, *[_data(s) for s in shapes]), dtype=float)
        median = on_device_of(median, zd)  # constant shapes: on zd's device
        first = zd < median if method == "logcdf" else zd > median
        if np.all(first):
            return np.log(near(z, *shapes))
        z_near = np.where(first, z, median)
        z_far = np.where(first, median, z)
        return np.where(first, np.log(near(z_near, *shapes)), np.log1p(-far(z_far, *shapes)))

    return f


def _fill(spec: Spec, method: str, z: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """SciPy's value where the formula is not used: outside the support, bad parameters."""
    below = z <= spec.lower
    above = z >= spec.upper
    if method in ("logpdf", "logpmf"):
        out = np.full_like(z, -np.inf, dtype=float)
    elif method in ("pdf", "pmf"):
        out = np.zeros_like(z, dtype=float)
    else:
        low, high = {
            "cdf": (0.0, 1.0),
            "logcdf": (-np.inf, 0.0),
            "sf": (1.0, 0.0),
            "logsf": (0.0, -np.inf),
        }[method]
        out = np.where(above, high, np.where(below, low, np.nan))
    return np.where(valid & ~np.isnan(z), out, np.nan)


def evaluate(spec: Spec, method: str, x: Any, shapes: tuple, loc: Any, scale: Any) -> Any:
    """``scipy.stats.<spec.name>.<method>(x, *shapes, loc, scale)`` from recorded calls."""
    public = f"funcdiff.stats.{spec.name}.{method}"
    if method in ("logcdf", "cdf", "logsf", "sf"):
        for name, value in zip(spec.shapes, shapes):
            if name in spec.no_closed_form and needs_grad(value):
                raise NotImplementedError(
                    f"{public} is differentiable in x, loc and scale, not in the shape "
                    f"{name}: {spec.no_closed_form[name]}; pass a constant there "
                    f"({name}.detach())"
                )
    if spec.discrete:
        # k and loc are integers: the pmf and CDF are piecewise constant in them.
        x, loc = _data(x), _data(loc)
    xd, locd, scaled = _data(x), _data(loc), _data(scale)
    shd = [_data(s) for s in shapes]
    with np.errstate(all="ignore"):
        zd = as_array((xd - locd) / scaled).astype(np.promote_types(xd.dtype, np.float64))
        valid = spec.check(*shd) & (scaled > 0)
        valid = valid if is_foreign(valid) else on_device_of(valid, zd)  # zd's device
        shape = np.broadcast_shapes(zd.shape, valid.shape)
        zd, valid = np.broadcast_to(zd, shape), np.broadcast_to(valid, shape)
        if method in ("logpdf", "pdf") and not spec.open_pdf:
            inside = (zd >= spec.lower) & (zd <= spec.upper)
        elif spec.discrete:
            inside = (zd >= spec.lower) & (zd < spec.upper)
            if method in ("logpmf", "pmf"):
                inside = inside & (np.floor(zd) == zd)
        else:
            inside = (zd > spec.lower) & (zd < spec.upper)
        live = valid & inside
        fill = _fill(spec, method, zd, valid)
        out = _formula_where(spec, method, live, x, shapes, loc, scale)
        finite = np.isfinite(_data(out[1] if isinstance(out, tuple) else out))
        bad = live & ~finite
        if np.any(bad):
            # A non-finite value at a support edge or from underflow: SciPy's value, as a
            # constant, with the formula evaluated elsewhere so no inf/NaN reaches the
            # gradient.
            value = _data(_finish(method, out))
            fill = np.where(bad, value, fill)
            live = live & ~bad
            out = _formula_where(spec, method, live, x, shapes, loc, scale)
        result = _finish(method, out)
        if not np.all(live):
            result = np.where(live, result, fill)
    return result


def _formula_where(spec, method, live, x, shapes, loc, scale):
    """The formula on the live entries (a safe interior point elsewhere)."""
    if not np.all(live):
        scale = np.where(live, scale, 1.0)
        z = np.where(live, (x - loc) / scale, spec.z0)
        shapes = tuple(np.where(live, s, 1.0) for s in shapes)
    else:
        z = (x - loc) / scale
    if method in ("pdf", "pmf") and "pdf" not in spec.formulas:
        log = spec.formula("logpmf" if spec.discrete else "logpdf")(z, *shapes)
        return ("exp", log, scale)
    value = spec.formula(method)(z, *shapes)
    if method == "logpdf":
        return ("log", value, scale)
    if method == "pdf":
        return ("div", value, scale)
    return ("plain", value, scale)


def _finish(method, out):
    kind, value, scale = out
    if kind == "exp":
        value = np.exp(value)
        return value if method == "pmf" else value / scale
    if kind == "log":
        return value - np.log(scale)
    if kind == "div":
        return value / scale
    return value


# ----------------------------------------------------------------------- distributions
def _laplace_logcdf(z):
    pos = z > 0
    zp, zn = np.where(pos, z, 0.0), np.where(pos, 0.0, z)
    return np.where(pos, np.log1p(-0.5 * np.exp(-zp)), zn - LOG_2)


def _laplace_cdf(z):
    pos = z > 0
    zp, zn = np.where(pos, z, 0.0), np.where(pos, 0.0, z)
    return np.where(pos, 1.0 - 0.5 * np.exp(-zp), 0.5 * np.exp(zn))


def _cauchy_logpdf(z):
    small = np.abs(_data(z)) < 1
    zs = np.where(small, z, 0.5)
    log_abs = np.log(np.abs(np.where(small, 1.0, z)))
    # log1p(|z|**-2) as exp(-2 log|z|): no overflow in the derivatives for huge |z|.
    return np.where(
        small,
        -LOG_PI - np.log1p(zs * zs),
        -LOG_PI - (2.0 * log_abs + np.log1p(np.exp(-2.0 * log_abs))),
    )


def _cauchy_sf(z):
    """``arctan2(1, z) / pi``; beyond |z| = 1 through ``arctan(1/z)`` with ``1/z`` as
    ``exp(-log|z|)``, so the derivatives do not overflow for huge |z|."""
    big = np.abs(_data(z)) > 1.0
    if not np.any(big):
        return np.arctan2(1.0, z) / np.pi
    zs = np.where(big, 0.5, z)
    zb = np.where(big, z, 2.0)
    inv = np.sign(_data(zb)) * np.exp(-np.log(np.abs(zb)))
    far = np.where(_data(zb) > 0, np.arctan(inv), np.pi + np.arctan(inv))
    return np.where(big, far, np.arctan2(1.0, zs)) / np.pi


def _t_logpdf(z, df):
    return (
        (LOG_SQRT_PI - sp.betaln(0.5 * df, 0.5))
        - 0.5 * (np.log(df) + LOG_PI)
        - (df + 1.0) / 2.0 * np.log1p(z * z / df)
    )


def _lognorm_logpdf(z, s):
    logz = np.log(z)
    return -(logz**2) / (2.0 * s**2) - np.log(s * z * SQRT_2PI)


SPECS: dict[str, Spec] = {}


def _spec(*args: Any, **kwargs: Any) -> None:
    spec = Spec(*args, **kwargs)
    SPECS[spec.name] = spec


_INF = np.inf
_spec(
    "norm",
    (),
    -_INF,
    _INF,
    0.0,
    {
        "logpdf": lambda z: -(z**2) / 2.0 - LOG_SQRT_2PI,
        "pdf": lambda z: np.exp(-(z**2) / 2.0) / SQRT_2PI,
        "cdf": sp.ndtr,
        "logcdf": sp.log_ndtr,
        "sf": lambda z: sp.ndtr(-z),
        "logsf": lambda z: sp.log_ndtr(-z),
    },
)
_spec(
    "t",
    ("df",),
    -_INF,
    _INF,
    0.0,
    {
        "logpdf": _t_logpdf,
        "cdf": lambda z, df: sp.stdtr(df, z),
        "sf": lambda z, df: sp.stdtr(df, -z),
    },
    no_closed_form={"df": "d/d(df) stdtr(df, x) has no closed form"},
)
_spec(
    "gamma",
    ("a",),
    0.0,
    _INF,
    1.0,
    {
        "logpdf": lambda z, a: sp.xlogy(a - 1.0, z) - z - sp.gammaln(a),
        "cdf": lambda z, a: sp.gammainc(a, z),
        "sf": lambda z, a: sp.gammaincc(a, z),
    },
    no_closed_form={"a": "d/da gammainc(a, x) has no closed form"},
    median=lambda a: sp.gammaincinv(a, 0.5),
)
_spec(
    "beta",
    ("a", "b"),
    0.0,
    1.0,
    0.5,
    {
        "logpdf": lambda z, a, b: sp.xlog1py(b - 1.0, -z) + sp.xlogy(a - 1.0, z) - sp.betaln(a, b),
        "cdf": lambda z, a, b: sp.betainc(a, b, z),
        "sf": lambda z, a, b: sp.betaincc(a, b, z),
    },
    no_closed_form={
        "a": "d/da betainc(a, b, x) has no closed form",
        "b": "d/db betainc(a, b, x) has no closed form",
    },
    median=lambda a, b: sp.betaincinv(a, b, 0.5),
)
_spec(
    "chi2",
    ("df",),
    0.0,
    _INF,
    1.0,
    {
        "logpdf": lambda z, df: (
            sp.xlogy(df / 2.0 - 1, z) - z / 2.0 - sp.gammaln(df / 2.0) - (LOG_2 * df) / 2.0
        ),
        "cdf": lambda z, df: sp.gammainc(df / 2.0, z / 2.0),
        "sf": lambda z, df: sp.gammaincc(df / 2.0, z / 2.0),
    },
    no_closed_form={"df": "d/d(df) gammainc(df/2, x/2) has no closed form"},
    median=lambda df: 2.0 * sp.gammaincinv(df / 2.0, 0.5),
)
_spec(
    "expon",
    (),
    0.0,
    _INF,
    1.0,
    {
        "logpdf": lambda z: -z,
        "pdf": lambda z: np.exp(-z),
        "cdf": lambda z: -np.expm1(-z),
        "sf": lambda z: np.exp(-z),
        "logsf": lambda z: -z,
    },
)
_spec(
    "lognorm",
    ("s",),
    0.0,
    _INF,
    1.0,
    {
        "logpdf": _lognorm_logpdf,
        "cdf": lambda z, s: sp.ndtr(np.log(z) / s),
        "logcdf": lambda z, s: sp.log_ndtr(np.log(z) / s),
        "sf": lambda z, s: sp.ndtr(-np.log(z) / s),
        "logsf": lambda z, s: sp.log_ndtr(-np.log(z) / s),
    },
    open_pdf=True,
)
_spec(
    "laplace",
    (),
    -_INF,
    _INF,
    0.0,
    {
        "logpdf": lambda z: -np.abs(z) - LOG_2,
        "pdf": lambda z: 0.5 * np.exp(-np.abs(z)),
        "cdf": _laplace_cdf,
        "logcdf": _laplace_logcdf,
        "sf": lambda z: _laplace_cdf(-z),
        "logsf": lambda z: _laplace_logcdf(-z),
    },
)
_spec(
    "cauchy",
    (),
    -_INF,
    _INF,
    0.0,
    {
        "logpdf": _cauchy_logpdf,
        "cdf": lambda z: _cauchy_sf(-z),
        "sf": _cauchy_sf,
    },
)
_spec(
    "poisson",
    ("mu",),
    0.0,
    _INF,
    0.0,
    {
        "logpmf": lambda k, mu: sp.xlogy(k, mu) - sp.gammaln(k + 1.0) - mu,
        "cdf": lambda k, mu: sp.gammaincc(np.floor(k) + 1.0, mu),
        "sf": lambda k, mu: sp.gammainc(np.floor(k) + 1.0, mu),
    },
    argcheck=lambda mu: mu >= 0,
    discrete=True,
)


def make_method(spec: Spec, method: str) -> Callable:
    """The composite ``f(x, *shapes, loc=0, scale=1)`` (no ``scale`` when discrete)."""
    n = len(spec.shapes)

    f: Any  # a function, given a public_name below
    if spec.discrete:

        def discrete(k: Any, *shapes: Any, loc: Any = 0) -> Any:
            if len(shapes) != n:
                raise TypeError(f"{spec.name}.{method} takes the shapes {spec.shapes}")
            return evaluate(spec, method, k, shapes, loc, 1.0)

        f = discrete
    else:

        def continuous(x: Any, *shapes: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
            if len(shapes) != n:
                raise TypeError(f"{spec.name}.{method} takes the shapes {spec.shapes}")
            return evaluate(spec, method, x, shapes, loc, scale)

        f = continuous

    f.__name__ = f"{spec.name}_{method}"
    f.__qualname__ = f.__name__
    f.public_name = f"funcdiff.stats.{spec.name}.{method}"
    f.__doc__ = f"``scipy.stats.{spec.name}.{method}`` from recorded NumPy calls."
    return f


# Test domains: x inside the support (in standardised units), shapes in a range where the
# formulas are smooth, loc and scale moderate.
_DOMAINS: dict[str, tuple[tuple[float, float], tuple[tuple[float, float], ...]]] = {
    "norm": ((-2.5, 2.5), ()),
    "t": ((-3.0, 3.0), ((1.5, 8.0),)),
    "gamma": ((0.4, 3.0), ((0.8, 3.0),)),
    "beta": ((0.15, 0.85), ((0.8, 3.0), (0.8, 3.0))),
    "chi2": ((0.4, 4.0), ((1.5, 6.0),)),
    "expon": ((0.3, 3.0), ()),
    "lognorm": ((0.4, 3.0), ((0.5, 1.5),)),
    "laplace": ((0.2, 2.5), ()),
    "cauchy": ((-3.0, 3.0), ()),
}


def _cases(spec: Spec, method: str) -> tuple[Case, ...]:
    if spec.discrete:
        k = np.array([0.0, 1.0, 3.0, 6.0])
        return (
            Case((k, Arg((), 0.5, 4.0))),
            Case((np.array([[0.0], [2.0]]), Arg((3,), 0.5, 4.0)), {"loc": 0}),
        )
    (xl, xh), shape_ranges = _DOMAINS[spec.name]
    frozen = method in ("logcdf", "cdf", "logsf", "sf")

    def shape_args(shape: tuple[int, ...]) -> tuple[Arg, ...]:
        return tuple(
            Arg(shape, lo, hi, diff=not (frozen and name in spec.no_closed_form))
            for name, (lo, hi) in zip(spec.shapes, shape_ranges)
        )

    if spec.name == "laplace":  # both sides of the kink at 0
        x_wide = Arg((2, 3), -2.5, -0.2)
    else:
        x_wide = Arg((2, 3), xl, xh)
    # With loc in [-0.1, 0] and scale in [1, 1.2], z = (x - loc) / scale stays inside.
    return (
        Case(
            (Arg((3,), xl, xh), *shape_args(())),
            {"loc": Arg((), -0.1, 0.0), "scale": Arg((), 1.0, 1.2)},
        ),
        Case((x_wide, *shape_args((3,)))),
    )


METHOD_FUNCTIONS: dict[tuple[str, str], Callable] = {}
for _spec_ in SPECS.values():
    for _method in DISCRETE_METHODS if _spec_.discrete else METHODS:
        _f = make_method(_spec_, _method)
        METHOD_FUNCTIONS[_spec_.name, _method] = _f
        _no = ", ".join(f"not in {n} (no closed form)" for n in _spec_.no_closed_form)
        if _spec_.discrete:
            _which = "mu; k and loc are integers (constants)"
        else:
            _which = ", ".join(("x", "loc", "scale", *_spec_.shapes))
        register(
            Rule(
                f"scipy.stats.{_spec_.name}.{_method}",
                getattr(getattr(scipy.stats, _spec_.name), _method),
                impl=_f,
                cases=_cases(_spec_, _method),
                convention=(
                    f"differentiable in {_which}"
                    + (f"; {_no}" if _no and _method not in ("logpdf", "pdf") else "")
                    + "; outside the support and for invalid parameters SciPy's constant "
                    "(-inf, 0, 1 or nan) with gradient 0"
                ),
                family="stats",
            ),
            _f,
        )


# ----------------------------------------------------------------------- multivariate
def multivariate_normal_logpdf(
    x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False
) -> Any:
    """``scipy.stats.multivariate_normal.logpdf`` from recorded NumPy calls.

    ``cov`` may be a scalar (``cov * I``), a vector (a diagonal) or a matrix, used through
    its symmetric part ``(cov + cov.T) / 2``, so its gradient is symmetric.
    """
    public = "funcdiff.stats.multivariate_normal.logpdf"
    covd = _data(cov)
    if covd.ndim > 2:
        raise ValueError(f"{public}: cov must be a scalar, a vector or a matrix, got {covd.shape}")
    meand = None if mean is None else _data(mean)
    if meand is not None and meand.ndim > 1:
        raise ValueError(f"{public}: mean must be a vector, got shape {meand.shape}")
    if meand is not None and meand.ndim == 1:
        dim = meand.shape[0]
    elif covd.ndim == 2:  # as SciPy: a vector cov without a mean means dimension 1
        dim = covd.shape[0]
    else:
        dim = 1
    if covd.ndim == 1 and covd.shape != (dim,) or covd.ndim == 2 and covd.shape != (dim, dim):
        raise ValueError(f"{public}: cov has shape {covd.shape}, expected {dim} by {dim}")
    if mean is None:
        mean = on_device_of(np.zeros(dim), x)
    xd = _data(x)
    if xd.ndim == 0:
        x = np.reshape(x, (1,))
    elif xd.ndim == 1:
        x = np.reshape(x, (-1, 1) if dim == 1 else (1, -1))
    if np.shape(x)[-1] != dim:
        raise ValueError(f"{public}: x has {np.shape(x)[-1]} components, expected {dim}")
    diff = x - mean
    rank, logdet, spectrum = _mvn_covariance(cov, covd, dim, allow_singular, public)
    if spectrum is not None:  # allow_singular: the pseudo-inverse on the support
        keep, values, vectors = spectrum
        along = np.matmul(diff, vectors)
        maha = np.sum(np.where(keep, along * along / np.where(keep, values, 1.0), 0.0), axis=-1)
        off = np.sum(np.where(keep, 0.0, _data(along) ** 2), axis=-1)
        # Outside the support (a component in the null space of cov) the density is 0.
        outside = np.sqrt(off) > 1e-8 * max(1.0, float(np.max(np.abs(_data(values)))))
        maha = np.where(outside, np.inf, maha)
    elif covd.ndim < 2:
        maha = np.sum(diff * diff / cov, axis=-1)
    else:
        sym = (cov + np.swapaxes(cov, -1, -2)) / 2.0
        flat = np.reshape(diff, (-1, dim))
        solved = np.linalg.solve(sym, np.swapaxes(flat, 0, 1))
        maha = np.reshape(np.sum(flat * np.swapaxes(solved, 0, 1), axis=-1), np.shape(diff)[:-1])
    out = -0.5 * (rank * 2.0 * LOG_SQRT_2PI + logdet + maha)
    return np.squeeze(out) if np.ndim(out) else out


def _mvn_covariance(cov: Any, covd: Any, dim: int, allow_singular: bool, public: str) -> Any:
    """``(rank, log (pseudo-)determinant, spectrum)`` of a multivariate normal's ``cov``.

    ``spectrum`` is None for a nonsingular ``cov``; for a singular one, with
    ``allow_singular``, it is ``(kept, eigenvalues, eigenvectors)`` of the symmetric part,
    the eigenvalues above SciPy's threshold kept (a constant mask: the derivatives are
    those along perturbations that keep the rank).
    """
    if covd.ndim < 2:
        if np.any(~(covd > 0)):
            raise ValueError(f"{public}: cov must be positive, got {covd}")
        return dim, (dim * np.log(cov) if covd.ndim == 0 else np.sum(np.log(cov))), None
    sym = (cov + np.swapaxes(cov, -1, -2)) / 2.0
    try:
        np.linalg.cholesky(_data(sym))
        return dim, np.linalg.slogdet(sym)[1], None
    except np.linalg.LinAlgError:
        if not allow_singular:
            raise ValueError(
                f"{public}: cov must be symmetric positive definite (allow_singular=True "
                "accepts a singular one)"
            ) from None
    values, vectors = np.linalg.eigh(sym)
    found = _data(values)
    eps = 1e6 * np.finfo(np.float64).eps * float(np.max(np.abs(found)))  # SciPy's threshold
    if np.min(found) < -eps:
        raise ValueError(f"{public}: cov must be symmetric positive semi-definite")
    keep = found > eps
    logdet = np.sum(np.where(keep, np.log(np.where(keep, values, 1.0)), 0.0))
    return int(np.sum(keep)), logdet, (keep, values, vectors)


def multivariate_normal_entropy(
    mean: Any = None, cov: Any = 1, allow_singular: bool = False
) -> Any:
    """``scipy.stats.multivariate_normal.entropy`` from recorded NumPy calls:
    ``(rank (1 + log 2 pi) + log pdet(cov)) / 2``; ``mean`` does not enter."""
    public = "funcdiff.stats.multivariate_normal.entropy"
    covd = _data(cov)
    if covd.ndim > 2:
        raise ValueError(f"{public}: cov must be a scalar, a vector or a matrix, got {covd.shape}")
    meand = None if mean is None else _data(mean)
    dim = covd.shape[0] if covd.ndim else (meand.size if meand is not None else 1)
    rank, logdet, _ = _mvn_covariance(cov, covd, dim, allow_singular, public)
    return 0.5 * (rank * (1.0 + 2.0 * LOG_SQRT_2PI) + logdet)


def dirichlet_logpdf(x: Any, alpha: Any) -> Any:
    """``scipy.stats.dirichlet.logpdf`` from recorded NumPy calls.

    As in SciPy the components run along the first axis of ``x``; with one component
    fewer than ``alpha`` the last is ``1 - sum(x)`` (and its gradient flows to the others).
    """
    public = "funcdiff.stats.dirichlet.logpdf"
    ad = _data(alpha)
    if ad.ndim != 1 or ad.size < 2 or np.any(~(ad > 0)):
        raise ValueError(f"{public}: alpha must be a vector of at least 2 positive values")
    k = ad.shape[0]
    xd = _data(x)
    if xd.ndim == 0 or xd.shape[0] not in (k - 1, k):
        raise ValueError(f"{public}: x must have {k - 1} or {k} components along axis 0")
    if xd.shape[0] == k - 1:
        x = np.concatenate([x, 1.0 - np.sum(x, axis=0, keepdims=True)], axis=0)
        xd = _data(x)
    if np.any(xd < 0) or np.any(xd > 1):
        raise ValueError(f"{public}: each entry of x must lie in [0, 1]")
    if np.any(np.abs(np.sum(xd, axis=0) - 1.0) > 10e-10):
        raise ValueError(f"{public}: the components of x must sum to 1")
    expand = (slice(None),) + (None,) * (xd.ndim - 1)
    if np.any((xd == 0) & (ad[expand] < 1)):
        raise ValueError(f"{public}: x = 0 where alpha < 1 (an infinite density)")
    log_b = np.sum(sp.gammaln(alpha)) - sp.gammaln(np.sum(alpha))
    out = -log_b + np.sum(sp.xlogy(np.reshape(alpha, (k,) + (1,) * (xd.ndim - 1)) - 1.0, x), 0)
    return np.squeeze(out) if np.ndim(out) else out


multivariate_normal_logpdf.public_name = "funcdiff.stats.multivariate_normal.logpdf"  # type: ignore[attr-defined]
dirichlet_logpdf.public_name = "funcdiff.stats.dirichlet.logpdf"  # type: ignore[attr-defined]
multivariate_normal_entropy.public_name = "funcdiff.stats.multivariate_normal.entropy"  # type: ignore[attr-defined]
register(
    Rule(
        "scipy.stats.multivariate_normal.logpdf",
        scipy.stats.multivariate_normal.logpdf,
        impl=multivariate_normal_logpdf,
        cases=(
            Case((Arg((4, 3)),), dict(mean=Arg((3,)), cov=Arg((3, 3), kind="spd"))),
            Case((Arg((3,)),), dict(mean=Arg((3,)), cov=Arg((3,), 0.5, 2.0))),
            Case((Arg((5,)),), dict(cov=Arg((), 0.5, 2.0))),
            Case((Arg((2, 2, 2)),), dict(cov=Arg((2, 2), kind="spd"))),
            Case((Arg((2, 3)),), dict(cov=Arg((3, 3), kind="spd"), allow_singular=True)),
        ),
        convention="differentiable in x, mean and cov; cov is read through its symmetric "
        "part, so its gradient is symmetric",
        family="stats",
    ),
    multivariate_normal_logpdf,
)
register(
    Rule(
        "scipy.stats.dirichlet.logpdf",
        scipy.stats.dirichlet.logpdf,
        impl=dirichlet_logpdf,
        cases=(
            Case((Arg((2,), 0.1, 0.4), Arg((3,), 0.5, 3.0))),
            Case((Arg((3, 4), 0.05, 0.3), Arg((4,), 0.8, 3.0))),
        ),
        convention="differentiable in x and alpha; with k - 1 components the last is 1 - sum(x)",
        family="stats",
    ),
    dirichlet_logpdf,
)
register(
    Rule(
        "scipy.stats.multivariate_normal.entropy",
        scipy.stats.multivariate_normal.entropy,
        impl=multivariate_normal_entropy,
        cases=(
            Case((), dict(cov=Arg((3, 3), kind="spd"))),
            Case((), dict(cov=Arg((3,), 0.5, 2.0))),
            Case((np.zeros(2),), dict(cov=Arg((), 0.5, 2.0))),
            Case((), dict(cov=Arg((2, 2), kind="spd"), allow_singular=True)),
        ),
        nondiff_args=frozenset({0}),
        convention="differentiable in cov (through its symmetric part); with "
        "allow_singular=True and a singular cov, along perturbations that keep its rank",
        family="stats",
    ),
    multivariate_normal_entropy,
)
