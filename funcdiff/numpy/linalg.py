"""``numpy.linalg``'s namespace, as ``funcdiff.numpy.linalg``; ``norm`` accepts lists of Tensors.

Every function is NumPy's own except :func:`norm`, which first stacks a (nested) list or
tuple holding Tensors into one Tensor (``np.linalg.norm([t1, t2])`` does not reach
funcdiff by itself: NumPy's dispatch does not look inside lists).

Examples
--------
>>> import funcdiff as fd
>>> import funcdiff.numpy as np
>>> x = fd.tensor(3.0, requires_grad=True)
>>> n = np.linalg.norm([x, 4.0])
>>> n
tensor(5., grad_fn=<Norm2Backward>)
>>> fd.grad(n, x)[0]  # x / norm
tensor(0.6)
"""

from __future__ import annotations

from typing import Any

import numpy.linalg
from numpy.linalg import *  # noqa: F403

from funcdiff.numpy._creation import lifting

__all__ = list(numpy.linalg.__all__)

norm = lifting(numpy.linalg.norm, "x")


def __getattr__(name: str) -> Any:
    return getattr(numpy.linalg, name)
