"""The derivative under test: funcdiff's AD, or the user's own ``jac`` and ``hess``.

Every checker step asks the derivative under test two things: a whole block
(``block(q, j)``, the Jacobian of output ``q`` with respect to input ``j``, of shape
``out_shape + in_shape``) and a vector-Jacobian product (``vjp(q, j, cot)``, for fast
mode). :class:`ADJacobian` answers from a recorded graph; :class:`UserJacobian` and
:class:`UserHessian` from the arrays the user's functions return at the check point,
after checking their structure and shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from funcdiff._core.tensor import Tensor
from funcdiff._jacobian import jacobian_rows, vjp
from funcdiff.check._common import as_array
from funcdiff.check.targets import FirstOrderTarget, Problem, SecondOrderTarget, func_name

__all__ = ["ADJacobian", "Analytical", "UserGradientTarget", "UserHessian", "UserJacobian"]


class Analytical(Protocol):
    """The derivative under test, block by block."""

    def block(self, q: int, j: int) -> np.ndarray:
        """The block of output ``q`` with respect to input ``j``: ``out + in`` shaped."""
        ...

    def vjp(self, q: int, j: int, cot: np.ndarray) -> np.ndarray:
        """``cot^T J`` for that block (``cot`` has the output's shape)."""
        ...


class ADJacobian:
    """Blocks and vjps of funcdiff's AD, from one recorded graph (kept for every pass)."""

    def __init__(self, outs: list[Any], ins: list[Tensor]) -> None:
        self.outs = outs
        self.ins = ins
        self._rows: dict[int, list[np.ndarray]] = {}

    def block(self, q: int, j: int) -> np.ndarray:
        if q not in self._rows:
            self._rows[q] = jacobian_rows(self.outs[q], self.ins)
        return self._rows[q][j]

    def vjp(self, q: int, j: int, cot: np.ndarray) -> np.ndarray:
        (g,) = vjp([self.outs[q]], [self.ins[j]], [cot])
        return np.asarray(g, dtype=np.float64)


def _numeric(value: Any, arg: str, where: str) -> np.ndarray:
    try:
        arr = np.asarray(as_array(value))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{arg} returned {where} that is not an array ({exc})") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(
            f"{arg} returned {where} of dtype {arr.dtype} ({type(value).__name__}); "
            "expected real numbers"
        )
    return arr.astype(np.float64)


def _entries(value: Any, count: int, arg: str, what: str, single: bool) -> list[Any]:
    """``value`` as ``count`` entries, one per output or input.

    ``single``: ``func`` has one such output (or was given one input, not a tuple), and
    ``value`` is that entry itself. Otherwise a tuple or list of ``count`` entries, or,
    for a count of 1, one bare entry.
    """
    if single:
        return [value]
    if isinstance(value, (tuple, list)) and len(value) == count:
        return list(value)
    if count == 1 and not isinstance(value, tuple):
        return [value]
    got = (
        f"a {type(value).__name__} of {len(value)} entries"
        if isinstance(value, (tuple, list))
        else type(value).__name__
    )
    raise ValueError(f"{arg} returned {got}; expected a tuple with one entry per {what} ({count})")


def _shape_check(arr: np.ndarray, expected: tuple, arg: str, label: str, parts: str) -> None:
    if arr.shape != expected:
        raise ValueError(
            f"{arg} returned an array of shape {arr.shape} for {label}; expected {expected} "
            f"({parts})"
        )


class _UserBlocks:
    """Blocks the user's function returned at the check point, ``blocks[q][j]``.

    Both user derivatives (``jac`` and ``hess``) are answered from these arrays: a block
    as it is, a vjp as its contraction with the cotangent over the output axes. For
    ``hess`` of a scalar function, "output" ``q`` is the gradient with respect to input
    ``q``, so ``blocks[q][j]`` is ``H[q][j]``.
    """

    blocks: list[list[np.ndarray]]

    def block(self, q: int, j: int) -> np.ndarray:
        return self.blocks[q][j]

    def vjp(self, q: int, j: int, cot: np.ndarray) -> np.ndarray:
        b = self.blocks[q][j]
        c = np.asarray(cot, dtype=np.float64)
        return np.tensordot(c, b, axes=c.ndim) if c.ndim else c * b


class UserJacobian(_UserBlocks):
    """The user's ``jac(*args)`` at the check point, laid out like ``functional.jacobian``.

    One differentiated input and one output: an array of shape ``out + in`` (``in``
    alone for a scalar output: the gradient). Several differentiated inputs: a tuple
    over them. Several outputs (``func`` returns a tuple or list): a tuple over
    outputs, each entry an array or a tuple over inputs.
    """

    def __init__(self, jac: Callable[..., Any], problem: Problem, first: FirstOrderTarget) -> None:
        if not callable(jac):
            raise TypeError(f"jac must be callable, got {type(jac).__name__}")
        self.jac = jac
        self.name = func_name(jac)
        self.problem = problem
        self.first = first
        self.n_outputs = first.n_outputs
        self.blocks = self.evaluate(problem.x0, "at the check point")

    def evaluate(self, xs: Sequence[np.ndarray], where: str) -> list[list[np.ndarray]]:
        """``blocks[q][j]`` of the floating outputs at ``xs``, shapes checked."""
        problem, first = self.problem, self.first
        raw = self.jac(*problem.args([np.array(x, copy=True) for x in xs]))
        nd = len(problem.x0)
        per_out = _entries(raw, self.n_outputs, "jac", "output of func", not first.tuple_output)
        blocks = []
        for q, k in enumerate(first.positions):
            row = _entries(per_out[k], nd, "jac", "differentiated input", problem.single_input)
            out_shape = first.out_shapes[q]
            arrs = []
            for j, entry in enumerate(row):
                arr = _numeric(entry, "jac", f"for {first.pair_label(q, j)} {where}")
                in_shape = problem.x0[j].shape
                _shape_check(
                    arr,
                    out_shape + in_shape,
                    "jac",
                    f"{first.pair_label(q, j)} {where}",
                    f"output shape {out_shape} + input shape {in_shape}",
                )
                arrs.append(arr)
            blocks.append(arrs)
        return blocks


class UserGradientTarget(SecondOrderTarget):
    """The gradient of a scalar ``func`` by the user's ``jac``: its Jacobian is the Hessian."""

    def __init__(self, problem: Problem, first: FirstOrderTarget, jac: UserJacobian) -> None:
        super().__init__(problem, first, [None])
        self.user_jac = jac

    def fd_eval(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.nfev += 1
        return self.user_jac.evaluate(xs, "at a perturbed point")[0]


class UserHessian(_UserBlocks):
    """The user's ``hess(*args)`` of a scalar ``func``: ``H[a][b]`` of shape ``s_a + s_b``.

    One differentiated input: one array of shape ``s + s``; several: a tuple of tuples,
    as ``funcdiff.functional.hessian`` returns.
    """

    def __init__(self, hess: Callable[..., Any], problem: Problem) -> None:
        if not callable(hess):
            raise TypeError(f"hess must be callable, got {type(hess).__name__}")
        self.name = func_name(hess)
        nd = len(problem.x0)
        raw = hess(*problem.args([np.array(x, copy=True) for x in problem.x0]))
        rows = _entries(raw, nd, "hess", "differentiated input", problem.single_input)
        self.blocks: list[list[np.ndarray]] = []
        for a, row in enumerate(rows):
            entries = _entries(row, nd, "hess", "differentiated input", problem.single_input)
            arrs = []
            for b, entry in enumerate(entries):
                na, nb = problem.names[a], problem.names[b]
                label = f"d2f/d{na} d{nb}"
                arr = _numeric(entry, "hess", f"for {label}")
                sa, sb = problem.x0[a].shape, problem.x0[b].shape
                _shape_check(
                    arr, sa + sb, "hess", label, f"shape of {na} {sa} + shape of {nb} {sb}"
                )
                arrs.append(arr)
            self.blocks.append(arrs)

    def asymmetry(self) -> tuple[float, float]:
        """``max|H[a][b] - H[b][a]^T|`` over all blocks, and the largest entry."""
        worst, big = 0.0, 0.0
        dims = [self.blocks[a][a].ndim // 2 for a in range(len(self.blocks))]
        for a, row in enumerate(self.blocks):
            for b, h in enumerate(row):
                other = self.blocks[b][a]  # shape s_b + s_a
                perm = tuple(range(dims[b], dims[b] + dims[a])) + tuple(range(dims[b]))
                ht = np.transpose(other, perm) if other.ndim else other
                worst = max(worst, float(np.max(np.abs(h - ht), initial=0.0)))
                big = max(big, float(np.max(np.abs(h), initial=0.0)))
        return worst, big
