"""The active saved-tensor hooks (a per-thread stack) and the packing of saved values.

:func:`funcdiff.autograd.graph.saved_tensors_hooks` pushes a ``(pack, unpack)`` pair;
values saved for backward while one is active are stored as ``pack(value)`` and given
back as ``unpack(packed)`` when backward reads them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Packed", "active", "push", "pop", "pack_all", "unpack_all"]


class _Stack(threading.local):
    hooks: list[tuple[Callable, Callable]] | None = None


_stack = _Stack()


class Packed:
    """Saved values as the pack hook returned them, with the matching unpack hook."""

    __slots__ = ("values", "unpack")

    def __init__(self, values: tuple, unpack: Callable) -> None:
        self.values = values
        self.unpack = unpack


def active() -> tuple[Callable, Callable] | None:
    """The innermost ``(pack, unpack)`` pair of this thread, or None."""
    hooks = _stack.hooks
    return hooks[-1] if hooks else None


def push(pack: Callable, unpack: Callable) -> None:
    if _stack.hooks is None:
        _stack.hooks = []
    _stack.hooks.append((pack, unpack))


def pop() -> None:
    assert _stack.hooks
    _stack.hooks.pop()


def pack_all(values: Sequence[Any]) -> Any:
    """``values`` packed by the active hooks (None stays None); as they are without hooks."""
    hooks = active()
    if hooks is None:
        return tuple(values)
    pack, unpack = hooks
    return Packed(tuple(None if v is None else pack(v) for v in values), unpack)


def unpack_all(saved: Any) -> tuple:
    """The values packed by :func:`pack_all`."""
    if type(saved) is not Packed:
        return saved
    return tuple(None if p is None else saved.unpack(p) for p in saved.values)
