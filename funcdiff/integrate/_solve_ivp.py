"""``solve_ivp``: SciPy's solver, differentiable with respect to ``y0``, ``args``, ``t_eval``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.integrate as si
import scipy.sparse as sp

from funcdiff._core.tensor import Tensor
from funcdiff.autograd import is_grad_enabled
from funcdiff.integrate._events import stopping_event
from funcdiff.integrate._forward import IMPLICIT, solve_with_sensitivities, user_jacobian
from funcdiff.integrate._node import Problem, SolveFunction, sensitivities_of
from funcdiff.integrate._rhs import RightHandSide, as_scipy_jacobian, contains_tensor

__all__ = ["solve_ivp", "SENSITIVITIES", "AUTO_FORWARD_STATES"]

SENSITIVITIES = ("auto", "forward", "adjoint")

#: ``sensitivity="auto"`` solves forward sensitivities when the augmented system,
#: ``n (1 + P)`` states for ``n`` states and ``P`` differentiated inputs, is at most this.
AUTO_FORWARD_STATES = 200


def solve_ivp(
    fun: Callable[..., Any],
    t_span: Sequence[float],
    y0: Any,
    method: Any = "RK45",
    t_eval: Any = None,
    dense_output: bool = False,
    events: Any = None,
    vectorized: bool = False,
    args: Any = None,
    *,
    sensitivity: str = "auto",
    **options: Any,
) -> Any:
    """Solve an initial value problem with SciPy, differentiably.

    The signature and the result are those of :func:`scipy.integrate.solve_ivp`, with
    one keyword more, ``sensitivity``. ``fun(t, y, *args)`` is plain NumPy code. Any of
    ``y0``, ``t_eval`` and the entries of ``args`` may be funcdiff Tensors; ``result.y``
    (shape ``(n, len(result.t))``) is then a Tensor whose derivatives are those of the
    exact solution of the ODE, accurate to the solver's tolerances. With no Tensor
    input the result is SciPy's own.

    Parameters
    ----------
    fun, t_span, y0, method, t_eval, dense_output, events, vectorized, args
        As in :func:`scipy.integrate.solve_ivp`. ``t_span`` holds numbers (the initial
        and final time are not differentiated; differentiate output times through
        ``t_eval``).
    sensitivity : {"auto", "forward", "adjoint"}
        How derivatives are computed. ``"forward"`` solves the sensitivity equations
        together with the state (one solve of ``n (1 + P)`` states for ``P``
        differentiated input elements); every derivative then contracts the stored
        sensitivities. ``"adjoint"`` solves the state alone and, for each vjp, solves
        the adjoint equations backward in time on the stored dense output (``n + p``
        states for ``p`` parameter elements). ``"auto"`` takes ``"forward"`` when
        ``n (1 + P) <= 200`` and the adjoint otherwise, switching to forward
        sensitivities when the rows asked for (a Jacobian) would cost as much in
        adjoint solves, and for second derivatives.
    **options
        SciPy's solver options (``rtol``, ``atol``, ``jac``, ``jac_sparsity``,
        ``max_step``, ...). The sensitivity and adjoint equations are solved with the
        same tolerances as the state.

    Returns
    -------
    OdeResult
        SciPy's result. ``y`` is a Tensor when an input is a Tensor; ``t``,
        ``t_events``, ``y_events`` and the values of ``sol(...)`` are ndarrays (not
        differentiated). With ``t_eval=None`` the columns of ``y`` are at the
        solver's own times, held fixed when differentiating.

    Raises
    ------
    ValueError
        An unknown ``sensitivity``; ``fun`` returning a result whose shape is not
        ``y0``'s (a length-1 result too, which SciPy would broadcast).
    TypeError
        A Tensor in ``t_span`` that requires grad, or one nested inside an entry of
        ``args``.
    RuntimeError
        When a result of a failed solve (``success=False``) is differentiated; the
        message quotes SciPy's.
    NotImplementedError
        A second derivative of a terminal event's point (the last column of ``y``
        with ``t_eval=None``); its first derivative includes the event time's
        dependence on the inputs.

    Notes
    -----
    For the implicit methods (``"BDF"``, ``"Radau"``, ``"LSODA"``) without a ``jac``
    of the user's, SciPy gets the exact Jacobian of ``fun`` (a replayed funcdiff
    Jacobian; a ``scipy.sparse`` matrix for large systems whose pattern is sparse), so
    ``fun`` is never called for finite differences. A user ``jac`` is used as given;
    with a user ``jac_sparsity`` the plain solve is SciPy's finite-difference one.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.integrate import solve_ivp
    >>> k = fd.tensor(0.5, requires_grad=True)
    >>> res = solve_ivp(lambda t, y, k: -k * y, (0.0, 2.0), [1.0], t_eval=[2.0], args=(k,),
    ...                 rtol=1e-10, atol=1e-12)
    >>> (dk,) = fd.grad(res.y[0, 0], k)
    >>> round(float(dk), 6), round(-2.0 * float(np.exp(-1.0)), 6)
    (-0.735759, -0.735759)
    """
    if sensitivity not in SENSITIVITIES:
        raise ValueError(f"sensitivity must be one of {SENSITIVITIES}, got {sensitivity!r}")
    t0, tf = _check_span(t_span)
    if args is not None:
        if not isinstance(args, tuple):
            try:
                args = tuple(args)
            except TypeError as error:
                raise TypeError(
                    f"args must be a tuple of fun's extra arguments, got {type(args).__name__}"
                ) from error
        for i, a in enumerate(args):
            if not isinstance(a, Tensor) and contains_tensor(a):
                raise TypeError(
                    f"args[{i}] holds a Tensor inside a {type(a).__name__}: pass each "
                    "Tensor as an entry of args of its own, so that it is differentiated"
                )
    arg_list = list(args) if args is not None else []
    tensor_in = (
        isinstance(y0, Tensor)
        or isinstance(t_eval, Tensor)
        or any(isinstance(a, Tensor) for a in arg_list)
    )
    y0_arr = _plain_y0(y0)
    t_eval_arr = None if t_eval is None else np.asarray(_data(t_eval), dtype=float)
    plain_args = [_data(a) for a in arg_list]
    _check_fun(fun, t0, y0_arr, plain_args)
    name = method if isinstance(method, str) else getattr(method, "__name__", "")
    implicit = name in IMPLICIT
    user_jac = options.get("jac")
    auto_jac = implicit and user_jac is None and options.get("jac_sparsity") is None
    if np.iscomplexobj(y0_arr):
        auto_jac = False

    if not tensor_in:
        opts = dict(options)
        if auto_jac:
            rhs = RightHandSide(fun, plain_args, (), y0_arr.size)
            opts["jac"] = _exact_jacobian(rhs, name)
            # SciPy hands jac the args too; the prepared Jacobian has them already.
            return si.solve_ivp(
                _with_args(fun, plain_args),
                (t0, tf),
                y0_arr,
                method=method,
                t_eval=t_eval_arr,
                dense_output=dense_output,
                events=_events_with_args(events, plain_args),
                vectorized=vectorized,
                **opts,
            )
        return si.solve_ivp(
            fun,
            (t0, tf),
            y0_arr,
            method=method,
            t_eval=t_eval_arr,
            dense_output=dense_output,
            events=events,
            vectorized=vectorized,
            args=args,
            **options,
        )
    return _solve_recorded(
        fun,
        (t0, tf),
        y0,
        y0_arr,
        method,
        t_eval,
        t_eval_arr,
        dense_output,
        events,
        vectorized,
        arg_list,
        plain_args,
        sensitivity,
        auto_jac,
        options,
    )


def _solve_recorded(
    fun: Callable[..., Any],
    t_span: tuple[float, float],
    y0: Any,
    y0_arr: np.ndarray,
    method: Any,
    t_eval: Any,
    t_eval_arr: Any,
    dense_output: bool,
    events: Any,
    vectorized: bool,
    arg_list: list,
    plain_args: list,
    sensitivity: str,
    auto_jac: bool,
    options: dict,
) -> Any:
    if np.iscomplexobj(y0_arr):
        raise ValueError(
            "funcdiff.integrate.solve_ivp differentiates real problems only: y0 is complex"
        )
    enabled = is_grad_enabled()

    def live(a: Any) -> bool:
        return isinstance(a, Tensor) and a.requires_grad and enabled

    positions = [
        i for i, a in enumerate(arg_list) if live(a) and np.asarray(a.data).dtype.kind == "f"
    ]
    n = y0_arr.size
    rhs = RightHandSide(fun, plain_args, positions, n)
    seed_y0 = live(y0)
    inputs = (n if seed_y0 else 0) + rhs.n_params
    mode = sensitivity
    if mode == "auto":
        mode = "forward" if n * (1 + inputs) <= AUTO_FORWARD_STATES else "adjoint"
    name = method if isinstance(method, str) else getattr(method, "__name__", "")
    solver_options = {k: v for k, v in options.items() if k not in ("jac", "jac_sparsity")}
    problem = Problem(
        rhs,
        t_span,
        y0_arr,
        seed_y0,
        name if name in IMPLICIT else method,
        mode,
        solver_options,
        options.get("jac"),
        arg_list,
    )
    problem.differentiate_t = live(t_eval)
    differentiated = seed_y0 or bool(positions) or problem.differentiate_t
    plain_opts = dict(options)
    if auto_jac:
        plain_opts["jac"] = _exact_jacobian(rhs, name)
    elif callable(options.get("jac")):
        plain_opts["jac"] = user_jacobian(options["jac"], plain_args)
    n_state = n
    if differentiated and mode == "forward" and inputs > 0:
        result = solve_with_sensitivities(
            rhs,
            t_span,
            y0_arr,
            seed_y0,
            name if name in IMPLICIT else method,
            t_eval_arr,
            solver_options,
            dense_output=dense_output,
            events=events,
            user_jac=options.get("jac"),
        )
        z = result.y
        problem.sens = sensitivities_of(z, n, inputs)
        result.y = z[:n_state]
        if result.sol is not None:
            result.sol = StateSolution(result.sol, n_state)
        if result.y_events is not None:
            result.y_events = [np.asarray(ye)[:, :n_state] for ye in result.y_events]
    else:
        result = si.solve_ivp(
            _with_args(fun, plain_args),
            t_span,
            y0_arr,
            method=method,
            t_eval=t_eval_arr,
            dense_output=dense_output or (differentiated and mode == "adjoint"),
            events=_events_with_args(events, plain_args),
            vectorized=vectorized,
            **plain_opts,
        )
        problem.sol = result.sol
        if not dense_output:
            result.sol = None
    problem.result = result
    problem.t_out = np.asarray(result.t, dtype=float)
    problem.y_out = np.asarray(result.y, dtype=float).reshape(n, -1)
    problem.event_stop = result.status == 1 and t_eval is None
    if problem.event_stop:
        problem.stop_event = stopping_event(events, result.t_events, float(problem.t_out[-1]))
        if problem.stop_event is None:  # cannot tell which event: refuse, never guess
            problem.event_stop = False
            problem.unknown_stop = True
    t_in = t_eval if isinstance(t_eval, Tensor) else None
    params = [arg_list[i] for i in positions]
    y_tensor = SolveFunction.apply(problem, y0 if isinstance(y0, Tensor) else None, t_in, *params)
    problem.output = y_tensor
    result.y = y_tensor
    return result


class StateSolution:
    """The dense output of the state alone, from that of the augmented system."""

    def __init__(self, sol: Any, n: int) -> None:
        self._sol = sol
        self._n = n
        self.t_min = sol.t_min
        self.t_max = sol.t_max
        self.ts = sol.ts

    def __call__(self, t: Any) -> np.ndarray:
        return self._sol(t)[: self._n]


def _check_span(t_span: Any) -> tuple[float, float]:
    try:
        t0, tf = t_span
    except (TypeError, ValueError) as error:
        raise ValueError("t_span must be a pair of numbers (t0, tf)") from error
    for name, t in (("t_span[0]", t0), ("t_span[1]", tf)):
        if isinstance(t, Tensor) and t.requires_grad:
            raise TypeError(
                f"{name} is a Tensor that requires grad: the integration interval is not "
                "differentiated; differentiate output times through t_eval instead"
            )
    return float(_data(t0)), float(_data(tf))


def _data(a: Any) -> Any:
    return a.data if isinstance(a, Tensor) else a


def _plain_y0(y0: Any) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(_data(y0)))
    if arr.ndim != 1:
        raise ValueError(f"y0 must be 1-dimensional, got shape {np.shape(_data(y0))}")
    if arr.dtype.kind not in "fc":
        arr = arr.astype(float)
    return arr


def _check_fun(fun: Callable[..., Any], t0: float, y0: np.ndarray, args: list) -> None:
    value = fun(t0, y0, *args)
    if isinstance(value, Tensor):
        raise ValueError(
            "fun returned a Tensor when called on ndarrays: it uses a Tensor it closes "
            "over. Pass that Tensor through args so that it is differentiated."
        )
    shape = np.shape(value)
    if shape != y0.shape and not (y0.size == 1 and shape in ((), (1,))):
        raise ValueError(f"fun must return an array of y0's shape {y0.shape}, got shape {shape}")


def _with_args(fun: Callable[..., Any], args: list) -> Callable[..., Any]:
    if not args:
        return fun
    return lambda t, y: fun(t, y, *args)


def _events_with_args(events: Any, args: list) -> Any:
    if events is None or not args:
        return events
    single = callable(events)
    out = []
    for ev in [events] if single else list(events):

        def bound(t: float, y: np.ndarray, ev: Any = ev) -> Any:
            return ev(t, y, *args)

        for attr in ("terminal", "direction"):
            if hasattr(ev, attr):
                setattr(bound, attr, getattr(ev, attr))
        out.append(bound)
    return out[0] if single else out


def _exact_jacobian(rhs: RightHandSide, method: str) -> Callable[..., Any]:
    def jac(t: float, y: np.ndarray) -> Any:
        j = rhs.jac_y(t, y)
        if method == "LSODA" and sp.issparse(j):
            return j.toarray()  # LSODA takes dense Jacobians only
        return as_scipy_jacobian(j)

    return jac
