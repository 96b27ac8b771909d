"""``odeint``: SciPy's ``odeint`` signature over the differentiable ``solve_ivp``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.integrate as si

from funcdiff._core.tensor import Tensor
from funcdiff.integrate._solve_ivp import solve_ivp

__all__ = ["odeint"]

#: odeint's options and their solve_ivp names (LSODA).
_RENAMED = {"hmax": "max_step", "h0": "first_step", "hmin": "min_step"}


def odeint(
    func: Callable[..., Any],
    y0: Any,
    t: Any,
    args: Any = (),
    tfirst: bool = False,
    **kwargs: Any,
) -> Any:
    """Integrate ``dy/dt = func(y, t, *args)`` with SciPy, differentiably.

    The signature is that of :func:`scipy.integrate.odeint`. With no Tensor input it
    is SciPy's ``odeint``. When ``y0``, ``t`` or an entry of ``args`` is a Tensor, the
    problem is solved by :func:`funcdiff.integrate.solve_ivp` with ``method="LSODA"``
    (the same integrator, through SciPy's ``solve_ivp``) at ``odeint``'s tolerances,
    and the result is a Tensor of shape ``(len(t), len(y0))`` differentiable with
    respect to all three (``t[0]`` too: it is the initial time).

    Parameters
    ----------
    func, y0, t, args, tfirst
        As in :func:`scipy.integrate.odeint`.
    **kwargs
        ``rtol``, ``atol`` (default 1.49012e-8 each), ``Dfun``, ``col_deriv``,
        ``hmax``, ``h0``, ``hmin`` with Tensor inputs; any option of SciPy's without.
        ``sensitivity`` is passed on to :func:`solve_ivp`.

    Returns
    -------
    ndarray or Tensor
        ``y[i]`` is the solution at ``t[i]``.

    Raises
    ------
    TypeError
        With Tensor inputs, an option ``solve_ivp`` has no counterpart for
        (``full_output``, ``mxstep``, ...).
    RuntimeError
        When the result of a failed solve is differentiated.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.integrate import odeint
    >>> k = fd.tensor(0.3, requires_grad=True)
    >>> y = odeint(lambda y, t, k: -k * y, [2.0], np.array([0.0, 1.0]), args=(k,))
    >>> y.shape
    (2, 1)
    >>> round(float(fd.grad(y[1, 0], k)[0]), 6), round(-2.0 * float(np.exp(-0.3)), 6)
    (-1.481636, -1.481636)
    """
    if not isinstance(args, tuple):
        args = (args,)
    sensitivity = kwargs.pop("sensitivity", "auto")
    tensor_in = any(isinstance(v, Tensor) for v in (y0, t, *args))
    if not tensor_in:
        return si.odeint(func, y0, t, args=args, tfirst=tfirst, **kwargs)
    options: dict[str, Any] = {
        "rtol": kwargs.pop("rtol", None) or 1.49012e-8,
        "atol": kwargs.pop("atol", None) or 1.49012e-8,
    }
    for old, new in _RENAMED.items():
        value = kwargs.pop(old, 0.0)
        if value:
            options[new] = value
    dfun = kwargs.pop("Dfun", None)
    col_deriv = bool(kwargs.pop("col_deriv", False))
    if kwargs:
        raise TypeError(
            "funcdiff.integrate.odeint with Tensor inputs runs solve_ivp's LSODA, which has "
            f"no counterpart for {sorted(kwargs)}"
        )
    t_data = np.asarray(t.data if isinstance(t, Tensor) else t, dtype=float)
    if t_data.ndim != 1 or t_data.size < 1:
        raise ValueError(f"t must be a 1-D sequence of times, got shape {t_data.shape}")

    if isinstance(t, Tensor) and t.requires_grad:
        # The initial time t[0] moves the whole solution: integrate in s = t - t[0]
        # with t[0] as a parameter of the right-hand side, so it is differentiated too.
        times: Any = t
        start = times[0]
        t_eval = times - start

        def shifted(s: Any, y: Any, t0: Any, *a: Any) -> Any:
            return _call(func, s + t0, y, a, tfirst)

        if dfun is not None:
            options["jac"] = _jac(dfun, col_deriv, tfirst, shift=True)
        span = (0.0, float(t_data[-1] - t_data[0]))
        res = solve_ivp(
            shifted,
            span,
            y0,
            method="LSODA",
            t_eval=t_eval,
            args=(start, *args),
            sensitivity=sensitivity,
            **options,
        )
    else:

        def rhs(s: Any, y: Any, *a: Any) -> Any:
            return _call(func, s, y, a, tfirst)

        if dfun is not None:
            options["jac"] = _jac(dfun, col_deriv, tfirst, shift=False)
        res = solve_ivp(
            rhs,
            (float(t_data[0]), float(t_data[-1])),
            y0,
            method="LSODA",
            t_eval=t,
            args=args,
            sensitivity=sensitivity,
            **options,
        )
    return res.y.T


def _call(func: Callable[..., Any], t: Any, y: Any, args: tuple, tfirst: bool) -> Any:
    return func(t, y, *args) if tfirst else func(y, t, *args)


def _jac(dfun: Callable[..., Any], col_deriv: bool, tfirst: bool, shift: bool) -> Any:
    def jac(t: Any, y: Any, *args: Any) -> Any:
        if shift:
            t0, args = args[0], args[1:]
            t = t + float(np.asarray(t0.data if isinstance(t0, Tensor) else t0))
        j = np.asarray(_call(dfun, t, y, args, tfirst))
        return j.T if col_deriv else j

    return jac
