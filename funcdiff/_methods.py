"""The Tensor's operators and NumPy-protocol methods, installed from one table.

The core Tensor (:mod:`funcdiff._core.tensor`) holds state and conversions only; it
imports nothing that runs operations. This module, which sits above the operations
(:mod:`funcdiff.ops`) and the engine (:mod:`funcdiff.autograd`), gives the class its
operators, ``__array_ufunc__``/``__array_function__``, indexing, ``astype``, ``copy``
and ``backward``, by ``setattr`` when ``funcdiff`` is imported (the pattern of JAX's
``array_methods.py`` and HIPS autograd's ``numpy_boxes.py``).

Each operator is a plain function that goes straight to the operation layer: an
operator with a ufunc rule calls :func:`~funcdiff.ops.dispatch.call_positional` on
the rule (looked up per call, so a rule registered later is used), the others
:func:`~funcdiff.ops.dispatch.call_ufunc`, which refuses a ufunc without a rule with a
clear error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import FunctionType
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import scipy.special

from funcdiff._core.registry import UFUNC_RULES
from funcdiff._core.tensor import Tensor
from funcdiff.autograd import engine
from funcdiff.ops.dispatch import (
    array_function,
    astype,
    call_positional,
    call_ufunc,
    getitem,
    matrix_product,
    register_matrix_type,
)
from funcdiff.ops.inplace import inplace_ufunc, setitem
from funcdiff.ops.protocol import array_ufunc

__all__ = ["TENSOR_OPERATORS", "TENSOR_METHODS", "install"]

#: The operator table: ``(name, ufunc, via)`` for ``Tensor.__{name}__``. ``via`` is
#: ``"rule"`` (the ufunc's rule, on the fast positional path), ``"rule+r"`` (also the
#: reflected ``__r{name}__``), ``"ufunc"``/``"ufunc+r"`` (through ``call_ufunc``) or
#: ``"inplace"`` (``__i{name}__``, NumPy's in-place semantics, recorded as a rebase).
TENSOR_OPERATORS: tuple[tuple[str, np.ufunc, str], ...] = (
    ("add", np.add, "rule+r"),
    ("sub", np.subtract, "rule+r"),
    ("mul", np.multiply, "rule+r"),
    ("truediv", np.true_divide, "rule+r"),
    ("floordiv", np.floor_divide, "ufunc+r"),
    ("mod", np.remainder, "ufunc+r"),
    ("pow", np.power, "rule+r"),
    ("matmul", np.matmul, "rule+r"),
    ("neg", np.negative, "rule"),
    ("pos", np.positive, "ufunc"),
    ("abs", np.absolute, "ufunc"),
    ("invert", np.invert, "ufunc"),
    ("eq", np.equal, "ufunc"),
    ("ne", np.not_equal, "ufunc"),
    ("lt", np.less, "ufunc"),
    ("le", np.less_equal, "ufunc"),
    ("gt", np.greater, "ufunc"),
    ("ge", np.greater_equal, "ufunc"),
    ("and", np.bitwise_and, "ufunc"),
    ("or", np.bitwise_or, "ufunc"),
    ("xor", np.bitwise_xor, "ufunc"),
    ("add", np.add, "inplace"),
    ("sub", np.subtract, "inplace"),
    ("mul", np.multiply, "inplace"),
    ("truediv", np.true_divide, "inplace"),
    ("floordiv", np.floor_divide, "inplace"),
    ("mod", np.remainder, "inplace"),
    ("pow", np.power, "inplace"),
    ("matmul", np.matmul, "inplace"),
)

_UNARY = frozenset({"neg", "pos", "abs", "invert"})

#: The torch-style elementwise methods: ``(name, ufunc)`` for ``Tensor.name(...)``, which
#: is ``ufunc(self, ...)`` recorded through the ufunc's rule (``x.exp()`` is
#: ``np.exp(x)``, ``x.pow(p)`` is ``np.power(x, p)``). ``abs`` is a method of its own.
TENSOR_METHODS: tuple[tuple[str, np.ufunc], ...] = (
    ("exp", np.exp),
    ("log", np.log),
    ("sin", np.sin),
    ("cos", np.cos),
    ("tanh", np.tanh),
    ("sigmoid", scipy.special.expit),
    ("sqrt", np.sqrt),
    ("neg", np.negative),
    ("square", np.square),
    ("pow", np.power),
)


#: Operand types known not to defer (the common ones, and every other type on first
#: sight), answered by one set lookup inline in each operator so that the hot path pays
#: no extra call.
_PLAIN: set[type] = {Tensor, np.ndarray, float, int, bool, complex, np.float64, np.float32}
#: Operand types whose own reflected operators take a Tensor: scipy.sparse matrices and
#: funcdiff.sparse.csr_array, which NumPy would otherwise take for 0-d objects (``x * A``
#: of an ``spmatrix`` is its matrix product).
_DEFERRING: set[type] = set()


def _defers(other: Any) -> bool:
    """Whether ``tensor op other`` must return NotImplemented so that Python asks
    ``other``'s reflected operator (operands marked ``__funcdiff_defers_matmul__``)."""
    cls = type(other)
    if cls in _DEFERRING:
        return True
    if getattr(cls, "__funcdiff_defers_matmul__", False):
        _DEFERRING.add(cls)
        register_matrix_type(cls)
        return True
    _PLAIN.add(cls)
    return False


def _any_matrix(args: Any) -> bool:
    """Whether an operand is a scipy.sparse (or funcdiff.sparse) matrix."""
    return any(type(a) not in _PLAIN and _defers(a) for a in args)


#: NumPy's products, which would multiply a sparse matrix as a 0-d object array.
_PRODUCTS = {
    f
    for f in (
        np.dot,
        np.inner,
        np.vdot,
        np.outer,
        np.kron,
        np.tensordot,
        np.einsum,
        np.cross,
        *(getattr(np.linalg, n, None) for n in ("matmul", "tensordot", "outer", "vecdot", "cross")),
        getattr(np, "vecdot", None),
    )
    if f is not None
}


def _by_rule(ufunc: np.ufunc, unary: bool) -> tuple[Callable, Callable]:
    """``self op other`` and ``other op self`` through the ufunc's rule."""
    if unary:

        def unary_op(self: Tensor) -> Tensor:
            return call_positional(UFUNC_RULES[ufunc], (self,))

        return unary_op, unary_op

    def op(self: Tensor, other: Any) -> Tensor:
        if type(other) not in _PLAIN and _defers(other):
            return NotImplemented
        return call_positional(UFUNC_RULES[ufunc], (self, other))

    def rop(self: Tensor, other: Any) -> Tensor:
        return call_positional(UFUNC_RULES[ufunc], (other, self))

    return op, rop


def _by_ufunc(ufunc: np.ufunc, unary: bool) -> tuple[Callable, Callable]:
    """``self op other`` and ``other op self`` through ``call_ufunc``."""
    if unary:

        def unary_op(self: Tensor) -> Tensor:
            return call_ufunc(ufunc, self)

        return unary_op, unary_op

    def op(self: Tensor, other: Any) -> Tensor:
        if type(other) not in _PLAIN and _defers(other):
            return NotImplemented
        return call_ufunc(ufunc, self, other)

    def rop(self: Tensor, other: Any) -> Tensor:
        return call_ufunc(ufunc, other, self)

    return op, rop


def _in_place(ufunc: np.ufunc) -> Callable:
    def op(self: Tensor, other: Any) -> Tensor:
        return inplace_ufunc(ufunc, self, other)

    return op


def _ufunc_method(name: str, ufunc: np.ufunc) -> Callable:
    """``Tensor.name(*others)``: ``ufunc(self, *others)`` through the ufunc's rule."""
    qualified = f"scipy.special.{ufunc.__name__}" if ufunc is scipy.special.expit else None
    qualified = qualified or f"numpy.{ufunc.__name__}"
    if ufunc.nin == 1:

        def unary_method(self: Tensor) -> Tensor:
            rule = UFUNC_RULES.get(ufunc)
            return call_positional(rule, (self,)) if rule else call_ufunc(ufunc, self)

        unary_method.__doc__ = f"Elementwise ``{qualified}`` of this tensor (``x.{name}()``)."
        return unary_method

    def method(self: Tensor, other: Any) -> Tensor:
        rule = UFUNC_RULES.get(ufunc)
        args = (self, other)
        return call_positional(rule, args) if rule else call_ufunc(ufunc, *args)

    method.__doc__ = f"Elementwise ``{qualified}(x, other)`` (``x.{name}(other)``)."
    return method


def _operators() -> dict[str, Callable]:
    """The dunder methods of :data:`TENSOR_OPERATORS`, by name."""
    methods: dict[str, Callable] = {}
    for name, ufunc, via in TENSOR_OPERATORS:
        if via == "inplace":
            methods[f"__i{name}__"] = _in_place(ufunc)
            continue
        make = _by_rule if via.startswith("rule") else _by_ufunc
        op, rop = make(ufunc, name in _UNARY)
        methods[f"__{name}__"] = op
        if via.endswith("+r"):
            methods[f"__r{name}__"] = rop
    for name, ufunc in TENSOR_METHODS:
        methods[name] = _ufunc_method(name, ufunc)
    return methods


if TYPE_CHECKING:
    # The methods are Tensor's: type-check them as such.
    _MethodsBase = Tensor
else:
    _MethodsBase = object


class _Methods(_MethodsBase):
    """The Tensor methods that are more than one table row (installed on Tensor)."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            rule = UFUNC_RULES.get(ufunc)
            if rule is not None:
                return call_positional(rule, inputs)  # it hands sparse operands over
        if _any_matrix(inputs):  # np.add.outer(A, x), A scipy.sparse
            return matrix_product(ufunc, method, inputs, kwargs)
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func in _PRODUCTS and _any_matrix(args):  # np.dot(A, x), A scipy.sparse
            return matrix_product(func, "__call__", args, kwargs)
        return array_function(func, args, kwargs)

    def __getitem__(self, index: Any) -> Tensor:
        return getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        setitem(self, index, value)

    def abs(self) -> Tensor:
        """Elementwise absolute value (``abs'(0) = 0``)."""
        return call_ufunc(np.absolute, self)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """Clip values to ``[min, max]``, torch's name for ``np.clip(x, min, max)``.

        The gradient follows ``np.clip``: 1 strictly inside the bounds, 0 at and beyond
        them (torch passes the gradient at a bound itself).

        Examples
        --------
        >>> import funcdiff as fd
        >>> fd.tensor([-2.0, 0.5, 3.0]).clamp(-1.0, 1.0)
        tensor([-1. ,  0.5,  1. ])
        """
        return cast(Tensor, np.clip(self, min, max))

    def zero_(self) -> Tensor:
        """Fill with zeros in place and return this tensor (torch's ``zero_``).

        Allowed on tensors that do not require grad and on results of recorded
        operations (the gradient to their history becomes zero); refused on a leaf that
        requires grad, unless under :func:`funcdiff.no_grad`. Bumps the version
        counter, so a value saved for backward and changed since is refused.

        Examples
        --------
        >>> import funcdiff as fd
        >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
        >>> y = x * 3.0
        >>> y.zero_()
        tensor([0., 0.], grad_fn=<SetitemBackward>)
        """
        setitem(self, Ellipsis, 0)
        return self

    def astype(self, dtype: Any, *, copy: bool = True) -> Tensor:
        """Cast to ``dtype``; the gradient is cast back (none for integer results).

        As ``ndarray.astype``: with ``copy=False`` a Tensor that already has ``dtype``
        is returned itself.

        Examples
        --------
        >>> import funcdiff as fd
        >>> x = fd.tensor([1.0, 2.0], requires_grad=True)
        >>> x.astype("float64", copy=False) is x
        True
        >>> x.astype("float32").dtype
        dtype('float32')
        """
        if not copy and self.dtype == np.dtype(dtype):
            return self
        return astype(self, dtype)

    def copy(self) -> Tensor:
        """A recorded copy."""
        return call_ufunc(np.positive, self)

    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Sequence[Tensor] | Tensor | None = None,
    ) -> None:
        """Accumulate the gradient of this tensor into the ``.grad`` of the leaves.

        Parameters
        ----------
        gradient : Tensor or array_like, optional
            The cotangent; required unless the tensor has a single element.
        retain_graph : bool, optional
            Keep the saved values for another backward pass (default: ``create_graph``).
        create_graph : bool
            Record the backward pass, so the gradients can be differentiated again.
        inputs : sequence of Tensor, optional
            Accumulate only into these tensors.

        Examples
        --------
        >>> import funcdiff as fd
        >>> x = fd.tensor(3.0, requires_grad=True)
        >>> (x ** 2).backward()
        >>> x.grad
        tensor(6.)
        """
        engine.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def install() -> None:
    """Give :class:`~funcdiff._core.tensor.Tensor` its operators and methods.

    Called once when ``funcdiff`` is imported; calling it again changes nothing.
    """
    methods = _operators()
    methods.update(
        (name, value) for name, value in vars(_Methods).items() if isinstance(value, FunctionType)
    )
    for name, fn in methods.items():
        fn.__name__ = name
        fn.__qualname__ = f"Tensor.{name}"
        setattr(Tensor, name, fn)


install()
