"""The structure of each rule's Jacobian and Hessian, declared once per operation.

Sparsity detection (:mod:`funcdiff.sparse`) reads two facts about every rule:

``pattern``
    which input elements each output element depends on:

    * ``"elementwise"``: the Jacobian is diagonal after broadcasting (``Rule.diagonal``);
    * ``"select"``: every output element is a copy of one input element or a constant,
      at positions that depend on shapes and constant arguments only (reshape, slicing,
      ``concatenate``, ``pad``, ``roll``, ``tril``); found by running the rule's own
      forward on arrays of element positions;
    * ``"reduce"``: each output element reads one fibre of the input (``sum``, ``max``,
      ``var``, norms), the axes given by ``axes(args, kwargs, ndim)``;
    * ``"scan"``: element ``i`` of a fibre reads elements ``0..i`` (``cumsum``);
    * ``"fibre"``: each output element reads the whole fibre along an axis of every
      argument, output shaped like the input (``sort``, ``cross``, recurrences);
    * ``"contract"``: a multilinear contraction (``matmul``, ``einsum``), exact with
      constant operands' zeros taken into account;
    * a name of a special pattern rule (``"where"``, ``"setitem"``, ``"index_add"``,
      ``"bincount"``, ``"full_like"``, ``"convolve"``, ``"outer"``, ``"kron"``,
      ``"sparse_matmul"``: a constant scipy.sparse matrix's nonzeros);
    * ``"dense"``: every output element may depend on every input element (matrix
      factorizations, solves, inverses: generically dense).

``curvature``
    what the rule adds to a Hessian's pattern: ``"linear"`` (nothing),
    ``"piecewise"`` (linear between kinks: nothing, as the rules' second derivatives are
    zero there), ``"bilinear"`` (products of one element of each argument, no squares),
    ``"quotient"`` (``x / y``: no ``x``-``x`` term), ``"nonlinear"`` (every pair of
    dependencies of an output element).

A rule not listed here with ``diagonal=True`` is elementwise and nonlinear; any other
differentiable rule must be listed (the tests enforce it), so that a new operation
gets a deliberate decision and never a silently wrong pattern.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Structure", "STRUCTURE", "structure_of", "axis_argument", "install"]


@dataclass(frozen=True)
class Structure:
    """The declared structure of one rule (see the module docstring)."""

    pattern: str
    curvature: str = "nonlinear"
    # reduce / scan / fibre: the axes, from the call's arguments; None: the defaults.
    axes: Callable[[tuple, dict, int], tuple[int, ...] | None] | None = None


def axis_argument(position: int, name: str = "axis", default: Any = None) -> Callable:
    """An ``axes`` reader for an ``axis`` argument at ``position`` or by ``name``
    (``None`` means every axis)."""

    def axes(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
        axis = kwargs.get(name, args[position] if len(args) > position else default)
        if axis is None:
            return tuple(range(ndim))
        if isinstance(axis, (tuple, list)):
            return tuple(int(a) % max(ndim, 1) for a in axis)
        return (int(axis) % max(ndim, 1),)

    return axes


def _last_axis(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
    return (ndim - 1,) if ndim else ()


def _trace_axes(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
    axis1 = kwargs.get("axis1", args[2] if len(args) > 2 else 0)
    axis2 = kwargs.get("axis2", args[3] if len(args) > 3 else 1)
    return (int(axis1) % ndim, int(axis2) % ndim)


def _svnorm_axes(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
    axes = args[2] if len(args) > 2 else (-2, -1)
    return tuple(int(a) % ndim for a in axes)


_LINEAR = (
    "add subtract negative positive conjugate real deg2rad rad2deg radians degrees nan_to_num ldexp"
).split()
_PIECEWISE = (
    "absolute fabs maximum minimum fmax fmin copysign heaviside floor_divide remainder "
    "fmod modf frexp"
).split()

_REDUCE_AXIS = axis_argument(1)
_SELECT = (
    "reshape transpose matrix_transpose swapaxes moveaxis squeeze expand_dims broadcast_to "
    "copy concatenate stack unstack split array_split hsplit vsplit dsplit tile repeat flip "
    "fliplr flipud rot90 roll pad diagonal diag tril triu astype getitem take "
    "take_along_axis shift_last"
).split()
_CONTRACT = (
    "matmul linalg.matmul vecdot linalg.vecdot matvec vecmat tensordot linalg.tensordot dot "
    "inner vdot einsum"
).split()
_DENSE = (
    "linalg.inv linalg.solve linalg.det linalg.slogdet linalg.cholesky linalg.svd "
    "linalg.svdvals linalg.qr linalg.pinv linalg.lstsq linalg.eigh linalg.eigvalsh "
    "linalg.eig linalg.eigvals "
    "scipy.linalg.solve_triangular scipy.linalg.cho_factor scipy.linalg.cho_solve "
    "scipy.linalg.expm scipy.linalg.solve scipy.linalg.inv scipy.linalg.det scipy.linalg.eigh"
).split()
_FFT = (
    "fft.fft fft.ifft fft.rfft fft.irfft fft.hfft fft.ihfft fft.fftn fft.ifftn fft.fft2 "
    "fft.ifft2 fft.rfftn fft.irfftn fft.rfft2 fft.irfft2"
).split()

#: Rule name -> declared structure, for every differentiable rule that is not plainly
#: elementwise-nonlinear.
STRUCTURE: dict[str, Structure] = {
    **{name: Structure("elementwise", "linear") for name in _LINEAR},
    **{name: Structure("elementwise", "piecewise") for name in _PIECEWISE},
    "multiply": Structure("elementwise", "bilinear"),
    "divide": Structure("elementwise", "quotient"),
    "clip": Structure("elementwise", "piecewise"),
    **{name: Structure("select", "linear") for name in _SELECT},
    "sum": Structure("reduce", "linear", _REDUCE_AXIS),
    "mean": Structure("reduce", "linear", _REDUCE_AXIS),
    "trace": Structure("reduce", "linear", _trace_axes),
    "max": Structure("reduce", "piecewise", _REDUCE_AXIS),
    "min": Structure("reduce", "piecewise", _REDUCE_AXIS),
    "nanmax": Structure("reduce", "piecewise", _REDUCE_AXIS),
    "nanmin": Structure("reduce", "piecewise", _REDUCE_AXIS),
    "prod": Structure("reduce", "nonlinear", _REDUCE_AXIS),
    "var": Structure("reduce", "nonlinear", _REDUCE_AXIS),
    "std": Structure("reduce", "nonlinear", _REDUCE_AXIS),
    "norm2": Structure("reduce", "nonlinear", axis_argument(1)),
    "pnorm": Structure("reduce", "nonlinear", axis_argument(2)),
    "norm0": Structure("reduce", "piecewise", axis_argument(1)),
    "svnorm": Structure("reduce", "nonlinear", _svnorm_axes),
    "cumsum": Structure("scan", "linear", axis_argument(1)),
    "cumprod": Structure("scan", "nonlinear", axis_argument(1)),
    "sort": Structure("fibre", "piecewise", axis_argument(1, default=-1)),
    "cross_last": Structure("fibre", "bilinear", _last_axis),
    "linear_recurrence": Structure("fibre", "nonlinear", _last_axis),
    **{name: Structure("contract", "bilinear") for name in _CONTRACT},
    "outer": Structure("outer", "bilinear"),
    "kron": Structure("kron", "bilinear"),
    "full_convolve": Structure("convolve", "bilinear"),
    "where": Structure("where", "linear"),
    "setitem": Structure("setitem", "linear"),
    "index_add": Structure("index_add", "linear"),
    "bincount": Structure("bincount", "linear"),
    "full_like": Structure("full_like", "linear"),
    "sparse_matmul": Structure("sparse_matmul", "linear"),
    # Sparse solves: the inverse of a sparse matrix is generically dense.
    "lu_solve": Structure("dense", "linear"),
    "csr_solve": Structure("dense", "nonlinear"),
    **{name: Structure("dense", "nonlinear") for name in _DENSE},
    **{name: Structure("dense", "linear") for name in _FFT},
    # Zero derivatives on real values, elementwise ones on complex values.
    "imag": Structure("dense", "linear"),
    "angle": Structure("dense", "nonlinear"),
}

_ELEMENTWISE = Structure("elementwise", "nonlinear")


def structure_of(rule: Any) -> Structure | None:
    """The declared structure of ``rule``: its entry here, elementwise-nonlinear for a
    diagonal rule, None for an undeclared one (which sparsity detection treats as dense)."""
    found = STRUCTURE.get(rule.name)
    if found is not None:
        return found
    return _ELEMENTWISE if rule.diagonal else None


def install(rules: Any) -> None:
    """Give every rule its ``structure`` attribute (read by forward mode, whose
    selections gather tangents, and by sparsity detection)."""
    for rule in rules:
        object.__setattr__(rule, "structure", structure_of(rule))
