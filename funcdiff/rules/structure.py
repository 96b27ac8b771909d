"""The vocabulary of Jacobian and Hessian structures that rules declare.

Each rule declares its structure in its own entry, ``Rule(..., structure=...)``, or
inherits its factory's (``unary`` and ``binary``: elementwise; ``_layout_rule``: a
selection). Sparsity detection (:mod:`funcdiff.sparse`) reads two facts from it, and
forward mode gathers the tangents of a selection instead of transposing its vjp:

``pattern``
    which input elements each output element depends on:

    * ``"elementwise"``: the Jacobian is diagonal after broadcasting (``Rule.diagonal``);
    * ``"select"``: every output element is a copy of one input element or a constant,
      at positions that depend on shapes and constant arguments only (reshape, slicing,
      ``concatenate``, ``pad``, ``roll``, ``tril``); found by running the rule's own
      forward on arrays of element positions;
    * ``"reduce"``: each output element reads one fibre of the input (``sum``, ``max``,
      ``var``, norms), the axes given by ``axes(args, kwargs, ndim)``;
    * ``"scan"``: element ``i`` of a fibre reads elements ``0..i`` (``cumsum``);
    * ``"fibre"``: each output element reads the whole fibre along an axis of every
      argument, output shaped like the input (``sort``, ``cross``, recurrences);
    * ``"contract"``: a multilinear contraction (``matmul``, ``einsum``), exact with
      constant operands' zeros taken into account;
    * a name of a special pattern rule (``"where"``, ``"setitem"``, ``"index_add"``,
      ``"bincount"``, ``"full_like"``, ``"convolve"``, ``"outer"``, ``"kron"``);
    * ``"dense"``: every output element may depend on every input element (matrix
      factorizations, solves, inverses: generically dense).

``curvature``
    what the rule adds to a Hessian's pattern: ``"linear"`` (nothing),
    ``"piecewise"`` (linear between kinks: nothing, as the rules' second derivatives are
    zero there), ``"bilinear"`` (products of one element of each argument, no squares),
    ``"quotient"`` (``x / y``: no ``x``-``x`` term), ``"nonlinear"`` (every pair of
    dependencies of an output element).

Every differentiable rule that records a node must declare one (the tests enforce
it), so that a new operation gets a deliberate decision and never a silently wrong
pattern. A new kind is a name here and one propagation function in
``funcdiff/sparse/_pattern_rules.py`` (its ``KINDS`` table).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from funcdiff._core.registry import Structure, all_rules

__all__ = [
    "Structure",
    "ELEMENTWISE",
    "ELEMENTWISE_LINEAR",
    "ELEMENTWISE_PIECEWISE",
    "SELECT",
    "CONTRACT",
    "DENSE",
    "DENSE_LINEAR",
    "reduction",
    "axis_argument",
    "last_axis",
    "structure_of",
    "structure_table",
]

#: Elementwise and nonlinear: the structure of ``unary``/``binary`` rules.
ELEMENTWISE = Structure("elementwise", "nonlinear")
ELEMENTWISE_LINEAR = Structure("elementwise", "linear")
ELEMENTWISE_PIECEWISE = Structure("elementwise", "piecewise")
#: A selection: the structure of ``_layout_rule`` rules.
SELECT = Structure("select", "linear")
#: A multilinear contraction (``matmul``, ``einsum``).
CONTRACT = Structure("contract", "bilinear")
#: Every output element may depend on every input element (factorizations, solves).
DENSE = Structure("dense", "nonlinear")
#: Dense and linear (the FFTs).
DENSE_LINEAR = Structure("dense", "linear")


def axis_argument(position: int, name: str = "axis", default: Any = None) -> Callable:
    """An ``axes`` reader for an ``axis`` argument at ``position`` or by ``name``
    (``None`` means every axis)."""

    def axes(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
        axis = kwargs.get(name, args[position] if len(args) > position else default)
        if axis is None:
            return tuple(range(ndim))
        if isinstance(axis, (tuple, list)):
            return tuple(int(a) % max(ndim, 1) for a in axis)
        return (int(axis) % max(ndim, 1),)

    # Where the argument is, for the batching default of the rule (its axes shift by one).
    axes.argument = (position, name, default)  # type: ignore[attr-defined]
    return axes


def last_axis(args: tuple, kwargs: dict, ndim: int) -> tuple[int, ...]:
    """An ``axes`` reader for rules that work along the last axis."""
    return (ndim - 1,) if ndim else ()


def reduction(curvature: str, axes: Callable | None = None, pattern: str = "reduce") -> Structure:
    """The structure of a reduction (or, with ``pattern``, a scan or fibre rule) over
    the axes of its ``axis`` argument (the second positional one unless ``axes``)."""
    return Structure(pattern, curvature, axis_argument(1) if axes is None else axes)


def structure_of(rule: Any) -> Structure | None:
    """The declared structure of ``rule`` (None: undeclared, which sparsity detection
    treats as dense)."""
    return rule.structure


def structure_table() -> dict[str, Structure]:
    """Rule name -> declared structure, for every registered rule that declares one: a
    view of the rules' own entries."""
    return {r.name: r.structure for r in all_rules() if r.structure is not None}
