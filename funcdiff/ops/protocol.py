"""NumPy's ufunc protocol on Tensors (``Tensor.__array_ufunc__``).

A ufunc called with a Tensor argument comes here: plain calls go to the ufunc's rule,
methods such as ``np.add.reduce`` to the matching NumPy function's rule, and
``out=`` writes the result in place (hence this module sits above both
:mod:`~funcdiff.ops.dispatch` and :mod:`~funcdiff.ops.inplace`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff._core import tracing
from funcdiff._core.tensor import Tensor
from funcdiff.ops.dispatch import (
    _missing_rule,
    _needs_gradient,
    _run_on_data,
    _ufunc_name,
    array_function,
    call_ufunc,
)
from funcdiff.ops.inplace import _snapshot, setitem

__all__ = ["array_ufunc"]


_UFUNC_METHOD_FUNCTIONS = {
    ("add", "reduce"): np.sum,
    ("multiply", "reduce"): np.prod,
    ("maximum", "reduce"): np.max,
    ("minimum", "reduce"): np.min,
    ("add", "accumulate"): np.cumsum,
    ("multiply", "accumulate"): np.cumprod,
}


def _snapshot_for(t: Tensor) -> Tensor:
    """A copy of ``t``'s value before ``out=`` overwrites it (reported to a tracer as the
    same value, so replay and sparsity detection follow it)."""
    old = _snapshot(t, copy=True)
    tracer = tracing.current_tracer()
    if tracer is not None:
        tracer.alias(old, t)
    return old


def _into_ndarray(
    ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict, target: np.ndarray
) -> np.ndarray:
    """``w -= g`` with ``w`` an ndarray: NumPy's in-place update when nothing is lost (no
    input requires grad, or grad mode is off), a RuntimeError otherwise (``w`` unchanged)."""
    if _needs_gradient(inputs, kwargs):
        raise RuntimeError(
            f"numpy.{ufunc.__name__} would write a Tensor that requires grad into a plain "
            "ndarray (out=, or an augmented assignment such as w -= g with w an ndarray), "
            "which would lose its gradient. Make w a Tensor, compute w = w - g, or use "
            "g.detach() (an optimiser's step: work under funcdiff.no_grad())."
        )
    data = [a.data if isinstance(a, Tensor) else a for a in inputs]
    getattr(ufunc, method)(*data, out=target, **kwargs)
    return target


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``Tensor.__array_ufunc__``: route a ufunc call to its rule."""
    out = kwargs.pop("out", None)
    if out is not None:
        targets = out if isinstance(out, tuple) else (out,)
        if len(targets) == 1 and type(targets[0]) is np.ndarray:
            return _into_ndarray(ufunc, method, inputs, kwargs, targets[0])
        if len(targets) != 1 or not isinstance(targets[0], Tensor):
            raise TypeError("out= must be a single Tensor when a ufunc is applied to Tensors")
        # ``np.multiply(v, w, out=v)`` is ``v *= w``: the rule must save v's old value,
        # not the Tensor that the write below changes (its backward would refuse it).
        target = targets[0]
        inputs = tuple(
            _snapshot_for(a)
            if isinstance(a, Tensor) and np.may_share_memory(a.data, target.data)
            else a
            for a in inputs
        )
    if method == "__call__":
        if kwargs:
            raise TypeError(
                f"funcdiff supports numpy.{ufunc.__name__} on Tensors without the keyword "
                f"arguments {sorted(kwargs)}"
            )
        result = call_ufunc(ufunc, *inputs)
    else:
        func = _UFUNC_METHOD_FUNCTIONS.get((ufunc.__name__, method))
        if func is None or len(inputs) != 1:
            if out is None and tracing.TRACING[0]:
                done = tracing.run_instead_foreign(getattr(ufunc, method), inputs, kwargs)
                if done is not NotImplemented:
                    return done
            if out is None and not _needs_gradient(inputs, kwargs):
                return _run_on_data(getattr(ufunc, method), inputs, kwargs)
            return _missing_rule(f"{_ufunc_name(ufunc)}.{method}")
        # ufunc methods work along axis 0 by default, np.sum & co. along all axes; the
        # other keywords (dtype, keepdims, initial, where) share names and reach the rule.
        kwargs.setdefault("axis", 0 if np.ndim(inputs[0]) else None)
        if method == "accumulate" and kwargs["axis"] is None:
            raise ValueError("accumulate does not allow multiple axes")
        result = array_function(func, inputs, kwargs)
    if out is None:
        return result
    setitem(target, Ellipsis, result)
    return target
