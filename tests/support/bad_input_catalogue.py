"""The catalogue of bad input: what funcdiff does with each kind, as data.

Each :class:`Entry` is a snippet of user code and what the user must get: an exception
of a given type whose message contains a given fragment, or (for inputs that are legal
but hostile: NaN, inf, empty, 0-d, huge and tiny values) no error and a result that the
entry's ``check`` verifies. ``tests/test_bad_input.py`` runs every entry;
``docs/bad_input.rst`` is generated from the same entries, with the messages funcdiff
actually produces::

    python tests/support/bad_input_catalogue.py --write docs/bad_input.rst

and a test fails when the page is out of date.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy
import scipy.linalg
import scipy.special as sp
import scipy.stats

import funcdiff as fd
from funcdiff import linalg as fdl
from funcdiff import special as fds
from funcdiff.check import check_derivatives
from funcdiff.functional import hessian, hvp, jacobian, jvp, vhp, vjp

__all__ = ["Entry", "CATALOGUE", "namespace", "run", "render_rst"]


@dataclass(frozen=True)
class Entry:
    """One kind of bad input.

    ``code`` runs in a fresh :func:`namespace`. With ``raises`` set, its last statement
    must raise that type with ``match`` in the message; ``same_object`` further requires
    the exception to be the object the code bound to ``ERR`` (a user exception that must
    come through unchanged). With ``raises=None`` nothing may raise, and ``check`` (more
    code, run in the same namespace) asserts the result; ``match`` then describes the
    outcome for the docs.
    """

    id: str
    group: str
    what: str
    code: str
    raises: type[BaseException] | None
    match: str
    check: str = ""
    same_object: bool = False


def _e(
    id: str,
    group: str,
    what: str,
    code: str,
    raises: type[BaseException] | None,
    match: str,
    check: str = "",
    same_object: bool = False,
) -> Entry:
    return Entry(
        id,
        group,
        what,
        textwrap.dedent(code).strip(),
        raises,
        match,
        textwrap.dedent(check).strip(),
        same_object,
    )


G_TENSOR = "Garbage given to tensor()"
G_INT = "Integer tensors that require grad"
G_OPS = "Shape mismatches in operations"
G_V = "Shape mismatches in v (vjp, jvp, hvp, vhp)"
G_GRAD = "Shape mismatches in gradient and grad_outputs"
G_OUT = "Function outputs and inputs that are not Tensors"
G_RAISE = "Functions that raise"
G_TWICE = "Backward twice"
G_INPLACE = "In-place modification"
G_UNSUP = "Unsupported NumPy and SciPy functions"
G_ARRAY = "Converting a Tensor that requires grad to an ndarray"
G_NAN = "NaN and inf inputs"
G_EMPTY = "Empty arrays and 0-d arrays"
G_MAG = "Huge and tiny magnitudes"
G_OPTS = "Wrong options: strategy, chunk_size, strict"
G_MODE = "create_graph and no_grad"
G_ENGINE = "Misuse of grad, backward, hooks and attributes"
G_NAMED = "Complex numbers, and functions named as you called them"
G_EXIT = "Leaving the graph: Python numbers, copies and pickles"
G_CHECK = "Checking derivatives: hand-written jac and hess, complex inputs"
G_SPARSE = "Sparse Jacobians and Hessians"
G_SPMAT = "Sparse matrices and sparse solves"

X3 = "x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)\n"

CATALOGUE: tuple[Entry, ...] = (
    # ------------------------------------------------------------------ tensor()
    _e(
        "tensor-str",
        G_TENSOR,
        "a string",
        'fd.tensor("1.5")',
        TypeError,
        "tensor() expects a number",
    ),
    _e("tensor-none", G_TENSOR, "None", "fd.tensor(None)", TypeError, "got NoneType"),
    _e("tensor-dict", G_TENSOR, "a dict", 'fd.tensor({"x": 1.0})', TypeError, "got dict"),
    _e(
        "tensor-ragged",
        G_TENSOR,
        "a ragged nested list",
        "fd.tensor([[1.0, 2.0], [3.0]])",
        ValueError,
        "rectangular array of numbers",
    ),
    _e(
        "tensor-mixed",
        G_TENSOR,
        "numbers mixed with strings",
        'fd.tensor([1.0, "a"])',
        TypeError,
        "expects numbers (bool, integer, floating point or complex)",
    ),
    _e(
        "tensor-object",
        G_TENSOR,
        "an arbitrary object",
        "fd.tensor(object())",
        TypeError,
        "holding dtype object",
    ),
    _e(
        "tensor-dtype",
        G_TENSOR,
        "an unknown dtype",
        'fd.tensor(1.0, dtype="not a dtype")',
        ValueError,
        "not understood",
    ),
    # ------------------------------------------------------------------ integer + grad
    _e(
        "int-requires-grad",
        G_INT,
        "integer data with requires_grad=True",
        "fd.tensor([1, 2], requires_grad=True)",
        RuntimeError,
        "only Tensors of floating point and complex dtype can require gradients",
    ),
    _e(
        "bool-requires-grad",
        G_INT,
        "requires_grad_() on a boolean tensor",
        "fd.tensor([True, False]).requires_grad_()",
        RuntimeError,
        "only Tensors of floating point and complex dtype can require gradients",
    ),
    _e(
        "int-setter",
        G_INT,
        "setting requires_grad on an integer tensor",
        "x = fd.tensor([1, 2])\nx.requires_grad = True",
        RuntimeError,
        "(this one has dtype int64)",
    ),
    _e(
        "int-functional",
        G_INT,
        "an integer Tensor as input to jacobian",
        "jacobian(lambda x: x * 2, fd.tensor([1, 2]))",
        RuntimeError,
        "must have a floating-point or complex dtype to be differentiated",
    ),
    # ------------------------------------------------------------------ ops
    _e(
        "op-broadcast",
        G_OPS,
        "operands that do not broadcast",
        X3 + "x + fd.tensor([1.0, 2.0])",
        ValueError,
        "could not be broadcast together with shapes (3,) (2,)",
    ),
    _e(
        "op-matmul",
        G_OPS,
        "matmul with mismatched inner dimensions",
        "a = fd.tensor(np.ones((2, 3)), requires_grad=True)\na @ a",
        ValueError,
        "mismatch in its core dimension 0",
    ),
    _e(
        "op-reshape",
        G_OPS,
        "reshape to a different size",
        X3 + "np.reshape(x, (2,))",
        ValueError,
        "cannot reshape array of size 3 into shape (2,)",
    ),
    _e(
        "op-concatenate",
        G_OPS,
        "concatenating arrays of different rank",
        X3 + "np.concatenate([x, np.ones((2, 2))])",
        ValueError,
        "must have same number of dimensions",
    ),
    _e(
        "op-axis",
        G_OPS,
        "an axis out of range (NumPy's AxisError)",
        X3 + "np.sum(x, axis=3)",
        np.exceptions.AxisError,
        "axis 3 is out of bounds for array of dimension 1",
    ),
    _e(
        "op-index",
        G_OPS,
        "an index out of range (NumPy's own IndexError, as for ndarrays)",
        X3 + "x[5]",
        IndexError,
        "index 5 is out of bounds for axis 0 with size 3",
    ),
    _e(
        "op-singular",
        G_OPS,
        "inverting a singular matrix",
        "a = fd.tensor(np.zeros((2, 2)), requires_grad=True)\nnp.linalg.inv(a)",
        np.linalg.LinAlgError,
        "Singular matrix",
    ),
    _e(
        "op-string-operand",
        G_OPS,
        "arithmetic with a string",
        X3 + 'x + "a"',
        TypeError,
        "did not contain a loop with signature matching types",
    ),
    # ------------------------------------------------------------------ v
    _e(
        "v-vjp-shape",
        G_V,
        "vjp with v shaped unlike the output",
        "vjp(lambda x: x * 2, fd.tensor([1.0, 2.0, 3.0]), fd.tensor([1.0, 2.0]))",
        RuntimeError,
        "v has invalid size: should be (3,) but got (2,).",
    ),
    _e(
        "v-jvp-shape",
        G_V,
        "jvp with v shaped unlike the input",
        "jvp(lambda x: x * 2, fd.tensor([1.0, 2.0, 3.0]), fd.tensor([[1.0, 2.0, 3.0]]))",
        RuntimeError,
        "v has invalid size: should be (3,) but got (1, 3).",
    ),
    _e(
        "v-hvp-length",
        G_V,
        "hvp with too few entries in v",
        "hvp(lambda x, y: np.sum(x * y), (fd.tensor([1.0]), fd.tensor([2.0])),\n"
        "    (fd.tensor([1.0]),))",
        RuntimeError,
        "v is a tuple of invalid length: should be 2 but got 1.",
    ),
    _e(
        "v-vhp-entry",
        G_V,
        "vhp with one entry of v misshaped",
        "vhp(lambda x, y: np.sum(x ** 2 * y), (fd.tensor([1.0]), fd.tensor([2.0])),\n"
        "    (fd.tensor([1.0]), fd.tensor([1.0, 2.0])))",
        RuntimeError,
        "Entry 1 in v has invalid size: should be (1,) but got (2,).",
    ),
    _e(
        "v-missing",
        G_V,
        "v omitted for a function with several outputs",
        "vjp(lambda x: x * 2, fd.tensor([1.0, 2.0]))",
        RuntimeError,
        "The vector v can only be None if the user-provided function returns a single "
        "Tensor with a single element.",
    ),
    _e(
        "v-list",
        G_V,
        "v given as a list",
        "vjp(lambda x: x * 2, fd.tensor([1.0, 2.0]), [1.0, 1.0])",
        TypeError,
        "several values must be passed as a tuple",
    ),
    # ------------------------------------------------------------------ gradient
    _e(
        "grad-implicit",
        G_GRAD,
        "backward() on a non-scalar without a gradient",
        X3 + "(x * 2).backward()",
        RuntimeError,
        "grad can be implicitly created only for scalar outputs",
    ),
    _e(
        "grad-shape",
        G_GRAD,
        "backward(gradient) of the wrong shape",
        X3 + "(x * 2).backward(np.ones(2))",
        RuntimeError,
        "Mismatch in shape: grad_output[0] has a shape of (2,) and output[0] has a shape of (3,).",
    ),
    _e(
        "grad-outputs-shape",
        G_GRAD,
        "grad_outputs of the wrong shape",
        X3 + "fd.grad(x * 2, x, grad_outputs=np.ones((3, 1)))",
        RuntimeError,
        "grad_output[0] has a shape of (3, 1)",
    ),
    _e(
        "grad-outputs-count",
        G_GRAD,
        "more grad_outputs than outputs",
        X3 + "fd.grad(x * 2, x, grad_outputs=[np.ones(3), np.ones(3)])",
        RuntimeError,
        "got 2 gradients for 1 outputs",
    ),
    _e(
        "grad-outputs-type",
        G_GRAD,
        "a grad_output that is not an array",
        X3 + 'fd.grad(x * 2, x, grad_outputs=[{"a": 1}])',
        TypeError,
        "gradients can be either Tensors, ndarrays, numbers or None, but got dict",
    ),
    _e(
        "grad-outputs-complex",
        G_GRAD,
        "a complex grad_output for a real output",
        X3 + "fd.grad(np.sum(x), x, grad_outputs=np.array(1 + 2j))",
        RuntimeError,
        "grad_output[0] has a dtype of complex128 and output[0] has a dtype of float64",
    ),
    _e(
        "grad-outputs-batched",
        G_GRAD,
        "is_grads_batched with a batch of the wrong shape",
        X3 + "fd.grad(x * 2, x, grad_outputs=np.ones((4, 2)), is_grads_batched=True)",
        RuntimeError,
        "we interpret the first dimension of each grad_output as the batch",
    ),
    # ------------------------------------------------------------------ outputs
    _e(
        "out-ndarray",
        G_OUT,
        "a function returning an ndarray",
        "jacobian(lambda x: x.data * 2, fd.tensor([1.0, 2.0]))",
        TypeError,
        "A result that does not depend on the inputs must still be a Tensor",
    ),
    _e(
        "out-list",
        G_OUT,
        "a function returning a list",
        "jacobian(lambda x: [x, x], fd.tensor([1.0, 2.0]))",
        TypeError,
        "has type <class 'list'>",
    ),
    _e(
        "out-none",
        G_OUT,
        "a function returning None",
        "jacobian(lambda x: None, fd.tensor([1.0, 2.0]))",
        TypeError,
        "has type <class 'NoneType'>",
    ),
    _e(
        "out-hessian-vector",
        G_OUT,
        "hessian of a function with a vector output",
        "hessian(lambda x: x ** 2, fd.tensor([1.0, 2.0]))",
        RuntimeError,
        "should contain a single element",
    ),
    _e(
        "out-hessian-tuple",
        G_OUT,
        "hessian of a function returning a tuple",
        "hessian(lambda x: (np.sum(x), np.sum(x)), fd.tensor([1.0, 2.0]))",
        RuntimeError,
        "should return a single Tensor",
    ),
    _e(
        "in-list",
        G_OUT,
        "several inputs given as a list",
        "jacobian(lambda x, y: x * y, [fd.tensor([1.0]), fd.tensor([2.0])])",
        TypeError,
        "several values must be passed as a tuple",
    ),
    _e(
        "in-empty-tuple",
        G_OUT,
        "no inputs at all",
        "jacobian(lambda: fd.tensor(1.0), ())",
        RuntimeError,
        "must contain at least one Tensor",
    ),
    _e(
        "in-bool",
        G_OUT,
        "a bool as input",
        "jacobian(lambda x: x, True)",
        TypeError,
        "has type <class 'bool'>",
    ),
    # ------------------------------------------------------------------ raising functions
    _e(
        "raise-jacobian",
        G_RAISE,
        "the function raises inside jacobian",
        """
       ERR = ValueError("user error")
       def f(x):
           raise ERR
       jacobian(f, fd.tensor([1.0, 2.0]), vectorize=True)
       """,
        ValueError,
        "user error",
        same_object=True,
    ),
    _e(
        "raise-hessian",
        G_RAISE,
        "the function raises a KeyError inside hessian",
        """
       ERR = KeyError("missing")
       def f(x):
           raise ERR
       hessian(f, fd.tensor([1.0, 2.0]))
       """,
        KeyError,
        "missing",
        same_object=True,
    ),
    _e(
        "raise-hvp",
        G_RAISE,
        "the function raises inside hvp under no_grad",
        """
       ERR = ArithmeticError("overflow in the model")
       def f(x):
           raise ERR
       with fd.no_grad():
           hvp(f, fd.tensor([1.0]), fd.tensor([1.0]))
       """,
        ArithmeticError,
        "overflow in the model",
        same_object=True,
    ),
    _e(
        "raise-hook",
        G_RAISE,
        "a hook raises during backward(create_graph=True)",
        """
       ERR = RuntimeError("hook failed")
       x = fd.tensor([1.0, 2.0], requires_grad=True)
       def hook(g):
           raise ERR
       x.register_hook(hook)
       np.sum(x ** 2).backward(create_graph=True)
       """,
        RuntimeError,
        "hook failed",
        same_object=True,
    ),
    _e(
        "raise-function-backward",
        G_RAISE,
        "a custom Function's backward raises",
        """
       ERR = FloatingPointError("bad backward")
       class Square(fd.Function):
           @staticmethod
           def forward(ctx, x):
               return x * x
           @staticmethod
           def backward(ctx, g):
               raise ERR
       x = fd.tensor([1.0, 2.0], requires_grad=True)
       np.sum(Square.apply(x)).backward()
       """,
        FloatingPointError,
        "bad backward",
        same_object=True,
    ),
    # ------------------------------------------------------------------ backward twice
    _e(
        "twice-backward",
        G_TWICE,
        "backward() twice through saved values",
        X3 + "y = np.sum(np.sin(x))\ny.backward()\ny.backward()",
        RuntimeError,
        "Trying to backward through the graph a second time",
    ),
    _e(
        "twice-grad",
        G_TWICE,
        "grad() twice without retain_graph",
        X3 + "y = np.sum(np.exp(x))\nfd.grad(y, x)\nfd.grad(y, x)",
        RuntimeError,
        "Specify retain_graph=True",
    ),
    # ------------------------------------------------------------------ in-place
    _e(
        "inplace-saved",
        G_INPLACE,
        "modifying a value that a later backward needs",
        X3 + "h = x * 1.0\ny = np.sum(np.sin(h))\nh += 1.0\ny.backward()",
        RuntimeError,
        "has been modified by an inplace operation",
    ),
    _e(
        "inplace-detached-alias",
        G_INPLACE,
        "modifying a saved value through a detach()ed alias",
        X3 + "h = x * 1.0\ny = np.sum(np.sin(h))\nd = h.detach()\nd[0] = 5.0\ny.backward()",
        RuntimeError,
        "is at version 1; expected version 0 instead",
    ),
    _e(
        "inplace-leaf",
        G_INPLACE,
        "in-place change of a leaf that requires grad",
        X3 + "x += 1.0",
        RuntimeError,
        "a leaf Variable that requires grad is being used in an in-place operation",
    ),
    _e(
        "inplace-leaf-out",
        G_INPLACE,
        "a ufunc writing into a leaf that requires grad",
        X3 + "np.add(x, 1.0, out=x)",
        RuntimeError,
        "a leaf Variable that requires grad is being used in an in-place operation",
    ),
    _e(
        "inplace-view",
        G_INPLACE,
        "in-place change of a view of a leaf that requires grad",
        X3 + "x[1:] += 1.0",
        RuntimeError,
        "a view of a leaf Variable that requires grad is being used in an in-place operation",
    ),
    # ------------------------------------------------------------------ unsupported
    _e(
        "unsup-histogram",
        G_UNSUP,
        "np.histogram",
        X3 + "np.histogram(x)",
        TypeError,
        "funcdiff has no derivative rule for numpy.histogram",
    ),
    _e(
        "unsup-nancumprod",
        G_UNSUP,
        "np.nancumprod",
        X3 + "np.nancumprod(x)",
        TypeError,
        "no derivative rule for numpy.nancumprod",
    ),
    _e(
        "unsup-outer-method",
        G_UNSUP,
        "a ufunc method without a rule (np.add.outer)",
        X3 + "np.add.outer(x, x)",
        TypeError,
        "no derivative rule for numpy.add.outer",
    ),
    _e(
        "unsup-ufunc-kwarg",
        G_UNSUP,
        "a ufunc keyword argument (where=)",
        X3 + "np.add(x, 1.0, where=np.array([True, False, True]))",
        TypeError,
        "without the keyword arguments ['where']",
    ),
    _e(
        "unsup-scipy",
        G_UNSUP,
        "a SciPy function with no dispatch (use funcdiff.linalg)",
        "a = fd.tensor(np.eye(2), requires_grad=True)\nscipy.linalg.expm(a)",
        RuntimeError,
        "Can't convert a Tensor that requires grad to an ndarray",
    ),
    _e(
        "unsup-eigh-generalized",
        G_UNSUP,
        "funcdiff.linalg.eigh of the generalized problem (b given)",
        "a = fd.tensor(np.eye(2), requires_grad=True)\nfdl.eigh(a, np.eye(2))",
        NotImplementedError,
        "funcdiff.linalg.eigh: the generalized problem (b given) has no derivative rule",
    ),
    _e(
        "unsup-eigh-gradient",
        G_UNSUP,
        "funcdiff.linalg.eigh with an unknown gradient convention",
        "a = fd.tensor(np.eye(2), requires_grad=True)\nfdl.eigh(a, gradient='sym')",
        ValueError,
        "funcdiff.linalg.eigh: gradient must be 'triangle' or 'symmetric', got 'sym'",
    ),
    _e(
        "unsup-argument",
        G_UNSUP,
        "differentiating jv with respect to its order",
        "v = fd.tensor([1.0, 2.0], requires_grad=True)\nsp.jv(v, 1.0)",
        NotImplementedError,
        "scipy.special.jv is differentiable in x, not in v",
    ),
    _e(
        "unsup-gammainc-a",
        G_UNSUP,
        "differentiating gammainc with respect to a",
        "a = fd.tensor([1.5, 2.0], requires_grad=True)\nsp.gammainc(a, 1.0)",
        NotImplementedError,
        "scipy.special.gammainc is differentiable in x, not in a",
    ),
    _e(
        "unsup-scipy-special-python",
        G_UNSUP,
        "a SciPy special function written in Python (use funcdiff.special)",
        X3 + "sp.logsumexp(x)",
        RuntimeError,
        "scipy.special.logsumexp was called on it, and SciPy functions do not accept Tensors: "
        "use funcdiff.special.logsumexp, which accepts Tensors",
    ),
    _e(
        "unsup-scipy-stats",
        G_UNSUP,
        "a scipy.stats distribution method (use funcdiff.stats)",
        X3 + "scipy.stats.norm.logpdf(x)",
        RuntimeError,
        "scipy.stats.norm.logpdf was called on it, and SciPy functions do not accept Tensors: "
        "use funcdiff.stats.norm.logpdf",
    ),
    _e(
        "array-from-tensors",
        G_ARRAY,
        "an ndarray built from Tensors (np.array([t1, t2]))",
        X3 + "np.array([x[0], x[1]])",
        RuntimeError,
        "use funcdiff.numpy (import funcdiff.numpy as np), whose constructors record",
    ),
    _e(
        "unsup-interp-xp",
        G_UNSUP,
        "differentiating np.interp with respect to the sample points xp",
        "xp = fd.tensor([0.0, 1.0, 2.0], requires_grad=True)\n"
        "np.interp(0.5, xp, np.array([0.0, 1.0, 4.0]))",
        TypeError,
        "numpy.interp is not differentiable in xp",
    ),
    _e(
        "unsup-gradient-spacing",
        G_UNSUP,
        "differentiating np.gradient with respect to its spacing",
        X3 + "h = fd.tensor(0.5, requires_grad=True)\nnp.gradient(x, h)",
        TypeError,
        "numpy.gradient is not differentiable in the spacing (varargs)",
    ),
    _e(
        "op-convolve-ndim",
        G_OPS,
        "funcdiff.signal.convolve of inputs with different numbers of dimensions",
        X3 + "fd.signal.convolve(x, np.ones((2, 2)))",
        ValueError,
        "in1 and in2 should have the same dimensionality (got 1 and 2)",
    ),
    _e(
        "unsup-complex",
        G_UNSUP,
        "a function without a complex rule on complex values",
        X3 + "np.maximum(x * 1j, x)",
        TypeError,
        "numpy.maximum has no complex derivative rule in funcdiff",
    ),
    # ------------------------------------------------------------------ __array__
    _e(
        "array-asarray",
        G_ARRAY,
        "np.asarray on a tensor that requires grad",
        X3 + "np.asarray(x)",
        RuntimeError,
        "Can't convert a Tensor that requires grad to an ndarray: the gradient would be lost",
    ),
    _e(
        "array-numpy",
        G_ARRAY,
        ".numpy() on a tensor that requires grad",
        X3 + "x.numpy()",
        RuntimeError,
        "Use tensor.detach().numpy() instead.",
    ),
    _e(
        "array-no-grad",
        G_ARRAY,
        "np.asarray under no_grad (allowed: nothing is recorded)",
        X3 + "with fd.no_grad():\n    a = np.asarray(x)",
        None,
        "no error: the data, as an ndarray",
        check="assert type(a) is np.ndarray and a.tolist() == [1.0, 2.0, 3.0]",
    ),
    _e(
        "array-float",
        G_ARRAY,
        "float() of a tensor with several elements",
        X3 + "float(x)",
        ValueError,
        "item() needs a tensor with exactly one element",
    ),
    # ------------------------------------------------------------------ NaN / inf
    _e(
        "nan-grad",
        G_NAN,
        "a NaN input",
        "x = fd.tensor([1.0, np.nan], requires_grad=True)\n(g,) = fd.grad(np.sum(x ** 2), x)",
        None,
        "no error: NaN propagates to its entry",
        check="assert g.data[0] == 2.0 and np.isnan(g.data[1])",
    ),
    _e(
        "inf-grad",
        G_NAN,
        "inf inputs",
        "x = fd.tensor([-np.inf, np.inf, 0.0], requires_grad=True)\n"
        "(g,) = fd.grad(np.sum(np.exp(x)), x)",
        None,
        "no error: exp' = exp at -inf, inf, 0",
        check="assert g.data.tolist() == [0.0, np.inf, 1.0]",
    ),
    _e(
        "nan-hessian",
        G_NAN,
        "a NaN input to hessian",
        "H = hessian(lambda x: np.sum(x ** 3), fd.tensor([np.nan, 1.0]))",
        None,
        "no error: NaN fills its row, the rest is exact",
        check="assert np.isnan(H.data[0, 0]) and H.data[1, 1] == 6.0 and H.data[0, 1] == 0.0",
    ),
    _e(
        "nan-norm",
        G_NAN,
        "a NaN under a norm (its gradient is guarded at 0)",
        "x = fd.tensor([np.nan, 1.0], requires_grad=True)\n(g,) = fd.grad(np.linalg.norm(x), x)",
        None,
        "no error: NaN, not a silent 0",
        check="assert np.isnan(g.data).all()",
    ),
    _e(
        "nan-v",
        G_NAN,
        "a NaN in the cotangent v",
        "_, g = vjp(lambda x: x * 2, fd.tensor([1.0, 2.0]), fd.tensor([np.nan, 1.0]))",
        None,
        "no error: NaN propagates to its entry",
        check="assert np.isnan(g.data[0]) and g.data[1] == 2.0",
    ),
    _e(
        "nan-where",
        G_NAN,
        "a NaN in the branch np.where discards",
        """
       x = fd.tensor([-1.0, 4.0], requires_grad=True)
       (g,) = fd.grad(np.sum(np.where(x > 0, np.sqrt(x), 0.0)), x)
       safe = np.where(x > 0, np.sqrt(np.where(x > 0, x, 1.0)), 0.0)
       (g_safe,) = fd.grad(np.sum(safe), x)
       """,
        None,
        "no error: NaN from sqrt(-1) x 0, as in torch and JAX; the double-where gives 0",
        check="assert np.isnan(g.data[0]) and g_safe.data.tolist() == [0.0, 0.25]",
    ),
    # ------------------------------------------------------------------ empty / 0-d
    _e(
        "empty-grad",
        G_EMPTY,
        "an empty input",
        "x = fd.tensor(np.zeros(0), requires_grad=True)\n(g,) = fd.grad(np.sum(x ** 2), x)",
        None,
        "no error: an empty gradient",
        check="assert g.shape == (0,)",
    ),
    _e(
        "empty-jacobian",
        G_EMPTY,
        "jacobian and hessian of empty inputs",
        "J = jacobian(lambda x: x ** 2, fd.tensor(np.zeros(0)), vectorize=True)\n"
        "H = hessian(lambda x: np.sum(x ** 2), fd.tensor(np.zeros((0, 2))))",
        None,
        "no error: blocks of shapes (0, 0) and (0, 2, 0, 2)",
        check="assert J.shape == (0, 0) and H.shape == (0, 2, 0, 2)",
    ),
    _e(
        "empty-max",
        G_EMPTY,
        "the maximum of an empty array (NumPy's error)",
        "x = fd.tensor(np.zeros(0), requires_grad=True)\nnp.max(x)",
        ValueError,
        "zero-size array to reduction operation maximum which has no identity",
    ),
    _e(
        "zero-d-hessian",
        G_EMPTY,
        "a 0-d input to hessian, jvp and vjp without v",
        "H = hessian(lambda x: x ** 3, fd.tensor(2.0))\n"
        "_, t = jvp(lambda x: x ** 3, fd.tensor(2.0))\n"
        "_, c = vjp(lambda x: x ** 3, fd.tensor(2.0))",
        None,
        "no error: 0-d results (v defaults to 1)",
        check="assert H.shape == () and H.item() == 12.0 and t.item() == c.item() == 12.0",
    ),
    _e(
        "zero-d-iter",
        G_EMPTY,
        "iterating over a 0-d tensor",
        "iter(fd.tensor(1.0))",
        TypeError,
        "iteration over a 0-d tensor",
    ),
    # ------------------------------------------------------------------ magnitudes
    _e(
        "huge-square",
        G_MAG,
        "a huge input whose value overflows",
        "x = fd.tensor([1e300], requires_grad=True)\ny = np.sum(x ** 2)\n(g,) = fd.grad(y, x)",
        None,
        "no error: the value is inf (as NumPy), the gradient 2e300 exactly",
        check="assert y.item() == np.inf and g.data[0] == 2e300",
    ),
    _e(
        "tiny-square",
        G_MAG,
        "tiny and subnormal inputs",
        "x = fd.tensor([1e-300, 1e-320], requires_grad=True)\n(g,) = fd.grad(np.sum(x ** 2), x)",
        None,
        "no error: exact gradients",
        check="assert g.data.tolist() == [2e-300, 2e-320]",
    ),
    _e(
        "huge-logsumexp",
        G_MAG,
        "logsumexp and softmax of huge values",
        "x = fd.tensor([1000.0, 1000.0], requires_grad=True)\n(g,) = fd.grad(fds.logsumexp(x), x)",
        None,
        "no error: [0.5, 0.5], no overflow",
        check="assert g.data.tolist() == [0.5, 0.5]",
    ),
    _e(
        "huge-hypot",
        G_MAG,
        "hypot of huge values",
        "x = fd.tensor([1e300], requires_grad=True)\n(g,) = fd.grad(np.sum(np.hypot(x, 1e300)), x)",
        None,
        "no error: 1/sqrt(2), no overflow",
        check="assert abs(g.data[0] - 2 ** -0.5) < 1e-15",
    ),
    _e(
        "huge-float32",
        G_MAG,
        "a float32 input near the largest float32",
        "x = fd.tensor(np.array([3e38], dtype=np.float32), requires_grad=True)\n"
        "(g,) = fd.grad(np.sum(x * 2), x)",
        None,
        "no error: gradient 2 in float32",
        check="assert g.dtype == np.float32 and g.data[0] == 2",
    ),
    _e(
        "huge-expit",
        G_MAG,
        "sigmoid saturated at +-1000",
        "x = fd.tensor([-1000.0, 1000.0], requires_grad=True)\n"
        "(g,) = fd.grad(np.sum(sp.expit(x)), x)",
        None,
        "no error: gradients 0, no NaN",
        check="assert g.data.tolist() == [0.0, 0.0]",
    ),
    # ------------------------------------------------------------------ options
    _e(
        "strategy-typo",
        G_OPTS,
        'strategy="forward"',
        'jacobian(lambda x: x, fd.tensor([1.0]), strategy="forward")',
        ValueError,
        'Expected strategy to be either "forward-mode" or "reverse-mode".',
    ),
    _e(
        "strategy-none",
        G_OPTS,
        "strategy=None",
        "jacobian(lambda x: x, fd.tensor([1.0]), strategy=None)",
        ValueError,
        "Got None.",
    ),
    _e(
        "strategy-hessian",
        G_OPTS,
        'outer_jacobian_strategy="fwd"',
        'hessian(lambda x: np.sum(x), fd.tensor([1.0]), outer_jacobian_strategy="fwd")',
        ValueError,
        "Got 'fwd'.",
    ),
    _e(
        "forward-create-graph",
        G_OPTS,
        "forward mode with create_graph=True",
        'jacobian(lambda x: x, fd.tensor([1.0]), strategy="forward-mode", create_graph=True)',
        NotImplementedError,
        "are not supported together (yet)",
    ),
    _e(
        "strict-vectorize",
        G_OPTS,
        "strict=True with vectorize=True",
        "jacobian(lambda x: x, fd.tensor([1.0]), strict=True, vectorize=True)",
        RuntimeError,
        "`strict=True` and `vectorize=True` are not supported together",
    ),
    _e(
        "strict-independent",
        G_OPTS,
        "strict=True with an output independent of an input",
        "jacobian(lambda x, y: x * 2, (fd.tensor([1.0]), fd.tensor([1.0])), strict=True)",
        RuntimeError,
        "Output 0 of the user-provided function is independent of input 1.",
    ),
    _e(
        "chunk-zero",
        G_OPTS,
        "chunk_size=0",
        "jacobian(lambda x: x, fd.tensor([1.0]), vectorize=True, chunk_size=0)",
        ValueError,
        "chunk_size must be None or a positive integer, got 0.",
    ),
    _e(
        "chunk-negative",
        G_OPTS,
        "chunk_size=-3 (hessian)",
        "hessian(lambda x: np.sum(x ** 3), fd.tensor([1.0]), vectorize=True, chunk_size=-3)",
        ValueError,
        "got -3.",
    ),
    _e(
        "chunk-float",
        G_OPTS,
        "chunk_size=1.5",
        "jacobian(lambda x: x, fd.tensor([1.0]), vectorize=True, chunk_size=1.5)",
        ValueError,
        "got 1.5.",
    ),
    _e(
        "chunk-bool",
        G_OPTS,
        "chunk_size=True",
        "jacobian(lambda x: x, fd.tensor([1.0]), vectorize=True, chunk_size=True)",
        ValueError,
        "got True.",
    ),
    # ------------------------------------------------------------------ grad modes
    _e(
        "create-graph-no-grad",
        G_MODE,
        "grad(create_graph=True) inside no_grad",
        """
       x = fd.tensor([1.0, 2.0], requires_grad=True)
       y = np.sum(x ** 3)
       with fd.no_grad():
           (g,) = fd.grad(y, x, create_graph=True)
       (h,) = fd.grad(np.sum(g), x)
       """,
        None,
        "no error: create_graph wins, the gradient is recorded and differentiable",
        check="assert g.requires_grad and h.data.tolist() == [6.0, 12.0]",
    ),
    _e(
        "hessian-create-graph-no-grad",
        G_MODE,
        "hessian(create_graph=True) inside no_grad",
        """
       x = fd.tensor([1.0, 2.0], requires_grad=True)
       with fd.no_grad():
           H = hessian(lambda x: np.sum(x ** 3), x, create_graph=True)
       (t,) = fd.grad(np.sum(H), x)
       """,
        None,
        "no error: the Hessian is recorded; third derivative [6, 6]",
        check="assert H.grad_fn is not None and t.data.tolist() == [6.0, 6.0]",
    ),
    _e(
        "no-grad-output",
        G_MODE,
        "grad of a value computed inside no_grad",
        "x = fd.tensor([1.0, 2.0], requires_grad=True)\nwith fd.no_grad():\n"
        "    y = np.sum(x ** 3)\nfd.grad(y, x, create_graph=True)",
        RuntimeError,
        "element 0 of tensors does not require grad and does not have a grad_fn",
    ),
    _e(
        "grad-mode-type",
        G_MODE,
        "set_grad_enabled with a non-bool",
        'fd.set_grad_enabled("maybe")',
        TypeError,
        "expects a bool, got str",
    ),
    # ------------------------------------------------------------------ engine misuse
    _e(
        "input-no-grad",
        G_ENGINE,
        "grad with respect to a tensor that does not require grad",
        "x = fd.tensor([1.0, 2.0])\nfd.grad(np.sum(x * 2), x)",
        RuntimeError,
        "does not require grad",
    ),
    _e(
        "input-unused",
        G_ENGINE,
        "grad with respect to an unused input",
        X3 + "z = fd.tensor([1.0], requires_grad=True)\nfd.grad(np.sum(x), (x, z))",
        RuntimeError,
        "appears to not have been used in the graph",
    ),
    _e(
        "materialize-unused",
        G_ENGINE,
        "materialize_grads=True with allow_unused=False",
        X3 + "fd.grad(np.sum(x), x, allow_unused=False, materialize_grads=True)",
        ValueError,
        "Expected allow_unused to be True or not passed when materialize_grads=True",
    ),
    _e(
        "backward-empty-inputs",
        G_ENGINE,
        "backward(inputs=[])",
        X3 + "np.sum(x).backward(inputs=[])",
        RuntimeError,
        "`inputs` argument to `backward()` cannot be empty.",
    ),
    _e(
        "grad-outputs-not-tensor",
        G_ENGINE,
        "a number among the outputs of grad",
        X3 + "fd.grad([np.sum(x), 1.0], x)",
        TypeError,
        "outputs[1] must be a Tensor, got float",
    ),
    _e(
        "hook-no-grad",
        G_ENGINE,
        "register_hook on a tensor that does not require grad",
        "fd.tensor([1.0]).register_hook(lambda g: g)",
        RuntimeError,
        "cannot register a hook on a tensor that doesn't require gradient",
    ),
    _e(
        "hook-not-callable",
        G_ENGINE,
        "register_hook with something not callable",
        X3 + "x.register_hook(3)",
        TypeError,
        "register_hook expects a callable, got int",
    ),
    _e(
        "hook-shape",
        G_ENGINE,
        "a hook returning a gradient of another shape",
        X3 + "x.register_hook(lambda g: np.ones(2))\nnp.sum(x * 2).backward()",
        RuntimeError,
        "has changed the size of value: it returned shape (2,) for a gradient of shape (3,)",
    ),
    _e(
        "hook-type",
        G_ENGINE,
        "a hook returning a string",
        X3 + 'x.register_hook(lambda g: "abc")\nnp.sum(x * 2).backward()',
        TypeError,
        "a hook must return a Tensor, an ndarray or None",
    ),
    _e(
        "retain-grad-no-grad",
        G_ENGINE,
        "retain_grad on a tensor that does not require grad",
        "fd.tensor([1.0]).retain_grad()",
        RuntimeError,
        "can't retain_grad on Tensor that has requires_grad=False",
    ),
    _e(
        "grad-setter-shape",
        G_ENGINE,
        "assigning a .grad of the wrong shape",
        X3 + "x.grad = np.ones(2)",
        RuntimeError,
        "assigned grad has shape (2,), but the tensor has shape (3,)",
    ),
    _e(
        "non-leaf-requires-grad",
        G_ENGINE,
        "requires_grad = False on a non-leaf",
        X3 + "(x * 2).requires_grad = False",
        RuntimeError,
        "you can only change requires_grad flags of leaf variables",
    ),
    _e(
        "deepcopy-non-leaf",
        G_ENGINE,
        "deepcopy of a non-leaf",
        X3 + "copy.deepcopy(x * 2)",
        RuntimeError,
        "Only Tensors created explicitly by the user (graph leaves)",
    ),
    _e(
        "out-ndarray-target",
        G_ENGINE,
        "a ufunc writing a Tensor that requires grad into an ndarray",
        X3 + "np.sin(x, out=np.zeros(3))",
        RuntimeError,
        "numpy.sin would write a Tensor that requires grad into a plain ndarray",
    ),
    _e(
        "function-grad-count",
        G_ENGINE,
        "a custom Function returning too many gradients",
        """
       class Twice(fd.Function):
           @staticmethod
           def forward(ctx, x):
               return x * 2
           @staticmethod
           def backward(ctx, g):
               return g * 2, g
       x = fd.tensor([1.0], requires_grad=True)
       np.sum(Twice.apply(x)).backward()
       """,
        RuntimeError,
        "returned an incorrect number of gradients (expected 1, got 2)",
    ),
    # ------------------------------------------------------------------ complex, names
    _e(
        "complex-backward",
        G_NAMED,
        "backward() on a complex scalar without a gradient",
        X3 + "np.sum(x * 1j).backward()",
        RuntimeError,
        "grad can be implicitly created only for real scalar outputs but got complex128",
    ),
    _e(
        "complex-v",
        G_NAMED,
        "a complex v for a real input (jvp, hvp, vhp) or a real v for a complex output (vjp)",
        "hvp(lambda x: np.sum(x * x), np.array([1.0]), np.array([1j]))",
        RuntimeError,
        "Mismatch in dtype: v[0] has a dtype of complex128",
    ),
    _e(
        "complex-jacobian-rows",
        G_NAMED,
        "the row-by-row reverse-mode Jacobian of a complex output (and so hessian of "
        "complex inputs)",
        "jacobian(lambda z: z * 2, np.array([1 + 1j]))",
        RuntimeError,
        "the row-by-row reverse-mode Jacobian of a complex output is undefined",
    ),
    _e(
        "unsup-scipy-wrapper",
        G_NAMED,
        "a SciPy function without a rule whose wrapper runs a private ufunc",
        X3 + "sp.lambertw(x)",
        TypeError,
        "funcdiff has no derivative rule for scipy.special.lambertw,",
    ),
    _e(
        "unsup-scipy-ufunc",
        G_NAMED,
        "a SciPy ufunc without a rule",
        X3 + "sp.spence(x)",
        TypeError,
        "funcdiff has no derivative rule for scipy.special.spence,",
    ),
    _e(
        "stats-no-closed-form",
        G_NAMED,
        "a CDF differentiated in a shape parameter without a closed-form derivative",
        "a = fd.tensor(2.0, requires_grad=True)\nfd.stats.gamma.cdf(1.0, a)",
        NotImplementedError,
        "funcdiff.stats.gamma.cdf is differentiable in x, loc and scale, not in the shape a",
    ),
    _e(
        "stats-missing-shape",
        G_NAMED,
        "a funcdiff.stats method called without its shape parameter",
        "fd.stats.gamma.logpdf(fd.tensor(1.0, requires_grad=True))",
        TypeError,
        "funcdiff.stats.gamma.logpdf is missing the shape parameter(s) a",
    ),
    _e(
        "stats-mvn-cov",
        G_NAMED,
        "a covariance that is not positive definite in multivariate_normal.logpdf",
        "m = fd.tensor([0.0, 0.0], requires_grad=True)\n"
        "fd.stats.multivariate_normal.logpdf([1.0, 2.0], m, -np.eye(2))",
        ValueError,
        "funcdiff.stats.multivariate_normal.logpdf: cov must be symmetric positive definite",
    ),
    # ------------------------------------------------------------------ leaving the graph
    # Every way out of the graph raises where a derivative would be lost, and works where
    # none can be (docs/concepts.md, "Leaving the graph", has the whole table).
    _e(
        "exit-float",
        G_EXIT,
        "float() of a tensor that requires grad",
        X3 + "float(x[0])",
        RuntimeError,
        "Can't call float() on a Tensor that requires grad: the Python number would carry "
        "no derivative",
    ),
    _e(
        "exit-ndarray-store",
        G_EXIT,
        "storing a tensor that requires grad into an element of a plain ndarray (NumPy "
        "raises ValueError 'setting an array element with a sequence' from this error)",
        """
       x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
       out = np.zeros(3)
       try:
           out[0] = x[0] ** 2
       except ValueError as numpy_error:  # NumPy wraps funcdiff's error: it is the cause
           raise numpy_error.__cause__
       """,
        RuntimeError,
        "store into out = np.zeros_like(x), a Tensor that records the assignment",
    ),
    _e(
        "exit-math",
        G_EXIT,
        "a math function (math.exp) of a tensor that requires grad",
        X3 + "import math\nmath.exp(x[0])",
        RuntimeError,
        "use np.exp, np.floor ... instead of the math functions",
    ),
    _e(
        "exit-int",
        G_EXIT,
        "int() of a tensor that requires grad",
        X3 + "int(x[0])",
        RuntimeError,
        "Can't call int() on a Tensor that requires grad",
    ),
    _e(
        "exit-complex",
        G_EXIT,
        "complex() of a tensor that requires grad",
        X3 + "complex(x[0])",
        RuntimeError,
        "use tensor.item() or complex(tensor.detach())",
    ),
    _e(
        "exit-slice-store",
        G_EXIT,
        "storing a tensor that requires grad into a slice of a plain ndarray",
        X3 + "out = np.zeros(3)\nout[:] = x * 2",
        RuntimeError,
        "or it was stored into a plain ndarray (out[...] = t; make out with np.zeros_like(x)",
    ),
    _e(
        "exit-scipy-wrapped",
        G_EXIT,
        "a SciPy function that funcdiff.linalg wraps",
        "a = fd.tensor(np.eye(2), requires_grad=True)\nscipy.linalg.solve(a, a)",
        RuntimeError,
        "scipy.linalg.solve was called on it, and SciPy functions do not accept Tensors: use "
        "funcdiff.linalg.solve, which accepts Tensors",
    ),
    _e(
        "exit-scipy-unwrapped",
        G_EXIT,
        "a SciPy function without a funcdiff rule",
        "a = fd.tensor(np.eye(2), requires_grad=True)\nscipy.linalg.eigvals(a)",
        RuntimeError,
        "funcdiff has no rule for scipy.linalg.eigvals",
    ),
    _e(
        "exit-copy",
        G_EXIT,
        "copy.copy of a tensor that requires grad",
        X3 + "copy.copy(x)",
        RuntimeError,
        "Use tensor.copy() for a recorded copy, or tensor.detach()",
    ),
    _e(
        "exit-pickle",
        G_EXIT,
        "pickling a tensor that is not a graph leaf",
        X3 + "import pickle\npickle.dumps(x * 2)",
        RuntimeError,
        "Can't pickle a Tensor that is not a graph leaf",
    ),
    _e(
        "exit-copy-false",
        G_EXIT,
        "np.asarray with copy=False where a dtype conversion needs a copy",
        "np.asarray(fd.tensor([1.0, 2.0]), dtype=np.float32, copy=False)",
        ValueError,
        "Unable to avoid copy while creating an array as requested.",
    ),
    _e(
        "exit-item",
        G_EXIT,
        "item() and tolist() of a tensor that requires grad (explicit, as in torch)",
        X3 + "v, vs = x[0].item(), x.tolist()",
        None,
        "no error: Python numbers, without the derivative",
        check="assert v == 1.0 and vs == [1.0, 2.0, 3.0]",
    ),
    _e(
        "exit-no-grad",
        G_EXIT,
        "float() under no_grad, and of a detached tensor",
        X3 + "with fd.no_grad():\n    v = float(x[1])\nw = float(x[2].detach())",
        None,
        "no error: nothing is recorded, so nothing is lost",
        check="assert (v, w) == (2.0, 3.0)",
    ),
    _e(
        "exit-branch",
        G_EXIT,
        "branching on a scalar that requires grad",
        X3 + "y = x[0] ** 2 if x[0] > 0 else -x[0]\n(g,) = fd.grad(y, x)",
        None,
        "no error: the branch taken is recorded",
        check="assert g.data.tolist() == [2.0, 0.0, 0.0]",
    ),
    _e(
        "exit-format",
        G_EXIT,
        "formatting a tensor that requires grad",
        X3 + 's = f"{x[1]:.3f}"',
        None,
        "no error: display, as in torch",
        check='assert s == "2.000"',
    ),
    # ------------------------------------------------------------------ checking
    _e(
        "check-jac-shape",
        G_CHECK,
        "a hand-written gradient of the wrong shape",
        "check_derivatives(lambda x: np.sum(np.sin(x)), np.zeros(3), jac=lambda x: np.cos(x)[:2])",
        ValueError,
        "jac returned an array of shape (2,) for df/dx at the check point; expected (3,)",
    ),
    _e(
        "check-jac-type",
        G_CHECK,
        "jac that is not callable",
        'check_derivatives(lambda x: np.sum(np.sin(x)), np.zeros(3), jac="cos")',
        TypeError,
        "jac must be callable, got str",
    ),
    _e(
        "check-hess-order",
        G_CHECK,
        "hess= without order=2",
        "check_derivatives(lambda x: np.sum(x**3), np.ones(2), hess=lambda x: np.diag(6 * x))",
        ValueError,
        "hess= gives second derivatives: pass order=2 to check them (got order=1)",
    ),
    _e(
        "check-complex",
        G_CHECK,
        "a hand-written jac for a complex input to check_derivatives",
        "check_derivatives(lambda z: z * 2, np.array([1 + 1j]), jac=lambda z: 2 * np.eye(1))",
        TypeError,
        "compares a hand-written jac/hess of real inputs only",
    ),
    # ------------------------------------------------------------------ funcdiff.numpy
    _e(
        "fnp-array-ragged",
        G_ARRAY,
        "funcdiff.numpy.array of a ragged nested list holding Tensors",
        X3 + "import funcdiff.numpy as fnp\nfnp.array([x, 1.0])",
        ValueError,
        "array(object): the elements of a nested sequence holding Tensors must all have",
    ),
    _e(
        "fnp-array-object",
        G_ARRAY,
        "funcdiff.numpy.array of Tensors with dtype=object",
        X3 + "import funcdiff.numpy as fnp\nfnp.array([x, x], dtype=object)",
        TypeError,
        "array(dtype): dtype=object cannot hold a Tensor's gradient",
    ),
    _e(
        "fnp-mean-ragged",
        G_ARRAY,
        "funcdiff.numpy.mean of a ragged list of Tensors",
        X3 + "import funcdiff.numpy as fnp\nfnp.mean([x, x[0]])",
        ValueError,
        "mean(a): the elements of a nested sequence",
    ),
    _e(
        "fnp-r-directive",
        G_ARRAY,
        "funcdiff.numpy.r_ with a string directive and a Tensor",
        X3 + "import funcdiff.numpy as fnp\nfnp.r_['0,2', x, x]",
        ValueError,
        "string directives",
    ),
    # ------------------------------------------------------------------ funcdiff.sparse
    _e(
        "sparse-pattern-shape",
        G_SPARSE,
        "a sparsity pattern of the wrong shape",
        "import funcdiff.sparse as fs\nfs.jacobian(np.sin, np.ones(3), sparsity=np.ones((2, 3)))",
        ValueError,
        "sparsity must have shape (3, 3), got (2, 3)",
    ),
    _e(
        "sparse-pattern-type",
        G_SPARSE,
        "a string where a pattern is expected",
        'import funcdiff.sparse as fs\nfs.prepare_jacobian(np.sin, np.ones(3), sparsity="band")',
        TypeError,
        "sparsity must be None (detect) or a pattern",
    ),
    _e(
        "sparse-pattern-missing",
        G_SPARSE,
        "a given pattern that misses entries",
        "import funcdiff.sparse as fs\n"
        "J = fs.prepare_jacobian(np.cumsum, np.ones(3), sparsity=np.eye(3))\nJ(np.ones(3))",
        fd.sparse.SparsityError,
        "the sparse Jacobian misses entries in rows [1, 2]",
    ),
    _e(
        "sparse-guard",
        G_SPARSE,
        "a prepared Jacobian called where the function branches differently",
        "import funcdiff.sparse as fs\n"
        "f = lambda x: x ** 2 if x[0] > 0 else x[::-1] * 1.0\n"
        'J = fs.prepare_jacobian(f, np.ones(3), on_guard_failure="raise")\nJ(-np.ones(3))',
        fd.sparse.SparsityGuardError,
        "the function takes other branches at this x",
    ),
    _e(
        "sparse-shape",
        G_SPARSE,
        "a point of another shape than the prepared one",
        "import funcdiff.sparse as fs\nJ = fs.prepare_jacobian(np.sin, np.ones(3))\nJ(np.ones(4))",
        ValueError,
        "x must have the shape the derivative was prepared for, (3,), got (4,)",
    ),
    _e(
        "sparse-hessian-vector",
        G_SPARSE,
        "a Hessian of a function with several outputs",
        "import funcdiff.sparse as fs\nfs.hessian(np.sin, np.ones(3))",
        ValueError,
        "a Hessian needs a function with one output element",
    ),
    _e(
        "sparse-mode",
        G_SPARSE,
        "an unknown mode",
        'import funcdiff.sparse as fs\nfs.jacobian(np.sin, np.ones(3), mode="both")',
        ValueError,
        "mode must be 'auto', 'forward' or 'reverse'",
    ),
    _e(
        "sparse-optimize-method",
        G_SPARSE,
        "sparse=True with a minimize method that takes no Hessian",
        'fd.optimize.minimize(lambda x: np.sum(x ** 2), np.ones(3), method="BFGS", sparse=True)',
        ValueError,
        "needs a method that takes a Hessian matrix",
    ),
    # ------------------------------------------------------------------ sparse matrices
    _e(
        "spmat-mismatch",
        G_SPMAT,
        "a scipy.sparse matrix times a Tensor of the wrong length",
        X3 + "scipy.sparse.csr_array(np.ones((2, 4))) @ x",
        ValueError,
        "matmul: dimension mismatch",
    ),
    _e(
        "spmat-scalar",
        G_SPMAT,
        "a scipy.sparse matrix times a 0-d Tensor",
        "scipy.sparse.csr_matrix(np.eye(2)) * fd.tensor(2.0, requires_grad=True)",
        TypeError,
        "sparse matrix of Tensors",
    ),
    _e(
        "spmat-elementwise",
        G_SPMAT,
        "a Tensor times a scipy.sparse array elementwise",
        X3 + "x * scipy.sparse.csr_array(np.eye(3))",
        RuntimeError,
        "the gradient would be lost",
    ),
    _e(
        "csr-indptr",
        G_SPMAT,
        "csr_array with an index pointer of the wrong length",
        X3 + "import funcdiff.sparse as fs\nfs.csr_array((x, [0, 1, 2], [0, 3]), shape=(2, 3))",
        ValueError,
        "index pointer size 2 should be 3",
    ),
    _e(
        "csr-bounds",
        G_SPMAT,
        "csr_array with a column index out of range",
        X3 + "import funcdiff.sparse as fs\nfs.csr_array((x, [0, 1, 5], [0, 3]), shape=(1, 3))",
        ValueError,
        "column index out of bounds",
    ),
    _e(
        "spsolve-singular",
        G_SPMAT,
        "spsolve with a singular matrix",
        "from funcdiff.sparse.linalg import spsolve\n"
        "b = fd.tensor([1.0, 2.0], requires_grad=True)\n"
        "spsolve(scipy.sparse.csc_array(np.ones((2, 2))), b)",
        np.linalg.LinAlgError,
        "singular",
    ),
    _e(
        "spsolve-rhs",
        G_SPMAT,
        "spsolve with a right-hand side of the wrong length",
        X3 + "from funcdiff.sparse.linalg import spsolve\n"
        "spsolve(scipy.sparse.eye_array(2, format='csc'), x)",
        ValueError,
        "matrix - rhs dimension mismatch",
    ),
    _e(
        "splu-grad",
        G_SPMAT,
        "splu of a matrix whose values require grad",
        X3 + "import funcdiff.sparse as fs\n"
        "fs.linalg.splu(fs.csr_array((x, [0, 1, 2], [0, 1, 2, 3]), shape=(3, 3)))",
        TypeError,
        "use funcdiff.sparse.linalg.spsolve",
    ),
)

#: A paragraph shown under a group's heading on the page.
GROUP_NOTES = {
    G_EXIT: "Only the exits that lose a derivative raise; the rows without an error are "
    "allowed on purpose. The table of every exit, and why each one raises or not, is in "
    ':doc:`concepts` ("Leaving the graph: Python numbers").',
}

#: Python-internal error types that must never come out of funcdiff unless NumPy itself
#: raises them for the same input on ndarrays (``x[5]`` gives IndexError on ndarrays too).
INTERNAL_ERRORS = (
    AttributeError,
    IndexError,
    KeyError,
    UnboundLocalError,
    NameError,
    AssertionError,
    RecursionError,
)
#: The entries whose internal-looking error is NumPy's own answer for plain ndarrays.
NUMPY_OWN_ERRORS = frozenset({"op-index", "op-axis"})
#: Entries whose message is NumPy's (the page shows the asserted fragment only, so that it
#: does not depend on the NumPy version), and entries that append NumPy's reason.
NUMPY_MESSAGES = frozenset(
    {
        "op-broadcast",
        "op-matmul",
        "op-reshape",
        "op-concatenate",
        "op-axis",
        "op-index",
        "op-singular",
        "op-string-operand",
        "empty-max",
    }
)
NUMPY_REASONS = frozenset({"tensor-ragged", "tensor-dtype"})


def namespace() -> dict:
    """A fresh namespace for one entry's code."""
    return {
        "np": np,
        "sp": sp,
        "scipy": scipy,
        "fd": fd,
        "fdl": fdl,
        "fds": fds,
        "copy": copy,
        "jacobian": jacobian,
        "hessian": hessian,
        "vjp": vjp,
        "jvp": jvp,
        "hvp": hvp,
        "vhp": vhp,
        "check_derivatives": check_derivatives,
    }


def run(entry: Entry) -> tuple[dict, BaseException | None]:
    """Execute ``entry.code``; return its namespace and what it raised (or None)."""
    ns = namespace()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            exec(compile(entry.code, f"<bad input {entry.id}>", "exec"), ns)
        except Exception as exc:  # noqa: BLE001  (the point is to see what it raises)
            return ns, exc
    return ns, None


def _type_name(t: type) -> str:
    mod = t.__module__
    if mod == "builtins":
        return t.__name__
    public = {"numpy.linalg": "numpy.linalg", "numpy.exceptions": "numpy.exceptions"}
    for prefix, name in public.items():
        if mod.startswith(prefix):
            return f"{name}.{t.__name__}"
    return f"{mod}.{t.__name__}"


def _cell(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")
    # ``np.c_`` would be a link target in reST: escape a word-final underscore.
    return re.sub(r"(\w)_(?=\W|$)", r"\1\\_", text)


def render_rst() -> str:
    """The docs page: every entry, run now, with the type and message the user gets."""
    lines = [
        ":orphan:",
        "",
        ".. This page is generated by ``python tests/support/bad_input_catalogue.py --write "
        "docs/bad_input.rst``",
        "   from the catalogue that tests/test_bad_input.py runs; do not edit it by hand.",
        "",
        "Bad input: what you get",
        "=======================",
        "",
        f"funcdiff answers each of the {len(CATALOGUE)} kinds of bad input below with the "
        "exception shown (type and",
        "message, exactly as funcdiff produces them) or, for input that is legal but "
        "hostile (NaN, inf,",
        "empty and 0-d arrays, huge and tiny magnitudes), with the result described. None "
        "of them ends in",
        "an internal error (``AttributeError``, ``KeyError``, an ``IndexError`` from inside "
        "funcdiff) or a",
        "silently wrong number; ``tests/test_bad_input.py`` checks every row, and checks "
        "that an exception",
        "raised by your own function comes through unchanged (the same object).",
        "",
        "Errors that NumPy itself raises for the same call on plain arrays (broadcasting, "
        "``AxisError``,",
        "an index out of range, a singular matrix) reach you unchanged, as they would "
        "without funcdiff.",
        "",
    ]
    groups: list[str] = []
    for e in CATALOGUE:
        if e.group not in groups:
            groups.append(e.group)
    number = 0
    for group in groups:
        lines += [
            group,
            "-" * len(group),
            "",
            *([GROUP_NOTES[group], ""] if group in GROUP_NOTES else []),
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 4 24 36 36",
            "",
            "   * - #",
            "     - Bad input",
            "     - Code",
            "     - What you get",
        ]
        for e in CATALOGUE:
            if e.group != group:
                continue
            number += 1
            _, exc = run(e)
            if exc is None:
                outcome = ["**no error**", "", _cell(e.match.removeprefix("no error: "))]
            else:
                msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                if isinstance(exc, KeyError):
                    msg = str(exc.args[0])
                if e.id in NUMPY_MESSAGES:
                    msg = f"NumPy's own message, which contains: {e.match}"
                elif e.id in NUMPY_REASONS:
                    msg = msg.split(": ")[0] + ": (NumPy's reason)"
                shown = e.raises if e.id in NUMPY_MESSAGES else type(exc)  # no private classes
                outcome = [f"``{_type_name(shown)}``", "", _cell(msg)]
                if e.same_object:
                    outcome += ["", "(your exception object itself)"]
            lines += [
                f"   * - {number}",
                f"     - {_cell(e.what)}",
                "     - .. code-block:: python",
                "",
            ]
            lines += ["          " + ln if ln else "" for ln in e.code.splitlines()]
            lines += [""]
            lines += [f"     - {outcome[0]}"] + [
                "" if not ln else "       " + ln for ln in outcome[1:]
            ]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the bad-input catalogue page.")
    parser.add_argument("--write", type=Path, help="write the page here (else print it)")
    args = parser.parse_args(argv)
    text = render_rst()
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        print(f"wrote {args.write} ({len(CATALOGUE)} entries)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
