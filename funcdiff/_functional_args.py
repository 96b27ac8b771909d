"""The argument handling of :mod:`funcdiff.functional`, in torch's order and words.

Tuples of Tensors in and out (only a tuple counts as several values), fresh leaves for
the inputs, detaching the results, checking ``v``, the strict-mode checks, and the
zeros that stand for a derivative no output reaches. The messages are torch's, with
shapes printed as tuples.

Examples
--------
>>> import funcdiff as fd
>>> as_tuple(fd.tensor([1.0, 2.0]), "inputs", "vjp")
(False, (tensor([1., 2.]),))
>>> tuple_postprocess((fd.tensor(1.0),), False)
tensor(1.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from funcdiff._core.arrays import is_foreign_array
from funcdiff._core.backends import is_foreign
from funcdiff._core.tensor import Tensor, as_tensor
from funcdiff.autograd import grad

__all__ = [
    "argnum_positions",
    "as_tuple",
    "autograd_grad",
    "check_argnums",
    "check_callable",
    "check_choice",
    "check_chunk_size",
    "check_positive_int",
    "check_requires_grad",
    "check_strategy",
    "fill_in_zeros",
    "grad_postprocess",
    "grad_preprocess",
    "tuple_postprocess",
    "validate_v",
]

# The values of jacobian(strategy=...) and hessian(outer_jacobian_strategy=...).
_STRATEGIES = ("forward-mode", "reverse-mode")


# --------------------------------------------------------------------------- structure
def _convert(el: Any) -> Tensor | None:
    """A float or complex Tensor holding a NumPy array or a number, or None if ``el`` is
    neither."""
    if isinstance(el, (bool, np.bool_)):
        return None
    if isinstance(el, (int, float, complex, np.integer, np.floating, np.complexfloating)):
        el = np.asarray(el)
    if not (isinstance(el, np.ndarray) or is_foreign(el) or is_foreign_array(el)):
        return None  # a device array, or a batched value of funcdiff.func.vmap, as it is
    if el.dtype.kind in "fc":
        return as_tensor(el)  # no copy: funcdiff never writes into its inputs
    if el.dtype.kind in "iu":
        return Tensor(el, dtype=np.float64)
    return None


def as_tuple(
    inp: Any, arg_name: str, fn_name: str, *, convert: bool = False, differentiable: bool = False
) -> tuple[bool, tuple[Tensor, ...]]:
    """``(is_tuple, tuple_of_tensors)``; only a real tuple counts as several values.

    ``convert`` also accepts NumPy arrays and numbers (inputs and ``v``);
    ``differentiable`` requires a floating or complex dtype (inputs, which get
    gradients).
    """
    is_tuple = isinstance(inp, tuple)
    items = inp if is_tuple else (inp,)
    result = []
    for i, el in enumerate(items):
        t = el if isinstance(el, Tensor) else (_convert(el) if convert else None)
        if t is None or (differentiable and t.dtype.kind not in "fc"):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
        if t is None:
            msg = (
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but {where} has type {type(el)}."
            )
            if convert:
                msg += (
                    " NumPy arrays and numbers are accepted as well; several values "
                    "must be passed as a tuple."
                )
            elif isinstance(el, np.ndarray):
                msg += (
                    " A result that does not depend on the inputs must still be a Tensor "
                    "(wrap it with funcdiff.tensor)."
                )
            raise TypeError(msg)
        if differentiable and t.dtype.kind not in "fc":
            raise RuntimeError(
                f"The {arg_name} given to {fn_name} must have a floating-point or complex "
                "dtype to be "
                f"differentiated, but {where} is a Tensor of dtype {t.dtype}; convert it "
                "with .astype(numpy.float64)."
            )
        result.append(t)
    if differentiable and not result:
        raise RuntimeError(f"The {arg_name} given to {fn_name} must contain at least one Tensor.")
    return is_tuple, tuple(result)


def tuple_postprocess(res: Any, to_unpack: bool | tuple[bool, bool]) -> Any:
    """Undo :func:`as_tuple`: unwrap the levels of nesting the caller did not use."""
    if isinstance(to_unpack, tuple):
        outer, inner = to_unpack
        if not inner:
            res = tuple(el[0] for el in res)
        if not outer:
            res = res[0]
        return res
    return res if to_unpack else res[0]


def grad_preprocess(
    inputs: tuple[Tensor, ...], create_graph: bool, need_graph: bool
) -> tuple[Tensor, ...]:
    """New Tensor objects for ``inputs``, so that ``func`` differentiates w.r.t. them only.

    Under ``create_graph`` an input that requires grad gets a recorded alias, which keeps
    the results connected to the caller's graph; otherwise a detached leaf that requires
    grad when ``need_graph``.
    """
    result = []
    for t in inputs:
        if create_graph and t.requires_grad:
            result.append(t.reshape(t.shape))
        else:
            d = t.detach()
            result.append(d.requires_grad_() if need_graph else d)
    return tuple(result)


def grad_postprocess(tensors: tuple, create_graph: bool) -> tuple:
    """Detach everything (tuples, or tuples of tuples) unless ``create_graph``."""
    if create_graph:
        return tensors
    return tuple(
        t.detach() if isinstance(t, Tensor) else grad_postprocess(t, False) for t in tensors
    )


def validate_v(v: tuple[Tensor, ...], other: tuple[Tensor, ...], is_other_tuple: bool) -> None:
    """Refuse a ``v`` that is not one Tensor shaped like each of ``other``."""
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other, strict=True)):
        if el_v.shape != el_other.shape:
            prefix = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prefix}v has invalid size: should be {el_other.shape} but got {el_v.shape}."
            )
        if (el_v.dtype.kind == "c") != (el_other.dtype.kind == "c"):
            # A complex v of a real value would lose its imaginary part (torch raises).
            raise RuntimeError(
                "For complex Tensors, both grad_output and output are required to have the "
                f"same dtype. Mismatch in dtype: v[{idx}] has a dtype of {el_v.dtype} and "
                f"the value it is paired with has a dtype of {el_other.dtype}."
            )


def check_requires_grad(tensors: Sequence[Tensor | None], input_type: str, strict: bool) -> None:
    """In strict mode, refuse a None entry or one that does not require grad."""
    if not strict:
        return
    messages = {
        "outputs": (
            "Output {i} of the user-provided function does not require gradients. The "
            "outputs must be computed in a differentiable manner from the input when "
            "running in strict mode."
        ),
        "grad_inputs": (
            "The gradient with respect to input {i} is independent of the inputs of the "
            "user-provided function. This is not allowed in strict mode."
        ),
        "jacobian": (
            "While computing the hessian, found that the jacobian of the user-provided "
            "function with respect to input {i} is independent of the input. This is not "
            "allowed in strict mode. You should ensure that your function is twice "
            "differentiable and that the jacobian depends on the inputs (this would be "
            "violated by a linear function for example)."
        ),
        "hessian": (
            "The hessian of the user-provided function with respect to input {i} is "
            "independent of the input. This is not allowed in strict mode. You should ensure "
            "that your function is thrice differentiable and that the hessian depends on "
            "the inputs."
        ),
    }
    if input_type not in messages:
        raise RuntimeError("Invalid input_type to _check_requires_grad")
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode."
            )
        if not t.requires_grad:
            raise RuntimeError(messages[input_type].format(i=i))


def autograd_grad(
    outputs: Sequence[Tensor | None],
    inputs: Sequence[Tensor],
    grad_outputs: Sequence[Any] | None = None,
    create_graph: bool = False,
    retain_graph: bool | None = None,
    is_grads_batched: bool = False,
) -> tuple[Tensor | None, ...]:
    """:func:`funcdiff.grad` that skips outputs which are None or do not require grad.

    Inputs the remaining outputs do not reach come back as None.
    """
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    kept = [
        (o, g)
        for o, g in zip(outputs, grad_outputs, strict=True)
        if o is not None and o.requires_grad
    ]
    if not kept:
        return (None,) * len(inputs)
    return grad(
        tuple(o for o, _ in kept),
        tuple(inputs),
        tuple(g for _, g in kept),
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
        is_grads_batched=is_grads_batched,
    )


def fill_in_zeros(
    grads: Sequence[Tensor | None],
    refs: Sequence[Tensor],
    strict: bool,
    create_graph: bool,
    stage: str,
) -> tuple[Tensor, ...]:
    """Replace None by zeros shaped like ``refs`` (or raise in strict mode)."""
    none_messages = {
        "back": (
            "The output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode."
        ),
        "back_trick": (
            "The gradient with respect to the input is independent of entry {i} in the "
            "grad_outputs when using the double backward trick to compute forward mode "
            "gradients. This is not allowed in strict mode."
        ),
        "double_back": (
            "The jacobian of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode."
        ),
        "double_back_trick": (
            "The hessian of the user-provided function is independent of entry {i} in the "
            "grad_jacobian. This is not allowed in strict mode as it prevents from using the "
            "double backward trick to replace forward mode AD."
        ),
    }
    if stage not in none_messages:
        raise RuntimeError(f"Invalid stage argument '{stage}' to _fill_in_zeros")
    result: list[Tensor] = []
    for i, (g, ref) in enumerate(zip(grads, refs, strict=True)):
        if g is None:
            if strict:
                raise RuntimeError(none_messages[stage].format(i=i))
            g = cast(Tensor, np.zeros_like(ref))
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode when create_graph=True."
            )
        result.append(g)
    return tuple(result)


# --------------------------------------------------------------------------- jacobian options
def check_strategy(strategy: Any, hint: bool) -> None:
    """Refuse a Jacobian strategy other than "forward-mode" and "reverse-mode"."""
    if isinstance(strategy, str) and strategy in _STRATEGIES:
        return
    msg = 'Expected strategy to be either "forward-mode" or "reverse-mode".'
    if hint:
        msg += (
            ' Hint: If your function has more outputs than inputs, "forward-mode" tends to be '
            'more performant. Otherwise, prefer to use "reverse-mode".'
        )
    raise ValueError(f"{msg} Got {strategy!r}.")


def check_chunk_size(chunk_size: Any) -> None:
    """Refuse a ``chunk_size`` that is neither None nor a positive integer."""
    if chunk_size is None:
        return
    if (
        isinstance(chunk_size, (bool, np.bool_))
        or not isinstance(chunk_size, (int, np.integer))
        or chunk_size <= 0
    ):
        raise ValueError(f"chunk_size must be None or a positive integer, got {chunk_size!r}.")


# --------------------------------------------------------------------------- transform options
# The checks that funcdiff.sparse, funcdiff.replay and the other whole-function transforms
# share, with one wording.
def check_callable(f: Any, name: str = "f") -> None:
    """Refuse a function argument that cannot be called.

    Examples
    --------
    >>> check_callable(3, "f")
    Traceback (most recent call last):
    TypeError: f must be callable, got int
    """
    if not callable(f):
        raise TypeError(f"{name} must be callable, got {type(f).__name__}")


def check_argnums(argnums: Any) -> tuple[int, ...]:
    """The positions ``argnums`` names (an int, or a tuple of ints), or a TypeError.

    Examples
    --------
    >>> check_argnums(1), check_argnums((0, 2))
    ((1,), (0, 2))
    >>> check_argnums([0])
    Traceback (most recent call last):
    TypeError: argnums must be an int or a tuple of ints, got [0]
    """
    items = argnums if isinstance(argnums, tuple) else (argnums,)
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in items):
        raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")
    return items


def argnum_positions(argnums: Any, nargs: int) -> set[int]:
    """The non-negative positions ``argnums`` names in a call with ``nargs`` positional
    arguments, or a TypeError naming one that is out of range.

    Examples
    --------
    >>> sorted(argnum_positions((0, -1), 3))
    [0, 2]
    """
    positions = set()
    for i in check_argnums(argnums):
        if i >= nargs or i < -nargs:
            raise TypeError(
                f"argnums {argnums!r} names argument {i}, but the call has "
                f"{nargs} positional arguments"
            )
        positions.add(i % nargs)
    return positions


def check_choice(value: Any, name: str, choices: Sequence[str]) -> None:
    """Refuse a string option that is none of ``choices``.

    Examples
    --------
    >>> check_choice("maybe", "mode", ("auto", "forward", "reverse"))
    Traceback (most recent call last):
    ValueError: mode must be 'auto', 'forward' or 'reverse', got 'maybe'
    """
    if not isinstance(value, str) or value not in choices:
        quoted = [repr(c) for c in choices]
        listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
        raise ValueError(f"{name} must be {listed}, got {value!r}")


def check_positive_int(value: Any, name: str) -> None:
    """Refuse a count that is not a positive integer.

    Examples
    --------
    >>> check_positive_int(0, "max_traces")
    Traceback (most recent call last):
    ValueError: max_traces must be a positive integer, got 0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
