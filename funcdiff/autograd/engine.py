"""The reverse-mode engine: ``backward`` and ``grad``.

One pass walks the recorded graph in topological order, given by the nodes' creation
numbers (a heap, no recursion, so million-node chains are fine), sums the cotangents
that reach each node in a dictionary local to the call, runs each node's rule once all
of its consumers have contributed, and releases the node's saved values unless
``retain_graph``.

With ``create_graph=False`` cotangents are plain ndarrays and rules run on them at
NumPy speed; with ``create_graph=True`` they are Tensors, grad mode is on, and the
rules record themselves, so the result can be differentiated again.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from heapq import heapify, heappop, heappush
from typing import Any

import numpy as np

from funcdiff._core import backends, grad_mode, tracing
from funcdiff._core.arrays import is_foreign_array
from funcdiff._core.graph import (
    ANOMALY,
    AccumulateGrad,
    Node,
    PartialCotangent,
    creation_stack,
    fit_cotangent,
    note_inplace_change,
)
from funcdiff._core.structured import BasisBatch
from funcdiff._core.tensor import Tensor, wrap

__all__ = ["backward", "grad"]

_state = grad_mode.thread_state
_getrefcount = sys.getrefcount
# References to an accumulated cotangent that only the engine holds: the buffer list,
# the local name, and getrefcount's own argument.
_SOLE_OWNER = 3


def _as_tuple(obj: Any, what: str) -> tuple:
    if isinstance(obj, Tensor):
        return (obj,)
    if isinstance(obj, (tuple, list)):
        for i, t in enumerate(obj):
            if not isinstance(t, Tensor):
                raise TypeError(f"{what}[{i}] must be a Tensor, got {type(t).__name__}")
        return tuple(obj)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(obj).__name__}")


def _make_grads(
    outputs: tuple[Tensor, ...],
    grad_outputs: Any,
    create_graph: bool,
    batched: bool,
) -> tuple[list, tuple[int, ...]]:
    """Validate the cotangents of ``outputs`` and fill in implicit ones."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    elif (
        isinstance(grad_outputs, (Tensor, np.ndarray))
        or np.isscalar(grad_outputs)
        or backends.is_foreign(grad_outputs)
    ):
        grad_outputs = (grad_outputs,)
    else:
        grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(
            f"grad can't be computed: got {len(grad_outputs)} gradients for {len(outputs)} outputs"
        )
    grads: list[Any] = []  # ndarrays, Tensors under create_graph, BasisBatch rows
    batch_shape: tuple[int, ...] | None = None
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if not out._requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        if g is None:
            if batched:
                raise RuntimeError(
                    f"grad_outputs[{i}] is None, but is_grads_batched=True needs a batch of "
                    "cotangents for every output"
                )
            if out.data.size != 1:
                raise RuntimeError(
                    "grad can be implicitly created only for scalar outputs "
                    f"(output {i} has shape {out.shape}); pass a gradient of that shape"
                )
            if out.data.dtype.kind == "c":
                raise RuntimeError(
                    "grad can be implicitly created only for real scalar outputs but got "
                    f"{out.data.dtype} (output {i}); pass the gradient of the real loss with "
                    "respect to it, or differentiate a real function of it (.real, abs)"
                )
            grads.append(np.ones_like(out.data))
            continue
        # Structured identity rows (vectorized Jacobians) pass as they are where they can
        # be used: a batch of constant cotangents; elsewhere they are their dense array.
        structured = type(g) is BasisBatch and batched and not create_graph
        if type(g) is BasisBatch and not structured:
            g = g.dense()
        if not (
            structured
            or isinstance(g, (Tensor, np.ndarray, float, int, np.generic))
            or backends.is_foreign(g)
            or is_foreign_array(g)
        ) or isinstance(g, bool):
            raise TypeError(
                "gradients can be either Tensors, ndarrays, numbers or None, "
                f"but got {type(g).__name__}"
            )
        values = g.data if isinstance(g, Tensor) else g if structured else backends.kept(g)
        kind = values.dtype.kind
        if kind not in "biufc":
            # strings and objects would fail deep in NumPy
            raise TypeError(f"grad_output[{i}] must hold numbers, but its dtype is {values.dtype}")
        out_complex = out.data.dtype.kind == "c"
        if (kind == "c") != out_complex:
            # a complex cotangent of a real output would lose its imaginary part
            raise RuntimeError(
                "For complex Tensors, both grad_output and output are required to have "
                f"the same dtype. Mismatch in dtype: grad_output[{i}] has a dtype of "
                f"{values.dtype} and output[{i}] has a dtype of {out.data.dtype}."
            )
        gshape = values.shape
        expected = out.shape
        if batched:
            if len(gshape) != len(expected) + 1 or gshape[1:] != expected:
                raise RuntimeError(
                    "If `is_grads_batched=True`, we interpret the first dimension of each "
                    "grad_output as the batch dimension. The sizes of the remaining "
                    "dimensions are expected to match the shape of corresponding output, "
                    f"but a mismatch was detected: grad_output[{i}] has a shape of {gshape} "
                    f"and output[{i}] has a shape of {expected}."
                )
            if batch_shape is not None and gshape[:1] != batch_shape:
                raise RuntimeError(
                    f"grad_output[{i}] has batch size {gshape[0]}, but an earlier "
                    f"grad_output has batch size {batch_shape[0]}"
                )
            batch_shape = gshape[:1]
        elif gshape != expected:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {gshape} and "
                f"output[{i}] has a shape of {expected}."
            )
        if isinstance(g, Tensor):
            if g.data.dtype.kind not in "fc":
                g = wrap(g.data.astype(out.dtype), False, None, 0)
            if not create_graph:
                g = g.data
            grads.append(_conjugate(g) if out_complex else g)
        elif structured and g.dtype == out.dtype:
            grads.append(BasisBatch(np.conj(g.d), g.offset, g.rows) if out_complex else g)
        else:
            arr = backends.kept(g)
            backends.check_same_kind("the gradient of an output", (arr, out.data))
            if arr.dtype != out.dtype:
                arr = arr.astype(out.dtype)
            grads.append(np.conj(arr) if out_complex else arr)
    return grads, batch_shape or ()


def _conjugate(g: Any) -> Any:
    """The complex conjugate of a cotangent (recorded for a Tensor).

    The engine carries ``conj(z.grad) = dL/dx - i dL/dy`` for a complex value ``z``:
    in that form every holomorphic rule's vjp is the plain transpose of its derivative,
    as for real values. The public gradient is its conjugate (torch's convention), so
    the conjugation happens where cotangents enter and leave a pass.
    """
    return np.conjugate(g)


def _run_hooks(hooks: list, g: Any, create_graph: bool) -> Any:
    if g.dtype.kind == "c":
        # Hooks see and return the public (conjugate) form of a complex gradient.
        return _conjugate(_run_public_hooks(hooks, _conjugate(g), create_graph))
    return _run_public_hooks(hooks, g, create_graph)


def _run_public_hooks(hooks: list, g: Any, create_graph: bool) -> Any:
    for hook in list(hooks):
        arg = g if isinstance(g, Tensor) else wrap(g, False, None, 0)
        result = hook(arg)
        if result is not None:
            # A replaced gradient of another shape would be broadcast or summed into a
            # wrong answer downstream (or become a .grad of the wrong shape): refuse it.
            data = result.data if isinstance(result, Tensor) else result
            ok = isinstance(data, (np.ndarray, np.generic, float, int)) or backends.is_foreign(data)
            if (
                not ok
                or isinstance(data, bool)
                or backends.as_array(data).dtype.kind not in "biufc"
            ):
                raise TypeError(
                    f"hook {getattr(hook, '__name__', hook)!r} returned "
                    f"{type(result).__name__}; a hook must return a Tensor, an ndarray "
                    "or None"
                )
            if np.shape(data) != np.shape(arg.data):
                raise RuntimeError(
                    f"hook {getattr(hook, '__name__', hook)!r} has changed the size of "
                    f"value: it returned shape {np.shape(data)} for a gradient of shape "
                    f"{np.shape(arg.data)}"
                )
            if isinstance(result, Tensor):
                g = result if create_graph else result.data
            else:
                g = backends.as_array(result)
    return g


def _to_tensor(g: Any) -> Tensor:
    if isinstance(g, Tensor):
        return g
    if is_foreign_array(g):
        return wrap(g, False, None, 0)
    arr = backends.as_array(g)
    if not getattr(arr.flags, "writeable", True):  # device arrays are always writeable
        arr = arr.copy()
    return wrap(arr, False, None, 0)


def _accumulate_into(t: Tensor, g: Any, create_graph: bool) -> None:
    """``t.grad += g``: in place without create_graph, a recorded sum with it."""
    if g.dtype.kind == "c":
        g = _conjugate(g)  # the public form of a complex gradient
    if create_graph:
        g = _to_tensor(g)
        t._grad = g if t._grad is None else t._grad + g
        return
    if isinstance(g, Tensor):
        g = g.data
    old = t._grad
    if is_foreign_array(g) or (old is not None and is_foreign_array(old.data)):
        # A batched gradient of an unbatched leaf becomes batched: a new value.
        g = g.astype(t.data.dtype) if old is None else old.data + g
        t._grad = wrap(g, False, None, 0)
    elif old is None or old.grad_fn is not None or old.data.shape != g.shape:
        t._grad = wrap(backends.copy_array(g, t.data.dtype), False, None, 0)
    else:
        if getattr(old.data.flags, "writeable", True):
            np.add(old.data, g, out=old.data, casting="unsafe")
        else:
            old.data = old.data + g
        old._version_count += 1
        note_inplace_change()


def run_backward(
    roots: Sequence[Tensor],
    root_grads: Sequence[Any],
    *,
    targets: Sequence[tuple[Node, int]] | None,
    accumulate: bool,
    retain_graph: bool,
    create_graph: bool,
    batch_shape: tuple[int, ...] = (),
    stop_at_targets: bool = False,
) -> dict[tuple[Node, int], Any]:
    """Run one backward pass and return the cotangents captured at ``targets``.

    With ``accumulate=True`` the gradients reaching leaves go into their ``.grad``
    (only the leaves among ``targets``, when targets are given). With
    ``stop_at_targets`` the target nodes are captured but never run, so the pass stays
    inside the part of the graph above them (checkpointing's recomputed segment).
    """
    buffers: dict[Node, list] = {}
    root_nodes: list[Node] = []
    lazy: set[Node] = set()  # nodes whose buffers may hold a partial or structured cotangent
    node: Node | None
    t: Tensor | None
    for t, g in zip(roots, root_grads):
        root, nr = t._gradient_edge()
        buf = buffers.get(root)
        if buf is None:
            buf = buffers[root] = [None] * len(root.out_meta)
            root_nodes.append(root)
        buf[nr] = g if buf[nr] is None else buf[nr] + g
        if type(g) is BasisBatch:
            lazy.add(root)

    # Nodes run by decreasing creation number: every consumer of a node was made after
    # it, so all of a node's cotangents have arrived when its turn comes, with no pass
    # that counts dependencies first. A node enters the heap when its first cotangent
    # arrives; one that none reaches never runs.
    capture: dict[Node, list[int]] = {}
    runnable: set[Node] | None = None
    if targets is not None:
        for target, nr in targets:
            capture.setdefault(target, []).append(nr)
        # Every path ends at a leaf, so when every leaf reached is a target, every node
        # leads to one. Otherwise run only the nodes one of whose inputs leads to a target.
        seen = set(root_nodes)
        stack = list(root_nodes)
        untargeted_leaf = False
        while stack:
            node = stack.pop()
            edges = node.edges
            while len(edges) == 1:  # down a chain without the stack
                node = edges[0][0]
                if node in seen:
                    break
                seen.add(node)
                edges = node.edges
                if not edges and node not in capture:
                    untargeted_leaf = True
            else:
                for child, _ in edges:
                    if child not in seen:
                        seen.add(child)
                        stack.append(child)
                        if not child.edges and child not in capture:
                            untargeted_leaf = True
        if untargeted_leaf or any(type(n) is not AccumulateGrad for n in capture):
            runnable = _nodes_leading_to(capture, seen)

    captured: dict[tuple[Node, int], Any] = {}
    heap = [(-n.seq, n) for n in root_nodes]  # seq numbers are unique: nodes never compared
    heapify(heap)
    previous_mode = _state.grad_enabled
    # A tracer that records a first-order backward pass needs its NumPy calls on
    # Tensors (create_graph) but no graph of them: it sets ``graph_free``.
    tracer = tracing.current_tracer()
    _state.grad_enabled = create_graph and (tracer is None or not tracer.graph_free)
    ndarray = np.ndarray
    check_nan = ANOMALY[0] and ANOMALY[1]
    # The chain path below skips the per-node checks: taken only without create_graph
    # and without anomaly detection (nodes with Node hooks take the general way too).
    chain_ok = not create_graph and not check_nan
    post_hooks = None  # the running node's register_hook hooks, when it has any
    node = None  # the node to run next, when known without the heap
    grads: list = []
    try:
        while True:
            if node is None:
                if not heap:
                    break
                node = heappop(heap)[1]
                grads = buffers.pop(node)
            edges = node.edges
            if lazy and node in lazy:
                lazy.discard(node)
                _materialize(node, grads, capture)
            if node.pre_hooks or node.retained:
                post_hooks = _run_tensor_hooks(node, grads, accumulate, create_graph, batch_shape)
            if capture and node in capture:
                for nr in capture[node]:
                    captured[(node, nr)] = grads[nr]
                if stop_at_targets:
                    node = post_hooks = None
                    continue
            if not edges:
                post_hooks = None
                if accumulate and type(node) is AccumulateGrad:
                    if targets is None or node in capture:
                        t = node.variable
                        if t is not None:
                            _accumulate_into(t, grads[0], create_graph)
                            if node.post_accumulate:
                                for hook in list(node.post_accumulate):
                                    hook(t)
                node = None
                continue
            if runnable is not None and node not in runnable:
                node = post_hooks = None
                continue  # nothing it leads to is wanted
            if len(grads) > 1:
                _fill_missing(node, grads, create_graph, batch_shape)
            sole_input = len(edges) == 1
            if sole_input and len(grads) == 1 and chain_ok and post_hooks is None:
                # A link of a chain, the commonest node: one cotangent in, one out.
                try:
                    g = node.run_single(grads[0], retain_graph)
                except TypeError as exc:
                    backends.refuse_vjp(node, grads, exc)
                    raise
                child = edges[0][0]
                meta = child.out_meta
                # An input that already holds a cotangent, the usual reason to take the
                # general way, is ruled out first.
                if (
                    type(g) is ndarray
                    and child not in buffers
                    and len(meta) == 1
                    and g.dtype is meta[0][1]
                    and g.shape == (batch_shape + meta[0][0] if batch_shape else meta[0][0])
                    and (not heap or heap[0][0] > -child.seq)
                ):
                    # The input's first cotangent, already of its shape and dtype, and
                    # no waiting node is newer: the input runs next (as below), without
                    # the heap, the buffers or the general delivery's checks.
                    node = child
                    grads = [g]
                    continue
                in_grads: Sequence[Any] = (g,)
            else:
                try:
                    in_grads = node.run(grads, create_graph, retain_graph)
                except TypeError as exc:
                    backends.refuse_vjp(node, grads, exc)
                    raise
                if check_nan:
                    _check_nan(node, in_grads)
                if post_hooks is not None:
                    in_grads = _run_node_post_hooks(node, post_hooks, in_grads, grads)
                    post_hooks = None
            node = None
            for (child, nr), g in zip(edges, in_grads):
                if g is not None:
                    meta = child.out_meta
                    shape, dtype = meta[nr]
                    # Usually the rule returns exactly the input's shape and dtype.
                    if (
                        type(g) is not ndarray
                        or (g.dtype is not dtype and g.dtype != dtype)
                        or g.shape != (batch_shape + shape if batch_shape else shape)
                    ):
                        if (
                            type(g) in _LAZY_TYPES
                            and g.dtype == dtype
                            and g.shape == batch_shape + shape
                        ):
                            lazy.add(child)
                        else:
                            g = fit_cotangent(g, meta[nr], batch_shape)
                    buf = buffers.get(child)
                    if buf is None:
                        if len(meta) == 1:
                            buf = [g]
                        else:
                            buf = [None] * len(meta)
                            buf[nr] = g
                        if sole_input and (not heap or heap[0][0] > -child.seq):
                            # Newer than every waiting node, so it runs next anyway, and
                            # nothing else can reach it (its consumers are all newer
                            # still): a chain runs without the heap and the buffers.
                            node = child
                            grads = buf
                        else:
                            buffers[child] = buf
                            heappush(heap, (-child.seq, child))
                    else:
                        old = buf[nr]
                        if old is None:
                            buf[nr] = g
                        elif (
                            type(old) is ndarray
                            and _getrefcount(old) == _SOLE_OWNER
                            and old.base is None
                            and old.flags.writeable
                            and type(g) is not Tensor
                        ):
                            # Nothing else can see this buffer (not even through a
                            # view): sum into it instead of allocating a new one.
                            if type(g) in _LAZY_TYPES:
                                g.add_to(old)
                            else:
                                np.add(old, g, out=old)
                        else:
                            buf[nr] = _sum(old, g)
    finally:
        _state.grad_enabled = previous_mode
    return captured


_LAZY_TYPES = (PartialCotangent, BasisBatch)


def _check_nan(node: Node, results: Sequence[Any]) -> None:
    """Anomaly detection: refuse a node's cotangent that holds NaN, naming the node and
    showing the forward call that created it."""
    for i, g in enumerate(results):
        if g is None or type(g) is BasisBatch:
            continue
        data = g.values if type(g) is PartialCotangent else getattr(g, "data", g)
        if isinstance(g, np.ndarray):
            data = g
        if np.isnan(backends.as_array(data)).any():
            stack = creation_stack(node)
            where = (
                "\nTraceback of the forward call that created it:\n" + stack
                if stack
                else "\n(no forward traceback: the node was created before anomaly "
                "detection was enabled)"
            )
            raise RuntimeError(
                f"Function '{node.name()}' returned nan values in its {i}th output.{where}"
            )


def _materialize(node: Node, grads: list, capture: dict) -> None:
    """Dense arrays for the partial cotangents of ``node``, and for its structured ones
    unless its rule takes them as they are (hooks, captures and leaves see arrays)."""
    keep = node.accepts_structured and not (
        node.pre_hooks or node.retained or (capture and node in capture)
    )
    for i, g in enumerate(grads):
        t = type(g)
        if t is PartialCotangent:
            grads[i] = g.dense()
        elif t is BasisBatch and not keep:
            grads[i] = np.array(g.dense())  # its own copy: the shared one is read-only


def _sum(a: Any, b: Any) -> Any:
    """``a + b`` for cotangents, either of which may be partial or structured."""
    if type(a) in _LAZY_TYPES:
        a, b = b, a
    if type(b) in _LAZY_TYPES:
        if type(a) is BasisBatch and type(b) is BasisBatch:
            return a + b  # stays structured when both cover the same rows
        if type(a) in _LAZY_TYPES:
            return b.add_to(np.array(a.dense()))  # a writable copy
        if type(a) is np.ndarray:
            return b.add_to(np.array(a, copy=True))
        return a + b.dense()  # a recorded Tensor (create_graph with constant cotangents)
    return a + b


def _public(g: Any) -> Any:
    """A cotangent as a hook sees it: a Tensor (None stays None)."""
    if g is None or isinstance(g, Tensor):
        return g
    return wrap(backends.kept(g), False, None, 0)


def _engine_form(g: Any, create_graph: bool) -> Any:
    if isinstance(g, Tensor) and not create_graph:
        return g.data
    return g


def _run_node_post_hooks(node: Node, hooks: list, in_grads: Sequence[Any], grads: list) -> list:
    """A Node's ``register_hook`` hooks: ``hook(grad_inputs, grad_outputs)``, with
    ``grad_inputs`` aligned with ``next_functions`` (None for constant operands)."""
    slots = node.input_slots()
    result = list(in_grads)
    outs = tuple(_public(g) for g in grads)
    for hook in list(hooks):
        public = tuple(None if k is None else _public(result[k]) for k in slots)
        replaced = hook(public, outs)
        if replaced is not None:
            replaced = tuple(replaced)
            if len(replaced) != len(slots):
                raise RuntimeError(
                    f"hook returned {len(replaced)} gradients for {len(slots)} inputs"
                )
            for k, g in zip(slots, replaced):
                if k is not None:
                    result[k] = g
    create_graph = any(isinstance(g, Tensor) and g._requires_grad for g in result)
    return [None if g is None else _engine_form(g, create_graph) for g in result]


def _run_tensor_hooks(
    node: Node, grads: list, accumulate: bool, create_graph: bool, batch_shape: tuple
) -> list | None:
    """Hooks registered on the node's output tensors, then ``retain_grad`` storage,
    then the node's own pre-hooks. Returns the node's post-hooks (None if none).

    A hook sees one gradient shaped like its tensor: under a batch of cotangents it
    runs once per batch entry (as torch's hooks do under vmap).
    """
    post = None
    if node.pre_hooks:
        for nr, hooks in node.pre_hooks.items():
            if type(nr) is str:
                if nr == "node_post" and hooks:
                    post = hooks
                continue
            g = grads[nr]
            if g is None or not hooks:
                continue
            if batch_shape:
                rows = [_run_hooks(hooks, g[b], create_graph) for b in range(batch_shape[0])]
                grads[nr] = np.stack(rows)
            else:
                grads[nr] = _run_hooks(hooks, g, create_graph)
    if node.retained and accumulate:
        for nr, ref in node.retained.items():
            t = ref()
            if t is not None and grads[nr] is not None:
                _accumulate_into(t, grads[nr], create_graph)
    pre = node.pre_hooks.get("node_pre") if node.pre_hooks else None
    for hook in list(pre or ()):
        replaced = hook(tuple(_public(g) for g in grads))
        if replaced is not None:
            replaced = tuple(replaced)
            if len(replaced) != len(grads):
                raise RuntimeError(
                    f"prehook returned {len(replaced)} gradients for {len(grads)} outputs"
                )
            grads[:] = [None if g is None else _engine_form(g, create_graph) for g in replaced]
    return post


def _fill_missing(node: Node, grads: list, create_graph: bool, batch_shape: tuple) -> None:
    """Zeros for the outputs of a multi-output node that received no cotangent."""
    if not node.materializes_grads:
        return  # a custom Function that asked for None (set_materialize_grads(False))
    like = next((getattr(g, "data", g) for g in grads if g is not None), None)
    for i, g in enumerate(grads):
        if g is None:
            shape, dtype = node.out_meta[i]
            zeros = (
                np.zeros(batch_shape + shape, dtype=dtype)
                if like is None or type(like) is np.ndarray
                else np.zeros_like(like, shape=batch_shape + shape, dtype=dtype)
            )
            grads[i] = wrap(zeros, False, None, 0) if create_graph else zeros


def _nodes_leading_to(capture: dict, seen: set) -> set:
    """Nodes with an input from which a node in ``capture`` can be reached."""
    consumers: dict[Node, list[Node]] = {}
    for node in seen:
        for child, _ in node.edges:
            consumers.setdefault(child, []).append(node)
    frontier = [n for n in capture if n in seen]
    reach = set(frontier)
    runnable: set[Node] = set()
    while frontier:
        child = frontier.pop()
        for parent in consumers.get(child, ()):
            runnable.add(parent)
            if parent not in reach:
                reach.add(parent)
                frontier.append(parent)
    return runnable


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of graph leaves.

    Parameters
    ----------
    tensors : Tensor or sequence of Tensor
        Outputs to differentiate.
    grad_tensors : sequence, optional
        One cotangent per tensor (None allowed for single-element tensors).
    retain_graph : bool, optional
        Keep saved values for another pass; defaults to ``create_graph``.
    create_graph : bool
        Record the backward pass so the gradients can be differentiated again.
    inputs : Tensor or sequence of Tensor, optional
        Accumulate only into these tensors.

    Examples
    --------
    >>> import funcdiff as fd
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> fd.backward((x * x).sum())
    >>> x.grad
    tensor([2., 4.])
    """
    outputs = _as_tuple(tensors, "tensors")
    if grad_tensors is not None and isinstance(grad_tensors, (Tensor, np.ndarray)):
        grad_tensors = (grad_tensors,)
    grads, _ = _make_grads(outputs, grad_tensors, create_graph, batched=False)
    if retain_graph is None:
        retain_graph = create_graph
    targets = None
    if inputs is not None:
        inputs = _as_tuple(inputs, "inputs")
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        targets = [t._gradient_edge() for t in inputs]
    captured = run_backward(
        outputs,
        grads,
        targets=targets,
        accumulate=True,
        retain_graph=retain_graph,
        create_graph=create_graph,
    )
    if inputs is not None:
        # A non-leaf among ``inputs`` gets its gradient in ``.grad`` too (the pass
        # accumulates only into leaves, and into non-leaves that retain_grad).
        for t, target in zip(inputs, targets):  # type: ignore[arg-type]
            if t.grad_fn is not None and not t._retains_grad:
                g = captured.get(target)
                if g is not None:
                    _accumulate_into(t, g, create_graph)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``.

    Parameters
    ----------
    outputs : Tensor or sequence of Tensor
        Outputs to differentiate.
    inputs : Tensor or sequence of Tensor
        Tensors (leaves or intermediate results) to differentiate with respect to.
    grad_outputs : sequence, optional
        Cotangents, one per output (None allowed for single-element outputs).
    retain_graph : bool, optional
        Keep saved values for another pass; defaults to ``create_graph``.
    create_graph : bool
        Record the computation, so the result can be differentiated again.
    only_inputs : bool
        Ignored, accepted for torch compatibility.
    allow_unused : bool, optional
        Return None for inputs the outputs do not depend on, instead of raising.
        Defaults to ``materialize_grads``.
    is_grads_batched : bool
        The leading axis of every grad_output is a batch: the result is a batch of
        vector-Jacobian products, computed in one backward pass.
    materialize_grads : bool
        Return zeros instead of None for unused inputs.

    Returns
    -------
    tuple of Tensor
        One gradient per input.

    Examples
    --------
    >>> import funcdiff as fd
    >>> x = fd.tensor(2.0, requires_grad=True)
    >>> (dx,) = fd.grad(x ** 3, x, create_graph=True)
    >>> dx
    tensor(12., grad_fn=<MultiplyBackward>)
    >>> fd.grad(dx, x)
    (tensor(12.),)
    """
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    outs = _as_tuple(outputs, "outputs")
    ins = _as_tuple(inputs, "inputs")
    if not ins:
        raise RuntimeError("grad requires at least one input")
    for t in ins:
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if grad_outputs is not None and isinstance(grad_outputs, (Tensor, np.ndarray)):
        grad_outputs = (grad_outputs,)
    grads, batch_shape = _make_grads(outs, grad_outputs, create_graph, is_grads_batched)
    if retain_graph is None:
        retain_graph = create_graph
    targets = [t._gradient_edge() for t in ins]
    captured = run_backward(
        outs,
        grads,
        targets=targets,
        accumulate=False,
        retain_graph=retain_graph,
        create_graph=create_graph,
        batch_shape=batch_shape,
    )
    result: list[Tensor | None] = []
    for t, target in zip(ins, targets):
        g = captured.get(target)
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                zeros = np.zeros_like(t.data, shape=batch_shape + t.shape)
                result.append(wrap(zeros, False, None, 0))
            else:
                result.append(None)
            continue
        if g.dtype.kind == "c":
            g = _conjugate(g)  # the public form of a complex gradient
        result.append(_to_tensor(g))
    return tuple(result)
