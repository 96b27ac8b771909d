"""SciPy's solvers with exact derivatives, and solutions differentiable in ``args``."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff import replay as _replay
from funcdiff._core.tensor import Tensor, tensor
from funcdiff.autograd import enable_grad
from funcdiff.optimize._constrained import Constraints
from funcdiff.optimize._derivatives import (
    _DERIVATIVE_FREE,
    _HESS_METHODS,
    _HESSP_METHODS,
    _ROOT_JAC_METHODS,
    _SPARSE_HESSIAN_METHODS,
    Derivatives,
    _as_x,
    _clean,
    _densified,
    _method_name,
    _prepared_jacobian,
    _Replayed,
    _sparse_choice,
    _worth_it,
)
from funcdiff.optimize._implicit import (
    Arguments,
    Condition,
    ImplicitSolution,
    check_converged,
    refuse_closed_over,
)
from funcdiff.sparse import prepare_hessian

__all__ = ["minimize", "least_squares", "root", "fixed_point", "root_scalar", "custom_root"]


def _solution(condition: Condition, arguments: Arguments) -> Tensor:
    """The differentiable solution: one recorded node (a plain Tensor without parameters)."""
    return ImplicitSolution.apply(
        condition, condition.x_star.reshape(condition.shape), *arguments.params
    )


def _solution_and_value(
    condition: Condition, arguments: Arguments, fun: Callable[..., Any], kwargs: dict | None = None
) -> tuple[Tensor, Any]:
    """The differentiable solution, and ``fun`` evaluated there (recorded when the
    parameters require grad, so that its derivative follows the solution's)."""
    x = _solution(condition, arguments)
    with enable_grad() if arguments.differentiable else contextlib.nullcontext():
        value = fun(x, *arguments.with_params(arguments.params), **(kwargs or {}))
    return x, value


def _with_kwargs(fun: Callable[..., Any], kwargs: dict) -> Callable[..., Any]:
    """``fun`` with its keyword arguments bound (``fun`` itself when there are none)."""
    return fun if not kwargs else (lambda x, *a: fun(x, *a, **kwargs))


def _bounds_arrays(bounds: Any, n: int, pairs: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(lb, ub)`` float arrays of length n from a ``Bounds``, ``(lb, ub)`` or n pairs."""
    lb: Any
    ub: Any
    if hasattr(bounds, "lb") and hasattr(bounds, "ub"):
        lb, ub = bounds.lb, bounds.ub
    elif not pairs:
        lb, ub = bounds  # least_squares' (lb, ub)
    else:
        if len(bounds) != n:
            raise ValueError(f"bounds has {len(bounds)} pairs for {n} unknowns")
        lb = [-np.inf if b[0] is None else b[0] for b in bounds]
        ub = [np.inf if b[1] is None else b[1] for b in bounds]
    for v in (lb, ub):
        if isinstance(v, Tensor) and v.requires_grad:
            raise NotImplementedError(
                "bounds that require grad: the solution is differentiated with respect to "
                "args only; detach the bounds"
            )
    lb = np.broadcast_to(np.asarray(getattr(lb, "data", lb), dtype=np.float64), (n,))
    ub = np.broadcast_to(np.asarray(getattr(ub, "data", ub), dtype=np.float64), (n,))
    return lb, ub


def _active_bounds(
    x: np.ndarray, gradient: np.ndarray, value: float, bounds: Any, pairs: bool, strict: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Components held by a bound at a minimum: at the bound, the gradient pushing outward.

    Their derivative is zero; the free components follow the reduced system. A component
    at its bound with a zero gradient (degenerate: strict complementarity fails) has no
    derivative and is refused. Interior-point methods (``trust-constr``) stop just inside
    an active bound: a component near its bound with a gradient clearly pushing outward
    counts as held.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    g = np.asarray(gradient, dtype=np.float64).reshape(-1)
    lb, ub = _bounds_arrays(bounds, x.size, pairs)
    scale = max(1.0, abs(value))
    flat = np.abs(g) <= 1e-8 * scale
    pushing = np.abs(g) > 1e-5 * scale
    gap_lb, gap_ub = x - lb, ub - x
    at_lb = np.isfinite(lb) & (gap_lb <= 1e-10 * (1.0 + np.abs(lb)))
    at_ub = np.isfinite(ub) & (gap_ub <= 1e-10 * (1.0 + np.abs(ub)))
    degenerate = (at_lb | at_ub) & flat
    if degenerate.any():
        i = int(np.flatnonzero(degenerate)[0])
        raise ValueError(
            f"x[{i}] = {x[i]:g} is at its bound with a zero gradient there: the solution is "
            "not differentiable with respect to args at such a degenerate point (the bound "
            "is active on one side of it and inactive on the other)"
        )
    near_lb = np.isfinite(lb) & (gap_lb <= 1e-4 * (1.0 + np.abs(lb))) & pushing
    near_ub = np.isfinite(ub) & (gap_ub <= 1e-4 * (1.0 + np.abs(ub))) & pushing
    held_lb = (at_lb | near_lb) & (g > 0)
    held_ub = (at_ub | near_ub) & (g < 0)
    active = held_lb | held_ub
    stray = ~active & (np.abs(g) > 1e-3 * scale)
    if strict and stray.any():
        i = int(np.flatnonzero(stray)[0])
        raise RuntimeError(
            f"the gradient of fun is {g[i]:.3g} in x[{i}] = {x[i]:g}, which is held by no "
            "bound: the returned point is not a minimum, so the implicit derivative there "
            "would be wrong; tighten the solver's tolerances"
        )
    bound = np.where(held_lb, lb, np.where(held_ub, ub, 0.0))
    return active, bound


def minimize(
    fun: Callable[..., Any],
    x0: Any,
    args: Any = (),
    method: Any = None,
    jac: Any = None,
    hess: Any = None,
    hessp: Any = None,
    sparse: Any = False,
    replay: bool = False,
    allow_unconverged: bool = False,
    **kwargs: Any,
) -> Any:
    """``scipy.optimize.minimize`` with exact derivatives; differentiable in Tensor ``args``.

    Parameters
    ----------
    fun : callable
        Scalar objective ``fun(x, *args)`` written with NumPy calls.
    x0 : array_like
        Starting point (1-d).
    args : tuple
        Extra arguments for ``fun``. Tensors that require grad among them are the
        parameters the solution is differentiated with respect to (see the module
        docstring); the solver itself sees their values.
    method : str or callable, optional
        Any SciPy method; derivatives are supplied as the method needs them (see the
        module docstring).
    jac, hess, hessp : optional
        Your own values replace funcdiff's (e.g. ``jac="2-point"``).
    sparse : bool, "auto" or sparsity pattern
        Compute the Hessian with :func:`funcdiff.sparse.prepare_hessian` (for the
        methods that take a Hessian: ``trust-constr`` and ``Newton-CG`` get it sparse,
        ``dogleg`` and ``trust-exact`` dense); see the module docstring. For the
        derivative of the solution with respect to Tensor ``args``, False and "auto" both
        mean a sparse Hessian when it is sparse (at least 100 unknowns, at most a tenth of
        the entries), True or a pattern always.
    replay : bool
        Record the value and gradient once and replay them at every point (see the
        module docstring); the Hessian products too.
    allow_unconverged : bool
        With Tensor parameters, a result SciPy reports as unsuccessful raises
        ``RuntimeError``; True differentiates at the returned point instead.
    **kwargs
        Passed to ``scipy.optimize.minimize`` (bounds, constraints, tol, options, ...).

    Returns
    -------
    scipy.optimize.OptimizeResult
        SciPy's result, with float64 arrays. With Tensors in ``args``, ``x`` and ``fun``
        are Tensors: ``x`` differentiated by the implicit function theorem applied to
        ``grad_x fun = 0`` (active bounds give zero derivatives), ``fun`` by the
        envelope theorem (it is ``fun(x, *args)``). With ``constraints`` the theorem
        applies to the KKT conditions: the gradient of the Lagrangian over the active
        constraints, in ``x`` and their multipliers (recovered by least squares at the
        solution); Tensors in a constraint dict's ``args`` are parameters too.

    Raises
    ------
    RuntimeError
        The solver did not converge and parameters are to be differentiated, the
        returned point is not a (constrained) minimum, or ``fun`` closes over a Tensor
        that requires grad.
    numpy.linalg.LinAlgError
        The Hessian (the KKT matrix) is singular at the solution (the derivative does
        not exist).
    ValueError
        A bound or inequality constraint holds at the solution with a zero gradient or
        multiplier (degenerate: the active set changes there).

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import optimize
    >>> def rosen(x):
    ...     return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    >>> res = optimize.minimize(rosen, np.zeros(5), method="trust-exact")
    >>> res.success, np.allclose(res.x, 1.0)
    (True, True)

    The minimiser of ``sum((x - a) ** 2 * w)`` is ``a``, whatever ``w``:

    >>> a = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> res = optimize.minimize(lambda x, a: np.sum((x - a) ** 2), np.zeros(2), args=(a,))
    >>> (res.x ** 2).sum().backward()
    >>> np.round(a.grad.data, 6)
    array([2., 4.])
    """
    import scipy.optimize

    arguments = Arguments(args)
    plain = arguments.plain
    x0 = _as_x(x0, "x0")
    refuse_closed_over(fun, x0, plain, None, "fun")
    d: Any = _Replayed(fun) if replay else Derivatives(fun, plain)
    name = _method_name(method)
    sparse = _sparse_choice(sparse)
    prepared = None
    if jac is None and name not in _DERIVATIVE_FREE:
        jac = d.jac
    if sparse is not False and hess is None and hessp is None:
        if name not in _SPARSE_HESSIAN_METHODS | _HESS_METHODS:
            raise ValueError(
                f"sparse={sparse!r} needs a method that takes a Hessian matrix: "
                f"trust-constr, Newton-CG, dogleg or trust-exact, got method={method!r}"
            )
        given = None if isinstance(sparse, (bool, str)) else sparse
        H = prepare_hessian(fun, x0, given, args=plain)
        if sparse != "auto" or _worth_it(H.sparsity):
            hess = H if name in _SPARSE_HESSIAN_METHODS else _densified(H)
            prepared = H
    if hess is None and hessp is None:
        if name in _HESSP_METHODS:
            hessp = d.hessp
        elif name in _HESS_METHODS:
            hess = d.hess
    constraints = None
    if kwargs.get("constraints") is not None and not _empty(kwargs["constraints"]):
        constraints = Constraints(kwargs["constraints"])
        kwargs["constraints"] = constraints.for_scipy
    res = _clean(
        scipy.optimize.minimize(
            d.fun, x0, args=plain, method=method, jac=jac, hess=hess, hessp=hessp, **kwargs
        )
    )
    if constraints is not None and (arguments.has_tensor or constraints.has_tensor):
        return _constrained_result(res, fun, arguments, constraints, kwargs, allow_unconverged)
    if not arguments.has_tensor:
        return res
    active = bound = None
    if arguments.differentiable:
        check_converged(bool(res.success), res.get("message"), "minimize", allow_unconverged)
        if kwargs.get("bounds") is not None:
            gradient = Derivatives(fun, plain).jac(res.x)
            active, bound = _active_bounds(
                res.x, gradient, float(res.fun), kwargs["bounds"], True, not allow_unconverged
            )
    condition = Condition(
        "minimize",
        fun,
        res.x,
        arguments,
        active=active,
        bound=bound,
        sparse=sparse,
        prepared=prepared,
    )
    res.x, value = _solution_and_value(condition, arguments, fun)
    res.fun = value.reshape(()) if isinstance(value, Tensor) else tensor(float(np.asarray(value)))
    return res


def _empty(constraints: Any) -> bool:
    return isinstance(constraints, (list, tuple)) and len(constraints) == 0


def _constrained_result(
    res: Any,
    fun: Callable[..., Any],
    arguments: Arguments,
    constraints: Constraints,
    kwargs: dict,
    allow_unconverged: bool,
) -> Any:
    """``res.x`` and ``res.fun`` as Tensors, differentiated through the KKT conditions
    (the solution and the active constraints' multipliers solve the Lagrangian's
    stationarity) with respect to the Tensors of ``args`` and of the constraints'."""
    x_star = np.asarray(res.x, dtype=np.float64)
    bounds = kwargs.get("bounds")
    box = None if bounds is None else _bounds_arrays(bounds, x_star.size, True)
    probe = Arguments(arguments.args + constraints.dict_args)
    if not probe.differentiable:  # constants only: the point itself
        x = tensor(x_star.copy())
        return _with_value(res, x, fun(x, *arguments.plain))
    check_converged(bool(res.success), res.get("message"), "minimize", allow_unconverged)
    z_star, lagrangian, combined, k = constraints.lagrangian(
        fun, x_star, arguments, box, not allow_unconverged
    )
    condition = Condition("kkt", lagrangian, z_star, combined)
    z = _solution(condition, combined)
    x = z[: x_star.size].reshape(x_star.shape)
    with enable_grad():
        value = fun(x, *combined.with_params(combined.params)[:k])
    return _with_value(res, x, value)


def _with_value(res: Any, x: Tensor, value: Any) -> Any:
    res.x = x
    res.fun = value.reshape(()) if isinstance(value, Tensor) else tensor(float(np.asarray(value)))
    return res


def least_squares(
    fun: Callable[..., Any],
    x0: Any,
    jac: Any = None,
    args: Any = (),
    kwargs: dict | None = None,
    sparse: Any = False,
    replay: bool = False,
    allow_unconverged: bool = False,
    **options: Any,
) -> Any:
    """``scipy.optimize.least_squares`` with the exact (m, n) Jacobian of the residuals.

    With ``sparse=True`` (or a pattern, or ``"auto"``) the Jacobian is a prepared
    :func:`funcdiff.sparse.prepare_jacobian`: sparse for ``method="trf"`` and
    ``"dogbox"`` (SciPy then solves with ``lsmr``), dense for ``"lm"``. With
    ``replay=True`` the (dense) Jacobian is a :func:`funcdiff.replay.jacobian`.

    With Tensors that require grad in ``args``, ``res.x`` is differentiable by the
    implicit function theorem applied to ``J(x)^T r(x) = 0``, with the exact Hessian of
    ``0.5 * ||r||^2`` (its residual-weighted second-order term included, not
    Gauss-Newton); ``res.fun`` (the residuals) and ``res.cost`` are Tensors too. Active
    bounds give zero derivatives; a robust ``loss`` is refused (NotImplementedError).
    ``allow_unconverged`` is as for :func:`minimize`.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff import optimize
    >>> t = np.linspace(0, 1, 8)
    >>> y = 2.0 * np.exp(-1.5 * t)
    >>> res = optimize.least_squares(lambda p: p[0] * np.exp(-p[1] * t) - y, np.ones(2))
    >>> np.round(res.x, 6)
    array([2. , 1.5])
    """
    import scipy.optimize

    arguments = Arguments(args)
    plain = arguments.plain
    for key, value in (kwargs or {}).items():
        if isinstance(value, Tensor) and value.requires_grad:
            raise TypeError(
                f"kwargs[{key!r}] is a Tensor that requires grad: the solution is "
                "differentiated with respect to Tensors in args; pass it through args"
            )
    kwargs = {k: v.detach().data if isinstance(v, Tensor) else v for k, v in (kwargs or {}).items()}
    x0 = _as_x(x0, "x0")
    refuse_closed_over(fun, x0, plain, kwargs, "fun")
    d = Derivatives(fun, plain)
    sparse = _sparse_choice(sparse)
    bound = _with_kwargs(fun, kwargs)
    if jac is None and sparse is not False:
        J = _prepared_jacobian(bound, x0, plain, sparse)
        if J is not None:
            prepared = J if options.get("method", "trf") != "lm" else _densified(J)
            jac = lambda x, *a, **kw: prepared(x, *a)  # noqa: E731  (kwargs are bound)
    if jac is None and replay:
        replayed = _replay.jacobian(bound)
        jac = lambda x, *a, **kw: replayed(_as_x(x), *a)  # noqa: E731  (kwargs are bound)
    if jac is None:
        jac = d.jac
    res = _clean(
        scipy.optimize.least_squares(d.fun, x0, jac=jac, args=plain, kwargs=kwargs, **options)
    )
    if not arguments.has_tensor:
        return res
    active = bound_values = None
    if arguments.differentiable:
        check_converged(bool(res.success), res.get("message"), "least_squares", allow_unconverged)
        if options.get("loss", "linear") != "linear":
            raise NotImplementedError(
                f"least_squares with loss={options['loss']!r} and Tensor args: only the "
                "linear loss is differentiated"
            )
        bounds = options.get("bounds")
        if bounds is not None:
            active, bound_values = _active_bounds(
                res.x, res.grad, float(res.cost), bounds, False, not allow_unconverged
            )
    condition = Condition(
        "least_squares",
        fun,
        res.x,
        arguments,
        kwargs=kwargs,
        active=active,
        bound=bound_values,
        sparse=sparse,
    )
    res.x, r = _solution_and_value(condition, arguments, fun, kwargs)
    r = r if isinstance(r, Tensor) else tensor(np.asarray(r, dtype=np.float64))
    res.fun = r
    res.cost = 0.5 * (r * r).sum()
    return res


def _sparse_lu_preconditioner(J: Any, x0: np.ndarray, args: tuple) -> Any:
    """The inverse of the exact sparse Jacobian, refactorised at each Newton step.

    A ``LinearOperator`` for ``root(method="krylov")``'s ``inner_M``: SciPy calls its
    ``update(x, f)`` after every step, and each inner Krylov iteration is then one pair of
    triangular solves.
    """
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    class Preconditioner(spla.LinearOperator):
        def __init__(self) -> None:
            super().__init__(np.float64, (x0.size, x0.size))
            self.update(x0, None)

        def update(self, x: Any, f: Any) -> None:
            A = sp.csc_matrix(J(np.reshape(x, x0.shape), *args))
            try:
                self.lu = spla.splu(A)
            except RuntimeError:  # singular: no preconditioning at this step
                self.lu = None

        def _matvec(self, v: np.ndarray) -> np.ndarray:
            v = np.asarray(v, dtype=np.float64).ravel()
            return v if self.lu is None else self.lu.solve(v)

    return Preconditioner()


def root(
    fun: Callable[..., Any],
    x0: Any,
    args: Any = (),
    method: str = "hybr",
    jac: Any = None,
    sparse: Any = False,
    replay: bool = False,
    allow_unconverged: bool = False,
    **kwargs: Any,
) -> Any:
    """``scipy.optimize.root`` with the exact Jacobian (for ``hybr`` and ``lm``).

    With ``sparse=True`` (or a pattern, or ``"auto"``) the Jacobian is computed by
    :func:`funcdiff.sparse.prepare_jacobian` (one pass per colour) and handed to
    MINPACK dense; with ``method="krylov"`` its sparse LU, refactorised at every Newton
    step, preconditions the inner Krylov solves (unless ``options`` gives an
    ``inner_M``), which makes large sparse systems converge in a few Newton steps. With
    ``replay=True`` it is a :func:`funcdiff.replay.jacobian`.

    With Tensors that require grad in ``args``, ``res.x`` (and ``res.fun``) are Tensors
    differentiable by the implicit function theorem applied to ``fun(x, *args) = 0``,
    with the exact Jacobian at the solution (sparse, and reused from ``sparse=``, when it
    is sparse). ``allow_unconverged`` is as for :func:`minimize`.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import optimize
    >>> res = optimize.root(lambda x: x ** 3 - np.array([8.0, 27.0]), np.ones(2))
    >>> np.round(res.x, 8)
    array([2., 3.])

    The root of ``x ** 3 = c`` is ``c ** (1/3)``, with derivative ``c ** (-2/3) / 3``:

    >>> c = fd.tensor(8.0, requires_grad=True)
    >>> res = optimize.root(lambda x, c: x ** 3 - c, np.ones(1), args=(c,))
    >>> res.x.sum().backward()
    >>> round(float(c.grad), 8)
    0.08333333
    """
    import scipy.optimize

    arguments = Arguments(args)
    plain = arguments.plain
    x0 = _as_x(x0, "x0")
    refuse_closed_over(fun, x0, plain, None, "fun")
    d = Derivatives(fun, plain)
    sparse = _sparse_choice(sparse)
    prepared = None
    if jac is None and _method_name(method) in _ROOT_JAC_METHODS:
        J = _prepared_jacobian(fun, x0, plain, sparse) if sparse is not False else None
        if J is not None:
            jac = _densified(J)
            prepared = J
        elif replay:
            replayed = _replay.jacobian(fun)
            jac = lambda x, *a: replayed(_as_x(x), *a)  # noqa: E731
        else:
            jac = d.jac
    elif _method_name(method) == "krylov" and sparse is not False:
        options = dict(kwargs.get("options") or {})
        jac_options = dict(options.get("jac_options") or {})
        J = None if "inner_M" in jac_options else _prepared_jacobian(fun, x0, plain, sparse)
        if J is not None:
            jac_options["inner_M"] = _sparse_lu_preconditioner(J, x0, plain)
            kwargs["options"] = {**options, "jac_options": jac_options}
            prepared = J
    res = _clean(scipy.optimize.root(d.fun, x0, args=plain, method=method, jac=jac, **kwargs))
    if not arguments.has_tensor:
        return res
    if arguments.differentiable:
        check_converged(bool(res.success), res.get("message"), "root", allow_unconverged)
        if np.size(res.fun) != np.size(res.x):
            raise ValueError(
                f"root's fun returns {np.size(res.fun)} values for {np.size(res.x)} unknowns: "
                "its solution is differentiated as a root of as many equations as unknowns; "
                "use least_squares for an over- or underdetermined system"
            )
    condition = Condition("root", fun, res.x, arguments, sparse=sparse, prepared=prepared)
    res.x, value = _solution_and_value(condition, arguments, fun)
    res.fun = value if isinstance(value, Tensor) else tensor(np.asarray(value, dtype=np.float64))
    return res


def fixed_point(
    func: Callable[..., Any],
    x0: Any,
    args: Any = (),
    xtol: float = 1e-08,
    maxiter: int = 500,
    method: str = "del2",
) -> Any:
    """``scipy.optimize.fixed_point``: a point with ``func(x, *args) == x``, differentiable.

    The iteration is SciPy's, on plain values. With Tensors that require grad in
    ``args`` the point is returned as a Tensor whose derivatives follow the implicit
    function theorem applied to ``x - func(x, *args) = 0`` (the Jacobian ``I - dfunc/dx``
    is not symmetric in general; it is solved transposed in reverse mode). SciPy raises
    ``RuntimeError`` when the iteration does not converge.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import optimize
    >>> a = fd.tensor(0.5, requires_grad=True)
    >>> x = optimize.fixed_point(lambda x, a: a * np.cos(x), 0.0, args=(a,))
    >>> (dx,) = fd.grad(x, a)
    >>> bool(np.isclose(dx, np.cos(x.data) / (1 + a.data * np.sin(x.data))))
    True
    """
    import scipy.optimize

    arguments = Arguments(args)
    plain = arguments.plain
    x0 = _as_x(x0, "x0")
    refuse_closed_over(func, x0, plain, None, "func")
    point = scipy.optimize.fixed_point(
        func, x0, args=plain, xtol=xtol, maxiter=maxiter, method=method
    )
    point = np.asarray(point, dtype=np.float64)
    if not arguments.has_tensor:
        return point
    return _solution(Condition("fixed_point", func, point, arguments), arguments)


def root_scalar(
    f: Callable[..., Any],
    args: Any = (),
    method: str | None = None,
    bracket: Any = None,
    fprime: Any = None,
    fprime2: Any = None,
    x0: Any = None,
    x1: Any = None,
    xtol: float | None = None,
    rtol: float | None = None,
    maxiter: int | None = None,
    options: dict | None = None,
    allow_unconverged: bool = False,
) -> Any:
    """``scipy.optimize.root_scalar`` with exact ``fprime`` and ``fprime2``; differentiable.

    ``method="newton"`` gets ``fprime`` and ``"halley"`` ``fprime`` and ``fprime2`` from
    funcdiff unless you pass them. With Tensors that require grad in ``args`` the
    result's ``root`` is a Tensor with ``d root / d p = -(df/dp) / (df/dx)``; a result
    that did not converge raises unless ``allow_unconverged``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import optimize
    >>> c = fd.tensor(2.0, requires_grad=True)
    >>> sol = optimize.root_scalar(lambda x, c: x ** 2 - c, args=(c,), bracket=(0.0, 3.0))
    >>> (d,) = fd.grad(sol.root, c)
    >>> bool(np.isclose(d, 0.5 / np.sqrt(2.0)))
    True
    """
    import scipy.optimize

    arguments = Arguments(args)
    plain = arguments.plain
    start = None if x0 is None else float(_as_x(x0, "x0"))
    name = _method_name(method)
    value_of = f
    if fprime is True or fprime2 is True:

        def value_of(x: Any, *a: Any) -> Any:
            return f(x, *a)[0]

    # Checked where SciPy evaluates f first (the start, or the bracket's left end).
    probe = start if start is not None or bracket is None else float(_as_x(bracket[0]))
    if probe is not None:
        refuse_closed_over(value_of, probe, plain, None, "f")

    d = Derivatives(value_of, plain)
    if fprime is None and name in ("newton", "halley"):

        def fprime(x: Any, *a: Any) -> float:
            return float(np.reshape(d.jac(x, *a), ()))

    if fprime2 is None and name == "halley":

        def fprime2(x: Any, *a: Any) -> float:
            return float(np.reshape(d.hess(x, *a), ()))

    sol = scipy.optimize.root_scalar(
        f,
        args=plain,
        method=method,
        bracket=None if bracket is None else [float(_as_x(b, "bracket")) for b in bracket],
        fprime=fprime,
        fprime2=fprime2,
        x0=start,
        x1=None if x1 is None else float(_as_x(x1, "x1")),
        xtol=xtol,
        rtol=rtol,
        maxiter=maxiter,
        options=options,
    )
    if not arguments.has_tensor:
        return sol
    if arguments.differentiable:
        check_converged(bool(sol.converged), sol.flag, "root_scalar", allow_unconverged)
    condition = Condition("root", value_of, np.asarray(float(sol.root)), arguments)
    sol.root = _solution(condition, arguments)
    return sol


def custom_root(
    optimality_fun: Callable[..., Any],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make any solver ``solve(x0, *args) -> x`` differentiable with respect to ``args``.

    The solver runs on plain values (detached ``args``, a float ``x0``), so it may be a
    hand-written loop or a compiled library. Its output ``x`` is taken to satisfy
    ``optimality_fun(x, *args) == 0`` (as many equations as unknowns); with Tensors that
    require grad in ``args`` it is returned as a Tensor differentiable by the implicit
    function theorem, to any order and in both modes. Its derivative with respect to
    ``x0`` is zero.

    Parameters
    ----------
    optimality_fun : callable
        ``optimality_fun(x, *args)``, NumPy code returning an array with the size of ``x``.

    Returns
    -------
    callable
        A decorator for the solver.

    Raises
    ------
    ValueError
        ``optimality_fun``'s output size differs from the solution's.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import optimize
    >>> def sqrt_condition(x, c):
    ...     return x * x - c
    >>> @optimize.custom_root(sqrt_condition)
    ... def newton_sqrt(x0, c):
    ...     x = x0
    ...     for _ in range(50):
    ...         x = 0.5 * (x + c / x)
    ...     return x
    >>> c = fd.tensor(9.0, requires_grad=True)
    >>> x = newton_sqrt(1.0, c)
    >>> (d,) = fd.grad(x, c)
    >>> float(x.data), round(float(d), 12)
    (3.0, 0.166666666667)
    """
    if not callable(optimality_fun):
        raise TypeError(f"optimality_fun must be callable, got {type(optimality_fun).__name__}")

    def decorate(solver: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(solver):
            raise TypeError(f"custom_root decorates a solver, got {type(solver).__name__}")

        @functools.wraps(solver)
        def solve(x0: Any, *args: Any) -> Any:
            arguments = Arguments(args)
            plain = arguments.plain
            start = x0.detach().data if isinstance(x0, Tensor) else x0
            x = solver(start, *plain)
            if isinstance(x, Tensor) and x.requires_grad:
                raise RuntimeError(
                    "the solver returned a Tensor that requires grad although it was called "
                    "on plain values: it uses a Tensor that is not passed in args (a closure "
                    "or a global), whose gradient would be lost. Pass that Tensor through "
                    "the solver's arguments, or .detach() it"
                )
            solution = _as_x(x, "the solver's result").copy()
            # Checked at the solution, where optimality_fun is sure to be defined.
            residual = refuse_closed_over(optimality_fun, solution, plain, None, "optimality_fun")
            if residual is None:
                residual = optimality_fun(solution, *plain)
            size = np.size(residual.data if isinstance(residual, Tensor) else residual)
            if size != solution.size:
                raise ValueError(
                    f"optimality_fun returned {size} values (shape {np.shape(residual)}) for a "
                    f"solution of {solution.size} values (shape {solution.shape}): it must "
                    "return one equation per unknown"
                )
            if not arguments.has_tensor:
                return x
            condition = Condition("custom_root", optimality_fun, solution, arguments)
            return _solution(condition, arguments)

        return solve

    return decorate
