"""``array``/``asarray`` of nested lists of Tensors, and NumPy functions that lift them.

NumPy builds ``np.array([t1, t2])`` itself, without asking the Tensors (``np.array`` does
not dispatch), so it would convert each Tensor to a plain number and lose its gradient.
Here a (nested) list or tuple with a Tensor anywhere among its leaves is built by
stacking its elements level by level with the recorded ``np.stack``: the result is a
Tensor whose gradient flows back to every element. Without a Tensor, NumPy's own
function runs unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal

import numpy

from funcdiff._core.tensor import Tensor

__all__ = ["array", "asarray", "asanyarray", "contains_tensor", "lift", "lifting"]


def contains_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a Tensor or a (nested) list, tuple or object array holding one."""
    if isinstance(obj, Tensor):
        return True
    if isinstance(obj, (list, tuple)):
        return any(contains_tensor(item) for item in obj)
    if isinstance(obj, numpy.ndarray) and obj.dtype == object:
        return any(contains_tensor(item) for item in obj.flat)
    return False


def _stacked(obj: Any, argument: str) -> Any:
    """``obj`` as one Tensor (if it holds one) or ndarray, stacking nested sequences."""
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, numpy.ndarray) and obj.dtype == object and contains_tensor(obj):
        obj = obj.tolist()
    if not isinstance(obj, (list, tuple)) or not contains_tensor(obj):
        return numpy.asarray(obj)
    if len(obj) == 0:  # unreachable: an empty sequence holds no Tensor
        return numpy.asarray(obj)
    items = [_stacked(item, argument) for item in obj]
    shapes = {item.shape for item in items}
    if len(shapes) > 1:
        raise ValueError(
            f"{argument}: the elements of a nested sequence holding Tensors must all have "
            f"the same shape (NumPy would make an object array, which carries no gradient), "
            f"got shapes {sorted(shapes)}"
        )
    if any(item.dtype.kind not in "biufc" for item in items):
        raise TypeError(
            f"{argument}: a sequence holding Tensors cannot also hold objects that are not "
            "numbers or arrays (NumPy would make an object array, which carries no gradient)"
        )
    return numpy.stack(items)


def lift(obj: Any, argument: str = "a") -> Any:
    """``obj`` as a Tensor if it is a (nested) sequence holding Tensors, else unchanged.

    A Tensor, an ndarray, a number or a sequence of plain numbers comes back as it was,
    so NumPy's own function then sees exactly what the caller passed.
    """
    if isinstance(obj, Tensor) or not contains_tensor(obj):
        return obj
    return _stacked(obj, argument)


def _cast(t: Tensor, dtype: Any, argument: str) -> Tensor:
    dtype = numpy.dtype(dtype)
    if dtype.kind == "O":
        raise TypeError(
            f"{argument}: dtype=object cannot hold a Tensor's gradient; pass a numeric dtype "
            "or call tensor.detach() first to drop the gradient on purpose"
        )
    return t if t.dtype == dtype else t.astype(dtype)


def array(
    object: Any,  # noqa: A002  (NumPy's parameter name)
    dtype: Any = None,
    *,
    copy: bool | None = True,
    order: Literal["K", "A", "C", "F"] | None = "K",
    subok: bool = False,
    ndmin: int = 0,
    like: Any = None,
    **kwargs: Any,
) -> Any:
    """``numpy.array`` that also builds a Tensor from (nested) lists of Tensors.

    Parameters
    ----------
    object : array_like, Tensor, or (nested) list or tuple holding Tensors
        Without a Tensor anywhere in it, ``numpy.array`` handles it unchanged.
    dtype : data-type, optional
        The result's dtype: a recorded cast, whose gradient is cast back; an integer or
        bool dtype gives a constant (a Tensor that does not require grad).
    copy, order, subok, ndmin, like
        As for ``numpy.array``. With Tensors, ``copy=False`` returns the Tensor itself
        when no cast is needed, ``order`` and ``subok`` are ignored (a Tensor's data is
        always an ndarray) and ``ndmin`` prepends axes of length one.

    Returns
    -------
    ndarray or Tensor
        A Tensor when ``object`` holds a Tensor, recorded so that the gradient reaches
        every Tensor in it.

    Raises
    ------
    ValueError
        The nested sequence is ragged (NumPy would build an object array).
    TypeError
        ``dtype=object`` with Tensors, or Tensors mixed with non-numeric objects.

    Examples
    --------
    >>> import funcdiff as fd
    >>> import funcdiff.numpy as np
    >>> w = fd.tensor([1.0, 2.0], requires_grad=True)
    >>> m = np.array([[w[0], 0.0], [0.0, w[1] ** 2]])
    >>> m
    tensor([[1., 0.],
            [0., 4.]], grad_fn=<StackBackward>)
    >>> fd.grad(np.sum(m), w)[0]
    tensor([1., 4.])
    """
    if not contains_tensor(object):
        return numpy.array(
            object, dtype, copy=copy, order=order, subok=subok, ndmin=ndmin, like=like, **kwargs
        )
    result = _stacked(object, "array(object)")
    if isinstance(object, Tensor) and copy:
        result = result.copy()
    if dtype is not None:
        result = _cast(result, dtype, "array(dtype)")
    if result.ndim < ndmin:
        result = result.reshape((1,) * (ndmin - result.ndim) + result.shape)
    return result


def asarray(a: Any, dtype: Any = None, order: Any = None, **kwargs: Any) -> Any:
    """``numpy.asarray`` that returns a Tensor as it is and stacks lists holding Tensors.

    Parameters
    ----------
    a : array_like, Tensor, or (nested) list or tuple holding Tensors
        Without a Tensor anywhere in it, ``numpy.asarray`` handles it unchanged.
    dtype : data-type, optional
        A recorded cast, as in :func:`array`.
    order, **kwargs
        As for ``numpy.asarray`` (ignored with Tensors).

    Returns
    -------
    ndarray or Tensor
        ``a`` itself if it is a Tensor of the requested dtype.

    Examples
    --------
    >>> import funcdiff as fd
    >>> import funcdiff.numpy as np
    >>> x = fd.tensor(2.0, requires_grad=True)
    >>> np.asarray(x) is x
    True
    >>> np.asarray([x, x * x])
    tensor([2., 4.], grad_fn=<StackBackward>)
    """
    if not contains_tensor(a):
        return numpy.asarray(a, dtype, order, **kwargs)
    result = _stacked(a, "asarray(a)")
    return result if dtype is None else _cast(result, dtype, "asarray(dtype)")


def asanyarray(a: Any, dtype: Any = None, order: Any = None, **kwargs: Any) -> Any:
    """``numpy.asanyarray``, with Tensors as in :func:`asarray`.

    Examples
    --------
    >>> import funcdiff as fd
    >>> import funcdiff.numpy as np
    >>> np.asanyarray([fd.tensor(1.0), 2.0])
    tensor([1., 2.])
    """
    if not contains_tensor(a):
        return numpy.asanyarray(a, dtype, order, **kwargs)
    return asarray(a, dtype)


def lifting(function: Callable[..., Any], *arguments: str) -> Callable[..., Any]:
    """``function`` with its leading positional ``arguments`` lifted by :func:`lift`.

    The wrapper keeps ``function``'s name and signature; arguments passed by keyword are
    lifted too. Without a Tensor in them, ``function`` sees exactly what was passed.
    """
    count = len(arguments)
    name = function.__name__

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args = tuple(
            lift(arg, f"{name}({arguments[i]})") if i < count else arg for i, arg in enumerate(args)
        )
        for key in arguments:
            if key in kwargs:
                kwargs[key] = lift(kwargs[key], f"{name}({key})")
        return function(*args, **kwargs)

    wrapper.__doc__ = (
        f"``numpy.{name}``, also for (nested) lists or tuples of Tensors in "
        f"{', '.join(f'``{a}``' for a in arguments)}: they are stacked into one Tensor "
        f"first (see :func:`funcdiff.numpy.array`), so the gradient reaches each of them."
    )
    return wrapper


def _sequence_items(arrays: Any, name: str) -> Any:
    """The elements of ``arrays`` with nested lists holding Tensors stacked into Tensors."""
    if isinstance(arrays, (list, tuple)) and contains_tensor(arrays):
        return [lift(item, f"{name}(arrays[{i}])") for i, item in enumerate(arrays)]
    return arrays


def joining(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (``numpy.stack`` ...) with each element of its sequence lifted.

    ``np.stack([[t1, t2], [t3, t4]])`` reaches funcdiff by itself only for a flat list:
    NumPy's dispatch looks at the elements of the sequence, not inside them.
    """
    name = function.__name__

    @functools.wraps(function)
    def wrapper(arrays: Any, *args: Any, **kwargs: Any) -> Any:
        return function(_sequence_items(arrays, name), *args, **kwargs)

    wrapper.__doc__ = (
        f"``numpy.{name}``, also for elements that are (nested) lists or tuples of "
        "Tensors: each is stacked into one Tensor first (see "
        ":func:`funcdiff.numpy.array`), so the gradient reaches all of them."
    )
    return wrapper
