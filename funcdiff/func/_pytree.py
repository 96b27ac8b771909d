"""Pytrees: nested tuples, lists and dicts of arrays, flattened to a list of leaves.

The containers are those of ``torch.utils._pytree`` and JAX: ``tuple`` (named tuples
keep their type), ``list``, ``dict`` (keys in insertion order) and ``None``, an empty
container. Anything else (an ndarray, a Tensor, a Python number) is a leaf.
:func:`tree_flatten` returns the leaves and a hashable :class:`TreeSpec`;
:func:`tree_unflatten` rebuilds the structure from a spec and new leaves.

Examples
--------
>>> import numpy as np
>>> leaves, spec = tree_flatten({"w": np.ones(2), "b": (1.0, [2.0])})
>>> len(leaves), spec.num_leaves
(3, 3)
>>> tree_unflatten(spec, [10, 20, 30])
{'w': 10, 'b': (20, [30])}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "LEAF",
    "TreeSpec",
    "ravel_pytree",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
]


@dataclass(frozen=True)
class TreeSpec:
    """The structure of a pytree, without its leaves (hashable, comparable).

    Attributes
    ----------
    kind : str
        ``"leaf"``, ``"tuple"``, ``"namedtuple"``, ``"list"``, ``"dict"`` or ``"none"``.
    context : Any
        The dict's keys (a tuple), the named tuple's type, else None.
    children : tuple of TreeSpec
        One spec per element (per value, for a dict).
    num_leaves : int
        How many leaves the structure holds.
    """

    kind: str
    context: Any = None
    children: tuple[TreeSpec, ...] = ()
    num_leaves: int = 1

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = [repr(c) for c in self.children]
        if self.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.context, inner)) + "}"
        if self.kind == "list":
            return "[" + ", ".join(inner) + "]"
        name = self.context.__name__ if self.kind == "namedtuple" else ""
        comma = "," if len(inner) == 1 and self.kind == "tuple" else ""
        return f"{name}(" + ", ".join(inner) + comma + ")"

    def is_leaf(self) -> bool:
        """Whether the whole tree is one leaf."""
        return self.kind == "leaf"


#: The spec of a single leaf.
LEAF = TreeSpec("leaf")
_NONE = TreeSpec("none", None, (), 0)


def _node(kind: str, context: Any, children: tuple[TreeSpec, ...]) -> TreeSpec:
    return TreeSpec(kind, context, children, sum(c.num_leaves for c in children))


def _flatten_into(tree: Any, leaves: list, is_leaf: Callable[[Any], bool] | None) -> TreeSpec:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return LEAF
    if tree is None:
        return _NONE
    kind = type(tree)
    if kind is tuple or kind is list:
        children = tuple(_flatten_into(c, leaves, is_leaf) for c in tree)
        return _node("tuple" if kind is tuple else "list", None, children)
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        children = tuple(_flatten_into(c, leaves, is_leaf) for c in tree)
        return _node("namedtuple", kind, children)
    if isinstance(tree, dict):
        keys = tuple(tree)
        children = tuple(_flatten_into(tree[k], leaves, is_leaf) for k in keys)
        return _node("dict", keys, children)
    if isinstance(tree, (tuple, list)):  # a subclass: its elements, in its own type's place
        children = tuple(_flatten_into(c, leaves, is_leaf) for c in tree)
        return _node("tuple" if isinstance(tree, tuple) else "list", None, children)
    leaves.append(tree)
    return LEAF


def tree_flatten(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[Any], TreeSpec]:
    """The leaves of ``tree`` (depth first, left to right) and its structure.

    Parameters
    ----------
    tree : Any
        Nested tuples, lists and dicts; anything else is a leaf, ``None`` an empty node.
    is_leaf : callable, optional
        Called on every node first: where it returns True the node is a leaf (for
        example ``lambda x: x is None`` to keep ``None`` as a leaf).

    Returns
    -------
    leaves : list
    spec : TreeSpec

    Examples
    --------
    >>> tree_flatten([1, (2, None), {"a": 3}])
    ([1, 2, 3], [*, (*, None), {'a': *}])
    """
    leaves: list[Any] = []
    spec = _flatten_into(tree, leaves, is_leaf)
    return leaves, spec


def tree_unflatten(spec: TreeSpec, leaves: Sequence[Any]) -> Any:
    """The pytree of structure ``spec`` holding ``leaves`` (in :func:`tree_flatten`'s order).

    Raises
    ------
    ValueError
        When the number of leaves differs from ``spec.num_leaves``.

    Examples
    --------
    >>> _, spec = tree_flatten((0, [0, 0]))
    >>> tree_unflatten(spec, "abc")
    ('a', ['b', 'c'])
    """
    if len(leaves) != spec.num_leaves:
        raise ValueError(
            f"tree_unflatten: the structure {spec!r} holds {spec.num_leaves} leaves, "
            f"got {len(leaves)}"
        )
    it = iter(leaves)
    return _build(spec, it)


def _build(spec: TreeSpec, it: Any) -> Any:
    kind = spec.kind
    if kind == "leaf":
        return next(it)
    if kind == "none":
        return None
    children = [_build(c, it) for c in spec.children]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "dict":
        return dict(zip(spec.context, children))
    return spec.context(*children)  # namedtuple


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of ``tree``, as :func:`tree_flatten` orders them."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> TreeSpec:
    """The :class:`TreeSpec` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(
    fn: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """``fn`` applied to every leaf of ``tree`` (and the matching leaves of ``rest``).

    Raises
    ------
    ValueError
        When a tree of ``rest`` has another structure than ``tree``.

    Examples
    --------
    >>> tree_map(lambda a, b: a + b, {"x": 1, "y": (2, 3)}, {"x": 10, "y": (20, 30)})
    {'x': 11, 'y': (22, 33)}
    """
    leaves, spec = tree_flatten(tree, is_leaf)
    others = []
    for other in rest:
        other_leaves, other_spec = tree_flatten(other, is_leaf)
        if other_spec != spec:
            raise ValueError(
                f"tree_map: the trees differ in structure: {spec!r} and {other_spec!r}"
            )
        others.append(other_leaves)
    return tree_unflatten(spec, [fn(*args) for args in zip(leaves, *others)])


def ravel_pytree(tree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """One flat vector holding every leaf of ``tree``, and the function that undoes it.

    The leaves (arrays or numbers) are raveled in C order and concatenated, in the
    common dtype of the leaves (float64 for integers alone, as JAX does for a
    gradient's sake). ``unravel(flat)`` splits a vector of the same length back into
    the structure, each piece reshaped and cast to its leaf's dtype. It works on
    Tensors too, so a flattened parameter vector can be differentiated (this is
    HIPS autograd's ``autograd.misc.flatten``).

    Parameters
    ----------
    tree : pytree
        Nested tuples, lists and dicts of ndarrays or numbers.

    Returns
    -------
    flat : ndarray
        1-d, of length the total size of the leaves.
    unravel : callable
        ``unravel(flat)`` rebuilds the pytree.

    Raises
    ------
    TypeError
        A leaf that is not numeric.
    ValueError
        From ``unravel``: a ``flat`` that is not 1-d of the original length.

    Examples
    --------
    >>> import numpy as np
    >>> flat, unravel = ravel_pytree({"w": np.ones((2, 2)), "b": np.array([5.0])})
    >>> flat
    array([1., 1., 1., 1., 5.])
    >>> unravel(flat * 2)["b"]
    array([10.])
    """
    leaves, spec = tree_flatten(tree)
    shapes = [np.shape(x) for x in leaves]
    dtypes = [_dtype_of(x) for x in leaves]
    for k, dtype in enumerate(dtypes):
        if dtype.kind not in "biufc":
            raise TypeError(
                f"ravel_pytree: leaf {k} must be an array or a number, got {type(leaves[k])}"
                f" of dtype {dtype}"
            )
    common = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    if common.kind not in "fc":
        common = np.dtype(np.float64)
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    total = sum(sizes)
    if leaves:
        flat = np.concatenate([np.ravel(x).astype(common) for x in leaves])
    else:
        flat = np.zeros(0, dtype=common)

    def unravel(flat: Any) -> Any:
        if np.ndim(flat) != 1 or np.shape(flat)[0] != total:
            raise ValueError(
                f"unravel: flat must be a 1-d array of length {total}, got shape {np.shape(flat)}"
            )
        pieces = []
        start = 0
        for shape, size, dtype in zip(shapes, sizes, dtypes, strict=True):
            piece = flat[start : start + size].reshape(shape)
            if piece.dtype != dtype and dtype.kind in "fc":
                piece = piece.astype(dtype)
            pieces.append(piece)
            start += size
        return tree_unflatten(spec, pieces)

    return flat, unravel


def _dtype_of(x: Any) -> np.dtype:
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(x).dtype
