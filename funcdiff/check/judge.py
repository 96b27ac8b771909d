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

import numpy as np

from funcdiff.check.precision import FD_TRUST_FACTOR, default_rtol, lowest_precision, machine_eps
from funcdiff.check.report import ElementResult, PairResult
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
    """Compare one AD block with its finite differences and summarise it."""
    out_shape = target.out_shapes[q]
    in_shape = target.problem.x0[j].shape
    shape = out_shape + in_shape
    dtype = lowest_precision([target.out_dtypes[q], target.problem.x0[j].dtype])
    eps = machine_eps(dtype)
    rt = default_rtol(rtol, dtype)
    a = np.asarray(ad, dtype=np.float64).reshape(shape)
    get = {k: v.reshape(shape) for k, v in fd.items()}
    n = get["value"].copy()
    est = get["est"].copy()
    notes: list[str] = []

    def floor_of(vals: np.ndarray) -> float:
        fin = np.abs(vals[np.isfinite(vals)])
        big = float(fin.max()) if fin.size else 0.0
        if big == 0.0:
            fa = np.abs(a[np.isfinite(a)])
            big = float(fa.max()) if fa.size else 0.0
        return math.sqrt(eps) * big

    if method == "complex-step":
        c1, c1e = get["central"], get["central_est"]
        fl = atol if atol is not None else floor_of(c1)
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

    scale_floor = floor_of(n)
    at = float(atol) if atol is not None else scale_floor
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
    state = np.zeros(shape, dtype=np.int8)  # 0 pass, 1 inconclusive, 2 fail
    smooth_bad = fin_n & fin_a & ~kink & out
    state[smooth_bad & (err <= FD_TRUST_FACTOR * est)] = 1
    state[smooth_bad & ~(err <= FD_TRUST_FACTOR * est)] = 2
    state[kink & fin_a & inside] = 1
    state[kink & fin_a & ~inside] = 2
    state[~fin_n] = 1
    state[fin_n & ~fin_a] = 2

    def reason(idx: tuple) -> str:
        if not fin_n[idx]:
            return "finite difference not finite"
        if not fin_a[idx]:
            return "AD value not finite"
        if kink[idx]:
            side = (
                f"one-sided differences {get['bwd'][idx]:.6g} (left), {get['fwd'][idx]:.6g} (right)"
            )
            if inside[idx]:
                return f"kink: {side}; not differentiable here"
            return f"kink, and AD is outside the {side}"
        if out[idx] and state[idx] == 1:
            return "FD error estimate as large as the mismatch"
        return ""

    size = int(np.prod(shape, dtype=np.int64))
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
            ad=float(a[idx]),
            fd=float(n[idx]),
            fd_error=float(est[idx]),
            abs_error=float(err[idx]),
            rel_error=float(rel[idx]),
            step=float(get["step"][idx]),
            verdict=_VERDICTS[state[idx]],
            note=reason(idx),
        )

    max_abs: float | None  # and where: None for an empty block
    max_rel: float | None
    max_abs_idx: tuple[tuple, tuple] | None
    max_rel_idx: tuple[tuple, tuple] | None
    if size:
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
        n_out = int((out | kink).sum())
        verdict = "fail" if n_fail else ("inconclusive" if n_inc else "pass")
    else:
        worst, top = None, []
        max_abs = max_rel = None
        max_abs_idx = max_rel_idx = None
        n_fail = n_inc = n_out = 0
        verdict = "pass"
    n_kink = int(kink.sum())
    if n_kink:
        notes.append(f"{n_kink} element(s) at or near a kink (one-sided differences disagree)")
    n_nonfinite = int((~fin_n).sum())
    if n_nonfinite:
        notes.append(f"finite differences not finite at {n_nonfinite} element(s)")
    return PairResult(
        kind=target.kind,
        label=target.pair_label(q, j),
        output=q,
        input=j,
        output_shape=out_shape,
        input_shape=in_shape,
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
        _ad=a,
        _steps=get["step"],
    )
