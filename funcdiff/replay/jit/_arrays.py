"""NumPy calls on traced JAX arrays: the lowering of one recorded instruction.

A replayed instruction is a NumPy call (a ufunc, a function of NumPy's namespace, or a
rule's own Python function made of such calls). Its JAX version is derived, not
declared: the slot values are wrapped in :class:`Traced`, which answers NumPy's
dispatch protocols (``__array_ufunc__``, ``__array_function__``, the operators and
indexing) with the ``jax.numpy`` function of the same name. Anything without a
namesake, a conversion to an ndarray or a Python value, an in-place write or a
keyword the JAX function does not take raises :class:`Unsupported`, and the
instruction stays a NumPy call. The few NumPy functions whose namesake XLA runs slowly,
or which lack NumPy's default, have their own lowering in :data:`_LOWERINGS`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Traced", "Unsupported", "call", "constant", "scatter_add", "structured", "unwrap"]


class Unsupported(Exception):
    """This call has no JAX lowering; it stays a NumPy call."""


def _jax_numpy() -> Any:
    import jax.numpy as jnp

    return jnp


def _is_jax(value: Any) -> bool:
    import jax

    return isinstance(value, jax.Array)


def wrap(value: Any) -> Any:
    """JAX arrays (also inside tuples and lists) as :class:`Traced`."""
    if type(value) in (tuple, list):
        return type(value)(wrap(v) for v in value)
    if _is_jax(value):
        return Traced(value)
    return value


def unwrap(value: Any) -> Any:
    """:class:`Traced` values (also inside tuples, lists, dicts) as JAX arrays."""
    if type(value) is Traced:
        return value.a
    if type(value) in (tuple, list):
        return type(value)(unwrap(v) for v in value)
    if type(value) is dict:
        return {k: unwrap(v) for k, v in value.items()}
    return value


@functools.cache
def _namesake(func: Any) -> Any:
    """The ``jax.numpy`` function of a NumPy function's name, or None."""
    name = getattr(func, "__name__", None)
    if name is None or getattr(np, name, None) is not func:
        return None  # not NumPy's own (np.linalg, SciPy, a user's function)
    return getattr(_jax_numpy(), name, None)


_NO_DEFAULT = object()


@functools.cache
def _parameters(func: Any) -> tuple[frozenset[str] | None, dict[str, Any]]:
    """The keyword names a function takes (None: any) and its keyword defaults."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None, {}
    names = set()
    defaults = {}
    for p in sig.parameters.values():
        if p.kind == p.VAR_KEYWORD:
            return None, {}
        names.add(p.name)
        defaults[p.name] = p.default if p.default is not p.empty else _NO_DEFAULT
    return frozenset(names), defaults


def _keywords(numpy_func: Any, jax_func: Any, kwargs: dict) -> dict:
    """``kwargs`` for the JAX function: keywords it does not take are dropped when
    they hold NumPy's default (``casting="same_kind"`` of ``concatenate``, say)."""
    accepted, _ = _parameters(jax_func)
    if accepted is None:
        return kwargs
    _, defaults = _parameters(numpy_func)
    out = {}
    for key, value in kwargs.items():
        if key in accepted:
            out[key] = value
            continue
        default = defaults.get(key, _NO_DEFAULT)
        if value is None or (default is not _NO_DEFAULT and _same(value, default)):
            continue
        raise Unsupported(f"{getattr(numpy_func, '__name__', numpy_func)}({key}=...)")
    return out


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001  (an array compared with a default: not the same)
        return False


def _ufunc(ufunc: Any, inputs: tuple, kwargs: dict) -> Any:
    if kwargs.get("out") is not None or kwargs.get("where", True) is not True:
        raise Unsupported(f"{ufunc.__name__} with out= or where=")
    kwargs = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
    jax_func = _namesake(ufunc)
    if jax_func is None:
        raise Unsupported(f"ufunc {ufunc.__name__}")
    if ufunc is np.power and not kwargs and len(inputs) == 2:
        exponent = inputs[1]
        if isinstance(exponent, (int, float, np.integer, np.floating)) and not isinstance(
            exponent, bool
        ):
            e = float(exponent)
            if e == int(e) and abs(e) <= 4 and type(inputs[0]) is Traced:
                # x ** 2.0 as x * x (NumPy's own fast path), not XLA's general pow.
                from jax import lax

                return Traced(lax.integer_pow(inputs[0].a, int(e)))
    if kwargs:
        kwargs = _keywords(ufunc, jax_func, kwargs)
    return wrap(jax_func(*unwrap(inputs), **unwrap(kwargs)))


def _roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """``np.roll`` as a gather at wrapped indices.

    ``jax.numpy.roll`` concatenates two slices; inside a fused loop XLA computes a
    concatenation element by element with a branch on the index, which does not
    vectorise. A gather at ``(i - shift) % n`` fuses into straight loads: the replayed
    sparse Brusselator Jacobian's kernel (rolls of its (colours, N) tangents) runs in
    0.6x the time. The indices are in bounds, and ``mode="clip"`` says so cheaply
    (XLA's checks for the other modes cost more than the concatenation).
    """
    jnp = _jax_numpy()
    if axis is None:
        return _roll(jnp.ravel(a), shift, 0).reshape(jnp.shape(a))
    shifts = shift if isinstance(shift, (tuple, list)) else None
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if shifts is None:
        shifts = (shift,) * len(axes)
    if len(shifts) != len(axes) or not all(
        isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in shifts
    ):
        return jnp.roll(a, shift, axis)  # traced shifts or NumPy's error, as JAX has them
    total: dict[int, int] = {}
    for k, ax in zip(shifts, axes):
        ax = int(ax) + a.ndim if int(ax) < 0 else int(ax)
        if not 0 <= ax < a.ndim:
            return jnp.roll(a, shift, axis)
        total[ax] = total.get(ax, 0) + int(k)
    for ax, k in total.items():
        n = a.shape[ax]
        if n and k % n:
            a = jnp.take(a, (jnp.arange(n) - k % n) % n, axis=ax, mode="clip")
    return a


def _take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: Any = None) -> Any:
    """``np.take``, whose default ``mode="raise"`` JAX does not have.

    Inside a kernel an index array is a constant of the program: an instruction
    reading an integer value computed at run time stays a NumPy call. The recording
    ran NumPy's bounds check on that constant and the shapes are fixed, so its indices
    stay in bounds; negative ones are wrapped once, as NumPy does, and the gather is
    told they are in bounds (``mode="clip"``: the cheapest form XLA has, see
    :func:`_roll`).
    """
    jnp = _jax_numpy()
    if out is not None:
        raise Unsupported("take with out=")
    if mode not in (None, "raise"):
        return jnp.take(a, indices, axis=axis, mode=mode)
    if _is_jax(indices):
        if not jnp.issubdtype(indices.dtype, jnp.integer):
            raise Unsupported(f"take at {indices.dtype} indices")
    else:
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":
            raise Unsupported(f"take at {indices.dtype} indices")
    n = jnp.size(a) if axis is None else jnp.shape(a)[axis]
    if not _is_jax(indices):
        # A constant of the kernel, read from memory at every call: wrapped here, and
        # 32-bit where that holds every index (a sparse Jacobian's gather of 800,000
        # entries reads half as many bytes).
        indices = np.where(indices < 0, indices + n, indices)
        if n <= np.iinfo(np.int32).max:
            indices = indices.astype(np.int32)
        return jnp.take(a, indices, axis=axis, mode="clip")
    return jnp.take(a, jnp.where(indices < 0, indices + n, indices), axis=axis, mode="clip")


#: Arrays with at least this many elements are summed whole in rows of
#: :data:`SUM_ROW` elements (see :func:`_sum`).
ROW_SUM_SIZE = 4096
SUM_ROW = 32


def _sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, **rest: Any) -> Any:
    """``np.sum``; a large float array summed whole as the sum of its rows of 32.

    XLA's CPU compiler rewrites a long reduction into a tree of windowed reductions of
    32, which it does not fuse with the elementwise loop producing the summed values:
    that loop writes them all to memory and the first window reads them back. A
    reduction of rows of 32 is left as it is and fuses with its producer into one loop
    (the value of Rosenbrock at n=1e6 in half the time); an optimisation barrier keeps
    XLA from merging the two sums back into one. The sum of the row sums, 32 times
    shorter, goes to the tree. The additions are grouped as in XLA's own tree.
    """
    jnp = _jax_numpy()
    if out is not None:
        raise Unsupported("sum with out=")
    keepdims = rest.pop("keepdims", False)
    if (
        axis is not None
        or dtype is not None
        or rest
        or jnp.size(a) < ROW_SUM_SIZE
        or not jnp.issubdtype(jnp.result_type(a), jnp.floating)
    ):
        return jnp.sum(a, axis=axis, dtype=dtype, keepdims=keepdims, **rest)
    flat = jnp.ravel(a)
    rows = -(-flat.size // SUM_ROW)
    if rows * SUM_ROW != flat.size:
        flat = jnp.pad(flat, (0, rows * SUM_ROW - flat.size))
    import jax

    row_sums = jax.lax.optimization_barrier(jnp.sum(flat.reshape(rows, SUM_ROW), axis=1))
    total = jnp.sum(row_sums)
    return total.reshape((1,) * jnp.ndim(a)) if keepdims else total


def _mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, **rest: Any) -> Any:
    """``np.mean``; of a whole float array, :func:`_sum`'s divided by the size
    (as ``jax.numpy.mean`` computes it)."""
    jnp = _jax_numpy()
    if out is not None:
        raise Unsupported("mean with out=")
    whole = axis is None and dtype is None and set(rest) <= {"keepdims"}
    if whole and jnp.issubdtype(jnp.result_type(a), jnp.floating):
        return _sum(a, **rest) / jnp.size(a)  # (which decides how to sum it)
    return jnp.mean(a, axis=axis, dtype=dtype, **rest)


#: NumPy functions whose ``jax.numpy`` namesake XLA compiles into slower loops than
#: another lowering of the same values, or lacks NumPy's default.
_LOWERINGS: dict[Any, Any] = {np.roll: _roll, np.take: _take, np.sum: _sum, np.mean: _mean}


class Traced:
    """A traced JAX array standing in for an ndarray inside a lowered NumPy call."""

    __slots__ = ("a",)
    __array_priority__ = 1000.0

    def __init__(self, a: Any) -> None:
        self.a = a

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__":
            raise Unsupported(f"{ufunc.__name__}.{method}")
        return _ufunc(ufunc, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        own = _LOWERINGS.get(func)
        if own is not None:
            return wrap(own(*unwrap(args), **unwrap(kwargs)))
        jax_func = _namesake(func)
        if jax_func is None:
            raise Unsupported(f"{getattr(func, '__module__', '')}.{func.__name__}")
        return wrap(jax_func(*unwrap(args), **_keywords(func, jax_func, unwrap(kwargs))))

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise Unsupported("conversion to an ndarray")

    def __bool__(self) -> bool:
        raise Unsupported("conversion to a Python value")

    __float__ = __int__ = __index__ = __complex__ = __bool__

    def __len__(self) -> int:
        return len(self.a)

    def __iter__(self) -> Any:
        return (Traced(self.a[i]) for i in range(len(self.a)))

    def __getitem__(self, index: Any) -> Any:
        return wrap(self.a[unwrap(index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        raise Unsupported("an in-place write")

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.a, name)
        if callable(value):

            def method(*args: Any, **kwargs: Any) -> Any:
                return wrap(value(*unwrap(args), **unwrap(kwargs)))

            return method
        return wrap(value)


def _unary(ufunc: Any) -> Any:
    return lambda self: _ufunc(ufunc, (self,), {})


def _binary(ufunc: Any, reflected: bool = False) -> Any:
    if reflected:
        return lambda self, other: _ufunc(ufunc, (other, self), {})
    return lambda self, other: _ufunc(ufunc, (self, other), {})


for _name, _uf in {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "truediv": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "pow": np.power,
    "matmul": np.matmul,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}.items():
    setattr(Traced, f"__{_name}__", _binary(_uf))
    setattr(Traced, f"__r{_name}__", _binary(_uf, reflected=True))
for _name, _uf in {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}.items():
    setattr(Traced, f"__{_name}__", _binary(_uf))
for _name, _uf in {
    "neg": np.negative,
    "pos": np.positive,
    "abs": np.absolute,
    "invert": np.invert,
}.items():
    setattr(Traced, f"__{_name}__", _unary(_uf))
Traced.__hash__ = None  # type: ignore[assignment]


def call(fn: Any, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` with :class:`Traced` arguments, its arrays as JAX arrays."""
    result = fn(*args, **kwargs)
    return unwrap(result)


def constant(value: np.ndarray) -> Any:
    """A large constant array of a recorded instruction as the kernel should see it:
    ``value`` itself (a literal XLA reads from memory), or the expression of
    :func:`structured` where it has one."""
    build = structured(value)
    return value if build is None else Traced(build())


def structured(value: np.ndarray) -> Callable[[], Any] | None:
    """A function computing ``value`` inside a kernel from little or no data, or None.

    Derivatives seed their products with structured constants: a uniform array
    (``100 * ones(n)`` made while recording) becomes a broadcast value, and a matrix
    that is zero but for one value along a run of one diagonal (``2 * eye(n)``, the
    shifted identities of a dense Jacobian or Hessian) is computed from indices. XLA
    fuses these into the loops that read them, where a literal matrix is a pass over
    memory: a Hessian of Rosenbrock at n=100 took 1.7x as long reading three. Both are
    exact, signed zeros included. Checking costs a few passes over ``value``, once,
    when the kernel is made. (The colour groups that seed a sparse Jacobian, at most
    one nonzero per column, are left as they are: computed from each column's row in
    the kernel, XLA's gather of the stored entries ran 1.4x slower for Rosenbrock.)
    """
    if _uniform(value):
        first = value.flat[0]
        return lambda: _jax_numpy().full(value.shape, first, value.dtype)
    band = _diagonal(value)
    if band is not None:
        return lambda: _diagonal_values(value.shape, value.dtype, *band)
    return None


def _uniform(a: np.ndarray) -> bool:
    """Whether every element of a float or boolean array is the same (not NaN; the
    same sign of zero)."""
    if a.dtype.kind not in "fb":
        return False
    first = a.flat[0]
    if not (first == first and (a == first).all()):
        return False
    return a.dtype.kind == "b" or bool((np.signbit(a) == np.signbit(first)).all())


def _diagonal(a: np.ndarray) -> tuple[int, int, int, Any] | None:
    """``(k, first, stop, value)`` where ``a`` is a float matrix of +0.0 but for
    ``value`` at rows ``first`` to ``stop - 1`` of its diagonal ``k``, else None."""
    if a.ndim != 2 or a.dtype.kind != "f" or not 0 < np.count_nonzero(a) <= min(a.shape):
        return None  # (counted first: a dense matrix would make millions of indices)
    if np.count_nonzero(np.signbit(a)) != np.count_nonzero(a < 0):
        return None  # a -0.0 (or a NaN with its sign bit set)
    rows, cols = np.nonzero(a)
    k = int(cols[0] - rows[0])
    first, stop = int(rows[0]), int(rows[-1]) + 1
    value = a[rows[0], cols[0]]
    # One nonzero per row of the run (rows come sorted), each on diagonal k.
    if rows.size != stop - first or not (cols - rows == k).all():
        return None
    if not (value == value and (a[rows, cols] == value).all()):
        return None
    return k, first, stop, value


def _diagonal_values(shape: tuple, dtype: Any, k: int, first: int, stop: int, value: Any) -> Any:
    """The matrix :func:`_diagonal` describes, from iotas (XLA does not fold them)."""
    import jax

    jnp = _jax_numpy()
    i = jax.lax.broadcasted_iota(np.int64, shape, 0)
    j = jax.lax.broadcasted_iota(np.int64, shape, 1)
    on = (j - i == k) & (i >= first) & (i < stop)
    return jnp.where(on, jnp.asarray(value, dtype), jnp.zeros((), dtype))


def scatter_add(values: Any, index: tuple, shape: tuple) -> Any:
    """:func:`funcdiff.rules.indexing.index_add` with a constant index, in JAX: zeros
    padded around the values for a basic index (XLA fuses a pad; its scatter is a
    serial loop), a scatter-add for any other."""
    import jax.numpy as jnp
    from jax import lax

    values = unwrap(values)
    indexed_ndim = np.broadcast_to(np.zeros((), dtype=bool), shape)[index].ndim
    extra = tuple(values.shape[indexed_ndim:])
    padding = _padding(index, tuple(shape)) if type(index) is tuple else None
    if padding is None:
        return jnp.zeros(tuple(shape) + extra, dtype=values.dtype).at[index].add(values)
    widths, reverse, expand = padding
    if expand:
        values = jnp.expand_dims(values, expand)
    if reverse:
        values = jnp.flip(values, reverse)
    widths = widths + [(0, 0, 0)] * len(extra)
    return lax.pad(values, jnp.zeros((), dtype=values.dtype), widths)


def _padding(index: tuple, shape: tuple) -> tuple | None:
    """For a basic index of ints and slices: the ``lax.pad`` widths placing the
    selected values in zeros of ``shape``, the axes to flip first (negative steps) and
    those to insert (ints); None for any other index or an empty selection."""
    if len(index) > len(shape):
        return None
    widths: list[tuple[int, int, int]] = []
    reverse: list[int] = []
    expand: list[int] = []
    for axis, dim in enumerate(shape):
        item = index[axis] if axis < len(index) else slice(None)
        if type(item) is slice:
            start, stop, step = item.indices(dim)
            count = len(range(start, stop, step))
            if count == 0:
                return None
            low = start if step > 0 else start + (count - 1) * step
            if step < 0:
                reverse.append(axis)
            interior = abs(step) - 1
            widths.append((low, dim - low - (count - 1) * abs(step) - 1, interior))
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            i = int(item) + dim if item < 0 else int(item)
            if not 0 <= i < dim:
                return None
            expand.append(axis)
            widths.append((i, dim - i - 1, 0))
        else:
            return None
    return widths, tuple(reverse), tuple(expand)
