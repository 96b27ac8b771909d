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
  ``np.linalg.cholesky`` and for ``svd``/``pinv`` with ``hermitian=True``.
* ``np.linalg.eigh``, ``np.linalg.eigvalsh`` and, by default, :func:`eigh` and
  :func:`eigvalsh` differentiate the function NumPy or SciPy computes: the gradient
  lives on the triangle that is read and is zero on the other (the *one-triangle*
  gradient, as in HIPS autograd), so it agrees with finite differences along every
  direction, symmetric or not. ``gradient="symmetric"`` gives the symmetric gradient
  instead (see :func:`eigh` for when to use which).
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
from funcdiff.rules import matrix_equations as _equations
from funcdiff.rules import scipy_linalg as _rules

__all__ = [
    "expm",
    "solve_triangular",
    "cho_factor",
    "cho_solve",
    "solve",
    "inv",
    "det",
    "eigh",
    "eigvalsh",
    "sqrtm",
    "solve_sylvester",
    "solve_banded",
]

_RIGHT_HAND_SIDE = """b : (..., {n}) or (..., {n}, K) array_like or Tensor
        Right-hand side: a vector when 1-D, otherwise a (stack of) matrices."""
# Parameter entries that several docstrings share, filled in below the functions.
_DOC = {
    "b_M": _RIGHT_HAND_SIDE.format(n="M"),
    "b_N": _RIGHT_HAND_SIDE.format(n="N"),
    "overwrite_a": """overwrite_a, check_finite : bool
        ``overwrite_a`` is ignored; ``check_finite`` as in SciPy.""",
}


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
    %(b_M)s
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
    %(overwrite_a)s

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
    %(b_M)s
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
    %(b_N)s
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
    %(overwrite_a)s
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
    %(overwrite_a)s

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


def eigh(
    a: ArrayLike | Tensor,
    b: None = None,
    *,
    lower: bool = True,
    eigvals_only: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
    gradient: str = "triangle",
) -> Any:
    """Eigenvalues and eigenvectors of a symmetric matrix, as ``scipy.linalg.eigh``.

    Parameters
    ----------
    a : (..., M, M) array_like or Tensor
        Real symmetric matrix; only the triangle given by ``lower`` (with the diagonal)
        is read.
    b : None
        Only the standard problem is supported: the generalized one (``b`` given)
        raises ``NotImplementedError``.
    lower, eigvals_only, check_finite : bool
        As in SciPy. ``overwrite_a`` and ``overwrite_b`` are ignored.
    gradient : {"triangle", "symmetric"}
        Which derivative to return (the values are the same):

        * ``"triangle"`` (default): the gradient of the function SciPy computes, with
          respect to the entries it reads. It lives on the triangle that is read, is zero
          on the other, and matches finite differences along every direction. Its
          off-diagonal entries are twice those of the symmetric gradient, because each
          entry read stands for two entries of the symmetric matrix.
        * ``"symmetric"``: the gradient with respect to the symmetric matrix the triangle
          stands for, returned symmetric (the torch and JAX convention). Use it when
          ``a`` is symmetric by construction (``a = b + b.T``, a Hessian, a covariance)
          and the gradient is read as a symmetric matrix, e.g. for a step that must keep
          ``a`` symmetric. Along symmetric directions both conventions give the same
          directional derivative, so ``a = b + b.T`` gets the same gradient for ``b``
          from both.

    Returns
    -------
    w : (..., M) ndarray or Tensor
        The eigenvalues in ascending order.
    v : (..., M, M) ndarray or Tensor
        The eigenvectors, as columns (not returned when ``eigvals_only``).

    Notes
    -----
    The vector gradients contain ``1 / (w_j - w_i)``; for (near-)equal eigenvalues the
    factor is set to 0, so every order stays finite. Functions of the values alone
    (``sum(f(w))``) are exact even then; through the vectors of a repeated eigenvalue the
    derivative does not exist. Each order costs one eigendecomposition and a few matrix
    products.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import linalg
    >>> a = fd.tensor([[2.0, 9.0], [1.0, 2.0]], requires_grad=True)  # reads [[2, 1], [1, 2]]
    >>> w = linalg.eigh(a, eigvals_only=True)
    >>> w
    tensor([1., 3.], grad_fn=<ScipyLinalgEighBackward>)
    >>> fd.grad(w[1], a)[0]   # the upper triangle is not read
    tensor([[0.5, 0. ],
            [1. , 0.5]])
    >>> fd.grad(linalg.eigh(a, eigvals_only=True, gradient="symmetric")[1], a)[0]
    tensor([[0.5, 0.5],
            [0.5, 0.5]])
    """
    return _rules.scipy_eigh(
        a,
        b,
        lower=lower,
        eigvals_only=eigvals_only,
        overwrite_a=overwrite_a,
        overwrite_b=overwrite_b,
        check_finite=check_finite,
        gradient=gradient,
    )


def eigvalsh(
    a: ArrayLike | Tensor,
    b: None = None,
    *,
    lower: bool = True,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
    gradient: str = "triangle",
) -> np.ndarray | Tensor:
    """Eigenvalues of a symmetric matrix, as ``scipy.linalg.eigvalsh``.

    ``eigh(a, ..., eigvals_only=True)``: the parameters and the two ``gradient``
    conventions are those of :func:`eigh`.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import linalg
    >>> a = fd.tensor([[2.0, 0.0], [1.0, 2.0]], requires_grad=True)
    >>> (g,) = fd.grad(np.sum(linalg.eigvalsh(a) ** 2), a)   # 2 a on the lower triangle
    >>> g
    tensor([[4., 0.],
            [4., 4.]])
    """
    return eigh(
        a,
        b,
        lower=lower,
        eigvals_only=True,
        overwrite_a=overwrite_a,
        overwrite_b=overwrite_b,
        check_finite=check_finite,
        gradient=gradient,
    )


def sqrtm(a: ArrayLike | Tensor) -> np.ndarray | Tensor:
    """Principal matrix square root, as ``scipy.linalg.sqrtm``, differentiable to any
    order, for real and complex matrices.

    Parameters
    ----------
    a : (..., N, N) array_like or Tensor
        Square matrix (or a stack of them).

    Returns
    -------
    ndarray or Tensor
        ``X`` with ``X @ X = a``: complex where ``a`` has negative real eigenvalues, as
        SciPy's.

    Notes
    -----
    The vjp solves one Sylvester equation, ``X^T Y + Y X^T = G``, with
    :func:`solve_sylvester`, which is differentiable in turn. A singular square root
    (``a`` singular) has no derivative: SciPy's solver then warns or fails.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import linalg
    >>> a = fd.tensor([[4.0, 1.0], [1.0, 3.0]], requires_grad=True)
    >>> x = linalg.sqrtm(a)
    >>> np.allclose((x @ x).data, a.data)
    True
    """
    return _equations.sqrtm(a)


def solve_sylvester(
    a: ArrayLike | Tensor, b: ArrayLike | Tensor, q: ArrayLike | Tensor
) -> np.ndarray | Tensor:
    """Solve ``a @ x + x @ b = q``, as ``scipy.linalg.solve_sylvester``, differentiable
    to any order in all three arguments, for real and complex matrices.

    Parameters
    ----------
    a : (..., M, M) array_like or Tensor
    b : (..., N, N) array_like or Tensor
    q : (..., M, N) array_like or Tensor
        Stacks broadcast; each matrix is one SciPy solve.

    Returns
    -------
    ndarray or Tensor
        ``x``, (..., M, N).

    Notes
    -----
    The cotangent of ``q`` solves the transposed equation ``a^T y + y b^T = g``; those of
    ``a`` and ``b`` are ``-y x^T`` and ``-x^T y``. A solution needs ``a`` and ``-b`` to
    share no eigenvalue.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import linalg
    >>> q = fd.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> x = linalg.solve_sylvester(np.eye(2), 2.0 * np.eye(2), q)  # x = q / 3
    >>> fd.grad(x.sum(), q)[0]
    tensor([[0.33333333, 0.33333333],
            [0.33333333, 0.33333333]])
    """
    return _equations.solve_sylvester(a, b, q)


def solve_banded(
    l_and_u: tuple[int, int],
    ab: ArrayLike | Tensor,
    b: ArrayLike | Tensor,
    overwrite_ab: bool = False,
    overwrite_b: bool = False,
    check_finite: bool = True,
) -> np.ndarray | Tensor:
    """Solve ``a @ x = b`` for a banded ``a``, as ``scipy.linalg.solve_banded``,
    differentiable to any order in ``ab`` and ``b``.

    Parameters
    ----------
    l_and_u : (int, int)
        The numbers of nonzero lower and upper diagonals.
    ab : (l + u + 1, M) array_like or Tensor
        ``a`` in diagonal-ordered form: ``ab[u + i - j, j] == a[i, j]``.
    b : (M,) or (M, K) array_like or Tensor
        Right-hand side.
    overwrite_ab, overwrite_b, check_finite : bool
        The overwrite flags are ignored; ``check_finite`` as in SciPy.

    Returns
    -------
    ndarray or Tensor
        ``x``, shaped like ``b``.

    Notes
    -----
    The cotangent of ``b`` solves the banded system of ``a^T``; that of ``ab`` is
    ``-y x^T`` read on the band (the corners of ``ab`` the solver never reads get 0).

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff import linalg
    >>> ab = fd.tensor([[0.0, 1.0, 1.0], [4.0, 4.0, 4.0], [1.0, 1.0, 0.0]], requires_grad=True)
    >>> x = linalg.solve_banded((1, 1), ab, np.array([5.0, 6.0, 5.0]))
    >>> x
    tensor([1., 1., 1.], grad_fn=<ScipyLinalgSolveBandedBackward>)
    """
    return _equations.solve_banded(l_and_u, ab, b, check_finite=check_finite)


for _f in (solve_triangular, cho_factor, cho_solve, solve, inv, det):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ %= _DOC
del _f
