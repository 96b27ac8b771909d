"""Every derivative block of a target, checked element-wise or first along projections.

In fast mode each (output, input) block is first compared along random directions,
``v^T J d``, against directional finite differences (:mod:`funcdiff.check.projection`);
a block whose projections agree and certify that no element can be off by more than
its tolerance passes without element-wise differences, the others are re-run
element-wise so the report still names the worst element.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._tensor import Tensor
from funcdiff.check.derivatives import jacobian_rows
from funcdiff.check.finite_differences import elementwise_differences, step_base
from funcdiff.check.judge import judge_block
from funcdiff.check.precision import default_rtol, lowest_precision
from funcdiff.check.projection import MIN_SIZE, project_blocks
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
        if fast_mode and problem.x0[j].size >= MIN_SIZE:
            elementwise = set()
            start = step_base("richardson", low, step)
            outcomes = project_blocks(
                target, ad_outs, ins, j, row_eps, f0, rng, rtol, atol, start, fd_method, base
            )
            for q, outcome in enumerate(outcomes):
                if outcome.certified:
                    dt = lowest_precision([target.out_dtypes[q], problem.x0[j].dtype])
                    rt = default_rtol(rtol, dt)
                    results[(q, j)] = _projected_pass(target, q, j, rt, atol, outcome.note)
                else:
                    fast_info[q] = (
                        f"fast mode flagged this block ({outcome.note}); re-run element-wise"
                    )
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
        notes=[info],
        _target=target,
        _q=q,
        _ad=None,
        _steps=None,
    )
