"""The autograd core: graph, engine, grad modes, custom functions.

The same names are exported at the package top level (``funcdiff.grad``). The engine
and custom functions are imported on first use, because they need the Tensor, whose
module in turn needs the grad modes and the graph defined here.
"""

from typing import Any

from funcdiff._core.grad_mode import (
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

_LAZY = {
    "backward": "funcdiff.autograd.engine",
    "grad": "funcdiff.autograd.engine",
    "Function": "funcdiff.autograd.function",
    "FunctionCtx": "funcdiff.autograd.function",
    "once_differentiable": "funcdiff.autograd.function",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'funcdiff.autograd' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
