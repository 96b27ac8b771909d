"""Convolution rules: ``numpy.convolve``/``correlate`` and ``scipy.signal.convolve``/
``correlate`` (n-D, modes ``full``/``same``/``valid``, methods ``auto``/``direct``/``fft``).

Every mode is a crop of the full convolution, and a correlation is a convolution with
the second input flipped, so one primitive carries all the derivatives:
:func:`full_convolve`. Its cotangents are full convolutions again, cropped::

    d/da: correlate(g, b, 'valid') = crop(full_convolve(g, flip(b)))   (a's shape)
    d/db: correlate(g, a, 'valid') = crop(full_convolve(g, flip(a)))   (b's shape)

so both inputs are differentiable to any order. The public rules are compositions
(``Rule(impl=...)``) of the primitive, ``flip`` and slicing, with NumPy's and SciPy's
placement of the ``same`` and ``valid`` windows. Real inputs only.

SciPy's Python functions do not dispatch to Tensors: :mod:`funcdiff.signal` has the
public wrappers.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> a = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = np.convolve(a, np.array([1.0, -1.0]), mode="valid")
>>> y
tensor([1., 1.], grad_fn=<GetitemBackward>)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core.backends import backend_signal
from funcdiff._core.lazy import scipy  # scipy.signal is imported on first use
from funcdiff._core.registry import Rule, Structure, batch_ndim, dispatching, register
from funcdiff._core.tensor import Tensor
from funcdiff.rules.cases import Arg, Case

__all__ = ["full_convolve", "scipy_convolve", "scipy_correlate"]

_FAMILY = "signal"
_MODES = ("full", "same", "valid")


# ---------------------------------------------------------------- the primitive
@dispatching
def full_convolve(a: Any, b: Any, method: str = "direct") -> Any:
    """The full n-D convolution of ``a`` and ``b`` (same number of dimensions).

    ``method`` is ``"numpy"`` (``np.convolve``, for 1-D inputs) or a method of
    ``scipy.signal.convolve`` (``"auto"``, ``"direct"``, ``"fft"``).

    Examples
    --------
    >>> full_convolve(np.array([1.0, 2.0]), np.array([1.0, 10.0]), "numpy")
    array([ 1., 12., 20.])
    """
    if method == "numpy":
        if np.ndim(a) == 1 and np.ndim(b) == 1:
            return np.convolve(a, b, mode="full")
        method = "direct"  # a batch of cotangents: the same sums, with a leading axis
    try:
        return scipy.signal.convolve(a, b, mode="full", method=method)
    except TypeError:  # a backend array (CuPy): the backend's own scipy.signal.convolve
        own = backend_signal("convolve", (a, b))
        if own is None:
            raise
        return own(a, b, mode="full", method=method)


def _crop(x: Any, starts: tuple[int, ...], lengths: tuple[int, ...]) -> Any:
    """``x[..., s:s+n, ...]`` on the last ``len(starts)`` axes."""
    index = tuple(slice(s, s + n) for s, n in zip(starts, lengths, strict=True))
    return x[(Ellipsis, *index)]


def _with_batch(x: Any, nb: int) -> Any:
    """``x`` with ``nb`` leading axes of length one (to meet a batch of cotangents)."""
    return np.reshape(x, (1,) * nb + tuple(np.shape(x))) if nb else x


def _full_convolve_vjp(other_position: int):
    def vjp(g, ans, a, b, method="direct"):
        mine, other = (a, b) if other_position == 1 else (b, a)
        nb = batch_ndim(g, ans)
        flipped = np.flip(_with_batch(other, nb))
        full = full_convolve(g, flipped, method)
        starts = tuple(n - 1 for n in np.shape(other))
        return _crop(full, starts, tuple(np.shape(mine)))

    return vjp


register(
    Rule(
        "full_convolve",
        full_convolve.__wrapped__,
        vjps={0: _full_convolve_vjp(1), 1: _full_convolve_vjp(0)},
        nondiff_args=frozenset({2, "method"}),
        cases=(
            Case((Arg((5,)), Arg((3,)), "numpy")),
            Case((Arg((2,)), Arg((4,)), "numpy")),
            Case((Arg((3, 4)), Arg((2, 2)), "direct")),
            Case((Arg((4, 3)), Arg((2, 5)), "fft")),
        ),
        family=_FAMILY,
        structure=Structure("convolve", "bilinear"),
    ),
    full_convolve,
)


# ---------------------------------------------------------------- NumPy's 1-D functions
def _numpy_1d(name: str, a: Any, v: Any, mode: Any) -> tuple[int, int]:
    for arg, label in ((a, "a"), (v, "v")):
        if np.ndim(arg) != 1:
            raise ValueError(
                f"numpy.{name} on Tensors: {label} must be 1-D, got {np.ndim(arg)} dimensions"
            )
        if np.shape(arg)[0] == 0:
            raise ValueError(f"{label} cannot be empty")
    if mode not in _MODES:
        raise ValueError(f"numpy.{name}: mode must be one of 'full', 'same', 'valid', got {mode!r}")
    return np.shape(a)[0], np.shape(v)[0]


def _window(total: int, n: int, m: int, mode: str) -> int:
    """The length NumPy's ``mode`` keeps of a full result of length ``total``."""
    return {"full": total, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}[mode]


def _np_convolve(a, v, mode="full"):
    n, m = _numpy_1d("convolve", a, v, mode)
    total = n + m - 1
    length = _window(total, n, m, mode)
    return _crop(full_convolve(a, v, "numpy"), ((total - length) // 2,), (length,))


def _np_correlate(a, v, mode="valid"):
    n, m = _numpy_1d("correlate", a, v, mode)
    total = n + m - 1
    length = _window(total, n, m, mode)
    spare = total - length
    # NumPy correlates the longer input with the shorter and reverses the result when
    # v is the longer: its 'same' window then leans the other way.
    start = spare - spare // 2 if m > n else spare // 2
    return _crop(full_convolve(a, np.flip(v), "numpy"), (start,), (length,))


_NP_CASES = (
    Case((Arg((5,)), Arg((3,)))),
    Case((Arg((4,)), Arg((6,))), {"mode": "same"}),
    Case((Arg((5,)), Arg((2,))), {"mode": "same"}),
    Case((Arg((3,)), Arg((5,))), {"mode": "valid"}),
    Case(
        (Arg((1,)), Arg((1,))),
    ),
)
register(
    Rule(
        "convolve",
        np.convolve,
        impl=_np_convolve,
        cases=_NP_CASES,
        convention="real inputs; differentiable in both",
        family=_FAMILY,
    ),
    np.convolve,
)
register(
    Rule(
        "correlate",
        np.correlate,
        impl=_np_correlate,
        cases=(*_NP_CASES, Case((Arg((4,)), Arg((7,))), {"mode": "full"})),
        convention="real inputs (no conjugate); differentiable in both",
        family=_FAMILY,
    ),
    np.correlate,
)


# ---------------------------------------------------------------- scipy.signal
def _scipy_shapes(name: str, in1: Any, in2: Any, mode: Any, method: Any) -> tuple:
    if mode not in _MODES:
        raise ValueError(
            f"funcdiff.signal.{name}: mode must be 'full', 'same' or 'valid', got {mode!r}"
        )
    if method not in ("auto", "direct", "fft"):
        raise ValueError(
            f"funcdiff.signal.{name}: method must be 'auto', 'direct' or 'fft', got {method!r}"
        )
    s1, s2 = tuple(np.shape(in1)), tuple(np.shape(in2))
    if len(s1) != len(s2):
        raise ValueError(
            f"funcdiff.signal.{name}: in1 and in2 should have the same dimensionality "
            f"(got {len(s1)} and {len(s2)})"
        )
    if 0 in s1 or 0 in s2:
        raise ValueError(f"funcdiff.signal.{name}: in1 and in2 must not be empty")
    if mode == "valid" and not (
        all(p >= q for p, q in zip(s1, s2, strict=True))
        or all(q >= p for p, q in zip(s1, s2, strict=True))
    ):
        raise ValueError(
            "For 'valid' mode, one must be at least as large as the other in every dimension"
        )
    full = tuple(p + q - 1 for p, q in zip(s1, s2, strict=True))
    if mode == "full":
        keep = full
    elif mode == "same":
        keep = s1
    else:
        keep = tuple(abs(p - q) + 1 for p, q in zip(s1, s2, strict=True))
    starts = tuple((f - k) // 2 for f, k in zip(full, keep, strict=True))
    return starts, keep


def _scipy_convolve(in1, in2, mode="full", method="auto"):
    starts, keep = _scipy_shapes("convolve", in1, in2, mode, method)
    return _crop(full_convolve(in1, in2, method), starts, keep)


def _scipy_correlate(in1, in2, mode="full", method="auto"):
    starts, keep = _scipy_shapes("correlate", in1, in2, mode, method)
    return _crop(full_convolve(in1, np.flip(in2), method), starts, keep)


def _tensor_dispatching(forward: Any) -> Any:
    """``forward`` as a function that hands a call with a Tensor argument to funcdiff."""

    def wrapper(in1: Any, in2: Any, mode: str = "full", method: str = "auto") -> Any:
        for arg in (in1, in2):
            if isinstance(arg, Tensor):
                call = (in1, in2, mode, method)
                return arg.__array_function__(wrapper, (Tensor,), call, {})
        return forward(in1, in2, mode=mode, method=method)

    wrapper.__name__ = wrapper.__qualname__ = forward.__name__
    wrapper.__doc__ = (
        f"``scipy.signal.{forward.__name__}`` that hands Tensors to funcdiff "
        f"(the public face is ``funcdiff.signal.{forward.__name__}``)."
    )
    return wrapper


scipy_convolve = _tensor_dispatching(scipy.signal.convolve)
scipy_correlate = _tensor_dispatching(scipy.signal.correlate)

_SCIPY_CASES = (
    Case((Arg((5,)), Arg((3,)))),
    Case((Arg((3, 4)), Arg((2, 3))), {"mode": "same"}),
    Case((Arg((2, 3)), Arg((4, 4))), {"mode": "same", "method": "fft"}),
    Case((Arg((4, 5)), Arg((2, 2))), {"mode": "valid", "method": "direct"}),
    Case((Arg((2, 3)), Arg((3, 5))), {"mode": "valid"}),
    Case((Arg((3, 2, 2)), Arg((2, 2, 3))), {"method": "fft"}),
)
for _name, _scipy_fn, _wrapper, _impl in (
    ("convolve", scipy.signal.convolve, scipy_convolve, _scipy_convolve),
    ("correlate", scipy.signal.correlate, scipy_correlate, _scipy_correlate),
):
    register(
        Rule(
            f"scipy.signal.{_name}",
            _scipy_fn,
            impl=_impl,
            cases=_SCIPY_CASES,
            convention="real inputs; differentiable in both; windows placed as in SciPy",
            family=_FAMILY,
        ),
        _scipy_fn,
        _wrapper,
    )
