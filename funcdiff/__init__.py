"""funcdiff: exact higher-order derivatives of plain NumPy and SciPy code.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([0.5, 2.0], requires_grad=True)
>>> (g,) = fd.grad(np.sum(x ** 3), x, create_graph=True)
>>> g
tensor([ 0.75, 12.  ], grad_fn=<MultiplyBackward>)
>>> fd.grad(g[1], x)[0]
tensor([ 0., 12.])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from funcdiff import (
    _methods,  # noqa: F401  (installs the Tensor's operators and methods)
    autograd,
)
from funcdiff import rules as _rules  # noqa: F401  (registers every derivative rule)
from funcdiff._core.tensor import Tensor, as_tensor, tensor
from funcdiff.autograd import (  # noqa: F401  (exported by *autograd.__all__ below)
    Function,
    FunctionCtx,
    backward,
    checkpoint,
    enable_grad,
    grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    once_differentiable,
    set_grad_enabled,
)

if TYPE_CHECKING:  # imported on first use at run time (see __getattr__)
    from funcdiff import (
        check,  # noqa: F401  (an attribute, as before; not in __all__)
        func,
        functional,
        integrate,
        linalg,
        optimize,
        replay,
        signal,
        sparse,
        special,
        stats,
    )
    from funcdiff.check import (
        DerivativeReport,
        GradcheckError,
        check_derivatives,
        gradcheck,
        gradgradcheck,
    )
    from funcdiff.sparse import hessian as sparse_hessian
    from funcdiff.sparse import jacobian as sparse_jacobian

__version__ = "0.1.0"

__all__ = [
    "Tensor",
    "tensor",
    "as_tensor",
    "autograd",
    "func",
    "functional",
    "integrate",
    "linalg",
    "signal",
    "special",
    "stats",
    "sparse",
    "replay",
    "sparse_jacobian",
    "sparse_hessian",
    "optimize",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "check_derivatives",
    "DerivativeReport",
    *autograd.__all__,  # grad, backward, Function, the grad modes
]

# The transforms, the checker and the SciPy wrappers are imported when first named
# (``fd.sparse``, ``fd.check_derivatives``, ``from funcdiff import stats``): together
# with the SciPy submodules they need, they cost several times ``import numpy``, which
# every command-line call and worker process would otherwise pay.
_SUBMODULES = frozenset(
    {
        "check",
        "func",
        "functional",
        "integrate",
        "linalg",
        "optimize",
        "replay",
        "signal",
        "sparse",
        "special",
        "stats",
    }
)
_LAZY_NAMES = {
    "DerivativeReport": ("funcdiff.check", "DerivativeReport"),
    "GradcheckError": ("funcdiff.check", "GradcheckError"),
    "check_derivatives": ("funcdiff.check", "check_derivatives"),
    "gradcheck": ("funcdiff.check", "gradcheck"),
    "gradgradcheck": ("funcdiff.check", "gradgradcheck"),
    "sparse_hessian": ("funcdiff.sparse", "hessian"),
    "sparse_jacobian": ("funcdiff.sparse", "jacobian"),
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"funcdiff.{name}")  # binds the attribute too
    if name in _LAZY_NAMES:
        module, attribute = _LAZY_NAMES[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'funcdiff' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBMODULES, *_LAZY_NAMES})
