"""``numpy.fft``'s namespace, as ``funcdiff.numpy.fft`` (NumPy's own functions).

The FFT functions dispatch Tensors to funcdiff by themselves; this module exists so
that ``import funcdiff.numpy.fft`` works like ``import numpy.fft``.

Examples
--------
>>> import numpy
>>> import funcdiff.numpy as np
>>> np.fft.fft is numpy.fft.fft
True
"""

from __future__ import annotations

from typing import Any

import numpy.fft
from numpy.fft import *  # noqa: F403

__all__ = list(numpy.fft.__all__)


def __getattr__(name: str) -> Any:
    return getattr(numpy.fft, name)
