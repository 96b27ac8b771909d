"""Running rules: compute an operation on ndarrays and record it in the graph.

Every operation on Tensors, whether an operator, a method, a ufunc or a NumPy
function, ends in :func:`call`: unwrap the Tensors, run the rule's forward on the
ndarrays, wrap the results, and, when grad mode is on and a differentiable input
requires grad, attach a :class:`~funcdiff.ops.nodes.RuleNode` holding what the rule's
vjps need. :func:`call_positional` is the lean path of positional ufunc calls
(operators), which records a :class:`~funcdiff.ops.nodes.PositionalNode`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from funcdiff._core import grad_mode, tracing
from funcdiff._core.backends import (
    check_same_kind,
    first_foreign,
    is_foreign,
    special_module,
    unsupported,
)
from funcdiff._core.graph import INPLACE, SEQUENCE, WATCHERS, notify_created, version_of
from funcdiff._core.registry import ALL, FUNCTION_RULES, NAMED_RULES, UFUNC_RULES, Rule
from funcdiff._core.tensor import Tensor, wrap
from funcdiff._core.views import register_view
from funcdiff.ops.nodes import _NO_KWARGS, PositionalNode, RuleNode, _data_of

if TYPE_CHECKING:
    from types import FrameType

__all__ = [
    "call",
    "call_positional",
    "call_ufunc",
    "array_function",
    "getitem",
    "astype",
    "matrix_product",
    "MATRIX_TYPES",
    "register_matrix_type",
    "register_array_type",
]

_state = grad_mode.thread_state
_tracing = tracing.TRACING
_current_tracer = tracing.current_tracer
_next_seq = SEQUENCE.__next__
# ``object.__new__`` called directly skips the attribute lookup of ``Node.__new__``.
_new_object = object.__new__
_ARRAY_TYPES: tuple[type, ...] = (np.ndarray, np.generic)
# Array types of other transforms that a rule's forward may return.
_FOREIGN_TYPES: set[type] = set()


def register_array_type(cls: type) -> None:
    """Let a rule's forward return ``cls`` (an array-like that is not an ndarray, such as
    ``funcdiff.func``'s batched values): its results become Tensors like ndarrays do.
    Its ``shape`` may carry more than the dimensions (the records keep the object)."""
    global _ARRAY_TYPES
    if cls not in _ARRAY_TYPES:
        _ARRAY_TYPES += (cls,)
        _FOREIGN_TYPES.add(cls)


_SEQUENCE_TYPES = (list, tuple)


def _scan(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list, list]:
    """Find the Tensors among the arguments (one level into lists and tuples).

    Returns ``(paths, tensors)``: where each Tensor sits, as ``(key, index-in-list)``.
    """
    paths: list = []
    tensors: list = []
    for key, a in (*enumerate(args), *kwargs.items()):
        if isinstance(a, Tensor):
            paths.append((key, None))
            tensors.append(a)
        elif type(a) in (list, tuple):
            for j, item in enumerate(a):
                if isinstance(item, Tensor):
                    paths.append((key, j))
                    tensors.append(item)
    return paths, tensors


def _wrap_outputs(out: Any, view_source: Sequence[Tensor]) -> tuple[Any, list[Tensor]]:
    """Wrap the forward result's arrays as Tensors; return (result, output tensors)."""
    if isinstance(out, _ARRAY_TYPES) or is_foreign(out):
        arr: Any = np.asarray(out) if isinstance(out, np.generic) else out
        t = wrap(arr, False, None, 0)
        if arr.base is not None and view_source:
            _mark_view(t, view_source)
        return t, [t]
    if isinstance(out, (tuple, list)):
        tensors = []
        items = []
        for o in out:
            if isinstance(o, _ARRAY_TYPES) or is_foreign(o):
                w, ts = _wrap_outputs(o, view_source)
                tensors.extend(ts)
                items.append(w)
            else:
                items.append(o)
        if isinstance(out, list):
            return items, tensors
        if hasattr(out, "_fields"):  # namedtuple results (EighResult, SVDResult, ...)
            return type(out)(*items), tensors
        return tuple(items), tensors
    return out, []


def _mark_view(t: Tensor, sources: Sequence[Tensor]) -> None:
    """Share the version counter with the Tensor whose memory ``t`` aliases."""
    for s in sources:
        if np.may_share_memory(t.data, s.data):
            t._version_owner = s._version_owner if s._version_owner is not None else s
            register_view(t, s._view_of if s._view_of is not None else s)
            return


def call(rule: Rule, args: Sequence[Any], kwargs: dict[str, Any] | None = None) -> Any:
    """Run ``rule`` on ``args`` (Tensors, arrays, constants) and record it when needed."""
    if kwargs is None:
        kwargs = _NO_KWARGS
    if _tracing[0]:  # a plain global first: the thread-local slots only while tracing
        done = tracing.run_instead(rule, args, kwargs)
        if done is not NotImplemented:
            return done
    if rule.impl is not None:
        if not rule.complex:
            _refuse_complex_composite(rule, args, kwargs)
        try:
            return rule.impl(*args, **kwargs)
        except TypeError as exc:  # a composite on a device array: name it and the type
            found = first_foreign((*args, *kwargs.values()))
            if found is None or str(exc).startswith(f"{rule.name} cannot run on"):
                raise
            raise unsupported(rule.name, found, exc) from None
    # One pass finds the Tensors (one level into lists and tuples) and unwraps them.
    paths: list = []
    tensors: list = []
    data_args: list = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            paths.append(_ARG_PATHS[i] if i < 64 else (i, None))
            tensors.append(a)
            data_args.append(a.data)
        elif type(a) in _SEQUENCE_TYPES:
            found = len(tensors)
            for j, item in enumerate(a):
                if isinstance(item, Tensor):
                    paths.append((i, j))
                    tensors.append(item)
            data_args.append(_data_of(a) if len(tensors) > found else a)
        else:
            data_args.append(a)
    if kwargs:
        paths_kw, tensors_kw = _scan((), kwargs)
        paths += paths_kw
        tensors += tensors_kw
        data_kwargs = {k: _data_of(v) for k, v in kwargs.items()} if tensors_kw else kwargs
    else:
        data_kwargs = kwargs
    try:
        out = rule.fn(*data_args, **data_kwargs)
    except TypeError as exc:
        out = on_backend(rule.fn, rule.name, data_args, data_kwargs, exc)
    result, outputs = _wrap_outputs(out, tensors)
    if _state.grad_enabled:
        for t in tensors:
            if t._requires_grad:
                if rule.differentiable:
                    _record(rule, args, kwargs, paths, tensors, out, outputs)
                elif not rule.complex and any(o.data.dtype.kind == "c" for o in outputs):
                    _complex_rule(rule)  # not piecewise constant on complex values
                break
    if _tracing[0]:
        tracer = _current_tracer()
        if tracer is not None:
            tracer.op(rule, args, kwargs, paths, tensors, outputs)
    return result


# Interned ``(position, None)`` paths of positional Tensor arguments.
_ARG_PATHS = tuple((i, None) for i in range(64))


def _record(
    rule: Rule,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    paths: list,
    tensors: list,
    out: Any,
    outputs: list[Tensor],
) -> None:
    diff_paths = []
    keys = []
    edges = []
    vjps = rule.vjps
    by_vjp_all = rule.vjp_all is not None
    for path, t in zip(paths, tensors):
        if not t._requires_grad:
            continue
        key = path[0]
        if key in rule.nondiff_args:
            continue
        if isinstance(key, str) if by_vjp_all else key not in vjps:
            _no_derivative(rule, key)
        diff_paths.append(path)
        keys.append(key)
        fn = t.grad_fn
        edges.append((fn, t._output_nr) if fn is not None else t._gradient_edge())
    if not edges:
        return
    multi = len(outputs) != 1 or not (isinstance(out, _ARRAY_TYPES) or is_foreign(out))
    has_float = False
    has_complex = False
    for o in outputs:
        kind = o.data.dtype.kind
        if kind == "f":
            has_float = True
        elif kind == "c":
            has_float = has_complex = True
    if not has_float:
        return
    if not has_complex:
        for t in tensors:
            if t.data.dtype.kind == "c":
                has_complex = True
                break
    if has_complex:
        rule = _complex_rule(rule)
    node = _new_object(RuleNode)
    node.rule = rule
    node.edges = tuple(edges)
    node.seq = _next_seq()
    node.paths = tuple(diff_paths)
    shapes_only = rule.shapes_only
    if shapes_only:
        for t in tensors:
            if t.data.nbytes >= STAND_IN_MIN_BYTES:
                break
        else:
            shapes_only = False  # all small: keep them, with no call per argument
    node.args = _stand_ins(args, rule.nondiff_args) if shapes_only else tuple(args)
    node.kwargs = kwargs
    node.pre_hooks = None
    node.retained = None
    nested = False
    for a in args:
        if type(a) in _SEQUENCE_TYPES:
            nested = True
            break
    node.nested = nested
    node.multi = multi
    if multi:
        node.ans = tuple(o.data for o in outputs)
        node.out_meta = tuple((o.data.shape, o.data.dtype) for o in outputs)
    else:
        data = outputs[0].data
        node.ans = _stand_in(data) if shapes_only else data
        node.out_meta = ((data.shape, data.dtype),)
    read, reads_ans = rule.checked(tuple(keys))
    checks: list = []
    if read:
        every = ALL in read
        for path, t in zip(paths, tensors):
            if every or path[0] in read:
                checks += (path, version_of(t))
    if reads_ans:
        checks += ("ans", 0)
    node.checks = tuple(checks)
    node.epoch = INPLACE.count
    node.modified = False
    if WATCHERS:
        notify_created(node)
    if multi:
        for i, o in enumerate(outputs):
            if o.data.dtype.kind in "fc":
                o._requires_grad = True
                o.grad_fn = node
                o._output_nr = i
    else:
        o = outputs[0]
        o._requires_grad = True
        o.grad_fn = node


def _complex_rule(rule: Rule) -> Rule:
    """The rule to record for a call with complex values, or a TypeError if it has none:
    a rule written for real values would give wrong gradients, never a refusal."""
    twin = rule.complex_rule
    if twin is None:
        public = _ufunc_name(rule.fn) if isinstance(rule.fn, np.ufunc) else rule.name
        raise TypeError(
            f"{public} has no complex derivative rule in funcdiff: it cannot be "
            "differentiated with complex arguments or results (the functions that accept "
            "complex values are listed on the supported-functions page). Differentiate "
            "the real and imaginary parts separately (z.real, z.imag), or detach() the input."
        )
    return twin


def _refuse_complex_composite(rule: Rule, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """A composite rule written for real values, called with a complex Tensor that
    requires grad, is refused like a recorded one."""
    tensors = _scan(args, kwargs)[1]
    if _state.grad_enabled and any(t._requires_grad for t in tensors):
        if any(t.data.dtype.kind == "c" for t in tensors):
            _complex_rule(rule)


#: Below this size an argument of a shapes-only rule is kept as it is: a stand-in would
#: free too little to pay for itself.
STAND_IN_MIN_BYTES = 1 << 16


def _stand_in(value: Any) -> Any:
    """For a large array or Tensor, a read-only zero-stride array (Tensor) of its shape
    and dtype, which holds no memory; anything else as it is.

    What a shapes-only rule (``np.sum(y)``) saves for backward: keeping ``y`` itself
    would hold its memory until the backward pass although its values are never read.
    """
    data = value.data if type(value) is Tensor else value
    if type(data) is not np.ndarray or data.nbytes < STAND_IN_MIN_BYTES:
        return value
    shadow = np.broadcast_to(np.zeros((), data.dtype), data.shape)
    return wrap(shadow, False, None, 0) if type(value) is Tensor else shadow


def _stand_ins(args: Sequence[Any], keep: frozenset) -> tuple:
    """``args`` with stand-ins for the large arrays, except at the positions ``keep``
    (indices and other arguments whose values the rule reads)."""
    return tuple(
        a
        if i in keep
        else type(a)(map(_stand_in, a))
        if type(a) in _SEQUENCE_TYPES
        else _stand_in(a)
        for i, a in enumerate(args)
    )


def call_ufunc(ufunc: np.ufunc, *inputs: Any) -> Any:
    """An operator's fast path to its ufunc rule."""
    rule = UFUNC_RULES.get(ufunc)
    if rule is None:
        if _tracing[0]:
            done = tracing.run_instead_foreign(ufunc, inputs, _NO_KWARGS)
            if done is not NotImplemented:
                return done
        if not _needs_gradient(inputs, {}):
            return _run_on_data(ufunc, inputs, {})
        return _missing_rule(_ufunc_name(ufunc))
    return call_positional(rule, inputs)


class _Plan:
    """What every node of one rule needs for one set of differentiated positions.

    Computed once per rule, number of arguments and requires-grad mask, and shared
    by all the nodes recorded that way, so a node holds no per-op bookkeeping tuples.
    """

    __slots__ = (
        "keys",
        "read",
        "reads_ans",
        "vjp",
        "needs",
        "zero_checks",
        "tangent_maps",
        "keep",
        "kept_none",
        "keeps_ans",
    )

    keys: tuple[int, ...]
    read: tuple[int, ...]
    reads_ans: bool
    vjp: Callable | None
    needs: tuple[bool, ...]
    zero_checks: tuple
    tangent_maps: tuple[tuple | None, bool]
    keep: tuple[bool, ...] | None
    kept_none: tuple[None, ...] | None
    keeps_ans: bool


# Positional calls in which no differentiable argument requires grad.
_NOT_RECORDED = _Plan()


def _positional_plan(rule: Rule, key: int, nargs: int, mask: int) -> _Plan:
    keys = []
    for i in range(nargs):
        if not mask >> i & 1:
            continue
        if i in rule.vjps or rule.vjp_all is not None:
            keys.append(i)
        elif i not in rule.nondiff_args:
            _no_derivative(rule, i)
    if not keys:
        plan = _NOT_RECORDED
    else:
        read, reads_ans = rule.checked(tuple(keys))
        plan = _Plan()
        plan.keys = tuple(keys)
        every = ALL in read
        plan.read = tuple(i for i in range(nargs) if every or i in read)
        plan.reads_ans = reads_ans
        single = len(keys) == 1 and rule.vjp_all is None
        plan.vjp = rule.vjps[keys[0]] if single else None
        plan.needs = tuple(i in keys for i in range(nargs))
        plan.zero_checks = _versions((0,) * nargs, plan)
        plan.tangent_maps = rule.tangent_maps(plan.keys)
        # A node keeps only the arguments and output its maps use: the rest (say, x in
        # x + c, or in tanh(x), whose derivative reads the output) can be freed as soon
        # as the program drops them, as torch saves only what a formula needs.
        used, plan.keeps_ans = rule.mentions(tuple(keys))
        keep = tuple(ALL in used or i in used for i in range(nargs))
        plan.keep = None if all(keep) else keep
        # What a node keeps of its arguments when that is none of them, shared.
        plan.kept_none = (None,) * nargs if not any(keep) else None
    rule._positional_plans[key] = plan
    return plan


def call_positional(rule: Rule, inputs: tuple) -> Any:
    """:func:`call` for a ufunc rule (``UFUNC_RULES``) on positional arguments: operators
    and ufunc calls, the hot path of small-array code.

    Anything unusual (Tensor subclasses, sequences, non-array outputs) falls back to
    the general :func:`call`. A ufunc called without ``out=`` returns a fresh array,
    never a view, so no view bookkeeping is needed here.
    """
    if _tracing[0]:
        if any(type(a) in MATRIX_TYPES for a in inputs):
            return matrix_product(rule.fn, "__call__", inputs, _NO_KWARGS)
        return call(rule, inputs)  # the general path reports the operation to a tracer
    nargs = len(inputs)
    if nargs == 2:
        a, b = inputs
        if type(a) is Tensor:
            da = a.data
            mask = 1 if a._requires_grad else 0
        elif type(a) in _SLOW_OPERANDS or isinstance(a, Tensor):
            if type(a) in MATRIX_TYPES:  # np.matmul(A, x), A scipy.sparse
                return matrix_product(rule.fn, "__call__", inputs, _NO_KWARGS)
            return call(rule, inputs)
        else:
            da = a
            mask = 0
        if type(b) is Tensor:
            db = b.data
            if b._requires_grad:
                mask |= 2
        elif type(b) in _SLOW_OPERANDS or isinstance(b, Tensor):
            if type(b) in MATRIX_TYPES:
                return matrix_product(rule.fn, "__call__", inputs, _NO_KWARGS)
            return call(rule, inputs)
        else:
            db = b
        try:
            out = rule.fn(da, db)
        except TypeError as exc:
            out = on_backend(rule.fn, rule.name, (da, db), {}, exc)
    elif nargs == 1:
        a = inputs[0]
        if type(a) is not Tensor:
            return call(rule, inputs)
        da = a.data
        mask = 1 if a._requires_grad else 0
        try:
            out = rule.fn(da)
        except TypeError as exc:
            out = on_backend(rule.fn, rule.name, (da,), {}, exc)
    else:
        datas = []
        mask = 0
        for i, a in enumerate(inputs):
            if type(a) is Tensor:
                datas.append(a.data)
                if a._requires_grad:
                    mask |= 1 << i
            elif type(a) in _SLOW_OPERANDS or isinstance(a, Tensor) or nargs > 8:
                if type(a) in MATRIX_TYPES:
                    return matrix_product(rule.fn, "__call__", inputs, _NO_KWARGS)
                return call(rule, inputs)
            else:
                datas.append(a)
        try:
            out = rule.fn(*datas)
        except TypeError as exc:
            out = on_backend(rule.fn, rule.name, datas, {}, exc)
    if type(out) is not _ndarray:
        if isinstance(out, np.generic):
            out = np.asarray(out)
        elif type(out) not in _FOREIGN_TYPES and not is_foreign(out):  # CuPy: as ndarray
            return call(rule, inputs)
    if not mask or not _state.grad_enabled:
        return wrap(out, False, None, 0)
    if not rule.differentiable:
        if out.dtype.kind == "c" and not rule.complex:
            _complex_rule(rule)  # np.sign is not piecewise constant on complex values
        return wrap(out, False, None, 0)
    dtype = out.dtype
    if dtype is not _FLOAT64 and dtype.kind != "f":
        # a complex result is recorded by call(), which picks the complex rule
        return call(rule, inputs) if dtype.kind == "c" else wrap(out, False, None, 0)
    plan = rule._positional_plans.get(nargs << 8 | mask)
    if plan is None:
        plan = _positional_plan(rule, nargs << 8 | mask, nargs, mask)
    if plan is _NOT_RECORDED:
        return wrap(out, False, None, 0)
    keys = plan.keys
    if len(keys) == 1:
        a = inputs[keys[0]]
        fn = a.grad_fn
        edges: tuple = ((fn, a._output_nr) if fn is not None else a._gradient_edge(),)
    else:
        edge_list = []
        for k in keys:
            a = inputs[k]
            fn = a.grad_fn
            edge_list.append((fn, a._output_nr) if fn is not None else a._gradient_edge())
        edges = tuple(edge_list)
    node = _new_object(PositionalNode)
    node.rule = rule
    node.plan = plan
    node.edges = edges
    node.seq = _next_seq()
    keep = plan.keep
    if keep is None:
        node.args = inputs
    else:
        node.args = plan.kept_none or _kept(inputs, keep)
    node.ans = out if plan.keeps_ans else None
    # Shared (shape, dtype) records for the common shapes: no new tuples per op.
    # Builtin dtypes are singletons, so float64 is found by identity, without hashing.
    if dtype is _FLOAT64 and type(out) is _ndarray:
        meta = _FLOAT64_META.get(out.shape)
        if meta is None:
            meta = _float64_meta(out.shape)
    else:
        meta = ((out.shape, dtype),)
    node.out_meta = meta
    node.pre_hooks = None
    node.retained = None
    node.modified = False
    checks = plan.zero_checks
    epoch = INPLACE.count
    if checks and epoch:
        # Saved versions are 0 until some tensor is modified in place (``epoch``);
        # while they are, the plan's shared tuple of checks serves.
        for i in plan.read:
            a = inputs[i]
            if type(a) is Tensor:
                owner = a._version_owner
                if (owner if owner is not None else a)._version_count:
                    checks = _versions(inputs, plan)
                    break
    node.checks = checks
    node.epoch = epoch
    if WATCHERS:
        notify_created(node)
    return wrap(out, True, node, 0)


def _kept(inputs: tuple, keep: tuple) -> tuple:
    """``inputs`` with None where ``keep`` is False."""
    if len(inputs) == 2:
        a, b = inputs
        return (a if keep[0] else None, b if keep[1] else None)
    return tuple([a if k else None for a, k in zip(inputs, keep)])


def _versions(inputs: tuple, plan: _Plan) -> tuple:
    """The node's checks: the version of each argument the plan reads, and its output."""
    checks: list = []
    for i in plan.read:
        checks += (i, version_of(inputs[i]))
    if plan.reads_ans:
        checks += ("ans", 0)
    return tuple(checks)


_FLOAT64 = _F = np.dtype(np.float64)
_FLOAT64_META: dict[tuple, tuple] = {}
_ndarray = np.ndarray


def _float64_meta(shape: tuple) -> tuple:
    meta = ((shape, _FLOAT64),)
    if len(_FLOAT64_META) < 4096:
        _FLOAT64_META[shape] = meta
    return meta


def _no_derivative(rule: Rule, key: Any) -> None:
    names = rule.arg_names
    if isinstance(key, int) and key < len(names):
        name = names[key]
        public = _ufunc_name(rule.fn) if isinstance(rule.fn, np.ufunc) else rule.name
        differentiable = [n for i, n in enumerate(names) if i in rule.vjps]
        raise NotImplementedError(
            f"{public} is differentiable in {' and '.join(differentiable)}, not in {name}: "
            f"the derivative with respect to {name} has no closed form and no funcdiff rule. "
            f"Pass a constant as {name} ({name}.detach())."
        )
    where = f"argument {key!r}" if isinstance(key, str) else f"argument {key}"
    raise NotImplementedError(
        f"the derivative of {rule.name} with respect to its {where} is not "
        "implemented; pass a constant there (tensor.detach()) or file an issue"
    )


def _ufunc_name(ufunc: np.ufunc) -> str:
    """The public name of the function the user called that ran ``ufunc``.

    ``numpy.sin`` for NumPy's ufuncs, ``scipy.special.spence`` for SciPy's (found by
    identity in ``scipy.special``). SciPy's Python wrappers call private ufuncs
    (``scipy.special.zeta`` runs ``_zeta``): for those the call stack names the
    wrapper. Only the error path calls this.
    """
    name = ufunc.__name__
    if getattr(np, name, None) is ufunc:
        return f"numpy.{name}"
    special = sys.modules.get("scipy.special")
    if special is not None:
        if getattr(special, name, None) is ufunc:
            return f"scipy.special.{name}"
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if frame.f_globals.get("__name__", "").startswith("scipy.special"):
                code = frame.f_code
                public = getattr(special, code.co_name, None)
                if getattr(public, "__code__", None) is code:
                    return f"scipy.special.{code.co_name}"
            frame = frame.f_back
    module = getattr(ufunc, "__module__", None)
    return f"{module}.{name}" if isinstance(module, str) else f"the ufunc {name}"


def _missing_rule(name: str) -> Any:
    raise TypeError(
        f"funcdiff has no derivative rule for {name}, so it cannot run on Tensors without "
        "losing the gradient. Use supported functions, or call it on tensor.detach() "
        "if no gradient is needed through it."
    )


# NumPy functions that only look at metadata: answered on the data, never recorded.
_METADATA_FUNCTIONS = {
    np.shape,
    np.ndim,
    np.size,
    np.result_type,
    np.iscomplexobj,
    np.isrealobj,
    np.may_share_memory,
    np.shares_memory,
    np.min_scalar_type,
    np.can_cast,
}


#: Matrix classes (scipy.sparse, funcdiff.sparse.csr_array) whose own operators take a
#: Tensor: a ufunc given one of them hands it to :func:`matrix_product` (registered by
#: their hand-over; NumPy would take such a matrix for a 0-d object array).
MATRIX_TYPES: set[type] = set()
#: Operand types that leave :func:`call_positional`'s lean path: sequences and the
#: matrix classes (one set lookup for both on the path of ndarray and scalar operands).
_SLOW_OPERANDS: set[type] = {list, tuple}


def register_matrix_type(cls: type) -> None:
    """Hand ufunc calls with a ``cls`` operand to :func:`matrix_product`."""
    MATRIX_TYPES.add(cls)
    _SLOW_OPERANDS.add(cls)


def matrix_product(func: Any, method: str, args: Sequence[Any], kwargs: dict) -> Any:
    """A NumPy function or ufunc (``method`` ``"__call__"``, or a ufunc method) called
    with a sparse matrix and a Tensor: ``np.dot`` and ``np.matmul`` are the matrix's own
    product (``A.dot(x)``, ``A @ x``, ``x @ A``), which records the sparse product; any
    other call refuses, naming it (NumPy itself would compute an object array of
    matrices, or fail inside)."""
    name = f"numpy.{getattr(func, '__name__', func)}"
    if method != "__call__":
        name += f".{method}"
    matmul = func is np.matmul or func is getattr(np.linalg, "matmul", None)
    if (func is np.dot or matmul) and method == "__call__" and len(args) == 2 and not kwargs:
        a, b = args
        if isinstance(b, Tensor) and not isinstance(a, Tensor):
            return a @ b if matmul or not hasattr(a, "dot") else a.dot(b)
        if isinstance(a, Tensor) and not isinstance(b, Tensor):
            if a.ndim == 0:  # np.dot(t, A) scales A: a sparse matrix of Tensors
                return b.dot(a) if hasattr(b, "dot") else b @ a  # refuses, naming it
            return a @ b  # a 2-d matrix: dot and matmul agree
    raise TypeError(
        f"{name} does not take a scipy.sparse matrix together with a Tensor (NumPy would "
        "treat the matrix as a 0-d object array): write a product with the operator, "
        "A @ x or x @ A, or use A.toarray() for a dense matrix"
    )


def array_function(func: Any, args: tuple, kwargs: dict) -> Any:
    """``Tensor.__array_function__``: route a NumPy function call to its rule."""
    rule = FUNCTION_RULES.get(func)
    if rule is not None:
        return call(rule, args, kwargs)
    if _tracing[0]:
        done = tracing.run_instead_foreign(func, args, kwargs)
        if done is not NotImplemented:
            return done
    if func in _METADATA_FUNCTIONS:
        # Shapes and dtypes only: fixed for a given input signature, never a guard.
        return func(*(_data_of(a) for a in args), **{k: _data_of(v) for k, v in kwargs.items()})
    if not _needs_gradient(args, kwargs):
        return _run_on_data(func, args, kwargs)
    module = getattr(func, "__module__", "numpy") or "numpy"
    module = "numpy" if module.startswith("numpy") and module.count(".") <= 1 else module
    return _missing_rule(f"{module}.{getattr(func, '__name__', func)}")


def _needs_gradient(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a call would have to record: grad mode on and a Tensor requires grad."""
    return _state.grad_enabled and any(t._requires_grad for t in _scan(args, kwargs)[1])


def on_backend(
    fn: Any, name: str, args: Sequence[Any], kwargs: dict[str, Any], exc: Exception
) -> Any:
    """A forward that raised TypeError: re-raise it unless a backend array (CuPy) is
    among ``args``; then run a ``scipy.special`` ufunc as the backend's own function
    (:func:`funcdiff._core.backends.special_module`), or raise the TypeError that names
    the function and the array type. Only the error path comes here."""
    found = first_foreign((*args, *kwargs.values()))
    if found is None:
        raise exc
    name_ = getattr(fn, "__name__", "")
    scipy_ufunc = isinstance(fn, np.ufunc) and getattr(np, name_, None) is not fn
    if scipy_ufunc or getattr(fn, "__module__", "").startswith("scipy.special"):
        special = special_module(found)  # SciPy's private ufuncs (_zeta) by public name
        own = getattr(special, name_, None) or getattr(special, name_.lstrip("_"), None)
        if own is not None:
            return own(*args, **kwargs)
    public = _ufunc_name(fn) if isinstance(fn, np.ufunc) else name
    values = [a for a in (*args, *kwargs.values()) if getattr(a, "dtype", _F).kind not in "iub"]
    check_same_kind(public, values)  # host values (not indices) with device ones: say so
    raise unsupported(public, found, exc) from None


def _run_on_data(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """Run a function that has no rule on the Tensors' data: no gradient can be lost
    when none of them requires grad, so the results are simply constant Tensors."""
    out = func(*(_data_of(a) for a in args), **{k: _data_of(v) for k, v in kwargs.items()})
    result, outputs = _wrap_outputs(out, ())
    tracer = _current_tracer()
    if tracer is not None:
        tracer.foreign(func, args, kwargs, outputs)
    return result


def getitem(t: Tensor, index: Any) -> Tensor:
    """``t[index]``: basic, advanced and boolean indexing."""
    return call(NAMED_RULES["getitem"], (t, index))


def astype(t: Tensor, dtype: Any) -> Tensor:
    """``t.astype(dtype)``; the gradient is cast back to ``t``'s dtype."""
    return call(NAMED_RULES["astype"], (t, np.dtype(dtype)))
