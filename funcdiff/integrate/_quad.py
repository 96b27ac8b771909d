"""``quad``: SciPy's adaptive quadrature, differentiable by the Leibniz rule.

    d/dp int_a^b h(x, p) dx = int_a^b dh/dp dx + h(b, p) db/dp - h(a, p) da/dp

An infinite limit contributes no boundary term. The parameter integral is one
:func:`scipy.integrate.quad_vec` of the replayed gradient of ``h`` in the parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.integrate as si

from funcdiff import replay
from funcdiff._core.tensor import Tensor
from funcdiff.autograd import Function, is_grad_enabled
from funcdiff.integrate._rhs import contains_tensor

__all__ = ["quad"]

_UNSUPPORTED = ("weight", "wvar", "wopts")


def quad(func: Callable[..., Any], a: Any, b: Any, args: Any = (), **kwargs: Any) -> Any:
    """Integrate ``func(x, *args)`` from ``a`` to ``b`` with SciPy, differentiably.

    The signature and the result are those of :func:`scipy.integrate.quad`:
    ``(value, abserr)`` (and SciPy's extra items with ``full_output``). ``value`` is a
    Tensor when ``a``, ``b`` or an entry of ``args`` is a Tensor, and its gradient with
    respect to them follows the Leibniz rule; ``abserr`` stays a float.

    Parameters
    ----------
    func : callable
        ``func(x, *args)``, plain NumPy code returning a number.
    a, b : float or Tensor
        The limits; either may be infinite (no boundary term then).
    args : tuple
        Extra arguments of ``func``; Tensors among them (0-d or arrays) are
        differentiated.
    **kwargs
        SciPy's options (``epsabs``, ``epsrel``, ``limit``, ``points``, ...). The
        derivative integral uses the same ``epsabs``, ``epsrel`` and ``points``.

    Returns
    -------
    value : float or Tensor
    abserr : float

    Raises
    ------
    NotImplementedError
        Differentiating with ``weight`` (a weighted integral); a second derivative
        through ``value``. (First-order forward-mode products, ``jvp``, work: forward
        mode transposes the first-order rule.)

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.integrate import quad
    >>> s = fd.tensor(2.0, requires_grad=True)
    >>> value, err = quad(lambda x, s: np.exp(-s * x), 0.0, np.inf, args=(s,))
    >>> round(value.item(), 10), round(fd.grad(value, s)[0].item(), 10)   # 1/s, -1/s**2
    (0.5, -0.25)
    """
    if not isinstance(args, tuple):
        args = (args,)
    for i, entry in enumerate(args):
        if not isinstance(entry, Tensor) and contains_tensor(entry):
            raise TypeError(
                f"args[{i}] holds a Tensor inside a {type(entry).__name__}: pass each "
                "Tensor as an entry of args of its own, so that it is differentiated"
            )
    plain = [e.data if isinstance(e, Tensor) else e for e in args]
    a_val = float(a.data) if isinstance(a, Tensor) else a
    b_val = float(b.data) if isinstance(b, Tensor) else b
    out = si.quad(func, a_val, b_val, args=tuple(plain), **kwargs)
    live_args = [
        i
        for i, e in enumerate(args)
        if isinstance(e, Tensor) and e.requires_grad and np.asarray(e.data).dtype.kind == "f"
    ]
    tensors_in = any(isinstance(v, Tensor) for v in (a, b, *args))
    if not tensors_in:
        return out
    differentiated = is_grad_enabled() and (
        bool(live_args) or any(isinstance(v, Tensor) and v.requires_grad for v in (a, b))
    )
    if differentiated:
        for name in _UNSUPPORTED:
            if kwargs.get(name) is not None:
                raise NotImplementedError(
                    f"funcdiff.integrate.quad: derivatives of a weighted integral ({name}=) "
                    "are not implemented"
                )
    problem = _Quadrature(func, a_val, b_val, plain, live_args, kwargs, float(out[0]))
    params = [args[i] for i in live_args]
    value = QuadFunction.apply(problem, a, b, *params)
    return (value, *out[1:])


class _Quadrature:
    def __init__(
        self,
        func: Callable[..., Any],
        a: float,
        b: float,
        args: list,
        positions: list[int],
        options: dict,
        value: float,
    ) -> None:
        self.func = func
        self.a = a
        self.b = b
        self.args = args
        self.positions = positions
        self.options = options
        self.value = value
        self.params = [np.asarray(args[i], dtype=float) for i in positions]

    def h(self, x: Any, *params: Any) -> Any:
        full = list(self.args)
        for i, p in zip(self.positions, params):
            full[i] = p
        return self.func(x, *full)

    def at(self, x: float) -> float:
        if not np.isfinite(x):
            return 0.0
        return float(self.func(x, *self.args))

    def parameter_integral(self) -> list[np.ndarray]:
        """``int_a^b dh/dp dx`` for each parameter."""
        if not self.params:
            return []
        gradient = replay.grad(self.h, argnums=tuple(range(1, 1 + len(self.params))))
        sizes = [p.size for p in self.params]

        def integrand(x: float) -> np.ndarray:
            grads = gradient(np.asarray(x, dtype=float), *self.params)
            return np.concatenate([np.reshape(g, -1) for g in grads])

        opts = {k: self.options[k] for k in ("epsabs", "epsrel", "points") if k in self.options}
        if "limit" in self.options:
            opts["limit"] = max(int(self.options["limit"]), 200)
        total, _ = si.quad_vec(integrand, self.a, self.b, **opts)
        parts, at = [], 0
        for p, size in zip(self.params, sizes):
            parts.append(np.reshape(total[at : at + size], p.shape))
            at += size
        return parts


class QuadFunction(Function):
    """The value of a quadrature as a function of ``(a, b, *params)``."""

    @staticmethod
    def forward(ctx: Any, problem: _Quadrature, a: Any, b: Any, *params: Any) -> Any:
        ctx.problem = problem
        return np.asarray(problem.value)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        if is_grad_enabled():  # create_graph: a second derivative
            raise NotImplementedError(
                "funcdiff.integrate.quad: only first derivatives are implemented (grad, "
                "backward, vjp, jvp, jacobian); second derivatives through quad are not"
            )
        problem: _Quadrature = ctx.problem
        gd = float(np.asarray(g.data if isinstance(g, Tensor) else g))
        needs = ctx.needs_input_grad
        ga = -gd * problem.at(problem.a) if needs[1] else None
        gb = gd * problem.at(problem.b) if needs[2] else None
        interior = problem.parameter_integral() if any(needs[3:]) else []
        return (None, ga, gb, *[gd * part for part in interior])
