"""In-place operations: ``t op= x`` and ``t[index] = x`` with NumPy's semantics.

The data changes in place; when gradients are recorded, the tensor's history is
rebased onto a node that computed the new value from a snapshot of the old one, and
every alias's version counter is bumped, so a saved value changed since is refused
at backward time.

Views follow torch's rules. An in-place change of a view (``u[1:-1] += lap``,
``row = Y[i]; row *= c``) rewrites the history of its base: the base becomes "the old
base with the view's region replaced by the new values" (a ``setitem`` node). After
any recorded in-place change of a base or of one of its views, every live view of that
base is re-derived from the base's new history, so it sees the change, as torch's
views do.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from funcdiff._core import grad_mode, tracing
from funcdiff._core.graph import AFTER_INPLACE, AccumulateGrad, Node, note_inplace_change
from funcdiff._core.registry import NAMED_RULES, UFUNC_RULES
from funcdiff._core.tensor import Tensor, wrap
from funcdiff._core.views import live_views
from funcdiff.ops.dispatch import _missing_rule, _record, _scan, _ufunc_name, call
from funcdiff.ops.nodes import _data_of

__all__ = ["inplace_ufunc", "setitem", "view_index", "after_write"]

_state = grad_mode.thread_state
_tracing = tracing.TRACING

LEAF_MESSAGE = (
    "a leaf Variable that requires grad is being used in an in-place operation. "
    "Modify a copy (y = x * 1.0) or work under funcdiff.no_grad()."
)
VIEW_OF_LEAF_MESSAGE = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation. "
    "Modify a view of a copy (y = x * 1.0; y[1:] += 1) or work under funcdiff.no_grad()."
)


def _check_inplace_allowed(t: Tensor) -> None:
    if not _state.grad_enabled:
        return
    if t._requires_grad and t.grad_fn is None:
        raise RuntimeError(LEAF_MESSAGE)
    base = t._view_of
    if base is not None and base._requires_grad and base.grad_fn is None:
        raise RuntimeError(VIEW_OF_LEAF_MESSAGE)


def _bump(t: Tensor) -> None:
    """Count an in-place change of ``t``'s memory, for ``t`` and all its aliases.

    Nodes whose output is that memory are marked, so a rule that reads its output
    (``exp``) refuses to run on the changed value.
    """
    owner = t._version_owner
    if owner is None:
        owner = t
    owner._version_count += 1
    note_inplace_change()
    base = t._view_of
    for alias in (t, owner) if base is None else (t, owner, base):
        if alias.grad_fn is not None:
            alias.grad_fn.modified = True


def _rebase(t: Tensor, result: Tensor) -> None:
    """Make ``t`` the output of the node that computed ``result`` (history rebase)."""
    t._requires_grad = result._requires_grad
    t.grad_fn = result.grad_fn
    t._output_nr = result._output_nr


def _snapshot(t: Tensor, copy: bool) -> Tensor:
    """A Tensor standing for ``t``'s value before an in-place change."""
    old = wrap(t.data.copy() if copy else t.data, t._requires_grad, t.grad_fn, t._output_nr)
    if t.grad_fn is None and t._requires_grad:
        old._accumulator = cast(AccumulateGrad, t._gradient_edge()[0])  # a leaf's
    if not copy:
        old._version_owner = t._version_owner if t._version_owner is not None else t
    return old


# ---------------------------------------------------------------------------- views
def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _basic_index(base: np.ndarray, view: np.ndarray) -> tuple | None:
    """``view`` as ``base[index]`` with ints and positive-step slices, if it is one."""
    if base.ndim == 0 or any(s <= 0 for s in base.strides):
        return None
    offset = _address(view) - _address(base)
    if offset < 0:
        return None
    starts = [0] * base.ndim
    for k in sorted(range(base.ndim), key=lambda k: -base.strides[k]):
        starts[k], offset = divmod(offset, base.strides[k])
    if offset:
        return None
    index: list = []
    j = 0
    for k in range(base.ndim):
        stride = base.strides[k]
        if j < view.ndim and view.strides[j] > 0 and view.strides[j] % stride == 0:
            step = view.strides[j] // stride
            index.append(slice(starts[k], starts[k] + step * (view.shape[j] - 1) + 1, step))
            j += 1
        elif j < view.ndim and view.shape[j] == base.shape[k] and view.strides[j] == stride:
            index.append(slice(None))
            j += 1
        else:
            index.append(starts[k])
    if j != view.ndim:
        return None
    candidate = base[tuple(index)]
    if (
        candidate.shape == view.shape
        and candidate.strides == view.strides
        and _address(candidate) == _address(view)
    ):
        return tuple(index)
    return None


def _element_addresses(a: np.ndarray) -> np.ndarray:
    addresses = np.full(a.shape, _address(a), dtype=np.int64)
    for axis, (n, stride) in enumerate(zip(a.shape, a.strides)):
        shape = [1] * a.ndim
        shape[axis] = n
        addresses = addresses + (np.arange(n, dtype=np.int64) * stride).reshape(shape)
    return addresses


def view_index(base: np.ndarray, view: np.ndarray) -> tuple:
    """An index with ``base[index]`` holding exactly the elements of ``view``.

    A tuple of ints and slices when the view is a basic slice of the base (the common
    case), else a tuple of integer arrays found from the elements' memory addresses
    (reshaped, transposed, reversed views).

    Examples
    --------
    >>> import numpy as np
    >>> u = np.arange(10.0)
    >>> view_index(u, u[1:-1])
    (slice(1, 9, 1),)
    >>> m = np.arange(6.0).reshape(2, 3)
    >>> index = view_index(m, m.T)
    >>> bool(np.array_equal(m[index], m.T))
    True
    """
    if view.dtype.itemsize != base.dtype.itemsize:
        raise RuntimeError(
            "an in-place operation on a view with another item size than its base "
            f"({view.dtype} of {base.dtype}, e.g. .real of a complex array) is not supported "
            "while gradients are recorded; modify the base tensor instead"
        )
    basic = _basic_index(base, view)
    if basic is not None:
        return basic
    flat = _element_addresses(base).ravel()
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    wanted = _element_addresses(view)
    pos = np.clip(np.searchsorted(ordered, wanted), 0, max(ordered.size - 1, 0))
    if ordered.size == 0 or not np.array_equal(ordered[pos], wanted):
        raise RuntimeError("the view's elements are not all elements of its base tensor")
    return np.unravel_index(order[pos], base.shape)


def _write_to_base(view: Tensor, result: Tensor) -> None:
    """Rebase ``view``'s base onto "old base with the view's region set to ``result``".

    A view of the real or imaginary parts of a complex base (``np.real(z)``,
    ``np.imag(z)[1:]``) sets the region to ``result`` combined with the other part of
    the old values, as torch's ``z.real`` and ``z.imag`` views do.
    """
    base = view._view_of
    assert base is not None
    part = _part(base.data, view.data)
    old = _snapshot(base, copy=False)
    value: Any = result
    if part is None:
        index = view_index(base.data, view.data)
    else:
        index = view_index(part(base.data), view.data)
        # Recorded on ``old``: the other part of the region is unchanged by the write.
        kept = old[index]
        if part is np.real:
            value = result + 1j * np.imag(kept)
        else:
            value = np.real(kept) + 1j * result
    args = (old, index, value)
    paths, tensors = _scan(args, {})
    replaced = wrap(base.data, False, None, 0)
    _record(NAMED_RULES["setitem"], args, {}, paths, tensors, base.data, [replaced])
    _rebase(base, replaced)


def _part(base: np.ndarray, view: np.ndarray) -> Any:
    """``np.real`` or ``np.imag`` when ``view`` is a view of the real or imaginary parts
    of the complex ``base``; None for a view of the same item size, or of another one
    that is neither."""
    if base.dtype.kind != "c" or view.dtype.itemsize * 2 != base.dtype.itemsize:
        return None
    for part in (np.real, np.imag):
        try:
            view_index(part(base), view)
        except RuntimeError:
            continue
        return part
    return None


def _part_of(base: Tensor, view: np.ndarray) -> Tensor | None:
    """``np.real(base)`` or ``np.imag(base)``, recorded, for a view of the real or
    imaginary parts of a complex base; None for any other view of another item size."""
    part = _part(base.data, view)
    # A Tensor: NumPy dispatches np.real / np.imag to it.
    return None if part is None else part(base)


class _StaleView(Node):
    """The history of a view that could not be re-derived after its base changed in
    place: backward through it raises instead of using the old values."""

    __slots__ = ()

    def apply(self, grads: list, create_graph: bool) -> list:
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            "inplace operation: a view of a tensor that was modified in place afterwards "
            "was used; take the view again after the in-place change"
        )


def _refresh_views(base: Tensor) -> None:
    """Re-derive every live view of ``base`` from its (new) history, as torch does."""
    views = live_views(base)
    if not views:
        return
    rule = NAMED_RULES["getitem"]
    for view in views:
        if not base._requires_grad:
            view._requires_grad, view.grad_fn, view._output_nr = False, None, 0
            continue
        view.grad_fn = None
        view._output_nr = 0
        source = base
        if view.data.dtype.itemsize != base.data.dtype.itemsize:
            part = _part_of(base, view.data)
            if part is None:
                stale = _StaleView((base._gradient_edge(),), ((view.data.shape, view.data.dtype),))
                view._requires_grad, view.grad_fn = True, stale
                continue
            source = part
        index = view_index(source.data, view.data)
        _record(rule, (source, index), {}, [(0, None)], [source], view.data, [view])


def after_write(t: Tensor, result: Tensor | None) -> None:
    """History after a recorded in-place change of ``t`` whose new value ``result``
    computed (None when ``t`` itself already holds it)."""
    base = t._view_of
    if base is None:
        if result is not None:
            _rebase(t, result)
        _refresh_views(t)
        return
    _write_to_base(t, result if result is not None else t)
    _refresh_views(base)  # ``t`` included


def inplace_ufunc(ufunc: np.ufunc, t: Tensor, other: Any) -> Tensor:
    """``t op= other`` with NumPy's in-place semantics, recorded when needed."""
    recording = _state.grad_enabled and (
        t._requires_grad or (isinstance(other, Tensor) and other._requires_grad)
    )
    _check_inplace_allowed(t)
    tracer = tracing.current_tracer() if _tracing[0] else None
    if not recording:
        ufunc(t.data, _data_of(other), out=t.data)
        _bump(t)
        if tracer is not None:
            tracer.inplace(ufunc, t, other)
        return t
    rule = UFUNC_RULES.get(ufunc)
    if rule is None:
        return _missing_rule(_ufunc_name(ufunc))
    old = _snapshot(t, rule.reads_argument(0))
    if tracer is not None:
        tracer.alias(old, t)
    result = call(rule, (old, other))
    np.copyto(t.data, result.data, casting="same_kind")
    _bump(t)
    after_write(t, result)
    if tracer is not None:
        tracer.alias(t, result)
    return t


def setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value``, recorded as a rebase of ``t``'s history when needed."""
    recording = _state.grad_enabled and (
        t._requires_grad or (isinstance(value, Tensor) and value._requires_grad)
    )
    _check_inplace_allowed(t)
    index_data = _data_of(index)
    tracer = tracing.current_tracer() if _tracing[0] else None
    if tracer is not None:
        # Reported before the write: the tracer reads the old pattern of ``t``.
        tracer.setitem(t, index, value)
    t.data[index_data] = _data_of(value)
    _bump(t)
    if not recording:
        return
    rule = NAMED_RULES["setitem"]
    old = _snapshot(t, copy=False)
    args = (old, index, value)
    paths, tensors = _scan(args, {})
    replaced = wrap(t.data, False, None, 0)
    _record(rule, args, {}, paths, tensors, t.data, [replaced])
    _rebase(t, replaced)
    after_write(t, None)


AFTER_INPLACE[0] = after_write
