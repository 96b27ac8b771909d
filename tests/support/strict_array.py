"""A strict stand-in for a device array type (CuPy's ``ndarray``) in tests without a GPU.

:class:`StrictArray` wraps an ndarray and behaves like a CuPy array wherever funcdiff
could notice the difference:

* NumPy functions and ufuncs reach it through ``__array_function__`` and
  ``__array_ufunc__``; it unwraps its own instances, calls NumPy and wraps every array
  result (NumPy scalars come back as 0-d arrays, as CuPy's reductions do);
* ``__array__`` raises TypeError, so ``np.asarray`` of it fails loudly anywhere;
* a host ndarray among the operands of a ufunc raises TypeError, as CuPy never copies
  host data implicitly (integer and boolean arrays are accepted as indices, and as the
  integer parameters of functions such as ``take`` or ``roll``);
* ``__array_function__`` answers only NumPy's own functions, and ``__array_ufunc__``
  NumPy's ufuncs and, as CuPy does, the ``scipy.special`` ufuncs that the backend's own
  special-function module :data:`special` has (what ``cupyx.scipy.special`` has);
  :class:`BareArray` answers NumPy's ufuncs only, so ``scipy.special`` reaches
  :data:`special` only through funcdiff's registry, where this module registers it
  under its top-level module name (as ``cupyx.scipy.special`` is for ``cupy``);
* ``ufunc.at`` through dispatch takes only array or integer indices (a tuple gets
  NotImplemented); :data:`namespace` has an ``add.at`` that takes tuples (as ``cupy``);
* ``flags`` has no ``writeable``; ``float()``, ``int()``, ``bool()`` of an array of more
  than one element raise; ``.item()``, ``.tolist()``, ``.get()`` and the conversions of
  0-d arrays are the ways to the host, and :data:`HOST_READS` counts them.

:class:`MissingArray` is the same type without ``numpy.cumsum``, to check that a rule
that needs a function the backend lacks raises funcdiff's clear TypeError.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import scipy.linalg
import scipy.signal
import scipy.special

import funcdiff.backends

__all__ = [
    "StrictArray",
    "BareArray",
    "MissingArray",
    "HOST_READS",
    "namespace",
    "special",
    "signal",
    "strict",
]

#: How many reads of values to the host happened (``item``, ``tolist``, ``get``, ``float`` ...).
HOST_READS = [0]

_NUMPY_MODULES = (np, np.linalg, np.fft)


class _Flags:
    """CuPy's flags: no ``writeable`` (device arrays are always writeable)."""

    def __init__(self, a: np.ndarray) -> None:
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata


def _is_numpy_function(func: Any) -> bool:
    name = getattr(func, "__name__", None)
    return name is not None and any(getattr(m, name, None) is func for m in _NUMPY_MODULES)


class StrictArray:
    """An ndarray wrapper that dispatches through NEP 13/18 and refuses host conversions."""

    __slots__ = ("_a",)
    __array_priority__ = 50.0
    #: Functions this type does not implement (``MissingArray`` names some).
    missing: frozenset[str] = frozenset()
    #: True: ``__array_ufunc__`` answers NumPy's ufuncs only (``BareArray``).
    bare = False

    def __init__(self, a: Any) -> None:
        if not isinstance(a, np.ndarray):
            raise TypeError(f"StrictArray wraps an ndarray, got {type(a).__name__}")
        self._a = a

    # ---------------------------------------------------------------- wrapping
    @classmethod
    def _unwrap(cls, x: Any, index: bool = False) -> Any:
        if isinstance(x, StrictArray):
            if type(x) is not cls:
                raise TypeError(f"cannot mix {type(x).__name__} with {cls.__name__}")
            return x._a
        if isinstance(x, np.ndarray):
            if index and x.dtype.kind in "iub":
                return x  # host index arrays are copied to the device, as CuPy does
            raise TypeError(f"Unsupported type {type(x)}")
        if isinstance(x, (list, tuple)):
            items = [cls._unwrap(i, index) for i in x]
            return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
        return x

    @classmethod
    def _wrap(cls, x: Any) -> Any:
        if isinstance(x, np.ndarray):
            return cls(x)
        if isinstance(x, np.generic) and not isinstance(x, (np.str_, np.bytes_)):
            return cls(np.asarray(x))
        if isinstance(x, (list, tuple)):
            items = [cls._wrap(i) for i in x]
            return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
        return x

    # ---------------------------------------------------------------- protocols
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if ufunc.__name__ in self.missing:
            return NotImplemented
        for x in inputs:  # an operand of a type it does not know (a Tensor): not its call
            if not isinstance(x, (StrictArray, np.ndarray, np.generic, int, float, complex)):
                if method != "at" or not isinstance(x, (slice, type(Ellipsis), tuple)):
                    return NotImplemented
        if getattr(np, ufunc.__name__, None) is not ufunc:
            # As CuPy: a scipy.special ufunc runs as the backend's own of the same name
            own = None if self.bare else getattr(special, ufunc.__name__, None)
            if own is None or method != "__call__" or kwargs:
                return NotImplemented
            return own(*inputs)
        if method == "at" and isinstance(inputs[1], tuple):
            return NotImplemented  # CuPy's dispatch of ufunc.at refuses tuple indices
        cls = type(self)
        args = [cls._unwrap(x, index=(method == "at" and i == 1)) for i, x in enumerate(inputs)]
        kwargs = {k: cls._unwrap(v) for k, v in kwargs.items()}
        out = getattr(ufunc, method)(*args, **kwargs)
        return None if method == "at" else cls._wrap(out)

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        if getattr(func, "__name__", "") in self.missing or not _is_numpy_function(func):
            return NotImplemented
        for t in types_:
            if not issubclass(t, (StrictArray, np.ndarray)):
                return NotImplemented
        cls = type(self)
        if func in (np.asarray, np.array):  # like=device_array: an explicit transfer
            return cls(np.array(args[0], **{k: v for k, v in kwargs.items() if k != "like"}))
        index = True  # host integers as parameters (indices, shifts): as CuPy's functions
        kwargs = {k: cls._unwrap(v, index) for k, v in kwargs.items()}
        out = func(*cls._unwrap(tuple(args), index), **kwargs)
        return cls._wrap(out)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly."
        )

    # ---------------------------------------------------------------- host reads
    def _scalar(self, kind: str) -> Any:
        if self._a.size != 1 or self._a.ndim != 0:
            raise TypeError(f"{kind}() of a {type(self).__name__} of shape {self._a.shape}")
        HOST_READS[0] += 1
        return self._a.item()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __complex__(self) -> complex:
        return complex(self._scalar("complex"))

    def __bool__(self) -> bool:
        return bool(self._scalar("bool"))

    def __index__(self) -> int:
        if self._a.dtype.kind not in "iu":
            raise TypeError("only integer arrays can be indices")
        return int(self._scalar("int"))

    def item(self) -> Any:
        HOST_READS[0] += 1
        return self._a.item()

    def tolist(self) -> Any:
        HOST_READS[0] += 1
        return self._a.tolist()

    def get(self) -> np.ndarray:
        """A host copy (CuPy's explicit way to the host)."""
        HOST_READS[0] += 1
        return self._a.copy()

    # ---------------------------------------------------------------- attributes
    @property
    def dtype(self) -> np.dtype:
        return self._a.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def size(self) -> int:
        return self._a.size

    @property
    def nbytes(self) -> int:
        return self._a.nbytes

    @property
    def itemsize(self) -> int:
        return self._a.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        return self._a.strides

    @property
    def flags(self) -> _Flags:
        return _Flags(self._a)

    @property
    def base(self) -> Any:
        return None if self._a.base is None else type(self)(self._a.base)

    @property
    def T(self) -> StrictArray:
        return type(self)(self._a.T)

    @property
    def mT(self) -> StrictArray:
        return type(self)(np.swapaxes(self._a, -1, -2))

    @property
    def real(self) -> StrictArray:
        return type(self)(self._a.real)

    @property
    def imag(self) -> StrictArray:
        return type(self)(self._a.imag)

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self._a)))

    def __repr__(self) -> str:
        return f"StrictArray({self._a!r})"

    # ---------------------------------------------------------------- methods
    def astype(self, dtype: Any, copy: bool = True, **kwargs: Any) -> StrictArray:
        return type(self)(self._a.astype(dtype, copy=copy, **kwargs))

    def copy(self, order: Any = "C") -> StrictArray:
        return type(self)(self._a.copy(order=order))

    def view(self, *args: Any) -> StrictArray:
        return type(self)(self._a.view(*args))

    def reshape(self, *shape: Any, order: Any = "C") -> StrictArray:
        return type(self)(self._a.reshape(*shape, order=order))

    def ravel(self, order: Any = "C") -> StrictArray:
        return type(self)(self._a.ravel(order=order))

    def flatten(self) -> StrictArray:
        return type(self)(self._a.flatten())

    def transpose(self, *axes: Any) -> StrictArray:
        return type(self)(self._a.transpose(*axes))

    def swapaxes(self, a: int, b: int) -> StrictArray:
        return type(self)(self._a.swapaxes(a, b))

    def squeeze(self, axis: Any = None) -> StrictArray:
        return type(self)(self._a.squeeze(axis))

    def conj(self) -> StrictArray:
        return type(self)(self._a.conj())

    conjugate = conj

    def fill(self, value: Any) -> None:
        self._a.fill(type(self)._unwrap(value))

    def sum(self, *args: Any, **kwargs: Any) -> Any:
        return np.sum(self, *args, **kwargs)

    def max(self, *args: Any, **kwargs: Any) -> Any:
        return np.max(self, *args, **kwargs)

    def min(self, *args: Any, **kwargs: Any) -> Any:
        return np.min(self, *args, **kwargs)

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        return np.mean(self, *args, **kwargs)

    def prod(self, *args: Any, **kwargs: Any) -> Any:
        return np.prod(self, *args, **kwargs)

    def any(self, *args: Any, **kwargs: Any) -> Any:
        return np.any(self, *args, **kwargs)

    def all(self, *args: Any, **kwargs: Any) -> Any:
        return np.all(self, *args, **kwargs)

    def dot(self, other: Any) -> Any:
        return np.dot(self, other)

    def __getitem__(self, index: Any) -> Any:
        cls = type(self)
        return cls._wrap(self._a[_index(cls, index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        cls = type(self)
        self._a[_index(cls, index)] = cls._unwrap(value)


def _index(cls: type[StrictArray], index: Any) -> Any:
    if isinstance(index, tuple):
        return tuple(_index(cls, i) for i in index)
    if isinstance(index, list):
        return cls._unwrap(np.asarray(index), index=True)
    return cls._unwrap(index, index=True)


def _operator(ufunc: np.ufunc, reflected: bool = False) -> Any:
    if reflected:
        return lambda self, other: ufunc(other, self)
    return lambda self, other: ufunc(self, other)


for _name, _uf in [
    ("add", np.add),
    ("sub", np.subtract),
    ("mul", np.multiply),
    ("truediv", np.true_divide),
    ("floordiv", np.floor_divide),
    ("mod", np.remainder),
    ("pow", np.power),
    ("matmul", np.matmul),
    ("and", np.logical_and),
    ("or", np.logical_or),
]:
    setattr(StrictArray, f"__{_name}__", _operator(_uf))
    setattr(StrictArray, f"__r{_name}__", _operator(_uf, reflected=True))
for _name, _uf in [
    ("eq", np.equal),
    ("ne", np.not_equal),
    ("lt", np.less),
    ("le", np.less_equal),
    ("gt", np.greater),
    ("ge", np.greater_equal),
]:
    setattr(StrictArray, f"__{_name}__", _operator(_uf))
StrictArray.__neg__ = lambda self: np.negative(self)  # type: ignore[attr-defined]
StrictArray.__pos__ = lambda self: np.positive(self)  # type: ignore[attr-defined]
StrictArray.__abs__ = lambda self: np.absolute(self)  # type: ignore[attr-defined]
StrictArray.__invert__ = lambda self: np.invert(self)  # type: ignore[attr-defined]
StrictArray.__hash__ = None  # type: ignore[assignment]


class MissingArray(StrictArray):
    """:class:`StrictArray` without ``numpy.cumsum`` (a function a backend may lack)."""

    __slots__ = ()
    missing = frozenset({"cumsum"})


class BareArray(StrictArray):
    """:class:`StrictArray` whose ``__array_ufunc__`` answers NumPy's ufuncs only: a
    ``scipy.special`` function reaches :data:`special` through funcdiff's registry."""

    __slots__ = ()
    bare = True


def strict(a: Any, cls: type[StrictArray] = StrictArray) -> StrictArray:
    """``a`` (array-like or StrictArray) as a StrictArray holding a copy."""
    if isinstance(a, StrictArray):
        return cls(a._a.copy())
    return cls(np.array(a))


class _SpecialFunction:
    """One SciPy function run on StrictArrays (the backend's own kernel)."""

    def __init__(self, ufunc: Any) -> None:
        self.ufunc = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        cls = next((type(a) for a in args if isinstance(a, StrictArray)), StrictArray)
        kwargs = {k: cls._unwrap(v) for k, v in kwargs.items()}
        return cls._wrap(self.ufunc(*(cls._unwrap(a) for a in args), **kwargs))


class _AddAt:
    def at(self, out: StrictArray, index: Any, values: Any) -> None:
        cls = type(out)
        np.add.at(out._a, _index(cls, index), cls._unwrap(values))


# Some of what ``cupyx.scipy.special`` has (CuPy 14, public names only); not Bessel
# functions of real order (jv, yv, iv, kv and their scaled forms), kn, betaincc, stdtr.
_SPECIAL_NAMES = """erf erfc erfcx erfinv erfcinv gamma gammaln loggamma rgamma psi digamma
polygamma multigammaln expit logit log_expit ndtr log_ndtr ndtri xlogy xlog1py entr rel_entr kl_div
huber pseudo_huber beta betaln betainc gammainc gammaincc zeta zetac i0 i0e i1 i1e k0 k0e k1
k1e j0 j1 y0 y1 yn exp2 exp10 expm1 log1p cbrt cosm1 gammaincinv betaincinv""".split()

#: The backend's special-function module (``cupyx.scipy.special`` for CuPy).
special = types.SimpleNamespace(
    **{
        name: _SpecialFunction(getattr(scipy.special, name))
        for name in _SPECIAL_NAMES
        if hasattr(scipy.special, name)
    }
)
#: The backend's ``scipy.linalg`` (``cupyx.scipy.linalg`` for CuPy): what CuPy 14 has.
linalg = types.SimpleNamespace(
    **{
        name: _SpecialFunction(getattr(scipy.linalg, name))
        for name in ("solve_triangular", "lu_factor", "lu_solve", "expm")
    }
)

#: The backend's ``scipy.signal`` (``cupyx.scipy.signal`` for CuPy): its convolutions.
signal = types.SimpleNamespace(
    **{name: _SpecialFunction(getattr(scipy.signal, name)) for name in ("convolve", "correlate")}
)

#: The backend's array namespace (``cupy`` for CuPy): what dispatch cannot reach.
namespace = types.SimpleNamespace(add=_AddAt())

funcdiff.backends.register_backend(
    __name__.partition(".")[0],
    namespace="support.strict_array:namespace",
    special="support.strict_array:special",
    linalg="support.strict_array:linalg",
    signal="support.strict_array:signal",
)
