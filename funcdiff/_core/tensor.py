"""The Tensor: an ndarray that records the operations applied to it.

A Tensor owns an ndarray (``.data``) and, when it requires grad, a place in the
recorded graph (``.grad_fn``). This module holds the state, its conversions and
hooks, and imports nothing above the core. The operators, the NumPy protocols
(``__array_ufunc__``, ``__array_function__``), indexing and ``backward`` are
installed on the class by :mod:`funcdiff._methods` when ``funcdiff`` is imported;
they run operations through :mod:`funcdiff.ops`, which computes the result on the
ndarrays and records a node when grad mode is on and an input requires grad.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, cast

import numpy as np

from funcdiff._core import grad_mode, tracing
from funcdiff._core.alternatives import NUMPY_CONSTRUCTION_HINT
from funcdiff._core.backends import backend_copy, host_copy_refused, is_foreign
from funcdiff._core.conversions import scipy_advice, scipy_caller
from funcdiff._core.graph import AccumulateGrad, Node, RemovableHandle

__all__ = ["Tensor", "tensor", "as_tensor", "wrap", "gradient_edge", "RemovableHandle"]
__all__ += ["values_read"]

_DIFFERENTIABLE_KINDS = "fc"
_NUMERIC_KINDS = "biufc"


def _type_name(obj: Any) -> str:
    return type(obj).__name__


def _as_data(data: Any, dtype: Any = None, copy: bool = True) -> np.ndarray:
    """Convert user input to a numeric ndarray, or raise a clear TypeError/ValueError."""
    if isinstance(data, Tensor):
        data = data.data
    if hasattr(type(data), "whole_batch"):
        # A batched value of funcdiff.func.vmap (see funcdiff._core.arrays): kept as it is.
        return data if dtype is None else data.astype(dtype)
    if isinstance(data, (str, bytes, dict, set, frozenset)) or data is None:
        raise TypeError(
            "tensor() expects a number, a (nested) list of numbers or an ndarray, "
            f"got {_type_name(data)}"
        )
    try:
        arr = np.array(data, dtype=dtype, copy=copy) if copy else np.asarray(data, dtype=dtype)
    except (ValueError, TypeError) as exc:
        if is_foreign(data):  # a device array that refuses conversion keeps its type
            return backend_copy(data, dtype, copy)
        msg = f"could not turn the given {_type_name(data)} into a rectangular array of numbers"
        raise ValueError(f"tensor() {msg}: {exc}") from None
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(
            "tensor() expects numbers (bool, integer, floating point or complex), "
            f"got {_type_name(data)} holding dtype {arr.dtype}"
        )
    return arr


def _check_can_require_grad(dtype: np.dtype) -> None:
    if dtype.kind not in _DIFFERENTIABLE_KINDS:
        raise RuntimeError(
            "only Tensors of floating point and complex dtype can require gradients "
            f"(this one has dtype {dtype})"
        )


if TYPE_CHECKING:
    # The signatures of the operators and methods funcdiff._methods installs on Tensor.
    _Binary: TypeAlias = Callable[["Tensor", Any], "Tensor"]
    _Unary: TypeAlias = Callable[["Tensor"], "Tensor"]


class Tensor:
    """An ndarray that records operations for reverse-mode differentiation.

    Create Tensors with :func:`funcdiff.tensor`. NumPy functions, ufuncs and
    operators accept Tensors and return Tensors; the operations are recorded when
    grad mode is on and an input requires grad.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> x = fd.tensor([0.0, 1.0], requires_grad=True)
    >>> y = np.sum(np.sin(x) * x)
    >>> y.backward()
    >>> x.grad
    tensor([0.        , 1.38177329])
    """

    __slots__ = (
        "data",
        "_requires_grad",
        "_grad",
        "grad_fn",
        "_output_nr",
        "_version_count",
        "_version_owner",
        "_accumulator",
        "_retains_grad",
        "_view_of",
        "__weakref__",
    )

    data: np.ndarray
    _requires_grad: bool
    _grad: Tensor | None
    grad_fn: Node | None
    _output_nr: int
    _version_count: int
    # The tensor that owns the memory and its version count (views, detached aliases).
    _version_owner: Tensor | None
    _accumulator: AccumulateGrad | None
    _retains_grad: bool
    _view_of: Tensor | None

    # NumPy defers to Tensor in mixed binary operations (ndarray + Tensor).
    __array_priority__ = 1000.0

    # The operators, __array_ufunc__/__array_function__, __getitem__/__setitem__, abs,
    # astype, copy and backward are installed from one table by funcdiff._methods.
    if TYPE_CHECKING:
        # What funcdiff._methods installs, declared for type checkers only: at run time
        # the class gets them when funcdiff is imported.
        __add__: ClassVar[_Binary]
        __radd__: ClassVar[_Binary]
        __sub__: ClassVar[_Binary]
        __rsub__: ClassVar[_Binary]
        __mul__: ClassVar[_Binary]
        __rmul__: ClassVar[_Binary]
        __truediv__: ClassVar[_Binary]
        __rtruediv__: ClassVar[_Binary]
        __floordiv__: ClassVar[_Binary]
        __rfloordiv__: ClassVar[_Binary]
        __mod__: ClassVar[_Binary]
        __rmod__: ClassVar[_Binary]
        __pow__: ClassVar[_Binary]
        __rpow__: ClassVar[_Binary]
        __matmul__: ClassVar[_Binary]
        __rmatmul__: ClassVar[_Binary]
        __neg__: ClassVar[_Unary]
        __pos__: ClassVar[_Unary]
        __abs__: ClassVar[_Unary]
        __invert__: ClassVar[_Unary]
        # Elementwise comparisons return Tensors, not bool (as ndarray's do).
        __eq__: ClassVar[_Binary]  # type: ignore[assignment]
        __ne__: ClassVar[_Binary]  # type: ignore[assignment]
        __lt__: ClassVar[_Binary]
        __le__: ClassVar[_Binary]
        __gt__: ClassVar[_Binary]
        __ge__: ClassVar[_Binary]
        __and__: ClassVar[_Binary]
        __or__: ClassVar[_Binary]
        __xor__: ClassVar[_Binary]
        __iadd__: ClassVar[_Binary]
        __isub__: ClassVar[_Binary]
        __imul__: ClassVar[_Binary]
        __itruediv__: ClassVar[_Binary]
        __ifloordiv__: ClassVar[_Binary]
        __imod__: ClassVar[_Binary]
        __ipow__: ClassVar[_Binary]
        __imatmul__: ClassVar[_Binary]
        exp: ClassVar[_Unary]
        log: ClassVar[_Unary]
        sin: ClassVar[_Unary]
        cos: ClassVar[_Unary]
        tanh: ClassVar[_Unary]
        sigmoid: ClassVar[_Unary]
        sqrt: ClassVar[_Unary]
        neg: ClassVar[_Unary]
        square: ClassVar[_Unary]
        pow: ClassVar[_Binary]
        abs: ClassVar[_Unary]
        copy: ClassVar[_Unary]
        __getitem__: ClassVar[_Binary]
        __setitem__: ClassVar[Callable[[Tensor, Any, Any], None]]
        __array_ufunc__: ClassVar[Callable[..., Any]]
        __array_function__: ClassVar[Callable[[Tensor, Any, Any, Any, Any], Any]]
        zero_: ClassVar[_Unary]
        astype: ClassVar[_Binary]

        def clamp(self, min: Any = None, max: Any = None) -> Tensor: ...  # noqa: A002

        def backward(
            self,
            gradient: Any = None,
            retain_graph: bool | None = None,
            create_graph: bool = False,
            inputs: Sequence[Tensor] | Tensor | None = None,
        ) -> None: ...

    def __init__(self, data: Any, dtype: Any = None, requires_grad: bool = False) -> None:
        arr = _as_data(data, dtype)
        if requires_grad:
            _check_can_require_grad(arr.dtype)
        self.data = arr
        self._requires_grad = bool(requires_grad)
        self._grad = None
        self.grad_fn = None
        self._output_nr = 0
        self._version_count = 0
        self._version_owner = None
        self._accumulator = None
        self._retains_grad = False
        self._view_of = None

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the data."""
        return self.data.shape

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self.data.ndim

    @property
    def size(self) -> int:
        """Number of elements."""
        return self.data.size

    @property
    def dtype(self) -> np.dtype:
        """NumPy dtype of the data."""
        return self.data.dtype

    @property
    def T(self) -> Tensor:
        """The transpose (axes reversed), recorded."""
        return cast(Tensor, np.transpose(self))

    @property
    def mT(self) -> Tensor:
        """The transpose of the last two axes, recorded."""
        return cast(Tensor, np.swapaxes(self, -1, -2))

    def __len__(self) -> int:
        return len(self.data)

    # ------------------------------------------------------------------ autograd state
    @property
    def requires_grad(self) -> bool:
        """Whether gradients are computed for this tensor."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    @property
    def is_leaf(self) -> bool:
        """True for tensors created by the user, and for every tensor that does not
        require grad; False for results of recorded operations."""
        return self.grad_fn is None

    @property
    def output_nr(self) -> int:
        """Which output of its ``grad_fn`` this tensor is (0 for leaves)."""
        return self._output_nr

    @property
    def retains_grad(self) -> bool:
        """True after ``retain_grad()`` on a non-leaf."""
        return self._retains_grad

    @property
    def _version(self) -> int:
        """In-place modification counter, shared with views and detached aliases.

        The count lives on the tensor that owns the memory (``_version_owner``), so
        every alias reads and bumps the same number.
        """
        owner = self._version_owner
        return (owner if owner is not None else self)._version_count

    @property
    def grad(self) -> Tensor | None:
        """Accumulated gradient (leaves, and non-leaves after ``retain_grad()``)."""
        if self.grad_fn is not None and not self._retains_grad and self._grad is None:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being "
                "accessed. Its .grad attribute won't be populated during backward(). "
                "If you indeed want the .grad field to be populated for a non-leaf "
                "Tensor, use .retain_grad() on the non-leaf Tensor.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and not isinstance(value, Tensor):
            value = Tensor(value)
        if value is not None and value.shape != self.shape:
            raise RuntimeError(
                f"assigned grad has shape {value.shape}, but the tensor has shape {self.shape}"
            )
        self._grad = value

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place (leaves only) and return ``self``.

        Examples
        --------
        >>> import funcdiff as fd
        >>> fd.tensor([1.0]).requires_grad_().requires_grad
        True
        """
        if self.grad_fn is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want "
                "to use a computed variable in a subgraph that doesn't require "
                "differentiation use var_no_grad = var.detach()."
            )
        if requires_grad:
            _check_can_require_grad(self.data.dtype)
        self._requires_grad = bool(requires_grad)
        return self

    def detach(self) -> Tensor:
        """A new leaf sharing the data (and version counter), cut from the graph.

        Examples
        --------
        >>> import funcdiff as fd
        >>> x = fd.tensor([1.0], requires_grad=True)
        >>> (x * 2).detach().requires_grad
        False
        """
        out = wrap(self.data, False, None, 0)
        out._version_owner = self._version_owner if self._version_owner is not None else self
        if tracing.TRACING[0]:
            tracer = tracing.current_tracer()
            if tracer is not None:
                tracer.derived(out, (self,))
        return out

    def detach_(self) -> Tensor:
        """Detach in place: make this tensor a leaf that does not require grad."""
        if self._view_of is not None and self._view_of._requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` on this non-leaf after backward (a no-op on leaves)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        tracer = tracing.current_tracer()
        if tracer is not None:
            tracer.refuse("retain_grad")
        import weakref

        node = self.grad_fn
        if node.retained is None:
            node.retained = {}
        node.retained[self._output_nr] = weakref.ref(self)
        self._retains_grad = True

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Call ``hook(grad)`` whenever the gradient of this tensor is computed.

        A hook that returns a Tensor replaces the gradient. Returns a handle whose
        ``remove()`` unregisters the hook.

        Examples
        --------
        >>> import funcdiff as fd
        >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
        >>> h = x.register_hook(lambda g: g * 2)
        >>> (x * x).sum().backward()
        >>> x.grad
        tensor([4., 8.])
        >>> h.remove()
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if not callable(hook):
            raise TypeError(f"register_hook expects a callable, got {_type_name(hook)}")
        tracer = tracing.current_tracer()
        if tracer is not None:
            tracer.refuse("register_hook")
        node, nr = self._gradient_edge()
        node.add_pre_hook(nr, hook)
        assert node.pre_hooks is not None  # add_pre_hook made it
        return RemovableHandle(node.pre_hooks[nr], hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> Any:
        """Call ``hook(tensor)`` after backward accumulated into this leaf's ``.grad``.

        Leaves that require grad only (an optimiser step per parameter, as in torch).
        Returns a handle whose ``remove()`` unregisters the hook.

        Examples
        --------
        >>> import funcdiff as fd
        >>> w = fd.tensor([1.0, 2.0], requires_grad=True)
        >>> seen = []
        >>> h = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
        >>> (w * w).sum().backward()
        >>> seen
        [[2.0, 4.0]]
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        if not callable(hook):
            raise TypeError(f"expected a callable hook, got {_type_name(hook)}")
        node = self._gradient_edge()[0]
        assert isinstance(node, AccumulateGrad)
        if node.post_accumulate is None:
            node.post_accumulate = []
        node.post_accumulate.append(hook)
        return RemovableHandle(node.post_accumulate, hook)

    def _gradient_edge(self) -> tuple[Node, int]:
        """The (node, output index) whose incoming gradient is this tensor's gradient
        (:func:`gradient_edge`)."""
        if self.grad_fn is not None:
            return self.grad_fn, self._output_nr
        if self._accumulator is None:
            self._accumulator = AccumulateGrad(self)
        return self._accumulator, 0

    # ------------------------------------------------------------------ conversion
    # Each way out of the graph keeps the derivative, carries none, is explicit (item, tolist,
    # detach, .data) or raises while grad mode is on: docs/concepts.md, "Leaving the graph".
    def numpy(self) -> np.ndarray:
        """The data as an ndarray (shared, not copied).

        Raises RuntimeError for a tensor that requires grad: call ``.detach().numpy()``
        to say explicitly that the gradient is not wanted. TypeError for device data
        (CuPy): ``.data`` is that array, ``.data.get()`` copies it to the host.
        """
        if type(self.data) is not np.ndarray and is_foreign(self.data):
            raise host_copy_refused("numpy()", self.data)
        if self._requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        _observed(self, "array", self.data)
        return self.data

    def item(self) -> Any:
        """The single element as a Python number (explicit, so allowed with requires_grad)."""
        if self.data.size != 1:
            raise ValueError(
                f"item() needs a tensor with exactly one element, got shape {self.shape}"
            )
        number = self.data.item()
        _observed(self, "item", number)
        return number

    def tolist(self) -> Any:
        """The data as (nested) Python lists; explicit like ``item()``, so always allowed."""
        _observed(self, "array", self.data)
        return self.data.tolist()

    def _plain_number(self, conversion: str) -> Any:
        """``item()`` for ``conversion`` (``float()`` ...); raises if a derivative would be lost."""
        number = self.item()  # a tensor of several elements: item()'s ValueError first
        if not (self._requires_grad and grad_mode.is_grad_enabled()):
            return number
        caller = scipy_caller()
        by = (
            f" ({caller} called it: SciPy functions do not accept Tensors; "
            f"{scipy_advice(caller)[:-1]})"
            if caller
            else ""
        )
        raise RuntimeError(
            f"Can't call {conversion} on a Tensor that requires grad{by}: the Python number "
            "would carry no derivative, so gradients through it would be silently wrong. (NumPy "
            "calls float() when a Tensor is stored into an ndarray, as in out[i] = t with "
            "out = np.zeros(n); math.exp and the other math functions call it too.) To keep the "
            "derivative, store into out = np.zeros_like(x), a Tensor that records the "
            "assignment, or build the result with np.stack or funcdiff.numpy (import "
            "funcdiff.numpy as np; its np.array([t1, t2]) records), and use np.exp, np.floor "
            "... instead of the math functions. To drop the derivative on purpose, use "
            "tensor.item() or "
            f"{conversion[:-1]}tensor.detach())."
        )

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if type(self.data) is not np.ndarray and is_foreign(self.data):
            raise host_copy_refused("np.asarray() (or a function without a rule)", self.data)
        if self._requires_grad and grad_mode.is_grad_enabled():
            caller = scipy_caller()
            how = (
                "A NumPy or SciPy function without a funcdiff rule was probably called on it, "
                "or it was stored into a plain ndarray (out[...] = t; make out with "
                "np.zeros_like(x) instead), or cast with a NumPy scalar type (np.float64(t); "
                "t.astype(np.float64) records). " + NUMPY_CONSTRUCTION_HINT
            )
            if caller is not None:
                how = (
                    f"{caller} was called on it, and SciPy functions do not accept Tensors: "
                    + scipy_advice(caller)
                )
            raise RuntimeError(
                "Can't convert a Tensor that requires grad to an ndarray: the gradient "
                f"would be lost. {how} Use tensor.detach() to drop the gradient explicitly."
            )
        data = self.data
        _observed(self, "array", data)
        if dtype is not None and data.dtype != dtype:
            if copy is False:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            return data.astype(dtype)
        return data.copy() if copy else data

    def __float__(self) -> float:
        return float(self._plain_number("float()"))

    def __int__(self) -> int:
        return int(self._plain_number("int()"))

    def __complex__(self) -> complex:
        return complex(self._plain_number("complex()"))

    def __bool__(self) -> bool:
        # Allowed on a scalar that requires grad: a branch (``if x > 0:``) only picks which
        # operations run, each of them recorded, so no derivative is lost (the branch test's
        # own is zero almost everywhere). Several elements: NumPy's "ambiguous" ValueError.
        outcome = bool(self.data)
        _observed(self, "bool", outcome)
        return outcome

    def __index__(self) -> int:
        # Only integer tensors convert, and they never require grad: nothing can be lost.
        index = self.data.__index__()
        _observed(self, "int", index)
        return index

    def __format__(self, format_spec: str) -> str:
        # Display, not computation (as in torch): text re-enters arithmetic only via float(text).
        return format(self.data, format_spec) if format_spec else str(self)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        # One recorded node for all the rows (a, b, c = y), not a getitem per row.
        return iter(np.unstack(self)) if _UNSTACK else (self[i] for i in range(len(self.data)))

    def __repr__(self) -> str:
        data = self.data  # a device array (CuPy) shows itself: its repr reads the device
        foreign = type(data) is not np.ndarray and is_foreign(data)
        body = repr(data) if foreign else np.array2string(data, separator=", ", prefix="tensor(")
        extra = ""
        if self.data.dtype not in (np.float64, np.int64, np.bool_):
            extra += f", dtype={self.data.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{self.grad_fn.name()}>"
        elif self._requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    __hash__ = object.__hash__

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self.grad_fn is not None:  # it would come back as a leaf, cut from its inputs
            raise RuntimeError(
                "Can't pickle a Tensor that is not a graph leaf: its graph can't be pickled, and "
                "the copy would be a new leaf, cut from the inputs it was computed from. "
                "Pickle tensor.detach() to keep the values."
            )
        return (_rebuild, (self.data, self._requires_grad))

    def __copy__(self) -> Tensor:
        if self._requires_grad and grad_mode.is_grad_enabled():
            raise RuntimeError(
                "copy.copy() of a Tensor that requires grad would be a detached alias (the gradient"
                " would be lost). Use tensor.copy() for a recorded copy, or tensor.detach()."
            )
        return self.detach()

    def __deepcopy__(self, memo: dict) -> Tensor:
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support deepcopy"
            )
        return Tensor(self.data.copy(), requires_grad=self._requires_grad)

    # ------------------------------------------------------------------ NumPy-like methods
    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tensor:
        """Sum over ``axis`` (see ``numpy.sum``)."""
        return np.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tensor:
        """Mean over ``axis`` (see ``numpy.mean``)."""
        return np.mean(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Tensor:
        """Product over ``axis`` (see ``numpy.prod``); exact and finite with zeros."""
        return np.prod(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Maximum over ``axis``; ties share the gradient evenly."""
        return np.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Minimum over ``axis``; ties share the gradient evenly."""
        return np.min(self, axis=axis, keepdims=keepdims)

    def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """Variance over ``axis`` with ``ddof`` (see ``numpy.var``)."""
        return np.var(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """Standard deviation over ``axis`` with ``ddof`` (see ``numpy.std``)."""
        return np.std(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def cumsum(self, axis: Any = None) -> Tensor:
        """Cumulative sum along ``axis`` (flattened when None)."""
        return cast(Tensor, np.cumsum(self, axis=axis))

    def reshape(self, *shape: Any, order: Literal["C", "F", "A"] = "C") -> Tensor:
        """Reshape (accepts ``reshape(2, 3)`` and ``reshape((2, 3))``)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return cast(Tensor, np.reshape(self, shape, order=order))

    def transpose(self, *axes: Any) -> Tensor:
        """Permute axes (reversed when none are given)."""
        order: Any = axes
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            order = axes[0]
        return cast(Tensor, np.transpose(self, order or None))

    def flatten(self) -> Tensor:
        """A flattened copy (1-d)."""
        return cast(Tensor, np.reshape(self, (-1,)))

    def ravel(self) -> Tensor:
        """The flattened tensor (1-d)."""
        return cast(Tensor, np.ravel(self))

    def squeeze(self, axis: Any = None) -> Tensor:
        """Remove axes of length one."""
        return cast(Tensor, np.squeeze(self, axis=axis))

    def clip(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """Clip values to ``[min, max]``; the gradient is 0 at and beyond the bounds."""
        return cast(Tensor, np.clip(self, min, max))

    def dot(self, other: Any) -> Tensor:
        """Dot product (see ``numpy.dot``)."""
        return np.dot(self, other)


_UNSTACK = hasattr(np, "unstack")  # NumPy >= 2.1

# ``object.__new__`` called directly skips the attribute lookup of ``Tensor.__new__``.
_new_object = object.__new__


def _observed(t: Tensor, kind: str, value: Any) -> None:
    """Report a conversion of ``t`` to a Python value or ndarray to this thread's
    observer, if any (``funcdiff.sparse`` and ``funcdiff.replay`` guard on them)."""
    observer = tracing.current_observer()
    if observer is not None:
        observer.concretize(t, kind, value)


def values_read(x: Any) -> Any:
    """The numbers of ``x`` for a composite rule that computes with them outside the
    derivative (a stabilising shift, a mask of signs, ``interp``'s segment per point).

    The ndarray itself, normally. While a program is traced or observed
    (``funcdiff.sparse``, ``funcdiff.replay``) a detached Tensor instead: what the rule
    computes from it is then traced too (replayed with new values, tainted for sparsity),
    and a conversion of it to an ndarray or a Python value is a guard, not a constant.
    """
    if not isinstance(x, Tensor):
        return x
    if tracing.is_watched():
        return x.detach()
    return x.data


def wrap(data: np.ndarray, requires_grad: bool, grad_fn: Node | None, output_nr: int) -> Tensor:
    """Build a Tensor around ``data`` without validation (the hot path).

    For the operation layer and the engine, which make every result Tensor this way:
    ``data`` must already be a numeric ndarray, and ``grad_fn``/``output_nr`` name
    the node (and which of its outputs) that computed it, or None and 0 for a leaf.

    Examples
    --------
    >>> import numpy as np
    >>> wrap(np.array([1.0, 2.0]), False, None, 0)
    tensor([1., 2.])
    """
    t = _new_object(Tensor)
    t.data = data
    t._requires_grad = requires_grad
    t._grad = None
    t.grad_fn = grad_fn
    t._output_nr = output_nr
    t._version_count = 0
    t._version_owner = None
    t._accumulator = None
    t._retains_grad = False
    t._view_of = None
    return t


def gradient_edge(t: Tensor) -> tuple[Node, int]:
    """The graph edge ``(node, output index)`` where ``t``'s gradient arrives: the node
    that computed it, or a leaf's accumulator. Forward mode seeds tangents there."""
    return t._gradient_edge()


def _rebuild(data: np.ndarray, requires_grad: bool) -> Tensor:
    return Tensor(data, requires_grad=requires_grad)


def as_tensor(data: Any, dtype: Any = None) -> Tensor:
    """A Tensor that shares memory with ``data`` when no conversion is needed.

    Like :func:`tensor`, but an ndarray of the requested dtype is wrapped without a
    copy (a Tensor is returned as it is), so changes to the array show in the Tensor.
    The result does not require grad.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> a = np.array([1.0, 2.0])
    >>> t = fd.as_tensor(a)
    >>> t.data is a
    True
    """
    if isinstance(data, Tensor) and (dtype is None or data.dtype == np.dtype(dtype)):
        return data
    return wrap(_as_data(data, dtype, copy=False), False, None, 0)


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Create a leaf Tensor holding a copy of ``data``.

    Parameters
    ----------
    data : array_like
        A number, a (nested) list of numbers, an ndarray or a Tensor. Python floats
        become float64, Python ints int64 and Python complex numbers complex128;
        arrays keep their dtype.
    dtype : dtype, optional
        Cast to this dtype.
    requires_grad : bool
        Record operations on this tensor; only floating-point and complex tensors
        may (see the "Complex numbers" page for the gradient convention).

    Returns
    -------
    Tensor

    Raises
    ------
    TypeError
        For strings, dicts, None and objects.
    ValueError
        For ragged nested lists.
    RuntimeError
        For ``requires_grad=True`` on a dtype that is neither floating nor complex.

    Examples
    --------
    >>> import funcdiff as fd
    >>> fd.tensor([1.0, 2.0], requires_grad=True)
    tensor([1., 2.], requires_grad=True)
    >>> fd.tensor(3).dtype
    dtype('int64')
    """
    return Tensor(data, dtype=dtype, requires_grad=requires_grad)
