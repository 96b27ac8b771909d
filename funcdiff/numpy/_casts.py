"""Integer scalar types (``int64``, ``uint8`` ...) whose call casts a Tensor with a
recorded astype.

``numpy.int64(t)`` converts ``t`` to Python numbers first, which funcdiff refuses when
``t`` requires grad. The types here are subclasses of NumPy's, as HIPS autograd's
``autograd.numpy.int64`` is, so they work wherever NumPy's do (``dtype=np.int64``,
``np.dtype(np.int64)``, ``isinstance(x, np.int64)``, ``np.issubdtype(d, np.int64)``),
and calling one:

* on a Tensor, or a (nested) list holding Tensors, returns ``tensor.astype(type)``: a
  constant Tensor (no gradient, as ``astype`` to an integer type gives);
* on anything else, returns exactly what NumPy's type returns (a NumPy scalar or array).

The floating-point types are NumPy's own (``funcdiff.numpy.float32 is numpy.float32``),
as in HIPS autograd, so that ``x.dtype.type is np.float32`` holds for the arrays and
gradients a program computes; a Tensor is cast to one with the recorded
``t.astype(np.float32)``.
"""

from __future__ import annotations

from typing import Any

import numpy

from funcdiff.numpy._creation import asarray, contains_tensor

__all__ = ["CAST_TYPES", "cast_type"]

#: The NumPy scalar types given a Tensor-aware call: the integer ones (the floating-point
#: and complex ones are NumPy's own).
CAST_TYPES = (
    "int8 int16 int32 int64 intp int_ intc short long longlong byte "
    "uint8 uint16 uint32 uint64 uintp uint uintc ushort ulong ulonglong ubyte"
).split()


class _CastingScalarType(type):
    """Metaclass: calling the type casts Tensors; type checks defer to NumPy's type."""

    _numpy_type: type

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and contains_tensor(args[0]):
            return asarray(args[0]).astype(cls._numpy_type)
        return cls._numpy_type(*args, **kwargs)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._numpy_type)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, cls._numpy_type)


_MADE: dict[type, type] = {}


def cast_type(name: str) -> type:
    """The Tensor-aware subclass of ``numpy.<name>`` (see the module docstring).

    Aliases of one NumPy type (``float64`` and ``double``) get the same subclass.
    """
    base = getattr(numpy, name)
    if base in _MADE:
        return _MADE[base]
    made = _MADE[base] = _CastingScalarType(
        base.__name__,
        (base,),
        {
            "_numpy_type": base,
            "__module__": "funcdiff.numpy",
            "__doc__": (
                f"``numpy.{name}``; called on a Tensor (or a list holding Tensors) it "
                f"returns ``tensor.astype(numpy.{name})``, recorded."
            ),
        },
    )
    return made
