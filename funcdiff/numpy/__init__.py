"""NumPy's namespace for differentiable code: ``import funcdiff.numpy as np``.

Every name of NumPy is here, and almost all of them are NumPy's own objects
(``funcdiff.numpy.sin is numpy.sin``): NumPy already hands Tensors to funcdiff through
its dispatch protocols. The exceptions are the few places NumPy does not ask its
arguments, where a Tensor would be converted to plain numbers and its gradient lost:

* building arrays: :func:`array`, :func:`asarray`, :func:`asanyarray` of (nested) lists
  or tuples holding Tensors stack them with the recorded ``np.stack``;
* ``r_[...]`` and ``c_[...]`` with Tensors among the pieces concatenate them with the
  recorded ``np.concatenate``;
* ``stack``, ``concatenate``, ``hstack``, ``vstack``, ``dstack``, ``column_stack``,
  ``block``-free joins whose elements are nested lists holding Tensors;
* reductions and a few others of (nested) lists of Tensors: ``sum``, ``prod``,
  ``mean``, ``std``, ``var``, ``average``, ``max``, ``min``, ``amax``, ``amin``,
  ``cumsum``, ``cumprod``, ``append``, ``dot``, ``outer``, ``inner``, ``matmul``... and
  ``linalg.norm`` (see :data:`LIFTED`);
* integer scalar-type casts: ``int64(t)``, ``uint8(t)`` ... of a Tensor are a recorded
  ``t.astype(...)``, a constant (no gradient), as ``astype`` gives. The floating-point
  types are NumPy's own (``float32 is numpy.float32``, as in HIPS autograd): cast a
  Tensor with ``t.astype(np.float32)``, which records.

With plain NumPy arguments every override returns exactly NumPy's result. Code written
with ``import numpy as np`` keeps working unchanged; this namespace only adds the
conversions NumPy cannot dispatch. Where NumPy would build an object array from Tensors
(a ragged nested list, ``dtype=object``), a clear error is raised instead.

Examples
--------
>>> import funcdiff as fd
>>> import funcdiff.numpy as np
>>> np.sin is __import__("numpy").sin and np.float32 is __import__("numpy").float32
True
>>> a = fd.tensor(0.5, requires_grad=True)
>>> b = fd.tensor(2.0, requires_grad=True)
>>> v = np.array([a, a * b, 1.0])
>>> v
tensor([0.5, 1. , 1. ], grad_fn=<StackBackward>)
>>> fd.grad(np.sum(v ** 2), [a, b])  # d(a² + a²b² + 1) = (2a + 2ab², 2a²b)
(tensor(5.), tensor(1.))
"""

from __future__ import annotations

import sys
from typing import Any

import numpy
from numpy import *  # noqa: F403  (NumPy's public namespace, overridden below)

# The overrides (names re-exported through __all__, which is built below). The submodules
# are imported as modules: ``from funcdiff.numpy import linalg`` would find NumPy's
# ``linalg``, which ``from numpy import *`` has already put here. Replacing NumPy's names
# is the point, hence the type: ignore of each redefinition.
import funcdiff.numpy.fft as fft  # type: ignore[no-redef]  # noqa: F401
import funcdiff.numpy.linalg as linalg  # type: ignore[no-redef]  # noqa: F401
from funcdiff.numpy._casts import CAST_TYPES, cast_type
from funcdiff.numpy._creation import (  # type: ignore[no-redef]  # noqa: F401
    array,
    asanyarray,
    asarray,
    joining,
    lifting,
)
from funcdiff.numpy._index_tricks import CClass, RClass, c_, r_  # type: ignore[assignment]  # noqa: F401

random = numpy.random
# ``import funcdiff.numpy.random`` gives NumPy's own module (one global random state).
sys.modules.setdefault(__name__ + ".random", numpy.random)

#: The NumPy functions wrapped to accept (nested) lists of Tensors, with the arguments
#: that are lifted to one Tensor.
LIFTED: dict[str, tuple[str, ...]] = {
    **{
        name: ("a",)
        for name in (
            "sum prod mean std var average max min amax amin cumsum cumprod ptp "
            "nansum nanmean nanvar nanstd median transpose reshape ravel squeeze "
            "expand_dims atleast_1d atleast_2d atleast_3d diag trace clip"
        ).split()
    },
    "append": ("arr", "values"),
    "diagflat": ("v",),
    "cov": ("m",),
    "corrcoef": ("x",),
    "dot": ("a", "b"),
    "vdot": ("a", "b"),
    "outer": ("a", "b"),
    "inner": ("a", "b"),
    "matmul": ("x1", "x2"),
    "tensordot": ("a", "b"),
    "kron": ("a", "b"),
    "where": ("condition", "x", "y"),
}

#: The joining functions whose sequence elements may be nested lists of Tensors.
JOINING = ("stack", "concatenate", "hstack", "vstack", "dstack", "column_stack")

_here = globals()
for _name, _arguments in LIFTED.items():
    _here[_name] = lifting(getattr(numpy, _name), *_arguments)
for _name in JOINING:
    _here[_name] = joining(getattr(numpy, _name))
for _name in CAST_TYPES:
    _here[_name] = cast_type(_name)
del _here, _name, _arguments

OVERRIDES = (
    "array asarray asanyarray r_ c_".split() + list(LIFTED) + list(JOINING) + list(CAST_TYPES)
)

__all__ = sorted(set(numpy.__all__) | {"OVERRIDES", "LIFTED", "JOINING"})


def __getattr__(name: str) -> Any:
    # Whatever ``from numpy import *`` leaves out (NumPy's lazily loaded submodules such as
    # numpy.testing, or names a later NumPy adds) is NumPy's own.
    try:
        return getattr(numpy, name)
    except AttributeError:
        raise AttributeError(f"module 'funcdiff.numpy' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(numpy)))
