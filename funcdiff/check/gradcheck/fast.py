"""gradcheck's fast mode: ``v^T J u`` against a central difference along ``u``.

``u`` and ``v`` are unit vectors whose entries are random signs times magnitudes in
[1, 2], so that every element weighs at least half its share. The difference quotient
along ``u`` (steps ``eps`` and ``2*eps``) has an error estimate from the two steps, and
the rounding of ``x + s*eps*u`` to the input's dtype is taken out with the analytical
``v^T J`` (it is of size ``eps_machine*|x|/eps`` and would otherwise hide small errors
for elements far from 0).

A pair passes on its projection alone only if the projection meets torch's rule, agrees
with the quotient within the quotient's error, and is *certified*: an element off by
more than torch's tolerance ``atol + rtol*|numerical|`` would have moved the projection
by at least twice the bound it was held to. Any other pair is re-checked element-wise
(torch's slow mode) for that pair alone, which decides and names the worst elements:
a projection can hide a wrong small component under the tolerance of the large ones,
the certificate cannot.
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.tensor import tensor
from funcdiff._jacobian import jacobian_rows, vjp
from funcdiff.autograd import enable_grad
from funcdiff.check._common import (
    FD_TRUST_FACTOR,
    GradcheckError,
    as_array,
    as_list,
    lowest_precision,
    machine_eps,
)
from funcdiff.check.gradcheck.jacobians import GradcheckCase, mismatch_table, numerical_jacobian

__all__ = ["check_fast"]


def _unit_vectors(rng: np.random.Generator, shapes: list[tuple]) -> list[np.ndarray]:
    """Random signs times magnitudes in [1, 2], scaled to unit norm."""
    vectors = []
    for shape in shapes:
        u = rng.choice([-1.0, 1.0], size=shape) * rng.uniform(1.0, 2.0, size=shape)
        vectors.append(u / max(float(np.linalg.norm(u)), 1e-300))
    return vectors


def _smallest(a: np.ndarray) -> float:
    return float(np.min(np.abs(a))) if a.size else 0.0


def check_fast(case: GradcheckCase, eps: float, atol: float, rtol: float, seed: int) -> None:
    """Compare ``v^T J u`` for random unit ``u``, ``v``; raise GradcheckError on a mismatch."""
    rng = np.random.default_rng(seed)
    ins, meta, inputs = case.ins, case.meta, case.inputs
    us = _unit_vectors(rng, [t.shape for t in ins])
    vs = _unit_vectors(rng, [shape for _, shape, _ in meta])
    # Analytical: one backward pass per output gives v^T J for every input.
    grads: dict[tuple[int, int], np.ndarray] = {}
    proj_a = np.zeros((len(meta), len(ins)))
    scale = np.zeros_like(proj_a)
    with enable_grad():
        for i, o in enumerate(case.outs):
            for jj, g in enumerate(vjp([o], ins, [vs[i]])):
                g = np.asarray(g, dtype=np.float64)
                grads[(i, jj)] = g
                proj_a[i, jj] = float(np.sum(g * us[jj]))
                scale[i, jj] = float(np.sum(np.abs(g * us[jj])))
    proj_n = np.zeros_like(proj_a)
    proj_est = np.zeros_like(proj_a)
    for jj, j in enumerate(case.diff):
        x = inputs[j].data
        vals = {}
        moved = {}
        for step in (1, -1, 2, -2):
            args = list(inputs)
            arr = (x + step * eps * us[jj]).astype(inputs[j].dtype)
            moved[step] = arr.astype(np.float64) - x - step * eps * us[jj]
            args[j] = tensor(arr, requires_grad=True)
            with enable_grad():
                outs = as_list(case.func(*args))
            vals[step] = [np.asarray(as_array(outs[pos]), dtype=np.float64) for pos, _, _ in meta]
        for i, (_, _, dt) in enumerate(meta):
            # v . f at each point, less the (first-order) effect of rounding the point.
            p = {
                s: float(np.sum(vs[i] * vals[s][i])) - float(np.sum(grads[(i, jj)] * moved[s]))
                for s in vals
            }
            d1 = (p[1] - p[-1]) / (2 * eps)
            d2 = (p[2] - p[-2]) / (4 * eps)
            proj_n[i, jj] = d1
            fmax = np.maximum.reduce([np.abs(vals[s][i]) for s in vals])
            noise = machine_eps(lowest_precision([dt, inputs[j].dtype])) / eps
            proj_est[i, jj] = abs(d1 - d2) + 2 * noise * float(np.linalg.norm(vs[i] * fmax))
    for i, (pos, shape, dt) in enumerate(meta):
        for jj, j in enumerate(case.diff):
            a, n = proj_a[i, jj], proj_n[i, jj]
            bound = FD_TRUST_FACTOR * proj_est[i, jj] + 10 * machine_eps(dt) * scale[i, jj]
            torch_ok = abs(a - n) <= atol + rtol * abs(n)
            est_ok = abs(a - n) <= bound
            # The least shift of the projection by one element off by torch's tolerance
            # (|numerical| >= |analytical| - error, hence the 1 + rtol).
            if int(np.prod(shape, dtype=np.int64)) == 1:
                tol = (atol + rtol * np.abs(grads[(i, jj)] / vs[i].flat[0])) / (1 + rtol)
                sens = abs(float(vs[i].flat[0])) * float(
                    np.min(np.abs(us[jj]) * tol, initial=np.inf)
                )
            else:
                sens = _smallest(vs[i]) * _smallest(us[jj]) * atol / (1 + rtol)
            certified = 2 * bound <= sens
            if torch_ok and est_ok and certified:
                continue
            numerical = numerical_jacobian(case, [j], eps, [meta[i]])[(0, j)]
            with enable_grad():
                analytical = jacobian_rows(case.outs[i], [ins[jj]])[0]
            slow_ok = bool(np.allclose(analytical, numerical, rtol=rtol, atol=atol))
            if slow_ok and torch_ok:
                continue
            msg = (
                f"Jacobian mismatch for output {pos} with respect to input {j},\n"
                f"fast mode: v^T J u analytical {a:.9g}, numerical {n:.9g} (error estimate "
                f"{proj_est[i, jj]:.2g}) for random unit u and v (seed {seed}).\n"
                "Element-wise re-check of this pair:\n"
                + mismatch_table(analytical, numerical, shape, atol, rtol)
            )
            if slow_ok:
                msg += (
                    "\nNote: the element-wise check of this pair passes; the fast-mode "
                    "failure may be a false positive of the projection."
                )
            raise GradcheckError(msg)
