"""Grad modes: whether operations on Tensors are recorded.

The mode is thread-local, so a ``no_grad`` block in one thread never changes what
another thread records.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "thread_state",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "MODE_WATCHERS",
]

F = TypeVar("F", bound=Callable[..., Any])


class ThreadState(threading.local):
    """This thread's grad mode. Class attributes are the per-thread defaults: a new
    thread starts with grad on."""

    grad_enabled: bool = True
    inference: bool = False


#: This thread's grad mode. Public for the hot paths of ``ops`` and ``autograd``, which
#: read (and the engine set) ``thread_state.grad_enabled`` inline; everything else calls
#: :func:`is_grad_enabled` or uses the context managers. The tracer and observer slots
#: are :mod:`funcdiff._core.tracing`'s.
thread_state = ThreadState()


#: Called with no argument after a grad-mode context manager is entered or left and after
#: ``set_grad_enabled(mode)``: ``funcdiff.autograd.forward_ad`` keeps tangents flowing
#: under ``no_grad`` this way. Empty, and so free, unless a dual level is active.
MODE_WATCHERS: list[Callable[[], None]] = []


def _notify() -> None:
    for watcher in list(MODE_WATCHERS):
        watcher()


def is_grad_enabled() -> bool:
    """Return True when operations are currently recorded for differentiation.

    Examples
    --------
    >>> import funcdiff as fd
    >>> fd.is_grad_enabled()
    True
    >>> with fd.no_grad():
    ...     fd.is_grad_enabled()
    False
    """
    return thread_state.grad_enabled


def is_inference_mode_enabled() -> bool:
    """Return True inside an active ``inference_mode`` block."""
    return thread_state.inference


class _GradModeContext:
    """Base for context managers that also work as decorators.

    Those whose arguments all have defaults (``no_grad``, ``enable_grad``,
    ``inference_mode``) decorate with or without parentheses, as in torch:
    ``@no_grad`` and ``@no_grad()`` are the same.
    """

    #: Whether ``Mode(func)`` means ``Mode()(func)`` (the mode takes no required argument).
    _bare_decorator = False

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if (
            cls._bare_decorator
            and len(args) == 1
            and not kwargs
            and callable(args[0])
            and not isinstance(args[0], (bool, _GradModeContext))
        ):
            return cls()(args[0])  # used as ``@Mode`` without parentheses
        return super().__new__(cls)

    def _enter_mode(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> None:
        self._saved = (thread_state.grad_enabled, thread_state.inference)
        self._enter_mode()
        if MODE_WATCHERS:
            _notify()

    def __exit__(self, *exc: object) -> None:
        thread_state.grad_enabled, thread_state.inference = self._saved
        if MODE_WATCHERS:
            _notify()

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__(*self._init_args()):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def _init_args(self) -> tuple[Any, ...]:
        return ()


class no_grad(_GradModeContext):
    """Context manager and decorator that stops recording operations.

    Results computed inside do not require grad, even when their inputs do. In-place
    updates of leaves are allowed inside, which is how optimiser steps are written.

    Examples
    --------
    >>> import funcdiff as fd
    >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> with fd.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    _bare_decorator = True

    def _enter_mode(self) -> None:
        thread_state.grad_enabled = False


class enable_grad(_GradModeContext):
    """Context manager and decorator that turns recording back on inside ``no_grad``.

    Examples
    --------
    >>> import funcdiff as fd
    >>> x = fd.tensor(3.0, requires_grad=True)
    >>> with fd.no_grad():
    ...     with fd.enable_grad():
    ...         y = x * x
    >>> y.requires_grad
    True
    """

    _bare_decorator = True

    def _enter_mode(self) -> None:
        thread_state.grad_enabled = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to ``mode``: as a function call, a context manager or a decorator.

    Called as a plain function it sets the mode at once (and, used as a context
    manager, restores the previous mode on exit).

    Examples
    --------
    >>> import funcdiff as fd
    >>> with fd.set_grad_enabled(False):
    ...     fd.is_grad_enabled()
    False
    >>> fd.is_grad_enabled()
    True
    """

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(mode) expects a bool, got {type(mode).__name__}")
        self.mode = mode
        self._saved = (thread_state.grad_enabled, thread_state.inference)
        thread_state.grad_enabled = mode
        if MODE_WATCHERS:
            _notify()

    def __enter__(self) -> None:
        # The mode was already set by __init__; only remember what to restore.
        pass

    def _enter_mode(self) -> None:
        thread_state.grad_enabled = self.mode

    def _init_args(self) -> tuple[Any, ...]:
        return (self.mode,)

    def __call__(self, func: F) -> F:
        # Decorating must not leave the mode changed by __init__.
        thread_state.grad_enabled, thread_state.inference = self._saved
        if MODE_WATCHERS:
            _notify()
        return super().__call__(func)


class inference_mode(_GradModeContext):
    """A stronger ``no_grad``: nothing inside is recorded.

    funcdiff treats it as ``no_grad`` (NumPy arrays carry no dispatch keys to skip);
    ``inference_mode(False)`` is a no-op, as in torch.

    Examples
    --------
    >>> import funcdiff as fd
    >>> with fd.inference_mode():
    ...     fd.is_grad_enabled()
    False
    """

    _bare_decorator = True

    def __init__(self, mode: bool = True) -> None:
        self.mode = mode

    def _enter_mode(self) -> None:
        if self.mode:
            thread_state.grad_enabled = False
            thread_state.inference = True

    def _init_args(self) -> tuple[Any, ...]:
        return (self.mode,)
