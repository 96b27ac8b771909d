"""Rows of a Jacobian on a recorded graph: standard bases, pullbacks and pushforwards.

Once a function has run on Tensors, its recorded graph answers every question about
its Jacobian ``J``:

* a block of rows of ``J`` is the pullback of rows of the standard basis of the
  flattened outputs: one backward pass with a batch of one-hot cotangents
  (``is_grads_batched=True``), or one pass per row (:func:`pullback_rows`);
* a block of columns is the pushforward of the standard basis of the inputs, in
  forward mode (:func:`jacobian_forward`);
* ``J v`` is one pushforward (:func:`push_tangents`).

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> x = fd.tensor([1.0, 2.0], requires_grad=True)
>>> y = x * x
>>> (block,) = pullback_rows([y], [y.shape], [x], batched=True, chunk_size=None,
...                          create_graph=False)[0]
>>> block
tensor([[2., 0.],
        [0., 4.]])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np

from funcdiff._core.backends import as_array, is_foreign, zeros
from funcdiff._core.structured import identity_rows
from funcdiff._core.tensor import Tensor, gradient_edge, tensor, wrap
from funcdiff.autograd import Function, grad
from funcdiff.autograd.forward import push_forward
from funcdiff.autograd.function import FunctionNode

__all__ = [
    "Join",
    "basis_rows",
    "construct_standard_basis_for",
    "double_backward_jvp",
    "is_batch_safe",
    "jacobian_forward",
    "jacobian_reverse",
    "jacobian_rows",
    "jvp",
    "one_hot",
    "pullback_rows",
    "push_tangents",
    "vjp",
]


# --------------------------------------------------------------------------- bases
def basis_rows(
    shape: tuple[int, ...], dtype: Any, offset: int, start: int, stop: int, like: Any = None
) -> np.ndarray:
    """Rows ``start:stop`` of the identity, restricted to one block of its columns.

    The block holds columns ``offset : offset + prod(shape)``; the result has shape
    ``(stop - start,) + shape``: the cotangents that one flattened output (or input)
    receives for those rows of the standard basis. ``like``: an array whose type the
    rows take (a device array's, NEP 35), NumPy's when None.
    """
    # Row r is basis vector start + r: a one in column start + r - offset, if any.
    if like is not None and is_foreign(like):
        block = np.eye(stop - start, math.prod(shape), k=start - offset, dtype=dtype, like=like)
    else:
        block = np.eye(stop - start, math.prod(shape), k=start - offset, dtype=dtype)
    return block.reshape((stop - start, *shape))


def construct_standard_basis_for(
    tensors: Sequence[Tensor], numels: Sequence[int]
) -> tuple[np.ndarray, ...]:
    """The ``N x N`` identity (``N = sum(numels)``) split into column chunks.

    Chunk ``k`` has shape ``(N, numels[k])`` and the dtype of ``tensors[k]``;
    concatenating the chunks along axis 1 gives ``eye(N)``.
    """
    if len(tensors) != len(numels) or not tensors:
        raise ValueError("expected one numel per tensor and at least one tensor")
    total = int(sum(numels))
    chunks = []
    offset = 0
    for t, n in zip(tensors, numels, strict=True):
        chunks.append(basis_rows((int(n),), t.dtype, offset, 0, total, t.data))
        offset += int(n)
    return tuple(chunks)


def one_hot(shape: tuple[int, ...], dtype: Any, k: int, like: Any = None) -> np.ndarray:
    """Row ``k`` of the identity, shaped like one output (or input) of ``shape``
    (of ``like``'s array type when given)."""
    e = zeros((math.prod(shape),), dtype, like)
    e[k] = 1
    return e.reshape(shape)


class Join(Function):
    """Stack (new axis 0) or concatenate (axis 0) Tensors, differentiably to any order.

    The backward slices the incoming cotangent, after any leading batch axis that a
    batched backward pass (``is_grads_batched``) adds.
    """

    @staticmethod
    def forward(ctx: Any, stack: bool, *pieces: Any) -> np.ndarray:
        arrays = [as_array(p) for p in pieces]
        ctx.stack = stack
        ctx.sizes = [1 if stack else a.shape[0] for a in arrays]
        ctx.ndim = arrays[0].ndim + (1 if stack else 0)
        return np.stack(arrays) if stack else np.concatenate(arrays)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple:
        lead = (slice(None),) * (g.ndim - ctx.ndim)
        result: list = [None]
        start = 0
        for size in ctx.sizes:
            index = start if ctx.stack else slice(start, start + size)
            result.append(g[(*lead, index)])
            start += size
        return tuple(result)


def _reshape(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    if t.shape == shape:
        return t
    if t.requires_grad:
        return t.reshape(shape)
    # A constant result: reshape its ndarray, without the cost of a recorded call.
    return wrap(t.data.reshape(shape), False, None, 0)


def _rows(t: Tensor, lo: int, hi: int) -> Tensor:
    """Rows ``lo:hi`` of a block of Jacobian rows (recorded only when it needs to be)."""
    if t.requires_grad:
        return t[lo:hi]
    return wrap(t.data[lo:hi], False, None, 0)


def pullback_rows(
    roots: Sequence[Tensor | None],
    root_shapes: Sequence[tuple[int, ...]],
    wrt: Sequence[Tensor],
    *,
    batched: bool,
    chunk_size: int | None,
    create_graph: bool,
    check: Callable[[int, int, Tensor | None], None] | None = None,
) -> list[list[Tensor | None]]:
    """Pull every row of the standard basis of the flattened ``roots`` back to ``wrt``.

    Returns ``blocks[i][j]``: the rows belonging to root ``i`` (``prod(root_shapes[i])``
    of them) of the Jacobian of root ``i`` with respect to ``wrt[j]``, as a Tensor whose
    C-order elements are ``rows x wrt[j].shape``; None when all of them are zero. A root
    that is None or does not require grad contributes zero rows.

    ``batched`` pulls back ``chunk_size`` rows (all of them by default) per backward
    pass with ``is_grads_batched``; otherwise one row per pass, and ``check(i, j, row)``
    sees every row gradient before it is used (strict mode). The graph is kept between
    passes and freed after the last one unless ``create_graph``.
    """
    offsets = [0]
    for shape in root_shapes:
        offsets.append(offsets[-1] + math.prod(shape))
    total = offsets[-1]
    live = [r is not None and r.requires_grad for r in roots]
    step = (chunk_size or max(total, 1)) if batched else 1
    pieces: list[list[list]] = [[[] for _ in wrt] for _ in roots]
    nonzero = [[False] * len(wrt) for _ in roots]

    for start, stop, res in _passes(
        roots,
        root_shapes,
        offsets,
        live,
        wrt,
        step,
        batched,
        create_graph,
        create_graph,
        not create_graph,
    ):
        for i in range(len(roots)):
            lo, hi = max(start, offsets[i]), min(stop, offsets[i + 1])
            if lo >= hi:
                continue
            for j, r in enumerate(res):
                if check is not None:
                    check(i, j, r)
                if r is None or not live[i]:
                    pieces[i][j].append((hi - lo, None))
                    continue
                if batched and (lo, hi) != (start, stop):
                    r = _rows(r, lo - start, hi - start)
                pieces[i][j].append((hi - lo, r))
                nonzero[i][j] = True

    blocks: list[list[Tensor | None]] = []
    for i in range(len(roots)):
        row: list[Tensor | None] = []
        for j, w in enumerate(wrt):
            if not nonzero[i][j]:
                row.append(None)
                continue
            parts: list[Any] = [  # row gradients (Tensors), zeros where there were none
                p
                if p is not None
                else zeros((n, *w.shape) if batched else w.shape, w.dtype, w.data)
                for n, p in pieces[i][j]
            ]
            row.append(parts[0] if len(parts) == 1 else Join.apply(not batched, *parts))
        blocks.append(row)
    return blocks


# Below this many entries a block of identity rows stays a dense array: the structured
# form saves NumPy work in proportion to the block's size, but costs Python dispatch per
# operation (the two break even near 64 x 64 on the Hessian of Rosenbrock).
_DENSE_MAX = 4096


def _passes(
    roots: Sequence[Tensor | None],
    root_shapes: Sequence[tuple[int, ...]],
    offsets: list[int],
    live: list[bool],
    wrt: Sequence[Tensor],
    step: int,
    batched: bool,
    create_graph: bool,
    keep_graph: bool,
    structured: bool,
) -> Iterator[tuple[int, int, tuple[Tensor | None, ...]]]:
    """One backward pass per ``step`` rows of the basis: yields ``(start, stop, grads)``.

    The graph is freed after the last pass unless ``keep_graph``; ``structured`` lets
    a large whole block of rows go as scaled identity rows instead of a dense array.
    """
    total = offsets[-1]
    for start in range(0, total, step):
        stop = min(start + step, total)
        used: list[Tensor] = []
        cots: list[Any] = []
        for i, root in enumerate(roots):
            lo, hi = max(start, offsets[i]), min(stop, offsets[i + 1])
            if lo >= hi or not live[i] or root is None:  # (a None root is never live)
                continue
            used.append(root)
            whole = start <= offsets[i] and offsets[i + 1] <= stop
            big = (stop - start) * (hi - lo) >= _DENSE_MAX
            if batched and structured and whole and big and not is_foreign(root.data):
                # The whole block: scaled identity rows, which elementwise rules keep
                # as a diagonal and matmul turns into a row scaling (no GEMM).
                block = identity_rows(root_shapes[i], root.dtype, offsets[i] - start, stop - start)
                cots.append(block)
            elif batched:
                rows = basis_rows(root_shapes[i], root.dtype, offsets[i], start, stop, root.data)
                cots.append(rows)
            else:
                cots.append(one_hot(root_shapes[i], root.dtype, start - offsets[i], root.data))
        if not used:
            yield start, stop, (None,) * len(wrt)
            continue
        yield (
            start,
            stop,
            grad(
                tuple(used),
                tuple(wrt),
                tuple(cots),
                retain_graph=keep_graph or stop < total,
                create_graph=create_graph,
                allow_unused=True,
                is_grads_batched=batched,
            ),
        )


# --------------------------------------------------------------------------- forward mode
def push_tangents(
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    v: Sequence[Tensor | np.ndarray] | None,
    create_graph: bool,
    batched: bool = False,
) -> list[Tensor | None]:
    """Forward mode: the tangents of ``outputs`` for tangents ``v`` of ``inputs``.

    ``v`` holds Tensors or ndarrays (None: ones, for a single one-element input), with
    one leading batch axis when ``batched``; under ``create_graph`` the tangent
    computation is recorded, so ``v`` should be Tensors. Returns one Tensor per
    output, None where an output does not depend on the inputs.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([0.0, 1.0], requires_grad=True)
    >>> push_tangents((np.sin(x) * x,), (x,), (np.ones(2),), create_graph=False)
    [tensor([0.        , 1.38177329])]
    """
    if v is None:
        v = tuple(cast(Tensor, np.ones_like(t)) for t in inputs)
    seeds = {}
    for inp, t in zip(inputs, v, strict=True):
        seeds[gradient_edge(inp)] = t if create_graph or not isinstance(t, Tensor) else t.data
    pushed = push_forward(outputs, seeds, create_graph=create_graph, batched=batched)
    if create_graph:
        return pushed
    given = {id(a) for a in seeds.values()}
    result: list[Tensor | None] = []
    for r in pushed:
        # Never hand out the caller's v, or a read-only broadcast view (batched values
        # of vmap and other array types may have no writeable flag: they are not views).
        writeable = getattr(getattr(r, "flags", None), "writeable", True)
        if r is not None and (id(r) in given or not writeable):
            r = r.copy()
        result.append(None if r is None else wrap(r, False, None, 0))
    return result


# --------------------------------------------------------------------------- whole Jacobians
def _zeros(ref: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Zeros of ``shape`` with the dtype of ``ref``, as a constant Tensor."""
    return cast(Tensor, np.zeros_like(ref, shape=shape))


#: Rows per batched backward pass of the default (``vectorize=False``) Jacobian: each
#: pass holds ``rows x`` the inputs' size per cotangent, this many elements at most.
_DEFAULT_BATCH_ELEMENTS = 1 << 22


def _default_chunk(inputs: Sequence[Tensor]) -> int:
    """Rows per pass that bound a batch of input cotangents to 32 MiB of float64."""
    return max(1, _DEFAULT_BATCH_ELEMENTS // max(1, sum(t.size for t in inputs)))


def jacobian_reverse(
    outputs: tuple[Tensor, ...],
    inputs: tuple[Tensor, ...],
    create_graph: bool,
    strict: bool,
    vectorize: bool,
    chunk_size: int | None,
) -> tuple[tuple[Tensor, ...], ...]:
    """Blocks ``J[i][j]`` (shape ``out_i.shape + in_j.shape``) pulled back by rows.

    ``vectorize`` pulls back ``chunk_size`` rows (all by default) per batched pass; the
    default batches too, within a memory bound; ``strict`` (without ``vectorize``)
    pulls back one row per pass and raises where a row is independent of an input.
    A block no row reaches is zeros of the input's dtype.
    """
    check = None
    batched = vectorize
    if not vectorize and not strict:
        # The row loop's results, from batches of rows: a batched pass runs the same
        # vjps on a leading axis of rows (a custom Function without batched_backward
        # still sees one row at a time). Strict mode keeps the loop, whose checks
        # see every row.
        batched = True
        chunk_size = chunk_size or _default_chunk(inputs)
    if strict and not vectorize:

        def check(i: int, j: int, row: Tensor | None) -> None:
            if row is None:
                raise RuntimeError(
                    f"Output {i} of the user-provided function is independent of input {j}. "
                    "This is not allowed in strict mode."
                )
            if create_graph and not row.requires_grad:
                raise RuntimeError(
                    f"The jacobian of the user-provided function is independent of input {j}. "
                    "This is not allowed in strict mode when create_graph=True."
                )

    blocks = pullback_rows(
        outputs,
        [o.shape for o in outputs],
        inputs,
        batched=batched,
        chunk_size=chunk_size,
        create_graph=create_graph,
        check=check,
    )
    jac = []
    for out, row in zip(outputs, blocks, strict=True):
        entries = []
        for inp, block in zip(inputs, row, strict=True):
            shape = out.shape + inp.shape
            entries.append(_zeros(inp, shape) if block is None else _reshape(block, shape))
        jac.append(tuple(entries))
    return tuple(jac)


def jacobian_forward(
    outputs: Sequence[Any],
    inputs: Sequence[Tensor],
    vectorize: bool,
    chunk_size: int | None,
    create_graph: bool = False,
) -> tuple[tuple[Tensor, ...], ...]:
    """Columns of the Jacobian as tangents ``J e_k`` pushed through the recorded graph.

    With ``vectorize`` a batch of basis tangents (``chunk_size`` of them, all by
    default) goes through in one pass; otherwise one column per pass. Returns blocks
    ``J[i][j]`` of shape ``out_i.shape + in_j.shape``; an output that is not a Tensor
    requiring grad has zero blocks. With ``create_graph`` the tangents and the
    assembly of the blocks are recorded operations on Tensors (which a tracer sees).

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> ((block,),) = jacobian_forward((x * x,), (x,), vectorize=True, chunk_size=None)
    >>> block
    tensor([[2., 0.],
            [0., 4.]])
    """
    offsets = [0]
    for inp in inputs:
        offsets.append(offsets[-1] + inp.size)
    total = offsets[-1]
    step = (chunk_size or max(total, 1)) if vectorize else 1
    shapes: list[tuple[int, ...]] = []
    sizes: list[int] = []
    live: list[Tensor] = []  # push_forward answers None for a Tensor that needs no grad
    for o in outputs:
        if isinstance(o, Tensor):
            live.append(o)
            shapes.append(o.shape)
            sizes.append(o.size)
        else:
            shapes.append(np.shape(o))
            sizes.append(math.prod(shapes[-1]))
    pieces: list[list[Any]] = [[] for _ in outputs]
    for start in range(0, total, step):
        stop = min(start + step, total)
        seeds: dict = {}
        for j, inp in enumerate(inputs):
            if offsets[j] < stop and start < offsets[j + 1]:
                rows = basis_rows(inp.shape, inp.dtype, offsets[j], start, stop, inp.data)
                seed = rows if vectorize else rows[0]
                seeds[gradient_edge(inp)] = wrap(seed, False, None, 0) if create_graph else seed
        pushed = push_forward(live, seeds, create_graph=create_graph, batched=vectorize)
        if len(live) != len(outputs):
            by_id = dict(zip(map(id, live), pushed))
            pushed = [by_id.get(id(o)) for o in outputs]
        for i, out in enumerate(outputs):
            t = pushed[i]
            shape = (stop - start, sizes[i])
            if t is None:
                dtype = out.dtype if hasattr(out, "dtype") else np.result_type(out)
                t = zeros(shape, dtype if dtype.kind == "f" else inputs[0].dtype, inputs[0].data)
                if create_graph:
                    t = wrap(t, False, None, 0)
            pieces[i].append(t.reshape(shape))
    jac = []
    for i in range(len(outputs)):
        # Rows are input elements: transposed, the columns of input j are its block.
        # (Array methods, not np.moveaxis and np.reshape: on small problems their
        # argument normalisation costs more than the arithmetic.)
        columns: Any = (np.concatenate(pieces[i]) if len(pieces[i]) > 1 else pieces[i][0]).T
        out_shape = shapes[i]
        entries: list[Tensor] = []
        for j, inp in enumerate(inputs):
            block = columns[:, offsets[j] : offsets[j + 1]].reshape(out_shape + inp.shape)
            entries.append(block if create_graph else wrap(block, False, None, 0))
        jac.append(tuple(entries))
    return tuple(jac)


# --------------------------------------------------------------------------- one kept graph
# The checkers and funcdiff.optimize record a function once and ask many questions of
# that graph (every output's Jacobian rows, the dot-product and symmetry tests, a
# cached optimisation point), so every pass below keeps it (retain_graph=True) and
# returns plain arrays.


def _shape(value: Any) -> tuple[int, ...]:
    return value.shape if isinstance(value, Tensor) else np.shape(value)


def is_batch_safe(outs: Sequence[Any]) -> bool:
    """True unless the graph behind ``outs`` holds a hook or a declared batch-aware backward.

    Registered rules are tested with batched cotangents, and the engine passes a custom
    Function's backward one cotangent at a time; a hook, or a backward whose class sets
    ``batched_backward = True``, sees the whole batch and may be written for one
    cotangent only (``A.T @ g``), so such a graph gets one backward pass per row.

    Examples
    --------
    >>> import funcdiff as fd
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> y = x * x
    >>> is_batch_safe([y])
    True
    >>> _ = y.register_hook(lambda g: g)
    >>> is_batch_safe([y])
    False
    """
    stack = [o.grad_fn for o in outs if isinstance(o, Tensor) and o.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        declared_batched = isinstance(node, FunctionNode) and getattr(
            node.fn_cls, "batched_backward", False
        )
        if node.pre_hooks or declared_batched:
            return False
        stack.extend(e[0] for e in node.edges if e is not None)
    return True


def jacobian_rows(out: Any, ins: Sequence[Tensor], batched: bool | None = None) -> list[np.ndarray]:
    """Jacobian of ``out`` w.r.t. each of ``ins``: shape ``out.shape + in.shape`` (float64).

    With ``batched`` True, one backward pass per chunk of rows with a batch of one-hot
    cotangents (dense ones: a batched backward is tested as it is written); with
    False, one pass per row; with None (the default), batched wherever
    :func:`is_batch_safe` allows it. A constant ``out`` gives zeros.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> (rows,) = jacobian_rows(np.sin(x) * 2.0, [x])
    >>> np.allclose(rows, np.diag(2.0 * np.cos([1.0, 2.0])))
    True
    """
    if batched is None:
        batched = is_batch_safe([out])
    shape = _shape(out)
    m = math.prod(shape)
    blocks = [zeros((m, *t.shape), np.float64, t.data) for t in ins]
    if m and isinstance(out, Tensor) and out.requires_grad and ins:
        step = max(1, _DEFAULT_BATCH_ELEMENTS // (m + sum(t.size for t in ins))) if batched else 1
        offsets, live = [0, m], [True]
        for start, stop, gs in _passes(
            [out], [shape], offsets, live, ins, step, batched, False, True, False
        ):
            for b, g in zip(blocks, gs, strict=True):
                if g is not None:
                    b[start:stop] = g.data
    return [b.reshape(shape + t.shape) for b, t in zip(blocks, ins, strict=True)]


def vjp(
    outs: Sequence[Any],
    ins: Sequence[Tensor],
    cotangents: Sequence[Any],
    batched: bool = False,
    force_batched: bool = False,
) -> list[np.ndarray]:
    """``sum_i u_i^T J_i`` for each of ``ins``, as the gradients' data.

    Outputs that are constants (not Tensors requiring grad) contribute nothing; an
    input that no output reaches gets float64 zeros. With ``batched`` every cotangent
    carries one leading batch axis: one batched backward pass, or one pass per batch
    entry where :func:`is_batch_safe` forbids a batch (unless ``force_batched``).

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> vjp([x * x], [x], [np.array([1.0, 10.0])])
    [array([ 2., 40.])]
    """
    lead: tuple[int, ...] = (np.shape(cotangents[0])[0],) if batched and cotangents else ()
    live = [
        (o, u)
        for o, u in zip(outs, cotangents, strict=True)
        if isinstance(o, Tensor) and o.requires_grad
    ]
    if not live:
        return [zeros(lead + t.shape, np.float64, t.data) for t in ins]
    roots = [o for o, _ in live]
    cots = [_cast(u, o.dtype) for o, u in live]
    if batched and not force_batched and not is_batch_safe(roots):
        results = [zeros(lead + t.shape, np.float64, t.data) for t in ins]
        for b in range(lead[0]):
            gs = grad(roots, list(ins), [c[b] for c in cots], retain_graph=True, allow_unused=True)
            for r, g in zip(results, gs, strict=True):
                if g is not None:
                    r[b] = g.data
        return results
    gs = grad(
        roots, list(ins), cots, retain_graph=True, allow_unused=True, is_grads_batched=batched
    )
    return [
        zeros(lead + t.shape, np.float64, t.data) if g is None else g.data
        for g, t in zip(gs, ins, strict=True)
    ]


def jvp(
    outs: Sequence[Any], ins: Sequence[Tensor], dirs: Sequence[Any], batched: bool = False
) -> list[np.ndarray]:
    """``J v`` for every output in forward mode, as new float64 (complex128) arrays.

    ``dirs[j]`` has the shape of ``ins[j]`` (after one leading batch axis if
    ``batched``) and is pushed through the recorded graph, one operation at a time; an
    output that does not depend on ``ins`` (or is a constant) gets zeros.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> jvp([x * x], [x], [np.array([1.0, 1.0])])
    [array([2., 4.])]
    """
    seeds = {gradient_edge(t): d for t, d in zip(ins, dirs, strict=True)}
    pushed = iter(
        push_forward(
            [o for o in outs if isinstance(o, Tensor)], seeds, create_graph=False, batched=batched
        )
    )
    lead = np.shape(dirs[0])[:1] if batched and dirs else ()
    result = []
    for o in outs:
        t = next(pushed) if isinstance(o, Tensor) else None
        if t is None:
            result.append(zeros(lead + _shape(o), np.float64, _data(o)))
        else:
            dtype = np.complex128 if t.dtype.kind == "c" else np.float64
            result.append(t.astype(dtype) if is_foreign(t) else np.array(t, dtype=dtype))
    return result


def _data(o: Any) -> Any:
    """The array of an output (a Tensor's data), for creation that follows its type."""
    return o.data if isinstance(o, Tensor) else o


def _cast(u: Any, dtype: Any) -> Any:
    """A cotangent as an array of ``dtype``, of its own type (a device array stays one)."""
    if is_foreign(u):
        return u if u.dtype == dtype else u.astype(dtype)
    return np.asarray(u, dtype=dtype)


def _result_dtype(o: Any) -> np.dtype:
    """complex128 for a complex output, float64 for any other."""
    kind = o.dtype.kind if isinstance(o, Tensor) else as_array(o).dtype.kind
    return np.dtype(np.complex128 if kind == "c" else np.float64)


def double_backward_jvp(
    outs: Sequence[Any],
    ins: Sequence[Tensor],
    dirs: Sequence[Any],
    batched: bool = False,
    force_batched: bool = False,
) -> list[np.ndarray]:
    """``J v`` for every output (float64), by the double-backward trick.

    The gradient with respect to a dummy cotangent ``u`` of ``<grad(out, x, u), v>``
    is ``J v``. Unlike :func:`jvp` it uses the backward pass alone, so it stays
    independent of the forward-mode tangent maps: the checkers compare it with
    :func:`vjp` (a backward that is not linear in its cotangent fails that test).
    It needs the vjps to be differentiable, which funcdiff's are. ``dirs`` and
    ``batched``/``force_batched`` are as in :func:`jvp` and :func:`vjp`.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> double_backward_jvp([x * x], [x], [np.array([1.0, 1.0])])
    [array([2., 4.])]
    """
    nb = (np.shape(dirs[0])[0],) if batched and dirs else ()
    results = [zeros(nb + _shape(o), _result_dtype(o), _data(o)) for o in outs]
    live = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not live:
        return results
    us = [
        tensor(zeros(outs[k].shape, outs[k].dtype, outs[k].data), requires_grad=True) for k in live
    ]
    gs = grad(
        [outs[k] for k in live],
        list(ins),
        us,
        create_graph=True,
        retain_graph=True,
        allow_unused=True,
    )
    pairs = [(g, d) for g, d in zip(gs, dirs, strict=True) if g is not None and g.requires_grad]
    if not pairs:
        return results
    jv = vjp([g for g, _ in pairs], us, [d for _, d in pairs], batched, force_batched)
    for k, r in zip(live, jv, strict=True):
        results[k][...] = r
    return results
