"""Functions whose results are constants, and the decisions about a few that are not.

Constants (their results never require grad): arrays created from a template's
shape (``zeros_like``), integer results (``argmax``, ``argsort``, ``nonzero``,
``searchsorted``, ``digitize``) and boolean tests (``isclose``, ``array_equal``).
(Rounding functions such as ``np.round`` are piecewise constant too; the elementwise
module registers them.) Shape queries (``np.shape``, ``np.ndim``, ``np.size``) are answered
from the data by the operation layer without a rule.

Decisions
---------
* ``full_like(a, fill_value)`` is differentiable in ``fill_value`` (the template
  ``a`` only gives the shape).
* ``np.unique`` works on Tensors that do not require grad and raises TypeError on one
  that does: its values are not differentiable where elements tie, which is exactly
  where it is used. Use ``np.sort`` (differentiable) or ``np.unique`` on
  ``tensor.detach()`` with the returned indices (``return_index=True``) to gather.
* ``np.histogram`` has no rule on purpose: its counts are constants but its bin edges
  move with the data, so it raises TypeError naming ``numpy.histogram``.
* ``np.asarray``, ``np.asanyarray`` and ``np.array`` do not dispatch to Tensors (they
  call ``Tensor.__array__``), so no rule can be registered for them. ``__array__``
  refuses a Tensor that requires grad while grad mode is on (RuntimeError) instead of
  dropping the gradient; ``np.asarray(t.detach())`` is the explicit way out.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([0.5, 2.0, 1.0], requires_grad=True)
>>> i = np.argmax(x)
>>> i, i.requires_grad
(tensor(1), False)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from funcdiff._core import grad_mode
from funcdiff._core.registry import Arg, Case, Rule, dispatching, register
from funcdiff._core.tensor import Tensor

_CONSTANT_FUNCTIONS: list[Callable] = [
    np.zeros_like,
    np.ones_like,
    np.empty_like,
    np.argmax,
    np.argmin,
    np.nanargmax,
    np.nanargmin,
    np.argsort,
    np.argpartition,
    np.lexsort,
    np.nonzero,
    np.flatnonzero,
    np.argwhere,
    np.searchsorted,
    np.digitize,
    np.isclose,
    np.allclose,
    np.array_equal,
    np.array_equiv,
    np.count_nonzero,
    np.any,
    np.all,
    np.isreal,
    np.iscomplex,
    np.isin,
    np.unravel_index,
    np.ravel_multi_index,
    np.diag_indices_from,
    np.tril_indices_from,
    np.triu_indices_from,
]

for _fn in _CONSTANT_FUNCTIONS:
    register(Rule(_fn.__name__, _fn, differentiable=False, family="constants"))


def _full_like_vjp(g, ans, a, fill_value, *args, **kwargs):
    return g


register(
    Rule(
        "full_like",
        np.full_like,
        vjps={1: _full_like_vjp, "fill_value": _full_like_vjp},
        nondiff_args=frozenset({0}),
        cases=(
            Case((Arg((2, 3), diff=False), Arg(()))),
            Case((Arg((2, 3), diff=False), Arg((3,)))),
            Case((np.zeros((0, 2)), Arg((2,)))),
        ),
        convention="the template only gives the shape; fill_value gets the summed cotangent",
        uses_values=False,
        family="constants",
    ),
)


@dispatching
def _unique_of_constants(*args, **kwargs):
    return np.unique(*args, **kwargs)


register(
    Rule("unique", np.unique, differentiable=False, family="constants"),
    _unique_of_constants,
)


def _unique(ar, *args, **kwargs):
    if isinstance(ar, Tensor) and ar.requires_grad and grad_mode.is_grad_enabled():
        raise TypeError(
            "funcdiff has no derivative rule for numpy.unique: its values are not "
            "differentiable where elements tie. Call it on tensor.detach() (with "
            "return_index=True to gather the values differentiably), or use numpy.sort."
        )
    return _unique_of_constants(ar, *args, **kwargs)


register(
    Rule("unique", np.unique, impl=_unique, differentiable=False, family="constants"),
    np.unique,
)
