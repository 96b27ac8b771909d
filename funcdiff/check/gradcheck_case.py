"""What gradcheck compares: the call being checked and torch's numerical Jacobian.

A :class:`GradcheckCase` is ``func`` called once on the inputs: which inputs require
grad, and the position, shape and dtype of each floating output. The numerical
Jacobian follows torch's slow mode, central differences with the absolute step ``eps``.
:func:`mismatch_table` writes the worst elements of a mismatching block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from funcdiff._core.tensor import Tensor, tensor
from funcdiff.autograd import enable_grad
from funcdiff.check.errors import GradcheckError
from funcdiff.check.formatting import format_number
from funcdiff.check.values import as_array, as_list

__all__ = ["GradcheckCase", "mismatch_table", "numerical_jacobian"]


@dataclass
class GradcheckCase:
    """``func`` recorded once at ``inputs``, as gradcheck sees it.

    ``diff`` holds the positions of the inputs requiring grad and ``ins`` those inputs;
    ``meta`` holds ``(position, shape, dtype)`` of each floating output and ``outs``
    those outputs.
    """

    func: Callable
    inputs: tuple
    diff: list[int]
    ins: list[Tensor]
    meta: list[tuple[int, tuple, np.dtype]]
    outs: list

    @property
    def differentiable(self) -> list[bool]:
        """For each output: is it connected to the recorded graph?"""
        return [isinstance(o, Tensor) and o.requires_grad for o in self.outs]


def numerical_jacobian(
    case: GradcheckCase, diff: list[int], eps: float, meta: list[tuple]
) -> dict[tuple[int, int], np.ndarray]:
    """torch's slow-mode numerical Jacobian: central differences with absolute ``eps``.

    Block ``(i, j)`` is the Jacobian of ``meta[i]``'s output w.r.t. input position ``j``,
    of shape ``out_shape + in_shape``.
    """
    result = {}

    def run(j: int, arr: np.ndarray) -> list[np.ndarray]:
        args = list(case.inputs)
        args[j] = tensor(arr, requires_grad=case.inputs[j].requires_grad)
        with enable_grad():
            outs = as_list(case.func(*args))
        vals = []
        for pos, shape, dtype in meta:
            d = as_array(outs[pos])
            if d.shape != shape or d.dtype != dtype:
                raise GradcheckError(
                    "Expected `func` to return outputs with the same shape and dtype when "
                    f"inputs are perturbed: output {pos} had shape {shape} and dtype {dtype}, "
                    f"but {d.shape} and {d.dtype} after perturbing input {j}"
                )
            vals.append(np.asarray(d, dtype=np.float64))
        return vals

    for j in diff:
        x = case.inputs[j].data
        cols = [np.zeros((int(np.prod(s, dtype=np.int64)), x.size)) for _, s, _ in meta]
        for k in range(x.size):
            xp = x.copy()
            xp.flat[k] = xp.flat[k] + eps
            xm = x.copy()
            xm.flat[k] = xm.flat[k] - eps
            for c, vp, vm in zip(cols, run(j, xp), run(j, xm), strict=True):
                c[:, k] = ((vp - vm) / (2 * eps)).ravel()
        for i, ((_, s, _), c) in enumerate(zip(meta, cols, strict=True)):
            result[(i, j)] = c.reshape(s + x.shape)
    return result


def mismatch_table(
    a: np.ndarray,
    n: np.ndarray,
    out_shape: tuple,
    atol: float,
    rtol: float,
    k: int = 5,
) -> str:
    """How many elements of a block differ, the largest error, and the worst ``k`` elements."""
    err = np.abs(a - n)
    tol = atol + rtol * np.abs(n)
    bad = ~(err <= tol)
    nbad = int(bad.sum())
    lines = [
        f"{nbad} of {a.size} elements differ by more than atol + rtol*|numerical| "
        f"(atol={atol:g}, rtol={rtol:g})."
    ]
    if a.size:
        score = np.where(np.isfinite(err), err, np.inf).ravel()
        order = np.argsort(-score, kind="stable")[:k]
        no = len(out_shape)
        ka = int(order[0])
        ij = np.unravel_index(ka, a.shape) if a.ndim else ()
        lines.append(
            f"max abs error {format_number(err.ravel()[ka])} at output index "
            f"{tuple(int(v) for v in ij[:no])}, input index "
            f"{tuple(int(v) for v in ij[no:])}."
        )
        lines.append(
            f"  {'output':<14}{'input':<14}{'analytical':>17}{'numerical':>17}{'abs err':>11}"
        )
        for f in order:
            if not bad.ravel()[f] and nbad:
                continue
            ij = np.unravel_index(int(f), a.shape) if a.ndim else ()
            oi = str(tuple(int(v) for v in ij[:no]))
            ii = str(tuple(int(v) for v in ij[no:]))
            lines.append(
                f"  {oi:<14}{ii:<14}{a.ravel()[f]:>17.9g}{n.ravel()[f]:>17.9g}"
                f"{format_number(err.ravel()[f]):>11}"
            )
    return "\n".join(lines)
