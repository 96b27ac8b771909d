"""Scalar types (``float64``, ``int64`` ...) whose call casts a Tensor with a recorded astype.

``numpy.float64(t)`` converts ``t`` to a Python number first, which drops the gradient
(funcdiff refuses it when ``t`` requires grad). The types here are subclasses of NumPy's,
so they work wherever NumPy's do (``dtype=np.float64``, ``np.dtype(np.int64)``,
``isinstance(x, np.float64)``, ``np.issubdtype(d, np.float64)``), and calling one:

* on a Tensor, or a (nested) list holding Tensors, returns ``tensor.astype(type)``: a
  Tensor (0-d for a 0-d Tensor), recorded; a float cast keeps the gradient (cast back to
  the input's dtype), an integer or bool cast gives a constant: a Tensor that does not
  require grad, as ``astype`` does;
* on anything else, returns exactly what NumPy's type returns (a NumPy scalar or array).
"""

from __future__ import annotations

from typing import Any

import numpy

from funcdiff.numpy._creation import asarray, contains_tensor

__all__ = ["CAST_TYPES", "cast_type"]

#: The NumPy scalar types given a Tensor-aware call (complex ones are left as NumPy's).
CAST_TYPES = (
    "float16 float32 float64 half single double longdouble "
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
