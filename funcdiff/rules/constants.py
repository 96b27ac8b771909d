"""Functions whose results are constants: array creation from a template, integer
results (argmax, argsort, nonzero), and tests. Their results never require grad."""

from __future__ import annotations

import numpy as np

from funcdiff.rules._registry import Rule, register

for _fn in (
    np.zeros_like,
    np.ones_like,
    np.empty_like,
    np.full_like,
    np.argmax,
    np.argmin,
    np.argsort,
    np.nonzero,
    np.flatnonzero,
    np.argwhere,
    np.searchsorted,
    np.isclose,
    np.allclose,
    np.array_equal,
    np.count_nonzero,
    np.any,
    np.all,
    np.isreal,
    np.iscomplex,
    np.unravel_index,
):
    register(Rule(_fn.__name__, _fn, differentiable=False, family="constants"))
