"""gradcheck and gradgradcheck: torch.autograd's checks, with readable failures.

Same signatures, defaults and pass rule as ``torch.autograd.gradcheck`` and
``gradgradcheck``, but a failure names the worst elements in a short table instead of
printing two full Jacobians.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor, tensor
from funcdiff.autograd import enable_grad
from funcdiff.autograd.engine import grad
from funcdiff.check._common import (
    GradcheckError,
    any_complex,
    as_array,
    as_list,
    is_float_output,
    realify,
    realify_cotangents,
    realify_outputs,
)
from funcdiff.check.gradcheck.fast import check_fast
from funcdiff.check.gradcheck.jacobians import (
    GradcheckCase,
    backward_jacobian,
    check_backward_sanity,
    check_batched_backward,
    check_reentrant,
    compare_jacobians,
    forward_jacobian,
    numerical_jacobian,
)

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


def gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
    seed: int = 0,
) -> bool:
    """Check analytical Jacobians against central finite differences (torch's gradcheck).

    Only Tensor inputs with ``requires_grad=True`` are checked. The numerical Jacobian
    uses central differences with the absolute step ``eps``; an element passes if
    ``|analytical - numerical| <= atol + rtol * |numerical|``. For relative steps,
    error estimates and a full report, use :func:`check_derivatives`.

    Complex inputs and results are checked as the real function of their real and
    imaginary parts, whose Jacobian holds both Wirtinger derivatives (as torch's
    gradcheck checks them): an input ``z`` counts as two inputs ``z.real, z.imag`` in
    the messages, a complex output as two outputs.

    Parameters
    ----------
    func : callable
        Takes the inputs, returns a Tensor or a tuple of Tensors.
    inputs : Tensor or tuple of Tensor
        Inputs; the ones requiring grad are checked, others are constants.
    eps, atol, rtol : float
        Step and tolerances (torch's defaults, tuned for float64).
    raise_exception : bool
        Raise :class:`GradcheckError` on failure (else return False).
    nondet_tol : float
        Tolerance for two identical backward passes to differ (reentrancy check).
    check_undefined_grad : bool
        For multi-output functions, a zero cotangent on each output in turn must give
        finite gradients (funcdiff fills missing cotangents with zeros).
    check_grad_dtypes : bool
        Gradients must have their input's dtype.
    check_batched_grad : bool
        The batched backward (``is_grads_batched``) must equal a loop of backward passes.
    check_batched_forward_grad : bool
        A batch of forward-mode products must equal a loop of single ones (needs
        ``check_forward_ad``).
    check_forward_ad : bool
        Also compare Jacobian columns from forward mode: tangents pushed through the
        recorded graph with each operation's tangent map, a custom Function's ``jvp``
        where it defines one (its transposed ``backward`` otherwise), as torch checks
        forward AD. Element-wise also under ``fast_mode``.
    check_backward_ad : bool
        Compare reverse-mode Jacobians (the default).
    fast_mode : bool
        Compare ``v^T J u`` for random unit ``u``, ``v`` (seeded by ``seed``) instead of full
        Jacobians. A pair passes on its projection only if the projection's error
        estimate certifies that no element can be off by more than torch's tolerance;
        any other pair is re-checked element-wise, which decides and names the worst
        elements.
    masked : None or bool
        Accepted for compatibility; funcdiff has no sparse tensors, so it has no effect.
    seed : int
        Seed of the random vectors of fast mode (a funcdiff addition).

    Returns
    -------
    bool
        True if every check passed; False if one failed and ``raise_exception=False``.

    Raises
    ------
    GradcheckError
        Message ``Jacobian mismatch for output i with respect to input j,`` and a table
        of the worst elements.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.check import gradcheck
    >>> x = fd.tensor([0.3, -1.2, 2.0], requires_grad=True)
    >>> gradcheck(lambda t: np.sin(t) * t, (x,))
    True
    """
    if not callable(func):
        raise TypeError(f"func must be callable, got {type(func).__name__}")
    if not check_forward_ad and not check_backward_ad:
        raise ValueError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True"
        )
    if check_batched_grad and not check_backward_ad:
        raise ValueError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise ValueError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to be True"
        )
    if not eps > 0:
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    # Complex inputs and results: the realified function (both Wirtinger derivatives).
    if any_complex(inputs):
        func, inputs, _ = realify(func, inputs)
    else:
        func = _real_results(func)
    try:
        case = _record(func, inputs)
        if fast_mode and check_backward_ad:
            check_fast(case, eps, atol, rtol, seed)
        numerical = None
        if not fast_mode and check_backward_ad:
            numerical = numerical_jacobian(case, case.diff, eps, case.meta)
            analytical = backward_jacobian(case)
            compare_jacobians(case, analytical, numerical, atol, rtol)
            check_reentrant(case, analytical, nondet_tol)
            if check_batched_grad:
                check_batched_backward(case)
        if check_forward_ad:
            # Forward mode is checked element-wise also in fast mode: its products are
            # columns of J, and the tangent maps (a Function's jvp) are what is checked.
            if numerical is None:
                numerical = numerical_jacobian(case, case.diff, eps, case.meta)
            forward = forward_jacobian(case, check_batched_forward_grad)
            compare_jacobians(case, forward, numerical, atol, rtol, "computed with forward mode ")
        if check_backward_ad:
            check_backward_sanity(case, check_undefined_grad, check_grad_dtypes)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def _real_results(func: Callable) -> Callable:
    def real(*args: Any) -> Any:
        return realify_outputs(func(*args))

    return real


def _differentiable_positions(inputs: tuple, checker: str) -> list[int]:
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError(
            f"{checker} expects at least one input tensor to require gradient, "
            "but none of the them have requires_grad=True."
        )
    return diff


def _record(func: Callable, inputs: Any) -> GradcheckCase:
    """Call ``func`` once on the inputs (warning about non-float64 ones) and describe it."""
    tupled = tuple(as_list(inputs))
    diff = _differentiable_positions(tupled, "gradcheck")
    for i in diff:
        if tupled[i].dtype != np.float64:
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point. "
                "gradcheck's default eps and tolerances are tuned for float64 and will likely "
                "fail (use check_derivatives, whose steps and tolerances follow the dtype).",
                UserWarning,
                stacklevel=3,
            )
    with enable_grad():
        outs = as_list(func(*tupled))
    meta = []
    for pos, o in enumerate(outs):
        if is_float_output(o) and as_array(o).dtype.kind == "f":
            d = as_array(o)
            meta.append((pos, d.shape, d.dtype))
    if not meta:
        raise ValueError("gradcheck: func returned no floating-point output")
    return GradcheckCase(
        func=func,
        inputs=tupled,
        diff=diff,
        ins=[tupled[i] for i in diff],
        meta=meta,
        outs=[outs[pos] for pos, _, _ in meta],
    )


def gradgradcheck(
    func: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
    seed: int = 0,
) -> bool:
    """Check second derivatives: gradcheck of ``(inputs, v) -> vjp(func, inputs, v)``.

    Builds the function that returns ``grad(func(*inputs), inputs, v, create_graph=True)``
    and runs :func:`gradcheck` on it with respect to the inputs and the cotangents ``v``
    (random in [-1, 1], seeded, when ``grad_outputs`` is None).

    Parameters
    ----------
    func, inputs, eps, atol, rtol, raise_exception, nondet_tol, check_undefined_grad,
    check_grad_dtypes, check_batched_grad, fast_mode, seed
        As in :func:`gradcheck`.
    grad_outputs : Tensor or tuple of Tensor, optional
        The cotangents ``v``, one per floating output.
    gen_non_contig_grad_outputs : bool
        Accepted for compatibility; ndarray memory layout does not affect funcdiff.
    check_fwd_over_rev : bool
        Also check with funcdiff's forward-mode products (``check_forward_ad``).
    check_rev_over_rev : bool
        Check reverse over reverse (the default).
    masked : bool
        Accepted for compatibility; no effect.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.check import gradgradcheck
    >>> x = fd.tensor([0.3, -1.2, 2.0], requires_grad=True)
    >>> gradgradcheck(lambda t: np.exp(t) * t**2, (x,))
    True
    """
    tupled = tuple(as_list(inputs))
    diff = _differentiable_positions(tupled, "gradgradcheck")
    with enable_grad():
        outs = as_list(func(*tupled))
    diff_pos = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if any_complex(tupled) or any_complex(outs):
        # The realified function, with each complex v split like its output.
        func_r, inputs_r, _ = realify(func, tupled)
        gos_r = realify_cotangents([outs[k] for k in diff_pos], grad_outputs)
        if isinstance(gos_r, tuple):
            gos_r = tuple(
                tensor(g, requires_grad=True) if isinstance(g, np.ndarray) else g for g in gos_r
            )
        elif isinstance(gos_r, np.ndarray):
            gos_r = tensor(gos_r, requires_grad=True)
        return gradgradcheck(
            func_r,
            inputs_r,
            gos_r,
            eps=eps,
            atol=atol,
            rtol=rtol,
            raise_exception=raise_exception,
            nondet_tol=nondet_tol,
            check_undefined_grad=check_undefined_grad,
            check_grad_dtypes=check_grad_dtypes,
            check_batched_grad=check_batched_grad,
            check_fwd_over_rev=check_fwd_over_rev,
            check_rev_over_rev=check_rev_over_rev,
            fast_mode=fast_mode,
            seed=seed,
        )
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        gos = tuple(
            tensor(rng.uniform(-1.0, 1.0, outs[k].shape).astype(outs[k].dtype), requires_grad=True)
            for k in diff_pos
        )
    else:
        gos = tuple(as_list(grad_outputs))
        _check_grad_outputs(gos, outs, diff_pos)
    n_in = len(tupled)

    def new_func(*args: Any) -> tuple:
        xs = args[:n_in]
        vs = args[n_in:]
        res = as_list(func(*xs))
        d_outs = [res[k] for k in diff_pos]
        d_ins = [xs[i] for i in diff]
        keep = [
            (o, v)
            for o, v in zip(d_outs, vs, strict=True)
            if isinstance(o, Tensor) and o.requires_grad
        ]
        if not keep:
            return ()
        gs = grad(
            [o for o, _ in keep], d_ins, [v for _, v in keep], create_graph=True, allow_unused=True
        )
        return tuple(g for g in gs if g is not None)

    return gradcheck(
        new_func,
        tupled + tuple(gos),
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        check_forward_ad=check_fwd_over_rev,
        check_backward_ad=check_rev_over_rev,
        fast_mode=fast_mode,
        seed=seed,
    )


def _check_grad_outputs(gos: tuple, outs: list, diff_pos: list[int]) -> None:
    """One Tensor per differentiable output, shaped like it."""
    if len(gos) != len(diff_pos):
        raise ValueError(
            f"grad_outputs has {len(gos)} entries, but func has "
            f"{len(diff_pos)} differentiable outputs"
        )
    for k, (g, pos) in enumerate(zip(gos, diff_pos, strict=True)):
        if not isinstance(g, Tensor):
            raise TypeError(f"grad_outputs[{k}] must be a Tensor, got {type(g).__name__}")
        if g.shape != outs[pos].shape:
            raise ValueError(
                f"grad_outputs[{k}] has shape {g.shape}, but output {pos} has "
                f"shape {outs[pos].shape}"
            )
