"""Shape rules: reshape, transpose and friends. Their cotangents are reshaped or
permuted back; none of them reads values."""

from __future__ import annotations

import numpy as np

from funcdiff.rules._registry import Arg, Case, Rule, batch_ndim, register


def _reshape_vjp(g, ans, a, *args, **kwargs):
    nb = batch_ndim(g, ans)
    return np.reshape(g, tuple(np.shape(g)[:nb]) + tuple(np.shape(a)))


def _transpose(a, axes=None):
    return np.transpose(a, axes)


def _transpose_vjp(g, ans, a, axes=None):
    nb = batch_ndim(g, ans)
    ndim = np.ndim(a)
    perm = tuple(reversed(range(ndim))) if axes is None else tuple(int(p) % ndim for p in axes)
    inverse = tuple(np.argsort(perm))
    return np.transpose(g, tuple(range(nb)) + tuple(nb + i for i in inverse))


def _swapaxes_vjp(g, ans, a, axis1, axis2):
    ndim = np.ndim(a)
    return np.swapaxes(g, axis1 % ndim - ndim, axis2 % ndim - ndim)


register(
    Rule(
        "reshape",
        np.reshape,
        vjps={0: _reshape_vjp},
        cases=(Case((Arg((3, 4)), (2, 6))), Case((Arg((3, 4)), -1)), Case((Arg(()), (1, 1)))),
        family="shape",
    )
)
register(
    Rule(
        "ravel",
        np.ravel,
        vjps={0: _reshape_vjp},
        cases=(Case((Arg((3, 4)),)),),
        family="shape",
    )
)
register(
    Rule(
        "transpose",
        _transpose,
        vjps={0: _transpose_vjp},
        cases=(Case((Arg((3, 4)),)), Case((Arg((2, 3, 4)), (1, 2, 0)))),
        family="shape",
    ),
    np.transpose,
)
register(
    Rule(
        "swapaxes",
        np.swapaxes,
        vjps={0: _swapaxes_vjp},
        cases=(Case((Arg((2, 3, 4)), 0, -1)),),
        family="shape",
    )
)
register(
    Rule(
        "squeeze",
        np.squeeze,
        vjps={0: _reshape_vjp},
        cases=(Case((Arg((3, 1, 4)),)), Case((Arg((1, 3)),), {"axis": 0})),
        family="shape",
    )
)
register(
    Rule(
        "expand_dims",
        np.expand_dims,
        vjps={0: _reshape_vjp},
        cases=(Case((Arg((3, 4)), 1)), Case((Arg((3,)), (0, -1)))),
        family="shape",
    )
)
register(
    Rule(
        "broadcast_to",
        np.broadcast_to,
        vjps={0: lambda g, ans, a, shape, subok=False: g},
        cases=(Case((Arg((3, 1)), (2, 3, 4))), Case((Arg(()), (2,)))),
        family="shape",
    )
)
register(
    Rule(
        "astype",
        lambda a, dtype: a.astype(dtype),
        vjps={0: lambda g, ans, a, dtype: g},
        cases=(Case((Arg((2, 3)), np.dtype(np.float64))),),
        family="shape",
    ),
    "astype",
)


def _moveaxis_vjp(g, ans, a, source, destination):
    ndim = np.ndim(a)
    src = np.atleast_1d(source) % ndim - ndim
    dst = np.atleast_1d(destination) % ndim - ndim
    return np.moveaxis(g, tuple(int(d) for d in dst), tuple(int(s) for s in src))


register(
    Rule(
        "moveaxis",
        np.moveaxis,
        vjps={0: _moveaxis_vjp},
        cases=(Case((Arg((2, 3, 4)), 0, -1)), Case((Arg((2, 3, 4)), (0, 1), (2, 0)))),
        family="shape",
    )
)
