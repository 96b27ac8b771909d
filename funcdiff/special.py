"""Special functions that work on Tensors as well as on arrays.

The ufuncs of ``scipy.special`` (``gammaln``, ``erf``, ``expit``, ``jv``, ...) run on
Tensors as they are: NumPy hands the call to the Tensor, which applies the registered
derivative rule, and every one of them is re-exported here (``from funcdiff.special
import gammaln``). The functions here cover what SciPy does not dispatch:

* :func:`logsumexp`, :func:`softmax` and :func:`log_softmax`, with
  ``scipy.special``'s signatures and its numerical stability;
* :func:`polygamma` and :func:`multigammaln`, which are Python functions in SciPy;
* :func:`zeta`, the same function as ``scipy.special.zeta`` (which runs on Tensors as
  called: its ufuncs have rules), differentiable in ``x`` and ``q``.

Each accepts array_like input. When any input is a Tensor the result is computed with
recorded NumPy calls, so it can be differentiated to any order, and comes back as
Tensors; otherwise the call goes to ``scipy.special`` and returns exactly what SciPy
returns.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> from funcdiff import special
>>> x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> (g,) = fd.grad(special.logsumexp(x), x)
>>> np.allclose(g.data, special.softmax(x.data))
True
"""

from __future__ import annotations

from typing import Any

import scipy.special as sp

from funcdiff._core.tensor import Tensor
from funcdiff.rules import special as _rules

__all__ = ["logsumexp", "softmax", "log_softmax", "polygamma", "multigammaln", "zeta"]


def _any_tensor(*values: Any) -> bool:
    return any(isinstance(v, Tensor) for v in values)


def logsumexp(
    a: Any,
    axis: int | tuple[int, ...] | None = None,
    b: Any = None,
    keepdims: bool = False,
    return_sign: bool = False,
) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis``, computed without overflow.

    Same signature and values as ``scipy.special.logsumexp``. On Tensors every order
    of derivative is exact: the shift by the maximum is a constant, so it changes no
    derivative, and the gradient is ``b * exp(a - logsumexp(a))`` (times the sign).

    Parameters
    ----------
    a : array_like or Tensor
        Input values; ``-inf`` entries contribute nothing and get gradient 0.
    axis : int or tuple of int, optional
        Axes to reduce over; all axes by default.
    b : array_like or Tensor, optional
        Weights, broadcast against ``a``; may contain zeros (the entry is ignored, as
        in SciPy, even if ``a`` is inf or NaN there) and negative values.
    keepdims : bool
        Keep the reduced axes with length one.
    return_sign : bool
        Also return the sign of the sum; then the first result is ``log|sum|``.
        Without it a negative sum gives NaN, as in SciPy.

    Returns
    -------
    res : Tensor or ndarray
        ``log|sum(b * exp(a))|``. A slice whose sum is 0 (all entries ``-inf``, or
        weights that cancel exactly) gives ``-inf`` with gradient 0, not NaN.
    sgn : Tensor or ndarray
        The sign (+1, -1, or 0 for a zero sum), only with ``return_sign=True``.
        It is a constant; SciPy returns -1 for an empty sum, this function 0.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.special import logsumexp
    >>> a = fd.tensor([1000.0, 1000.0], requires_grad=True)
    >>> y = logsumexp(a)
    >>> y
    tensor(1000.69314718, grad_fn=<SqueezeBackward>)
    >>> y.backward()
    >>> a.grad
    tensor([0.5, 0.5])
    >>> logsumexp(np.array([0.0, 1.0]), b=np.array([1.0, -1.0]), return_sign=True)
    (np.float64(0.541324854612918...), np.float64(-1.0))
    """
    if _any_tensor(a, b):
        return _rules.logsumexp_tensor(a, axis, b, keepdims, return_sign)
    return sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


def softmax(x: Any, axis: int | tuple[int, ...] | None = None) -> Any:
    """``exp(x) / sum(exp(x))`` over ``axis``, computed without overflow.

    Same signature and values as ``scipy.special.softmax`` (NaN for a slice of all
    ``-inf``). Its Jacobian along the axis is ``diag(s) - s s^T``.

    %(normalise_parameters)s

    Returns
    -------
    Tensor or ndarray
        Non-negative values that sum to 1 over ``axis``.

    Examples
    --------
    >>> import funcdiff as fd
    >>> from funcdiff.special import softmax
    >>> x = fd.tensor([0.0, 0.0], requires_grad=True)
    >>> s = softmax(x)
    >>> s
    tensor([0.5, 0.5], grad_fn=<DivideBackward>)
    >>> fd.grad(s[0], x)[0]
    tensor([ 0.25, -0.25])
    """
    if _any_tensor(x):
        return _rules.softmax_tensor(x, axis)
    return sp.softmax(x, axis=axis)


def log_softmax(x: Any, axis: int | tuple[int, ...] | None = None) -> Any:
    """``x - logsumexp(x)`` over ``axis``, computed without overflow.

    Same signature and values as ``scipy.special.log_softmax``; ``-inf`` entries stay
    ``-inf``. Its Jacobian along the axis is ``I - 1 s^T`` with ``s = softmax(x)``.

    %(normalise_parameters)s

    Returns
    -------
    Tensor or ndarray
        The logarithm of :func:`softmax`.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.special import log_softmax
    >>> x = fd.tensor([1.0, 1.0], requires_grad=True)
    >>> bool(np.allclose(log_softmax(x).data, -np.log(2.0)))
    True
    >>> fd.grad(log_softmax(x)[0], x)[0]
    tensor([ 0.5, -0.5])
    """
    if _any_tensor(x):
        return _rules.log_softmax_tensor(x, axis)
    return sp.log_softmax(x, axis=axis)


def polygamma(n: Any, x: Any) -> Any:
    """The polygamma function ``psi^(n)(x)``, the n-th derivative of ``digamma``.

    ``scipy.special.polygamma`` that also runs on Tensors: the derivative with
    respect to ``x`` is ``polygamma(n + 1, x)``, so every order works. ``n`` is an
    integer order (a constant).

    Parameters
    ----------
    n : array_like of int
        Order of the derivative of ``digamma`` (0 gives ``digamma`` itself).
    x : array_like or Tensor
        Real argument.

    Returns
    -------
    Tensor or ndarray

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.special import polygamma
    >>> x = fd.tensor(1.0, requires_grad=True)
    >>> (d,) = fd.grad(polygamma(1, x), x)
    >>> bool(np.isclose(d.data, -2.0 * 1.2020569031595942))  # -2 zeta(3)
    True
    """
    return _rules.polygamma(n, x)


def multigammaln(a: Any, d: int) -> Any:
    """The logarithm of the multivariate gamma function of dimension ``d``.

    ``scipy.special.multigammaln`` that also runs on Tensors: the derivative with
    respect to ``a`` is ``sum(digamma(a - j / 2) for j in range(d))``.

    Parameters
    ----------
    a : array_like or Tensor
        Argument, ``a > (d - 1) / 2``.
    d : int
        Dimension (a constant).

    Returns
    -------
    Tensor or ndarray

    Raises
    ------
    ValueError
        If ``d`` is not a positive integer or some ``a <= (d - 1) / 2`` (from SciPy).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.special as sp
    >>> import funcdiff as fd
    >>> from funcdiff.special import multigammaln
    >>> a = fd.tensor(3.0, requires_grad=True)
    >>> (g,) = fd.grad(multigammaln(a, 2), a)
    >>> bool(np.isclose(g.data, sp.digamma(3.0) + sp.digamma(2.5)))
    True
    """
    return _rules.multigammaln(a, d)


def zeta(x: Any, q: Any = None) -> Any:
    """The Hurwitz zeta function ``sum_{k >= 0} (k + q)^(-x)``; Riemann's without ``q``.

    ``scipy.special.zeta``, which also runs on Tensors when called directly. The
    derivative in ``q`` is ``-x zeta(x + 1, q)``; the derivatives in ``x``,
    ``sum (-ln(k + q))^n (k + q)^(-x)``, have no closed form and are computed by
    Euler-Maclaurin summation to a few units in the last place (about 24 terms and
    series of length n + 1 per element), at every order.

    Parameters
    ----------
    x : array_like or Tensor
        Exponent; ``x > 1`` with ``q`` (SciPy gives NaN below), any ``x != 1`` without.
    q : array_like or Tensor, optional
        Shift, ``q > 0``; Riemann's zeta (``q = 1``) when omitted.

    Returns
    -------
    Tensor or ndarray

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.special import zeta
    >>> x = fd.tensor(2.0, requires_grad=True)
    >>> (d,) = fd.grad(zeta(x), x)
    >>> bool(np.isclose(d.data, -0.9375482543158437, rtol=1e-15))  # zeta'(2)
    True
    """
    return sp.zeta(x) if q is None else sp.zeta(x, q)


# softmax's and log_softmax's parameters, the same for both.
_NORMALISE_PARAMETERS = """Parameters
    ----------
    x : array_like or Tensor
        Input values.
    axis : int or tuple of int, optional
        Axes to normalise over; all axes by default."""
for _f in (softmax, log_softmax):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ %= {"normalise_parameters": _NORMALISE_PARAMETERS}
del _f


def _scipy_ufunc(name: str) -> Any:
    """``scipy.special``'s ufunc ``name``, or None."""
    import numpy as np

    value = getattr(sp, name, None) if not name.startswith("_") else None
    return value if isinstance(value, np.ufunc) else None


def __getattr__(name: str) -> Any:
    # Every ufunc of scipy.special is re-exported (``from funcdiff.special import
    # gammaln``): ufuncs run on Tensors as they are, through their derivative rules.
    ufunc = _scipy_ufunc(name)
    if ufunc is None:
        raise AttributeError(f"module 'funcdiff.special' has no attribute {name!r}")
    return ufunc


def __dir__() -> list[str]:
    return sorted(set(globals()) | {n for n in dir(sp) if _scipy_ufunc(n) is not None})
