"""check_derivatives: every derivative block of a function against finite differences."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from funcdiff._core.tensor import tensor
from funcdiff.autograd import enable_grad
from funcdiff.check._common import (
    any_complex,
    as_array,
    default_rtol,
    lowest_precision,
    machine_eps,
    realify,
)
from funcdiff.check.analytical import ADJacobian, UserGradientTarget, UserHessian, UserJacobian
from funcdiff.check.blocks import check_blocks
from funcdiff.check.consistency import forward_values_check, second_order_checks
from funcdiff.check.results import ConsistencyCheck, DerivativeReport, PairResult
from funcdiff.check.targets import FirstOrderTarget, Problem, SecondOrderTarget, probe_complex

__all__ = ["check_derivatives"]

_METHODS = ("central", "richardson", "complex-step")


def check_derivatives(
    func: Callable[..., Any],
    inputs: Any,
    *,
    order: int = 1,
    method: str = "central",
    rtol: float | None = None,
    atol: float | None = None,
    fast_mode: bool = False,
    seed: int = 0,
    argnums: int | Sequence[int] | None = None,
    step: float | None = None,
    top_k: int = 5,
    jac: Callable[..., Any] | None = None,
    hess: Callable[..., Any] | None = None,
) -> DerivativeReport:
    """Compare derivatives of ``func`` with finite differences, element by element.

    The derivatives checked are funcdiff's (AD), or the user's own ``jac`` and ``hess``.

    Parameters
    ----------
    func : callable
        ``func(*inputs)`` written with NumPy calls; returns an array, a Tensor, a number,
        or a tuple/list of those.
    inputs : array_like, Tensor or tuple
        A tuple holds one entry per positional argument; anything else is one argument.
        Numeric entries are differentiated (integers are promoted to float64); other
        objects are passed unchanged. If some entries are Tensors with
        ``requires_grad=True``, only those are differentiated. A complex entry ``z`` is
        checked as two real inputs, ``z.real`` and ``z.imag`` (the report counts them
        so), and a complex result as its two parts: both Wirtinger derivatives.
    order : {1, 2}
        1 checks the Jacobian blocks. 2 also checks the Hessian blocks (the Jacobian of
        the AD gradient, by finite differences of the gradient; a vector output is first
        scalarised with a seeded random weight ``w``), the symmetry of the Hessian, and
        jvp/vjp and hvp/vhp consistency (dot-product tests, no finite differences).
    method : {"central", "richardson", "complex-step"}
        Central differences with an error estimate; Richardson extrapolation (more
        accurate, 6 evaluations per element); complex step (``func`` must run on complex
        ndarrays; every element is cross-checked against central differences).
    rtol, atol : float, optional
        Element tolerances: pass if ``|AD - FD| <= atol + rtol*max(|AD|, |FD|)``.
        Default rtol 1e-5 (float64) or 2e-3 (float32); default atol
        ``sqrt(eps) * max|FD|`` of each block.
    fast_mode : bool
        Check each (output, input) block of an input with 8 or more elements along two
        random directions (seeded) first. A block passes there only if its projections
        agree with finite differences and certify that no element can be off by more
        than its tolerance (see :mod:`funcdiff.check.projection`); the others are re-run
        element-wise, so the report still names the worst element. An element's
        tolerance here is at least the rounding floor of the element-wise check,
        ``6 eps |f| / h`` (central, ``12`` for Richardson): for a large ``|f|`` (a sum
        of many terms) no difference quotient at the element-wise step ``h`` resolves
        less, and a note gives the floor wherever it was used. A certified block costs
        a few dozen evaluations at any size.
    seed : int
        Seed of the random directions and weights.
    argnums : int or sequence of int, optional
        Differentiate only these positional inputs.
    step : float, optional
        Relative step ``c`` (``h = c*max(|x|, 1)`` or ``c*|x|``); default by dtype.
    top_k : int
        How many of the worst elements to keep per block.
    jac : callable, optional
        A hand-written Jacobian to check instead of funcdiff's: ``jac(*inputs)`` takes
        the same positional arguments as ``func``. For one differentiated input of shape
        ``s`` and one output of shape ``o`` it returns an array of shape ``o + s`` (a
        scalar ``func`` gives the gradient, shape ``s``), like
        ``funcdiff.functional.jacobian``. With several differentiated inputs it returns a
        tuple with one such array per input; if ``func`` returns a tuple of outputs, a
        tuple over the outputs, each an array or a tuple over inputs (``J[i][j]``). A
        result of the wrong structure or shape raises a ValueError naming ``jac`` and the
        shape expected. funcdiff's AD is not used for the first-order blocks, so ``func``
        may be any code that runs on ndarrays, even code funcdiff cannot trace
        (``float()`` on elements, ``scipy.integrate.quad``, compiled extensions).
    hess : callable, optional
        A hand-written Hessian of a scalar ``func`` (needs ``order=2``): ``hess(*inputs)``
        returns an array of shape ``s + s`` for one differentiated input, or
        ``H[a][b]`` of shape ``s_a + s_b`` (a tuple of tuples, like
        ``funcdiff.functional.hessian``) for several. Its blocks are compared with
        finite differences of ``jac`` if given, else of funcdiff's gradient (then
        ``func`` must be traceable), and its symmetry is checked. ``order=2`` with
        ``jac`` needs ``hess``.

    Returns
    -------
    DerivativeReport
        ``str(report)`` is a table; ``report.ok``; ``report.raise_if_failed()``;
        ``report.to_dict()``; ``report.step_sweep()``; ``report.plot_step_sweep(path)``.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.check import check_derivatives
    >>> report = check_derivatives(lambda x: np.sum(np.sin(x) * x), np.array([0.5, 2.0]))
    >>> report.ok, report.verdict
    (True, 'pass')
    >>> check_derivatives(np.abs, 0.0).verdict
    'inconclusive'

    A hand-written gradient, here of code that funcdiff cannot trace (``math.exp`` on
    each element); the report names the element that is wrong:

    >>> import math
    >>> def energy(x):
    ...     return sum(math.exp(v) for v in x)
    >>> def energy_grad(x):
    ...     g = np.exp(x)
    ...     g[1] *= 1.01  # a bug in one component
    ...     return g
    >>> report = check_derivatives(energy, np.array([0.5, 1.0, 1.5]), jac=energy_grad)
    >>> report.verdict, report.pairs[0].worst.label
    ('fail', 'f, x[1]')
    >>> report.name
    'energy (jac: energy_grad)'
    """
    start = time.perf_counter()
    _check_arguments(order, method, rtol, atol, step, jac, hess)
    if any_complex(inputs):
        func, inputs, argnums = _realified(func, inputs, argnums, method, jac, hess)
    problem = Problem(func, inputs, argnums)
    run = _Run(method, rtol, atol, fast_mode, np.random.default_rng(seed), step, top_k)
    first = _first_order(problem, jac)
    dtype = lowest_precision([x.dtype for x in problem.x0] + first.target.out_dtypes)
    eps = machine_eps(dtype)
    f0 = first.target.fd_eval(problem.x0)
    first.target.nfev -= 1
    if jac is None and first.target.primal_numpy is not None:
        ad_vals = [np.asarray(as_array(o), dtype=np.float64) for o in first.ad_outs]
        first.checks.append(forward_values_check(ad_vals, f0, eps))
    if method == "complex-step":
        probe_complex(first.target, problem.x0)
    with enable_grad():
        first.pairs = run.blocks(first.target, first.analytical, f0)
    first.nfev = first.target.nfev
    if order == 2 and hess is not None:
        second = _user_hessian(problem, first, hess, run, eps)
    elif order == 2:
        second = _ad_hessian(problem, first, run, eps)
    else:
        second = _Stage(first.name, [], [], [], 0)
    return DerivativeReport(
        name=second.name,
        order=order,
        method=method,
        dtype=dtype,
        pairs=first.pairs + second.pairs,
        checks=first.checks + second.checks,
        notes=first.notes + second.notes,
        rtol=default_rtol(rtol, dtype),
        atol=atol,
        nfev=first.nfev + second.nfev,
        seconds=time.perf_counter() - start,
        fast_mode=fast_mode,
    )


def _check_arguments(
    order: int,
    method: str,
    rtol: float | None,
    atol: float | None,
    step: float | None,
    jac: Callable[..., Any] | None,
    hess: Callable[..., Any] | None,
) -> None:
    """Refuse bad settings before anything is evaluated."""
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if rtol is not None and not rtol >= 0:
        raise ValueError(f"rtol must be a non-negative number, got {rtol!r}")
    if atol is not None and not atol >= 0:
        raise ValueError(f"atol must be a non-negative number, got {atol!r}")
    if step is not None and not step > 0:
        raise ValueError(f"step must be a positive number, got {step!r}")
    if hess is not None and order != 2:
        raise ValueError("hess= gives second derivatives: pass order=2 to check them (got order=1)")
    if jac is not None and order == 2 and hess is None:
        raise ValueError(
            "order=2 with jac= needs hess= too: the Hessian blocks compare a hand-written "
            "hess with finite differences of jac"
        )


@dataclass
class _Run:
    """The settings every block of one check shares."""

    method: str
    rtol: float | None
    atol: float | None
    fast_mode: bool
    rng: np.random.Generator
    step: float | None
    top_k: int

    def blocks(self, target: Any, analytical: Any, f0: list[np.ndarray]) -> list[PairResult]:
        """Every block of ``target`` checked against ``analytical``."""
        return check_blocks(
            target,
            analytical,
            self.method,
            self.rtol,
            self.atol,
            self.fast_mode,
            self.rng,
            self.step,
            self.top_k,
            f0,
        )


@dataclass
class _Stage:
    """What one order of the check adds to the report."""

    name: str
    notes: list[str]
    pairs: list[PairResult]
    checks: list[ConsistencyCheck]
    nfev: int


@dataclass
class _FirstOrder(_Stage):
    """The first-order stage, and what the second order builds on."""

    target: FirstOrderTarget
    analytical: Any
    ad_outs: list[Any]
    ins: list[Any]


def _first_order(problem: Problem, jac: Callable[..., Any] | None) -> _FirstOrder:
    """The function's outputs and the first derivatives under test: the user's ``jac``,
    or funcdiff's AD through one recorded call."""
    first = FirstOrderTarget(problem)
    notes: list[str] = []
    name = problem.name
    ad_outs: list[Any] = []
    ins: list[Any] = []
    if jac is not None:
        # The hand-written Jacobian is the derivative under test: func runs on plain
        # ndarrays only, and funcdiff's AD is not used for the first-order blocks.
        raw = problem.call([np.array(x, copy=True) for x in problem.x0])
        first.setup(raw)
        if not first.numpy_path:
            raise ValueError(
                f"with jac=, {problem.name} must run on plain ndarrays; {first.notes[-1]}"
            )
        analytical: Any = UserJacobian(jac, problem, first)
        name = f"{problem.name} (jac: {analytical.name})"
        notes.append(
            f"jac: {analytical.name}: the hand-written Jacobian was checked (funcdiff's AD "
            "was not used for the first-order blocks)"
        )
    else:
        ins = [tensor(x, requires_grad=True) for x in problem.x0]
        with enable_grad():
            raw = problem.call(ins)
        first.setup(raw)
        ad_outs = [raw[k] for k in first.positions]
        analytical = ADJacobian(ad_outs, ins)
    return _FirstOrder(name, list(first.notes) + notes, [], [], 0, first, analytical, ad_outs, ins)


def _user_hessian(
    problem: Problem, first: _FirstOrder, hess: Callable[..., Any], run: _Run, eps: float
) -> _Stage:
    """The user's ``hess`` against finite differences of the gradient (``jac``'s if given,
    else funcdiff's), and its symmetry."""
    if first.target.out_shapes != [()] or first.target.n_outputs != 1:
        raise ValueError(
            f"hess= needs {problem.name} to return one scalar, got outputs of shapes "
            f"{first.target.out_shapes}"
        )
    user_hess = UserHessian(hess, problem)
    if isinstance(first.analytical, UserJacobian):
        second: Any = UserGradientTarget(problem, first.target, first.analytical)
        source = f"finite differences of jac ({first.analytical.name})"
    else:
        second = SecondOrderTarget(problem, first.target, [None])
        source = "finite differences of funcdiff's gradient"
    notes = [f"hess: {user_hess.name}: the hand-written Hessian was checked against {source}"]
    with enable_grad():
        g0 = second.fd_eval(problem.x0)
        second.nfev -= 1
        pairs = run.blocks(second, user_hess, g0)
    worst, big = user_hess.asymmetry()
    tol = math.sqrt(eps) * big
    symmetry = ConsistencyCheck(
        "hess symmetry max|H - H^T|", worst, 0.0, worst, tol, "pass" if worst <= tol else "fail"
    )
    name = first.name + f" (hess: {user_hess.name})"
    return _Stage(name, notes, pairs, [symmetry], second.nfev)


def _ad_hessian(problem: Problem, first: _FirstOrder, run: _Run, eps: float) -> _Stage:
    """funcdiff's Hessian blocks (of ``w.f`` for a vector ``f``) against finite differences
    of its gradient, and the dot-product tests of the second-order products."""
    weights = []
    for o in first.ad_outs:
        shape = np.shape(as_array(o))
        weights.append(
            None if len(shape) == 0 or int(np.prod(shape)) == 1 else run.rng.standard_normal(shape)
        )
    second = SecondOrderTarget(problem, first.target, weights)
    notes = []
    if any(w is not None for w in weights):
        notes.append(
            "vector outputs were scalarised as w.f with a seeded random weight w "
            "for the second-order checks"
        )
    if run.method == "complex-step":
        notes.append(
            "Hessian blocks use central differences of the AD gradient "
            "(the complex step needs a complex-valued gradient)"
        )
    ins2 = [tensor(x, requires_grad=True) for x in problem.x0]
    with enable_grad():
        outs2 = second.ad_outputs(ins2)
        g0 = second.fd_eval(problem.x0)
        second.nfev -= 1
        pairs = run.blocks(second, ADJacobian(outs2, ins2), g0)
        checks = second_order_checks(second, first.ad_outs, first.ins, outs2, ins2, run.rng, eps)
    return _Stage(first.name, notes, pairs, checks, second.nfev)


def _realified(func, inputs, argnums, method, jac, hess):
    """A complex input ``z`` becomes two real ones, ``z.real`` and ``z.imag`` (the
    report names their positions), and complex results their parts: the blocks then
    hold both Wirtinger derivatives (see :mod:`funcdiff.check._common`)."""
    if jac is not None or hess is not None:
        raise TypeError(
            "check_derivatives compares a hand-written jac/hess of real inputs only; for a "
            "complex input, differentiate with respect to its real and imaginary parts"
        )
    if method == "complex-step":
        raise ValueError(
            "method='complex-step' needs real inputs (it makes its own complex points); "
            "use method='central' or 'richardson' for complex inputs"
        )
    if isinstance(argnums, int):
        argnums = [argnums]
    return realify(func, inputs, argnums)
