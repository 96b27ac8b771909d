"""SciPy submodules imported on first use, so that ``import funcdiff`` stays light.

``import scipy.signal`` or ``import scipy.stats`` costs several times ``import numpy``
(they pull in ``scipy.optimize``, ``interpolate``, ``spatial``, ``ndimage`` ...), and
every command-line call and worker process would pay it, while most programs never
call them. A rule module that needs one writes ``from funcdiff._core.lazy import
scipy`` instead of ``import scipy.signal``; its code reads as before
(``scipy.signal.convolve(a, b)``), and the submodule is imported when a function of
it is first called, not when the rule is registered.

How: the first attribute of :data:`scipy` names a submodule. Once that submodule has
been imported (by anyone), attribute access returns SciPy's own objects. Before, it
returns a :class:`LazyReference`: a stand-in that knows its module and attribute path
(so it can name itself and serve as a registry key) and that imports the module and
forwards the call when called.

Examples
--------
>>> from funcdiff._core.lazy import LazyReference, scipy
>>> ref = LazyReference("scipy.signal", ("convolve",))
>>> ref.__name__, ref.__module__
('convolve', 'scipy.signal')
>>> ref([1.0, 2.0], [1.0, 1.0])
array([1., 3., 2.])
>>> import scipy.signal
>>> scipy.signal.convolve is ref.resolve()
True
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["LazyReference", "resolved", "scipy"]

_UNRESOLVED = object()


class LazyReference:
    """``module.path`` of a module that may not be imported yet; imported on first call.

    Parameters
    ----------
    module : str
        The module's import name (``"scipy.stats"``).
    path : tuple of str
        Attributes read from the module in turn (``("norm", "logpdf")``); empty for the
        module itself.

    Attribute access goes on lazily (``ref.norm.logpdf``) until the module has been
    imported; from then on it returns the real objects. ``__name__``, ``__qualname__``
    and ``__module__`` are answered without importing; ``__doc__`` imports.
    """

    def __init__(self, module: str, path: tuple[str, ...] = ()) -> None:
        self._module = module
        self._path = path
        self._target: Any = _UNRESOLVED
        # What names a function, answered without importing (the docs and error
        # messages read them); instance attributes shadow the class's own.
        self.__name__ = path[-1] if path else module.rpartition(".")[2]
        self.__qualname__ = ".".join(path) or self.__name__
        self.__module__ = module if path else module.rpartition(".")[0]

    def resolve(self) -> Any:
        """The object itself (importing its module if needed)."""
        target = self._target
        if target is _UNRESOLVED:
            target = importlib.import_module(self._module)
            for name in self._path:
                target = getattr(target, name)
            self._target = target
        return target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if self._module in sys.modules:
            return getattr(self.resolve(), name)
        if name.startswith("__") and name.endswith("__"):
            # Protocol probes (``__wrapped__``, ``__array_function__``, ``__code__``)
            # answer as for an opaque callable instead of importing the module.
            raise AttributeError(name)
        return LazyReference(self._module, (*self._path, name))

    def __getattribute__(self, name: str) -> Any:
        if name == "__doc__":  # the real object's, not this class's
            return getattr(object.__getattribute__(self, "resolve")(), "__doc__", None)
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        where = ".".join((self._module, *self._path))
        if self._target is _UNRESOLVED:
            return f"<{where}, imported on first use>"
        return repr(self._target)


def resolved(obj: Any) -> Any:
    """``obj`` itself, or the object a :class:`LazyReference` stands for (imported now)."""
    return obj.resolve() if isinstance(obj, LazyReference) else obj


class _LazyPackage:
    """``scipy`` whose submodules are :class:`LazyReference` until someone imports them."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        full = f"{self._name}.{name}"
        module = sys.modules.get(full)
        return module if module is not None else LazyReference(full)

    def __repr__(self) -> str:
        return f"<{self._name}, submodules imported on first use>"


#: Stands for the ``scipy`` package: ``scipy.signal.convolve`` names the function
#: without importing ``scipy.signal``, and calling it imports the module.
scipy: Any = _LazyPackage("scipy")
