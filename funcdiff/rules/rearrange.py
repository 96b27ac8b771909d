"""Rearranging rules: repeating, flipping and rolling (also ``fft.fftshift`` and
``fft.ifftshift``), padding, diagonals and triangles, sorting and differences.

Each cotangent is the adjoint rearrangement (sum what was repeated, flip or roll back,
crop what was padded, scatter back what was taken from a diagonal, gather what was
sorted), written with NumPy calls that have rules of their own, so every rule here is
differentiable to any order. ``diff`` and ``ediff1d`` are compositions (slicing and
subtraction, ``Rule(impl=...)``).

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([3.0, 1.0, 2.0], requires_grad=True)
>>> y = np.sort(x)
>>> np.sum(y * np.array([1.0, 10.0, 100.0])).backward()
>>> x.grad
tensor([100.,   1.,  10.])
"""

from __future__ import annotations

import numpy as np

from funcdiff._core.backends import is_array, is_foreign, on_device_of
from funcdiff._core.registry import register
from funcdiff._core.tensor import Tensor, values_read
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.indexing import scatter
from funcdiff.rules.shape import (
    _axes_tuple,
    _axis,
    _batch,
    _from_end,
    _layout_rule,
    _rule,
)
from funcdiff.rules.structure import axis_argument, reduction


# ---------------------------------------------------------------- repeating
def _tile_vjp(g, ans, A, reps):
    batch = _batch(g, ans)
    nb = len(batch)
    shape = np.shape(A)
    reps = tuple(int(r) for r in np.atleast_1d(values_read(reps)))
    d = max(len(shape), len(reps))
    s = (1,) * (d - len(shape)) + shape
    r = (1,) * (d - len(reps)) + reps
    interleaved = tuple(x for pair in zip(r, s, strict=True) for x in pair)
    summed = np.sum(np.reshape(g, batch + interleaved), axis=tuple(nb + 2 * i for i in range(d)))
    return np.reshape(summed, batch + shape)


register(
    _layout_rule(
        "tile",
        np.tile,
        {0: _tile_vjp},
        cases=(
            Case((Arg((2, 3)), (2, 1))),
            Case((Arg((3,)), (2, 2))),
            Case((Arg((2, 3)), 3)),
            Case((Arg(()), 4)),
            Case((Arg((2, 3)), (0, 1))),
        ),
    )
)


def _repeat_vjp(g, ans, a, repeats, axis=None):
    batch = _batch(g, ans)
    nb = len(batch)
    shape = np.shape(a)
    reps = values_read(repeats)
    reps = reps if is_foreign(reps) else np.asarray(reps)  # device repeats stay there
    if axis is None:
        core, ax = (int(np.prod(shape)),), 0
    else:
        core, ax = shape, _axis(axis, len(shape))
    n = core[ax]
    if reps.size == 1:
        split = batch + core[:ax] + (n, int(reps.reshape(-1)[0])) + core[ax + 1 :]
        out = np.sum(np.reshape(g, split), axis=nb + ax + 1)
    else:
        source = np.repeat(on_device_of(np.arange(n), reps), reps)
        out = scatter(g, ans, (slice(None),) * ax + (source,), core)
    return np.reshape(out, batch + shape)


register(
    _layout_rule(
        "repeat",
        np.repeat,
        {0: _repeat_vjp},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((2, 3)), 2)),
            Case((Arg((2, 3)), 2), {"axis": -1}),
            Case((Arg((2, 3)), np.array([1, 0, 3])), {"axis": 1}),
            Case((Arg((2, 3)), np.array([2, 0, 1, 1, 3, 1]))),
            Case((Arg(()), 3)),
            Case((Arg((3,)), [2])),
        ),
    )
)


# ---------------------------------------------------------------- flipping and rolling
def _flip_vjp(g, ans, m, axis=None):
    ndim = np.ndim(m)
    if ndim == 0:
        return g
    return np.flip(g, tuple(a - ndim for a in _axes_tuple(axis, ndim)))


register(
    _layout_rule(
        "flip",
        np.flip,
        {0: _flip_vjp},
        cases=(
            Case((Arg((2, 3)),)),
            Case((Arg((2, 3)), -1)),
            Case((Arg((2, 3, 4)),), {"axis": (0, 2)}),
            Case((Arg(()),)),
            Case((Arg((0, 3)), 1)),
        ),
    )
)
register(
    _layout_rule(
        "fliplr",
        np.fliplr,
        {0: lambda g, ans, m: np.flip(g, 1 - np.ndim(m))},
        cases=(Case((Arg((2, 3)),)), Case((Arg((2, 3, 2)),))),
    )
)
register(
    _layout_rule(
        "flipud",
        np.flipud,
        {0: lambda g, ans, m: np.flip(g, -np.ndim(m))},
        cases=(Case((Arg((3,)),)), Case((Arg((2, 3)),))),
    )
)


def _rot90_vjp(g, ans, m, k=1, axes=(0, 1)):
    ndim = np.ndim(m)
    return np.rot90(g, -int(k), axes=(_from_end(axes[0], ndim), _from_end(axes[1], ndim)))


register(
    _layout_rule(
        "rot90",
        np.rot90,
        {0: _rot90_vjp},
        cases=(
            Case((Arg((2, 3)),)),
            Case((Arg((2, 3)), 3)),
            Case((Arg((2, 3, 4)), -1), {"axes": (2, 0)}),
            Case((Arg((2, 3)), 2)),
        ),
    )
)


def _roll_vjp(g, ans, a, shift, axis=None):
    back = np.negative(np.asarray(values_read(shift)))
    if axis is None:
        batch = _batch(g, ans)
        flat = np.reshape(g, batch + (-1,))
        return np.reshape(np.roll(flat, back, axis=-1), batch + np.shape(a))
    ndim = np.ndim(a)
    if isinstance(axis, (tuple, list)):
        return np.roll(g, back, axis=tuple(_from_end(x, ndim) for x in axis))
    return np.roll(g, back, axis=_from_end(axis, ndim))


def _roll_jvp(t, ans, a, shift, axis=None):
    # Forward mode: the tangent rolled the same way, its batch axes left alone.
    nb = np.ndim(t) - np.ndim(a)
    if axis is None:
        flat = np.reshape(t, np.shape(t)[:nb] + (-1,))
        return np.reshape(np.roll(flat, shift, axis=-1), np.shape(t))
    axes = tuple(int(x) for x in np.atleast_1d(axis))
    return np.roll(t, shift, axis=tuple(x + nb if x >= 0 else x for x in axes))


register(
    _layout_rule(
        "roll",
        np.roll,
        {0: _roll_vjp},
        jvps={0: _roll_jvp},
        nondiff_args=frozenset({1}),
        cases=(
            Case((Arg((2, 3)), 2)),
            Case((Arg((2, 3)), -1), {"axis": -1}),
            Case((Arg((2, 3, 4)), (1, -2)), {"axis": (0, 2)}),
            Case((Arg((2, 3)), (1, 1)), {"axis": (1, 1)}),
            Case((Arg((4,)), (1, 2))),
        ),
    )
)


# ---------------------------------------------------------------- padding
def _pad_widths(pad_width, ndim: int) -> np.ndarray:
    """``pad_width`` as an int array of shape ``(ndim, 2)`` (before, after)."""
    if isinstance(pad_width, dict):
        widths = np.zeros((ndim, 2), dtype=np.intp)
        for axis, w in pad_width.items():
            widths[_axis(axis, ndim)] = np.broadcast_to(np.asarray(w, dtype=np.intp), (2,))
        return widths
    widths = np.asarray(values_read(pad_width))
    if widths.dtype.kind not in "iub":
        raise TypeError("numpy.pad: `pad_width` must be of integral type")
    return np.broadcast_to(widths.astype(np.intp), (ndim, 2))


def _pad(array, pad_width, mode="constant", **kwargs):
    if callable(mode) or mode != "constant":
        shown = getattr(mode, "__name__", mode)
        raise NotImplementedError(
            f"numpy.pad with mode={shown!r} is not supported on Tensors; only "
            "mode='constant' has a derivative rule in funcdiff (pad a detached copy if no "
            "gradient is needed)"
        )
    unknown = set(kwargs) - {"constant_values"}
    if unknown:
        raise TypeError(f"numpy.pad: unsupported keyword arguments for mode 'constant': {unknown}")
    return np.pad(array, pad_width, mode="constant", **kwargs)


def _pad_vjp(g, ans, array, pad_width, mode="constant", **kwargs):
    shape = np.shape(array)
    widths = _pad_widths(pad_width, len(shape))
    inner = tuple(slice(int(b), int(b) + n) for (b, _), n in zip(widths, shape, strict=True))
    return g[(Ellipsis,) + inner]


def _pad_constant_vjp(g, ans, array, pad_width, mode="constant", **kwargs):
    """Cotangent of ``constant_values``, as an ``(ndim, 2)`` array (summed by the engine)."""
    shape = np.shape(array)
    ndim = len(shape)
    widths = _pad_widths(pad_width, ndim)
    batch = _batch(g, ans)
    if ndim == 0:
        return np.zeros(batch + (0, 2))
    # NumPy fills the pads axis by axis, so a corner holds the value of the last axis
    # whose pad covers it: pad an array of labels to find which value landed where.
    labels = np.pad(
        np.zeros(shape, dtype=np.intp),
        widths,
        constant_values=np.arange(1, 2 * ndim + 1).reshape(ndim, 2),
    )
    core = tuple(range(-ndim, 0))
    labels = on_device_of(labels, g)
    parts = [np.sum(np.where(labels == k, g, 0.0), axis=core) for k in range(1, 2 * ndim + 1)]
    return np.reshape(np.stack(parts, axis=-1), batch + (ndim, 2))


register(
    _layout_rule(
        "pad",
        _pad,
        {0: _pad_vjp, "constant_values": _pad_constant_vjp},
        cases=(
            Case((Arg((2, 3)), 1)),
            Case((Arg((2, 3)), ((1, 0), (0, 2)))),
            Case((Arg((3,)), (2, 1)), {"constant_values": Arg(())}),
            Case((Arg((2, 2)), 1), {"constant_values": Arg((2, 2))}),
            Case((Arg((2, 2)), ((1, 1), (0, 1))), {"constant_values": Arg((2,))}),
            Case((Arg(()), 2)),
            Case((Arg((0, 2)), 1)),
        ),
        convention="only mode='constant'; other modes raise NotImplementedError",
    ),
    np.pad,
)


# ---------------------------------------------------------------- diagonals and triangles
def _diagonal_vjp(g, ans, a, offset=0, axis1=0, axis2=1):
    """Put ``g`` back on the diagonal of zeros shaped like ``a``."""
    shape = np.shape(a)
    ndim = len(shape)
    ax1, ax2 = _axis(axis1, ndim, "axis1"), _axis(axis2, ndim, "axis2")
    other = tuple(n for i, n in enumerate(shape) if i not in (ax1, ax2))
    m = np.shape(ans)[-1]
    offset = int(offset)
    rows = np.arange(m) + max(-offset, 0)
    cols = np.arange(m) + max(offset, 0)
    index = (slice(None),) * len(other) + (rows, cols)
    out = scatter(g, ans, index, other + (shape[ax1], shape[ax2]))
    return np.moveaxis(out, (-2, -1), (ax1 - ndim, ax2 - ndim))


register(
    _layout_rule(
        "diagonal",
        np.diagonal,
        {0: _diagonal_vjp},
        cases=(
            Case((Arg((3, 3)),)),
            Case((Arg((3, 4)), 1)),
            Case((Arg((4, 3)), -2)),
            Case((Arg((2, 3, 4)),), {"axis1": -1, "axis2": 0}),
            Case((Arg((2, 3, 3)), 0, 1, 2)),
            Case((Arg((2, 3)), 5)),
        ),
    )
)


def _diag_vjp(g, ans, v, k=0):
    if np.ndim(v) == 1:
        return np.diagonal(g, int(k), -2, -1)
    return _diagonal_vjp(g, ans, v, k, 0, 1)


register(
    _layout_rule(
        "diag",
        np.diag,
        {0: _diag_vjp},
        cases=(
            Case((Arg((3,)),)),
            Case((Arg((3,)), -1)),
            Case((Arg((3, 3)),)),
            Case((Arg((3, 4)), 2)),
            Case((Arg((4, 3)),), {"k": -1}),
        ),
    )
)


def _diagflat_vjp(g, ans, v, k=0):
    # The k-th diagonal of the cotangent, back in the shape of v (flattened row-major).
    return np.reshape(np.diagonal(g, int(k), -2, -1), _batch(g, ans) + np.shape(v))


register(
    _layout_rule(
        "diagflat",
        np.diagflat,
        {0: _diagflat_vjp},
        cases=(
            Case((Arg((3,)),)),
            Case((Arg((2, 2)),)),
            Case((Arg((3,)), 1)),
            Case((Arg((2, 3)),), {"k": -2}),
            Case((Arg(()),)),
        ),
    )
)
_tri_cases = (
    Case((Arg((3, 3)),)),
    Case((Arg((3, 4)), 1)),
    Case((Arg((2, 3, 3)), -1)),
    Case((Arg((3,)),)),
)
register(_layout_rule("tril", np.tril, {0: lambda g, ans, m, k=0: np.tril(g, k)}, cases=_tri_cases))
register(_layout_rule("triu", np.triu, {0: lambda g, ans, m, k=0: np.triu(g, k)}, cases=_tri_cases))


# ---------------------------------------------------------------- sorting
def _sort_vjp(g, ans, a, axis=-1, kind=None, order=None, *, stable=None):
    batch = _batch(g, ans)
    if axis is None:
        keys, ax = np.reshape(values_read(a), (-1,)), -1
    else:
        keys, ax = values_read(a), _from_end(axis, np.ndim(a))
    perm = np.argsort(keys, axis=ax, kind="stable")
    inverse = np.argsort(perm, axis=ax, kind="stable")
    inverse = np.reshape(inverse, (1,) * len(batch) + inverse.shape)
    out = np.take_along_axis(g, inverse, axis=ax)
    return np.reshape(out, batch + np.shape(a)) if axis is None else out


register(
    _rule(
        "sort",
        np.sort,
        {0: _sort_vjp},
        cases=(
            Case((Arg((5,), kind="distinct"),)),
            Case((Arg((3, 4), kind="distinct"),), {"axis": 0}),
            Case((Arg((2, 3, 4), kind="distinct"), -2)),
            Case((Arg((3, 4), kind="distinct"), None)),
            Case((Arg((0, 3)),)),
        ),
        convention=(
            "the cotangent is permuted back by the stable argsort; tied elements each "
            "receive the cotangent of one of the tied positions"
        ),
        structure=reduction("piecewise", axis_argument(1, default=-1), pattern="fibre"),
    )
)


# ---------------------------------------------------------------- differences
_NOVALUE = np._NoValue


def _neighbours(ax: int) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """Index tuples for entries ``1..n-1`` and ``0..n-2`` along axis ``ax``."""
    return (slice(None),) * ax + (slice(1, None),), (slice(None),) * ax + (slice(None, -1),)


def _diff(a, n=1, axis=-1, prepend=_NOVALUE, append=_NOVALUE):
    if n == 0:
        return a
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    ndim = np.ndim(a)
    if ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = _axis(axis, ndim)
    parts = [a]
    for at, extra in ((0, prepend), (2, append)):
        if extra is not _NOVALUE:
            if not (is_array(extra) or isinstance(extra, Tensor)):
                extra = on_device_of(np.asarray(extra), a)  # a number: on a's device
            if np.ndim(extra) == 0:
                shape = list(np.shape(a))
                shape[ax] = 1
                extra = np.broadcast_to(extra, tuple(shape))
            parts.insert(min(at, len(parts)), extra)
    if len(parts) > 1:
        a = np.concatenate(parts, axis=ax)
    upper, lower = _neighbours(ax)
    op = np.not_equal if np.result_type(a) == np.bool_ else np.subtract
    for _ in range(n):
        a = op(a[upper], a[lower])
    return a


register(
    _rule(
        "diff",
        np.diff,
        cases=(
            Case((Arg((5,)),)),
            Case((Arg((3, 4)), 2), {"axis": 0}),
            Case((Arg((3, 4)),), dict(prepend=Arg(()), append=Arg((3, 2)))),
            Case((Arg((3, 4)),), {"prepend": 0.5}),
            Case((Arg((1, 3)),), {"axis": -2}),
        ),
        impl=_diff,
        complex=True,
    )
)


def _ediff1d(ary, to_end=None, to_begin=None):
    flat = np.ravel(ary)
    parts = [flat[1:] - flat[:-1]]
    if to_begin is not None:
        parts.insert(0, np.ravel(to_begin))
    if to_end is not None:
        parts.append(np.ravel(to_end))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


register(
    _rule(
        "ediff1d",
        np.ediff1d,
        cases=(
            Case((Arg((5,)),)),
            Case((Arg((2, 3)),), {"to_begin": Arg(()), "to_end": Arg((2,))}),
        ),
        impl=_ediff1d,
        complex=True,
    )
)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    ndim = np.ndim(y)
    ax = _axis(axis, ndim)
    if x is None:
        d = dx
    elif np.ndim(x) == 1:
        shape = [1] * ndim
        shape[ax] = np.shape(x)[0] - 1
        d = np.reshape(np.diff(x), tuple(shape))
    else:
        d = np.diff(x, axis=ax)
    upper, lower = _neighbours(ax)
    return np.sum(d * (y[upper] + y[lower]) / 2.0, axis=ax)


if hasattr(np, "trapezoid"):
    register(
        _rule(
            "trapezoid",
            np.trapezoid,
            cases=(
                Case((Arg((5,)),)),
                Case((Arg((3, 4)), Arg((4,)))),
                Case((Arg((3, 4)),), {"dx": Arg(()), "axis": 0}),
                Case((Arg((3, 4)), Arg((3, 4))), {"axis": 0}),
            ),
            impl=_trapezoid,
            complex=True,
        )
    )


# ---------------------------------------------------------------- FFT frequency shifts
def _fft_shift_impl(forward: bool):
    """``fftshift`` (``forward``) or ``ifftshift`` as a roll along ``axes``.

    A roll is a permutation: its cotangent is the opposite roll, so the vjp of
    ``fftshift`` is ``ifftshift`` of the cotangent, at every order.
    """

    def impl(x, axes=None):
        ndim = np.ndim(x)
        axes_t = _axes_tuple(axes, ndim)
        shape = np.shape(x)
        shifts = tuple(shape[a] // 2 if forward else -(shape[a] // 2) for a in axes_t)
        if not axes_t:  # a 0-d input, or axes=()
            return np.roll(x, 0)
        return np.roll(x, shifts, axis=axes_t)

    return impl


for _shift_name, _shift_fn, _forward in (
    ("fft.fftshift", np.fft.fftshift, True),
    ("fft.ifftshift", np.fft.ifftshift, False),
):
    register(
        _rule(
            _shift_name,
            _shift_fn,
            cases=(
                Case((Arg((5,)),)),
                Case((Arg((4,)),)),
                Case((Arg((3, 4)),)),
                Case((Arg((3, 5)),), {"axes": 1}),
                Case((Arg((2, 3, 4)),), {"axes": (0, -1)}),
            ),
            convention="real input; a roll by n//2 along each axis in axes (all by default)",
            impl=_fft_shift_impl(_forward),
            complex=True,
        )
    )
