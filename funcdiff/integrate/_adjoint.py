"""The adjoint (reverse-mode) solve for a vjp through ``solve_ivp``.

For ``L = sum_i G_i . y(t_i)``: start at the last output time with ``lambda = G_last``
and go back in time, solving

    lambda' = -J^T lambda,      q' = -F_p^T lambda,

between output times, adding ``G_i`` to ``lambda`` at each of them. Then
``dL/dy0 = lambda(t0)`` and ``dL/dp = q(t0)``. The state ``y(t)`` comes from the forward
solve's dense output: the state is never integrated backward (that is unstable on stiff
problems, whose attracting fast modes become repelling ones backward in time).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.integrate as si
import scipy.sparse as sp

from funcdiff.integrate._forward import IMPLICIT, tiled_atol, user_jacobian
from funcdiff.integrate._rhs import SPARSE_FROM, RightHandSide, as_scipy_jacobian

__all__ = ["adjoint_vjp"]


def adjoint_vjp(
    rhs: RightHandSide,
    sol: Any,
    t0: float,
    t_out: np.ndarray,
    cotangent: np.ndarray,
    method: Any,
    options: dict,
    user_jac: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(dL/dy0, dL/dp)`` for ``L = sum_i cotangent[:, i] . y(t_out[i])``.

    ``sol`` is the forward solve's dense output; ``t_out`` runs in the direction of
    integration from ``t0``.
    """
    n = rhs.n
    npar = rhs.n_params
    lam = np.zeros(n)
    q = np.zeros(npar)
    plain_jac = user_jacobian(user_jac, rhs.args)

    dense = n < SPARSE_FROM
    cache: dict[float, Any] = {}

    def at(t: float) -> Any:
        # Newton iterations of the implicit methods call f again at the same time: the
        # state (from the dense output) and, for small systems, the Jacobians are kept.
        found = cache.get(t)
        if found is None:
            y = sol(t)
            found = (y, *rhs.jacobians(t, y)) if dense else (y,)
            cache.clear()
            cache[t] = found
        return found

    def backward_rhs(t: float, w: np.ndarray) -> np.ndarray:
        found = at(t)
        lam = w[:n]
        if dense:
            return -np.concatenate([lam @ found[1], lam @ found[2]])
        gy, gp = rhs.vjp(t, found[0], lam)
        return -np.concatenate([gy, gp])

    # Each segment starts after a jump: SciPy picks its first step afresh.
    opts = {k: v for k, v in options.items() if k not in ("first_step",)}
    opts["atol"] = tiled_atol(opts.get("atol", 1e-6), n, 1) if npar == 0 else _atol(opts, n, npar)
    if method in IMPLICIT and n + npar < SPARSE_FROM:
        # Every restart begins again at order one with short steps (hundreds per
        # segment at tight tolerances), and SciPy's BDF and Radau spend more time in their
        # Python step loop than in the right-hand side of a small system. LSODA (ODEPACK's
        # compiled BDF, switching to Adams where the adjoint is not stiff) takes the same
        # steps to the same tolerances at a fraction of that cost; its Jacobian is dense,
        # which is what small systems have.
        method = "LSODA"
        opts = {k: v for k, v in opts.items() if k in _LSODA_OPTIONS}
    if method in IMPLICIT:

        def jac(t: float, w: np.ndarray) -> Any:
            found = at(t)
            if plain_jac is not None:
                j = plain_jac(t, found[0])
            elif dense:
                j = found[1]
            else:
                j = rhs.jac_y(t, found[0])
            # The quadratures do not feed back into lambda: for large systems their rows
            # of the Newton matrix are left out (they converge one iteration after lambda).
            if sp.issparse(j) and method != "LSODA":
                block = sp.block_diag([-j.T, sp.csr_array((npar, npar))], format="csc")
                return as_scipy_jacobian(block)
            out = np.zeros((n + npar, n + npar))
            out[:n, :n] = -(j.toarray() if sp.issparse(j) else np.asarray(j)).T
            if dense and plain_jac is None:
                out[n:, :n] = -found[2].T
            return out

        opts["jac"] = jac

    # Restart only where the cotangent jumps: a zero column is no restart.
    live = [i for i in range(len(t_out)) if np.any(cotangent[:, i] != 0)]
    for k in range(len(live) - 1, -1, -1):
        i = live[k]
        lam = lam + cotangent[:, i]
        target = t_out[live[k - 1]] if k > 0 else t0
        here = t_out[i]
        if target != here:
            lam, q = _segment(backward_rhs, here, target, lam, q, method, opts, n)
    return lam, q


#: The options of the user's solve that LSODA takes (the Jacobian is the adjoint's own).
_LSODA_OPTIONS = ("rtol", "atol", "max_step", "min_step")


def _atol(options: dict, n: int, npar: int) -> Any:
    a = np.asarray(options.get("atol", 1e-6), dtype=float)
    if a.ndim == 0:
        return float(a)
    return np.concatenate([np.broadcast_to(a, (n,)), np.full(npar, float(np.min(a)))])


def _segment(
    backward_rhs: Any,
    start: float,
    stop: float,
    lam: np.ndarray,
    q: np.ndarray,
    method: Any,
    opts: dict,
    n: int,
) -> tuple[np.ndarray, np.ndarray]:
    length = abs(stop - start)
    sign = 1.0 if stop > start else -1.0
    # The segment runs in the local time s = |t - start| from 0: a solve starting at a
    # large t (1e5, say) would otherwise be limited to steps above the spacing of the
    # floating-point numbers there, too coarse for the layer that follows a jump.
    jac = opts.get("jac")
    if jac is not None:
        opts = {**opts, "jac": lambda s, w: sign * jac(start + sign * s, w)}

    def local(s: float, w: np.ndarray) -> np.ndarray:
        return sign * backward_rhs(start + sign * s, w)

    result = si.solve_ivp(local, (0.0, length), np.concatenate([lam, q]), method=method, **opts)
    if not result.success:
        raise RuntimeError(
            f"the adjoint solve from t={start} to t={stop} failed, so the derivative is not "
            f"available: {result.message}"
        )
    w = result.y[:, -1]
    return w[:n], w[n:]
