"""Finite differences with error estimates: steps, quotients, kink detection.

* Steps are relative to each element and depend on the dtype: ``h = c * s`` with
  ``c = eps**(1/3)`` (central) or ``eps**(1/5)`` (Richardson), and ``s = max(|x|, 1)``;
  for ``|x| < 1/16`` also ``s = |x|``. Where the error estimate is still poor, steps 16
  times larger or smaller are tried (up to 16**4 either way), and each element keeps the
  step with the smallest estimate.
* Every element is evaluated at ``x +- h`` and ``x +- 2h`` (and ``+-4h`` for Richardson).
  The difference between the two central quotients estimates the error, to which a
  rounding term ``eps * |f| / h`` is added.
* One-sided quotients at ``h`` and ``2h`` detect kinks: for a smooth function
  ``2 (F(h) - B(h)) - (F(2h) - B(2h))`` is O(h^3); at a kink it stays at the jump of the
  slope.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, overload

import numpy as np

from funcdiff.check._common import FD_TRUST_FACTOR, complex_dtype_for, machine_eps
from funcdiff.check.targets import Target, probe_complex

__all__ = [
    "FIELDS",
    "difference_quotients",
    "elementwise_differences",
    "evaluate_input",
    "evaluate_perturbed",
    "power_of_two",
    "step_base",
    "step_quotients",
    "typical_magnitude",
]

# What the finite differences give for every (row, element): the quotient used and its
# error estimate, the central quotient and its estimate, the one-sided quotients, the
# kink signature and its threshold, the step, and (complex step only) Im f(x + ih)/h.
FIELDS = (
    "value",
    "est",
    "central",
    "central_est",
    "fwd",
    "bwd",
    "kink",
    "kink_floor",
    "step",
    "cs",
)


def step_base(method: str, dtype: np.dtype, override: float | None) -> float:
    """The relative step ``c``: ``override``, else eps**(1/5) (Richardson) or eps**(1/3)."""
    if override is not None:
        return float(override)
    eps = machine_eps(dtype)
    return eps ** (1 / 5) if method == "richardson" else eps ** (1 / 3)


def power_of_two(h: float) -> float:
    """Round a step to a power of two, so that 2h and 4h are exact multiples."""
    return float(2.0 ** np.round(np.log2(h)))


def _scale_candidates(xk: float, typical: float) -> list[float]:
    """Scales s of the step h = c*s for one element: max(|x|, 1), and |x| when much smaller."""
    a = abs(xk)
    cands = [max(a, 1.0)]
    if 0.0 < a < 1 / 16:
        cands.append(a)
    elif a == 0.0 and 0.0 < typical < 1 / 16:
        cands.append(typical)
    return cands


def typical_magnitude(x: np.ndarray) -> float:
    """Median magnitude of the finite nonzero elements of ``x`` (0 if there are none)."""
    nz = np.abs(x[np.isfinite(x) & (x != 0)])
    return float(np.median(nz)) if nz.size else 0.0


def _offsets(method: str) -> tuple[int, ...]:
    """Multiples of the step at which the function is evaluated."""
    return (1, -1, 2, -2, 4, -4) if method == "richardson" else (1, -1, 2, -2)


@contextmanager
def _quiet(*categories: type[Warning]) -> Iterator[None]:
    """Perturbed points may overflow or leave the domain: no warnings from user code."""
    with warnings.catch_warnings():
        for category in categories:
            warnings.simplefilter("ignore", category)
        with np.errstate(all="ignore"):
            yield


def difference_quotients(
    fvals: dict, f0: np.ndarray, dx: dict, t: float, method: str, row_eps: np.ndarray
) -> dict[str, np.ndarray]:
    """Difference quotients from values at x + o*t (o in +-1, +-2, +-4) and their estimates."""
    # Values of f at the probing steps may be inf or nan (a step left the domain): the
    # quotients are then inf or nan and judged as such; NumPy's warnings about this
    # arithmetic are the checker's, not the user's, and stay here.
    with np.errstate(all="ignore"):
        return _quotients(fvals, f0, dx, t, method, row_eps)


def _quotients(
    fvals: dict, f0: np.ndarray, dx: dict, t: float, method: str, row_eps: np.ndarray
) -> dict[str, np.ndarray]:
    c1 = (fvals[1] - fvals[-1]) / (dx[1] - dx[-1])
    c2 = (fvals[2] - fvals[-2]) / (dx[2] - dx[-2])
    fw1 = (fvals[1] - f0) / dx[1]
    bw1 = (f0 - fvals[-1]) / (-dx[-1])
    fw2 = (fvals[2] - f0) / dx[2]
    bw2 = (f0 - fvals[-2]) / (-dx[-2])
    fmax = np.maximum.reduce([np.abs(f0)] + [np.abs(v) for v in fvals.values()])
    noise = row_eps * fmax / t
    diff12 = np.abs(c1 - c2)
    central_est = diff12 + 2.0 * noise
    # For a smooth f, F - B = h f'' + O(h^3) doubles with h; at a kink it stays at
    # the jump of the slope. Require both a large and a scale-free signature.
    gap1, gap2 = fw1 - bw1, fw2 - bw2
    kink = np.abs(2.0 * gap1 - gap2)
    kink_floor = np.maximum(
        10.0 * noise + FD_TRUST_FACTOR * diff12,
        0.25 * np.maximum(np.abs(gap1), np.abs(gap2)),
    )
    if method == "richardson":
        c4 = (fvals[4] - fvals[-4]) / (dx[4] - dx[-4])
        ra = (4.0 * c1 - c2) / 3.0
        rb = (4.0 * c2 - c4) / 3.0
        r = (16.0 * ra - rb) / 15.0
        value, est = r, np.abs(r - ra) + 4.0 * noise
    else:
        value, est = c1, central_est
    return {
        "value": value,
        "est": est,
        "central": c1,
        "central_est": central_est,
        "fwd": fw1,
        "bwd": bw1,
        "kink": kink,
        "kink_floor": kink_floor,
        "step": np.full(c1.shape, t),
    }


def evaluate_perturbed(
    target: Target, j: int, k: int, value: Any, complex_dtype: Any = None
) -> np.ndarray:
    """All of ``target``'s outputs, flattened, with element ``k`` of input ``j`` set to ``value``.

    With ``complex_dtype`` the input becomes complex and ``fd_eval_complex`` runs.
    """
    x = target.problem.x0[j]
    xj = x.copy() if complex_dtype is None else x.astype(complex_dtype)
    xj.flat[k] = value
    vals = list(target.problem.x0)
    vals[j] = xj
    with _quiet(RuntimeWarning, np.exceptions.ComplexWarning):
        if complex_dtype is None:
            res = target.fd_eval(vals)
        else:
            res = target.fd_eval_complex(vals)
    return np.concatenate([np.ravel(v) for v in res]) if res else np.zeros(0)


def elementwise_differences(
    target: Target,
    j: int,
    method: str,
    f0: list[np.ndarray],
    base: float,
    row_eps: np.ndarray,
    rtol: float,
    columns: Sequence[int] | None = None,
) -> dict[str, np.ndarray]:
    """Numerical Jacobian columns of ``target`` w.r.t. input ``j``, element by element.

    With ``columns``, only those elements are differenced (the other columns stay 0).

    Returns the :data:`FIELDS` with shape ``(m, n)``: m = all outputs' elements
    concatenated. Each (row, element) keeps the step whose error estimate is smallest:
    the relative candidates first, then, where the estimate is still poor, steps 16x
    larger or smaller (up to 16**4 either way): relative steps are wrong for sin(x) at
    x = 1e6, absolute ones for log(x) at x = 1e-6.
    """
    x = target.problem.x0[j]
    dtype = x.dtype
    n = x.size
    f0c = np.concatenate([v.ravel() for v in f0]) if f0 else np.zeros(0)
    m = f0c.size
    fields = FIELDS if method == "complex-step" else FIELDS[:-1]
    out = {k: np.zeros((m, n)) for k in fields}
    flat = x.ravel()
    typical = typical_magnitude(flat)
    offsets = _offsets(method)
    good = 1e-2 * rtol

    def at_step(k: int, xk: Any, t: float) -> dict[str, np.ndarray] | None:
        fvals: dict[int, np.ndarray] = {}
        dx: dict[int, float] = {}
        for o in offsets:
            p = dtype.type(xk + o * t)
            dx[o] = float(p) - float(xk)
            if dx[o] == 0 or not math.isfinite(dx[o]):
                return None
        for o in offsets:
            fvals[o] = evaluate_perturbed(target, j, k, dtype.type(xk + o * t))
        q = difference_quotients(fvals, f0c, dx, t, method, row_eps)
        q["est"] = np.where(np.isfinite(q["est"]) & np.isfinite(q["value"]), q["est"], np.inf)
        return q

    @overload
    def merge(best: dict, q: dict | None) -> dict: ...

    @overload
    def merge(best: dict | None, q: dict | None) -> dict | None: ...

    def merge(best: dict | None, q: dict | None) -> dict | None:
        if q is None:
            return best
        if best is None:
            return q
        better = q["est"] < best["est"]
        return {f: np.where(better, q[f], best[f]) for f in q}

    def poor(q: dict) -> np.ndarray:
        live = (q["value"] != 0) | (q["central"] != q["fwd"]) | ~np.isfinite(q["est"])
        return live & ~(q["est"] <= good * np.abs(q["value"]))

    def score(q: dict | None, rows: np.ndarray) -> float:
        if q is None:
            return math.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            r = q["est"][rows] / np.maximum(np.abs(q["value"][rows]), 1e-300)
        r = np.where(np.isfinite(r), r, 1e300)
        return float(np.exp(np.mean(np.log(np.maximum(r, 1e-300)))))

    for k in range(n) if columns is None else columns:
        xk = flat[k]
        best = None
        for sc in _scale_candidates(float(xk), typical):
            best = merge(best, at_step(k, xk, power_of_two(base * sc)))
        if best is None:
            raise ValueError(
                f"input {target.problem.names[j]} element {k} = {xk!r}: every finite-difference "
                "step is below its floating-point resolution"
            )
        need = poor(best)
        if np.any(need):
            # Search steps 16x apart from the step of the worst row, keep what improves.
            worst_row = int(np.argmax(np.where(need, best["est"], -1.0)))
            t0 = float(best["step"][worst_row])
            trials = {f: at_step(k, xk, t0 * f) for f in (16.0, 1 / 16)}
            ref = score(best, need)
            direction = min(trials, key=lambda f: score(trials[f], need))
            for q in trials.values():
                best = merge(best, q)
            current = trials[direction]
            t = t0 * direction
            for _ in range(3):
                if current is None or score(current, need) >= ref or not np.any(poor(best)):
                    break
                ref = score(current, need)
                t *= direction
                current = at_step(k, xk, t)
                best = merge(best, current)
        for f, v in best.items():
            out[f][:, k] = v
        if method == "complex-step":
            sc = max(abs(float(xk)), 1.0)
            cdt = complex_dtype_for(dtype)
            tc = sc * (1e-12 if dtype == np.float32 else 1e-20)
            vals = evaluate_perturbed(target, j, k, cdt(complex(float(xk), tc)), cdt)
            out["cs"][:, k] = np.imag(vals) / tc if np.iscomplexobj(vals) else 0.0
    return out


def evaluate_input(target: Target, j: int, xj: np.ndarray) -> np.ndarray:
    """All of ``target``'s outputs, flattened and concatenated, with input ``j`` set to ``xj``.

    Used by fast mode, which moves every element of the input at once.
    """
    vals = list(target.problem.x0)
    vals[j] = xj
    with _quiet(RuntimeWarning):
        res = target.fd_eval(vals)
    return np.concatenate([np.ravel(v) for v in res]) if res else np.zeros(0)


# ---------------------------------------------------------------------- the step sweep
def _quotient(method: str, at: Any, x: np.ndarray, xk: float, f0: float, h: float) -> float:
    """One difference quotient of ``at`` (the row's value at a new element value) at step h."""
    if method == "forward":
        p1 = x.dtype.type(xk + h)
        dxp = float(p1) - xk
        return (at(p1) - f0) / dxp if dxp else np.nan
    if method == "central":
        p1, m1 = x.dtype.type(xk + h), x.dtype.type(xk - h)
        dd = float(p1) - float(m1)
        return (at(p1) - at(m1)) / dd if dd else np.nan
    cdt = complex_dtype_for(x.dtype)
    return float(np.imag(at(cdt(complex(xk, h)), cdt))) / h


def step_quotients(
    target: Target,
    j: int,
    row: int,
    in_idx: tuple,
    steps: Sequence[float] | None,
    methods: Sequence[str],
) -> tuple[float, np.ndarray, dict[str, np.ndarray], list[str]]:
    """Difference quotients of output row ``row`` with respect to element ``in_idx`` of
    input ``j``, per method and step (NaN where the function could not be evaluated).

    ``steps`` are relative to the element's scale (default 10**-16 ... 10**0). Returns
    the element's value, the absolute steps, the quotients by method, and notes on
    methods that were not available.
    """
    x = target.problem.x0[j]
    k = int(np.ravel_multi_index(in_idx, x.shape)) if x.ndim else 0
    xk = float(x.flat[k])
    scale = abs(xk) if xk != 0 else 1.0
    rel = np.asarray(steps if steps is not None else np.logspace(-16, 0, 33), dtype=float)
    hs = rel * scale
    notes: list[str] = []

    def at(value: Any, complex_dtype: Any = None) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return evaluate_perturbed(target, j, k, value, complex_dtype)[row]

    f0 = at(x.dtype.type(xk))
    quotients: dict[str, np.ndarray] = {}
    for m in methods:
        ds = np.full(hs.shape, np.nan)
        if m == "complex-step" and target.complex_ok is None:
            try:
                probe_complex(target, target.problem.x0)
            except ValueError as exc:
                target.complex_ok = False
                notes.append(str(exc))
        if m == "complex-step" and not target.complex_ok:
            if target.kind != "jacobian":
                notes.append("complex step not available for second-order blocks")
            quotients[m] = ds
            continue
        for i, h in enumerate(hs):
            try:
                ds[i] = _quotient(m, at, x, xk, f0, h)
            except Exception as exc:  # noqa: BLE001  (a failed evaluation is a gap)
                if m == "complex-step":
                    notes.append(f"complex step failed: {type(exc).__name__}: {exc}")
                    break
        quotients[m] = ds
    return xk, hs, quotients, notes
