"""Every derivative block of a target, checked element-wise or first along projections.

In fast mode each (output, input) block is first compared along random directions,
``v^T J d``, against directional finite differences (:mod:`funcdiff.check.projection`);
a block whose projections agree and certify that no element can be off by more than
its tolerance passes without element-wise differences, the others are re-run
element-wise so the report still names the worst element.
"""

from __future__ import annotations

import numpy as np

from funcdiff.check._common import default_rtol, indexed_name, lowest_precision
from funcdiff.check.analytical import Analytical
from funcdiff.check.finite_differences import elementwise_differences, step_base
from funcdiff.check.judge import judge_block
from funcdiff.check.projection import MIN_SIZE, ProjectionOutcome, project_blocks
from funcdiff.check.results import PairResult
from funcdiff.check.targets import Target

__all__ = ["check_blocks"]


def check_blocks(
    target: Target,
    analytical: Analytical,
    method: str,
    rtol: float | None,
    atol: float | None,
    fast_mode: bool,
    rng: np.random.Generator,
    step: float | None,
    top_k: int,
    f0: list[np.ndarray],
) -> list[PairResult]:
    """Every (output, input) block of ``target``, element-wise or projected first.

    ``analytical`` gives the derivative under test (funcdiff's AD or the user's).
    """
    problem = target.problem
    fd_method = (
        method if target.kind == "jacobian" else ("central" if method == "complex-step" else method)
    )
    results: dict[tuple[int, int], PairResult] = {}

    for j in range(len(problem.x0)):
        row_eps, low = target.row_eps(j)
        base = step_base(fd_method, low, step)
        elementwise = set(range(len(target.out_shapes)))
        fast_info: dict[int, str] = {}
        if fast_mode and problem.x0[j].size >= MIN_SIZE:
            elementwise = set()
            start = step_base("richardson", low, step)
            outcomes = project_blocks(
                target, analytical, j, row_eps, f0, rng, rtol, atol, start, fd_method, base
            )
            for q, outcome in enumerate(outcomes):
                if outcome.certified:
                    dt = lowest_precision([target.out_dtypes[q], problem.x0[j].dtype])
                    rt = default_rtol(rtol, dt)
                    results[(q, j)] = _projected_pass(target, q, j, rt, atol, outcome.note)
                elif outcome.suspects is not None:
                    located = _located(
                        target,
                        analytical,
                        q,
                        j,
                        outcome,
                        fd_method,
                        f0,
                        base,
                        row_eps,
                        rtol,
                        atol,
                        top_k,
                    )
                    if located is not None:
                        results[(q, j)] = located
                    else:
                        fast_info[q] = (
                            f"fast mode flagged this block ({outcome.note}); re-run element-wise"
                        )
                        elementwise.add(q)
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
            res = judge_block(
                target, q, j, analytical.block(q, j), block, fd_method, rtol, atol, top_k
            )
            if q in fast_info:
                res.notes.insert(0, fast_info[q])
                res.fast_mode = True
            results[(q, j)] = res
    for res in results.values():
        if res._ad is None:
            res._ad = analytical.block(res.output, res.input)
    return [results[key] for key in sorted(results, key=lambda k: (k[0], k[1]))]


def _located(
    target: Target,
    analytical: Analytical,
    q: int,
    j: int,
    outcome: ProjectionOutcome,
    fd_method: str,
    f0: list[np.ndarray],
    base: float,
    row_eps: np.ndarray,
    rtol: float | None,
    atol: float | None,
    top_k: int,
) -> PairResult | None:
    """The block judged on the elements a bisection led to, if one of them fails.

    The other elements count as passing in the figures (their columns hold the
    analytical values): the note says that they were not differenced one by one.
    """
    cols = outcome.suspects or []
    low = lowest_precision([target.out_dtypes[q], target.problem.x0[j].dtype])
    fd = elementwise_differences(
        target, j, fd_method, f0, base, row_eps, default_rtol(rtol, low), columns=cols
    )
    offsets = target.row_offsets()
    ad = np.asarray(analytical.block(q, j), dtype=np.float64)
    m = offsets[q + 1] - offsets[q]
    ad2 = ad.reshape(m, -1)
    others = np.ones(ad2.shape[1], dtype=bool)
    others[cols] = False
    block = {}
    for key, v in fd.items():
        part = v[offsets[q] : offsets[q + 1]].copy()
        if key in ("value", "central", "fwd", "bwd", "cs"):
            part[:, others] = ad2[:, others]
        elif key == "step":
            part[:, others] = np.nan
        else:
            part[:, others] = 0.0
        block[key] = part
    res = judge_block(target, q, j, ad, block, fd_method, rtol, atol, top_k)
    if res.verdict != "fail":
        return None
    shape = target.problem.x0[j].shape
    name = target.problem.names[j]
    shown = ", ".join(
        indexed_name(name, tuple(int(i) for i in np.unravel_index(c, shape))) for c in cols
    )
    res.notes.insert(
        0,
        f"fast mode flagged this block ({outcome.note}); a bisection of the direction led "
        f"to {len(cols)} element(s) ({shown}), differenced one by one: the other "
        f"{res.n_elements - len(cols) * max(m, 1)} were not, and may be wrong too "
        "(fast_mode=False checks them all)",
    )
    res.fast_mode = True
    return res


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
