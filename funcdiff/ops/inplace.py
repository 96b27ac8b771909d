"""In-place operations: ``t op= x`` and ``t[index] = x`` with NumPy's semantics.

The data changes in place; when gradients are recorded, the tensor's history is
rebased onto a node that computed the new value from a snapshot of the old one, and
every alias's version counter is bumped, so a saved value changed since is refused
at backward time.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from funcdiff._core import grad_mode, tracing
from funcdiff._core.graph import AccumulateGrad, note_inplace_change
from funcdiff._core.registry import NAMED_RULES, UFUNC_RULES
from funcdiff._core.tensor import Tensor, wrap
from funcdiff.ops.dispatch import _missing_rule, _record, _scan, _ufunc_name, call
from funcdiff.ops.nodes import _data_of

__all__ = ["inplace_ufunc", "setitem"]

_state = grad_mode.thread_state
_tracing = tracing.TRACING


def _check_inplace_allowed(t: Tensor, recording: bool) -> None:
    if not _state.grad_enabled:
        return
    if t._requires_grad and t.grad_fn is None:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation. "
            "Modify a copy (y = x * 1.0) or work under funcdiff.no_grad()."
        )
    base = t._view_of
    if base is not None and (base._requires_grad or recording):
        raise RuntimeError(
            "an in-place operation on a view of another tensor is not supported while "
            "gradients are recorded (the base tensor would not see it); modify the base "
            "tensor, or work on a copy"
        )


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
    for alias in (t, owner):
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


def inplace_ufunc(ufunc: np.ufunc, t: Tensor, other: Any) -> Tensor:
    """``t op= other`` with NumPy's in-place semantics, recorded when needed."""
    recording = _state.grad_enabled and (
        t._requires_grad or (isinstance(other, Tensor) and other._requires_grad)
    )
    _check_inplace_allowed(t, recording)
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
    _rebase(t, result)
    if tracer is not None:
        tracer.alias(t, result)
    return t


def setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value``, recorded as a rebase of ``t``'s history when needed."""
    recording = _state.grad_enabled and (
        t._requires_grad or (isinstance(value, Tensor) and value._requires_grad)
    )
    _check_inplace_allowed(t, recording)
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
