"""Arrays made from Tensor values: ``linspace`` with Tensor endpoints and ``vander``.

Both are compositions (``Rule(impl=...)``) of arithmetic rules: ``linspace`` is
``start + t * (stop - start)`` on a constant grid ``t``, ``vander`` the powers of its
input, so every order of derivative comes from those rules.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> stop = fd.tensor(2.0, requires_grad=True)
>>> np.sum(np.linspace(0.0, stop, 5)).backward()  # d/dstop of sum(k/4 * stop)
>>> stop.grad
tensor(2.5)
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.backends import on_device_of
from funcdiff._core.registry import Rule, register
from funcdiff.rules.cases import Arg, Case

_FAMILY = "creation"


# ---------------------------------------------------------------- linspace
def _linspace(
    start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None
):
    if device not in (None, "cpu"):
        raise ValueError(f"numpy.linspace: device must be 'cpu' or None, not {device!r}")
    num = int(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    if dtype is not None and np.dtype(dtype).kind not in "fc":
        raise TypeError(
            f"numpy.linspace(dtype={np.dtype(dtype)}) on Tensors: an integer grid is not "
            "differentiable; cast the result of a float linspace instead"
        )
    div = num - 1 if endpoint else num
    delta = stop - start
    grid = np.arange(num, dtype=np.float64).reshape((-1,) + (1,) * np.ndim(delta))
    grid = on_device_of(grid, delta)
    if div > 0:
        step = delta / div
        y = start + grid * step
        if endpoint and num > 1:
            # NumPy sets the last sample to stop exactly, not start + div * step.
            y = np.where(grid == div, stop + 0.0 * grid, y)
    else:
        step = delta * np.nan
        y = start + grid * delta
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    if dtype is not None:
        y = y.astype(dtype)
    return (y, step) if retstep else y


register(
    Rule(
        "linspace",
        np.linspace,
        impl=_linspace,
        cases=(
            Case((Arg(()), Arg(())), {"num": 5}),
            Case((Arg((2,)), Arg((3, 1))), {"num": 4, "axis": -1}),
            Case((0.5, Arg(())), {"num": 3, "endpoint": False}),
            Case((Arg(()), 2.0), {"num": 1}),
            Case((Arg(()), Arg(())), {"num": 4, "retstep": True}),
        ),
        nondiff_args=frozenset({2, "num"}),
        convention="the samples are affine in start and stop; the last one is stop exactly",
        family=_FAMILY,
        complex=True,
    ),
    np.linspace,
)


# ---------------------------------------------------------------- vander
def _vander(x, N=None, increasing=False):  # noqa: N803  (NumPy's parameter name)
    if np.ndim(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = np.shape(x)[0] if N is None else int(N)
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    powers = on_device_of(powers, x)
    # Integer exponents: d/dx x**0 = 0, exact at every order (numpy.power's convention).
    return np.power(np.expand_dims(x, -1), powers)


register(
    Rule(
        "vander",
        np.vander,
        impl=_vander,
        cases=(
            Case((Arg((4,)),)),
            Case((Arg((3,)), 5)),
            Case((Arg((3,)),), {"increasing": True, "N": 2}),
        ),
        nondiff_args=frozenset({1, "N"}),
        convention="powers with integer exponents (x**0 = 1 has gradient 0)",
        family=_FAMILY,
        complex=True,
    ),
    np.vander,
)
