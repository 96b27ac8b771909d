"""The autograd layer: the reverse-mode engine, forward mode and custom functions.

The same names are exported at the package top level (``funcdiff.grad``). The grad
modes live in the core (:mod:`funcdiff._core.grad_mode`) and are re-exported here.
"""

from funcdiff._core.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from funcdiff.autograd.engine import backward, grad
from funcdiff.autograd.function import Function, FunctionCtx, once_differentiable

__all__ = [
    "backward",
    "grad",
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
]
