"""The derivative of a terminal event's point.

A terminal event ``g(t, y, *args) = 0`` stops the solve at ``t*``, which moves with the
inputs ``x``:

    dt*/dx = -(grad_y g . S(t*) + dg/dx) / gdot,     gdot = grad_y g . f(t*, y*) + dg/dt,
    dy(t*)/dx = S(t*) + f(t*, y*) dt*/dx.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff import functional
from funcdiff.integrate._rhs import RightHandSide

__all__ = ["stopping_event", "event_point_sensitivity"]


def stopping_event(events: Any, t_events: Any, t_stop: float) -> Any:
    """The terminal event function that stopped the solve at ``t_stop``."""
    listed = [events] if callable(events) else list(events or [])
    for ev, times in zip(listed, t_events or []):
        if getattr(ev, "terminal", False) and len(times) and times[-1] == t_stop:
            return ev
    return None


def event_point_sensitivity(
    event: Any, rhs: RightHandSide, t_stop: float, y_stop: np.ndarray, s_stop: np.ndarray, n0: int
) -> np.ndarray:
    """``dy(t*)/dx``, shape ``(n, P)``, from ``S(t*)`` (``s_stop``, the same shape)."""
    n = rhs.n
    positions = rhs.param_positions

    def of(t: Any, y: Any, *params: Any) -> Any:
        full = list(rhs.args)
        for i, p in zip(positions, params):
            full[i] = p
        return event(t, y, *full)

    inputs = (np.asarray(t_stop, dtype=float), y_stop, *rhs.params)
    blocks = functional.jacobian(of, inputs)
    dg_dt = float(np.asarray(blocks[0].data))
    dg_dy = np.reshape(blocks[1].data, (n,))
    dg_dp = (
        np.concatenate([np.reshape(b.data, -1) for b in blocks[2:]]) if rhs.params else np.zeros(0)
    )
    rate = rhs(t_stop, y_stop)
    gdot = float(dg_dy @ rate + dg_dt)
    if gdot == 0.0:
        raise ArithmeticError(
            "funcdiff.integrate.solve_ivp: the terminal event is crossed tangentially "
            "(its rate of change is zero at the event), so the event time has no derivative"
        )
    dg_dx = np.zeros(s_stop.shape[1])
    dg_dx[n0:] = dg_dp
    dt_dx = -(dg_dy @ s_stop + dg_dx) / gdot
    return s_stop + np.outer(rate, dt_dx)
