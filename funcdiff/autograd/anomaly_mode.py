"""Anomaly detection: find the forward operation whose backward produced NaN.

While it is on, every recorded operation remembers the call stack of its forward
call, and the backward pass checks each node's results: a NaN raises a RuntimeError
naming the node (``"Function 'SqrtBackward' returned nan values in its 0th output."``)
followed by the traceback of the forward call that created it. Off (the default), the
recorder pays one flag test per node and the backward pass one per node.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from funcdiff._core.graph import ANOMALY, WATCHERS, note_creation

__all__ = [
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
]

F = TypeVar("F", bound=Callable[..., Any])


def _apply(setting: list) -> None:
    """Set ``ANOMALY`` and the recorder's stack capture to match."""
    ANOMALY[:] = setting
    if setting[0] and note_creation not in WATCHERS:
        WATCHERS.append(note_creation)
    elif not setting[0] and note_creation in WATCHERS:
        WATCHERS.remove(note_creation)


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return bool(ANOMALY[0])


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection, when on, checks the backward pass for NaN."""
    return bool(ANOMALY[1])


class detect_anomaly:
    """Context manager and decorator that turns anomaly detection on.

    Parameters
    ----------
    check_nan : bool
        Raise when a node's backward returns NaN (default True).

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.autograd import detect_anomaly
    >>> x = fd.tensor([0.0, 1.0], requires_grad=True)
    >>> with detect_anomaly():
    ...     y = np.sqrt(x) * 0.0
    ...     y.sum().backward()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: Function 'SqrtBackward' returned nan values in its 0th output...
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = bool(check_nan)
        self._saved: list = []

    def __enter__(self) -> None:
        self._saved.append(list(ANOMALY))
        _apply([True, self.check_nan])

    def __exit__(self, *exc: object) -> None:
        _apply(self._saved.pop())

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with detect_anomaly(self.check_nan):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class set_detect_anomaly:
    """Set anomaly detection on or off: as a call, a context manager (restoring the
    previous setting on exit) or a decorator.

    Examples
    --------
    >>> from funcdiff.autograd import set_detect_anomaly, is_anomaly_enabled
    >>> with set_detect_anomaly(True):
    ...     is_anomaly_enabled()
    True
    >>> is_anomaly_enabled()
    False
    """

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_detect_anomaly(mode) expects a bool, got {type(mode).__name__}")
        self._previous = list(ANOMALY)
        self.mode = mode
        self.check_nan = bool(check_nan)
        _apply([mode, self.check_nan])

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        _apply(self._previous)

    def __call__(self, func: F) -> F:
        _apply(self._previous)  # decorating leaves the setting as it was

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_detect_anomaly(self.mode, self.check_nan):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
