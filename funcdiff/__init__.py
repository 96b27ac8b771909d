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

from funcdiff import (
    _methods,  # noqa: F401  (installs the Tensor's operators and methods)
    autograd,
    functional,
    linalg,
    optimize,
    replay,
    signal,
    sparse,
    special,
    stats,
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
    "functional",
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
