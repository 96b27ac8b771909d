"""Array types other than NumPy's as the data of Tensors: CuPy arrays on a GPU.

A Tensor may hold any array type that implements NumPy's dispatch protocols
(``__array_ufunc__`` and ``__array_function__``) and refuses implicit conversion to
an ndarray, as ``cupy.ndarray`` does: ``funcdiff.tensor(cupy_array)`` keeps the type,
and so do ``.grad``, every recorded result, gradients, and the outputs of
:mod:`funcdiff.functional` and :mod:`funcdiff.replay`. See the "GPUs and clusters"
page for what runs and what raises.

What NumPy's dispatch cannot reach, funcdiff finds in a registry keyed by the
top-level module name of the array's type: the backend's special-function module
(``cupyx.scipy.special`` for CuPy, registered by default), its array namespace
(``cupy``), its ``scipy.linalg`` (``cupyx.scipy.linalg``) and its ``scipy.signal``
(``cupyx.scipy.signal``). :func:`register_backend` adds another array type.

Examples
--------
>>> import numpy as np
>>> import funcdiff.backends as backends
>>> backends.is_array(np.ones(3))
True
>>> backends.registered_backends()["cupy"]
('cupy', 'cupyx.scipy.special')
"""

from __future__ import annotations

from funcdiff._core.backends import (
    is_array,
    is_foreign,
    namespace,
    register_backend,
    registered_backends,
    special_module,
    type_name,
)

__all__ = [
    "is_array",
    "is_foreign",
    "namespace",
    "register_backend",
    "registered_backends",
    "special_module",
    "type_name",
]
