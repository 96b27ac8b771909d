"""Handing large NumPy arrays to XLA kernels without copying them.

XLA's CPU client reads a NumPy array in place only when its data starts on a 64-byte
boundary. NumPy aligns its arrays to 16 bytes, so JAX copies nearly every large
argument on every call: a replayed Rosenbrock Hessian-vector product at n=1e6 spent
half its time in those copies. A C-contiguous argument whose data starts ``k``
elements past a boundary is instead handed over as the flat view that starts at the
boundary, ``k`` elements longer, and the kernel (compiled for that ``k``) reads its
elements from ``k`` on. The ``k`` elements before the array are never used; they lie in
the same memory page as its first element (a page starts on a 64-byte boundary), so
reading them cannot fault.

A large result comes back the same way: a writable NumPy array over the kernel's own
output buffer (XLA gives every result of a call a fresh buffer of its own, never an
argument's or another result's), which the caller may keep without a copy.

Small results cost the other way: XLA computes each in a loop and a buffer of its own, at
microseconds each, more than the arithmetic of a small kernel. Such a kernel's float64
results are therefore returned as one flat array, copied once into memory of funcdiff's
own and handed out as views of it at their offsets (:func:`packing`, :func:`unpacking`).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "ALIGNMENT",
    "aligned",
    "kernel_output",
    "misalignment",
    "narrowing",
    "packing",
    "results",
    "unpacking",
    "widened",
]

#: The data alignment XLA's CPU client needs to read an array in place.
ALIGNMENT = 64


def _offset(value: Any) -> int | None:
    """How many bytes past a 64-byte boundary ``value``'s data starts; None where it is
    not a C-contiguous ndarray (XLA copies those whatever their address)."""
    if not (isinstance(value, np.ndarray) and value.flags.c_contiguous):
        return None
    return value.ctypes.data % ALIGNMENT


def misalignment(value: Any) -> int:
    """How many elements past a 64-byte boundary ``value``'s data starts: 0 where it
    starts on one, or where it cannot be widened (not C-contiguous, or an offset that
    is not a whole number of elements)."""
    offset = _offset(value)
    if offset is None or offset % value.itemsize:
        return 0
    return offset // value.itemsize


def aligned(value: Any) -> bool:
    """Whether XLA can read ``value`` in place: a C-contiguous ndarray whose data starts
    on a 64-byte boundary."""
    return _offset(value) == 0


def widened(value: np.ndarray, k: int) -> np.ndarray:
    """The flat view of ``value``'s data that starts ``k`` elements before it (at the
    64-byte boundary :func:`misalignment` found). The view keeps ``value`` alive."""
    extra = k * value.itemsize
    memory = (ctypes.c_char * (value.nbytes + extra)).from_address(value.ctypes.data - extra)
    memory.owner = value  # type: ignore[attr-defined]  # ctypes instances take attributes
    return np.ndarray((value.size + k,), value.dtype, buffer=memory)  # type: ignore[arg-type]


def narrowing(
    body: Callable[..., tuple], shapes: Sequence[tuple[int, ...]], shifts: Sequence[int]
) -> Callable[..., tuple]:
    """``body`` of arguments widened by ``shifts`` (0: passed as they are): each widened
    argument is sliced back to its elements and shape before ``body`` reads it. The
    slices are static, so XLA fuses them into the loops that read the argument."""

    def narrowed(*values: Any) -> tuple:
        return body(
            *(
                v if k == 0 else v[k : k + math.prod(shape)].reshape(shape)
                for v, shape, k in zip(values, shapes, shifts)
            )
        )

    return narrowed


def results(
    outputs: Sequence[Any], arguments: Sequence[Any], large: Sequence[tuple | None]
) -> tuple:
    """A kernel call's ``outputs`` as NumPy arrays: those with a recorded ``(shape,
    dtype)`` in ``large`` writable arrays over the output buffers themselves (see
    :func:`kernel_output`), the others (None there) read-only views. A buffer that is
    also an argument's or another output's (which XLA does not make) is returned as a
    read-only view, for the caller to copy. (The recorded shape saves asking JAX's
    array for its own, a few microseconds a result.)"""
    seen = {a.unsafe_buffer_pointer() for a in arguments if hasattr(a, "unsafe_buffer_pointer")}
    arrays = []
    for o, spec in zip(outputs, large):
        if spec is None:
            arrays.append(np.asarray(o))
            continue
        o.block_until_ready()
        address = o.unsafe_buffer_pointer()
        if address in seen:
            arrays.append(np.asarray(o))
            continue
        seen.add(address)
        shape, dtype = spec
        memory = (ctypes.c_char * (math.prod(shape) * dtype.itemsize)).from_address(address)
        memory.owner = o
        memory.kernel_output = True
        arrays.append(np.ndarray(shape, dtype, buffer=memory))
    return tuple(arrays)


def packing(packed: Sequence[bool]) -> Callable[[tuple], tuple]:
    """The kernel's results with those flagged ``packed`` raveled and concatenated into
    one flat array, returned first, and the others after it in their order."""

    def pack(values: tuple) -> tuple:
        import jax.numpy as jnp

        parts = [v.reshape(-1) for v, p in zip(values, packed) if p]
        return (jnp.concatenate(parts), *(v for v, p in zip(values, packed) if not p))

    return pack


def unpacking(shapes: Sequence[tuple[int, ...]]) -> Callable[[Any], list[np.ndarray]]:
    """The arrays of ``shapes`` packed into a kernel's flat result (see :func:`packing`):
    views at their offsets into one fresh float64 copy of it that funcdiff owns,
    writable and marked as a kernel's output, so that the caller gets them without
    another copy."""
    bounds, start = [], 0
    for shape in shapes:
        bounds.append((start, start + math.prod(shape), shape))
        start += math.prod(shape)
    memory_type = ctypes.c_char * (8 * start)

    def unpacked(flat: Any) -> list[np.ndarray]:
        memory = memory_type()
        memory.kernel_output = True  # type: ignore[attr-defined]
        copy = np.frombuffer(memory, np.float64)  # type: ignore[call-overload]
        copy[...] = flat
        return [copy[i:j].reshape(shape) for i, j, shape in bounds]

    return unpacked


def kernel_output(value: np.ndarray) -> bool:
    """Whether ``value`` is a kernel's output buffer, or one of the disjoint views into
    a packed copy of its small results, that no one else refers to (one the caller may
    keep and write without a copy)."""
    base = value.base
    if isinstance(base, np.ndarray):  # a view into the copy of packed results
        base = base.base
    return isinstance(base, ctypes.Array) and getattr(base, "kernel_output", False)
