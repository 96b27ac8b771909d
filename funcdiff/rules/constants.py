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
from funcdiff._core.registry import Rule, Structure, dispatching, register
from funcdiff._core.tensor import Tensor
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case

# The functions whose results carry no derivative, each with its batching rule for
# vmap (None: the loop over examples).
_FLAT = batching.shift_axis(tuples=False)
_SORT = batching.shift_axis(default=-1, tuples=False)
_AXES = batching.shift_axis()
_CONSTANT_FUNCTIONS: list[tuple[Callable, batching.BatchRule | None]] = [
    (np.zeros_like, batching.like),
    (np.ones_like, batching.like),
    (np.empty_like, batching.like),
    (np.argmax, _FLAT),
    (np.argmin, _FLAT),
    (np.nanargmax, _FLAT),
    (np.nanargmin, _FLAT),
    (np.argsort, _SORT),
    (np.argpartition, None),
    (np.lexsort, None),
    (np.nonzero, None),
    (np.flatnonzero, None),
    (np.argwhere, None),
    (np.searchsorted, None),
    (np.digitize, None),
    (np.isclose, batching.elementwise),
    (np.allclose, None),
    (np.array_equal, None),
    (np.array_equiv, None),
    (np.count_nonzero, _AXES),
    (np.any, _AXES),
    (np.all, _AXES),
    (np.isreal, batching.elementwise),
    (np.iscomplex, batching.elementwise),
    (np.isin, None),
    (np.unravel_index, None),
    (np.ravel_multi_index, None),
    (np.diag_indices_from, None),
    (np.tril_indices_from, None),
    (np.triu_indices_from, None),
]

for _fn, _batch in _CONSTANT_FUNCTIONS:
    register(Rule(_fn.__name__, _fn, differentiable=False, family="constants", batch=_batch))


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
        structure=Structure("full_like", "linear"),
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
