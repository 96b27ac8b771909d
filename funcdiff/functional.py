"""Higher-level derivatives of whole functions: vjp, jvp, jacobian, hessian, vhp, hvp.

These mirror ``torch.autograd.functional``: the same signatures, defaults, return
structures, check order, strict mode and error messages (shapes are printed as
tuples). Everything is built on the public engine, :func:`funcdiff.grad`, so every
derivative rule works here, at every order.

Conventions shared by all six functions
---------------------------------------
* ``inputs`` is one Tensor or a *tuple* of them; only a tuple counts as several
  inputs (a list raises TypeError). NumPy arrays and real numbers are accepted too and
  become float Tensors (integer data becomes float64; float dtypes are kept).
* ``func(*inputs)`` must return a Tensor or a tuple of Tensors.
* Every input is copied into a fresh leaf before ``func`` sees it, so tensors that
  ``func`` captures from the enclosing scope are constants: their contribution to the
  derivative is zero.
* With ``create_graph=False`` the function values and the derivatives are detached.
  With ``create_graph=True`` they stay connected to the caller's inputs (and ``v``)
  that require grad, so they can be differentiated again.
* ``strict=True`` raises RuntimeError when an output does not depend on an input;
  otherwise such derivatives are zeros (their mathematical value).
* The work runs under :class:`funcdiff.enable_grad`, so the functions also work
  inside ``no_grad()``.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> from funcdiff.functional import jacobian
>>> jacobian(lambda x: x ** 2, fd.tensor([1.0, 3.0]))
tensor([[2., 0.],
        [0., 6.]])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor
from funcdiff._functional_args import (
    as_tuple,
    autograd_grad,
    check_chunk_size,
    check_requires_grad,
    check_strategy,
    fill_in_zeros,
    grad_postprocess,
    grad_preprocess,
    tuple_postprocess,
    validate_v,
)
from funcdiff._jacobian import (
    jacobian_forward,
    jacobian_reverse,
    push_tangents,
)
from funcdiff.autograd import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

#: What the functional API accepts wherever a Tensor is expected as an input or ``v``.
TensorLike = Tensor | np.ndarray | float | int
#: One Tensor-like value, or a tuple of them.
TensorLikes = TensorLike | tuple[TensorLike, ...]

_OUTPUTS = "outputs of the user-provided function"


def _tangents(
    v: Any, inputs: tuple[Tensor, ...], is_inputs_tuple: bool, create_graph: bool, fn_name: str
) -> tuple[Tensor, ...] | None:
    """``v`` given for ``inputs`` (jvp, vhp, hvp), checked and preprocessed as by torch."""
    if v is not None:
        _, v = as_tuple(v, "v", fn_name, convert=True)
        v = grad_preprocess(v, create_graph, need_graph=False)
        validate_v(v, inputs, is_inputs_tuple)
    elif len(inputs) != 1 or inputs[0].size != 1:
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided function is a "
            "single Tensor with a single element."
        )
    return v


# --------------------------------------------------------------------------- vjp / jvp
def vjp(
    func: Callable[..., Any],
    inputs: TensorLikes,
    v: TensorLikes | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """The vector-Jacobian product ``v^T J`` of ``func`` at ``inputs``.

    Parameters
    ----------
    func : callable
        Takes as many Tensors as there are inputs and returns a Tensor or a tuple of
        Tensors.
    inputs : Tensor, array_like or tuple of them
        The point; only a tuple counts as several inputs.
    v : Tensor, array_like or tuple of them, optional
        One cotangent per output, shaped like it. May be None only when ``func``
        returns a single Tensor with a single element (``v`` is then 1).
    create_graph : bool
        Keep the results differentiable with respect to ``inputs`` and ``v``.
    strict : bool
        Raise RuntimeError when an output does not depend on an input, instead of
        returning zeros for it.

    Returns
    -------
    func_output : Tensor or tuple of Tensor
        ``func(*inputs)``, with the tuple-ness of what ``func`` returned.
    vjp : Tensor or tuple of Tensor
        Structured like ``inputs``: entry ``j`` is ``sum_i v_i . d out_i / d in_j``,
        shaped like input ``j``.

    Raises
    ------
    TypeError
        Inputs, outputs or ``v`` that are not Tensors (or tuples of them).
    RuntimeError
        ``v`` of the wrong structure or shape, a missing ``v`` for a non-scalar output,
        and the strict-mode violations.

    Examples
    --------
    >>> import funcdiff as fd
    >>> from funcdiff.functional import vjp
    >>> out, g = vjp(lambda x: x ** 2, fd.tensor([1.0, 2.0]), fd.tensor([1.0, 10.0]))
    >>> out, g
    (tensor([1., 4.]), tensor([ 2., 40.]))
    """
    with enable_grad():
        is_inputs_tuple, inputs = as_tuple(
            inputs, "inputs", "vjp", convert=True, differentiable=True
        )
        inputs = grad_preprocess(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = as_tuple(outputs, _OUTPUTS, "vjp")
        check_requires_grad(outputs, "outputs", strict)
        if v is not None:
            _, v = as_tuple(v, "v", "vjp", convert=True)
            v = grad_preprocess(v, create_graph, need_graph=False)
            validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].size != 1:
            raise RuntimeError(
                "The vector v can only be None if the user-provided function returns a single "
                "Tensor with a single element."
            )
        grad_res = autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = grad_postprocess(outputs, create_graph)
    result = grad_postprocess(result, create_graph)
    return tuple_postprocess(outputs, is_outputs_tuple), tuple_postprocess(result, is_inputs_tuple)


def jvp(
    func: Callable[..., Any],
    inputs: TensorLikes,
    v: TensorLikes | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """The Jacobian-vector product ``J v`` of ``func`` at ``inputs``.

    Computed in forward mode: ``v`` is pushed through the graph that ``func``
    recorded, one operation at a time, at about the cost of one more evaluation of
    ``func``. With ``strict=True`` it uses torch's double-backward trick instead
    (``J^T u`` built as a function of a dummy cotangent ``u``, then differentiated
    with respect to ``u`` along ``v``: two backward passes), whose independence
    checks strict mode is defined by.

    Parameters
    ----------
    func : callable
        Takes as many Tensors as there are inputs and returns a Tensor or a tuple of
        Tensors.
    inputs : Tensor, array_like or tuple of them
        The point; only a tuple counts as several inputs.
    v : Tensor, array_like or tuple of them, optional
        One tangent per input, shaped like it. May be None only for a single input
        with a single element (``v`` is then 1).
    create_graph : bool
        Keep the results differentiable with respect to ``inputs`` and ``v``.
    strict : bool
        Raise RuntimeError when an output does not depend on an input, instead of
        returning zeros for it.

    Returns
    -------
    func_output : Tensor or tuple of Tensor
        ``func(*inputs)``, with the tuple-ness of what ``func`` returned.
    jvp : Tensor or tuple of Tensor
        Structured like the outputs: entry ``i`` is ``sum_j d out_i / d in_j . v_j``,
        shaped like output ``i``.

    Raises
    ------
    TypeError
        Inputs, outputs or ``v`` that are not Tensors (or tuples of them).
    RuntimeError
        ``v`` of the wrong structure or shape, a missing ``v`` for a non-scalar input,
        and the strict-mode violations.

    Examples
    --------
    >>> import funcdiff as fd
    >>> from funcdiff.functional import jvp
    >>> out, t = jvp(lambda x, y: x * y, (fd.tensor([1.0, 2.0]), fd.tensor([3.0, 4.0])),
    ...              (fd.tensor([1.0, 0.0]), fd.tensor([0.0, 1.0])))
    >>> t
    tensor([3., 2.])
    """
    with enable_grad():
        is_inputs_tuple, inputs = as_tuple(
            inputs, "inputs", "jvp", convert=True, differentiable=True
        )
        inputs = grad_preprocess(inputs, create_graph, need_graph=True)
        v = _tangents(v, inputs, is_inputs_tuple, create_graph, "jvp")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = as_tuple(outputs, _OUTPUTS, "jvp")
        check_requires_grad(outputs, "outputs", strict)
        if not strict:
            products = push_tangents(outputs, inputs, v, create_graph)
        else:
            # torch's definition of strict mode (its independence checks), kept apart
            # from funcdiff._jacobian.double_backward_jvp, which returns plain arrays
            # of a kept graph. The value of the dummy cotangents is irrelevant (J^T u
            # is linear in u); zeros keep inf and nan out of the intermediate results.
            dummies = [
                np.zeros_like(o).requires_grad_() if o.requires_grad else None for o in outputs
            ]
            grad_inputs = autograd_grad(outputs, inputs, dummies, create_graph=True)
            check_requires_grad(grad_inputs, "grad_inputs", strict)
            live = [i for i, u in enumerate(dummies) if u is not None]
            products = [None] * len(outputs)
            if live:
                res = autograd_grad(
                    grad_inputs, [dummies[i] for i in live], v, create_graph=create_graph
                )
                for i, r in zip(live, res, strict=True):
                    products[i] = r
        result = fill_in_zeros(products, outputs, strict, create_graph, "back_trick")
    outputs = grad_postprocess(outputs, create_graph)
    result = grad_postprocess(result, create_graph)
    return tuple_postprocess(outputs, is_outputs_tuple), tuple_postprocess(result, is_outputs_tuple)


# --------------------------------------------------------------------------- jacobian


def jacobian(
    func: Callable[..., Any],
    inputs: TensorLikes,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
    chunk_size: int | None = None,
) -> Any:
    """The Jacobian of ``func`` at ``inputs``.

    Parameters
    ----------
    func : callable
        Takes as many Tensors as there are inputs and returns a Tensor or a tuple of
        Tensors.
    inputs : Tensor, array_like or tuple of them
        The point; only a tuple counts as several inputs.
    create_graph : bool
        Keep the Jacobian differentiable with respect to ``inputs``.
    strict : bool
        Raise RuntimeError when an output does not depend on an input, instead of
        returning a zero block. Not available with ``vectorize`` or forward mode.
    vectorize : bool
        Compute all rows (columns in forward mode) in one batched backward pass
        (``is_grads_batched``), whatever its memory. Without it, reverse mode also
        batches the rows, as many per pass as keep a batch of input cotangents within
        32 MiB, with the row loop's result; ``strict`` and forward mode go one row
        (column) per pass.
    strategy : {"reverse-mode", "forward-mode"}
        Reverse mode pulls back one row per output element; forward mode pushes one
        column per input element through the recorded graph (tangents, as
        :func:`jvp` does), cheaper when there are more outputs than inputs. Forward mode does not
        support ``create_graph`` or ``strict``.
    chunk_size : int, optional
        Pull back at most this many basis rows per batched backward pass (bounding
        memory); the result is the same. Ignored where the rows go one per pass.

    Returns
    -------
    Tensor, tuple of Tensor or tuple of tuples of Tensor
        Blocks ``J[i][j] = d out_i / d in_j`` of shape ``out_i.shape + in_j.shape``.
        One input and one output give a single Tensor; a tuple of inputs gives a tuple
        over inputs; a tuple of outputs gives a tuple over outputs; both give
        ``J[i][j]``. A 1-tuple counts as a tuple. Reverse-mode blocks have the input's
        dtype, forward-mode blocks the output's.

    Raises
    ------
    ValueError
        An unknown ``strategy``, or a ``chunk_size`` that is not a positive integer.
    NotImplementedError
        ``strategy="forward-mode"`` with ``create_graph=True``.
    TypeError
        Inputs or outputs that are not Tensors (or tuples of them).
    RuntimeError
        ``strict`` with forward mode or with ``vectorize``, and strict-mode violations.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.functional import jacobian
    >>> x, y = fd.tensor([1.0, 2.0]), fd.tensor(3.0)
    >>> jx, jy = jacobian(lambda x, y: x ** 2 * y, (x, y), vectorize=True)
    >>> jx
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    >>> jy
    tensor([1., 4.])
    """
    check_strategy(strategy, hint=True)
    check_chunk_size(chunk_size)
    with enable_grad():
        if strategy == "forward-mode":
            if create_graph:
                raise NotImplementedError(
                    "funcdiff.functional.jacobian: `create_graph=True` and "
                    '`strategy="forward-mode"` are not supported together (yet). Please '
                    'either set `create_graph=False` or `strategy="reverse-mode"`.'
                )
            if strict:
                raise RuntimeError(
                    'funcdiff.functional.jacobian: `strict=True` and `strategy="forward-mode"` '
                    "are not supported together (yet). Please either set `strict=False` or "
                    '`strategy="reverse-mode"`.'
                )
            is_inputs_tuple, inputs = as_tuple(
                inputs, "inputs", "jacobian", convert=True, differentiable=True
            )
            inputs = grad_preprocess(inputs, False, need_graph=True)
            outputs = func(*inputs)
            is_outputs_tuple, outputs = as_tuple(outputs, _OUTPUTS, "jacobian")
            # The blocks are new constant Tensors: there is nothing to detach.
            jac = jacobian_forward(outputs, inputs, vectorize, chunk_size)
            return tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))

        is_inputs_tuple, inputs = as_tuple(
            inputs, "inputs", "jacobian", convert=True, differentiable=True
        )
        inputs = grad_preprocess(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = as_tuple(outputs, _OUTPUTS, "jacobian")
        check_requires_grad(outputs, "outputs", strict)
        if vectorize and strict:
            raise RuntimeError(
                "funcdiff.functional.jacobian: `strict=True` and `vectorize=True` are not "
                "supported together. Please either set `strict=False` or `vectorize=False`."
            )
        # Without create_graph the blocks are new constant Tensors (made by the backward
        # pass from detached inputs): there is nothing to detach.
        jac = jacobian_reverse(outputs, inputs, create_graph, strict, vectorize, chunk_size)
    return tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


# --------------------------------------------------------------------------- second order
def hessian(
    func: Callable[..., Any],
    inputs: TensorLikes,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
    chunk_size: int | None = None,
) -> Any:
    """The Hessian of a scalar function ``func`` at ``inputs``.

    Computed as the Jacobian (with ``outer_jacobian_strategy``) of the gradient.

    Parameters
    ----------
    func : callable
        Takes as many Tensors as there are inputs and returns a single Tensor with a
        single element (any shape, e.g. ``()`` or ``(1, 1)``).
    inputs : Tensor, array_like or tuple of them
        The point; only a tuple counts as several inputs.
    create_graph : bool
        Keep the Hessian differentiable with respect to ``inputs`` (third and higher
        derivatives).
    strict : bool
        Raise RuntimeError when the function or its gradient does not depend on an
        input (a linear function, for example), instead of returning zeros.
    vectorize : bool
        Compute the outer Jacobian in one batched backward pass (see :func:`jacobian`:
        the default batches too, within a memory bound).
    outer_jacobian_strategy : {"reverse-mode", "forward-mode"}
        Strategy of the outer Jacobian (see :func:`jacobian`).
    chunk_size : int, optional
        Passed to the outer :func:`jacobian` (a funcdiff extension).

    Returns
    -------
    Tensor or tuple of tuples of Tensor
        Blocks ``H[i][j] = d^2 f / d in_i d in_j`` of shape ``in_i.shape + in_j.shape``.
        One input gives a single Tensor (a 0-d input a 0-d Hessian); a tuple of inputs,
        even a 1-tuple, gives ``H[i][j]``.

    Raises
    ------
    TypeError
        Inputs or outputs that are not Tensors (or tuples of them).
    ValueError
        An unknown ``outer_jacobian_strategy`` or a bad ``chunk_size``.
    RuntimeError
        ``func`` not returning a single one-element Tensor, and strict-mode violations.
    NotImplementedError
        Forward-mode outer Jacobian with ``create_graph=True``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.functional import hessian
    >>> hessian(lambda x: np.sum(x ** 3), fd.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    is_inputs_tuple, inputs = as_tuple(
        inputs, "inputs", "hessian", convert=True, differentiable=True
    )
    check_strategy(outer_jacobian_strategy, hint=False)

    def ensure_single_output_function(*inp: Tensor) -> Tensor:
        out = func(*inp)
        is_out_tuple, t_out = as_tuple(out, _OUTPUTS, "hessian")
        check_requires_grad(t_out, "outputs", strict)
        if is_out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.size != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single "
                "element"
            )
        return out.squeeze()

    def jac_func(*inp: Tensor) -> tuple:
        # The Jacobian of a one-element output is its gradient: torch calls jacobian()
        # here, whose one-row pass and input aliases give the same blocks at more cost.
        out = ensure_single_output_function(*inp)
        grads = autograd_grad((out,), inp, create_graph=True)
        jac = tuple(np.zeros_like(t) if g is None else g for t, g in zip(inp, grads))
        check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(
        jac_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
        chunk_size=chunk_size,
    )
    return tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _hessian_product(
    func: Callable[..., Any],
    inputs: Any,
    v: Any,
    create_graph: bool,
    strict: bool,
    fn_name: str,
) -> tuple[Tensor, Any]:
    """vhp (``v^T H``, reverse over reverse) or hvp (``H v``), with the checks in torch's
    order: the gradient is recorded, then differentiated once more along ``v``."""
    with enable_grad():
        is_inputs_tuple, inputs = as_tuple(
            inputs, "inputs", fn_name, convert=True, differentiable=True
        )
        inputs = grad_preprocess(inputs, create_graph, need_graph=True)
        v = _tangents(v, inputs, is_inputs_tuple, create_graph, fn_name)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = as_tuple(outputs, _OUTPUTS, fn_name)
        check_requires_grad(outputs, "outputs", strict)
        if is_outputs_tuple:
            raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
        if outputs[0].size != 1:
            raise RuntimeError(
                f"The Tensor returned by the function given to {fn_name} should contain a "
                "single element"
            )
        jac = autograd_grad(outputs, inputs, create_graph=True)
        check_requires_grad(jac, "jacobian", strict)
        if fn_name == "vhp":
            products = autograd_grad(jac, inputs, v, create_graph=create_graph)
            stage = "double_back"
        elif not strict:
            # Forward over reverse: v pushed through the recorded gradient.
            live = [i for i, g in enumerate(jac) if g is not None and g.requires_grad]
            pushed = push_tangents(tuple(jac[i] for i in live), inputs, v, create_graph)
            products = [None] * len(inputs)
            for i, p in zip(live, pushed, strict=True):
                products[i] = p
            stage = "double_back_trick"
        else:
            # torch's strict mode: the double-backward trick on top of the gradient.
            grad_jac = tuple(np.zeros_like(inp).requires_grad_() for inp in inputs)
            double_back = autograd_grad(jac, inputs, grad_jac, create_graph=True)
            check_requires_grad(double_back, "hessian", strict)
            products = autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
            stage = "double_back_trick"
        result = fill_in_zeros(products, inputs, strict, create_graph, stage)
    (output,) = grad_postprocess((outputs[0],), create_graph)
    result = grad_postprocess(result, create_graph)
    return output, tuple_postprocess(result, is_inputs_tuple)


# The parts of vhp's and hvp's docstrings that are the same, filled in below each.
_HESSIAN_PRODUCT_DOC = {
    "parameters": """Parameters
    ----------
    func : callable
        Takes as many Tensors as there are inputs and returns a single Tensor with a
        single element.
    inputs : Tensor, array_like or tuple of them
        The point; only a tuple counts as several inputs.
    v : Tensor, array_like or tuple of them, optional
        Shaped like ``inputs``; may be None only for a single one-element input.
    create_graph : bool
        Keep the results differentiable with respect to ``inputs`` and ``v``.
    strict : bool
        Raise RuntimeError when the function or its gradient does not depend on an
        input, instead of returning zeros.""",
    "func_output": """func_output : Tensor
        ``func(*inputs)``, with its original shape.""",
    "raises": """Raises
    ------
    TypeError
        Inputs, outputs or ``v`` that are not Tensors (or tuples of them).
    RuntimeError
        ``func`` not returning a single one-element Tensor, a bad ``v``, and
        strict-mode violations.""",
}


def vhp(
    func: Callable[..., Any],
    inputs: TensorLikes,
    v: TensorLikes | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Tensor, Any]:
    """The vector-Hessian product ``v^T H`` of a scalar function (reverse over reverse).

    %(parameters)s

    Returns
    -------
    %(func_output)s
    vhp : Tensor or tuple of Tensor
        Structured like ``inputs``: entry ``j`` is ``sum_i v_i^T H[i][j]``.

    %(raises)s

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.functional import vhp
    >>> f = lambda x: np.sum(x ** 3)
    >>> vhp(f, fd.tensor([1.0, 2.0]), fd.tensor([1.0, 1.0]))
    (tensor(9.), tensor([ 6., 12.]))
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(
    func: Callable[..., Any],
    inputs: TensorLikes,
    v: TensorLikes | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Tensor, Any]:
    """The Hessian-vector product ``H v`` of a scalar function.

    Forward over reverse: ``v`` is pushed, in forward mode, through the recorded
    gradient, at about the cost of :func:`vhp`'s second backward pass. Both agree for
    twice continuously differentiable functions (symmetric Hessian). With
    ``strict=True`` it uses torch's double-backward trick on top of the gradient (one
    backward pass more), whose independence checks strict mode is defined by.

    %(parameters)s

    Returns
    -------
    %(func_output)s
    hvp : Tensor or tuple of Tensor
        Structured like ``inputs``: entry ``i`` is ``sum_j H[i][j] v_j``.

    %(raises)s

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.functional import hvp
    >>> f = lambda x, y: np.sum(x ** 2 * y)
    >>> out, (hx, hy) = hvp(f, (fd.tensor([1.0]), fd.tensor([2.0])),
    ...                     (fd.tensor([1.0]), fd.tensor([0.0])))
    >>> hx, hy
    (tensor([4.]), tensor([2.]))
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


for _f in (vhp, hvp):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ %= _HESSIAN_PRODUCT_DOC
del _f
