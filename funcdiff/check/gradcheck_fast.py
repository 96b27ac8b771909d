"""gradcheck's fast mode: ``v^T J u`` against a central difference along ``u``.

A projection that fails torch's rule is re-checked element-wise for the message. So is
one that passes it but differs from the difference quotient by more than the
quotient's own error (from a second step 2*eps): a projection hides a wrong small
component under the tolerance of the large ones, the error estimate does not.
"""

from __future__ import annotations

import numpy as np

from funcdiff._tensor import tensor
from funcdiff.autograd.grad_mode import enable_grad
from funcdiff.check.derivatives import jacobian_rows, vjp
from funcdiff.check.errors import GradcheckError
from funcdiff.check.gradcheck_case import GradcheckCase, mismatch_table, numerical_jacobian
from funcdiff.check.precision import FD_TRUST_FACTOR, lowest_precision, machine_eps
from funcdiff.check.values import as_array, as_list

__all__ = ["check_fast"]


def _unit_vectors(rng: np.random.Generator, shapes: list[tuple]) -> list[np.ndarray]:
    vectors = []
    for shape in shapes:
        u = rng.standard_normal(shape)
        vectors.append(u / max(float(np.linalg.norm(u)), 1e-300))
    return vectors


def check_fast(case: GradcheckCase, eps: float, atol: float, rtol: float, seed: int) -> None:
    """Compare ``v^T J u`` for random unit ``u``, ``v``; raise GradcheckError on a mismatch."""
    rng = np.random.default_rng(seed)
    ins, meta, inputs = case.ins, case.meta, case.inputs
    us = _unit_vectors(rng, [t.shape for t in ins])
    vs = _unit_vectors(rng, [shape for _, shape, _ in meta])
    # Analytical: one backward pass per output gives v^T J for every input.
    proj_a = np.zeros((len(meta), len(ins)))
    scale = np.zeros_like(proj_a)
    with enable_grad():
        for i, o in enumerate(case.outs):
            for jj, g in enumerate(vjp([o], ins, [vs[i]])):
                proj_a[i, jj] = float(np.sum(g * us[jj]))
                scale[i, jj] = float(np.sum(np.abs(g * us[jj])))
    proj_n = np.zeros_like(proj_a)
    proj_est = np.zeros_like(proj_a)
    for jj, j in enumerate(case.diff):
        vals = {}
        for step in (1, -1, 2, -2):
            args = list(inputs)
            arr = (inputs[j].data + step * eps * us[jj]).astype(inputs[j].dtype)
            args[j] = tensor(arr, requires_grad=True)
            with enable_grad():
                outs = as_list(case.func(*args))
            vals[step] = [np.asarray(as_array(outs[pos]), dtype=np.float64) for pos, _, _ in meta]
        for i, (_, _, dt) in enumerate(meta):
            d1 = (vals[1][i] - vals[-1][i]) / (2 * eps)
            d2 = (vals[2][i] - vals[-2][i]) / (4 * eps)
            proj_n[i, jj] = float(np.sum(vs[i] * d1))
            fmax = max(float(np.max(np.abs(vals[s][i]), initial=0.0)) for s in vals)
            noise = 2 * machine_eps(lowest_precision([dt, inputs[j].dtype])) * fmax / eps
            proj_est[i, jj] = abs(float(np.sum(vs[i] * (d1 - d2)))) + noise * float(
                np.sum(np.abs(vs[i]))
            )
    for i, (pos, shape, dt) in enumerate(meta):
        for jj, j in enumerate(case.diff):
            a, n = proj_a[i, jj], proj_n[i, jj]
            torch_ok = abs(a - n) <= atol + rtol * abs(n)
            est_ok = abs(a - n) <= (
                FD_TRUST_FACTOR * proj_est[i, jj] + 10 * machine_eps(dt) * scale[i, jj]
            )
            if torch_ok and est_ok:
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
