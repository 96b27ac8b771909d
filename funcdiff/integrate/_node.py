"""One graph node per solve: its forward runs SciPy, its backward the sensitivities.

:class:`Problem` holds everything a solve with Tensor inputs needs later (the plain
arguments, the derivative programs of ``fun``, the forward solution, cached
sensitivities). :class:`SolveFunction` is the node of ``result.y``; under
``create_graph`` its backward is built from :class:`SensitivityFunction` (``S`` at the
output times as a differentiable Tensor), whose own backward uses second-order
sensitivities.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor
from funcdiff.autograd import Function, is_grad_enabled
from funcdiff.integrate._adjoint import adjoint_vjp
from funcdiff.integrate._events import event_point_sensitivity
from funcdiff.integrate._forward import second_order_sensitivities, solve_with_sensitivities
from funcdiff.integrate._rhs import RightHandSide

__all__ = ["Problem", "SolveFunction", "SECOND_ORDER_STATES"]

#: The largest second-order sensitivity system, ``n (1 + P + P^2)`` states, solved.
SECOND_ORDER_STATES = 20_000


class Problem:
    """A solve with Tensor inputs: its settings, solution and cached sensitivities."""

    def __init__(
        self,
        rhs: RightHandSide,
        t_span: tuple[float, float],
        y0: np.ndarray,
        seed_y0: bool,
        method: Any,
        mode: str,
        options: dict,
        user_jac: Any,
        tensor_args: list,
    ) -> None:
        self.rhs = rhs
        self.t_span = t_span
        self.y0 = y0
        self.seed_y0 = seed_y0
        self.method = method
        self.mode = mode
        self.options = options
        self.user_jac = user_jac
        self.tensor_args = tensor_args  # args with the Tensors in place (for fun on Tensors)
        self.result: Any = None
        self.sol: Any = None
        self.t_out = np.zeros(0)
        self.y_out = np.zeros((0, 0))
        self.sens: np.ndarray | None = None  # (n, m, P)
        self.second: np.ndarray | None = None  # (n, m, P, P)
        self.output: Tensor | None = None
        self.event_stop = False
        self.stop_event: Any = None  # the terminal event that ended the solve
        self.event_corrected = False
        self.unknown_stop = False
        self.adjoint_rows = 0  # adjoint solves run so far (for "auto")
        self.differentiate_t = False

    @property
    def n_inputs(self) -> int:
        return (self.rhs.n if self.seed_y0 else 0) + self.rhs.n_params

    # -- failure --------------------------------------------------------------------
    def check_differentiable(self) -> None:
        if not self.result.success:
            raise RuntimeError(
                "funcdiff.integrate.solve_ivp: the solve failed, so its result has no "
                f"derivative. SciPy's message: {self.result.message}"
            )
        if self.unknown_stop:
            raise NotImplementedError(
                "funcdiff.integrate.solve_ivp: the solve stopped at a terminal event that "
                "cannot be identified among events, so the derivative of the event point "
                "(the last column of result.y) is not available"
            )

    # -- sensitivities ----------------------------------------------------------------
    def sensitivities(self) -> np.ndarray:
        """``S`` at the output times, ``(n, m, P)``: solved once, then cached.

        When a terminal event ended the solve (``t_eval=None``), the last output is the
        event point, and its column includes how the event time moves.
        """
        if self.sens is None:
            span = self.t_span
            if self.event_stop:
                span = (self.t_span[0], float(self.t_out[-1]))
            result = solve_with_sensitivities(
                self.rhs,
                span,
                self.y0,
                self.seed_y0,
                self.method,
                self.t_out,
                self.options,
                user_jac=self.user_jac,
            )
            if not result.success:
                raise RuntimeError(
                    "funcdiff.integrate.solve_ivp: the forward sensitivity solve failed, so "
                    f"the derivative is not available. SciPy's message: {result.message}"
                )
            self.sens = sensitivities_of(result.y, self.rhs.n, self.n_inputs)
        if self.event_stop and not self.event_corrected:
            n0 = self.rhs.n if self.seed_y0 else 0
            self.sens[:, -1] = event_point_sensitivity(
                self.stop_event,
                self.rhs,
                float(self.t_out[-1]),
                self.y_out[:, -1],
                self.sens[:, -1],
                n0,
            )
            self.event_corrected = True
        return self.sens

    def second_order(self) -> np.ndarray:
        """``d^2 y / dx dx`` at the output times, ``(n, m, P, P)``: solved once, cached."""
        if self.event_stop:
            raise NotImplementedError(
                "funcdiff.integrate.solve_ivp: second derivatives of a solve that stopped at "
                "a terminal event (t_eval=None) are not implemented"
            )
        if self.second is None:
            inputs = self.n_inputs
            states = self.rhs.n * (1 + inputs + inputs * inputs)
            if states > SECOND_ORDER_STATES:
                raise NotImplementedError(
                    "funcdiff.integrate.solve_ivp: second derivatives solve the second-order "
                    f"sensitivity equations, n (1 + P + P^2) = {states} states here for "
                    f"n = {self.rhs.n} states and P = {inputs} inputs; above "
                    f"{SECOND_ORDER_STATES} that is not implemented (differentiate with "
                    "respect to fewer inputs)"
                )
            _, s2 = second_order_sensitivities(
                self.rhs,
                self.t_span,
                self.y0,
                self.seed_y0,
                self.method,
                self.t_out,
                self.options,
                self.user_jac,
            )
            self.second = np.moveaxis(s2, 0, 1)
        return self.second

    def rates(self) -> np.ndarray:
        """``f(t_i, Y_i)`` at the output times, ``(n, m)``."""
        return np.stack(
            [self.rhs(t, self.y_out[:, i]) for i, t in enumerate(self.t_out)], axis=1
        ).reshape(self.rhs.n, -1)

    def sensitivity_rates(self) -> np.ndarray:
        """``dS/dt = J S + F_x`` at the output times, ``(n, m, P)``."""
        s = self.sensitivities()
        n0 = self.rhs.n if self.seed_y0 else 0
        out = np.empty_like(s)
        for i, t in enumerate(self.t_out):
            jy, jp = self.rhs.jacobians(t, self.y_out[:, i])
            out[:, i] = jy @ s[:, i]
            out[:, i, n0:] += jp
        return out

    def adjoint(self, g: np.ndarray) -> np.ndarray:
        """``G . dY/dx`` for one cotangent ``(n, m)``, by the adjoint solve."""
        lam, q = adjoint_vjp(
            self.rhs,
            self.sol,
            self.t_span[0],
            self.t_out,
            g,
            self.method,
            self.options,
            self.user_jac,
        )
        self.adjoint_rows += 1
        return np.concatenate([lam, q]) if self.seed_y0 else q

    def use_adjoint(self, batch: int) -> bool:
        if self.sens is not None or self.sol is None or self.event_stop:
            return False
        if self.mode == "adjoint":
            return True
        # "auto" chose the adjoint for a vjp. Rows of a Jacobian, in one batch or one
        # call after another, are cheaper from forward sensitivities (one solve of
        # n (1 + P) states, then contractions) once the adjoints solved so far and asked
        # for now (n + p states each) would add up to as much work.
        n = self.rhs.n
        per_row = n + self.rhs.n_params
        forward = n * (1 + self.n_inputs)
        return (self.adjoint_rows + batch) * per_row < forward

    # -- splitting the flat input vector ----------------------------------------------------
    def split(self, flat: Any) -> tuple[Any, list]:
        """A gradient over the flat inputs ``x`` as ``(y0 part or None, [param parts])``."""
        n = self.rhs.n
        lead = flat.shape[:-1]
        at = 0
        gy0 = None
        if self.seed_y0:
            gy0 = flat[..., :n]
            at = n
        parts = []
        for shape, size in zip(self.rhs.param_shapes, self.rhs.param_sizes):
            parts.append(np.reshape(flat[..., at : at + size], lead + shape))
            at += size
        return gy0, parts


def sensitivities_of(z: np.ndarray, n: int, inputs: int) -> np.ndarray:
    """``S`` as ``(n, m, P)`` from the augmented solution ``z`` of shape ``(n (1 + P), m)``."""
    m = z.shape[1]
    return np.transpose(z[n:].reshape(inputs, n, m), (1, 2, 0))


def _gradients(problem: Problem, flat: Any, gt: Any, n_params: int) -> tuple:
    gy0, parts = problem.split(flat)
    parts += [None] * (n_params - len(parts))
    return (None, gy0, gt, *parts)


class SolveFunction(Function):
    """``result.y`` as a function of ``(y0, t_eval, *params)``."""

    batched_backward = True

    @staticmethod
    def forward(ctx: Any, problem: Problem, y0: Any, t_eval: Any, *params: Any) -> Any:
        ctx.problem = problem
        ctx.inputs = (y0, t_eval, *params)
        return np.array(problem.y_out, copy=True)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        problem: Problem = ctx.problem
        problem.check_differentiable()
        n_params = len(ctx.needs_input_grad) - 3
        needs_t = ctx.needs_input_grad[2]
        if is_grad_enabled():
            # Differentiable pieces only, each linear in g: S is a Tensor whose own
            # derivative runs second-order sensitivities; f(t_i, Y_i) is fun on Tensors.
            s = SensitivityFunction.apply(problem, *ctx.inputs)
            flat = np.tensordot(g, s, axes=([-2, -1], [0, 1]))
            gt = None
            if needs_t:
                gt = np.sum(g * _rates_on_tensors(problem, ctx.inputs[1]), axis=-2)
            return _gradients(problem, flat, gt, n_params)
        gd = np.asarray(g.data if isinstance(g, Tensor) else g)
        batch = gd.shape[0] if gd.ndim == 3 else 1
        if problem.n_inputs == 0:
            flat = np.zeros(gd.shape[:-2] + (0,))
        elif problem.use_adjoint(batch):
            rows = gd.reshape(-1, *gd.shape[-2:])
            flat = np.stack([problem.adjoint(r) for r in rows]).reshape(gd.shape[:-2] + (-1,))
        else:
            flat = np.tensordot(gd, problem.sensitivities(), axes=([-2, -1], [0, 1]))
        gt = np.sum(gd * problem.rates(), axis=-2) if needs_t else None
        return _gradients(problem, flat, gt, n_params)


def _rates_on_tensors(problem: Problem, t_eval: Any) -> Any:
    """``f(t_i, Y_i)`` at the output times, ``(n, m)``, recorded on Tensors."""
    y: Any = problem.output
    args = problem.tensor_args
    columns = [problem.rhs.fun(t_eval[i], y[:, i], *args) for i in range(len(problem.t_out))]
    return np.stack(columns, axis=1)


class SensitivityFunction(Function):
    """``S = dY/dx`` at the output times, ``(n, m, P)``, as a function of the inputs."""

    batched_backward = True

    @staticmethod
    def forward(ctx: Any, problem: Problem, y0: Any, t_eval: Any, *params: Any) -> Any:
        ctx.problem = problem
        ctx.inputs = (y0, t_eval, *params)
        return np.array(problem.sensitivities(), copy=True)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        problem: Problem = ctx.problem
        n_params = len(ctx.needs_input_grad) - 3
        needs_t = ctx.needs_input_grad[2]
        if is_grad_enabled():
            s2, rates = HigherFunction.apply(problem, *ctx.inputs)
            flat = np.tensordot(g, s2, axes=([-3, -2, -1], [0, 1, 2]))
            gt = np.sum(g * rates, axis=(-3, -1)) if needs_t else None
            return _gradients(problem, flat, gt, n_params)
        gd = np.asarray(g.data if isinstance(g, Tensor) else g)
        flat = np.tensordot(gd, problem.second_order(), axes=([-3, -2, -1], [0, 1, 2]))
        gt = np.sum(gd * problem.sensitivity_rates(), axis=(-3, -1)) if needs_t else None
        return _gradients(problem, flat, gt, n_params)


class HigherFunction(Function):
    """``(d^2 Y/dx dx, dS/dt)``: constants under a third derivative, which is refused."""

    @staticmethod
    def forward(ctx: Any, problem: Problem, y0: Any, t_eval: Any, *params: Any) -> Any:
        second = problem.second_order()
        rates = problem.sensitivity_rates() if problem.differentiate_t else np.zeros(0)
        return np.array(second, copy=True), rates

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise NotImplementedError(
            "funcdiff.integrate.solve_ivp: derivatives of third order and above are not implemented"
        )
