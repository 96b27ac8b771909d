"""The autograd core: graph, engine, grad modes, custom functions.

The same names are exported at the package top level (``funcdiff.grad``)."""

from funcdiff.autograd.engine import backward, grad
from funcdiff.autograd.function import Function, FunctionCtx, once_differentiable
from funcdiff.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)

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
]
