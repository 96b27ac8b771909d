"""Differentiable ``scipy.signal.convolve`` and ``scipy.signal.correlate`` that accept Tensors.

SciPy does not implement NumPy's dispatch protocol (NEP 18), so
``scipy.signal.convolve(t, k)`` cannot reach funcdiff: SciPy converts ``t`` to an
ndarray, which a Tensor that requires grad refuses with a ``RuntimeError`` (the
gradient would be lost). Call the functions of this module instead. They take the same
arguments; with plain arrays they return SciPy's result, with a Tensor argument the call
is recorded and differentiable to any order in both inputs.

NumPy's 1-D ``np.convolve`` and ``np.correlate`` dispatch by themselves and need no
wrapper.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> from funcdiff import signal
>>> x = fd.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> k = np.array([[0.0, 1.0], [1.0, 0.0]])
>>> y = signal.convolve(x, k, mode="valid")
>>> y
tensor([[5.]], grad_fn=<GetitemBackward>)
>>> fd.grad(y[0, 0], x)[0]
tensor([[0., 1.],
        [1., 0.]])
"""

from __future__ import annotations

from numpy.typing import ArrayLike

from funcdiff._core.tensor import Tensor
from funcdiff.rules import signal as _rules

__all__ = ["convolve", "correlate"]


def convolve(
    in1: ArrayLike | Tensor, in2: ArrayLike | Tensor, mode: str = "full", method: str = "auto"
) -> ArrayLike | Tensor:
    """N-dimensional convolution, as ``scipy.signal.convolve``, differentiable in both inputs.

    Parameters
    ----------
    in1, in2 : array_like or Tensor
        Real inputs with the same number of dimensions.
    mode : {'full', 'same', 'valid'}
        ``'full'``: every overlap (shape ``s1 + s2 - 1``); ``'same'``: the centre of the
        full result, shaped like ``in1``; ``'valid'``: only complete overlaps (shape
        ``|s1 - s2| + 1``; one input must be at least as large as the other along every
        axis).
    method : {'auto', 'direct', 'fft'}
        As in SciPy; the derivatives use the same method.

    Returns
    -------
    ndarray or Tensor
        The convolution; a Tensor when an input is one.

    Notes
    -----
    Every mode is a crop of the full convolution. The cotangent of the full convolution
    with respect to ``in1`` is the valid correlation of the cotangent with ``in2`` (a
    full convolution with the flipped ``in2``, cropped to ``in1``'s shape), and
    symmetrically for ``in2``: each derivative costs about one more convolution.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.signal import convolve
    >>> a = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = convolve(a, np.array([0.5, 0.5]), mode="valid")  # a moving average
    >>> y
    tensor([1.5, 2.5], grad_fn=<GetitemBackward>)
    >>> np.sum(y).backward()
    >>> a.grad
    tensor([0.5, 1. , 0.5])
    """
    return _rules.scipy_convolve(in1, in2, mode, method)


def correlate(
    in1: ArrayLike | Tensor, in2: ArrayLike | Tensor, mode: str = "full", method: str = "auto"
) -> ArrayLike | Tensor:
    """N-dimensional cross-correlation, as ``scipy.signal.correlate``, differentiable in both.

    Parameters
    ----------
    in1, in2 : array_like or Tensor
        Real inputs with the same number of dimensions.
    mode : {'full', 'same', 'valid'}
        As in :func:`convolve`.
    method : {'auto', 'direct', 'fft'}
        As in SciPy.

    Returns
    -------
    ndarray or Tensor
        ``z[k] = sum_n in1[n + k] in2[n]`` over the window of ``mode``.

    Notes
    -----
    A correlation is the convolution of ``in1`` with ``in2`` flipped along every axis;
    its derivatives are those of :func:`convolve`.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.signal import correlate
    >>> k = fd.tensor([1.0, -1.0], requires_grad=True)
    >>> y = correlate(np.array([0.0, 1.0, 4.0]), k, mode="valid")
    >>> y
    tensor([-1., -3.], grad_fn=<GetitemBackward>)
    >>> fd.grad(np.sum(y), k)[0]
    tensor([1., 5.])
    """
    return _rules.scipy_correlate(in1, in2, mode, method)
