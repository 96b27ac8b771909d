"""A constant ``scipy.sparse`` matrix times a Tensor: ``A @ x``, ``A.dot(x)``, ``x @ A``.

One primitive carries every form: :func:`sparse_matmul` ``(A, x)`` contracts a
constant sparse matrix ``A`` (``m x n``, CSR or CSC) with the *first* axis of ``x``
(``n`` or ``(n, ...)``), the other axes riding along. Its cotangent is the same
product with ``A.T`` and its tangent the same product with ``A``, so it is
differentiable to any order and its Jacobian is ``A`` itself (``kron(A, I)`` for the
trailing axes), which :mod:`funcdiff.sparse` reads exactly.

SciPy's sparse classes decide ``A @ x`` themselves (the left operand goes first), and
turn a Tensor into an ndarray, which loses its gradient. :func:`install_handover`
wraps their dispatch methods (``_matmul_dispatch``, ``_rmatmul_dispatch``, ``dot``;
found by walking the classes, so every format, the ``*_array`` and ``*_matrix``
classes alike): a Tensor operand goes to :func:`matmul_tensor` or
:func:`rmatmul_tensor`, anything else to SciPy's own method, untouched. ``x @ A`` with
the Tensor on the left reaches SciPy's reflected method because the Tensor's
``__matmul__`` defers to operands marked ``__funcdiff_defers_matmul__``.

``import funcdiff`` does not import ``scipy.sparse``: the hand-over is installed at once
when SciPy's sparse package is already loaded, and otherwise right after it loads (a
post-import hook on ``sys.meta_path``, removed once it has run).

Examples
--------
>>> import numpy as np
>>> import scipy.sparse as sp
>>> import funcdiff as fd
>>> L = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(3, 3))
>>> u = fd.tensor([1.0, 2.0, 4.0], requires_grad=True)
>>> y = L @ u
>>> y
tensor([ 0.,  1., -6.], grad_fn=<SparseMatmulBackward>)
>>> y.sum().backward()
>>> u.grad
tensor([-1.,  0., -1.])
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from funcdiff._core.registry import Rule, batch_ndim, dispatching, register
from funcdiff._core.tensor import Tensor
from funcdiff.ops.dispatch import register_matrix_type
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.structure import Structure

__all__ = [
    "DEFERS_MATMUL",
    "DeferredCases",
    "sparse_matmul",
    "matmul_tensor",
    "rmatmul_tensor",
    "dot_tensor",
    "install_handover",
]

#: Class attribute of operands whose own ``__rmatmul__`` handles ``tensor @ operand``:
#: the Tensor's ``__matmul__`` returns NotImplemented for them.
DEFERS_MATMUL = "__funcdiff_defers_matmul__"


# ---------------------------------------------------------------- the primitive
def _sparse_matmul_forward(A: Any, x: Any) -> Any:
    """``A`` (a constant ``m x n`` scipy.sparse matrix) contracted with the first axis
    of ``x`` (shape ``(n, ...)``); the result has shape ``(m, ...)``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]]))
    >>> sparse_matmul(A, np.array([[1.0, 0.0, 2.0], [1.0, 1.0, 0.0]]))
    array([[3., 2., 2.],
           [3., 3., 0.]])
    """
    x = np.asarray(x)
    n = x.shape[0]
    if x.ndim == 1:
        return np.asarray(A @ x)
    flat = x.reshape(n, int(np.prod(x.shape[1:], dtype=np.int64)))
    return np.asarray(A @ flat).reshape((A.shape[0], *x.shape[1:]))


sparse_matmul = dispatching(_sparse_matmul_forward)
# How users write it, for the table of supported functions.
sparse_matmul.public_name = "A @ x, A.dot(x), x @ A (A a scipy.sparse matrix)"  # type: ignore[attr-defined]


def _with_batch_last(M: Any, v: Any, nb: int) -> Any:
    """``sparse_matmul(M, v)`` for ``v`` with ``nb`` leading batch axes (0 or 1): the
    batch axis goes last, where the product carries it along."""
    if not nb:
        return sparse_matmul(M, v)
    return np.moveaxis(sparse_matmul(M, np.moveaxis(v, 0, -1)), -1, 0)


def _sparse_matmul_vjp(g: Any, ans: Any, A: Any, x: Any) -> Any:
    return _with_batch_last(A.T, g, batch_ndim(g, ans))


def _sparse_matmul_jvp(t: Any, ans: Any, A: Any, x: Any) -> Any:
    return _with_batch_last(A, t, batch_ndim(t, x))


class DeferredCases(Sequence):
    """Test cases built on first use: their constants (sparse matrices, factorizations)
    need ``scipy.sparse``, which ``import funcdiff`` leaves unloaded."""

    def __init__(self, build: Callable[[], tuple[Case, ...]]) -> None:
        self._build = build
        self._cases: tuple[Case, ...] | None = None

    def _all(self) -> tuple[Case, ...]:
        if self._cases is None:
            self._cases = tuple(self._build())
        return self._cases

    def __getitem__(self, index: Any) -> Any:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())


def _case_matrix(fmt: str, shape: tuple[int, int], seed: int) -> Any:
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    dense = rng.uniform(-2.0, 2.0, size=shape) * (rng.uniform(size=shape) < 0.5)
    return sp.csr_array(dense).asformat(fmt)


def _cases() -> tuple[Case, ...]:
    return (
        Case((_case_matrix("csr", (4, 3), 0), Arg((3,)))),
        Case((_case_matrix("csc", (3, 5), 1), Arg((5, 2)))),
        Case((_case_matrix("csr", (2, 3), 2), Arg((3, 2, 2)))),
    )


register(
    Rule(
        "sparse_matmul",
        _sparse_matmul_forward,
        vjps={1: _sparse_matmul_vjp},
        jvps={1: _sparse_matmul_jvp},
        nondiff_args=frozenset({0}),
        arg_names=("A", "x"),
        complex=True,
        cases=cast(tuple, DeferredCases(_cases)),
        convention="A is a constant; differentiable in x; A.T @ g backward",
        family="linalg",
        # The constant matrix's nonzeros are the Jacobian's pattern.
        structure=Structure("sparse_matmul", "linear"),
    ),
    sparse_matmul,
)


# ---------------------------------------------------------------- the hand-over
def _as_2d(A: Any) -> Any:
    """A CSR or CSC matrix (``1 x n`` for a 1-d sparse array) that the primitive takes."""
    import scipy.sparse as sp  # loaded: A is one of its matrices

    if A.ndim == 1:
        return sp.csr_array(A.reshape(1, -1))
    if A.ndim != 2:
        raise ValueError(
            f"a {A.ndim}-d scipy.sparse array times a Tensor is not supported: "
            "funcdiff handles 1-d and 2-d sparse arrays"
        )
    return A if A.format in ("csr", "csc") else A.tocsr()


def _refuse_scalar(A: Any, x: Tensor) -> None:
    if x.ndim == 0:
        raise TypeError(
            "a scipy.sparse matrix times a 0-d Tensor would be a sparse matrix of Tensors, "
            "which funcdiff does not record: multiply the product instead "
            "((A @ v) * t), or build the matrix with funcdiff.sparse.csr_array"
        )


def _check_inner(A: Any, n: int, x: Tensor) -> None:
    if x.shape[0] != n:
        tail = "1?" if x.ndim <= 2 else "m"
        raise ValueError(
            "matmul: dimension mismatch with signature "
            f"(n,k={n}),(k={x.shape[0]},{tail})->(n,{tail})"
        )


def _is_coo(A: Any) -> bool:
    return getattr(A, "format", None) == "coo"


def matmul_tensor(A: Any, x: Any) -> Any:
    """``A @ x`` for a scipy.sparse ``A`` and a Tensor ``x``, with SciPy's shapes: 1-d
    for a 1-d ``x``, ``(m, k)`` for ``(n, k)``; batched over leading axes for COO."""
    _refuse_scalar(A, x)
    M = _as_2d(A)
    if x.ndim <= 2:
        _check_inner(A, M.shape[1], x)
        out = sparse_matmul(M, x)
    else:
        if not _is_coo(A):
            raise ValueError("could not interpret dimensions")
        if x.shape[-2] != M.shape[1]:
            raise ValueError(
                f"matmul: dimension mismatch with signature "
                f"(n,k={M.shape[1]}),(k={x.shape[-2]},m)->(n,m)"
            )
        out = np.moveaxis(sparse_matmul(M, np.moveaxis(x, -2, 0)), 0, -2)
    if A.ndim == 1:  # a row vector times x: drop its axis, as SciPy does
        out = out[..., 0, :] if x.ndim > 2 else out[0]
    return out


def rmatmul_tensor(A: Any, x: Any) -> Any:
    """``x @ A`` for a Tensor ``x`` and a scipy.sparse ``A``: ``(A.T @ x.T).T``, as SciPy."""
    _refuse_scalar(A, x)
    if x.ndim == 1:
        return matmul_tensor(A.T, x)
    if A.ndim == 1:  # (..., k, n) @ (n,): one axis less, nothing to transpose back
        return matmul_tensor(A, np.swapaxes(x, -1, -2))
    return np.swapaxes(matmul_tensor(A.T, np.swapaxes(x, -1, -2)), -1, -2)


def dot_tensor(A: Any, x: Any) -> Any:
    """``A.dot(x)``: ``A @ x``, except for ``x`` with more than two axes, where COO's
    ``dot`` contracts with ``x``'s second-to-last axis and keeps ``A``'s rows first
    (``numpy.dot``'s shapes)."""
    if x.ndim <= 2:
        return matmul_tensor(A, x)
    if not _is_coo(A):  # SciPy's other formats take 1-d and 2-d operands only
        raise ValueError("could not interpret dimensions")
    M = _as_2d(A)
    if x.shape[-2] != M.shape[1]:
        raise ValueError(f"shapes {A.shape} and {x.shape} not aligned for dot")
    out = sparse_matmul(M, np.moveaxis(x, -2, 0))
    return out[0] if A.ndim == 1 else out


def _wrapped(original: Any, handler: Any) -> Any:
    @functools.wraps(original)
    def method(self: Any, other: Any) -> Any:
        if isinstance(other, Tensor):
            return handler(self, other)
        return original(self, other)

    method.__funcdiff_original__ = original  # type: ignore[attr-defined]
    return method


_HANDLERS = {
    "_matmul_dispatch": matmul_tensor,
    "_rmatmul_dispatch": rmatmul_tensor,
    "dot": dot_tensor,
}


def _sparse_classes() -> list[type]:
    """Every public scipy.sparse class and the classes it inherits from."""
    import scipy.sparse as sp

    found: dict[type, None] = {}
    for name in dir(sp):
        cls = getattr(sp, name)
        if isinstance(cls, type) and issubclass(cls, (sp.sparray, sp.spmatrix)):
            for base in cls.__mro__:
                found.setdefault(base, None)
    return list(found)


def install_handover() -> None:
    """Wrap SciPy's sparse dispatch methods so that a Tensor operand is recorded
    (idempotent: a wrapped method is never wrapped again)."""
    for cls in _sparse_classes():
        for name, handler in _HANDLERS.items():
            original = cls.__dict__.get(name)
            if original is None or hasattr(original, "__funcdiff_original__"):
                continue
            setattr(cls, name, _wrapped(original, handler))
    import scipy.sparse as sp

    for cls in (sp.sparray, sp.spmatrix):
        setattr(cls, DEFERS_MATMUL, True)
    # A ufunc given one of them (np.matmul(A, x)) hands it to the matrix's own product.
    for c in _sparse_classes():
        if issubclass(c, (sp.sparray, sp.spmatrix)):
            register_matrix_type(c)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then()`` right after the module ``name`` has been imported, once."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name = name
        self.then = then
        self.searching = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or self.searching:
            return None
        self.searching = True  # the other finders locate the module itself
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.searching = False
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenLoader(spec.loader, self)
        return spec

    def done(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self.then()


class _ThenLoader(importlib.abc.Loader):
    """The module's own loader, and the hook's ``then()`` after it ran."""

    def __init__(self, inner: Any, hook: _AfterImport) -> None:
        self.inner = inner
        self.hook = hook

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self.inner  # its own loader again
        self.inner.exec_module(module)
        self.hook.done()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


if "scipy.sparse" in sys.modules:
    install_handover()
else:
    sys.meta_path.insert(0, _AfterImport("scipy.sparse", install_handover))
