"""gradcheck's slow mode: the call being checked, torch's numerical Jacobian, and the
checks of the analytical side against it.

A :class:`GradcheckCase` is ``func`` called once on the inputs: which inputs require
grad, and the position, shape and dtype of each floating output. The numerical
Jacobian follows torch's slow mode, central differences with the absolute step ``eps``.
:func:`mismatch_table` writes the worst elements of a mismatching block. The checks of
the analytical side each raise GradcheckError on failure:

* the reverse-mode (or forward-mode) Jacobian against the numerical one;
* reentrancy: a second backward pass gives the same Jacobian;
* batched backward and batched forward-mode products against loops of single ones;
* backward sanity: zero cotangents give zero gradients of the right shape and dtype,
  and a zero cotangent on one output of several gives finite gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from funcdiff._core.tensor import Tensor, tensor
from funcdiff._jacobian import basis_rows, jacobian_rows, jvp
from funcdiff.autograd import enable_grad
from funcdiff.autograd.engine import grad
from funcdiff.check._common import GradcheckError, as_array, as_list, format_number

__all__ = [
    "GradcheckCase",
    "backward_jacobian",
    "check_backward_sanity",
    "check_batched_backward",
    "check_reentrant",
    "compare_jacobians",
    "forward_jacobian",
    "mismatch_table",
    "numerical_jacobian",
]


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


# ---------------------------------------------------------------- the analytical side
def backward_jacobian(case: GradcheckCase) -> list[list[np.ndarray]]:
    """``J[i][jj]``: the reverse-mode Jacobian of output i w.r.t. checked input jj."""
    with enable_grad():
        return [jacobian_rows(o, case.ins) for o in case.outs]


def compare_jacobians(
    case: GradcheckCase,
    analytical: list,
    numerical: dict,
    atol: float,
    rtol: float,
    mode: str = "",
) -> None:
    """torch's rule, ``allclose(analytical, numerical, rtol, atol)``, block by block."""
    differentiable = case.differentiable
    for i, (pos, shape, _) in enumerate(case.meta):
        for jj, j in enumerate(case.diff):
            a = analytical[i][jj]
            n = numerical[(i, j)]
            if np.allclose(a, n, rtol=rtol, atol=atol):
                continue
            if not differentiable[i] and not mode:
                head = (
                    f"Jacobian mismatch for output {pos} with respect to input {j},\n"
                    "Numerical gradient for function expected to be zero (the analytical "
                    "gradient is zero: the output does not depend on this input in the "
                    "recorded graph)."
                )
            else:
                head = f"Jacobian {mode}mismatch for output {pos} with respect to input {j},"
            raise GradcheckError(head + "\n" + mismatch_table(a, n, shape, atol, rtol))


def check_reentrant(case: GradcheckCase, analytical: list, nondet_tol: float) -> None:
    """A second backward pass must reproduce the Jacobian to within ``nondet_tol``."""
    again = backward_jacobian(case)
    for a_i, b_i in zip(analytical, again, strict=True):
        for a, b in zip(a_i, b_i, strict=True):
            if a.size and float(np.max(np.abs(a - b))) > nondet_tol:
                raise GradcheckError(
                    "Backward is not reentrant, i.e., running backward with same input "
                    "and grad_output multiple times gives different values, although "
                    "analytical gradient matches numerical gradient. The tolerance for "
                    f"nondeterminism was {nondet_tol}."
                )


def check_batched_backward(case: GradcheckCase) -> None:
    """The batched backward (is_grads_batched) must equal a loop of backward passes."""
    with enable_grad():
        looped = [jacobian_rows(o, case.ins, batched=False) for o in case.outs]
        try:
            batched = [jacobian_rows(o, case.ins, batched=True) for o in case.outs]
        except Exception as exc:  # noqa: BLE001  (reported as the check's failure)
            raise GradcheckError(
                "While computing batched gradients (is_grads_batched=True), got: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    for i, (a_i, b_i) in enumerate(zip(batched, looped, strict=True)):
        for j, (a, b) in zip(case.diff, zip(a_i, b_i, strict=True), strict=True):
            if not np.allclose(a, b, rtol=1e-12, atol=1e-12 * (1 + np.abs(b).max(initial=0))):
                raise GradcheckError(
                    f"Batched grad mismatch for output {case.meta[i][0]} with respect "
                    f"to input {j}: the batched backward (is_grads_batched=True) "
                    "differs from a loop of backward passes.\n"
                    + mismatch_table(a, b, case.meta[i][1], 1e-12, 1e-12)
                )


def forward_jacobian(case: GradcheckCase, check_batched: bool) -> list[list[np.ndarray]]:
    """``J[i][jj]`` from forward-mode products, by columns: input tangents pushed
    through the recorded graph with each operation's tangent map (a custom Function's
    ``jvp`` where it has one, as torch's forward-mode check; its transposed ``backward``
    otherwise).

    With ``check_batched``, each batch of products is also compared with single ones.
    """
    ins = case.ins
    fwd: list[list] = [[None] * len(ins) for _ in case.outs]
    with enable_grad():
        for jj, t in enumerate(ins):
            basis = basis_rows(t.shape, np.float64, 0, 0, t.size)
            dirs = [basis if k == jj else np.zeros((t.size,) + u.shape) for k, u in enumerate(ins)]
            # One column per pass, as torch's slow mode: a batch of tangents would reach
            # a custom Function's batch-aware backward (transposed) as one batch, and
            # that is what check_batched asks about, not this check.
            singles = [jvp(case.outs, ins, [d[b] for d in dirs]) for b in range(t.size)]
            cols = [
                np.stack([s[i] for s in singles]) if singles else np.zeros((0,) + meta[1])
                for i, meta in enumerate(case.meta)
            ]
            if check_batched:
                _check_batched_forward(case, dirs, case.diff[jj], t.shape)
            for i, c in enumerate(cols):
                # c: (n_in, *out_shape) -> out_shape + in_shape
                c = np.moveaxis(c.reshape((t.size, -1)), 0, -1)
                fwd[i][jj] = c.reshape(case.meta[i][1] + t.shape)
    return fwd


def _check_batched_forward(
    case: GradcheckCase, dirs: list[np.ndarray], j: int, in_shape: tuple
) -> None:
    """A batch of forward-mode products must equal a loop of single ones."""
    try:
        batched = jvp(case.outs, case.ins, dirs, batched=True)
    except Exception as exc:  # noqa: BLE001  (reported as the check's failure)
        raise GradcheckError(
            "While computing batched forward-mode products (is_grads_batched=True), got: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for b in range(len(dirs[0])):
        single = jvp(case.outs, case.ins, [d[b] for d in dirs])
        for i, (bat, one) in enumerate(zip(batched, single, strict=True)):
            scale = 1.0 + float(np.max(np.abs(one), initial=0.0))
            if not np.allclose(bat[b], one, rtol=1e-12, atol=1e-12 * scale):
                raise GradcheckError(
                    f"Batched forward grad mismatch for output {case.meta[i][0]} with respect "
                    f"to input {j}, column {np.unravel_index(b, in_shape)}: the batched "
                    "forward-mode product differs from a single one"
                )


def check_backward_sanity(
    case: GradcheckCase, check_undefined_grad: bool, check_grad_dtypes: bool
) -> None:
    """Zero cotangents give zero gradients shaped (and typed) like the inputs; a zero
    cotangent on one of several outputs gives finite gradients."""
    ins, diff = case.ins, case.diff
    live = [o for o in case.outs if isinstance(o, Tensor) and o.requires_grad]
    if not live:
        return
    with enable_grad():
        zeros = [np.zeros(o.shape, dtype=o.dtype) for o in live]
        gs = grad(live, ins, zeros, retain_graph=True, allow_unused=True)
    for j, (t, g) in zip(diff, zip(ins, gs, strict=True), strict=True):
        if g is None:
            continue
        if g.shape != t.shape:
            raise GradcheckError(
                f"Analytical gradient has incorrect size: input {j} has shape "
                f"{t.shape}, its gradient {g.shape}"
            )
        if check_grad_dtypes and g.dtype != t.dtype:
            raise GradcheckError(
                f"Gradient has dtype mismatch: input {j} is {t.dtype}, its gradient {g.dtype}"
            )
        if np.any(g.data != 0):
            raise GradcheckError(
                f"backward not multiplied by grad_output: zero cotangents gave a nonzero "
                f"gradient for input {j} (max {float(np.max(np.abs(g.data))):.3g})"
            )
    if check_undefined_grad and len(live) > 1:
        rng = np.random.default_rng(0)
        for k in range(len(live)):
            cot = [
                np.zeros(o.shape, dtype=o.dtype)
                if m == k
                else rng.standard_normal(o.shape).astype(o.dtype)
                for m, o in enumerate(live)
            ]
            with enable_grad():
                gs = grad(live, ins, cot, retain_graph=True, allow_unused=True)
            for j, g in zip(diff, gs, strict=True):
                if g is not None and not np.all(np.isfinite(g.data)):
                    raise GradcheckError(
                        "Expected backward function to handle undefined output grads: with a "
                        f"zero cotangent for output {case.meta[k][0]}, the gradient of input "
                        f"{j} is not finite"
                    )
