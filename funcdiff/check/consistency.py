"""Checks that need no finite differences: AD's quantities against each other.

* forward values: the function on Tensors against the same function on plain ndarrays;
* the dot-product (adjoint) test ``<u, J v> = <J^T u, v>``: jvp by the double-backward
  trick against a vjp; a backward that is not linear in its cotangent fails it;
* the symmetry of the Hessian blocks;
* ``hvp = vhp``: the double-backward trick on the gradient against reverse over reverse.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor
from funcdiff._jacobian import double_backward_jvp as jvp
from funcdiff._jacobian import jacobian_rows, vjp
from funcdiff.autograd import enable_grad
from funcdiff.check._common import as_array
from funcdiff.check.results import ConsistencyCheck
from funcdiff.check.targets import SecondOrderTarget

__all__ = ["dot_product_check", "forward_values_check", "second_order_checks"]


def _verdict(err: float, tol: float) -> str:
    return "pass" if err <= tol else "fail"


def forward_values_check(
    ad_vals: list[np.ndarray], numpy_vals: list[np.ndarray], eps: float
) -> ConsistencyCheck:
    """The outputs computed on Tensors against those computed on plain ndarrays."""
    diffs = [np.max(np.abs(a - b), initial=0.0) for a, b in zip(ad_vals, numpy_vals, strict=True)]
    mags = [np.max(np.abs(b), initial=0.0) for b in numpy_vals]
    err, mag = float(max(diffs)), float(max(mags))
    tol = math.sqrt(eps) * mag  # a rule computing the same value differently is fine
    return ConsistencyCheck(
        "forward values: Tensors vs plain NumPy",
        float(ad_vals[0].ravel()[0]) if ad_vals[0].size else 0.0,
        float(numpy_vals[0].ravel()[0]) if numpy_vals[0].size else 0.0,
        err,
        tol,
        _verdict(err, tol),
    )


def dot_product_check(
    name: str, outs: list[Any], ins: list[Tensor], rng: np.random.Generator, eps: float
) -> ConsistencyCheck:
    """<u, J v> (double-backward jvp) against <J^T u, v> (vjp), for random u and v."""
    vs = [rng.standard_normal(t.shape) for t in ins]
    us = [rng.standard_normal(np.shape(as_array(o))) for o in outs]
    lhs_terms = [u * w for u, w in zip(us, jvp(outs, ins, vs), strict=True)]
    rhs_terms = [g * v for g, v in zip(vjp(outs, ins, us), vs, strict=True)]
    lhs = float(sum(np.sum(t) for t in lhs_terms))
    rhs = float(sum(np.sum(t) for t in rhs_terms))
    scale = float(sum(np.sum(np.abs(t)) for t in lhs_terms + rhs_terms))
    tol = 1e3 * eps * scale
    err = abs(lhs - rhs)
    return ConsistencyCheck(name, lhs, rhs, err, tol, _verdict(err, tol))


def second_order_checks(
    second: SecondOrderTarget,
    ad_outs: list[Any],
    ins: list[Tensor],
    outs2: list[Any],
    ins2: list[Tensor],
    rng: np.random.Generator,
    eps: float,
) -> list[ConsistencyCheck]:
    """The dot-product test, Hessian symmetry and hvp = vhp for every output."""
    with enable_grad():
        checks = [dot_product_check("dot product <u, J v> = <J^T u, v>", ad_outs, ins, rng, eps)]
        checks.append(_hessian_symmetry(second, outs2, ins2, eps))
        vs = [rng.standard_normal(t.shape) for t in ins2]
        by_out: dict[int, list[int]] = {}
        for q, (i, _) in enumerate(second.map):
            by_out.setdefault(i, []).append(q)
        for qs in by_out.values():
            name = f"hvp = vhp for {second.out_labels[qs[0]]}" if ins2 else "hvp"
            checks.append(_hvp_vhp(name, [outs2[q] for q in qs], ins2, vs, eps))
    return checks


def _hessian_symmetry(
    second: SecondOrderTarget, outs2: list[Any], ins2: list[Tensor], eps: float
) -> ConsistencyCheck:
    """max|H - H^T| over all blocks, against sqrt(eps) times the largest entry."""
    worst, mag = 0.0, 0.0
    blocks = {}
    for q, g in enumerate(outs2):
        i, jj = second.map[q]
        for k, b in enumerate(jacobian_rows(g, ins2)):
            blocks[(i, jj, k)] = b
            mag = max(mag, float(np.max(np.abs(b), initial=0.0)))
    for (i, jj, k), b in blocks.items():
        other = blocks[(i, k, jj)]
        nj, nk = ins2[jj].ndim, ins2[k].ndim
        perm = tuple(range(nk, nk + nj)) + tuple(range(nk))
        bt = np.transpose(other, perm) if other.ndim else other
        worst = max(worst, float(np.max(np.abs(b - bt), initial=0.0)))
    tol = math.sqrt(eps) * mag
    return ConsistencyCheck(
        "Hessian symmetry max|H - H^T|", worst, 0.0, worst, tol, _verdict(worst, tol)
    )


def _hvp_vhp(
    name: str, grads: list[Any], ins2: list[Tensor], vs: list[np.ndarray], eps: float
) -> ConsistencyCheck:
    """H v by the double-backward trick on the gradient against v^T H (reverse over reverse)."""
    try:
        hv = jvp(grads, ins2, vs)
        vh = vjp(grads, ins2, vs)
    except (NotImplementedError, RuntimeError, TypeError) as exc:
        return ConsistencyCheck(
            name,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            "inconclusive",
            f"third-order pass failed: {exc}",
        )
    err = max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(hv, vh, strict=True))
    big = max(float(np.max(np.abs(a), initial=0.0)) for a in hv + vh)
    tol = math.sqrt(eps) * big
    lhs = float(sum(np.sum(a) for a in hv))
    rhs = float(sum(np.sum(b) for b in vh))
    return ConsistencyCheck(name, lhs, rhs, err, tol, _verdict(err, tol))
