"""Batched values: one array that stands for a batch of examples, for ``vmap``.

A :class:`Batched` holds a *physical* array whose axis 0 runs over the examples, and
the :class:`Level` (one ``vmap`` call) it belongs to. It reports the *logical* shape,
that of one example, so the mapped function's code (``x.shape``, ``len(x)``, ``x.T``,
``x.reshape(n, -1)``) sees one example. NumPy calls on it reach
``__array_ufunc__``/``__array_function__``, which find the rule of the function in the
rule table and run its batching rule (:mod:`funcdiff.rules.batching`) on the physical
arrays; a function without one runs once per example and warns once per ``vmap`` call.

Nested ``vmap`` calls give values of several levels, the inner level wrapping the outer
one's values. An operation acts on the highest level among its arguments first: it
unwraps that level's values, treats everything else as unbatched, and the NumPy calls
of the batching rule reach the levels below. A funcdiff Tensor among the arguments
takes precedence: its rule runs on the Tensor's data, which may be batched (``grad``
inside ``vmap`` records one graph for the whole batch).
"""

from __future__ import annotations

import itertools
import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff._core.arrays import settled
from funcdiff._core.registry import FUNCTION_RULES, UFUNC_RULES, Rule, batch_ndim
from funcdiff._core.tensor import Tensor
from funcdiff.ops.dispatch import call, register_array_type
from funcdiff.rules import batching
from funcdiff.rules.structure import SELECT

__all__ = [
    "Batched",
    "Level",
    "BatchedConversionError",
    "VmapFallbackWarning",
    "run_rule",
    "enter",
    "leave",
]

_IDS = itertools.count(1)


class BatchedConversionError(RuntimeError):
    """A batched value was converted to a Python value or an ndarray inside ``vmap``."""


class VmapFallbackWarning(UserWarning):
    """A function without a batching rule ran once per example inside ``vmap``."""


class Level:
    """One ``vmap`` call: its batch size, its order among nested calls (``index``:
    inner calls have higher ones) and the names of functions that already warned."""

    __slots__ = ("size", "index", "warned", "active")

    def __init__(self, size: int, warned: set[str] | None = None) -> None:
        self.size = size
        self.index = next(_IDS)
        # Shared by the chunks of one call: each function warns once per vmap call.
        self.warned: set[str] = set() if warned is None else warned
        #: True while the vmap call runs; a cotangent of a returned call that reaches a
        #: shared value is summed over the batch (see ``funcdiff._core.arrays.settled``).
        self.active = True


_ARRAY_LIKE = (np.ndarray, np.generic, Tensor)


def _conversion(what: str) -> BatchedConversionError:
    return BatchedConversionError(
        f"{what} of a batched value inside vmap: the value differs between the examples "
        "of the batch, so it has no single Python value (data-dependent control flow). "
        "Use np.where to choose per example, or pass the argument with in_dims=None if "
        "it is the same for every example."
    )


def _rebuild(like: Any, items: list) -> Any:
    make = getattr(type(like), "_make", None)
    return make(items) if make is not None else type(like)(items)


class LogicalShape(tuple):
    """The shape of one example of a batched value, with the levels it is batched in."""

    levels: tuple[Level, ...]

    def __new__(cls, dims: Any, levels: tuple[Level, ...]) -> LogicalShape:
        new = super().__new__(cls, dims)
        new.levels = levels
        return new

    def zeros(self, dtype: Any) -> Any:
        """Zeros of this shape, batched in the same levels."""
        out: Any = np.zeros(tuple(lv.size for lv in reversed(self.levels)) + tuple(self), dtype)
        for lv in reversed(self.levels):
            out = Batched(out, lv)
        return out


class Batched:
    """A batch of arrays: ``value`` holds the examples along axis 0."""

    __slots__ = ("value", "level")

    def __init__(self, value: Any, level: Level) -> None:
        self.value = value
        self.level = level

    # ---------------------------------------------------------------- metadata
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one example (a tuple that also records the levels it is
        batched in, for the derivatives: ``funcdiff._core.arrays.settled``)."""
        inner = self.value.shape
        return LogicalShape(inner[1:], (self.level, *getattr(inner, "levels", ())))

    @property
    def ndim(self) -> int:
        return len(self.value.shape) - 1

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def nbytes(self) -> int:
        return int(self.value.nbytes)

    @property
    def itemsize(self) -> int:
        return int(self.dtype.itemsize)

    @property
    def base(self) -> None:
        # Not a view that funcdiff tracks: writes into it are writes into its own batch.
        return None

    def __len__(self) -> int:
        shape = self.value.shape
        if len(shape) < 2:
            raise TypeError("len() of a 0-d batched value")
        return int(shape[1])

    def __repr__(self) -> str:
        return f"Batched(size={self.level.size}, shape={self.shape}, dtype={self.dtype})"

    # ---------------------------------------------------------------- conversions
    def __bool__(self) -> bool:
        raise _conversion("bool() (an if or while)")

    def __float__(self) -> float:
        raise _conversion("float()")

    def __int__(self) -> int:
        raise _conversion("int()")

    def __index__(self) -> int:
        raise _conversion("use as an index")

    def __complex__(self) -> complex:
        raise _conversion("complex()")

    def item(self, *args: Any) -> Any:
        raise _conversion(".item()")

    def tolist(self) -> Any:
        raise _conversion(".tolist()")

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        raise _conversion("conversion to an ndarray (np.asarray, or a write into an ndarray)")

    def settle(self, owner: Any, shape: Any) -> Any:
        """``owner`` (this value, or a Tensor holding it) as the cotangent of a value of
        shape ``shape``: summed over the batch when the value was shared by the examples
        of a vmap call that has returned, else itself."""
        if self.level.active or self.level in getattr(shape, "levels", ()):
            return owner
        if isinstance(owner, Tensor):
            total = np.sum(leave(owner, self.level, 0), axis=0)
        else:
            total = np.sum(self.value, axis=0)
        return settled(total, shape)

    def whole_batch(self) -> Any:
        """The physical array, for a rule's test that must hold in every example
        (``funcdiff._core.tensor.everywhere``); never a value of one example."""
        return self.value

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    # ---------------------------------------------------------------- NumPy protocols
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if _has_tensor(inputs, kwargs):
            return NotImplemented
        out = kwargs.pop("out", None)
        if method != "__call__":
            func = _UFUNC_METHODS.get((ufunc.__name__, method))
            if func is not None and len(inputs) == 1 and out is None:
                kwargs.setdefault("axis", 0)
                return _dispatch(func, FUNCTION_RULES.get(func), inputs, kwargs)
            result = _dispatch(getattr(ufunc, method), None, inputs, kwargs)
        else:
            rule = UFUNC_RULES.get(ufunc)
            if rule is None:
                rule = _ufunc_rule(ufunc)
            result = _dispatch(ufunc, rule, inputs, kwargs)
        if out is None:
            return result
        return _write_out(out, result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if _has_tensor(args, kwargs):
            return NotImplemented
        meta = _METADATA.get(func)
        if meta is not None:
            return meta(*args, **kwargs)
        if func in _WRITES_INTO_FIRST:
            _check_destination(func, args, kwargs)
        return _dispatch(func, FUNCTION_RULES.get(func), args, kwargs)

    # ---------------------------------------------------------------- indexing
    def __getitem__(self, index: Any) -> Any:
        return _getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        _setitem(self, index, value)

    # ---------------------------------------------------------------- methods
    @property
    def T(self) -> Any:
        return np.transpose(self)

    @property
    def mT(self) -> Any:
        return np.matrix_transpose(self)

    @property
    def real(self) -> Any:
        return np.real(self)

    @property
    def imag(self) -> Any:
        return np.imag(self)

    def reshape(self, *shape: Any, order: str = "C") -> Any:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return np.reshape(self, shape, order=order)  # type: ignore[call-overload]

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return np.transpose(self, axes or None)

    def astype(self, dtype: Any, copy: bool = True) -> Any:
        return Batched(self.value.astype(dtype), self.level)

    def copy(self) -> Any:
        return np.copy(self)

    def conj(self) -> Any:
        return np.conj(self)

    conjugate = conj

    def flatten(self) -> Any:
        return np.reshape(self, (-1,))

    ravel = flatten

    def squeeze(self, axis: Any = None) -> Any:
        return np.squeeze(self, axis=axis)

    def swapaxes(self, a: int, b: int) -> Any:
        return np.swapaxes(self, a, b)

    def dot(self, other: Any) -> Any:
        return np.dot(self, other)

    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        return np.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        return np.mean(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.prod(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Any:
        return np.min(self, axis=axis, keepdims=keepdims)

    def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
        return np.var(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
        return np.std(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def cumsum(self, axis: Any = None) -> Any:
        return np.cumsum(self, axis=axis)

    def argmax(self, axis: Any = None) -> Any:
        return np.argmax(self, axis=axis)

    def argmin(self, axis: Any = None) -> Any:
        return np.argmin(self, axis=axis)

    def any(self, axis: Any = None) -> Any:
        return np.any(self, axis=axis)

    def all(self, axis: Any = None) -> Any:
        return np.all(self, axis=axis)

    def clip(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002
        return np.clip(self, min, max)


def _binary(ufunc: np.ufunc) -> tuple[Callable, Callable]:
    def forward(self: Any, other: Any) -> Any:
        return ufunc(self, other)

    def reflected(self: Any, other: Any) -> Any:
        return ufunc(other, self)

    return forward, reflected


_OPERATORS: tuple[tuple[str, Any, bool], ...] = (
    ("add", np.add, True),
    ("sub", np.subtract, True),
    ("mul", np.multiply, True),
    ("truediv", np.true_divide, True),
    ("floordiv", np.floor_divide, True),
    ("mod", np.remainder, True),
    ("pow", np.power, True),
    ("matmul", np.matmul, True),
    ("and", np.bitwise_and, True),
    ("or", np.bitwise_or, True),
    ("xor", np.bitwise_xor, True),
    ("lt", np.less, False),
    ("le", np.less_equal, False),
    ("gt", np.greater, False),
    ("ge", np.greater_equal, False),
    ("eq", np.equal, False),
    ("ne", np.not_equal, False),
)
for _name, _op, _reflect in _OPERATORS:
    _fwd, _ref = _binary(_op)
    setattr(Batched, f"__{_name}__", _fwd)
    if _reflect:
        setattr(Batched, f"__r{_name}__", _ref)

_UNARY: tuple[tuple[str, Any], ...] = (
    ("neg", np.negative),
    ("pos", np.positive),
    ("abs", np.absolute),
    ("invert", np.invert),
)
for _name, _op in _UNARY:
    setattr(Batched, f"__{_name}__", lambda self, _u=_op: _u(self))
Batched.__hash__ = None  # type: ignore[assignment]
# A rule run on a Tensor whose data is batched returns a Batched: it becomes a Tensor.
register_array_type(Batched)


# ---------------------------------------------------------------- dispatch
_UFUNC_METHODS = {
    ("add", "reduce"): np.sum,
    ("multiply", "reduce"): np.prod,
    ("maximum", "reduce"): np.max,
    ("minimum", "reduce"): np.min,
    ("add", "accumulate"): np.cumsum,
    ("multiply", "accumulate"): np.cumprod,
}

_SYNTHETIC: dict[Any, Rule] = {}


def _ufunc_rule(ufunc: np.ufunc) -> Rule:
    """A rule for a ufunc that has no derivative rule: elementwise all the same."""
    rule = _SYNTHETIC.get(ufunc)
    if rule is None:
        rule = _SYNTHETIC[ufunc] = Rule(ufunc.__name__, ufunc, differentiable=False)
    return rule


def _has_tensor(args: Any, kwargs: dict) -> bool:
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            return True
        if type(a) in (list, tuple) and any(isinstance(i, Tensor) for i in a):
            return True
    return False


def _top_level(args: Any, kwargs: dict) -> Level | None:
    top: Level | None = None
    for a in (*args, *kwargs.values()):
        items = a if type(a) in (list, tuple) else (a,)
        for item in items:
            if isinstance(item, Batched) and (top is None or item.level.index > top.index):
                top = item.level
    return top


def _unwrap(a: Any, level: Level) -> tuple[Any, Any]:
    """``a`` with this level's batched values replaced by their physical arrays, and
    its flag (bool, or a tuple of bools for a list or tuple)."""
    if isinstance(a, Batched):
        return (a.value, True) if a.level is level else (a, False)
    if type(a) in (list, tuple):
        pairs = [_unwrap(i, level) for i in a]
        flags = tuple(f for _, f in pairs)
        if any(flags):
            return type(a)(v for v, _ in pairs), flags
    return a, False


def _wrap(x: Any, level: Level) -> Any:
    if isinstance(x, (tuple, list)):
        return _rebuild(x, [_wrap(i, level) for i in x])
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return Batched(x, level)
    return x


def _name_of(func: Any) -> str:
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    module = getattr(func, "__module__", None)
    if isinstance(func, np.ufunc):
        module = "numpy" if getattr(np, func.__name__, None) is func else "ufunc"
        name = func.__name__
    elif isinstance(module, str) and module.startswith("numpy"):
        module = "numpy" if module.count(".") <= 1 else module.replace("._", ".")
    return f"{module}.{name}" if module else str(name)


def _dispatch(func: Any, rule: Rule | None, args: Any, kwargs: dict) -> Any:
    level = _top_level(args, kwargs)
    if level is None:  # only batched values of other levels inside lists: plain call
        return func(*args, **kwargs)
    if rule is not None and any(
        isinstance(v, Batched) and v.level is level for v in kwargs.values()
    ):
        rule = None
    if rule is not None:
        batch = batching.default_batch(rule)
        if batch is None:  # a composite: it runs on the batched values themselves
            try:
                return rule.impl(*args, **kwargs)  # type: ignore[misc]
            except BatchedConversionError:
                return _loop(func, args, kwargs, level)
        pairs = [_unwrap(a, level) for a in args]
        physical = tuple(v for v, _ in pairs)
        flags = tuple(f for _, f in pairs)
        try:
            result = batch(rule, physical, kwargs, flags, level.size)
        except NotImplementedError:
            # The rule refuses these options (they have no derivative rule: np.pad's
            # other modes); NumPy itself runs them, one example at a time.
            result = NotImplemented
        if result is not NotImplemented:
            return _wrap(result, level)
    return _loop(func, args, kwargs, level)


def run_rule(rule: Rule, func: Callable, args: tuple, kwargs: dict) -> Any:
    """``func(*args, **kwargs)``, the function ``rule`` is registered for, run through
    the rule's batching rule when an argument is batched: the way in for functions that
    do not dispatch to NumPy's protocols (SciPy's)."""
    return _dispatch(func, rule, args, kwargs)


def _example(a: Any, level: Level, b: int) -> Any:
    if isinstance(a, Batched):
        return a.value[b] if a.level is level else a
    if type(a) in (list, tuple):
        return type(a)(_example(i, level, b) for i in a)
    if type(a) is dict:
        return {k: _example(v, level, b) for k, v in a.items()}
    return a


def _stack(results: list) -> Any:
    first = results[0]
    if isinstance(first, (tuple, list)):
        return _rebuild(first, [_stack([r[i] for r in results]) for i in range(len(first))])
    if first is None:
        return None
    return np.stack(results)


def _loop(func: Any, args: Any, kwargs: dict, level: Level) -> Any:
    """Run ``func`` once per example and stack the results (warns once per level)."""
    name = _name_of(func)
    if level.size == 0:
        raise ValueError(
            f"vmap: {name} has no batching rule and the batch is empty: there is no "
            "example to run it on to learn the shape of its result"
        )
    if name not in level.warned:
        level.warned.add(name)
        warnings.warn(
            f"vmap: {name} has no batching rule, so it runs once per example "
            f"({level.size} calls) and its results are stacked; this is slow",
            VmapFallbackWarning,
            stacklevel=4,
        )
    results = [
        func(*_example(args, level, b), **_example(kwargs, level, b)) for b in range(level.size)
    ]
    return _wrap(_stack(results), level)


# ---------------------------------------------------------------- metadata functions
def _logical(x: Any) -> Any:
    return np.empty(np.shape(x), dtype=x.dtype) if isinstance(x, Batched) else x


def _physical(x: Any) -> Any:
    while isinstance(x, Batched):
        x = x.value
    return x


_METADATA: dict[Any, Callable] = {
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.result_type: lambda *a: np.result_type(*(_physical(x) for x in a)),
    np.iscomplexobj: lambda a: np.iscomplexobj(_physical(a)),
    np.isrealobj: lambda a: np.isrealobj(_physical(a)),
    np.min_scalar_type: lambda a: np.min_scalar_type(_logical(a)),
    np.may_share_memory: lambda a, b, *r: np.may_share_memory(_physical(a), _physical(b)),
    np.shares_memory: lambda a, b, *r: np.shares_memory(_physical(a), _physical(b)),
    # A Tensor holding a batched value prints it as such (never one example's numbers).
    np.array2string: lambda a, *r, **k: repr(a),
    np.array_repr: lambda a, *r, **k: repr(a),
    np.array_str: lambda a, *r, **k: repr(a),
}


# NumPy functions that write into their first argument: each example would overwrite an
# unbatched destination with its own values (the loop would keep the last one).
_WRITES_INTO_FIRST = {
    np.copyto,
    np.put,
    np.place,
    np.putmask,
    np.fill_diagonal,
    np.put_along_axis,
}


def _check_destination(func: Any, args: Any, kwargs: dict) -> None:
    level = _top_level(args, kwargs)
    target = args[0] if args else None
    if level is not None and not (isinstance(target, Batched) and target.level is level):
        raise _in_place(f"{_name_of(func)}(destination, ...)")


def _in_place(what: str) -> BatchedConversionError:
    return BatchedConversionError(
        f"vmap: an in-place write of a batched value into an unbatched array ({what}): "
        "each example would overwrite it. Make the buffer from a batched value "
        "(np.zeros_like(x)) or return a new array"
    )


# ---------------------------------------------------------------- indexing and writes
def _is_basic(index: tuple) -> bool:
    return all(
        i is None
        or i is Ellipsis
        or isinstance(i, (slice, int, np.integer))
        and not isinstance(i, bool)
        for i in index
    )


def _getitem(x: Batched, index: Any) -> Any:
    index = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, Batched) for i in index):
        return _loop(operator.getitem, (x, index), {}, _top_level(index + (x,), {}))  # type: ignore[arg-type]
    physical = x.value[(slice(None), *index)]
    if not _is_basic(index):
        # NumPy puts the axes of advanced indices separated by a slice first, in front
        # of the batch axis: bring the batch back to axis 0.
        if _separated(index):
            physical = np.moveaxis(physical, _advanced_ndim(index), 0)
    return Batched(physical, x.level)


def _advanced_ndim(index: tuple) -> int:
    """The rank of the broadcast advanced indices of ``index``."""
    arrays = [
        np.asarray(i) for i in index if not (i is None or i is Ellipsis or isinstance(i, slice))
    ]
    shapes = [a.shape if a.dtype != bool else (int(a.sum()),) for a in arrays]
    return len(np.broadcast_shapes(*shapes))


def _separated(index: tuple) -> bool:
    """Whether NumPy moves the axes of the advanced indices of ``index`` to the front
    (they are separated by a slice, an Ellipsis or None), in front of the batch axis."""
    advanced = [
        k for k, i in enumerate(index) if not (i is None or i is Ellipsis or isinstance(i, slice))
    ]
    return bool(advanced) and advanced[-1] - advanced[0] + 1 != len(advanced)


def _setitem(x: Batched, index: Any, value: Any) -> None:
    index = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, Batched) for i in index):
        raise BatchedConversionError(
            "vmap: a write at a batched index (one that differs between the examples) is "
            "not supported; build the result with np.where or a gather instead"
        )
    where = (slice(None), *index)
    region = np.shape(x.value[where])
    moved = 0 if _is_basic(index) or not _separated(index) else _advanced_ndim(index)
    if isinstance(value, Batched) and value.level is x.level:
        phys = value.value
        missing = len(region) - len(np.shape(phys))
        if missing > 0:
            shape = np.shape(phys)
            phys = np.reshape(phys, (shape[0],) + (1,) * missing + tuple(shape[1:]))
        x.value[where] = np.moveaxis(phys, 0, moved) if moved else phys
    elif moved:  # the same for every example: a length-one batch axis where NumPy puts it
        logical = len(region) - 1
        value = np.reshape(value, (1,) * (logical - np.ndim(value)) + np.shape(value))
        x.value[where] = np.expand_dims(value, moved)
    else:
        x.value[where] = value


def _write_out(out: Any, result: Any) -> Any:
    targets = out if isinstance(out, tuple) else (out,)
    results = result if isinstance(result, tuple) else (result,)
    for target, r in zip(targets, results):
        if not isinstance(target, Batched):
            raise _in_place("out=, or an augmented assignment such as out += x")
        target[...] = r
    return out if isinstance(out, tuple) and len(out) > 1 else targets[0]


# ---------------------------------------------------------------- Tensors in and out
# A Tensor mapped by vmap becomes a Tensor whose data is batched, and a Tensor result
# whose data is batched becomes a Tensor of the stacked results, through two recorded
# operations: the derivatives of a vmapped function (grad(vmap(f))) flow through them.
def _enter(x: Any, level: Level, dim: int) -> Batched:
    return Batched(x if dim == 0 else np.moveaxis(x, dim, 0), level)


def _enter_vjp(g: Any, ans: Any, x: Any, level: Level, dim: int) -> Any:
    rows = batch_ndim(g, ans)
    if isinstance(g, Batched) and g.level is level:
        return np.moveaxis(g.value, 0, rows + dim)
    return np.expand_dims(g, rows + dim)  # the same for every example: broadcast


def _enter_jvp(t: Any, ans: Any, x: Any, level: Level, dim: int) -> Any:
    return Batched(np.moveaxis(t, batch_ndim(t, x) + dim, 0), level)


def _leave(x: Any, level: Level, dim: int) -> Any:
    if not (isinstance(x, Batched) and x.level is level):  # the same for every example
        x = np.broadcast_to(np.expand_dims(x, 0), (level.size, *np.shape(x)))
        return x if dim == 0 else np.moveaxis(x, 0, dim)
    return x.value if dim == 0 else np.moveaxis(x.value, 0, dim)


def _leave_vjp(g: Any, ans: Any, x: Any, level: Level, dim: int) -> Any:
    return Batched(np.moveaxis(g, batch_ndim(g, ans) + dim, 0), level)


def _leave_jvp(t: Any, ans: Any, x: Any, level: Level, dim: int) -> Any:
    rows = batch_ndim(t, x)
    if isinstance(t, Batched) and t.level is level:
        return np.moveaxis(t.value, 0, rows + dim)
    return np.expand_dims(t, rows + dim)


_ENTER = Rule(
    "vmap_in",
    _enter,
    vjps={0: _enter_vjp},
    jvps={0: _enter_jvp},
    nondiff_args=frozenset({1, 2, "level", "dim"}),
    structure=SELECT,
)
_LEAVE = Rule(
    "vmap_out",
    _leave,
    vjps={0: _leave_vjp},
    jvps={0: _leave_jvp},
    nondiff_args=frozenset({1, 2, "level", "dim"}),
    structure=SELECT,
)


def enter(x: Any, level: Level, dim: int) -> Any:
    """``x`` mapped along ``dim`` at ``level``: a batched value, or for a Tensor a
    Tensor whose data is one (recorded, so derivatives flow back to ``x``)."""
    if isinstance(x, Tensor):
        if not x.requires_grad:
            return Tensor(_enter(x.data, level, dim))
        return call(_ENTER, (x, level, dim))
    return _enter(x, level, dim)


def leave(x: Any, level: Level, dim: int) -> Any:
    """The results of every example of ``x`` stacked along ``dim`` (broadcast when ``x``
    does not depend on the batch): an array, or a Tensor for a Tensor."""
    if isinstance(x, Tensor) and x.requires_grad:
        return call(_LEAVE, (x, level, dim))
    if isinstance(x, Tensor):
        return Tensor(_leave(x.data, level, dim))
    return _leave(x, level, dim)
