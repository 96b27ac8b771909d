"""Composable function transforms with torch.func's names, for plain NumPy code.

``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``linearize``, ``jacrev``, ``jacfwd``
and ``hessian`` take a function written with NumPy and return a function (or values)
computing its derivatives; arguments are ndarrays, Python numbers or nested tuples,
lists and dicts of them, results are ndarrays in torch.func's structures, and every
transform composes with every other (``grad(grad(f))``, ``jacfwd(jacrev(f))``).
``ravel_pytree`` flattens a pytree of arrays into one vector and back.

Examples
--------
>>> import numpy as np
>>> from funcdiff.func import grad, hessian
>>> f = lambda x: np.sum(np.sin(x) * x)
>>> grad(f)(np.array([0.0, 1.0]))
array([0.        , 1.38177329])
>>> hessian(f)(np.array([0.0]))
array([[2.]])
"""

from __future__ import annotations

from funcdiff.func._products import jvp, linearize, vjp
from funcdiff.func._pytree import (
    TreeSpec,
    ravel_pytree,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)
from funcdiff.func._transforms import (
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
)
from funcdiff.func._vmap import vmap

__all__ = [
    "TreeSpec",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "ravel_pytree",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
    "vjp",
    "vmap",
]
