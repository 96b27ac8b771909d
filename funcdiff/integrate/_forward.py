"""Forward sensitivities: the sensitivity equations solved together with the state.

For ``y' = f(t, y, p)`` and inputs ``x = (y0, p)``, ``S = dy/dx`` solves
``S' = J S + F_x`` with ``S(t0) = [I | 0]``. The augmented state is ``(y, Z)`` with
``Z = S^T`` stored row by row (one row per input), so that the Newton matrix of an
implicit method is block diagonal, ``J`` on every block (the simultaneous corrector of
CVODES, which leaves out the second-derivative coupling of ``S`` to ``y``). Within a
step, the sensitivity equations of an implicit method use the Jacobian at the step's
predicted state (see ``solve_with_sensitivities``).

Second-order sensitivities ``S2 = d^2 y / dx dx`` solve
``S2_jk' = J S2_jk + H_f[Shat_j, Shat_k]`` with ``Shat = d(y, p)/dx``; they serve the
second derivatives of a loss through the solve.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.integrate as si
import scipy.sparse as sp

from funcdiff.integrate._rhs import RightHandSide, as_scipy_jacobian

__all__ = ["solve_with_sensitivities", "second_order_sensitivities", "tiled_atol"]

IMPLICIT = ("BDF", "Radau", "LSODA")


def tiled_atol(atol: Any, n: int, copies: int) -> Any:
    """The state's ``atol`` repeated for ``copies`` blocks of ``n`` components."""
    a = np.asarray(atol, dtype=float)
    if a.ndim == 0:
        return float(a)
    return np.tile(np.broadcast_to(a, (n,)), copies)


def _block_jacobian(j: Any, blocks: int, method: str) -> Any:
    """``I_blocks (x) J``: the block-diagonal Newton matrix of the augmented system."""
    if sp.issparse(j) and method != "LSODA":
        return sp.block_diag([j] * blocks, format="csc")
    dense = j.toarray() if sp.issparse(j) else np.asarray(j)
    if blocks == 1:
        return dense
    return np.kron(np.eye(blocks), dense)


def user_jacobian(user_jac: Any, args: list) -> Any:
    """The user's ``jac`` as a function of ``(t, y)``, or None."""
    if user_jac is None:
        return None
    if callable(user_jac):
        return lambda t, y: user_jac(t, y, *args)
    return lambda t, y: user_jac


def wrapped_events(events: Any, n: int, args: list) -> Any:
    """The user's events as functions of the augmented state (its first ``n`` entries)."""
    if events is None:
        return None
    single = callable(events)
    out = []
    for ev in [events] if single else list(events):

        def of_aug(t: float, z: np.ndarray, ev: Any = ev) -> Any:
            return ev(t, z[:n], *args)

        for attr in ("terminal", "direction"):
            if hasattr(ev, attr):
                setattr(of_aug, attr, getattr(ev, attr))
        out.append(of_aug)
    return out[0] if single else out


def solve_with_sensitivities(
    rhs: RightHandSide,
    t_span: tuple[float, float],
    y0: np.ndarray,
    seed_y0: bool,
    method: Any,
    t_eval: Any,
    options: dict,
    *,
    dense_output: bool = False,
    events: Any = None,
    user_jac: Any = None,
) -> Any:
    """Solve the state and its sensitivities; returns SciPy's result on ``(y, Z)``.

    ``result.y[:n]`` is the state, ``result.y[n:]`` the rows of ``S^T`` (inputs
    ``y0`` first when ``seed_y0``, then the flattened parameters).
    """
    n = rhs.n
    n0 = n if seed_y0 else 0
    inputs = n0 + rhs.n_params
    z0 = np.zeros((inputs + 1) * n)
    z0[:n] = y0
    if n0:
        z0[n : n + n * n] = np.eye(n).ravel()
    plain_jac = user_jacobian(user_jac, rhs.args)

    implicit = method in IMPLICIT
    held: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def jacobians(t: float, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not implicit:
            return rhs.jacobians(t, y)
        # The Newton iterations of an implicit method evaluate f again and again at one
        # time, with corrected states; the sensitivity part keeps the Jacobian of the
        # first evaluation there (the predicted state). Corrected and predicted states
        # differ by what the step's error test bounds, so the sensitivities stay within
        # the tolerances (measured: as accurate as with a Jacobian per iteration), at a
        # third fewer evaluations of the Jacobian.
        found = held.get(t)
        if found is None:
            found = rhs.jacobians(t, y)
            held.clear()
            held[t] = found
        return found

    def aug(t: float, z: np.ndarray) -> np.ndarray:
        y = z[:n]
        zs = z[n:].reshape(inputs, n)
        jy, jp = jacobians(t, y)
        dz = zs @ jy.T
        if jp.shape[1]:
            dz[n0:] += jp.T
        return np.concatenate([rhs(t, y), dz.ravel()])

    opts = dict(options)
    opts["atol"] = tiled_atol(opts.get("atol", 1e-6), n, inputs + 1)
    if method in IMPLICIT:

        def jac(t: float, z: np.ndarray) -> Any:
            y = z[:n]
            j = plain_jac(t, y) if plain_jac is not None else rhs.jac_y(t, y)
            return as_scipy_jacobian(_block_jacobian(j, inputs + 1, method))

        opts["jac"] = jac
    return si.solve_ivp(
        aug,
        t_span,
        z0,
        method=method,
        t_eval=t_eval,
        dense_output=dense_output,
        events=wrapped_events(events, n, rhs.args),
        **opts,
    )


def second_order_sensitivities(
    rhs: RightHandSide,
    t_span: tuple[float, float],
    y0: np.ndarray,
    seed_y0: bool,
    method: Any,
    t_out: np.ndarray,
    options: dict,
    user_jac: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(S, S2)`` at the output times: shapes ``(m, n, P)`` and ``(m, n, P, P)``."""
    n = rhs.n
    n0 = n if seed_y0 else 0
    npar = rhs.n_params
    inputs = n0 + npar
    # d(y, p)/dx for the parameters: constant rows of the identity.
    dp = np.zeros((npar, inputs))
    dp[:, n0:] = np.eye(npar)

    def aug(t: float, w: np.ndarray) -> np.ndarray:
        y = w[:n]
        s = w[n : n + n * inputs].reshape(n, inputs)
        s2 = w[n + n * inputs :].reshape(n, inputs, inputs)
        jy, jp = rhs.jacobians(t, y)
        ds = jy @ s
        if npar:
            ds[:, n0:] += jp
        shat = np.concatenate([s, dp], axis=0)  # (n + npar, inputs)
        ds2 = np.einsum("ab,bjk->ajk", jy, s2)
        unit = np.zeros(n)
        for a in range(n):
            unit[:] = 0.0
            unit[a] = 1.0
            ds2[a] += shat.T @ rhs.weighted_hessian(t, y, unit) @ shat
        return np.concatenate([rhs(t, y), ds.ravel(), ds2.ravel()])

    w0 = np.zeros(n * (1 + inputs + inputs * inputs))
    w0[:n] = y0
    if n0:
        w0[n : n + n * inputs].reshape(n, inputs)[:, :n] = np.eye(n)
    opts = dict(options)
    opts["atol"] = tiled_atol(opts.get("atol", 1e-6), n, 1 + inputs + inputs * inputs)
    plain_jac = user_jacobian(user_jac, rhs.args)
    if method in IMPLICIT:
        # The second-order block is J applied on the left of every (j, k) entry: with the
        # states laid out as (a, j, k) the Newton matrix is J (x) I, permuted.
        def jac(t: float, w: np.ndarray) -> Any:
            y = w[:n]
            j = plain_jac(t, y) if plain_jac is not None else rhs.jac_y(t, y)
            dense = j.toarray() if sp.issparse(j) else np.asarray(j)
            blocks = [dense, np.kron(dense, np.eye(inputs)), np.kron(dense, np.eye(inputs**2))]
            return _block_diag_dense(blocks)

        opts["jac"] = jac
    result = si.solve_ivp(aug, t_span, w0, method=method, t_eval=t_out, **opts)
    if not result.success:
        raise RuntimeError(
            "the second-order sensitivity solve failed, so the second derivative is not "
            f"available: {result.message}"
        )
    w = result.y.T
    s = w[:, n : n + n * inputs].reshape(-1, n, inputs)
    s2 = w[:, n + n * inputs :].reshape(-1, n, inputs, inputs)
    return s, s2


def _block_diag_dense(blocks: list[np.ndarray]) -> np.ndarray:
    size = sum(b.shape[0] for b in blocks)
    out = np.zeros((size, size))
    at = 0
    for b in blocks:
        k = b.shape[0]
        out[at : at + k, at : at + k] = b
        at += k
    return out
