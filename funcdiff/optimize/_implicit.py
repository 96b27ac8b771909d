"""Implicit differentiation of a solution ``x*(p)`` defined by ``F(x*, p) = 0``.

The solver runs on plain values; one node is recorded for its solution, with the
solution and the Tensors of ``args`` saved. Its backward solves ``A^T u = g`` with
``A = dF/dx`` at the solution (factorised once per node: dense LU, or the sparse LU of a
:mod:`funcdiff.sparse` Jacobian or Hessian) and returns the vjp of ``F`` with respect to
the parameters with cotangent ``-u``. Under ``create_graph`` the linear solve is itself a
recorded node (:class:`LinearSolve`) whose backward is again a solve with the same
factors, and ``F`` is evaluated on graph-connected copies of the solution and the
parameters: derivatives of every order follow, forward mode included (funcdiff
transposes the differentiable backward).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from funcdiff._core.tensor import Tensor, tensor
from funcdiff.autograd import Function, enable_grad, grad, is_grad_enabled
from funcdiff.optimize._derivatives import Derivatives
from funcdiff.sparse import prepare_hessian, prepare_jacobian

__all__ = [
    "Arguments",
    "Condition",
    "ImplicitSolution",
    "LinearSolve",
    "check_converged",
    "refuse_closed_over",
]

#: What each kind of condition is, for messages.
_MATRIX_NAME = {
    "root": "the Jacobian of fun with respect to x",
    "fixed_point": "I - (the Jacobian of func with respect to x)",
    "custom_root": "the Jacobian of optimality_fun with respect to x",
    "minimize": "the Hessian of fun with respect to x",
    "least_squares": "the Hessian of 0.5 * ||fun||^2 with respect to x",
    "kkt": (
        "the KKT matrix (the Hessian of the Lagrangian bordered by the active "
        "constraints' Jacobian)"
    ),
}
_HESSIAN_KINDS = {"minimize", "least_squares", "kkt"}


def _holds_live_tensor(value: Any, depth: int = 0) -> bool:
    if isinstance(value, Tensor):
        return value.requires_grad
    if depth > 4:
        return False
    if isinstance(value, dict):
        return any(_holds_live_tensor(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds_live_tensor(v, depth + 1) for v in value)
    return False


class Arguments:
    """SciPy's ``args``: the Tensors to differentiate with respect to, and plain values.

    A Tensor that requires grad (with grad mode on) is a parameter; any other Tensor is
    a constant (its data). A Tensor that requires grad inside a container is refused:
    the solver would see it as a constant.
    """

    def __init__(self, args: Any, name: str = "args") -> None:
        if not isinstance(args, tuple):
            # SciPy's convention: a single non-tuple value is the one extra argument.
            args = tuple(args) if isinstance(args, list) else (args,)
        for i, a in enumerate(args):
            if not isinstance(a, Tensor) and _holds_live_tensor(a):
                raise TypeError(
                    f"{name}[{i}] is a {type(a).__name__} holding a Tensor that requires grad: "
                    "funcdiff.optimize differentiates the solution with respect to Tensors "
                    f"passed directly in {name}; pass each such Tensor as its own element of "
                    f"{name}, or detach it to treat it as a constant"
                )
            if isinstance(a, Tensor) and a.requires_grad and a.dtype.kind not in "f":
                raise TypeError(
                    f"{name}[{i}] is a {a.dtype} Tensor: solutions are differentiated with "
                    "respect to real floating-point Tensors only"
                )
        self.args = args
        self.has_tensor = any(isinstance(a, Tensor) for a in args)
        live = is_grad_enabled()
        self.positions = tuple(
            i for i, a in enumerate(args) if live and isinstance(a, Tensor) and a.requires_grad
        )
        self.params = tuple(args[i] for i in self.positions)
        self.plain = tuple(a.detach().data if isinstance(a, Tensor) else a for a in args)

    @property
    def differentiable(self) -> bool:
        return bool(self.params)

    def with_params(self, params: Sequence[Any]) -> tuple:
        """``args`` with ``params`` at the parameters' places, plain values elsewhere."""
        out = list(self.plain)
        for i, p in zip(self.positions, params, strict=True):
            out[i] = p
        return tuple(out)


def refuse_closed_over(
    fn: Callable[..., Any], x0: Any, plain_args: tuple, kwargs: dict | None, name: str
) -> Any:
    """Raise when ``fn`` reaches a Tensor that requires grad other than through ``args``.

    ``fn`` runs once at ``x0`` on plain values: an output that still requires grad
    depends on a closed-over (or global) Tensor, whose gradient the solver cannot follow.
    Returns that output (None when grad mode is off and nothing is checked).
    """
    if not is_grad_enabled():
        return None
    with enable_grad():
        out = fn(tensor(np.array(x0, dtype=np.float64)), *plain_args, **(kwargs or {}))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if any(isinstance(o, Tensor) and o.requires_grad for o in outs):
        raise RuntimeError(
            f"{name} uses a Tensor that requires grad and is not passed in args (a closure, "
            "a global or an attribute): the solver sees plain values, so the solution's "
            "derivative with respect to it would be lost. Pass that Tensor through args=(...) "
            f"and take it as an argument of {name} to differentiate the solution with "
            "respect to it, or .detach() it to treat it as a constant"
        )
    return out


def check_converged(success: bool, message: Any, name: str, allow_unconverged: bool) -> None:
    """Refuse to differentiate a result the solver reports as not converged."""
    if not success and not allow_unconverged:
        raise RuntimeError(
            f"{name} did not converge (SciPy's message: {message!s}), so derivatives with "
            "respect to args at its result would be those of a point that is not a "
            "solution. Tighten the solver's options, or pass allow_unconverged=True to "
            "differentiate at the returned point anyway"
        )


def _flat(value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value.reshape(-1)
    return tensor(np.asarray(value, dtype=np.float64).reshape(-1))


class Condition:
    """The optimality condition ``F(x, p) = 0`` at one solution, with its factorised Jacobian.

    Parameters
    ----------
    kind : {"root", "fixed_point", "custom_root", "minimize", "least_squares", "kkt"}
        ``F`` is ``fn`` (root, custom_root), ``x - fn`` (fixed_point), the gradient of
        ``fn`` (minimize, and kkt: ``fn`` the Lagrangian, ``x`` the solution and the
        multipliers) or of ``0.5 * ||fn||^2`` (least_squares) in ``x``.
    fn : callable
        ``fn(x, *args, **kwargs)`` with ``x`` of shape ``shape``.
    x_star : ndarray
        The solution.
    arguments : Arguments
        The parameters and the plain values of ``args``.
    kwargs : dict, optional
        Keyword arguments of ``fn`` (constants).
    active, bound : ndarray, optional
        Components at an active bound: their rows of ``F`` become ``x_i - bound_i``.
    sparse : bool, "auto" or pattern
        How ``A = dF/dx`` is formed and factorised (see :meth:`matrix`).
    prepared : SparseJacobian or SparseHessian, optional
        A prepared sparse derivative from the forward solve, reused.
    """

    def __init__(
        self,
        kind: str,
        fn: Callable[..., Any],
        x_star: np.ndarray,
        arguments: Arguments,
        *,
        kwargs: dict | None = None,
        active: np.ndarray | None = None,
        bound: np.ndarray | None = None,
        sparse: Any = "auto",
        prepared: Any = None,
    ) -> None:
        self.kind = kind
        self.fn = fn
        self.shape = np.shape(x_star)
        self.x_star = np.array(x_star, dtype=np.float64).reshape(-1)
        self.n = self.x_star.size
        self.arguments = arguments
        self.kwargs = dict(kwargs or {})
        self.active = None if active is None or not active.any() else active
        self.bound: Any = None
        if self.active is not None:
            self.bound = np.where(self.active, np.asarray(bound, dtype=np.float64), 0.0)
        self.sparse = sparse
        self.prepared = prepared
        self._factors: Any = None
        self._matrix: Any = None

    # ------------------------------------------------------------------ F on Tensors
    def objective(self, x: Any, args: tuple) -> Any:
        """The scalar whose gradient is ``F`` (minimize and least_squares)."""
        value = self.fn(x, *args, **self.kwargs)
        if self.kind == "least_squares":
            r: Any = _flat(value)
            return 0.5 * (r * r).sum()
        return value

    def residual(self, x: Any, params: Sequence[Tensor]) -> Any:
        """``F(x, params)`` flattened, on Tensors (``x`` flat, requiring grad)."""
        F: Any
        args = self.arguments.with_params(params)
        xs = x.reshape(self.shape)
        if self.kind in _HESSIAN_KINDS:
            value = self.objective(xs, args)
            if not isinstance(value, Tensor) or not value.requires_grad:
                F = tensor(np.zeros(self.n))
            else:
                (g,) = grad(value, x, create_graph=True, allow_unused=True)
                F = tensor(np.zeros(self.n)) if g is None else g
        else:
            F = _flat(self.fn(xs, *args, **self.kwargs))
            if self.kind == "fixed_point":
                F = x - F
        if F.size != self.n:
            raise ValueError(
                f"the optimality condition has {F.size} values for {self.n} unknowns: "
                "the solution is defined by as many equations as unknowns"
            )
        if self.active is not None:
            free = (~self.active).astype(np.float64)
            F = free * F + self.active * (x - self.bound)
        return F

    # ------------------------------------------------------------------ A = dF/dx, numeric
    def _plain_residual(self, x: Any, *args: Any) -> Any:
        xs = x.reshape(self.shape)
        value = self.fn(xs, *args, **self.kwargs)
        F = value.reshape(-1) if isinstance(value, Tensor) else np.reshape(value, -1)
        return x - F if self.kind == "fixed_point" else F

    def _plain_objective(self, x: Any, *args: Any) -> Any:
        return self.objective(x.reshape(self.shape), args)

    def _use_sparse(self) -> bool:
        if self.sparse is True or not isinstance(self.sparse, (bool, str)):
            return True
        return self.n >= 100  # "auto" (and the default): decided by the detected density

    def _sparse_matrix(self) -> Any:
        """``A`` from :mod:`funcdiff.sparse` (a prepared derivative), as a ``csr_array``."""
        plain = self.arguments.plain
        if self.prepared is not None:  # from the forward solve, for fn's own x
            return sp.csr_array(self.prepared(self.x_star.reshape(self.shape), *plain))
        given = None if isinstance(self.sparse, (bool, str)) else self.sparse
        prepared: Any
        if self.kind in _HESSIAN_KINDS:
            prepared = prepare_hessian(self._plain_objective, self.x_star, given, args=plain)
        else:
            prepared = prepare_jacobian(self._plain_residual, self.x_star, given, args=plain)
        return sp.csr_array(prepared(self.x_star, *plain))

    def _dense_matrix(self) -> np.ndarray:
        d = Derivatives(
            self._plain_objective if self.kind in _HESSIAN_KINDS else self._plain_residual,
            self.arguments.plain,
        )
        if self.kind in _HESSIAN_KINDS:
            return d.hess(self.x_star)
        size = np.size(d.fun(self.x_star))
        if size != self.n:
            raise ValueError(
                f"the optimality condition has {size} values for {self.n} unknowns: "
                "the solution is defined by as many equations as unknowns"
            )
        return d.jac(self.x_star).reshape(self.n, self.n)

    def matrix(self) -> Any:
        """``A = dF/dx`` at the solution: a float ndarray, or a ``csr_array`` when sparse.

        Sparse when asked (``sparse=True`` or a pattern), or by default when there are at
        least 100 unknowns and the detected pattern holds at most a tenth of the entries.
        """
        A: Any = None
        if self._use_sparse():
            forced = self.sparse not in ("auto", False)
            try:
                A = self._sparse_matrix()
            except Exception:
                if forced:
                    raise
                A = None  # code the sparsity tracer cannot follow: the dense path decides
            if A is not None and A.shape != (self.n, self.n):
                raise ValueError(
                    f"the optimality condition has {A.shape[0]} values for {self.n} unknowns: "
                    "the solution is defined by as many equations as unknowns"
                )
            if A is not None and not forced and A.nnz > 0.1 * self.n * self.n:
                A = A.toarray()
        if A is None:
            A = self._dense_matrix()
        if self.active is not None:
            free = (~self.active).astype(np.float64)
            if sp.issparse(A):
                A = sp.csr_array(sp.diags_array(free) @ A + sp.diags_array(self.active * 1.0))
            else:
                A = free[:, None] * A + np.diag(self.active * 1.0)
        return A

    def _singular(self, detail: str) -> np.linalg.LinAlgError:
        return np.linalg.LinAlgError(
            f"{_MATRIX_NAME[self.kind]} is singular at the solution ({detail}): the solution "
            "does not depend smoothly and uniquely on args there (redundant equations, or a "
            "flat direction), so it has no derivative"
        )

    def factors(self) -> Any:
        """``A``'s LU factors, computed once per solution."""
        if self._factors is None:
            A = self.matrix()
            if sp.issparse(A):
                if not np.all(np.isfinite(A.data)):
                    raise ValueError(f"{_MATRIX_NAME[self.kind]} is not finite at the solution")
                try:
                    self._factors = ("sparse", spla.splu(sp.csc_matrix(A)))
                except RuntimeError as exc:
                    raise self._singular(str(exc)) from None
            else:
                A = np.asarray(A, dtype=np.float64)
                if not np.all(np.isfinite(A)):
                    raise ValueError(f"{_MATRIX_NAME[self.kind]} is not finite at the solution")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
                    lu, piv = scipy.linalg.lu_factor(A, check_finite=False)
                anorm = np.abs(A).sum(axis=0).max() if A.size else 0.0
                rcond = _rcond(lu, anorm)
                if not rcond > np.finfo(np.float64).eps:
                    raise self._singular(f"reciprocal condition number {rcond:.3g}")
                self._factors = ("dense", (lu, piv))
            self._matrix = A
        return self._factors

    def solve(self, b: Any, trans: bool) -> np.ndarray:
        """``A^{-1} b`` (``A^{-T} b`` with ``trans``), for ``b`` of shape (n,) or (k, n)."""
        b = np.asarray(b, dtype=np.float64)
        rhs = b.reshape(-1, self.n).T
        how, f = self.factors()
        if how == "dense":
            u = scipy.linalg.lu_solve(f, rhs, trans=1 if trans else 0, check_finite=False)
        else:
            u = f.solve(np.ascontiguousarray(rhs), trans="T" if trans else "N")
            A = self._matrix.T if trans else self._matrix
            residual = np.abs(A @ u - rhs).max() if rhs.size else 0.0
            scale = abs(A).max() * np.abs(u).max() + np.abs(rhs).max() if rhs.size else 0.0
            if not np.all(np.isfinite(u)) or residual > 1e-8 * scale:
                raise self._singular(f"the sparse LU solve left a residual of {residual:.3g}")
        return np.asarray(u.T.reshape(b.shape))


def _rcond(lu: np.ndarray, anorm: float) -> float:
    """LAPACK's estimate of the reciprocal 1-norm condition number from LU factors."""
    if lu.size == 0:
        return 1.0
    if np.any(np.diag(lu) == 0.0):
        return 0.0
    (gecon,) = scipy.linalg.lapack.get_lapack_funcs(("gecon",), (lu,))
    rcond, info = gecon(lu, anorm, norm="1")
    return float(rcond) if info == 0 else 0.0


def _copies(x: Any, params: Sequence[Any], connected: bool) -> list[Any]:
    """Copies of the saved solution (flat) and parameters: graph-connected under
    create_graph (new nodes downstream of the saved values, so a gradient taken with
    respect to them is a partial derivative), detached leaves otherwise."""
    if connected:
        return [x.reshape(-1) + 0.0, *(p + 0.0 for p in params)]
    leaves = [np.array(x.data, dtype=np.float64).reshape(-1), *(p.data for p in params)]
    return [tensor(np.array(v, dtype=np.float64), requires_grad=True) for v in leaves]


def _restore(grads: Sequence[Any], like: Sequence[Tensor]) -> list[Any]:
    out = []
    for g, t in zip(grads, like, strict=True):
        out.append(np.zeros(t.shape) if g is None else g.reshape(t.shape))
    return out


class ImplicitSolution(Function):
    """The solution ``x*`` of ``F(x, p) = 0`` as a function of the parameters ``p``.

    A batch of cotangents (a full ``jacobian``, ``vectorize=True``) is one solve with as
    many right-hand sides and one batched vjp of ``F``.
    """

    batched_backward = True

    @staticmethod
    def forward(ctx: Any, condition: Condition, solution: np.ndarray, *params: Tensor) -> Tensor:
        ctx.condition = condition
        out = tensor(np.array(solution, dtype=np.float64))
        ctx.save_for_backward(out, *params)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        condition: Condition = ctx.condition
        x_star, *params = ctx.saved_tensors
        create = is_grad_enabled()
        batch = np.ndim(g) == x_star.ndim + 1
        if batch and create:
            # Recorded per cotangent (each a differentiable solve), then stacked.
            rows = [_pull_back(condition, x_star, params, g[b], True) for b in range(len(g))]
            return (None, None, *(np.stack([r[k] for r in rows]) for k in range(len(params))))
        if batch:
            return (None, None, *_pull_back_batch(condition, x_star, params, g))
        return (None, None, *_pull_back(condition, x_star, params, g, create))


def _pull_back(
    condition: Condition, x_star: Tensor, params: Sequence[Tensor], g: Any, create: bool
) -> list[Any]:
    """``-(dF/dp)^T A^{-T} g`` for one cotangent ``g`` of the solution."""
    with enable_grad():
        x_c, *p_c = _copies(x_star, params, create)
        if create:
            u = LinearSolve.apply(condition, True, g.reshape(-1), x_c, *p_c)
        else:
            u = tensor(condition.solve(np.asarray(getattr(g, "data", g)).reshape(-1), trans=True))
        F = condition.residual(x_c, p_c)
        grads = grad(F, p_c, grad_outputs=-u, create_graph=create, allow_unused=True)
    return _restore(grads, params)


def _pull_back_batch(
    condition: Condition, x_star: Tensor, params: Sequence[Tensor], g: Any
) -> list[np.ndarray]:
    """:func:`_pull_back` for k cotangents at once: one k-column solve, one batched vjp."""
    cotangents = np.asarray(getattr(g, "data", g), dtype=np.float64)
    k = cotangents.shape[0]
    u = condition.solve(cotangents.reshape(k, -1), trans=True)
    with enable_grad():
        x_c, *p_c = _copies(x_star, params, False)
        F = condition.residual(x_c, p_c)
        grads = grad(F, p_c, grad_outputs=tensor(-u), allow_unused=True, is_grads_batched=True)
    return [
        np.zeros((k, *p.shape)) if gr is None else np.asarray(gr.data).reshape(k, *p.shape)
        for gr, p in zip(grads, params, strict=True)
    ]


class LinearSolve(Function):
    """``u = A^{-1} b`` (``A^{-T} b`` with ``trans``), ``A = dF/dx(x, p)``, differentiable.

    ``d u = A^{-1} (d b - d A u)`` (transposed alike): the backward is one solve with the
    other transposition and one second-order vjp of ``F``.
    """

    @staticmethod
    def forward(
        ctx: Any, condition: Condition, trans: bool, b: Tensor, x: Tensor, *params: Tensor
    ) -> Tensor:
        ctx.condition = condition
        ctx.trans = trans
        out = tensor(condition.solve(np.asarray(b.data), trans))
        ctx.save_for_backward(out, x, *params)
        return out

    @staticmethod
    def backward(ctx: Any, u_bar: Tensor) -> tuple:
        condition: Condition = ctx.condition
        trans: bool = ctx.trans
        u, x, *params = ctx.saved_tensors
        create = is_grad_enabled()
        if create:
            w = LinearSolve.apply(condition, not trans, u_bar, x, *params)
        else:
            w = tensor(condition.solve(np.asarray(u_bar.data), not trans))
        # b_bar = w; (x, p)_bar = -d/d(x, p) of left^T A(x, p) right, left and right fixed.
        left, right = (u, w) if trans else (w, u)
        if not create:
            left, right = tensor(left.data), tensor(right.data)
        with enable_grad():
            x2, *p2 = _copies(x, params, create)
            F = condition.residual(x2, p2)
            (jt_left,) = grad(F, x2, grad_outputs=left, create_graph=True, allow_unused=True)
            if jt_left is None:
                grads: Sequence[Any] = [None] * (1 + len(p2))
            else:
                s = (jt_left * right).sum()
                grads = grad(s, [x2, *p2], create_graph=create, allow_unused=True)
        grads = [None if gr is None else -gr for gr in grads]
        return (None, None, w, *_restore(grads, [x, *params]))
