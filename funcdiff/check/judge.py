"""The verdict on one derivative block: AD against finite differences, element by element.

An element passes if ``|AD - FD| <= atol + rtol*max(|AD|, |FD|)``. Otherwise it fails
if the mismatch exceeds a multiple of the finite-difference error estimate, and is
inconclusive if not. An element at a kink (one-sided differences disagree) is
inconclusive, or fails if AD lies outside the one-sided interval. With the complex
step, elements where it disagrees with central differences (code that is not analytic)
fall back to central differences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from funcdiff.check._common import FD_TRUST_FACTOR, default_rtol, lowest_precision, machine_eps
from funcdiff.check.results import ElementResult, PairResult
from funcdiff.check.targets import Target

__all__ = ["judge_block"]

_VERDICTS = ("pass", "inconclusive", "fail")


def judge_block(
    target: Target,
    q: int,
    j: int,
    ad: np.ndarray,
    fd: dict[str, np.ndarray],
    method: str,
    rtol: float | None,
    atol: float | None,
    top_k: int,
) -> PairResult:
    """Compare one AD block with its finite differences and summarise it.

    Three steps: pick the finite-difference value and error estimate of each element
    (:func:`_quotients_used`, where the complex step and central differences are
    reconciled), classify each element (:func:`_compare`), and summarise the block
    (:func:`_summarise`).
    """
    out_shape = target.out_shapes[q]
    shape = out_shape + target.problem.x0[j].shape
    dtype = lowest_precision([target.out_dtypes[q], target.problem.x0[j].dtype])
    eps = machine_eps(dtype)
    rt = default_rtol(rtol, dtype)
    a = np.asarray(ad, dtype=np.float64).reshape(shape)
    get = {k: v.reshape(shape) for k, v in fd.items()}
    notes: list[str] = []
    if method == "complex-step":
        n, est = _complex_step_used(a, get, eps, rt, atol, notes)
    else:  # central or Richardson: the quotient the differences chose
        n, est = get["value"].copy(), get["est"].copy()
    scale_floor = _floor(n, a, eps)
    at = float(atol) if atol is not None else scale_floor
    c = _compare(a, n, est, get, at, rt, scale_floor)
    n_kink = int(c.kink.sum())
    if n_kink:
        notes.append(f"{n_kink} element(s) at or near a kink (one-sided differences disagree)")
    n_nonfinite = int((~c.fin_n).sum())
    if n_nonfinite:
        notes.append(f"finite differences not finite at {n_nonfinite} element(s)")
    return _summarise(target, q, j, c, top_k, rt, at, notes, get["step"])


def _floor(vals: np.ndarray, a: np.ndarray, eps: float) -> float:
    """``sqrt(eps)`` times the block's largest finite value (of ``a`` when ``vals`` are 0)."""
    fin = np.abs(vals[np.isfinite(vals)])
    big = float(fin.max()) if fin.size else 0.0
    if big == 0.0:
        fa = np.abs(a[np.isfinite(a)])
        big = float(fa.max()) if fa.size else 0.0
    return math.sqrt(eps) * big


def _complex_step_used(
    a: np.ndarray,
    get: dict[str, np.ndarray],
    eps: float,
    rt: float,
    atol: float | None,
    notes: list[str],
) -> tuple[np.ndarray, np.ndarray]:
    """The complex-step quotients, with central differences where the two disagree
    (code that is not analytic), and their error estimates."""
    c1, c1e = get["central"], get["central_est"]
    fl = atol if atol is not None else _floor(c1, a, eps)
    with np.errstate(invalid="ignore"):
        disagree = ~(np.abs(get["cs"] - c1) <= fl + rt * np.abs(c1) + FD_TRUST_FACTOR * c1e)
    disagree &= np.isfinite(c1)
    if np.any(disagree):
        notes.append(
            f"complex step disagreed with central differences at {int(disagree.sum())} "
            "element(s): the function is not analytic there (abs, comparisons, conj?); "
            "central differences used"
        )
    n = np.where(disagree, c1, get["cs"])
    est = np.where(disagree, c1e, 8 * eps * np.abs(get["cs"]) + np.finfo(float).tiny)
    return n, est


@dataclass
class _Comparison:
    """Every element of a block compared: errors, tolerances, kinks and the verdict
    (``state``: 0 pass, 1 inconclusive, 2 fail)."""

    a: np.ndarray
    n: np.ndarray
    est: np.ndarray
    get: dict[str, np.ndarray]
    err: np.ndarray
    rel: np.ndarray
    tol: np.ndarray
    fin_n: np.ndarray
    fin_a: np.ndarray
    kink: np.ndarray
    inside: np.ndarray
    out: np.ndarray
    state: np.ndarray

    def reason(self, idx: tuple) -> str:
        """Why element ``idx`` did not simply pass ("" when there is nothing to say)."""
        if not self.fin_n[idx]:
            return "finite difference not finite"
        if not self.fin_a[idx]:
            return "AD value not finite"
        if self.kink[idx]:
            bwd, fwd = self.get["bwd"][idx], self.get["fwd"][idx]
            side = f"one-sided differences {bwd:.6g} (left), {fwd:.6g} (right)"
            if self.inside[idx]:
                return f"kink: {side}; not differentiable here"
            return f"kink, and AD is outside the {side}"
        if self.out[idx] and self.state[idx] == 1:
            return "FD error estimate as large as the mismatch"
        return ""


def _compare(
    a: np.ndarray,
    n: np.ndarray,
    est: np.ndarray,
    get: dict[str, np.ndarray],
    at: float,
    rt: float,
    scale_floor: float,
) -> _Comparison:
    """Each element's errors and verdict (see the module docstring for the rule)."""
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.maximum(np.abs(a), np.abs(n))
        tol = at + rt * mag
        err = np.abs(a - n)
        rel = err / np.maximum(mag, max(scale_floor, np.finfo(float).tiny))
        fin_n = np.isfinite(n) & np.isfinite(est)
        fin_a = np.isfinite(a)
        kink = fin_n & (get["kink"] > np.maximum(tol, get["kink_floor"]))
        # AD outside the one-sided interval fails only beyond what the FD can resolve.
        margin = tol + FD_TRUST_FACTOR * get["central_est"]
        lo = np.minimum(get["fwd"], get["bwd"]) - margin
        hi = np.maximum(get["fwd"], get["bwd"]) + margin
        inside = (a >= lo) & (a <= hi)
        out = ~(err <= tol)
    state = np.zeros(a.shape, dtype=np.int8)
    smooth_bad = fin_n & fin_a & ~kink & out
    state[smooth_bad & (err <= FD_TRUST_FACTOR * est)] = 1
    state[smooth_bad & ~(err <= FD_TRUST_FACTOR * est)] = 2
    state[kink & fin_a & inside] = 1
    state[kink & fin_a & ~inside] = 2
    state[~fin_n] = 1
    state[fin_n & ~fin_a] = 2
    return _Comparison(a, n, est, get, err, rel, tol, fin_n, fin_a, kink, inside, out, state)


def _summarise(
    target: Target,
    q: int,
    j: int,
    c: _Comparison,
    top_k: int,
    rt: float,
    at: float,
    notes: list[str],
    steps: np.ndarray,
) -> PairResult:
    """The block's record: counts, largest errors, its worst elements and verdict."""
    shape = c.a.shape
    out_shape = target.out_shapes[q]
    no = len(out_shape)

    def split(flat: int) -> tuple[tuple, tuple]:
        ij = np.unravel_index(flat, shape) if shape else ()
        return tuple(int(v) for v in ij[:no]), tuple(int(v) for v in ij[no:])

    def element(flat: int) -> ElementResult:
        idx = np.unravel_index(flat, shape) if shape else ()
        oi, ii = split(flat)
        return ElementResult(
            label=target.element_label(q, j, oi, ii),
            output_index=oi,
            input_index=ii,
            ad=float(c.a[idx]),
            fd=float(c.n[idx]),
            fd_error=float(c.est[idx]),
            abs_error=float(c.err[idx]),
            rel_error=float(c.rel[idx]),
            step=float(steps[idx]),
            verdict=_VERDICTS[c.state[idx]],
            note=c.reason(idx),
        )

    size = int(np.prod(shape, dtype=np.int64))
    worst: ElementResult | None = None
    top: list[ElementResult] = []
    max_abs: float | None = None
    max_rel: float | None = None
    max_abs_idx: tuple | None = None
    max_rel_idx: tuple | None = None
    n_fail = n_inc = n_out = 0
    if size:
        err, rel, tol, state = c.err, c.rel, c.tol, c.state
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(tol > 0, err / tol, np.where(err > 0, np.inf, 0.0))
        ratio = np.where(np.isfinite(err), ratio, np.inf).ravel()
        flat_state = state.ravel()
        order = np.lexsort((-ratio, -flat_state))
        worst = element(int(order[0]))
        top = [element(int(k)) for k in order[:top_k] if flat_state[k] > 0]
        err_f = np.where(np.isfinite(err), err, -1.0).ravel()
        rel_f = np.where(np.isfinite(rel), rel, -1.0).ravel()
        ka, kr = int(np.argmax(err_f)), int(np.argmax(rel_f))
        max_abs, max_abs_idx = float(err.ravel()[ka]), split(ka)
        max_rel, max_rel_idx = float(rel.ravel()[kr]), split(kr)
        n_fail = int((state == 2).sum())
        n_inc = int((state == 1).sum())
        n_out = int((c.out | c.kink).sum())
    verdict = "fail" if n_fail else ("inconclusive" if n_inc else "pass")
    return PairResult(
        kind=target.kind,
        label=target.pair_label(q, j),
        output=q,
        input=j,
        output_shape=out_shape,
        input_shape=target.problem.x0[j].shape,
        n_elements=size,
        n_out_of_tolerance=n_out,
        n_failed=n_fail,
        n_inconclusive=n_inc,
        max_abs_error=max_abs,
        max_abs_index=max_abs_idx,
        max_rel_error=max_rel,
        max_rel_index=max_rel_idx,
        worst=worst,
        top=top,
        verdict=verdict,
        rtol=rt,
        atol=at,
        notes=notes,
        _target=target,
        _q=q,
        _ad=c.a,
        _steps=steps,
    )
