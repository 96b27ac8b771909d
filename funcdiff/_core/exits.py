"""Refusing a gradient that would be lost: Tensors that require grad reaching an entry
point whose results are plain ndarrays (``funcdiff.sparse``, ``funcdiff.replay``).

Such an entry point differentiates with respect to its own inputs only; a Tensor that
requires grad among its other arguments (positional, keyword, inside a list, tuple or
dict, or captured by the function's closure) would leave as numbers without a
derivative. :func:`refuse_recorded_arguments` raises a TypeError that names it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from funcdiff._core import grad_mode
from funcdiff._core.tensor import Tensor

__all__ = ["recorded_path", "refuse_recorded_arguments"]

_DEPTH = 4


def recorded_path(value: Any, depth: int = 0) -> str | None:
    """Where a Tensor that requires grad sits in ``value`` (``""`` for ``value``
    itself, ``"[1]['w']"`` inside containers), or None.

    Examples
    --------
    >>> import funcdiff as fd
    >>> recorded_path((1.0, {"w": fd.tensor([1.0], requires_grad=True)}))
    "[1]['w']"
    >>> recorded_path([fd.tensor([1.0])]) is None
    True
    """
    if isinstance(value, Tensor):
        return "" if value._requires_grad else None
    if depth >= _DEPTH:
        return None
    if isinstance(value, (list, tuple)):
        items: Iterable = enumerate(value)
    elif isinstance(value, dict):
        items = value.items()
    else:
        return None
    for key, item in items:
        path = recorded_path(item, depth + 1)
        if path is not None:
            return f"[{key!r}]{path}"
    return None


def _captured(fn: Any) -> list[tuple[tuple[str, Any], Any]]:
    """``((kind, key), value)`` for what ``fn`` carries with it: closure cells, default
    arguments, its globals, and a ``functools.partial``'s bound arguments. The names
    are formatted only for an error (a replayed call checks them at every call)."""
    found: list[tuple[tuple[str, Any], Any]] = []
    if isinstance(fn, functools.partial):
        found += [(("argument", i), a) for i, a in enumerate(fn.args)]
        found += [(("keyword", k), v) for k, v in (fn.keywords or {}).items()]
        fn = fn.func
    code = getattr(fn, "__code__", None)
    for name, cell in zip(getattr(code, "co_freevars", ()), getattr(fn, "__closure__", None) or ()):
        try:
            found.append((("variable", name), cell.cell_contents))
        except ValueError:  # an empty cell
            continue
    for i, value in enumerate(getattr(fn, "__defaults__", None) or ()):
        found.append((("default", i), value))
    module_globals = getattr(fn, "__globals__", None)
    if module_globals is not None and code is not None:
        for name in code.co_names:
            if name in module_globals:
                found.append((("global", name), module_globals[name]))
    return found


_LABELS = {
    "argument": "the partial's argument {}",
    "keyword": "the partial's keyword {!r}",
    "variable": "the variable {!r} captured by the function",
    "default": "the function's default argument {}",
    "global": "the global {!r} used by the function",
}


def _label(kind: str, key: Any) -> str:
    return _LABELS[kind].format(key)


def refuse_recorded_arguments(
    entry: str,
    named: Iterable[tuple[str, Any]],
    fn: Callable | None = None,
    positional: tuple = (),
) -> None:
    """Raise a TypeError naming the first Tensor that requires grad in ``named``
    (``(name, value)`` pairs), in ``positional`` (a call's positional arguments) or in
    ``fn``'s closure, while grad mode is on.

    Examples
    --------
    >>> import funcdiff as fd
    >>> L = fd.tensor([1.0], requires_grad=True)
    >>> refuse_recorded_arguments("funcdiff.sparse.jacobian", [("args[0]", L)])
    Traceback (most recent call last):
    ...
    TypeError: funcdiff.sparse.jacobian: args[0] is a Tensor that requires grad, ...
    >>> refuse_recorded_arguments("funcdiff.replay", [], positional=(1.0, L))
    Traceback (most recent call last):
    ...
    TypeError: funcdiff.replay: positional argument 1 is a Tensor that requires grad, ...
    """
    if not grad_mode.is_grad_enabled():
        return  # nothing is being recorded, so nothing can be lost
    for i, value in enumerate(positional):
        path = recorded_path(value)
        if path is not None:
            _refuse(entry, f"positional argument {i}", path)
    for name, value in named:
        path = recorded_path(value)
        if path is not None:
            _refuse(entry, name, path)
    if fn is not None:
        for where, value in _captured(fn):
            path = recorded_path(value)
            if path is not None:
                _refuse(entry, _label(*where), path)


def _refuse(entry: str, name: str, path: str) -> None:
    raise TypeError(
        f"{entry}: {name}{path} is a Tensor that requires grad, but {entry} returns "
        "plain arrays, so its gradient would be silently lost. Pass it as a "
        "constant (tensor.detach()) to use its values, or differentiate the eager "
        "computation (funcdiff.grad, funcdiff.functional) to get derivatives with "
        "respect to it."
    )
