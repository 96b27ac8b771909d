"""The autograd layer: the reverse-mode engine, forward mode and custom functions.

The names of ``__all__`` are exported at the package top level (``funcdiff.grad``);
anomaly detection (``detect_anomaly``, ``set_detect_anomaly``), dual numbers
(:mod:`~funcdiff.autograd.forward_ad`) and the graph utilities
(:mod:`~funcdiff.autograd.graph`) live here, as in ``torch.autograd``. The grad
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
from funcdiff.autograd import forward_ad, graph  # noqa: F401  (torch.autograd's submodules)
from funcdiff.autograd.anomaly_mode import (  # noqa: F401  (torch.autograd's names)
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from funcdiff.autograd.checkpoint import checkpoint
from funcdiff.autograd.engine import backward, grad
from funcdiff.autograd.function import Function, FunctionCtx, once_differentiable

__all__ = [
    "backward",
    "checkpoint",
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
