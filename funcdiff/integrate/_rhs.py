"""The user's right-hand side and its derivatives, as plain-array callables.

``fun(t, y, *args)`` is plain NumPy code. Its derivatives in ``y`` and in the
differentiable entries of ``args`` (the "parameters") come from :mod:`funcdiff.replay`
programs recorded once and replayed at every call, or, for large systems with a sparse
Jacobian, from :func:`funcdiff.sparse.prepare_jacobian`.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
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
        self.programs = _programs(self)

    def g(self, t: Any, y: Any, *params: Any) -> Any:
        return self.programs.g(t, y, *params)

    def __call__(self, t: float, y: np.ndarray) -> np.ndarray:
        return np.asarray(self.fun(t, y, *self.args), dtype=float)

    def flat_params(self) -> np.ndarray:
        if not self.params:
            return np.zeros(0)
        return np.concatenate([p.ravel() for p in self.params])

    # -- first derivatives ---------------------------------------------------------
    def jacobians(self, t: float, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(df/dy, df/dp)`` as dense arrays of shapes ``(n, n)`` and ``(n, P)``."""
        blocks = self.programs.jac_all(_time(t), y, *self.params)
        jy = np.reshape(blocks[0], (self.n, self.n))
        if not self.params:
            return jy, np.zeros((self.n, 0))
        jp = np.concatenate([np.reshape(b, (self.n, -1)) for b in blocks[1:]], axis=1)
        return jy, jp

    def jac_y(self, t: float, y: np.ndarray) -> Any:
        """``df/dy``: a dense array, or a ``csr_array`` for large sparse systems."""
        sparse = self.sparse_jacobian(y)
        if sparse is not None:
            self.programs.holder[:] = [_time(t), self.params]
            return sparse(y)
        return np.reshape(self.programs.jac_y(_time(t), y, *self.params), (self.n, self.n))

    def sparse_jacobian(self, y: np.ndarray) -> Any:
        """A prepared sparse ``df/dy`` for large systems whose pattern is sparse, else None."""
        return self.programs.sparse_jacobian(y, self.params)

    def vjp(self, t: float, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(w^T df/dy, w^T df/dp)`` with the parameter part flattened."""
        _, grads = self.programs.vjp_all(_time(t), y, *self.params, w)
        gy = np.reshape(grads[0], (self.n,))
        if not self.params:
            return gy, np.zeros(0)
        return gy, np.concatenate([np.reshape(g, -1) for g in grads[1:]])

    # -- second derivatives ------------------------------------------------------------
    def weighted_hessian(self, t: float, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The Hessian of ``w . f`` in ``z = (y, params flattened)``."""
        z = np.concatenate([y, self.flat_params()])
        h = self.programs.hessian(_time(t), z, np.asarray(w, dtype=float))
        return np.reshape(h, (z.size, z.size))


class _Programs:
    """The replayed derivative programs of one ``fun`` with one set of fixed arguments,
    shared by every solve that calls it so (the parameters are program inputs)."""

    def __init__(self, rhs: RightHandSide) -> None:
        # A weak reference: the cache is keyed weakly by the function, and a value that
        # held it strongly would keep every function ever solved alive.
        self.fun_ref = _reference(rhs.fun)
        self.args = list(rhs.args)
        self.param_positions = rhs.param_positions
        self.param_shapes = list(rhs.param_shapes)
        self.param_sizes = list(rhs.param_sizes)
        self.n = rhs.n
        count = len(rhs.params)
        self.jac_all = replay.jacobian(self.g, argnums=tuple(range(1, 2 + count)))
        self.jac_y = replay.jacobian(self.g, argnums=1)
        self.vjp_all = replay.vjp(self.g, argnums=tuple(range(1, 2 + count)))
        self.hessian = replay.hessian(self.weighted, argnums=1)
        self.sparse: Any = None
        self.sparse_tried = False
        # The time and the parameters of the current evaluation of the sparse Jacobian.
        self.holder: list[Any] = [_time(0.0), []]

    def g(self, t: Any, y: Any, *params: Any) -> Any:
        full = list(self.args)
        for i, p in zip(self.param_positions, params):
            full[i] = p
        fun = self.fun_ref()
        if fun is None:  # unreachable while a RightHandSide using these programs lives
            raise RuntimeError("the right-hand side of this solve no longer exists")
        return fun(t, y, *full)

    def g_flat(self, t: Any, z: Any) -> Any:
        """``g`` of ``z = (y, params flattened)``: one input for second derivatives."""
        y = z[: self.n]
        params, offset = [], self.n
        for shape, size in zip(self.param_shapes, self.param_sizes):
            params.append(np.reshape(z[offset : offset + size], shape))
            offset += size
        return self.g(t, y, *params)

    def weighted(self, t: Any, z: Any, w: Any) -> Any:
        return np.sum(w * self.g_flat(t, z))

    def sparse_jacobian(self, y: np.ndarray, params: list) -> Any:
        if self.sparse_tried:
            return self.sparse
        self.sparse_tried = True
        if self.n < SPARSE_FROM:
            return None
        holder = self.holder
        holder[:] = [_time(0.0), params]

        # The time and the parameters reach f through a holder, not through args: the
        # prepared Jacobian detects its pattern again whenever its args change.
        def of_y(yy: Any) -> Any:
            return self.g(holder[0], yy, *holder[1])

        prepared = prepare_jacobian(of_y, y)
        if prepared.sparsity.nnz > 0.25 * self.n * self.n:
            return None
        self.sparse = prepared
        return prepared


def _reference(fun: Callable[..., Any]) -> Callable[[], Any]:
    try:
        return weakref.ref(fun)
    except TypeError:  # a callable without weak references: held strongly, never cached
        return lambda: fun


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PER_FUNCTION = 8


def _arg_key(value: Any, is_param: bool) -> Any:
    if is_param:
        arr = np.asarray(value)
        return ("p", arr.shape, arr.dtype.str)
    if isinstance(value, np.ndarray):
        return ("a", value.shape, value.dtype.str, value.tobytes())
    if isinstance(value, (bool, int, float, complex, str, type(None))):
        return ("s", type(value).__name__, value)
    return ("o", id(value))


def _programs(rhs: RightHandSide) -> _Programs:
    """The shared programs for ``rhs``: one set per function and fixed arguments."""
    key = (
        rhs.n,
        rhs.param_positions,
        tuple(_arg_key(a, i in rhs.param_positions) for i, a in enumerate(rhs.args)),
    )
    try:
        table = _CACHE.setdefault(rhs.fun, OrderedDict())
    except TypeError:  # a callable that takes no weak reference: nothing is shared
        return _Programs(rhs)
    found = table.get(key)
    if found is None or any(entry[0] is not entry[1] for entry in _objects(found, rhs)):
        found = table[key] = _Programs(rhs)
        if len(table) > _PER_FUNCTION:
            table.popitem(last=False)
    table.move_to_end(key)
    return found


def _objects(programs: _Programs, rhs: RightHandSide) -> list[tuple[Any, Any]]:
    """Pairs of fixed arguments keyed by identity, which must be the same objects."""
    return [
        (a, b)
        for i, (a, b) in enumerate(zip(programs.args, rhs.args))
        if i not in rhs.param_positions and _arg_key(a, False)[0] == "o"
    ]


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
