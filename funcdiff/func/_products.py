"""torch.func's products with vectors: ``vjp``, ``jvp`` and ``linearize``.

``vjp`` runs the function once and returns a function that pulls cotangents back
through the recorded graph (kept for any number of calls); ``jvp`` pushes tangents
forward through it in forward mode (``funcdiff.autograd.forward.push_forward``);
``linearize`` records once and pushes any number of tangents later. Arguments,
nesting and results follow :mod:`funcdiff.func._transforms`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor, gradient_edge, wrap
from funcdiff._functional_args import check_callable
from funcdiff.autograd import grad as autograd_grad
from funcdiff.autograd.forward import push_forward
from funcdiff.func._pytree import TreeSpec, tree_flatten, tree_unflatten
from funcdiff.func._transforms import (
    Prepared,
    call,
    is_nested,
    keep_graph,
    zeros_like_leaf,
)

__all__ = ["jvp", "linearize", "vjp"]


# --------------------------------------------------------------------------- vjp
def _check_like(
    given: Any, expected: Sequence[Any], spec: TreeSpec, what: str, of: str
) -> list[Any]:
    """The leaves of ``given``, which must have ``spec``'s structure and ``expected``'s
    shapes; ValueError naming ``what`` otherwise."""
    leaves, given_spec = tree_flatten(given)
    if given_spec != spec:
        raise ValueError(f"{what} must have the structure of {of}, {spec!r}, got {given_spec!r}")
    for k, (a, b) in enumerate(zip(leaves, expected, strict=True)):
        if not (isinstance(a, Tensor) or _is_number_or_ndarray(a) or _is_array_type(a)):
            raise TypeError(f"{what}: leaf {k} must be an ndarray or a number, got {type(a)}")
        if np.shape(a) != np.shape(b):
            raise ValueError(
                f"{what}: leaf {k} has shape {np.shape(a)}, but {of} has shape {np.shape(b)} there"
            )
    return leaves


def _as_seed(v: Any, like: Any, graph: bool) -> Any:
    """A cotangent or tangent in ``like``'s dtype: a Tensor under ``graph``."""
    if isinstance(v, Tensor):
        return v if graph else v.data
    dtype = like.dtype if isinstance(like, (Tensor, np.ndarray)) else np.dtype(np.float64)
    dtype = dtype if dtype.kind in "fc" else np.dtype(np.float64)
    if _is_number_or_ndarray(v):
        arr = np.asarray(v, dtype=dtype)
    else:  # another array type (a batched value of vmap): converted by its own method
        arr = v if v.dtype == dtype else v.astype(dtype)
    return wrap(arr, False, None, 0) if graph else arr


def _is_array_type(v: Any) -> bool:
    """An array of another library with a numeric dtype (vmap's batched values)."""
    dtype = getattr(v, "dtype", None)
    return hasattr(v, "shape") and isinstance(dtype, np.dtype) and dtype.kind in "fciu"


def _is_number_or_ndarray(v: Any) -> bool:
    """A Python number or a numeric ndarray (or NumPy scalar); booleans are not."""
    if isinstance(v, (np.ndarray, np.generic)):
        return v.dtype.kind in "fciu"
    return isinstance(v, (int, float, complex)) and not isinstance(v, bool)


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple:
    """The value of ``func`` at ``primals`` and its vector-Jacobian product function.

    Parameters
    ----------
    func : callable
        Plain NumPy code; returns a pytree of arrays (``(output, aux)`` with ``has_aux``).
    *primals
        The point: every argument is differentiated (ndarrays, numbers, or tuples,
        lists and dicts of them).
    has_aux : bool
        ``func`` returns ``(output, aux)``.

    Returns
    -------
    output
        ``func(*primals)`` with ndarray leaves.
    vjp_fn : callable
        ``vjp_fn(cotangents)``, with ``cotangents`` structured and shaped like
        ``output``, returns a tuple with one gradient per primal, each shaped like it.
        It may be called any number of times.
    aux
        Only with ``has_aux``.

    Raises
    ------
    ValueError
        From ``vjp_fn``: cotangents of another structure or shape than the output.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import vjp
    >>> out, vjp_fn = vjp(lambda x: x ** 2, np.array([1.0, 2.0]))
    >>> vjp_fn(np.array([1.0, 10.0]))
    (array([ 2., 40.]),)
    """
    check_callable(func, "func")
    nested = is_nested()
    prepared = Prepared(primals, range(len(primals)), "vjp", copy=True)
    output, aux = call(func, prepared, {}, has_aux, "vjp")
    outs, out_spec = tree_flatten(output)
    keep = keep_graph(prepared, outs, nested, aux)

    def vjp_fn(cotangents: Any) -> tuple:
        cots = _check_like(cotangents, outs, out_spec, "vjp_fn: cotangents", "the output")
        graph = keep or is_nested() or any(isinstance(c, Tensor) and c.requires_grad for c in cots)
        live = [(o, c) for o, c in zip(outs, cots) if isinstance(o, Tensor) and o.requires_grad]
        grads: Sequence[Tensor | None] = (None,) * len(prepared.leaves)
        if live and prepared.leaves:
            grads = autograd_grad(
                [o for o, _ in live],
                prepared.leaves,
                [_as_seed(c, o, graph) for o, c in live],
                retain_graph=True,
                create_graph=graph,
                allow_unused=True,
            )
        values = [
            zeros_like_leaf(t) if g is None else prepared.finish(g, graph)
            for g, t in zip(grads, prepared.leaves, strict=True)
        ]
        return tuple(prepared.per_position(values))

    result = (prepared.finish_tree(output, keep), vjp_fn)
    return (*result, prepared.finish_tree(aux, keep)) if has_aux else result


# --------------------------------------------------------------------------- jvp
def _push(prepared: Prepared, outs: list[Any], tangents: list[Any], graph: bool) -> list[Any]:
    """``J t`` for every output leaf (zeros where an output does not depend on the
    primals), as ndarrays, or Tensors under ``graph``."""
    live = [o for o in outs if isinstance(o, Tensor) and o.requires_grad]
    pushed: list[Any] = []
    seeds: dict = {}
    if live and prepared.leaves:
        for t, leaf in zip(tangents, prepared.leaves, strict=True):
            seeds[gradient_edge(leaf)] = _as_seed(t, leaf, graph)
        pushed = push_forward(live, seeds, create_graph=graph)
    given = {id(s) for s in seeds.values()}
    by_id = dict(zip(map(id, live), pushed))
    result = []
    for o in outs:
        p = by_id.get(id(o))
        if p is None:
            dtype = o.dtype if isinstance(o, (Tensor, np.ndarray)) else np.dtype(np.float64)
            result.append(np.zeros(np.shape(o), dtype if dtype.kind in "fc" else np.float64))
        elif graph:
            result.append(prepared.finish(p, graph))
        elif isinstance(p, np.ndarray) and (id(p) in given or not p.flags.writeable):
            result.append(p.copy())  # never the caller's tangent, or a read-only view
        else:
            result.append(np.asarray(p) if isinstance(p, np.generic) else p)
    return result


def _as_tuple_arg(value: Any, what: str, name: str) -> tuple:
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{name}: {what} must be a tuple or list, got {type(value).__name__}")
    return tuple(value)


def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, has_aux: bool = False) -> tuple:
    """The value of ``func`` at ``primals`` and the Jacobian-vector product along
    ``tangents``, in forward mode (about the cost of one more evaluation).

    Parameters
    ----------
    func : callable
        Plain NumPy code; returns a pytree of arrays (``(output, aux)`` with ``has_aux``).
    primals : tuple or list
        The arguments of ``func`` (each an ndarray, a number or a pytree of them).
    tangents : tuple or list
        One tangent per primal, with its structure and shapes.
    has_aux : bool
        ``func`` returns ``(output, aux)``.

    Returns
    -------
    output, jvp_out
        ``func(*primals)`` and ``J tangents``, both structured like the output
        (``output, jvp_out, aux`` with ``has_aux``).

    Raises
    ------
    TypeError
        ``primals`` or ``tangents`` not a tuple or list.
    ValueError
        ``tangents`` of another structure or shape than ``primals``.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import jvp
    >>> jvp(lambda x: np.sin(x) * 2.0, (np.array([0.0, 1.0]),), (np.array([1.0, 1.0]),))
    (array([0.        , 1.68294197]), array([2.        , 1.08060461]))
    """
    check_callable(func, "func")
    primals = _as_tuple_arg(primals, "primals", "jvp")
    tangents = _as_tuple_arg(tangents, "tangents", "jvp")
    nested = is_nested()
    prepared = Prepared(primals, range(len(primals)), "jvp")
    tans = _check_like(
        tangents, prepared.leaves, tree_flatten(primals)[1], "jvp: tangents", "primals"
    )
    output, aux = call(func, prepared, {}, has_aux, "jvp")
    outs, out_spec = tree_flatten(output)
    keep = keep_graph(prepared, outs, nested, aux) or any(
        isinstance(t, Tensor) and t.requires_grad for t in tans
    )
    result = (
        prepared.finish_tree(output, keep),
        tree_unflatten(out_spec, _push(prepared, outs, tans, keep)),
    )
    return (*result, prepared.finish_tree(aux, keep)) if has_aux else result


def linearize(func: Callable[..., Any], *primals: Any) -> tuple:
    """The value of ``func`` at ``primals`` and a function computing Jacobian-vector
    products there.

    ``func`` runs once; every call ``jvp_fn(*tangents)`` pushes the tangents (one per
    primal, shaped like it) through the recorded computation in forward mode, without
    running ``func`` again.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import linearize
    >>> out, jvp_fn = linearize(lambda x: x ** 3, np.array([1.0, 2.0]))
    >>> jvp_fn(np.array([1.0, 0.5]))
    array([3., 6.])
    """
    check_callable(func, "func")
    nested = is_nested()
    prepared = Prepared(primals, range(len(primals)), "linearize", copy=True)
    spec = tree_flatten(primals)[1]
    output, _ = call(func, prepared, {}, False, "linearize")
    outs, out_spec = tree_flatten(output)
    keep = keep_graph(prepared, outs, nested, None)

    def jvp_fn(*tangents: Any) -> Any:
        tans = _check_like(tangents, prepared.leaves, spec, "jvp_fn: tangents", "primals")
        graph = keep or is_nested() or any(isinstance(t, Tensor) and t.requires_grad for t in tans)
        return tree_unflatten(out_spec, _push(prepared, outs, tans, graph))

    return prepared.finish_tree(output, keep), jvp_fn
