"""Sparse direct solves: the primitives behind :mod:`funcdiff.sparse.linalg`.

Two operations, each differentiable to any order because its cotangents are written
with the same operations:

* :func:`lu_solve` ``(lu, b, trans)``: a solve with a constant SuperLU factorization
  (``scipy.sparse.linalg.splu``). Linear in ``b``; its cotangent is the solve with the
  other transposition on the same factors.
* :func:`csr_solve` ``(data, indices, indptr, b, shape, trans)``: ``A x = b`` (or
  ``A.T x = b``) for the CSR matrix whose stored values are ``data``. With
  ``x = A^{-1} b`` and ``b_bar = A^{-T} g``, the cotangent of the stored value at
  ``(i, j)`` is ``-b_bar[i] * x[j]`` (summed over the columns of a 2-d ``b``): a
  gather per stored entry, never the dense ``-outer(b_bar, x)``, so it has ``data``'s
  shape, explicitly stored zeros and duplicates included.

Both accept ``b`` of shape ``(n,)`` or ``(n, ...)`` (the trailing axes are columns),
which is how a batch of cotangents is carried (moved to the last axis). A singular
matrix raises ``numpy.linalg.LinAlgError`` (SuperLU's "exactly singular"), never
inf or NaN values.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> data = fd.tensor([2.0, 1.0, 4.0], requires_grad=True)   # [[2, 1], [0, 4]]
>>> x = csr_solve(data, np.array([0, 1, 1]), np.array([0, 2, 3]), np.array([3.0, 4.0]), (2, 2))
>>> x
tensor([1., 1.], grad_fn=<CsrSolveBackward>)
>>> x.sum().backward()
>>> data.grad
tensor([-0.5  , -0.5  , -0.125])
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from typing import Any, cast

import numpy as np

from funcdiff._core.registry import Rule, batch_ndim, dispatching, register
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.sparse_matmul import DeferredCases
from funcdiff.rules.structure import DENSE, DENSE_LINEAR

__all__ = ["lu_solve", "csr_solve", "factorize", "other_trans"]

_FAMILY = "linalg"


def other_trans(trans: str) -> str:
    """The transposition of the cotangent's solve: ``"N"`` <-> ``"T"``."""
    return "T" if trans == "N" else "N"


def factorize(A: Any, **options: Any) -> Any:
    """``scipy.sparse.linalg.splu`` of ``A`` (converted to CSC), with a singular matrix
    reported as ``numpy.linalg.LinAlgError``."""
    import scipy.sparse as sp  # not at import: import funcdiff leaves scipy.sparse unloaded
    import scipy.sparse.linalg as spla

    try:
        return spla.splu(sp.csc_array(A), **options)
    except RuntimeError as exc:
        if "singular" in str(exc):
            raise np.linalg.LinAlgError(
                f"the sparse matrix is singular ({exc}): the solve has no unique solution"
            ) from exc
        raise


def _columns(b: np.ndarray, solve: Any) -> np.ndarray:
    """``solve`` applied to ``b`` with its trailing axes flattened into columns."""
    b = np.asarray(b)
    if b.ndim <= 2:
        return np.asarray(solve(b))
    flat = b.reshape(b.shape[0], int(np.prod(b.shape[1:], dtype=np.int64)))
    return np.asarray(solve(flat)).reshape(b.shape)


def _batch_last(solve: Any, v: Any, nb: int) -> Any:
    """``solve(v)`` for ``v`` with ``nb`` (0 or 1) leading batch axes."""
    if not nb:
        return solve(v)
    return np.moveaxis(solve(np.moveaxis(v, 0, -1)), -1, 0)


# ---------------------------------------------------------------- lu_solve
def _lu_solve_forward(lu: Any, b: Any, trans: str = "N") -> Any:
    return _columns(b, lambda flat: lu.solve(np.ascontiguousarray(flat), trans=trans))


lu_solve = dispatching(_lu_solve_forward)
lu_solve.public_name = "funcdiff.sparse.linalg.splu(A).solve"  # type: ignore[attr-defined]


def _lu_solve_vjp(g: Any, ans: Any, lu: Any, b: Any, trans: str = "N") -> Any:
    back = other_trans(trans)
    return _batch_last(lambda v: lu_solve(lu, v, back), g, batch_ndim(g, ans))


def _lu_solve_jvp(t: Any, ans: Any, lu: Any, b: Any, trans: str = "N") -> Any:
    return _batch_last(lambda v: lu_solve(lu, v, trans), t, batch_ndim(t, b))


def _case_lu(n: int, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    dense = rng.uniform(-1.0, 1.0, (n, n)) * (rng.uniform(size=(n, n)) < 0.5) + 3.0 * np.eye(n)
    return factorize(dense)


def _lu_cases() -> tuple[Case, ...]:
    return (
        Case((_case_lu(4, 0), Arg((4,)), "N")),
        Case((_case_lu(3, 1), Arg((3, 2)), "T")),
    )


register(
    Rule(
        "lu_solve",
        _lu_solve_forward,
        vjps={1: _lu_solve_vjp},
        jvps={1: _lu_solve_jvp},
        nondiff_args=frozenset({0, 2, "trans"}),
        arg_names=("lu", "b", "trans"),
        cases=cast(tuple, DeferredCases(_lu_cases)),
        convention="constant factors; differentiable in b",
        family=_FAMILY,
        # The inverse of a sparse matrix is generically dense.
        structure=DENSE_LINEAR,
    ),
    lu_solve,
)


# ---------------------------------------------------------------- csr_solve
def _matrix(data: Any, indices: Any, indptr: Any, shape: tuple) -> Any:
    import scipy.sparse as sp

    A = sp.csr_array((np.asarray(data), indices, indptr), shape=shape, copy=True)
    A.sum_duplicates()  # duplicate entries add, as in SciPy
    return A


#: The latest factorizations by the identity of their stored values: the reverse pass's
#: solve with ``A.T`` (and a repeated solve with the same matrix) reuses the forward's
#: factors. An entry is used only when values, structure and shape are equal to those
#: it was made from, and goes when its values' array is freed.
_RECENT: OrderedDict[int, tuple] = OrderedDict()
_RECENT_SIZE = 4
_RECENT_LOCK = threading.Lock()


def _forget(key: int, ref: weakref.ref) -> None:
    with _RECENT_LOCK:
        entry = _RECENT.get(key)
        if entry is not None and entry[0] is ref:
            del _RECENT[key]


def _factors_of(data: Any, indices: Any, indptr: Any, shape: tuple) -> Any:
    data = np.asarray(data)
    key = id(data)
    with _RECENT_LOCK:
        entry = _RECENT.get(key)
    if entry is not None:
        ref, values, saved_indices, saved_indptr, saved_shape, lu = entry
        if (
            ref() is data
            and saved_shape == tuple(shape)
            and np.array_equal(values, data)
            and np.array_equal(saved_indices, indices)
            and np.array_equal(saved_indptr, indptr)
        ):
            with _RECENT_LOCK:
                if key in _RECENT:
                    _RECENT.move_to_end(key)
            return lu
    lu = factorize(_matrix(data, indices, indptr, shape))
    ref = weakref.ref(data, functools.partial(_forget, key))
    saved = (ref, data.copy(), np.array(indices), np.array(indptr), tuple(shape), lu)
    with _RECENT_LOCK:
        _RECENT[key] = saved
        while len(_RECENT) > _RECENT_SIZE:
            _RECENT.popitem(last=False)
    return lu


def _csr_solve_forward(
    data: Any, indices: Any, indptr: Any, b: Any, shape: tuple, trans: bool = False
) -> Any:
    lu = _factors_of(data, indices, indptr, shape)
    mode = "T" if trans else "N"
    return _columns(b, lambda flat: lu.solve(np.ascontiguousarray(flat), trans=mode))


csr_solve = dispatching(_csr_solve_forward)
csr_solve.public_name = "funcdiff.sparse.linalg.spsolve"  # type: ignore[attr-defined]


def entry_rows(indptr: Any) -> np.ndarray:
    """The row of every stored entry of a CSR structure."""
    indptr = np.asarray(indptr)
    return np.repeat(np.arange(indptr.size - 1), np.diff(indptr))


def _csr_solve_vjp_all(
    needs: tuple, g: Any, ans: Any, data: Any, indices: Any, indptr: Any, b: Any, shape: tuple,
    trans: bool = False,
) -> tuple:  # fmt: skip
    nb = batch_ndim(g, ans)
    # b_bar solves with the transpose: one solve serves both cotangents.
    b_bar = _batch_last(lambda v: csr_solve(data, indices, indptr, v, shape, not trans), g, nb)
    data_bar = None
    if needs[0]:
        rows, cols = entry_rows(indptr), np.asarray(indices)
        # A x = b: the entry at (i, j) gets -b_bar[i] x[j]; A.T x = b: -b_bar[j] x[i].
        at_bar, at_x = (cols, rows) if trans else (rows, cols)
        products = np.take(b_bar, at_bar, axis=nb) * np.take(ans, at_x, axis=0)
        data_bar = -products
        if np.ndim(ans) > 1:  # the columns of a 2-d b add up
            data_bar = np.sum(data_bar, axis=tuple(range(nb + 1, np.ndim(products))))
    return (data_bar, None, None, b_bar if needs[3] else None, None, None)


def _case_triangular(n: int) -> tuple:
    """A lower-triangular CSR structure (its entries drawn in [1, 2]: nonsingular)."""
    rows, cols = np.tril_indices(n)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    return cols, indptr, len(cols)


_TRI_INDICES, _TRI_INDPTR, _TRI_NNZ = _case_triangular(3)
_TRI_DATA = Arg((_TRI_NNZ,), 1.0, 2.0)

register(
    Rule(
        "csr_solve",
        _csr_solve_forward,
        vjp_all=_csr_solve_vjp_all,
        nondiff_args=frozenset({1, 2, 4, 5, "trans"}),
        arg_names=("data", "indices", "indptr", "b", "shape", "trans"),
        cases=(
            Case((_TRI_DATA, _TRI_INDICES, _TRI_INDPTR, Arg((3,)), (3, 3), False)),
            Case((_TRI_DATA, _TRI_INDICES, _TRI_INDPTR, Arg((3, 2)), (3, 3), True)),
        ),
        convention="differentiable in the stored values and in b; duplicates add",
        family=_FAMILY,
        structure=DENSE,
    ),
    csr_solve,
)
