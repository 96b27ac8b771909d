"""Checking derivatives of complex functions: the realified function.

A function of complex ``z = x + iy`` with complex results ``w = u + iv`` is, to the
checkers, the real function ``(x, y) -> (u, v)``. Its real Jacobian holds both Wirtinger
derivatives (``dw/dz = (du/dx + i dv/dx)/2 - i (du/dy + i dv/dy)/2``, and likewise
``dw/dz̄``), so checking it entry by entry against finite differences along the real
and the imaginary axis checks both, as torch's gradcheck does. The analytical side runs
funcdiff's reverse (and forward) mode through the complex code itself: the wrapper
builds ``z`` from its parts, calls the function and takes the parts of its results,
all with recorded calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor, tensor

__all__ = ["any_complex", "realify", "realify_outputs", "realify_cotangents"]


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
