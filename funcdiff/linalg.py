"""Differentiable ``scipy.linalg`` functions that accept Tensors.

NumPy's linear algebra dispatches to funcdiff by itself: ``a @ b``, ``np.dot``,
``np.einsum``, ``np.tensordot``, ``np.linalg.solve``, ``inv``, ``det``, ``slogdet``,
``cholesky``, ``eigh``, ``svd``, ``qr``, ``pinv``, ``lstsq``, ``matrix_power`` ... called
on Tensors are recorded and differentiable to any order.

SciPy does not implement NumPy's dispatch protocol (NEP 18), so ``scipy.linalg.expm(t)``
cannot reach funcdiff: SciPy converts ``t`` to an ndarray, which a Tensor that requires
grad refuses with a ``RuntimeError`` (the gradient would be lost). Call the functions of
this module instead. They take Tensors or arrays: with plain arrays they return exactly
SciPy's result; with a Tensor argument the call is recorded and differentiable to any
order. Arguments that SciPy uses to overwrite its inputs are accepted and ignored.

Conventions
-----------
* Functions that read one triangle of a symmetric matrix (``cho_factor``, ``solve`` and
  ``inv`` with ``assume_a`` in ``'sym'``, ``'her'``, ``'pos'``) return the symmetric
  gradient (as torch and JAX do): the gradient with respect to the symmetric matrix the
  triangle stands for, correct along symmetric perturbations. The same holds for
  ``np.linalg.cholesky``, ``eigh``, ``eigvalsh``.
* Functions that read a triangle, a band or the diagonal of a general matrix
  (``solve_triangular``, ``cho_solve``, ``assume_a='upper triangular'`` ...) have their
  gradient on exactly those entries: the others do not influence the result.

Examples
--------
>>> import scipy.linalg
>>> import funcdiff as fd
>>> from funcdiff import linalg
>>> a = fd.tensor([[0.0, 1.0], [-1.0, 0.0]], requires_grad=True)
>>> linalg.expm(a)  # a rotation by one radian
tensor([[ 0.54030231,  0.84147098],
        [-0.84147098,  0.54030231]], grad_fn=<ScipyLinalgExpmBackward>)
>>> scipy.linalg.expm(a)
Traceback (most recent call last):
...
RuntimeError: Can't convert a Tensor that requires grad to an ndarray: ...
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from funcdiff._core.tensor import Tensor
from funcdiff.rules import scipy_linalg as _rules

__all__ = ["expm", "solve_triangular", "cho_factor", "cho_solve", "solve", "inv", "det"]


def expm(a: ArrayLike | Tensor) -> np.ndarray | Tensor:
    """Matrix exponential, as ``scipy.linalg.expm``, differentiable to any order.

    Parameters
    ----------
    a : (..., n, n) array_like or Tensor
        Square matrix or stack of square matrices.

    Returns
    -------
    ndarray or Tensor
        ``exp(a)``; a Tensor when ``a`` is one.

    Notes
    -----
    The gradient is the adjoint Fréchet derivative ``L(a^T, G)``, computed as the
    upper-right block of ``expm([[a^T, G], [0, a^T]])``. That is ``expm`` again, so
    every order is available (each order doubles the size of the matrix).

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.linalg import expm
    >>> a = fd.tensor([[1.0, 2.0], [0.0, -1.0]], requires_grad=True)
    >>> (g,) = fd.grad(np.einsum("ii", expm(a)), a)   # d trace(exp A) = exp(A)^T
    >>> np.allclose(g.data, expm(a.detach()).data.T)
    True
    """
    return _rules.expm(a)


def solve_triangular(
    a: ArrayLike | Tensor,
    b: ArrayLike | Tensor,
    trans: int | str = 0,
    lower: bool = False,
    unit_diagonal: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
) -> np.ndarray | Tensor:
    """Solve ``op(a) x = b`` for triangular ``a``, as ``scipy.linalg.solve_triangular``.

    Parameters
    ----------
    a : (..., M, M) array_like or Tensor
        Triangular matrix; only the triangle given by ``lower`` is read (and not its
        diagonal when ``unit_diagonal``).
    b : (..., M) or (..., M, K) array_like or Tensor
        Right-hand side: a vector when 1-D, otherwise a (stack of) matrices.
    trans : {0, 1, 2, 'N', 'T', 'C'}
        Solve ``a x = b`` (0, 'N') or ``a^T x = b`` (1, 'T', 2, 'C').
    lower, unit_diagonal, check_finite : bool
        As in SciPy. ``overwrite_b`` is ignored.

    Returns
    -------
    ndarray or Tensor
        ``x``, shaped like ``b`` (broadcast over the stacks).

    Notes
    -----
    The gradient with respect to ``a`` lives on the triangle that is read; the other
    entries get zero, since they do not influence ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.linalg import solve_triangular
    >>> a = fd.tensor([[2.0, 0.0], [1.0, 4.0]], requires_grad=True)
    >>> x = solve_triangular(a, np.array([2.0, 9.0]), lower=True)
    >>> x
    tensor([1., 2.], grad_fn=<ScipyLinalgSolveTriangularBackward>)
    >>> fd.grad(x.sum(), a)[0]
    tensor([[-0.375,  0.   ],
            [-0.25 , -0.5  ]])
    """
    return _rules.solve_triangular(a, b, trans, lower, unit_diagonal, overwrite_b, check_finite)


def cho_factor(
    a: ArrayLike | Tensor,
    lower: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
) -> tuple[np.ndarray | Tensor, Any]:
    """Cholesky factor for :func:`cho_solve`, as ``scipy.linalg.cho_factor``.

    Parameters
    ----------
    a : (..., M, M) array_like or Tensor
        Symmetric positive-definite matrix; only the triangle given by ``lower`` is read.
    lower : bool
        Return the lower factor ``L`` (``a = L L^T``) instead of the upper one.
    overwrite_a, check_finite : bool
        ``overwrite_a`` is ignored; ``check_finite`` as in SciPy.

    Returns
    -------
    (c, lower)
        ``c`` holds the factor in one triangle; its other triangle holds the entries of
        ``a`` (SciPy calls them arbitrary), which pass their gradient straight through.

    Notes
    -----
    The gradient follows the symmetric convention (as torch and JAX): it is taken with
    respect to the symmetric matrix the read triangle stands for.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.linalg import cho_factor, cho_solve
    >>> a = fd.tensor([[4.0, 2.0], [2.0, 3.0]], requires_grad=True)
    >>> x = cho_solve(cho_factor(a), np.array([1.0, 0.0]))
    >>> np.allclose(x.data, np.linalg.solve(a.data, [1.0, 0.0]))
    True
    """
    return _rules.cho_factor(a, lower, overwrite_a, check_finite)


def cho_solve(
    c_and_lower: tuple[Any, Any],
    b: ArrayLike | Tensor,
    overwrite_b: bool = False,
    check_finite: bool = True,
) -> np.ndarray | Tensor:
    """Solve ``a x = b`` from the factor of :func:`cho_factor`, as ``scipy.linalg.cho_solve``.

    Parameters
    ----------
    c_and_lower : (c, lower)
        The result of :func:`cho_factor`; ``c`` may be a Tensor.
    b : (..., M) or (..., M, K) array_like or Tensor
        Right-hand side: a vector when 1-D, otherwise a (stack of) matrices.
    overwrite_b, check_finite : bool
        ``overwrite_b`` is ignored; ``check_finite`` as in SciPy.

    Returns
    -------
    ndarray or Tensor
        ``x``.

    Notes
    -----
    The gradient with respect to ``c`` lives on the triangle that holds the factor.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.linalg import cho_solve
    >>> c = fd.tensor([[2.0, 0.0], [1.0, 1.0]], requires_grad=True)   # a = c c^T
    >>> cho_solve((c, True), np.array([6.0, 4.0]))
    tensor([1., 1.], grad_fn=<ScipyLinalgChoSolveBackward>)
    """
    return _rules.cho_solve(c_and_lower, b, overwrite_b, check_finite)


def solve(
    a: ArrayLike | Tensor,
    b: ArrayLike | Tensor,
    lower: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
    assume_a: str | None = None,
    transposed: bool = False,
) -> np.ndarray | Tensor:
    """Solve ``a x = b``, as ``scipy.linalg.solve`` (including ``assume_a``).

    Parameters
    ----------
    a : (..., N, N) array_like or Tensor
        Square matrix.
    b : (..., N) or (..., N, K) array_like or Tensor
        Right-hand side: a vector when 1-D, otherwise a (stack of) matrices.
    lower, check_finite, assume_a, transposed
        As in SciPy; ``overwrite_a`` and ``overwrite_b`` are ignored.

    Returns
    -------
    ndarray or Tensor
        ``x``.

    Notes
    -----
    With ``assume_a`` naming a structure (``'diagonal'``, ``'tridiagonal'``,
    ``'upper triangular'``, ``'lower triangular'``) the gradient lives on the entries the
    solver reads; ``'sym'``, ``'her'`` and ``'pos'`` give the symmetric gradient; ``None``,
    ``'gen'`` and ``'banded'`` give the full gradient ``-inv(a)^T g x^T``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import linalg
    >>> a = fd.tensor([[3.0, 1.0], [1.0, 2.0]], requires_grad=True)
    >>> x = linalg.solve(a, np.array([9.0, 8.0]), assume_a="pos")
    >>> x
    tensor([2., 3.], grad_fn=<ScipyLinalgSolveBackward>)
    """
    return _rules.scipy_solve(
        a, b, lower, overwrite_a, overwrite_b, check_finite, assume_a, transposed
    )


def inv(
    a: ArrayLike | Tensor,
    overwrite_a: bool = False,
    check_finite: bool = True,
    **structure: Any,
) -> np.ndarray | Tensor:
    """Matrix inverse, as ``scipy.linalg.inv``.

    Parameters
    ----------
    a : (..., N, N) array_like or Tensor
        Square matrix.
    overwrite_a, check_finite : bool
        ``overwrite_a`` is ignored; ``check_finite`` as in SciPy.
    **structure
        ``assume_a`` and ``lower``, on SciPy versions that have them; the gradient
        follows the same conventions as :func:`solve`.

    Returns
    -------
    ndarray or Tensor
        ``inv(a)``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import linalg
    >>> a = fd.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    >>> x = linalg.inv(a)
    >>> (g,) = fd.grad(x[0, 1], a)  # d inv(a)[0, 1] / d a[i, j] = -x[0, i] x[j, 1]
    >>> np.allclose(g.data, -np.outer(x.data[0], x.data[:, 1]))
    True
    """
    return _rules.scipy_inv(a, overwrite_a, check_finite, **structure)


def det(
    a: ArrayLike | Tensor, overwrite_a: bool = False, check_finite: bool = True
) -> np.ndarray | Tensor:
    """Determinant, as ``scipy.linalg.det``; the gradient is ``adj(a)^T``.

    Parameters
    ----------
    a : (..., N, N) array_like or Tensor
        Square matrix of any rank: the gradient is ``det(a) inv(a)^T`` for a
        well-conditioned ``a`` and the adjugate (cofactors) otherwise, which also
        exists at singular matrices (as for ``np.linalg.det``).
    overwrite_a, check_finite : bool
        ``overwrite_a`` is ignored; ``check_finite`` as in SciPy.

    Returns
    -------
    ndarray or Tensor
        ``det(a)``.

    Examples
    --------
    >>> import funcdiff as fd
    >>> from funcdiff import linalg
    >>> a = fd.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    >>> fd.grad(linalg.det(a), a)[0]
    tensor([[ 3., -1.],
            [-1.,  2.]])
    """
    return _rules.scipy_det(a, overwrite_a, check_finite)
