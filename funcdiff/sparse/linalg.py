"""Differentiable sparse solves, mirroring ``scipy.sparse.linalg``.

* :func:`spsolve` ``(A, b)``: differentiable with respect to ``b`` and, when ``A`` is a
  :class:`funcdiff.sparse.csr_array` with a Tensor ``data``, to ``A``'s stored values.
* :func:`splu` ``(A)``: a factorization whose ``.solve(b, trans="N" | "T")`` is
  differentiable with respect to ``b``; factor once, solve (and differentiate) many
  times.

Both factorize with SuperLU, as SciPy does. Derivatives are solves with the same
matrix: the gradient with respect to ``b`` of ``x = A^{-1} b`` is ``A^{-T} g`` and with
respect to the stored value at ``(i, j)`` it is ``-(A^{-T} g)[i] * x[j]``, one number per
stored value (the dense ``n x n`` gradient is never formed). Every order follows, as
the derivatives are recorded with the same operations. A singular matrix raises
``numpy.linalg.LinAlgError`` (``scipy.sparse.linalg.spsolve`` would warn and return
NaN).

Examples
--------
>>> import numpy as np
>>> import scipy.sparse as sp
>>> import funcdiff as fd
>>> import funcdiff.sparse as fs
>>> from funcdiff.sparse.linalg import spsolve
>>> A = sp.csc_array(np.array([[4.0, 1.0], [1.0, 3.0]]))
>>> b = fd.tensor([1.0, 2.0], requires_grad=True)
>>> x = spsolve(A, b)
>>> np.round(x.detach().numpy(), 6)
array([0.090909, 0.636364])
>>> x.sum().backward()
>>> np.round(b.grad.numpy(), 6)
array([0.181818, 0.272727])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from funcdiff._core.tensor import Tensor
from funcdiff.rules.sparse_linalg import csr_solve, factorize, lu_solve
from funcdiff.sparse.matrices import csr_array

__all__ = ["spsolve", "splu", "SuperLU"]


def _right_hand_side(b: Any, n: int, name: str) -> Any:
    if isinstance(b, (csr_array, sp.sparray, sp.spmatrix)):
        raise TypeError(f"{name}: a sparse right-hand side is not supported; pass a dense b")
    if not isinstance(b, Tensor):
        b = np.asarray(b)
    if np.ndim(b) not in (1, 2):
        raise ValueError(f"{name}: b must be 1-d or 2-d, got shape {np.shape(b)}")
    if np.shape(b)[0] != n:
        raise ValueError(f"{name}: matrix - rhs dimension mismatch ({(n, n)} - {np.shape(b)[0]})")
    return b


def _square(shape: tuple, name: str) -> int:
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name}: matrix must be square (has shape {tuple(shape)})")
    return int(shape[0])


def spsolve(A: Any, b: Any) -> Any:
    """Solve ``A x = b`` for a sparse ``A``; differentiable in ``b`` and ``A``'s values.

    Parameters
    ----------
    A : funcdiff.sparse.csr_array or scipy.sparse array or matrix
        Square. A :class:`~funcdiff.sparse.csr_array` whose ``data`` is a Tensor makes
        ``x`` differentiable with respect to the stored values; a scipy.sparse matrix
        is a constant.
    b : array_like or Tensor
        Shape ``(n,)`` or ``(n, k)``.

    Returns
    -------
    Tensor or ndarray
        ``x``, of SciPy's shape: ``(n,)`` for a vector ``b`` (``(n,)`` or ``(n, 1)``),
        ``(n, k)`` otherwise. An ndarray when neither ``A``'s values nor ``b`` is a Tensor.

    Raises
    ------
    ValueError
        ``A`` not square, or ``b``'s length differs from ``A``'s.
    numpy.linalg.LinAlgError
        ``A`` is exactly singular.

    Notes
    -----
    Each call factorizes ``A`` (SuperLU); the reverse pass factorizes ``A.T`` once and
    reuses that solve for both cotangents. To solve many right-hand sides with one
    factorization of a constant matrix, use :func:`splu`.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> import funcdiff.sparse as fs
    >>> data = fd.tensor([2.0, 1.0, 4.0], requires_grad=True)      # [[2, 1], [0, 4]]
    >>> A = fs.csr_array((data, [0, 1, 1], [0, 2, 3]), shape=(2, 2))
    >>> x = spsolve(A, np.array([3.0, 4.0]))
    >>> x
    tensor([1., 1.], grad_fn=<CsrSolveBackward>)
    >>> x.sum().backward()
    >>> data.grad                        # d(sum x)/d(value) per stored value
    tensor([-0.5  , -0.5  , -0.125])
    """
    if isinstance(A, csr_array):
        matrix = A
    elif isinstance(A, (sp.sparray, sp.spmatrix)):
        if A.ndim != 2:
            raise ValueError(f"spsolve: matrix must be square (has shape {A.shape})")
        converted = sp.csr_array(A)
        matrix = csr_array((converted.data, converted.indices, converted.indptr), converted.shape)
    else:
        raise TypeError(
            "spsolve: A must be a funcdiff.sparse.csr_array or a scipy.sparse array or "
            f"matrix, got {type(A).__name__}"
        )
    n = _square(matrix.shape, "spsolve")
    b = _right_hand_side(b, n, "spsolve")
    column = np.ndim(b) == 2 and np.shape(b)[1] == 1
    if column:
        b = np.reshape(b, (n,))  # SciPy returns a vector for a column b
    return csr_solve(matrix.data, matrix.indices, matrix.indptr, b, matrix.shape, False)


class SuperLU:
    """The LU factorization of a constant sparse matrix (from :func:`splu`).

    ``solve(b, trans)`` is differentiable with respect to ``b``, to any order; the
    attributes of SciPy's ``SuperLU`` (``shape``, ``nnz``, ``perm_r``, ``perm_c``,
    ``L``, ``U``) are those of the factorization it wraps.
    """

    def __init__(self, factors: Any) -> None:
        self.factors = factors

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self.factors.shape
        return int(m), int(n)

    def __getattr__(self, name: str) -> Any:
        if name in ("nnz", "perm_r", "perm_c", "L", "U"):
            return getattr(self.factors, name)
        raise AttributeError(name)

    def solve(self, b: Any, trans: str = "N") -> Any:
        """Solve ``A x = b`` (``trans="N"``) or ``A.T x = b`` (``trans="T"``).

        Parameters
        ----------
        b : array_like or Tensor
            Shape ``(n,)`` or ``(n, k)``; the result has the same shape.
        trans : {"N", "T", "H"}
            ``"H"`` (the conjugate transpose) equals ``"T"`` for a real matrix and is
            refused for a complex one.

        Examples
        --------
        >>> import numpy as np
        >>> import scipy.sparse as sp
        >>> import funcdiff as fd
        >>> lu = splu(sp.csc_array(np.array([[2.0, 1.0], [0.0, 4.0]])))
        >>> b = fd.tensor([3.0, 4.0], requires_grad=True)
        >>> lu.solve(b, trans="T")
        tensor([1.5  , 0.625], grad_fn=<LuSolveBackward>)
        """
        if trans not in ("N", "T", "H"):
            raise ValueError(f"trans must be N, T, or H, got {trans!r}")
        if trans == "H":
            if np.iscomplexobj(self.factors.L.data):
                raise NotImplementedError(
                    "SuperLU.solve(trans='H') of a complex matrix has no derivative in "
                    "funcdiff; conjugate and use trans='T'"
                )
            trans = "T"
        b = _right_hand_side(b, self.shape[0], "SuperLU.solve")
        return lu_solve(self.factors, b, trans)


def splu(A: Any, **options: Any) -> SuperLU:
    """The sparse LU factorization of a constant square matrix ``A``.

    Parameters
    ----------
    A : scipy.sparse array or matrix, or funcdiff.sparse.csr_array
        Square. A :class:`~funcdiff.sparse.csr_array` whose ``data`` requires grad is
        refused: the factors would be constants; use :func:`spsolve` to differentiate
        with respect to the matrix.
    **options
        Passed to ``scipy.sparse.linalg.splu`` (``permc_spec``, ``diag_pivot_thresh``,
        ``options`` ...).

    Returns
    -------
    SuperLU
        Whose ``solve(b, trans="N" | "T")`` is differentiable with respect to ``b``.

    Raises
    ------
    numpy.linalg.LinAlgError
        ``A`` is exactly singular.
    """
    if isinstance(A, csr_array):
        if isinstance(A.data, Tensor) and A.data.requires_grad:
            raise TypeError(
                "splu: A's stored values require grad, but the factors of splu are constants "
                "(derivatives with respect to them would be lost); use "
                "funcdiff.sparse.linalg.spsolve(A, b), differentiable in A's values"
            )
        A = A.to_scipy()
    elif not isinstance(A, (sp.sparray, sp.spmatrix)):
        raise TypeError(
            f"splu: A must be a scipy.sparse array or matrix or a funcdiff.sparse.csr_array, "
            f"got {type(A).__name__}"
        )
    _square(A.shape, "splu")
    return SuperLU(factorize(A, **options))
