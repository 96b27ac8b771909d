"""Every derivative block of a target, checked element-wise or first along a projection.

In fast mode each (output, input) block is first compared along one random direction,
``v^T J d``, against a directional finite difference; a block whose projection agrees
and is certified by the error estimate passes without element-wise differences, the
others are re-run element-wise so the report still names the worst element.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from funcdiff._tensor import Tensor
from funcdiff.check.derivatives import jacobian_rows, vjp
from funcdiff.check.finite_differences import (
    directional_difference,
    elementwise_differences,
    power_of_two,
    step_base,
    typical_magnitude,
)
from funcdiff.check.judge import judge_block
from funcdiff.check.precision import FD_TRUST_FACTOR, default_rtol, lowest_precision, machine_eps
from funcdiff.check.report import PairResult
from funcdiff.check.targets import Target

__all__ = ["check_blocks"]


def check_blocks(
    target: Target,
    ad_outs: list[Any],
    ins: list[Tensor],
    method: str,
    rtol: float | None,
    atol: float | None,
    fast_mode: bool,
    rng: np.random.Generator,
    step: float | None,
    top_k: int,
    f0: list[np.ndarray],
) -> list[PairResult]:
    """Every (output, input) block of ``target``, element-wise or projected first."""
    problem = target.problem
    fd_method = (
        method if target.kind == "jacobian" else ("central" if method == "complex-step" else method)
    )
    results: dict[tuple[int, int], PairResult] = {}
    rows_cache: dict[int, list[np.ndarray]] = {}

    def rows(q: int) -> list[np.ndarray]:
        if q not in rows_cache:
            rows_cache[q] = jacobian_rows(ad_outs[q], ins)
        return rows_cache[q]

    for j in range(len(problem.x0)):
        row_eps, low = target.row_eps(j)
        base = step_base(fd_method, low, step)
        elementwise = set(range(len(ad_outs)))
        fast_info: dict[int, str] = {}
        if fast_mode and problem.x0[j].size > 1:
            elementwise = set()
            for q, verdict in _projected_verdicts(
                target, ad_outs, ins, j, fd_method, base, row_eps, f0, rng, rtol, atol
            ):
                if isinstance(verdict, PairResult):
                    results[(q, j)] = verdict
                else:
                    fast_info[q] = verdict
                    elementwise.add(q)
        if not elementwise:
            continue
        fd = elementwise_differences(
            target, j, fd_method, f0, base, row_eps, default_rtol(rtol, low)
        )
        offsets = target.row_offsets()
        for q in sorted(elementwise):
            block = {k: v[offsets[q] : offsets[q + 1]] for k, v in fd.items()}
            res = judge_block(target, q, j, rows(q)[j], block, fd_method, rtol, atol, top_k)
            if q in fast_info:
                res.notes.insert(0, fast_info[q])
                res.fast_mode = True
            results[(q, j)] = res
    for res in results.values():
        if res._ad is None:
            res._ad = rows(res.output)[res.input]
    return [results[key] for key in sorted(results, key=lambda k: (k[0], k[1]))]


def _projected_verdicts(
    target: Target,
    ad_outs: list[Any],
    ins: list[Tensor],
    j: int,
    fd_method: str,
    base: float,
    row_eps: np.ndarray,
    f0: list[np.ndarray],
    rng: np.random.Generator,
    rtol: float | None,
    atol: float | None,
) -> list[tuple[int, PairResult | str]]:
    """Fast mode for input ``j``: per output, a passing PairResult or why to re-run it."""
    x = target.problem.x0[j]
    s = np.abs(x)
    typ = typical_magnitude(x.ravel())
    s = np.where(s > 0, s, typ if typ > 0 else 1.0)
    u = rng.choice([-1.0, 1.0], size=x.shape)
    d = u * s
    t = power_of_two(base)
    q_all = directional_difference(target, j, d, t, fd_method, f0, row_eps)
    verdicts: list[tuple[int, PairResult | str]] = []
    for q, (val, e1) in enumerate(
        zip(target.split_rows(q_all["value"]), target.split_rows(q_all["est"]), strict=True)
    ):
        v = rng.choice([-1.0, 1.0], size=val.shape)
        (vj,) = vjp([ad_outs[q]], [ins[j]], [v.reshape(target.out_shapes[q])])
        vj = np.asarray(vj, dtype=np.float64)
        a_proj = float(np.sum(vj * d))
        scale = float(np.sum(np.abs(vj * d)))
        n_proj = float(np.sum(v * val))
        est = float(np.sum(np.abs(e1)))
        dt = lowest_precision([target.out_dtypes[q], x.dtype])
        rt = default_rtol(rtol, dt)
        mismatch = abs(a_proj - n_proj)
        agrees = mismatch <= FD_TRUST_FACTOR * est + 10 * machine_eps(dt) * scale
        certified = FD_TRUST_FACTOR * est <= rt * scale if scale > 0 else est == 0
        info = f"projection v^T J d: AD {a_proj:.9g}, FD {n_proj:.9g}, FD err est {est:.2g}"
        if agrees and certified and math.isfinite(n_proj):
            verdicts.append((q, _projected_pass(target, q, j, rt, atol, info)))
        else:
            why = "mismatch" if not agrees else "FD not accurate enough to certify"
            verdicts.append(
                (q, f"fast mode flagged this block ({why}; {info}); re-run element-wise")
            )
    return verdicts


def _projected_pass(
    target: Target, q: int, j: int, rt: float, atol: float | None, info: str
) -> PairResult:
    """A block that passed along its projection: no element-wise figures."""
    in_shape = target.problem.x0[j].shape
    return PairResult(
        kind=target.kind,
        label=target.pair_label(q, j),
        output=q,
        input=j,
        output_shape=target.out_shapes[q],
        input_shape=in_shape,
        n_elements=int(np.prod(target.out_shapes[q] + in_shape)),
        n_out_of_tolerance=0,
        n_failed=0,
        n_inconclusive=0,
        max_abs_error=None,
        max_abs_index=None,
        max_rel_error=None,
        max_rel_index=None,
        worst=None,
        top=[],
        verdict="pass",
        rtol=rt,
        atol=float(atol) if atol is not None else 0.0,
        fast_mode=True,
        notes=[f"fast mode: checked along one random direction ({info})"],
        _target=target,
        _q=q,
        _ad=None,
        _steps=None,
    )
