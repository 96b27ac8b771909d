"""The recorded graph: one node per operation, with edges to the nodes of its inputs.

A node keeps what its derivative rule needs (inputs, output, keyword arguments) until
the backward pass has used it; then ``release`` drops it, so a finished backward pass
frees its graph. Values that a rule reads are stamped with their tensor's version, and
a value modified in place since then is refused at backward time instead of giving a
wrong gradient.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from funcdiff._core.arrays import settled

if TYPE_CHECKING:
    from funcdiff._core.tensor import Tensor

__all__ = [
    "Node",
    "RemovableHandle",
    "AccumulateGrad",
    "PartialCotangent",
    "Edge",
    "FREED_GRAPH_MESSAGE",
    "INPLACE",
    "AFTER_INPLACE",
    "ANOMALY",
    "WATCHERS",
    "notify_created",
    "note_creation",
    "creation_stack",
    "SEQUENCE",
    "note_inplace_change",
    "version_of",
    "raise_modified",
    "fit_cotangent",
]

#: An edge is (node, output index) of the node that produced an input, or None.
Edge = "tuple[Node, int] | None"

FREED_GRAPH_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the graph "
    "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
    "you need to backward through the graph a second time or if you need to access saved "
    "tensors after calling backward."
)


class _InplaceCounter:
    """How many in-place changes of Tensors the process has seen.

    A node stamps the count when it is recorded; at backward time an unchanged count
    proves that nothing it saved was modified, so the per-value version checks run
    only after some in-place change actually happened.
    """

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


INPLACE = _InplaceCounter()


def note_inplace_change() -> None:
    """Count one in-place change (call it with every ``_version_count`` bump)."""
    INPLACE.count += 1


#: Anomaly detection (:mod:`funcdiff.autograd.anomaly_mode`): ``[enabled, check_nan]``.
ANOMALY: list = [False, True]

#: What runs on every node the recorder makes, while anything does: anomaly
#: detection's stack capture, saved-tensor hooks. Empty, it costs the recorder one
#: truth test per node.
WATCHERS: list = []


def notify_created(node: Node) -> None:
    """Give a newly recorded ``node`` to every watcher."""
    for watch in WATCHERS:
        watch(node)


#: Where each node was created, recorded while anomaly detection is on.
_CREATION_STACKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def note_creation(node: Node) -> None:
    """Remember the forward call stack that created ``node`` (anomaly detection)."""
    import os
    import traceback

    package = os.path.dirname(os.path.dirname(__file__)) + os.sep
    # The user's frames: funcdiff's own (dispatch, rules) say nothing about where.
    stack = [f for f in traceback.extract_stack() if not f.filename.startswith(package)]
    _CREATION_STACKS[node] = stack


def creation_stack(node: Node) -> str | None:
    """The formatted forward call stack that created ``node``, if it was recorded."""
    import traceback

    stack = _CREATION_STACKS.get(node)
    return None if stack is None else "".join(traceback.format_list(stack))


#: ``after_write(tensor, None)`` of :mod:`funcdiff.ops.inplace`, installed by it: what a
#: recorded in-place change of ``tensor`` does to the history of its views and base.
#: The autograd layer (``ctx.mark_dirty``) calls it without importing the ops layer.
AFTER_INPLACE: list = [None]


#: Creation order of nodes. A node's inputs exist before it does, so every edge leads to
#: a smaller number: visiting nodes by decreasing ``seq`` is a topological order.
SEQUENCE = itertools.count()


class Node:
    """One recorded operation of the backward graph.

    Attributes
    ----------
    edges : tuple
        For each differentiable input, ``(node, output_index)`` of the node that
        produced it (an ``AccumulateGrad`` for a leaf), or None.
    out_meta : tuple
        ``(shape, dtype)`` of each output, used to shape and type incoming gradients.
    seq : int
        When the node was made (from :data:`SEQUENCE`), larger than any of its inputs'.
    """

    __slots__ = ("edges", "out_meta", "seq", "pre_hooks", "retained", "modified", "__weakref__")

    #: Whether ``apply`` takes structured cotangents (``BasisBatch``) as they are; the
    #: engine gives other nodes dense arrays.
    accepts_structured = False

    #: Whether ``apply(..., create_graph=False)`` computes its cotangents from the given
    #: (Tensor) cotangents and constant saved values, so that forward mode may transpose
    #: it without recording the saved values (true for rule nodes).
    transposes_on_constants = False

    #: Whether forward mode, transposing the vjp, must refuse a cotangent that was not
    #: recorded from the incoming one (a custom Function's backward may leave the Tensors).
    transposes_strictly = False

    #: Whether outputs that received no cotangent get zeros before :meth:`apply` (a
    #: custom Function's ``ctx.set_materialize_grads(False)`` asks for None instead).
    materializes_grads = True

    def __init__(self, edges: tuple, out_meta: tuple) -> None:
        self.seq = next(SEQUENCE)
        self.edges = edges
        self.out_meta = out_meta
        # Hooks of the output tensors by output index; the node's own under "node_pre"
        # and "node_post".
        self.pre_hooks: dict[Any, list[Callable]] | None = None
        self.retained: dict[int, weakref.ref] | None = None
        # Set when one of the node's outputs is modified in place after it was made.
        self.modified = False

    def name(self) -> str:
        """The node's name, e.g. ``"MulBackward"``."""
        return type(self).__name__

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """The nodes that produced this node's inputs, as ``(node, output_index)``, one
        per operand in argument order; a constant operand is ``(None, 0)``, as in torch.

        Examples
        --------
        >>> import numpy as np
        >>> import funcdiff as fd
        >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
        >>> fns = (x * np.ones(2)).grad_fn.next_functions
        >>> type(fns[0][0]).__name__, fns[1]
        ('AccumulateGrad', (None, 0))
        """
        return tuple(self.edges[k] if k is not None else (None, 0) for k in self.input_slots())

    def input_slots(self) -> tuple[int | None, ...]:
        """For each operand, in argument order, the index of its edge, or None for a
        constant (what :attr:`next_functions` and the node hooks are aligned to)."""
        return tuple(range(len(self.edges)))

    def register_prehook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(grad_outputs)`` before this node runs in backward; a tuple it
        returns replaces the gradients of the node's outputs (torch's ``Node`` hook)."""
        return self._add_node_hook("node_pre", hook)

    def register_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(grad_inputs, grad_outputs)`` after this node ran in backward;
        ``grad_inputs`` is aligned with :attr:`next_functions` (None for constants), and
        a tuple it returns replaces it (torch's ``Node`` hook)."""
        return self._add_node_hook("node_post", hook)

    def _add_node_hook(self, kind: str, hook: Callable) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"a Node hook must be callable, got {type(hook).__name__}")
        if self.pre_hooks is None:
            self.pre_hooks = {}
        hooks = self.pre_hooks.setdefault(kind, [])
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def apply(self, grads: list, create_graph: bool) -> Sequence[Any]:
        """Map output cotangents to one cotangent per edge (None where there is none)."""
        raise NotImplementedError

    def tangent(self, tangents: list, create_graph: bool, batched: bool) -> Any:
        """Forward mode: one output tangent per output, from one tangent per edge.

        None stands for a zero tangent. Returns NotImplemented when the node has no
        tangent rule (or its rule declines): forward mode then transposes its vjp.
        """
        return NotImplemented

    def release(self) -> None:
        """Drop the values saved for backward."""

    def run(self, grads: list, create_graph: bool, retain_graph: bool) -> Sequence[Any]:
        """What the engine calls: :meth:`apply`, then :meth:`release` unless retained.

        Nodes on the hot path override it to do both in one call.
        """
        result = self.apply(grads, create_graph)
        if not retain_graph:
            self.release()
        return result

    def run_single(self, grad: Any, retain_graph: bool) -> Any:
        """:meth:`run` in a first-order pass (ndarray cotangents) of a node with one
        output and one edge: the input's cotangent, or None.

        The engine's path for chains; nodes on the hot path override it to skip the
        lists and tuples that :meth:`run` takes and returns.
        """
        return self.run([grad], False, retain_graph)[0]

    def describe_saved(self, label: Any) -> str:
        """Describe the saved value ``label`` for error messages."""
        return str(label)

    def pack_saved(self, pack: Callable, unpack: Callable) -> None:
        """Store the values saved for backward as ``pack(value)``, to be read back
        through ``unpack`` (saved-tensor hooks); nodes that save nothing ignore it."""

    def add_pre_hook(self, output_nr: int, hook: Callable) -> None:
        if self.pre_hooks is None:
            self.pre_hooks = {}
        self.pre_hooks.setdefault(output_nr, []).append(hook)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class RemovableHandle:
    """Returned by ``register_hook`` (of a Tensor or a Node) and the other hook
    registrations; ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "_hook")

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks = hooks
        self._hook = hook

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


class AccumulateGrad(Node):
    """The sink of a leaf tensor: gradients arriving here belong to the leaf.

    It holds the leaf weakly, so a leaf the user has dropped is not kept alive by the
    graphs it took part in.
    """

    __slots__ = ("_tensor_ref", "post_accumulate")

    def __init__(self, tensor: Tensor) -> None:
        super().__init__((), ((tensor.data.shape, tensor.data.dtype),))
        self._tensor_ref = weakref.ref(tensor)
        # Tensor.register_post_accumulate_grad_hook's hooks, called after .grad is updated.
        self.post_accumulate: list[Callable] | None = None

    @property
    def variable(self) -> Tensor | None:
        """The leaf tensor this node accumulates into (None once it is gone)."""
        return self._tensor_ref()

    def apply(self, grads: list, create_graph: bool) -> Sequence[Any]:
        return ()


class PartialCotangent:
    """A cotangent that is zero outside one basic index: ``zeros(shape)`` with
    ``values`` at ``index``.

    A vjp may return one in the first-order pass (ndarray cotangents) instead of
    materialising the zeros, as ``x[1:]`` does: the engine adds ``values`` into the
    input's accumulated cotangent in place, and makes it dense only when a node, hook
    or leaf needs it. ``index`` holds ints and slices only, batch axes included.

    Examples
    --------
    >>> import numpy as np
    >>> g = PartialCotangent((slice(1, None),), np.array([2.0, 3.0]), (3,))
    >>> g.dense()
    array([0., 2., 3.])
    >>> g.add_to(np.ones(3))
    array([1., 3., 4.])
    """

    __slots__ = ("index", "values", "shape")

    def __init__(self, index: tuple, values: np.ndarray, shape: tuple[int, ...]) -> None:
        self.index = index
        self.values = values
        self.shape = shape

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def dense(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=self.values.dtype)
        out[self.index] = self.values
        return out

    def add_to(self, dense: np.ndarray) -> np.ndarray:
        """Add into ``dense`` in place (the caller owns it) and return it."""
        dense[self.index] += self.values
        return dense


def describe_value(value: Any) -> str:
    data = getattr(value, "data", value)
    if isinstance(data, memoryview):  # an ndarray's .data is its raw buffer, not the array
        data = value
    return f"[{getattr(data, 'dtype', type(data).__name__)} {tuple(getattr(data, 'shape', ()))}]"


def version_of(value: Any) -> int:
    """The in-place version of a Tensor (shared by its aliases); 0 for anything else."""
    owner = getattr(value, "_version_owner", None)
    if owner is not None:
        return owner._version_count
    return getattr(value, "_version_count", 0)


def raise_modified(node: Node, label: Any, current: int | None, saved: int | None) -> None:
    """The error for a saved value that was modified in place after it was saved.

    ``current``/``saved`` are the value's versions, or None for a node's own output,
    which is known only to have changed.
    """
    if current is None:
        where = "has been modified in place since it was computed"
    else:
        where = f"is at version {current}; expected version {saved} instead"
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified "
        f"by an inplace operation: {node.describe_saved(label)} {where}. It was saved by "
        f"{node.name()}. Hint: compute the modified value out of place "
        "(y = y + 1 instead of y += 1), or modify a copy."
    )


def fit_cotangent(g: Any, meta: tuple, batch_shape: tuple[int, ...]) -> Any:
    """Sum a cotangent back to ``batch + shape`` (unbroadcast) and cast it to ``dtype``.

    A complex cotangent of a real value keeps its real part, which is what makes real
    inputs of complex computations get real gradients.

    ``meta`` is a node's ``(shape, dtype)`` record of the value ``g`` belongs to. Rules
    may return anything that broadcasts to it; the engine and forward mode fit it here.

    Examples
    --------
    >>> import numpy as np
    >>> fit_cotangent(np.ones((3, 2)), ((1, 2), np.dtype(np.float32)), ())
    array([[3., 3.]], dtype=float32)
    """
    shape, dtype = meta
    if type(g) is not np.ndarray and not isinstance(g, np.generic):
        g = settled(g, shape)  # a batched cotangent of funcdiff.func.vmap (else as it is)
    if not hasattr(g, "shape"):
        g = np.asarray(g)
        if g.dtype == dtype or g.dtype.kind != "c":
            g = g.astype(dtype, copy=False)
    target = batch_shape + shape
    gshape = g.shape
    if gshape != target:
        nb = len(batch_shape)
        extra = len(gshape) - len(target)
        if extra > 0:
            g = np.sum(g, axis=tuple(range(nb, nb + extra)))
            gshape = g.shape
        if len(gshape) == len(target):
            axes = tuple(i for i, (a, b) in enumerate(zip(gshape, target)) if a != b and b == 1)
            if axes:
                g = np.sum(g, axis=axes, keepdims=True)
        if g.shape != target:
            g = np.broadcast_to(g, target)
    if g.dtype != dtype:
        if g.dtype.kind == "c" and dtype.kind != "c":
            # A real value's cotangent is the real part: dL/dx of the complex one's
            # dL/dx + i dL/dy (the imaginary direction does not exist for it).
            g = np.real(g)
            if g.dtype == dtype:
                return g
        g = g.astype(dtype)
    return g
