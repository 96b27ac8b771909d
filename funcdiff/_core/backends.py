"""Array types other than NumPy's ndarray as the data of Tensors (CuPy on a GPU).

funcdiff's rules are NumPy code. NumPy's dispatch protocols (NEP 13
``__array_ufunc__``, NEP 18 ``__array_function__``) send each call to the type that
holds the data, so the same rules run on any array type that implements both and
follows NumPy's API: a *backend array*. This module says what counts as one, names it
in messages, and finds the two things dispatch cannot reach, through one registry keyed
by the top-level module name of the array's type (``"cupy"`` for ``cupy.ndarray``):

* the backend's special-function module (``cupyx.scipy.special``): ``scipy.special``
  functions that the backend's ``__array_ufunc__`` does not answer run there;
* the backend's array namespace (``cupy``): ``add.at`` with a tuple of indices, which
  NumPy's ufunc protocol cannot pass on;
* the backend's ``scipy.linalg`` (``cupyx.scipy.linalg``): the ``scipy.linalg``
  functions it has (``solve_triangular``, ``expm``, ``lu_solve`` ...), which SciPy's
  Python code cannot run on device arrays;
* the backend's ``scipy.signal`` (``cupyx.scipy.signal``): ``convolve``, likewise.

A backend array never becomes an ndarray behind the user's back: where a function
cannot run on it, :func:`unsupported` builds the TypeError that names the function and
the array type.

Examples
--------
>>> import numpy as np
>>> is_array(np.zeros(2)), is_foreign(np.zeros(2)), is_array([1.0])
(True, False, False)
>>> special_module(np.zeros(2)).__name__
'scipy.special'
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "is_array",
    "is_foreign",
    "as_array",
    "copy_array",
    "zeros",
    "type_name",
    "register_backend",
    "registered_backends",
]
__all__ += ["special_module", "namespace", "first_foreign", "unsupported", "check_same_kind"]
__all__ += ["backend_copy", "host_copy_refused", "on_device_of", "refuse_vjp", "refuse_device"]
__all__ += ["linalg_module", "backend_linalg", "backend_signal", "kept"]

_ndarray = np.ndarray
# Per type: whether its instances are backend arrays (looked up once per type).
_FOREIGN: dict[type, bool] = {}


def _foreign_type(t: type) -> bool:
    known = _FOREIGN.get(t)
    if known is None:
        known = (
            not issubclass(t, _ndarray)
            and getattr(t, "__array_ufunc__", None) is not None
            and getattr(t, "__array_function__", None) is not None
            and hasattr(t, "dtype")
            and hasattr(t, "shape")
            # a funcdiff Tensor has both protocols too; it holds an array, it is not one
            and not hasattr(t, "grad_fn")
            # nor is a transform's own array type (funcdiff.func.vmap's batched values)
            and not hasattr(t, "whole_batch")
        )
        _FOREIGN[t] = known
    return known


def is_foreign(x: Any) -> bool:
    """Whether ``x`` is an array of a backend other than NumPy (``cupy.ndarray``):
    an object whose type implements ``__array_ufunc__`` and ``__array_function__`` and
    has ``dtype`` and ``shape``, other than an ndarray or a Tensor."""
    t = type(x)
    return t is not _ndarray and _foreign_type(t)


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array of some backend: an ndarray or :func:`is_foreign`."""
    return isinstance(x, _ndarray) or _foreign_type(type(x))


def as_array(x: Any) -> Any:
    """``x`` itself when it is a backend array, else ``np.asarray(x)``: never a copy of
    device data to the host."""
    return x if is_foreign(x) else np.asarray(x)


def copy_array(x: Any, dtype: Any = None) -> Any:
    """A copy of ``x`` of its own type (cast to ``dtype`` if given): ``np.array(x,
    copy=True)`` for anything but a backend array, whose copy stays on its device."""
    if is_foreign(x):
        return x.astype(x.dtype if dtype is None else dtype, copy=True)
    return np.array(x, dtype=dtype, copy=True)


def kept(x: Any) -> Any:
    """``x`` itself when it is a backend array or a transform's own array type
    (``funcdiff.func.vmap``'s batched values), else ``np.asarray(x)``: a cotangent as
    the engine keeps it."""
    return x if is_foreign(x) or hasattr(type(x), "whole_batch") else np.asarray(x)


def zeros(shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
    """Zeros of ``shape`` and ``dtype``, of ``like``'s array type when it is a backend
    array (NEP 35's ``like=``), an ndarray otherwise."""
    if like is not None and is_foreign(like):
        return np.zeros(shape, dtype=dtype, like=like)
    return np.zeros(shape, dtype=dtype)


def backend_copy(data: Any, dtype: Any, copy: bool) -> Any:
    """``data``, a backend array, as a Tensor's data: the same type, copied when
    ``copy``, cast to ``dtype``; never converted to an ndarray."""
    if data.dtype.kind not in "biufc":
        raise TypeError(
            "tensor() expects numbers (bool, integer, floating point or complex), "
            f"got {type_name(data)} holding dtype {data.dtype}"
        )
    if dtype is not None and data.dtype != np.dtype(dtype):
        return data.astype(np.dtype(dtype))
    return data.copy() if copy else data


def host_copy_refused(what: str, data: Any) -> TypeError:
    """The TypeError for ``what`` (``numpy()``) on a Tensor holding a backend array."""
    return TypeError(
        f"{what} of a Tensor holding a {type_name(data)} array would copy it to the host, "
        "which funcdiff never does implicitly. Use tensor.data for the array itself, and "
        "the array type's own transfer for a NumPy copy (CuPy: tensor.detach().data.get())."
    )


def on_device_of(host: Any, ref: Any) -> Any:
    """A constant that a rule built on the host (a mask, an identity, weights) as an
    array of ``ref``'s type when ``ref`` (or the data of a Tensor ``ref``) is a backend
    array; ``host`` itself otherwise, at the cost of one type test."""
    data = ref.data if hasattr(type(ref), "grad_fn") else ref
    if type(data) is _ndarray or not is_foreign(data) or is_foreign(host):
        return host
    return np.asarray(host, like=data)


def type_name(x: Any) -> str:
    """The type of ``x`` with its module (``cupy.ndarray``: CuPy's class is also called
    ``ndarray``)."""
    t = type(x)
    module = getattr(t, "__module__", "") or ""
    return f"{module}.{t.__qualname__}" if module and module != "builtins" else t.__qualname__


def first_foreign(items: Any) -> Any:
    """The first backend array among ``items`` (one level into lists and tuples, and
    the data of Tensors), or None."""
    for a in items:
        a = getattr(a, "data", a) if hasattr(a, "grad_fn") else a
        if type(a) in (list, tuple):
            found = first_foreign(a)
            if found is not None:
                return found
        elif is_foreign(a):
            return a
    return None


@dataclass(frozen=True)
class _Backend:
    namespace: str | None
    special: str | None
    linalg: str | None = None
    signal: str | None = None


_REGISTRY: dict[str, _Backend] = {
    "cupy": _Backend("cupy", "cupyx.scipy.special", "cupyx.scipy.linalg", "cupyx.scipy.signal")
}


def register_backend(
    module: str,
    *,
    namespace: str | None = None,
    special: str | None = None,
    linalg: str | None = None,
    signal: str | None = None,
) -> None:
    """Tell funcdiff where an array type's own functions live.

    Parameters
    ----------
    module : str
        The top-level module name of the array type (``"cupy"`` for ``cupy.ndarray``).
    namespace : str, optional
        The import path of its NumPy-like namespace, ``"package.module"`` or
        ``"package.module:attribute"`` (``"cupy"``): funcdiff calls its ``add.at`` for
        scatters with tuple indices.
    special : str, optional
        The import path of its special-function module (``"cupyx.scipy.special"``):
        a ``scipy.special`` function that the type's ``__array_ufunc__`` does not
        answer runs as the function of the same name there.
    linalg : str, optional
        The import path of its ``scipy.linalg`` (``"cupyx.scipy.linalg"``): a
        ``scipy.linalg`` function refused by the array type runs as the function of the
        same name there, where it has one.
    signal : str, optional
        The import path of its ``scipy.signal`` (``"cupyx.scipy.signal"``): the
        convolutions run as its ``convolve``.

    Examples
    --------
    >>> import funcdiff.backends as backends
    >>> backends.register_backend("cupy", namespace="cupy", special="cupyx.scipy.special")
    >>> backends.registered_backends()["cupy"]
    ('cupy', 'cupyx.scipy.special')
    """
    if not isinstance(module, str) or not module or "." in module:
        raise TypeError(f"module must be a top-level module name such as 'cupy', got {module!r}")
    paths = (("namespace", namespace), ("special", special), ("linalg", linalg), ("signal", signal))
    for label, value in paths:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{label} must be an import path (str) or None, got {value!r}")
    _REGISTRY[module] = _Backend(namespace, special, linalg, signal)


def registered_backends() -> dict[str, tuple[str | None, str | None]]:
    """The registry: ``{top-level module: (namespace, special-function module)}``
    (:func:`linalg_module` and :func:`backend_signal` read the ``scipy.linalg`` and
    ``scipy.signal`` counterparts)."""
    return {k: (b.namespace, b.special) for k, b in _REGISTRY.items()}


def linalg_module(x: Any) -> Any:
    """The ``scipy.linalg`` counterpart registered for ``x``'s type, or None."""
    return _entry(x, "linalg") if is_foreign(x) else None


def backend_linalg(name: str, args: Any) -> Any:
    """The backend's own ``scipy.linalg.<name>`` for the first backend array among
    ``args``, or None (no backend array, none registered, or no such function)."""
    found = first_foreign(args)
    module = None if found is None else linalg_module(found)
    return None if module is None else getattr(module, name, None)


def backend_signal(name: str, args: Any) -> Any:
    """The backend's own ``scipy.signal.<name>`` for the first backend array among
    ``args``, or None (no backend array, none registered, or no such function)."""
    found = first_foreign(args)
    module = None if found is None else _entry(found, "signal")
    return None if module is None else getattr(module, name, None)


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, attr) if attr else obj


def _entry(x: Any, what: str) -> Any:
    top = (getattr(type(x), "__module__", "") or "").partition(".")[0]
    backend = _REGISTRY.get(top)
    path = None if backend is None else getattr(backend, what)
    if path is None:
        return None
    try:
        return _load(path)
    except ImportError as exc:
        raise TypeError(
            f"the {what} module {path!r} registered for {type_name(x)} arrays cannot be "
            f"imported: {exc}"
        ) from None


def special_module(x: Any) -> Any:
    """The special-function module for ``x``'s type: ``scipy.special`` for ndarrays and
    anything that is not a backend array (Tensors dispatch by themselves), the
    registered one for a backend array, None where none is registered."""
    if not is_foreign(x):
        import scipy.special

        return scipy.special
    return _entry(x, "special")


def namespace(x: Any) -> Any:
    """The NumPy-like namespace of ``x``'s type: ``numpy`` for ndarrays (and anything
    that is not a backend array), the registered one for a backend array.

    Raises TypeError for a backend array with no registered namespace."""
    if not is_foreign(x):
        return np
    found = _entry(x, "namespace")
    if found is None:
        raise TypeError(
            f"no array namespace is registered for {type_name(x)} arrays: call "
            "funcdiff.backends.register_backend with its namespace"
        )
    return found


def unsupported(
    name: str, x: Any, exc: BaseException | None = None, vjp: bool = False
) -> TypeError:
    """The TypeError for ``name`` (a NumPy/SciPy function) that cannot run on the backend
    array ``x``: it names both, and never falls back to a host copy."""
    role = "the derivative of " if vjp else ""
    cause = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    return TypeError(
        f"{role}{name} cannot run on {type_name(x)} arrays: the array type does not "
        f"implement what it needs{cause}. funcdiff never copies such arrays to the host "
        "implicitly; move the data to NumPy yourself (for CuPy: x.get()) if the host is "
        "what you want"
    )


def refuse_vjp(node: Any, grads: Any, exc: TypeError) -> None:
    """A node's vjp raised ``exc``: raise :func:`unsupported` for it when a cotangent
    is a backend array; return (the caller re-raises ``exc``) otherwise."""
    found = first_foreign(grads)
    if found is not None:
        rule = getattr(node, "rule", None)
        raise unsupported(getattr(rule, "name", None) or node.name(), found, exc, True) from None


def refuse_device(inputs: Any, where: str) -> None:
    """Raise a TypeError naming ``where`` (a NumPy-only entry point: the finite-difference
    checkers) when ``inputs`` (a Tensor, an array or a sequence of them) hold a backend
    array."""
    items = inputs if isinstance(inputs, (list, tuple)) else (inputs,)
    found = first_foreign(items)
    if found is not None:
        raise TypeError(
            f"{where} works on NumPy arrays only (its finite differences run on the host), "
            f"got {type_name(found)}: check the function on NumPy inputs"
        )


def check_same_kind(where: str, arrays: Any) -> None:
    """Raise a TypeError when ``arrays`` (values, not indices) mix ndarrays with backend
    arrays, or two backend types; ``where`` names the caller."""
    seen: type | None = None
    host = False
    for a in arrays:
        if isinstance(a, _ndarray):
            host = True
        elif is_foreign(a):
            if seen is not None and type(a) is not seen:
                raise TypeError(
                    f"{where} mixes {type_name(a)} and {seen.__module__}.{seen.__qualname__} "
                    "arrays; use one array type"
                )
            seen = type(a)
    if host and seen is not None:
        raise TypeError(
            f"{where} mixes host numpy.ndarray values with "
            f"{seen.__module__}.{seen.__qualname__} arrays: move them to one device first"
        )
