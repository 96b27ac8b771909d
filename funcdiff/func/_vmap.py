"""``vmap``: run a function written for one example on a whole batch at once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff._core import tracing
from funcdiff._core.tensor import Tensor
from funcdiff._functional_args import check_callable, check_choice
from funcdiff.func._batching import Batched, Level, enter, leave
from funcdiff.func._pytree import tree_flatten, tree_unflatten

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def _check_dim(d: Any, where: str, name: str) -> None:
    if d is not None and (not isinstance(d, (int, np.integer)) or isinstance(d, bool)):
        raise ValueError(f"vmap: {name} must be an int or None at {where}, got {d!r}")


def _broadcast(dims: Any, tree: Any, name: str, where: str) -> list:
    """``dims`` (an int, None, or a structure matching a prefix of ``tree``) as one dim
    per leaf of ``tree``."""
    if dims is None or isinstance(dims, (int, np.integer)):
        _check_dim(dims, where, name)
        return [dims] * len(tree_flatten(tree)[0])
    if isinstance(dims, dict):
        if not isinstance(tree, dict) or set(dims) != set(tree):
            raise ValueError(
                f"vmap: {name} at {where} is a dict with keys {sorted(map(str, dims))} but "
                f"the value there is {_describe(tree)}"
            )
        return [d for k in tree for d in _broadcast(dims[k], tree[k], name, f"{where}[{k!r}]")]
    if isinstance(dims, (tuple, list)):
        if not isinstance(tree, (tuple, list)) or len(dims) != len(tree):
            raise ValueError(
                f"vmap: {name} at {where} has {len(dims)} entries ({dims!r}) but the value "
                f"there is {_describe(tree)}"
            )
        return [
            d
            for i, (d, t) in enumerate(zip(dims, tree))
            for d in _broadcast(d, t, name, f"{where}[{i}]")
        ]
    raise ValueError(
        f"vmap: {name} must be an int, None, or a tuple, list or dict of them, got {dims!r}"
    )


def _describe(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} items"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(map(str, x))}"
    return f"a {type(x).__name__}"


def _size_of(leaves: list, dims: list) -> int:
    size: int | None = None
    first = -1
    for k, (x, d) in enumerate(zip(leaves, dims)):
        if d is None:
            continue
        if isinstance(x, (bool, int, float, complex)) or not hasattr(x, "shape"):
            raise ValueError(
                f"vmap: in_dims maps argument leaf {k} ({type(x).__name__} {x!r}) along "
                f"dimension {d}, but only arrays have dimensions: give it in_dims=None"
            )
        ndim = len(x.shape)
        if not -ndim <= d < ndim:
            raise ValueError(
                f"vmap: in_dims gives dimension {d} for argument leaf {k} of shape "
                f"{tuple(x.shape)}, out of range for its {ndim} dimensions"
            )
        n = int(x.shape[d])
        if size is None:
            size, first = n, k
        elif n != size:
            raise ValueError(
                f"vmap: the mapped dimensions have different sizes: in_dims maps argument "
                f"leaf {first} with size {size} and argument leaf {k} with size {n}"
            )
    if size is None:
        raise ValueError(
            "vmap: in_dims maps no argument (every entry is None): at least one input "
            "must have a dimension to map over"
        )
    return size


def _batched_at(x: Any, level: Level) -> bool:
    data = x.data if isinstance(x, Tensor) else x
    return isinstance(data, Batched) and data.level is level


def _move_out(x: Any, d: Any, level: Level, k: int) -> Any:
    if d is None:
        if _batched_at(x, level):
            raise ValueError(
                f"vmap: out_dims is None for output leaf {k}, but that output differs "
                "between examples: give it an output dimension"
            )
        return x
    ndim = len(np.shape(x)) + 1
    if not -ndim <= d < ndim:
        raise ValueError(
            f"vmap: out_dims gives dimension {d} for output leaf {k}, which has "
            f"{ndim - 1} dimensions per example"
        )
    out = leave(x, level, int(d) % ndim)
    if isinstance(out, Tensor) and not out.requires_grad:
        out = out.data  # funcdiff.functional's results inside: arrays, as every transform's
    if type(out) is np.ndarray and not out.flags.writeable:
        out = out.copy()  # broadcast along the batch: a copy the caller may write to
    return out


def _run(
    warned: set[str],
    func: Callable,
    args: tuple,
    kwargs: dict,
    leaves: list,
    dims: list,
    spec: Any,
    size: int,
    out_dims: Any,
) -> Any:
    level = Level(size, warned)
    try:
        mapped = [x if d is None else enter(x, level, int(d)) for x, d in zip(leaves, dims)]
        out = func(*tree_unflatten(spec, mapped), **kwargs)
    finally:
        level.active = False
    out_leaves, out_spec = tree_flatten(out)
    odims = _output_dims(out_dims, out)
    return tree_unflatten(
        out_spec, [_move_out(x, d, level, k) for k, (x, d) in enumerate(zip(out_leaves, odims))]
    )


def _output_dims(out_dims: Any, out: Any) -> list:
    """One output dimension per leaf of ``out`` (``out_dims=(d,)`` also fits a function
    that returns a single array, as in torch.func)."""
    try:
        return _broadcast(out_dims, out, "out_dims", "the output")
    except ValueError:
        if isinstance(out_dims, (tuple, list)) and len(out_dims) == 1:
            return _broadcast(out_dims[0], out, "out_dims", "the output")
        raise


def _slice(x: Any, d: int, start: int, stop: int) -> Any:
    index = [slice(None)] * len(x.shape)
    index[d] = slice(start, stop)
    return x[tuple(index)]


def _concat(parts: list, spec: Any, out_dims: Any, out: Any) -> Any:
    leaves = [tree_flatten(p)[0] for p in parts]
    odims = _output_dims(out_dims, tree_unflatten(spec, leaves[0]))
    merged = []
    for k, d in enumerate(odims):
        column = [p[k] for p in leaves]
        merged.append(column[0] if d is None else np.concatenate(column, axis=int(d)))
    return tree_unflatten(spec, merged)


def _loop_whole(
    func: Callable,
    args: tuple,
    kwargs: dict,
    leaves: list,
    dims: list,
    spec: Any,
    size: int,
    out_dims: Any,
) -> Any:
    """``randomness="different"``: every example runs on its own, drawing its own numbers."""
    results = []
    for b in range(size):
        picked = [x if d is None else np.take(x, b, axis=int(d)) for x, d in zip(leaves, dims)]
        results.append(func(*tree_unflatten(spec, picked), **kwargs))
    out_leaves, out_spec = tree_flatten(results[0])
    odims = _output_dims(out_dims, results[0])
    columns = [tree_flatten(r)[0] for r in results]
    merged = [
        columns[0][k] if d is None else np.stack([c[k] for c in columns], axis=int(d))
        for k, d in enumerate(odims)
    ]
    return tree_unflatten(out_spec, merged)


def _random_state() -> Any:
    """The global generator's position (``np.random.*`` functions draw from it)."""
    return np.random.get_state()  # noqa: NPY002 (the legacy global generator is watched)


def _same_state(a: Any, b: Any) -> bool:
    return a[2:] == b[2:] and np.array_equal(a[1], b[1])


def vmap(
    func: Callable,
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: int | None = None,
) -> Callable:
    """Vectorize ``func`` over a batch dimension of its inputs (torch.func's ``vmap``).

    ``func`` is written for one example, with NumPy; the returned function takes the
    same arguments with an extra dimension (where ``in_dims`` says) and returns every
    example's result stacked (where ``out_dims`` says). The examples run together, as
    batched NumPy calls chosen by the batching rules of the rule table, not in a loop.

    Parameters
    ----------
    func : callable
        A function of arrays, Python numbers, and nested tuples, lists and dicts of them;
        keyword arguments are passed unmapped.
    in_dims : int, None, or a structure of them
        The batch dimension of each argument: an int (negative counts from the end)
        for all of them, or a tuple with one entry per positional argument, each an
        int, None (unmapped: the same value for every example) or a structure matching
        that argument. Python numbers need None.
    out_dims : int, None, or a structure of them
        Where the batch dimension goes in each output; None returns an output that does
        not depend on the batch as it is. An output that does not depend on the batch
        is broadcast along it.
    randomness : {"error", "different", "same"}
        ``"error"`` raises when ``func`` draws from NumPy's global random generator
        (or converts a batched value for a Generator); ``"same"`` lets it draw once
        for the whole batch; ``"different"`` runs the examples one by one so each
        draws its own numbers.
    chunk_size : int, optional
        Run the batch in chunks of this many examples and concatenate the results:
        the same results, with peak memory that scales with the chunk.

    Returns
    -------
    callable
        The vectorized function.

    Raises
    ------
    ValueError
        For ``in_dims``/``out_dims`` that do not match the arguments or outputs, a
        dimension out of range, a mapped Python number, no mapped argument, batch
        sizes that differ (the message names ``in_dims`` and both sizes) or
        ``chunk_size <= 0``.
    RuntimeError
        When ``func`` converts a batched value to a Python value (``if``, ``float``,
        ``.item()``, ``math.*``), writes one into an unbatched array, or draws random
        numbers with ``randomness="error"``; when the call runs inside a
        ``funcdiff.replay`` or ``funcdiff.sparse`` trace.

    Warns
    -----
    VmapFallbackWarning
        Once per call for each NumPy function without a batching rule, which then runs
        once per example (the right answer, slowly).

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import vmap
    >>> dot = lambda a, b: a @ b
    >>> vmap(dot)(np.ones((4, 3)), np.arange(12.0).reshape(4, 3))
    array([ 3., 12., 21., 30.])
    >>> vmap(dot, in_dims=(0, None))(np.eye(3), np.array([1.0, 2.0, 3.0]))
    array([1., 2., 3.])
    >>> pairwise = vmap(vmap(lambda x, y: np.sum((x - y) ** 2), (None, 0)), (0, None))
    >>> pairwise(np.zeros((2, 2)), np.ones((3, 2)))
    array([[2., 2., 2.],
           [2., 2., 2.]])
    """
    check_callable(func, "func")
    check_choice(randomness, "randomness", _RANDOMNESS)
    if chunk_size is not None and (
        not isinstance(chunk_size, (int, np.integer))
        or isinstance(chunk_size, bool)
        or chunk_size <= 0
    ):
        raise ValueError(f"vmap: chunk_size must be a positive int or None, got {chunk_size!r}")

    @functools.wraps(func)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        if tracing.is_watched():
            raise RuntimeError(
                "vmap cannot run while funcdiff.replay or funcdiff.sparse traces the "
                "function (their records hold one value per operation, not a batch): "
                "differentiate the vmapped function with funcdiff.func (grad, jacrev, "
                "jacfwd, hessian) instead, or trace a function written for the whole batch"
            )
        if isinstance(in_dims, (int, np.integer)) or in_dims is None:
            dims = _broadcast(in_dims, args, "in_dims", "the arguments")
        elif isinstance(in_dims, tuple):
            if len(in_dims) != len(args):
                raise ValueError(
                    f"vmap: in_dims has {len(in_dims)} entries but the function was called "
                    f"with {len(args)} positional arguments"
                )
            dims = _broadcast(in_dims, args, "in_dims", "the arguments")
        else:
            raise ValueError(
                f"vmap: in_dims must be an int, None or a tuple with one entry per "
                f"positional argument, got {in_dims!r}"
            )
        leaves, spec = tree_flatten(args)
        size = _size_of(leaves, dims)
        leaves = [
            x if d is None or hasattr(x, "__array_function__") else np.asarray(x)
            for x, d in zip(leaves, dims)
        ]
        dims = [d if d is None else int(d) % len(x.shape) for x, d in zip(leaves, dims)]
        if randomness == "different":
            return _loop_whole(func, args, kwargs, leaves, dims, spec, size, out_dims)
        before = _random_state() if randomness == "error" else None
        warned: set[str] = set()
        if chunk_size is None or chunk_size >= size:
            out = _run(warned, func, args, kwargs, leaves, dims, spec, size, out_dims)
        else:
            parts = []
            for start in range(0, size, chunk_size):
                stop = min(start + chunk_size, size)
                chunk = [
                    x if d is None else _slice(x, d, start, stop) for x, d in zip(leaves, dims)
                ]
                parts.append(
                    _run(warned, func, args, kwargs, chunk, dims, spec, stop - start, out_dims)
                )
            out_spec = tree_flatten(parts[0])[1]
            out = _concat(parts, out_spec, out_dims, parts[0])
        if before is not None and not _same_state(before, _random_state()):
            raise RuntimeError(
                "vmap: the mapped function drew numbers from NumPy's global random "
                "generator with randomness='error'; choose randomness='same' (one draw "
                "for the whole batch) or 'different' (a draw per example)"
            )
        return out

    return mapped
