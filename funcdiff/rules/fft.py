"""``numpy.fft``: the discrete Fourier transforms and their inverses, real and complex.

Every transform is linear, so its vjp is its transpose (forward mode transposes it
back). Cotangents may carry a leading batch axis: every axis here counts from the end.
The DFT matrix is symmetric: the transpose of ``fft(norm=m)`` is ``fft(norm=m)`` again
(``ifft`` likewise), followed by undoing the ``n``/``s`` padding or cropping. Inside a
backward pass a complex cotangent is ``dL/dx - i dL/dy`` (see
:mod:`funcdiff._core.registry`), so no conjugation appears:

* ``rfft`` is ``fft`` restricted to a real input and to the first ``n//2 + 1`` outputs:
  its transpose is ``fft`` of the zero-extended cotangent, whose real part the engine
  keeps for the real input;
* ``irfft`` is ``Re(B a)`` with ``B`` the first ``n//2 + 1`` columns of the inverse DFT,
  weighted 2 where a coefficient stands for itself and its mirror image: its transpose
  is those weights times ``ifft`` of the (real) cotangent;
* ``hfft``/``ihfft`` are ``irfft``/``rfft`` of conjugates (NumPy defines them so).

The n-dimensional versions compose these along their axes. Every vjp is made of FFTs,
indexing and padding, so each transform is differentiable to any order.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([1.0, 2.0, 0.5], requires_grad=True)
>>> np.sum(np.abs(np.fft.rfft(x)) ** 2).backward()
>>> np.round(x.grad.numpy(), 10)
array([6.5, 9.5, 5. ])
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.backends import on_device_of
from funcdiff._core.registry import Rule, register
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.structure import DENSE_LINEAR

__all__ = []

_SWAPPED = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _no_out(name: str, out) -> None:
    if out is not None:
        raise TypeError(f"numpy.fft.{name} on Tensors does not support out=; use the result")


def _resize(c, axis: int, length: int):
    """``c`` cropped or zero-padded along ``axis`` (negative) to ``length``."""
    have = np.shape(c)[axis]
    if have == length:
        return c
    if have > length:
        index = [slice(None)] * np.ndim(c)
        index[axis] = slice(0, length)
        return c[tuple(index)]
    widths = [(0, 0)] * np.ndim(c)
    widths[axis] = (0, length - have)
    return np.pad(c, widths)


def _axis(a, axis: int) -> int:
    """``axis`` of ``a`` counted from the end, so that a leading batch axis is harmless."""
    nd = np.ndim(a)
    if not -nd <= axis < nd:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {nd}")
    return axis % nd - nd


def _axes(a, s, axes) -> tuple[list[int], list[int]]:
    """NumPy's ``s``/``axes`` of an n-dimensional transform, resolved: the lengths and
    the axes (counted from the end) of every transformed axis."""
    nd = np.ndim(a)
    if axes is None:
        axes = list(range(-len(s), 0)) if s is not None else list(range(nd))
    axes = [_axis(a, int(ax)) for ax in axes]
    if s is None:
        s = [np.shape(a)[ax] for ax in axes]
    s = [np.shape(a)[ax] if n == -1 else int(n) for n, ax in zip(s, axes)]
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    return s, axes


# ---------------------------------------------------------------- one-dimensional
def _fft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("fft", out)
    return np.fft.fft(a, n, axis, norm)


def _ifft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("ifft", out)
    return np.fft.ifft(a, n, axis, norm)


def _rfft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("rfft", out)
    return np.fft.rfft(a, n, axis, norm)


def _irfft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("irfft", out)
    return np.fft.irfft(a, n, axis, norm)


def _hfft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("hfft", out)
    return np.fft.hfft(a, n, axis, norm)


def _ihfft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("ihfft", out)
    return np.fft.ihfft(a, n, axis, norm)


def _complex_vjp(transform):
    """The vjp of ``fft``/``ifft``: the same transform, then the input's length back."""

    def vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
        ax = _axis(a, axis)
        return _resize(transform(g, None, ax, norm), ax, np.shape(a)[ax])

    return vjp


def _rfft_vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
    ax = _axis(a, axis)
    length = np.shape(a)[ax] if n is None else int(n)
    full = np.fft.fft(_resize(g, ax, length), None, ax, norm)
    return _resize(full, ax, np.shape(a)[ax])


def _half_weights(m: int, n: int, ndim: int, axis: int) -> np.ndarray:
    """1 for the coefficients that stand for themselves (0 and, for even n, n/2), 2 for
    those that stand for a mirrored pair too, shaped to broadcast along ``axis``."""
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0 and m > n // 2:
        w[n // 2] = 1.0
    shape = [1] * ndim
    shape[axis] = m
    return w.reshape(shape)


def _irfft_transpose(g, axis: int, n: int, m: int, norm):
    """The transpose of ``irfft`` (length ``n`` output, ``m`` coefficients) applied to ``g``."""
    c = _resize(np.fft.ifft(g, None, axis, norm), axis, m)
    return c * on_device_of(_half_weights(m, n, np.ndim(c), axis), c)


def _irfft_vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
    ax = _axis(a, axis)
    length = 2 * (np.shape(a)[ax] - 1) if n is None else int(n)
    c = _irfft_transpose(g, ax, length, length // 2 + 1, norm)
    return _resize(c, ax, np.shape(a)[ax])


def _hfft_vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
    # hfft(a) = irfft(conj(a)) with the swapped normalisation.
    return np.conjugate(_irfft_vjp(g, ans, a, n, axis, _SWAPPED[norm]))


def _ihfft_vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
    # ihfft(a) = conj(rfft(a)) with the swapped normalisation.
    return _rfft_vjp(np.conjugate(g), ans, a, n, axis, _SWAPPED[norm])


def _one_d_cases(kind: str, length: int = 5) -> tuple[Case, ...]:
    """Test points of a one-dimensional transform on ``kind`` values (an Arg kind)."""
    return (
        Case((Arg((length,), kind=kind),)),
        Case((Arg((3, length), kind=kind),), {"axis": 0}),
        Case((Arg((2, length), kind=kind), 7)),
        Case((Arg((2, length), kind=kind), 3, -1, "ortho")),
        Case((Arg((length, 2), kind=kind),), {"n": 4, "axis": 0, "norm": "forward"}),
        Case((Arg((2, 4), kind=kind),), {"n": 6, "norm": "backward"}),
    )


def _register(name: str, fn, numpy_fn, vjp, real_input: bool) -> None:
    register(
        Rule(
            f"fft.{name}",
            fn,
            vjps={0: vjp},
            nondiff_args=frozenset({1, 2, 3, 4, "n", "axis", "norm", "out", "s", "axes"}),
            cases=_one_d_cases("real" if real_input else "uniform"),
            # Complex inputs come from the real cases; a real input stays real.
            complex_cases=_one_d_cases("real") if real_input else (),
            family="fft",
            complex=True,
            structure=DENSE_LINEAR,
            batch=batching.shift_axis(2, default=-1, tuples=False),
        ),
        numpy_fn,
    )


_register("fft", _fft, np.fft.fft, _complex_vjp(np.fft.fft), real_input=False)
_register("ifft", _ifft, np.fft.ifft, _complex_vjp(np.fft.ifft), real_input=False)
_register("rfft", _rfft, np.fft.rfft, _rfft_vjp, real_input=True)
_register("irfft", _irfft, np.fft.irfft, _irfft_vjp, real_input=False)
_register("hfft", _hfft, np.fft.hfft, _hfft_vjp, real_input=False)
_register("ihfft", _ihfft, np.fft.ihfft, _ihfft_vjp, real_input=True)


# ---------------------------------------------------------------- n-dimensional
def _nd(numpy_fn, name):
    def fn(a, s=None, axes=None, norm=None, out=None):
        _no_out(name, out)
        return numpy_fn(a, s, axes, norm)

    return fn


def _complex_nd_vjp(transform):
    def vjp(g, ans, a, s=None, axes=None, norm=None, out=None):
        lengths, ax = _axes(a, s, axes)
        c = transform(g, None, ax, norm)
        for axis in ax:
            c = _resize(c, axis, np.shape(a)[axis])
        return c

    return vjp


def _rfftn_vjp(g, ans, a, s=None, axes=None, norm=None, out=None):
    # rfftn = fftn over the leading axes of rfft over the last one.
    lengths, ax = _axes(a, s, axes)
    c = g
    if len(ax) > 1:
        c = np.fft.fftn(c, None, ax[:-1], norm)
        for n, axis in zip(lengths[:-1], ax[:-1]):
            c = _resize(c, axis, n)
    c = np.fft.fft(_resize(c, ax[-1], lengths[-1]), None, ax[-1], norm)
    for axis in ax:
        c = _resize(c, axis, np.shape(a)[axis])
    return c


def _irfftn_vjp(g, ans, a, s=None, axes=None, norm=None, out=None):
    # irfftn = irfft along the last axis of ifftn over the leading ones.
    ax = _axes(a, s, axes)[1]
    last = ax[-1]
    length = 2 * (np.shape(a)[last] - 1) if s is None else int(s[-1])
    c = _irfft_transpose(g, last, length, length // 2 + 1, norm)
    if len(ax) > 1:
        c = np.fft.ifftn(c, None, ax[:-1], norm)
    for axis in ax:
        c = _resize(c, axis, np.shape(a)[axis])
    return c


def _nd_cases(kind: str) -> tuple[Case, ...]:
    return (
        Case((Arg((3, 4), kind=kind),)),
        Case((Arg((2, 3, 4), kind=kind),), {"axes": (0, 2)}),
        Case((Arg((3, 4), kind=kind), (4, 6), (0, 1))),
        Case((Arg((2, 3, 4), kind=kind),), {"s": (2, 3), "axes": (-1, 0), "norm": "ortho"}),
        Case((Arg((3, 4), kind=kind),), {"norm": "forward"}),
    )


def _two_d_cases(kind: str) -> tuple[Case, ...]:
    return (
        Case((Arg((3, 4), kind=kind),)),
        Case((Arg((2, 3, 4), kind=kind),), {"axes": (0, 2), "norm": "ortho"}),
        Case((Arg((3, 4), kind=kind), (4, 6), (0, 1))),
    )


for _name, _numpy_fn, _vjp, _real_input, _cases in (
    ("fftn", np.fft.fftn, _complex_nd_vjp(np.fft.fftn), False, _nd_cases),
    ("ifftn", np.fft.ifftn, _complex_nd_vjp(np.fft.ifftn), False, _nd_cases),
    ("fft2", np.fft.fft2, _complex_nd_vjp(np.fft.fftn), False, _two_d_cases),
    ("ifft2", np.fft.ifft2, _complex_nd_vjp(np.fft.ifftn), False, _two_d_cases),
    ("rfftn", np.fft.rfftn, _rfftn_vjp, True, _nd_cases),
    ("irfftn", np.fft.irfftn, _irfftn_vjp, False, _nd_cases),
    ("rfft2", np.fft.rfft2, _rfftn_vjp, True, _two_d_cases),
    ("irfft2", np.fft.irfft2, _irfftn_vjp, False, _two_d_cases),
):
    register(
        Rule(
            f"fft.{_name}",
            _nd(_numpy_fn, _name),
            vjps={0: _vjp},
            nondiff_args=frozenset({1, 2, 3, 4, "s", "axes", "norm", "out"}),
            cases=_cases("real" if _real_input else "uniform"),
            complex_cases=_cases("real") if _real_input else (),
            family="fft",
            complex=True,
            structure=DENSE_LINEAR,
            batch=batching.shift_axis(2, "axes", (-2, -1) if _name.endswith("2") else None),
        ),
        _numpy_fn,
    )
