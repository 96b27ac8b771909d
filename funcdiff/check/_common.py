"""What both checkers share: their exception, how values and numbers are read and written,
the precision rules, and the realified form of complex functions.

* :class:`GradcheckError`, which every checker raises when AD and finite differences
  disagree.
* Values: a user function's inputs and results seen as NumPy arrays.
* Formatting: how numbers and element indices are written in reports, messages and JSON.
* Precision: machine epsilon, the lowest precision among dtypes, default tolerances.
* Complex functions. A function of complex ``z = x + iy`` with complex results
  ``w = u + iv`` is, to the checkers, the real function ``(x, y) -> (u, v)``. Its real
  Jacobian holds both Wirtinger derivatives (``dw/dz = (du/dx + i dv/dx)/2 -
  i (du/dy + i dv/dy)/2``, and likewise ``dw/dz̄``), so checking it entry by entry
  against finite differences along the real and the imaginary axis checks both, as
  torch's gradcheck does. The analytical side runs funcdiff's reverse (and forward) mode
  through the complex code itself: the wrapper builds ``z`` from its parts, calls the
  function and takes the parts of its results, all with recorded calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor, tensor

__all__ = [
    "FD_TRUST_FACTOR",
    "GradcheckError",
    "any_complex",
    "as_array",
    "as_list",
    "complex_dtype_for",
    "default_rtol",
    "format_number",
    "indexed_name",
    "is_float_output",
    "json_float",
    "lowest_precision",
    "machine_eps",
    "realify",
    "realify_cotangents",
    "realify_outputs",
]


# ------------------------------------------------------------------------ the exception
class GradcheckError(RuntimeError):
    """Raised when analytical derivatives disagree with finite differences.

    The message opens with ``Jacobian mismatch for output i with respect to input j``
    (as torch's) and continues with a table of the worst elements.
    """


# ------------------------------------------------------------------------------- values
def as_array(value: Any) -> np.ndarray:
    """The data of a Tensor, or anything else as an ndarray."""
    return value.data if isinstance(value, Tensor) else np.asarray(value)


def as_list(result: Any) -> list:
    """A function's result as a list of outputs: a tuple or list is several, else one."""
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def is_float_output(o: Any) -> bool:
    """Floating arrays and Tensors, and plain Python numbers (constants)."""
    if isinstance(o, Tensor):
        return o.data.dtype.kind == "f"
    if isinstance(o, bool):
        return False
    if isinstance(o, (float, int)):
        return True
    if isinstance(o, (np.ndarray, np.generic)):
        return o.dtype.kind == "f"
    return False


# --------------------------------------------------------------------------- formatting
def indexed_name(name: str, idx: tuple) -> str:
    """``x[1,2]`` for an element of ``x``; ``x`` itself for a 0-d value."""
    if not idx:
        return name
    return f"{name}[{','.join(str(int(i)) for i in idx)}]"


def format_number(x: Any, digits: int = 3) -> str:
    """``1.23e-05``-style with ``digits`` significant digits; ``-`` for None."""
    if x is None:
        return "-"
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits - 1}e}" if x != 0 else "0"


def json_float(x: Any) -> float | None:
    """A float for JSON: NaN, infinities and None become None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------------------- precision
# A finite-difference quotient is trusted to within this multiple of its error estimate.
FD_TRUST_FACTOR = 3.0
# Default relative tolerances of check_derivatives, by dtype of the comparison.
_DEFAULT_RTOL = {
    np.dtype(np.float64): 1e-5,
    np.dtype(np.float32): 2e-3,
    np.dtype(np.float16): 5e-2,
}


def machine_eps(dtype: Any) -> float:
    """Machine epsilon of a floating dtype (float64's for anything else)."""
    dt = np.dtype(dtype)
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    return float(np.finfo(dt).eps)


def lowest_precision(dtypes: Sequence[Any]) -> np.dtype:
    """The floating dtype with the largest machine epsilon among ``dtypes``."""
    best = np.dtype(np.float64)
    for d in dtypes:
        d = np.dtype(d)
        if d.kind == "c":
            d = np.dtype(d.char.lower()) if d.char in "FD" else np.dtype(np.float64)
            d = np.dtype(np.float32) if d == np.dtype(np.complex64) else d
        if d.kind == "f" and machine_eps(d) > machine_eps(best):
            best = d
    return best


def default_rtol(rtol: float | None, dtype: np.dtype) -> float:
    """``rtol`` if given, else the default relative tolerance for ``dtype``."""
    return float(rtol) if rtol is not None else _DEFAULT_RTOL.get(dtype, 1e-5)


def complex_dtype_for(dtype: Any) -> type[np.complexfloating[Any, Any]]:
    """The complex type of the same precision as a real dtype (for the complex step)."""
    return np.complex64 if dtype == np.float32 else np.complex128


# -------------------------------------------------------------------- complex functions
def _is_complex(x: Any) -> bool:
    if isinstance(x, Tensor):
        return x.dtype.kind == "c"
    if isinstance(x, (complex, np.complexfloating)):
        return True
    return isinstance(x, np.ndarray) and x.dtype.kind == "c"


def any_complex(values: Any) -> bool:
    """Whether ``values`` (one value or a tuple/list of them) holds a complex one."""
    items = values if isinstance(values, (tuple, list)) else (values,)
    return any(_is_complex(v) for v in items)


def _parts(x: Any) -> tuple[Any, Any]:
    """The real and imaginary parts of ``x`` as new leaves (Tensors stay Tensors)."""
    if isinstance(x, Tensor):
        data = x.detach().numpy()
        return (
            tensor(data.real.copy(), requires_grad=x.requires_grad),
            tensor(data.imag.copy(), requires_grad=x.requires_grad),
        )
    arr = np.asarray(x)
    return arr.real.copy(), arr.imag.copy()


def realify_outputs(out: Any) -> Any:
    """Complex results replaced by their real and imaginary parts (in place in a tuple)."""
    if isinstance(out, (tuple, list)):
        flat: list[Any] = []
        for o in out:
            flat.extend((np.real(o), np.imag(o)) if _is_complex(o) else (o,))
        return tuple(flat)
    return (np.real(out), np.imag(out)) if _is_complex(out) else out


def realify_cotangents(outputs: Any, cotangents: Any) -> Any:
    """Cotangents of ``outputs`` for their realified form: ``v`` of a complex ``w``
    becomes ``(Re v, Im v)``, since ``Re(conj(v) w) = Re v Re w + Im v Im w``."""
    if cotangents is None:
        return None
    outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    vs = cotangents if isinstance(cotangents, (tuple, list)) else (cotangents,)
    if len(vs) != len(outs):
        return cotangents  # the checker reports the mismatch in its own terms
    flat: list[Any] = []
    for o, v in zip(outs, vs):
        if _is_complex(o):
            value = v.detach().numpy() if isinstance(v, Tensor) else np.asarray(v)
            flat.extend((np.real(value).copy(), np.imag(value).copy()))
        else:
            flat.append(v)
    single = not isinstance(outputs, (tuple, list)) and len(flat) == 1
    return flat[0] if single else tuple(flat)


def realify(
    func: Callable[..., Any], inputs: Any, argnums: Sequence[int] | None = None
) -> tuple[Callable[..., Any], Any, list[int] | None]:
    """``(func_r, inputs_r, argnums_r)``: every complex input split into two real ones
    (real part, then imaginary part), complex results into their parts.

    ``argnums`` (indices of ``inputs``) is mapped to the new positions. A single
    non-tuple input stays single when it is real.
    """
    is_tuple = isinstance(inputs, (tuple, list))
    items = list(inputs) if is_tuple else [inputs]
    layout: list[tuple[int, ...]] = []
    flat: list[Any] = []
    for item in items:
        if _is_complex(item):
            layout.append((len(flat), len(flat) + 1))
            flat.extend(_parts(item))
        else:
            layout.append((len(flat),))
            flat.append(item)

    def func_r(*args: Any) -> Any:
        rebuilt = [
            args[slots[0]] if len(slots) == 1 else args[slots[0]] + args[slots[1]] * 1j
            for slots in layout
        ]
        return realify_outputs(func(*rebuilt) if is_tuple else func(rebuilt[0]))

    new_argnums = None
    if argnums is not None:
        new_argnums = [k for i in argnums for k in layout[i]]
    new_inputs: Any = tuple(flat) if is_tuple or len(flat) > 1 else flat[0]
    return func_r, new_inputs, new_argnums
