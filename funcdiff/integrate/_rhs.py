"""The user's right-hand side and its derivatives, as plain-array callables.

``fun(t, y, *args)`` is plain NumPy code. Its derivatives in ``y`` and in the
differentiable entries of ``args`` (the "parameters") come from :mod:`funcdiff.replay`
programs recorded once and replayed at every call, or, for large systems with a sparse
Jacobian, from :func:`funcdiff.sparse.prepare_jacobian`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from funcdiff import replay
from funcdiff._core.tensor import Tensor
from funcdiff.sparse import prepare_jacobian

__all__ = ["RightHandSide", "SPARSE_FROM"]

#: Systems with at least this many states get a sparse Jacobian when its pattern is sparse.
SPARSE_FROM = 64


def _time(t: Any) -> np.ndarray:
    # A 0-d array, not a Python float: replay keys Python numbers by value, so a float
    # time would record a new program at every call.
    return np.asarray(t, dtype=float)


class RightHandSide:
    """``fun`` with its parameters split out: ``g(t, y, *params)``.

    Parameters
    ----------
    fun : callable
        The user's ``fun(t, y, *args)``.
    args : sequence
        The plain arguments (Tensors replaced by their arrays).
    param_positions : sequence of int
        The positions in ``args`` of the differentiated parameters.
    n : int
        The number of states.
    """

    def __init__(
        self,
        fun: Callable[..., Any],
        args: Sequence[Any],
        param_positions: Sequence[int],
        n: int,
    ) -> None:
        self.fun = fun
        self.args = list(args)
        self.param_positions = tuple(param_positions)
        self.params = [np.asarray(self.args[i], dtype=float) for i in self.param_positions]
        self.param_shapes = [p.shape for p in self.params]
        self.param_sizes = [int(p.size) for p in self.params]
        self.n_params = sum(self.param_sizes)
        self.n = n
        np_ = len(self.params)
        self._jac_all = replay.jacobian(self.g, argnums=tuple(range(1, 2 + np_)))
        self._jac_y = replay.jacobian(self.g, argnums=1)
        self._vjp_all = replay.vjp(self.g, argnums=tuple(range(1, 2 + np_)))
        self._jvp_all = replay.jvp(self._g_flat, argnums=1)
        self._hessian = replay.hessian(self._weighted, argnums=1)
        self._sparse: Any = None
        self._sparse_tried = False
        self._holder: list[Any] = [0.0, self.params]

    # -- the function ------------------------------------------------------------
    def g(self, t: Any, y: Any, *params: Any) -> Any:
        full = list(self.args)
        for i, p in zip(self.param_positions, params):
            full[i] = p
        return self.fun(t, y, *full)

    def _g_flat(self, t: Any, z: Any) -> Any:
        """``g`` of ``z = (y, params flattened)``: one input for jvps along ``(dy, dp)``."""
        y = z[: self.n]
        params, offset = [], self.n
        for shape, size in zip(self.param_shapes, self.param_sizes):
            params.append(np.reshape(z[offset : offset + size], shape))
            offset += size
        return self.g(t, y, *params)

    def _weighted(self, t: Any, z: Any, w: Any) -> Any:
        return np.sum(w * self._g_flat(t, z))

    def __call__(self, t: float, y: np.ndarray) -> np.ndarray:
        return np.asarray(self.fun(t, y, *self.args), dtype=float)

    def flat_params(self) -> np.ndarray:
        if not self.params:
            return np.zeros(0)
        return np.concatenate([p.ravel() for p in self.params])

    # -- first derivatives ---------------------------------------------------------
    def jacobians(self, t: float, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(df/dy, df/dp)`` as dense arrays of shapes ``(n, n)`` and ``(n, P)``."""
        blocks = self._jac_all(_time(t), y, *self.params)
        jy = np.reshape(blocks[0], (self.n, self.n))
        if not self.params:
            return jy, np.zeros((self.n, 0))
        jp = np.concatenate([np.reshape(b, (self.n, -1)) for b in blocks[1:]], axis=1)
        return jy, jp

    def jac_y(self, t: float, y: np.ndarray) -> Any:
        """``df/dy``: a dense array, or a ``csr_array`` for large sparse systems."""
        sparse = self.sparse_jacobian(y)
        if sparse is not None:
            self._holder[0] = _time(t)
            return sparse(y)
        return np.reshape(self._jac_y(_time(t), y, *self.params), (self.n, self.n))

    def sparse_jacobian(self, y: np.ndarray) -> Any:
        """A prepared sparse ``df/dy`` for large systems whose pattern is sparse, else None."""
        if self._sparse_tried:
            return self._sparse
        self._sparse_tried = True
        if self.n < SPARSE_FROM:
            return None
        holder = self._holder
        holder[0] = _time(0.0)

        # The time and the parameters reach f through a holder, not through args: the
        # prepared Jacobian detects its pattern again whenever its args change.
        def of_y(yy: Any) -> Any:
            return self.g(holder[0], yy, *holder[1])

        prepared = prepare_jacobian(of_y, y)
        if prepared.sparsity.nnz > 0.25 * self.n * self.n:
            return None
        self._sparse = prepared
        return prepared

    def vjp(self, t: float, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(w^T df/dy, w^T df/dp)`` with the parameter part flattened."""
        _, grads = self._vjp_all(_time(t), y, *self.params, w)
        gy = np.reshape(grads[0], (self.n,))
        if not self.params:
            return gy, np.zeros(0)
        return gy, np.concatenate([np.reshape(g, -1) for g in grads[1:]])

    def jvp(self, t: float, y: np.ndarray, dz: np.ndarray) -> np.ndarray:
        """``df/dy dy + df/dp dp`` for ``dz = (dy, dp flattened)``."""
        z = np.concatenate([y, self.flat_params()])
        _, out = self._jvp_all(_time(t), z, dz)
        return np.reshape(out, (self.n,))

    # -- second derivatives ------------------------------------------------------------
    def weighted_hessian(self, t: float, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The Hessian of ``w . f`` in ``z = (y, params flattened)``."""
        z = np.concatenate([y, self.flat_params()])
        h = self._hessian(_time(t), z, np.asarray(w, dtype=float))
        return np.reshape(h, (z.size, z.size))


def as_scipy_jacobian(matrix: Any) -> Any:
    """A Jacobian in the form SciPy's implicit methods take (csc for sparse LU)."""
    return sp.csc_matrix(matrix) if sp.issparse(matrix) else matrix


def contains_tensor(value: Any) -> bool:
    """Whether a Tensor hides anywhere in ``value`` (lists, tuples, dicts)."""
    if isinstance(value, Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(contains_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(contains_tensor(v) for v in value.values())
    return False
