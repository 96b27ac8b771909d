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
from typing import Any, cast

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

# Docstring parts that several of the six functions share, filled in below them.
_DOC = {
    "func": """func : callable
        Takes as many Tensors as there are inputs and returns a Tensor or a tuple of
        Tensors.""",
    "scalar_func": """func : callable
        Takes as many Tensors as there are inputs and returns a single Tensor with a
        single element (any shape, e.g. ``()`` or ``(1, 1)``).""",
    "inputs": """inputs : Tensor, array_like or tuple of them
        The point; only a tuple counts as several inputs.""",
    "create_graph_v": """create_graph : bool
        Keep the results differentiable with respect to ``inputs`` and ``v``.""",
    "strict": """strict : bool
        Raise RuntimeError when an output does not depend on an input, instead of
        returning zeros for it.""",
    "strict_scalar": """strict : bool
        Raise RuntimeError when the function or its gradient does not depend on an
        input (a linear function, for example), instead of returning zeros.""",
    "func_output": """func_output : Tensor or tuple of Tensor
        ``func(*inputs)``, with the tuple-ness of what ``func`` returned.""",
    "type_error_v": """TypeError
        Inputs, outputs or ``v`` that are not Tensors (or tuples of them).""",
    "type_error": """TypeError
        Inputs or outputs that are not Tensors (or tuples of them).""",
}


def _prepared_inputs(
    inputs: Any, create_graph: bool, fn_name: str
) -> tuple[bool, tuple[Tensor, ...]]:
    """``inputs`` checked (floating Tensors or convertible) and copied into fresh leaves."""
    is_inputs_tuple, inputs = as_tuple(inputs, "inputs", fn_name, convert=True, differentiable=True)
    return is_inputs_tuple, grad_preprocess(inputs, create_graph, need_graph=True)


def _call(
    func: Callable[..., Any], inputs: tuple[Tensor, ...], strict: bool, fn_name: str
) -> tuple[bool, tuple[Tensor, ...]]:
    """``func(*inputs)`` as a tuple of Tensors; under ``strict`` each must require grad."""
    is_outputs_tuple, outputs = as_tuple(func(*inputs), _OUTPUTS, fn_name)
    check_requires_grad(outputs, "outputs", strict)
    return is_outputs_tuple, outputs


def _single_output(
    func: Callable[..., Any], inputs: tuple[Tensor, ...], strict: bool, fn_name: str
) -> Tensor:
    """``func(*inputs)``, which must be one Tensor with one element (hessian, vhp, hvp)."""
    is_outputs_tuple, outputs = _call(func, inputs, strict, fn_name)
    if is_outputs_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    (output,) = outputs
    if output.size != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {fn_name} should contain a "
            "single element"
        )
    return output


def _checked_v(
    v: Any,
    shaped_like: tuple[Tensor, ...],
    is_tuple: bool,
    create_graph: bool,
    fn_name: str,
    none_if: str,
) -> tuple[Tensor, ...] | None:
    """``v`` checked against ``shaped_like`` (the outputs for vjp, else the inputs) as by
    torch; None only where ``shaped_like`` is one single-element Tensor (``none_if``
    says which, in the error)."""
    if v is not None:
        _, v = as_tuple(v, "v", fn_name, convert=True)
        v = grad_preprocess(v, create_graph, need_graph=False)
        validate_v(v, shaped_like, is_tuple)
    elif len(shaped_like) != 1 or shaped_like[0].size != 1:
        raise RuntimeError(
            f"The vector v can only be None if {none_if} a single Tensor with a single element."
        )
    return v


def _tangents(
    v: Any, inputs: tuple[Tensor, ...], is_inputs_tuple: bool, create_graph: bool, fn_name: str
) -> tuple[Tensor, ...] | None:
    """``v`` given for ``inputs`` (jvp, vhp, hvp), checked and preprocessed as by torch."""
    return _checked_v(
        v,
        inputs,
        is_inputs_tuple,
        create_graph,
        fn_name,
        "the input to the user-provided function is",
    )


def _results(
    outputs: tuple, is_outputs_tuple: bool, result: tuple, is_result_tuple: bool, create_graph: bool
) -> tuple[Any, Any]:
    """Function value and derivative, detached unless ``create_graph``, unwrapped from
    the tuples the caller did not pass or return."""
    outputs = grad_postprocess(outputs, create_graph)
    result = grad_postprocess(result, create_graph)
    return tuple_postprocess(outputs, is_outputs_tuple), tuple_postprocess(result, is_result_tuple)


# --------------------------------------------------------------------------- vjp / jvp
def vjp(
    func: Callable[..., Any],
    inputs: TensorLikes,
    v: TensorLikes | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """The vector-Jacobian product ``v^T J`` of ``func`` at ``inputs``.

    %(vjp_sections)s

    Examples
    --------
    >>> import funcdiff as fd
    >>> from funcdiff.functional import vjp
    >>> out, g = vjp(lambda x: x ** 2, fd.tensor([1.0, 2.0]), fd.tensor([1.0, 10.0]))
    >>> out, g
    (tensor([1., 4.]), tensor([ 2., 40.]))
    """
    with enable_grad():
        is_inputs_tuple, inputs = _prepared_inputs(inputs, create_graph, "vjp")
        is_outputs_tuple, outputs = _call(func, inputs, strict, "vjp")
        v = _checked_v(
            v, outputs, is_outputs_tuple, create_graph, "vjp", "the user-provided function returns"
        )
        grad_res = autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    return _results(outputs, is_outputs_tuple, result, is_inputs_tuple, create_graph)


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

    %(jvp_sections)s

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
        is_inputs_tuple, inputs = _prepared_inputs(inputs, create_graph, "jvp")
        v = _tangents(v, inputs, is_inputs_tuple, create_graph, "jvp")
        is_outputs_tuple, outputs = _call(func, inputs, strict, "jvp")
        if not strict:
            products = push_tangents(outputs, inputs, v, create_graph)
        else:
            # torch's definition of strict mode (its independence checks), kept apart
            # from funcdiff._jacobian.double_backward_jvp, which returns plain arrays
            # of a kept graph. The value of the dummy cotangents is irrelevant (J^T u
            # is linear in u); zeros keep inf and nan out of the intermediate results.
            dummies = [
                cast(Tensor, np.zeros_like(o)).requires_grad_() if o.requires_grad else None
                for o in outputs
            ]
            grad_inputs = autograd_grad(outputs, inputs, dummies, create_graph=True)
            check_requires_grad(grad_inputs, "grad_inputs", strict)
            live = [i for i, u in enumerate(dummies) if u is not None]
            products = [None] * len(outputs)
            if live:
                res = autograd_grad(
                    grad_inputs,
                    [cast(Tensor, dummies[i]) for i in live],
                    v,
                    create_graph=create_graph,
                )
                for i, r in zip(live, res, strict=True):
                    products[i] = r
        result = fill_in_zeros(products, outputs, strict, create_graph, "back_trick")
    return _results(outputs, is_outputs_tuple, result, is_outputs_tuple, create_graph)


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
    %(func)s
    %(inputs)s
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
    %(type_error)s
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
    forward = strategy == "forward-mode"
    if forward and create_graph:
        raise NotImplementedError(
            "funcdiff.functional.jacobian: `create_graph=True` and "
            '`strategy="forward-mode"` are not supported together (yet). Please '
            'either set `create_graph=False` or `strategy="reverse-mode"`.'
        )
    if forward and strict:
        raise RuntimeError(
            'funcdiff.functional.jacobian: `strict=True` and `strategy="forward-mode"` '
            "are not supported together (yet). Please either set `strict=False` or "
            '`strategy="reverse-mode"`.'
        )
    with enable_grad():
        is_inputs_tuple, inputs = _prepared_inputs(inputs, create_graph, "jacobian")
        is_outputs_tuple, outputs = _call(func, inputs, strict, "jacobian")
        # The blocks are new constant Tensors (without create_graph the backward pass
        # makes them from detached inputs): there is nothing to detach.
        if forward:
            jac = jacobian_forward(outputs, inputs, vectorize, chunk_size)
        elif vectorize and strict:
            raise RuntimeError(
                "funcdiff.functional.jacobian: `strict=True` and `vectorize=True` are not "
                "supported together. Please either set `strict=False` or `vectorize=False`."
            )
        else:
            if not vectorize:
                _refuse_complex_rows(outputs)
            jac = jacobian_reverse(outputs, inputs, create_graph, strict, vectorize, chunk_size)
    return tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def _refuse_complex_rows(outputs: tuple[Tensor, ...]) -> None:
    """torch's row-by-row reverse-mode Jacobian differentiates each entry of an output
    as a scalar with an implicit gradient, which a complex entry cannot have."""
    for out in outputs:
        if out.dtype.kind == "c" and out.size and out.requires_grad:
            raise RuntimeError(
                "grad can be implicitly created only for real scalar outputs but got "
                f"{out.dtype}: the row-by-row reverse-mode Jacobian of a complex output is "
                'undefined in torch\'s convention; use vectorize=True or strategy="forward-mode"'
            )


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
    %(scalar_func)s
    %(inputs)s
    create_graph : bool
        Keep the Hessian differentiable with respect to ``inputs`` (third and higher
        derivatives).
    %(strict_scalar)s
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
    %(type_error)s
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

    def jac_func(*inp: Tensor) -> tuple:
        # The Jacobian of a one-element output is its gradient: torch calls jacobian()
        # here, whose one-row pass and input aliases give the same blocks at more cost.
        out = _single_output(func, inp, strict, "hessian").squeeze()
        grads = autograd_grad((out,), inp, create_graph=True)
        jac = tuple(cast(Tensor, np.zeros_like(t)) if g is None else g for t, g in zip(inp, grads))
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
        is_inputs_tuple, inputs = _prepared_inputs(inputs, create_graph, fn_name)
        v = _tangents(v, inputs, is_inputs_tuple, create_graph, fn_name)
        outputs = (_single_output(func, inputs, strict, fn_name),)
        jac = autograd_grad(outputs, inputs, create_graph=True)
        check_requires_grad(jac, "jacobian", strict)
        products: list[Tensor | None] | tuple[Tensor | None, ...]
        if fn_name == "vhp":
            products = autograd_grad(jac, inputs, v, create_graph=create_graph)
            stage = "double_back"
        elif not strict:
            # Forward over reverse: v pushed through the recorded gradient.
            live = [i for i, g in enumerate(jac) if g is not None and g.requires_grad]
            pushed = push_tangents(
                tuple(cast(Tensor, jac[i]) for i in live), inputs, v, create_graph
            )
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
    return _results(outputs, False, result, is_inputs_tuple, create_graph)


def vhp(
    func: Callable[..., Any],
    inputs: TensorLikes,
    v: TensorLikes | None = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Tensor, Any]:
    """The vector-Hessian product ``v^T H`` of a scalar function (reverse over reverse).

    %(hessian_product_parameters)s

    Returns
    -------
    %(hessian_product_output)s
    vhp : Tensor or tuple of Tensor
        Structured like ``inputs``: entry ``j`` is ``sum_i v_i^T H[i][j]``.

    %(hessian_product_raises)s

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

    %(hessian_product_parameters)s

    Returns
    -------
    %(hessian_product_output)s
    hvp : Tensor or tuple of Tensor
        Structured like ``inputs``: entry ``i`` is ``sum_j H[i][j] v_j``.

    %(hessian_product_raises)s

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


def _sections(*lines: str) -> str:
    """Docstring lines (a fragment may span several) at the docstrings' indentation."""
    return "\n".join([lines[0], *(f"    {line}" if line else "" for line in lines[1:])])


def _product_sections(name: str, v: str, result: str, v_for: str) -> str:
    """The sections of vjp's or jvp's docstring, which mirror each other."""
    return _sections(
        "Parameters",
        "----------",
        _DOC["func"],
        _DOC["inputs"],
        "v : Tensor, array_like or tuple of them, optional",
        v,
        _DOC["create_graph_v"],
        _DOC["strict"],
        "",
        "Returns",
        "-------",
        _DOC["func_output"],
        f"{name} : Tensor or tuple of Tensor",
        result,
        "",
        "Raises",
        "------",
        _DOC["type_error_v"],
        "RuntimeError",
        f"    ``v`` of the wrong structure or shape, a missing ``v`` for a non-scalar {v_for},",
        "    and the strict-mode violations.",
    )


_DOC["vjp_sections"] = _product_sections(
    "vjp",
    "    One cotangent per output, shaped like it. May be None only when ``func``\n"
    "        returns a single Tensor with a single element (``v`` is then 1).",
    "    Structured like ``inputs``: entry ``j`` is ``sum_i v_i . d out_i / d in_j``,\n"
    "        shaped like input ``j``.",
    "output",
)
_DOC["jvp_sections"] = _product_sections(
    "jvp",
    "    One tangent per input, shaped like it. May be None only for a single input\n"
    "        with a single element (``v`` is then 1).",
    "    Structured like the outputs: entry ``i`` is ``sum_j d out_i / d in_j . v_j``,\n"
    "        shaped like output ``i``.",
    "input",
)
# vhp's and hvp's sections, the same in both.
_DOC["hessian_product_parameters"] = _sections(
    "Parameters",
    "----------",
    _DOC["scalar_func"],
    _DOC["inputs"],
    "v : Tensor, array_like or tuple of them, optional",
    "    Shaped like ``inputs``; may be None only for a single one-element input.",
    _DOC["create_graph_v"],
    _DOC["strict_scalar"],
)
_DOC["hessian_product_output"] = """func_output : Tensor
        ``func(*inputs)``, with its original shape."""
_DOC["hessian_product_raises"] = _sections(
    "Raises",
    "------",
    _DOC["type_error_v"],
    "RuntimeError",
    "    ``func`` not returning a single one-element Tensor, a bad ``v``, and",
    "    strict-mode violations.",
)

for _f in (vjp, jvp, jacobian, hessian, vhp, hvp):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ %= _DOC
del _f
