"""torch.func's transforms over plain NumPy functions: grad, Jacobians, Hessians.

Each transform makes fresh leaf Tensors for the differentiated arguments (every leaf of
their pytrees: views of the caller's arrays, or copies where a returned function runs
later), runs the function on them under :class:`funcdiff.enable_grad`, and asks the
engine (:func:`funcdiff.grad`) or forward mode (``funcdiff._jacobian``) for the
derivative. Results leave as ndarrays. ``vjp``, ``jvp`` and ``linearize`` are in
:mod:`funcdiff.func._products`.

Nesting works as ``funcdiff.functional``'s ``create_graph=True`` does: a transform
that runs inside another one (the thread's depth of transforms is above zero), whose
arguments are Tensors that require grad, or whose function reached a Tensor that
requires grad from outside its arguments (a closure), records its derivative
computation and returns Tensors connected to that outer graph, which the outer
transform differentiates again. An argument that requires grad gets a recorded alias
instead of a detached copy, so that the inner derivative is taken with respect to the
alias alone (no confusion between the levels).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from funcdiff._core.arrays import is_foreign_array
from funcdiff._core.backends import is_foreign, zeros
from funcdiff._core.graph import SEQUENCE, AccumulateGrad, Node
from funcdiff._core.tensor import Tensor, gradient_edge, tensor, wrap
from funcdiff._functional_args import check_argnums, check_callable, check_choice, check_chunk_size
from funcdiff._jacobian import jacobian_forward, jacobian_reverse
from funcdiff.autograd import enable_grad
from funcdiff.autograd import grad as autograd_grad
from funcdiff.func._pytree import TreeSpec, tree_flatten, tree_unflatten

__all__ = [
    "Prepared",
    "call",
    "finish",
    "grad",
    "grad_and_value",
    "hessian",
    "is_nested",
    "jacfwd",
    "jacrev",
    "keep_graph",
    "positions",
    "zeros_like_leaf",
]

Argnums = int | tuple[int, ...]

# --------------------------------------------------------------------------- nesting
_state = threading.local()


def is_nested() -> bool:
    """Whether the calling code runs inside the function of one of these transforms."""
    return getattr(_state, "depth", 0) > 0


@contextmanager
def _inside() -> Iterator[None]:
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        with enable_grad():
            yield
    finally:
        _state.depth -= 1


# --------------------------------------------------------------------------- arguments
def positions(argnums: Any, nargs: int, name: str) -> tuple[int, ...]:
    """The non-negative positions that ``argnums`` names, in its order.

    Raises TypeError for a non-integer ``argnums`` and ValueError for an empty tuple,
    a position out of range or a repeated one; the messages name ``name``.
    """
    items = check_argnums(argnums)
    if not items:
        raise ValueError(f"{name}: argnums must name at least one argument, got ()")
    result = []
    for i in items:
        if not -nargs <= i < nargs:
            raise ValueError(
                f"{name}: argnums {argnums!r} names argument {i}, but the function was "
                f"called with {nargs} positional argument{'' if nargs == 1 else 's'}"
            )
        result.append(i % nargs)
    if len(set(result)) != len(result):
        raise ValueError(f"{name}: argnums must not repeat an argument, got {argnums!r}")
    return tuple(result)


def _leaf_tensor(x: Any, where: str, copy: bool = True) -> tuple[Tensor, bool]:
    """A fresh Tensor to differentiate with respect to, standing for ``x``, and whether
    it is a recorded alias of a Tensor that requires grad (an outer transform's).

    Without ``copy`` the leaf shares the caller's array: safe while the derivative is
    computed before the transform returns, since funcdiff never writes into a leaf that
    requires grad; ``vjp`` and ``linearize`` return functions that run later, after the
    caller may have changed the array, so they copy."""
    if isinstance(x, Tensor):
        if x.requires_grad:
            return x.reshape(x.shape), True
        data = x.data
    elif isinstance(x, np.ndarray) or is_foreign_array(x) or is_foreign(x):
        data = x  # a batched value of vmap, or a device array (CuPy), as it is
    elif isinstance(x, (int, float, complex, np.number)) and not isinstance(x, (bool, np.bool_)):
        data = np.asarray(x)
    else:
        raise TypeError(
            f"{where} must be an ndarray, a Python number or a Tensor (or a tuple, list "
            f"or dict of them), got {type(x).__name__}"
        )
    if data.dtype.kind in "iu":
        data = data.astype(np.float64)
    elif data.dtype.kind not in "fc":
        raise TypeError(f"{where} must hold floating point or complex numbers, got {data.dtype}")
    if not copy:
        if type(data) is not np.ndarray and isinstance(data, np.ndarray):
            data = np.asarray(data)  # a subclass (np.matrix, ...) as a plain array
        return wrap(data, True, None, 0), False
    return tensor(data, requires_grad=True), False


class Prepared:
    """The arguments of one call, with fresh leaf Tensors at the differentiated positions.

    Attributes
    ----------
    args : list
        The arguments to call the function with.
    positions : tuple of int
        The differentiated positions.
    leaves : list of Tensor
        Every differentiated leaf, position by position.
    specs : list of TreeSpec
        The structure of each differentiated argument.
    outer : bool
        Whether an argument was a Tensor that requires grad (kept connected).
    nested : bool
        Whether the call runs inside another transform's function.
    start : int
        The graph's sequence number before the leaves were made: a node older than
        this belongs to an outer computation.

    ``copy`` makes the leaves copies of the arguments instead of views of them.
    """

    def __init__(
        self, args: Sequence[Any], where: Sequence[int], name: str, copy: bool = False
    ) -> None:
        self.start = next(SEQUENCE)
        self.nested = is_nested()
        self.args = list(args)
        self.positions = tuple(where)
        self.leaves: list[Tensor] = []
        self.specs: list[TreeSpec] = []
        self.counts: list[int] = []
        self.outer = False
        for p in self.positions:
            leaves, spec = tree_flatten(args[p])
            made = []
            for k, leaf in enumerate(leaves):
                where_k = f"{name}: argument {p}" + (f", leaf {k}," if not spec.is_leaf() else "")
                t, alias = _leaf_tensor(leaf, where_k, copy)
                self.outer |= alias
                made.append(t)
            self.args[p] = tree_unflatten(spec, made)
            self.leaves += made
            self.specs.append(spec)
            self.counts.append(len(made))

    def per_position(self, values: Sequence[Any]) -> list[Any]:
        """``values`` (one per leaf) rebuilt into one pytree per differentiated position."""
        out, k = [], 0
        for spec, n in zip(self.specs, self.counts, strict=True):
            out.append(tree_unflatten(spec, list(values[k : k + n])))
            k += n
        return out

    def finish(self, x: Any, keep: bool) -> Any:
        """:func:`finish` for a result of this call: at the top level, where ``keep``
        came from a closure, only a result that reaches outside stays a Tensor."""
        if keep and isinstance(x, Tensor) and x.requires_grad and not (self.nested or self.outer):
            keep = self.reaches_outside([x])
        return finish(x, keep)

    def finish_tree(self, tree: Any, keep: bool) -> Any:
        """:meth:`finish` for every leaf of ``tree``."""
        leaves, spec = tree_flatten(tree)
        return tree_unflatten(spec, [self.finish(x, keep) for x in leaves])

    def reaches_outside(self, outputs: Sequence[Any]) -> bool:
        """Whether ``outputs`` depend on a Tensor that requires grad other than the leaves
        (a closure over an outer transform's value, or a user's leaf)."""
        own = {gradient_edge(t)[0] for t in self.leaves}
        stack: list[Node] = [
            o.grad_fn
            for o in outputs
            if isinstance(o, Tensor) and o.requires_grad and o.grad_fn is not None
        ]
        stack += [
            gradient_edge(o)[0]
            for o in outputs
            if isinstance(o, Tensor) and o.requires_grad and o.grad_fn is None
        ]
        seen = own  # own leaves end the walk like nodes already seen
        start, push, pop, add = self.start, stack.append, stack.pop, seen.add
        while stack:
            node = pop()
            if node in seen:
                continue
            if node.seq < start or type(node) is AccumulateGrad:
                return True
            add(node)
            for e in node.edges:
                if e is not None:
                    push(e[0])
        return False


def call(
    func: Callable[..., Any], prepared: Prepared, kwargs: dict[str, Any], has_aux: bool, name: str
) -> tuple[Any, Any]:
    """``func`` run on the prepared arguments: ``(output, aux)`` (aux None without
    ``has_aux``)."""
    with _inside():
        out = func(*prepared.args, **kwargs)
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError(
            f"{name}(f, has_aux=True): f must return a pair (output, aux), got {_describe(out)}"
        )
    return out[0], out[1]


def _describe(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    if isinstance(x, (Tensor, np.ndarray)):
        return f"an array of shape {x.shape}"
    return f"a {type(x).__name__}"


def finish(x: Any, keep: bool) -> Any:
    """A result as the user sees it: an ndarray, or a Tensor where ``keep`` and it is
    connected to a graph (nested transforms differentiate it again)."""
    if isinstance(x, Tensor):
        if keep and x.requires_grad:
            return x
        data = x.data
        # A NumPy scalar as a 0-d array; anything else (an ndarray, or another array
        # type that a Tensor may hold) as it is.
        return np.asarray(data) if isinstance(data, np.generic) else data
    return x


def keep_graph(prepared: Prepared, outputs: Sequence[Any], nested: bool, aux: Any) -> bool:
    """Whether to record the derivative and hand out connected Tensors: inside another
    transform, or when the output or ``aux`` depends on an outer Tensor."""
    return nested or prepared.outer or prepared.reaches_outside([*outputs, *tree_flatten(aux)[0]])


def zeros_like_leaf(t: Tensor, lead: tuple[int, ...] = ()) -> np.ndarray:
    """The zero derivative of a leaf (after ``lead`` axes), in its dtype."""
    return zeros(lead + t.shape, t.dtype, t.data)


def _check_scalar(output: Any, name: str) -> None:
    """Refuse an output that is not 0-d (grad is for scalar functions)."""
    numeric = (Tensor, np.ndarray, np.number, int, float, complex)
    if isinstance(output, numeric) and not isinstance(output, bool) and np.ndim(output) == 0:
        return
    got = f"shape {np.shape(output)}" if isinstance(output, numeric) else _describe(output)
    raise RuntimeError(
        f"{name}(f)(*args): expected f(*args) to return a scalar (0-d) output, got {got}"
    )


def _pick(argnums: Argnums, per_position: list[Any]) -> Any:
    """One pytree for an int ``argnums``, a tuple of them for a tuple."""
    return tuple(per_position) if isinstance(argnums, tuple) else per_position[0]


# --------------------------------------------------------------------------- grad
def _grad_and_value(
    func: Callable[..., Any],
    argnums: Argnums,
    has_aux: bool,
    args: tuple,
    kwargs: dict[str, Any],
    name: str,
) -> tuple[Any, Any, Any]:
    nested = is_nested()
    prepared = Prepared(args, positions(argnums, len(args), name), name)
    output, aux = call(func, prepared, kwargs, has_aux, name)
    _check_scalar(output, name)
    keep = keep_graph(prepared, [output], nested, aux)
    if isinstance(output, Tensor) and output.requires_grad:
        grads = autograd_grad(output, prepared.leaves, create_graph=keep, allow_unused=True)
    else:
        grads = (None,) * len(prepared.leaves)
    values = [
        zeros_like_leaf(t) if g is None else prepared.finish(g, keep)
        for g, t in zip(grads, prepared.leaves, strict=True)
    ]
    return (
        _pick(argnums, prepared.per_position(values)),
        prepared.finish(output, keep),
        prepared.finish_tree(aux, keep) if has_aux else None,
    )


def grad(
    func: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The gradient of a scalar function, as a function.

    Parameters
    ----------
    func : callable
        Plain NumPy code returning a 0-d value (an ndarray, a NumPy or Python number),
        or ``(output, aux)`` with ``has_aux``.
    argnums : int or tuple of int
        The positional arguments to differentiate with respect to (negative counts
        from the end). Each may be an ndarray, a Python number or a tuple, list or
        dict of them (integer data counts as float64).
    has_aux : bool
        ``func`` returns ``(output, aux)``; ``aux`` is returned alongside, unchanged
        except that its Tensors become ndarrays.

    Returns
    -------
    callable
        Takes ``func``'s arguments and returns the gradient, shaped like the argument
        (a tuple of them for a tuple ``argnums``); ``(gradient, aux)`` with ``has_aux``.

    Raises
    ------
    RuntimeError
        ``func`` returns a value that is not 0-d.
    ValueError
        ``argnums`` out of range, repeated or empty; with ``has_aux``, an output that is
        not a pair.
    TypeError
        A non-integer ``argnums``, or a differentiated argument that is not numeric.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import grad
    >>> grad(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
    array([ 3., 12.])
    >>> grad(grad(np.sin))(0.5) == -np.sin(0.5)
    np.True_
    """
    check_callable(func, "func")

    def grad_f(*args: Any, **kwargs: Any) -> Any:
        g, _, aux = _grad_and_value(func, argnums, has_aux, args, kwargs, "grad")
        return (g, aux) if has_aux else g

    return grad_f


def grad_and_value(
    func: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The gradient and the value of a scalar function, as a function.

    Parameters and errors are those of :func:`grad`.

    Returns
    -------
    callable
        Returns ``(gradient, value)``, or ``(gradient, (value, aux))`` with ``has_aux``.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import grad_and_value
    >>> g, v = grad_and_value(lambda x, y: np.sum(x * y), argnums=(0, 1))(
    ...     np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> g, v
    ((array([3., 4.]), array([1., 2.])), array(11.))
    """
    check_callable(func, "func")

    def grad_and_value_f(*args: Any, **kwargs: Any) -> Any:
        g, value, aux = _grad_and_value(func, argnums, has_aux, args, kwargs, "grad_and_value")
        return (g, (value, aux)) if has_aux else (g, value)

    return grad_and_value_f


# --------------------------------------------------------------------------- Jacobians
def _jacobian(
    func: Callable[..., Any],
    argnums: Argnums,
    has_aux: bool,
    args: tuple,
    kwargs: dict[str, Any],
    name: str,
    forward: bool,
    chunk_size: int | None,
) -> Any:
    nested = is_nested()
    prepared = Prepared(args, positions(argnums, len(args), name), name)
    output, aux = call(func, prepared, kwargs, has_aux, name)
    outs, out_spec = tree_flatten(output)
    keep = keep_graph(prepared, outs, nested, aux)
    roots = [o if isinstance(o, Tensor) else wrap(_float_array(o), False, None, 0) for o in outs]
    leaves = tuple(prepared.leaves)
    _refuse_complex(leaves, "inputs", name)
    _refuse_complex(roots, "outputs", name)
    if not roots or sum(t.size for t in leaves) == 0 or not any(r.requires_grad for r in roots):
        blocks: Any = [[zeros_like_leaf(t, r.shape) for t in leaves] for r in roots]
    elif forward:
        blocks = jacobian_forward(roots, leaves, True, chunk_size, create_graph=keep)
    elif len(roots) == 1 and roots[0].size == 1:
        # One output element: its Jacobian is a gradient (one plain backward pass, no
        # batch of one row to record and reshape when it is differentiated again).
        blocks = [_gradient_blocks(roots[0], leaves, keep)]
    else:
        blocks = jacobian_reverse(tuple(roots), leaves, keep, False, True, chunk_size)
    per_output = [
        _pick(argnums, prepared.per_position([prepared.finish(b, keep) for b in row]))
        for row in blocks
    ]
    jac = tree_unflatten(out_spec, per_output)
    return (jac, prepared.finish_tree(aux, keep)) if has_aux else jac


def _refuse_complex(values: Sequence[Tensor], what: str, name: str) -> None:
    """torch.func's Jacobians are real: the rows of a reverse-mode Jacobian of a complex
    function would be conjugated (vector-Jacobian products), its columns not."""
    for k, v in enumerate(values):
        if v.dtype.kind == "c":
            raise RuntimeError(
                f"{name}: expected all {what} to be real, got complex leaf {k} "
                f"({v.dtype}); use vjp or jvp, or funcdiff.functional.jacobian, whose "
                "complex convention is torch.autograd's"
            )


def _gradient_blocks(root: Tensor, leaves: tuple[Tensor, ...], keep: bool) -> list[Any]:
    """The Jacobian blocks (shape ``root.shape + leaf.shape``) of a one-element output."""
    grads = autograd_grad(root.reshape(()), leaves, create_graph=keep, allow_unused=True)
    return [
        zeros_like_leaf(t, root.shape) if g is None else g.reshape(root.shape + t.shape)
        for g, t in zip(grads, leaves, strict=True)
    ]


def _float_array(x: Any) -> np.ndarray:
    a = np.asarray(x)
    return a if a.dtype.kind in "fc" else a.astype(np.float64)


def jacrev(
    func: Callable[..., Any],
    argnums: Argnums = 0,
    *,
    has_aux: bool = False,
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """The Jacobian of ``func``, in reverse mode, as a function.

    All rows of the Jacobian are pulled back in one batched backward pass (in passes of
    ``chunk_size`` rows when given, which bounds memory; the result is the same).

    Parameters
    ----------
    func : callable
        Plain NumPy code returning a pytree of arrays (``(output, aux)`` with
        ``has_aux``).
    argnums : int or tuple of int
        The arguments to differentiate with respect to, as in :func:`grad`.
    has_aux : bool
        ``func`` returns ``(output, aux)``; the Jacobian function then returns
        ``(jacobian, aux)``.
    chunk_size : int, optional
        Rows per backward pass (a positive integer); all of them by default.

    Returns
    -------
    callable
        Returns the Jacobian with the output's structure outside the arguments': for
        each output leaf of shape ``o``, a block ``o + a`` for each leaf of shape ``a``
        of the differentiated argument (a tuple over ``argnums`` when it is a tuple).

    Raises
    ------
    ValueError
        A ``chunk_size`` that is not a positive integer, and the errors of :func:`grad`
        (except that the output may have any shape).

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import jacrev
    >>> jacrev(lambda x, y: x * y, argnums=(0, 1))(np.array([1.0, 2.0]), 3.0)
    (array([[3., 0.],
           [0., 3.]]), array([1., 2.]))
    """
    check_callable(func, "func")
    check_chunk_size(chunk_size)

    def jacrev_f(*args: Any, **kwargs: Any) -> Any:
        return _jacobian(func, argnums, has_aux, args, kwargs, "jacrev", False, chunk_size)

    return jacrev_f


def jacfwd(
    func: Callable[..., Any],
    argnums: Argnums = 0,
    has_aux: bool = False,
    *,
    randomness: str = "error",
) -> Callable[..., Any]:
    """The Jacobian of ``func``, in forward mode, as a function.

    The columns of the Jacobian (one per element of the differentiated arguments) are
    pushed through the recorded computation as one batch of tangents: cheaper than
    :func:`jacrev` when there are more outputs than inputs. Parameters, results and
    errors are those of :func:`jacrev`; ``randomness`` (``"error"``, ``"same"`` or
    ``"different"``) is accepted for torch.func's signature: the tangents are pushed
    through one recorded run, so random draws are never repeated.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import jacfwd
    >>> jacfwd(lambda x: np.stack([x[0] * x[1], np.sin(x[0])]))(np.array([0.0, 2.0]))
    array([[2., 0.],
           [1., 0.]])
    """
    check_callable(func, "func")
    check_choice(randomness, "randomness", ("error", "same", "different"))

    def jacfwd_f(*args: Any, **kwargs: Any) -> Any:
        return _jacobian(func, argnums, has_aux, args, kwargs, "jacfwd", True, None)

    return jacfwd_f


def hessian(func: Callable[..., Any], argnums: Argnums = 0) -> Callable[..., Any]:
    """The Hessian of a scalar function, as a function: ``jacfwd(jacrev(func))``.

    The gradient is recorded in reverse mode and its Jacobian pushed forward as one
    batch of tangents (forward over reverse, as torch.func does). For a tuple
    ``argnums`` the result has blocks ``H[i][j]`` of shape ``a_i + a_j``.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.func import hessian
    >>> hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    check_callable(func, "func")
    return jacfwd(jacrev(func, argnums), argnums)
