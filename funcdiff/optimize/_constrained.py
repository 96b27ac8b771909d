"""The derivative of a constrained minimum: the KKT conditions at the returned point.

At a minimum ``x*`` of ``f(x, p)`` subject to equality constraints and inequality
constraints ``c(x, p) >= 0`` (SciPy's convention), with the constraints that hold with
equality (the *active* set) linearly independent and strictly complementary, the pair
``z* = (x*, lambda*)`` is a stationary point of the Lagrangian

    L(x, lambda, p) = f(x, p) + sum_k lambda_k c_k(x, p)      (active k only)

and ``grad_z L = 0`` defines ``z*(p)`` implicitly: its derivative comes from the KKT
matrix ``[[H_L, J^T], [J, 0]]``, the Hessian of ``L`` in ``z`` (symmetric, indefinite).
The multipliers are recovered from the stationarity condition ``grad f + J^T lambda = 0``
by least squares on the candidate set (equalities, and inequalities within tolerance of
their bound), which also tells which candidates are active: an inequality whose
multiplier vanishes is inactive (dropped) unless it sits exactly on its bound
(degenerate: refused), and a multiplier of the wrong sign means the point is not a
minimum. Bounds are inequality constraints like the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor
from funcdiff.optimize._derivatives import Derivatives
from funcdiff.optimize._implicit import Arguments

__all__ = ["Constraints"]

#: An inequality within this distance of its bound (scaled) is a candidate for the
#: active set: interior-point methods (trust-constr) stop just inside.
_NEAR = 1e-4
#: An inequality this close to its bound is on it (SLSQP and COBYLA land on it).
_ON = 1e-10
#: Multipliers below this (relative to the gradient of f) count as zero.
_ZERO = 1e-7
#: The stationarity residual allowed at the returned point (relative).
_STATIONARY = 1e-4


@dataclass
class _Piece:
    """Constraints ``sign * g(x, *args)[rows] - target`` (``== 0`` or ``>= 0``)."""

    fun: Callable[..., Any]
    args: tuple
    rows: np.ndarray
    sign: float
    target: np.ndarray
    equality: bool
    name: str

    def values(self, x: Any, args: Sequence[Any]) -> Any:
        g = self.fun(x, *args)
        g = g.reshape(-1) if isinstance(g, Tensor) else np.reshape(np.asarray(g, float), -1)
        return self.sign * g[self.rows] - self.target


def _as_tuple(args: Any) -> tuple:
    if isinstance(args, tuple):
        return args
    return tuple(args) if isinstance(args, list) else (args,)


def _lower_upper(
    fun: Callable[..., Any], lb: Any, ub: Any, m: int, name: str
) -> list[tuple[Callable[..., Any], np.ndarray, float, np.ndarray, bool, str]]:
    """``lb <= fun(x) <= ub`` as equality, lower and upper pieces (finite sides only)."""
    for side, v in (("lb", lb), ("ub", ub)):
        if isinstance(v, Tensor) and v.requires_grad:
            raise NotImplementedError(
                f"{name}.{side} requires grad: the solution is differentiated with respect "
                "to args (and constraint dicts' args); detach it, or write the constraint "
                "as a dict whose args hold the Tensor"
            )
    lo = np.broadcast_to(np.asarray(getattr(lb, "data", lb), dtype=np.float64), (m,))
    hi = np.broadcast_to(np.asarray(getattr(ub, "data", ub), dtype=np.float64), (m,))
    eq = np.flatnonzero(lo == hi)
    low = np.flatnonzero(np.isfinite(lo) & (lo != hi))
    up = np.flatnonzero(np.isfinite(hi) & (lo != hi))
    pieces = []
    if eq.size:
        pieces.append((fun, eq, 1.0, lo[eq], True, name))
    if low.size:
        pieces.append((fun, low, 1.0, lo[low], False, f"{name} (lower side)"))
    if up.size:
        pieces.append((fun, up, -1.0, -hi[up], False, f"{name} (upper side)"))
    return pieces


class Constraints:
    """``minimize``'s ``constraints`` (and ``bounds``), for SciPy and for the KKT system.

    Parameters
    ----------
    constraints : dict, NonlinearConstraint, LinearConstraint, or a sequence of them
        As ``scipy.optimize.minimize`` takes them. Tensors that require grad in a
        dict's ``args`` are parameters, like those of ``minimize``'s ``args``.
    """

    def __init__(self, constraints: Any) -> None:
        import scipy.optimize

        items = [constraints] if not isinstance(constraints, (list, tuple)) else constraints
        self.items = list(items)
        self.has_tensor = False
        self.for_scipy: list[Any] = []
        for i, c in enumerate(self.items):
            if isinstance(c, dict):
                args = _as_tuple(c.get("args", ()))
                Arguments(args, name=f"constraints[{i}]['args']")  # refuses nested Tensors
                if c.get("type") not in ("eq", "ineq"):
                    raise ValueError(
                        f"constraints[{i}]['type'] must be 'eq' or 'ineq', got {c.get('type')!r}"
                    )
                if any(isinstance(a, Tensor) for a in args):
                    self.has_tensor = True
            elif not isinstance(
                c, (scipy.optimize.NonlinearConstraint, scipy.optimize.LinearConstraint)
            ):
                raise TypeError(
                    f"constraints[{i}] is a {type(c).__name__}: expected a dict, a "
                    "NonlinearConstraint or a LinearConstraint"
                )
        self.for_scipy = [self._plain(i, c) for i, c in enumerate(self.items)]
        #: Every dict's args, one after the other.
        self.dict_args = tuple(
            a for c in self.items if isinstance(c, dict) for a in _as_tuple(c.get("args", ()))
        )

    def _plain(self, i: int, c: Any) -> Any:
        """The constraint SciPy gets: a dict's Tensor args as values, and (with Tensors
        anywhere) its exact Jacobian."""
        if not isinstance(c, dict) or not self.has_tensor:
            return c
        args = Arguments(_as_tuple(c.get("args", ()))).plain
        out = {**c, "args": args}
        if c.get("jac") is None:
            out["jac"] = Derivatives(c["fun"], args).jac
        return out

    # ------------------------------------------------------------------ the pieces
    def _pieces(self, x: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None) -> list:
        import scipy.optimize

        pieces: list[_Piece] = []
        for i, c in enumerate(self.items):
            name = f"constraints[{i}]"
            if isinstance(c, dict):
                fun, args = c["fun"], _as_tuple(c.get("args", ()))
                m = np.size(np.asarray(fun(x, *Arguments(args).plain), dtype=np.float64))
                pieces.append(
                    _Piece(fun, args, np.arange(m), 1.0, np.zeros(m), c["type"] == "eq", name)
                )
                continue
            if isinstance(c, scipy.optimize.LinearConstraint):
                A = c.A

                def fun(v: Any, A: Any = A) -> Any:
                    return A @ v

                m = int(np.shape(A)[0]) if np.ndim(A) == 2 else 1
            else:
                fun = c.fun
                m = np.size(np.asarray(fun(x), dtype=np.float64))
            for f, rows, sign, target, eq, label in _lower_upper(fun, c.lb, c.ub, m, name):
                pieces.append(_Piece(f, (), rows, sign, target, eq, label))
        if bounds is not None:
            lb, ub = bounds
            for f, rows, sign, target, eq, label in _lower_upper(
                lambda v: v, lb, ub, x.size, "bounds"
            ):
                pieces.append(_Piece(f, (), rows, sign, target, eq, label))
        return pieces

    # ------------------------------------------------------------------ the KKT point
    def lagrangian(
        self,
        fun: Callable[..., Any],
        x_star: np.ndarray,
        fun_args: Arguments,
        bounds: tuple[np.ndarray, np.ndarray] | None,
        strict: bool,
    ) -> tuple[np.ndarray, Callable[..., Any], Arguments, int]:
        """``(z*, L, arguments, k)``: the KKT point ``(x*, lambda*)``, the Lagrangian
        ``L(z, *args)`` over the active constraints, the Arguments of ``L`` (``fun``'s
        args then each active piece's own) and the number ``k`` of ``fun``'s args."""
        shape = np.shape(x_star)
        x = np.asarray(x_star, dtype=np.float64).reshape(-1)
        n = x.size
        grad_f = np.asarray(Derivatives(fun, fun_args.plain).jac(x_star), float).reshape(-1)
        scale = max(1.0, float(np.abs(grad_f).max(initial=0.0)))
        rows_c, rows_J, owner = [], [], []
        pieces = self._pieces(x_star, bounds)
        for j, piece in enumerate(pieces):
            plain = Arguments(piece.args).plain
            c = np.asarray(piece.values(x_star, plain), dtype=np.float64)
            J = Derivatives(lambda v, *a, p=piece: p.values(v, a), plain).jac(x_star)
            J = np.asarray(J, dtype=np.float64).reshape(c.size, n)
            for k in range(c.size):
                size = 1.0 + float(np.abs(J[k]).max(initial=0.0)) * (1.0 + np.abs(x).max())
                if piece.equality or c[k] <= _NEAR * size:
                    rows_c.append((c[k], size, piece.equality))
                    rows_J.append(J[k])
                    owner.append((j, k))
        keep = list(range(len(rows_c)))
        while True:
            Jc = np.array([rows_J[i] for i in keep]).reshape(len(keep), n)
            lam = np.linalg.lstsq(Jc.T, -grad_f, rcond=None)[0] if keep else np.zeros(0)
            residual = grad_f + Jc.T @ lam
            drop = []
            for pos, i in enumerate(keep):
                c, size, equality = rows_c[i]
                if equality:
                    continue
                mu = -lam[pos]  # >= 0 at a minimum of f subject to c >= 0
                zero = abs(mu) <= _ZERO * scale / max(1.0, float(np.abs(rows_J[i]).max()))
                on = c <= _ON * size
                label = pieces[owner[i][0]].name
                if zero and on:
                    raise ValueError(
                        f"{label} (component {owner[i][1]}) holds with equality at the "
                        "solution but its multiplier is zero: the solution is not "
                        "differentiable with respect to args at such a degenerate point "
                        "(the constraint is active on one side of it and inactive on the "
                        "other)"
                    )
                if zero:
                    drop.append(i)  # near its bound but not holding: inactive
                elif mu < 0 and strict:
                    raise RuntimeError(
                        f"{label} (component {owner[i][1]}) has a multiplier of the wrong "
                        f"sign ({-mu:.3g}): the returned point is not a constrained "
                        "minimum, so the implicit derivative there would be wrong; tighten "
                        "the solver's tolerances"
                    )
            if not drop:
                break
            keep = [i for i in keep if i not in drop]
        if strict and np.abs(residual).max(initial=0.0) > _STATIONARY * scale:
            raise RuntimeError(
                "the gradient of fun is not a combination of the active constraints' "
                f"gradients at the returned point (stationarity residual "
                f"{np.abs(residual).max():.3g}): it is not a KKT point, so the implicit "
                "derivative there would be wrong; tighten the solver's tolerances"
            )
        # The Lagrangian over the active rows, piece by piece.
        active: dict[int, list[int]] = {}
        for i in keep:
            active.setdefault(owner[i][0], []).append(owner[i][1])
        used = [(pieces[j], np.array(ks)) for j, ks in sorted(active.items())]
        k0 = len(fun_args.args)
        all_args = list(fun_args.args)
        spans = []
        for piece, _ in used:
            spans.append((len(all_args), len(all_args) + len(piece.args)))
            all_args.extend(piece.args)
        # keep (hence lam) runs over the pieces in order, each over its rows: as z's tail.

        def lagrangian(z: Any, *args: Any) -> Any:
            xs = z[:n].reshape(shape)
            value = fun(xs, *args[:k0])
            offset = n
            for (piece, ks), (start, stop) in zip(used, spans, strict=True):
                c = piece.values(xs, args[start:stop])[ks]
                value = value + (z[offset : offset + ks.size] * c).sum()
                offset += ks.size
            return value

        z_star = np.concatenate([x, lam])
        return z_star, lagrangian, Arguments(tuple(all_args)), k0
