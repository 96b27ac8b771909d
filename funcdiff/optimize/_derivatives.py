"""Exact ``fun``, ``jac``, ``hess`` and ``hessp`` for SciPy, and matrix-free operators."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from funcdiff import replay as _replay
from funcdiff._core.tensor import Tensor, tensor
from funcdiff._jacobian import basis_rows, jacobian_rows, jvp, vjp
from funcdiff.autograd import enable_grad
from funcdiff.autograd.engine import grad
from funcdiff.sparse import prepare_jacobian

__all__ = [
    "Derivatives",
    "derivatives",
    "jacobian_operator",
    "hessian_operator",
]

_DERIVATIVE_FREE = {"nelder-mead", "powell", "cobyla", "cobyqa"}
_HESSP_METHODS = {"newton-cg", "trust-ncg", "trust-krylov", "trust-constr"}
_HESS_METHODS = {"dogleg", "trust-exact"}
_ROOT_JAC_METHODS = {"hybr", "lm"}
_SPARSE_HESSIAN_METHODS = {"trust-constr", "newton-cg"}


def _as_x(x: Any, name: str = "x") -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.data
    if np.iscomplexobj(x):
        raise TypeError(
            f"{name} must be real: scipy.optimize works on real vectors; optimise over the "
            "real and imaginary parts (np.concatenate([z.real, z.imag]))"
        )
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers: {exc}") from None
    return arr


class _Point:
    """Everything recorded at one x: the forward graph and what was derived from it."""

    __slots__ = ("x", "xt", "out", "value", "grad", "ggraph", "jac")

    def __init__(self, x: np.ndarray, xt: Tensor, out: Any, value: Any) -> None:
        self.x = x
        self.xt = xt
        self.out = out
        self.value = value
        self.grad: np.ndarray | None = None
        self.ggraph: Tensor | None = None
        self.jac: np.ndarray | None = None


class Derivatives:
    """Exact ``fun``, ``jac``, ``hess`` and ``hessp`` callables for SciPy, with caching.

    Parameters
    ----------
    fun : callable
        ``fun(x, *args, **kwargs)`` written with NumPy calls. Scalar-valued for
        ``minimize`` (then ``jac`` is the gradient, ``hess`` the Hessian); vector-valued
        for ``least_squares`` and ``root`` (then ``jac`` is the (m, n) Jacobian).
    args : tuple
        Extra positional arguments for ``fun``, used when the callables are called with
        none (SciPy passes its own ``args`` through instead).

    Attributes
    ----------
    n_forward : int
        Forward passes recorded so far (one per distinct ``x``).

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff import optimize
    >>> d = optimize.derivatives(lambda x: np.sum(x ** 4))
    >>> d.fun(np.array([1.0, 2.0])), d.jac(np.array([1.0, 2.0]))
    (17.0, array([ 4., 32.]))
    >>> d.hessp(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    array([12.,  0.])
    >>> d.n_forward
    1
    """

    def __init__(
        self, fun: Callable[..., Any], args: Sequence[Any] = (), cache_size: int = 2
    ) -> None:
        if not callable(fun):
            raise TypeError(f"fun must be callable, got {type(fun).__name__}")
        self._fun = fun
        self._args = tuple(args)
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = max(1, int(cache_size))
        self.n_forward = 0

    def __getstate__(self) -> dict[str, Any]:
        """``fun``, ``args`` and the cache size: the cached points hold recorded graphs,
        which do not pickle; a loaded copy records its first point again."""
        state = self.__dict__.copy()
        state["_cache"] = OrderedDict()
        state["n_forward"] = 0
        return state

    # ------------------------------------------------------------------ the cache
    def _point(self, x: Any, args: tuple, kwargs: dict) -> _Point:
        xa = _as_x(x)
        if not args and not kwargs:
            args = self._args
        key = (
            xa.shape,
            xa.tobytes(),
            tuple(id(a) for a in args),
            tuple(sorted((k, id(v)) for k, v in kwargs.items())),
        )
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        xt = tensor(xa, requires_grad=True)
        with enable_grad():
            out = self._fun(xt, *args, **kwargs)
        if isinstance(out, (tuple, list)):
            raise TypeError(
                "fun must return one number or array, got a "
                f"{type(out).__name__}; for SciPy's jac=True convention pass fun alone, "
                "funcdiff computes the derivative"
            )
        data = out.data if isinstance(out, Tensor) else out
        try:
            value = np.asarray(data, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"fun must return numbers, got {type(out).__name__}: {exc}") from None
        point = _Point(xa.copy(), xt, out, value)
        self.n_forward += 1
        self._cache[key] = point
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return point

    def _scalar(self, point: _Point, what: str) -> None:
        if point.value.size != 1:
            raise ValueError(
                f"{what} needs a scalar-valued fun, but fun returned shape {point.value.shape}; "
                "use jac for the Jacobian of a vector-valued fun"
            )

    def _live(self, point: _Point) -> bool:
        return isinstance(point.out, Tensor) and point.out.requires_grad

    def _ggraph(self, point: _Point) -> Tensor | None:
        """The gradient recorded with create_graph (for hess and hessp)."""
        if point.ggraph is None and self._live(point):
            with enable_grad():
                (g,) = grad(
                    point.out, point.xt, create_graph=True, retain_graph=True, allow_unused=True
                )
            point.ggraph = g
            if point.grad is None and g is not None:
                point.grad = np.array(g.data, dtype=np.float64)
        return point.ggraph

    # ------------------------------------------------------------------ SciPy callables
    def fun(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        """The value: a float for a scalar fun, else a float64 array."""
        v = self._point(x, args, kwargs).value
        return float(v.reshape(())) if v.size == 1 and v.ndim <= 1 else v.copy()

    def jac(self, x: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        """Gradient (shape of x) of a scalar fun, or the (m, n) Jacobian of a vector fun."""
        point = self._point(x, args, kwargs)
        xa = point.x
        if point.value.size == 1 and point.value.ndim <= 1:
            if point.grad is None:
                if not self._live(point):
                    point.grad = np.zeros(xa.shape)
                else:
                    with enable_grad():
                        (g,) = grad(point.out, point.xt, retain_graph=True, allow_unused=True)
                    point.grad = (
                        np.zeros(xa.shape) if g is None else np.array(g.data, dtype=np.float64)
                    )
            return point.grad.copy()
        if point.jac is None:
            point.jac = self._jacobian(point)
        return point.jac.copy()

    def _jacobian(self, point: _Point) -> np.ndarray:
        m, n = point.value.size, point.x.size
        if not self._live(point):
            return np.zeros((m, n))
        with enable_grad():
            if m <= n:
                rows = jacobian_rows(point.out, [point.xt])[0]
                return np.asarray(rows, dtype=np.float64).reshape(m, n)
            # Tall Jacobian: n forward-mode products in one batched pass.
            basis = basis_rows(point.x.shape, np.float64, 0, 0, n)
            (cols,) = jvp([point.out], [point.xt], [basis], batched=True)
        return cols.reshape(n, m).T.copy()

    def fun_and_jac(self, x: Any, *args: Any, **kwargs: Any) -> tuple[Any, np.ndarray]:
        """``(fun(x), jac(x))`` for SciPy's ``jac=True`` convention."""
        return self.fun(x, *args, **kwargs), self.jac(x, *args, **kwargs)

    def hess(self, x: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        """Dense Hessian (n, n) of a scalar fun."""
        point = self._point(x, args, kwargs)
        self._scalar(point, "hess")
        n = point.x.size
        g = self._ggraph(point)
        if g is None:
            return np.zeros((n, n))
        with enable_grad():
            rows = jacobian_rows(g, [point.xt])[0]
        return np.asarray(rows, dtype=np.float64).reshape(n, n)

    def hessp(self, x: Any, p: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        """Hessian-vector product ``H(x) p`` of a scalar fun (SciPy's ``hessp(x, p)``)."""
        point = self._point(x, args, kwargs)
        self._scalar(point, "hessp")
        pa = _as_x(p, "p")
        if pa.size != point.x.size:
            raise ValueError(f"p has {pa.size} elements, x has {point.x.size}")
        g = self._ggraph(point)
        if g is None or not g.requires_grad:
            return np.zeros(point.x.shape)
        with enable_grad():
            (hp,) = vjp([g], [point.xt], [pa.reshape(point.x.shape)])
        return np.array(hp, dtype=np.float64)


def derivatives(fun: Callable[..., Any], args: Sequence[Any] = ()) -> Derivatives:
    """``fun`` with exact, cached ``.fun``, ``.jac``, ``.hess`` and ``.hessp`` for SciPy.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.optimize
    >>> from funcdiff import optimize
    >>> d = optimize.derivatives(lambda x: np.sum((x - 3.0) ** 2))
    >>> res = scipy.optimize.minimize(d.fun, np.zeros(2), jac=d.jac, method="BFGS")
    >>> np.round(res.x, 6)
    array([3., 3.])
    """
    return Derivatives(fun, args)


class _Replayed:
    """``fun``, ``jac``, ``hess`` and ``hessp`` from replayed programs, cached per point."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        self._value_and_grad = _replay.value_and_grad(fun)
        self._hessian = _replay.hessian(fun)
        self._hvp = _replay.hvp(fun)
        self._point: tuple | None = None

    def _at(self, x: Any, args: tuple) -> tuple:
        x = _as_x(x)
        point = self._point
        if point is None or point[1] != args or not np.array_equal(point[0], x):
            value, g = self._value_and_grad(x, *args)
            point = self._point = (x.copy(), args, value, g)
        return point

    def fun(self, x: Any, *args: Any) -> float:
        return self._at(x, args)[2]

    def jac(self, x: Any, *args: Any) -> np.ndarray:
        return self._at(x, args)[3]

    def hess(self, x: Any, *args: Any) -> np.ndarray:
        return self._hessian(_as_x(x), *args)

    def hessp(self, x: Any, p: Any, *args: Any) -> np.ndarray:
        return self._hvp(_as_x(x), *args, _as_x(p, "p"))[1]


def _sparse_choice(sparse: Any) -> Any:
    """Check ``sparse``: False, True, "auto" or a pattern."""
    if sparse is False or sparse is None or sparse is True or isinstance(sparse, str):
        if isinstance(sparse, str) and sparse != "auto":
            raise ValueError(f"sparse must be True, False, 'auto' or a pattern, got {sparse!r}")
        return bool(sparse) if not isinstance(sparse, str) else sparse
    return sparse  # a pattern: checked by funcdiff.sparse


def _worth_it(pattern: Any) -> bool:
    m, n = pattern.shape
    return n >= 100 and pattern.nnz <= 0.1 * m * n


def _prepared_jacobian(fun: Callable, x0: np.ndarray, args: tuple, sparse: Any) -> Any:
    """A prepared sparse Jacobian for ``sparse`` (None when "auto" finds it dense)."""
    given = None if isinstance(sparse, (bool, str)) else sparse
    J = prepare_jacobian(fun, x0, given, args=args)
    if sparse == "auto" and not _worth_it(J.sparsity):
        return None
    return J


def _densified(prepared: Any) -> Callable:
    """The prepared matrix as a dense ndarray, for solvers that need one (MINPACK)."""

    def dense(x: Any, *args: Any) -> np.ndarray:
        return prepared(x, *args).toarray()

    return dense


def _method_name(method: Any) -> str | None:
    return method.lower() if isinstance(method, str) else None


def _clean(res: Any) -> Any:
    """Make sure no Tensor leaks into the result; arrays become float64."""
    for key in list(res.keys()):
        v = res[key]
        if isinstance(v, Tensor):
            res[key] = np.array(v.data, dtype=np.float64)
        elif isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.dtype != np.float64:
            res[key] = v.astype(np.float64)
    return res


def jacobian_operator(fun: Callable[..., Any], x: Any, args: Sequence[Any] = ()) -> Any:
    """The Jacobian of ``fun`` at ``x`` as a matrix-free ``LinearOperator`` (m, n).

    ``matvec(v)`` is ``J v`` (a forward-mode product: ``v`` pushed through the recorded
    graph), ``rmatvec(u)`` is ``J^T u`` (a reverse-mode product); both reuse one
    recorded graph.
    Inputs and outputs are flattened.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff import optimize
    >>> J = optimize.jacobian_operator(lambda x: x[:2] * x[1:], np.array([1.0, 2.0, 3.0]))
    >>> J.shape, J.matvec(np.array([1.0, 0.0, 0.0])), J.rmatvec(np.array([1.0, 1.0]))
    ((2, 3), array([2., 0.]), array([2., 4., 2.]))
    """
    from scipy.sparse.linalg import LinearOperator

    xa = _as_x(x)
    xt = tensor(xa, requires_grad=True)
    with enable_grad():
        out = fun(xt, *args)
    out_data = np.asarray(out.data if isinstance(out, Tensor) else out)
    m, n = out_data.size, xa.size
    live = isinstance(out, Tensor) and out.requires_grad

    def matvec(v: np.ndarray) -> np.ndarray:
        # Forward mode through the one recorded graph: J v without a backward pass.
        if not live:
            return np.zeros(m)
        v = np.asarray(v, dtype=np.float64).reshape(xa.shape)
        with enable_grad():
            (jv,) = jvp([out], [xt], [v])
        return jv.ravel()

    def rmatvec(w: np.ndarray) -> np.ndarray:
        return _pull_back(out if live else None, xt, w, out_data.shape)

    def matmat(V: np.ndarray) -> np.ndarray:
        V = np.asarray(V, dtype=np.float64)
        k = V.shape[1]
        if not live or not k:
            return np.zeros((m, k))
        with enable_grad():
            (jv,) = jvp([out], [xt], [V.T.reshape((k,) + xa.shape)], batched=True)
        return jv.reshape(k, m).T

    def rmatmat(W: np.ndarray) -> np.ndarray:
        return _pull_back_columns(out if live else None, xt, W, out_data.shape)

    return LinearOperator(
        (m, n), matvec=matvec, rmatvec=rmatvec, matmat=matmat, rmatmat=rmatmat, dtype=np.float64
    )


def _pull_back(root: Tensor | None, xt: Tensor, w: Any, root_shape: tuple[int, ...]) -> np.ndarray:
    """``J^T w`` (flattened) of ``root`` on the kept graph; zeros for a constant ``root``."""
    w = np.asarray(w, dtype=np.float64).reshape(root_shape)
    with enable_grad():
        (r,) = vjp([root], [xt], [w])
    return np.array(r, dtype=np.float64).ravel()


def _pull_back_columns(
    root: Tensor | None, xt: Tensor, W: Any, root_shape: tuple[int, ...]
) -> np.ndarray:
    """``J^T W`` (n, k) of ``root`` for the k columns of ``W``, on the kept graph.

    One batched backward pass, or one per column where the graph holds a hook or a
    batch-aware custom backward (:func:`funcdiff._jacobian.is_batch_safe`); zeros for a
    constant ``root``.
    """
    W = np.asarray(W, dtype=np.float64)
    k = W.shape[1]
    if not k:
        return np.zeros((xt.size, 0))
    with enable_grad():
        (r,) = vjp([root], [xt], [W.T.reshape((k, *root_shape))], batched=True)
    return np.array(r, dtype=np.float64).reshape(k, xt.size).T


def hessian_operator(fun: Callable[..., Any], x: Any, args: Sequence[Any] = ()) -> Any:
    """The Hessian of a scalar ``fun`` at ``x`` as a matrix-free ``LinearOperator`` (n, n).

    ``matvec(v)`` is the Hessian-vector product and ``rmatvec(v)`` the vector-Hessian
    product, both by reverse over reverse on one recorded gradient (they coincide, the
    Hessian being symmetric).

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff import optimize
    >>> H = optimize.hessian_operator(lambda x: x[0] ** 2 * x[1], np.array([1.0, 3.0]))
    >>> H.matvec(np.array([1.0, 0.0]))
    array([6., 2.])
    """
    from scipy.sparse.linalg import LinearOperator

    xa = _as_x(x)
    n = xa.size
    xt = tensor(xa, requires_grad=True)
    with enable_grad():
        out = fun(xt, *args)
    if np.size(out.data if isinstance(out, Tensor) else out) != 1:
        raise ValueError("hessian_operator needs a scalar-valued fun")
    g = None
    if isinstance(out, Tensor) and out.requires_grad:
        with enable_grad():
            (g,) = grad(out, xt, create_graph=True, retain_graph=True, allow_unused=True)

    def matvec(v: np.ndarray) -> np.ndarray:
        return _pull_back(g, xt, v, xa.shape)

    def matmat(V: np.ndarray) -> np.ndarray:
        return _pull_back_columns(g, xt, V, xa.shape)

    return LinearOperator(
        (n, n), matvec=matvec, rmatvec=matvec, matmat=matmat, rmatmat=matmat, dtype=np.float64
    )
