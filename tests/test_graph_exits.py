"""Every way a value leaves the recorded graph: raise, or lose nothing.

A Python number made from a Tensor carries no derivative. ``float(t)`` (which NumPy
calls when a Tensor is stored into a plain ndarray, and ``math`` functions call too),
``int(t)`` and ``complex(t)`` therefore raise on a Tensor that requires grad while grad
mode is on; where nothing can be lost (no_grad, inference_mode, detached tensors,
tensors that do not require grad) they work as before. Branching, formatting,
``len``/iteration, ``item()`` and ``tolist()`` stay allowed. See docs/concepts.md,
"Leaving the graph".
"""

from __future__ import annotations

import copy
import math
import operator
import pickle
import traceback

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

import funcdiff as fd
from funcdiff import linalg as fdl
from funcdiff._core.alternatives import SCIPY_ALTERNATIVES
from funcdiff.functional import jvp, vjp

X0 = np.array([1.0, 2.0, 3.0])


def central_difference(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Gradient of the scalar function ``f`` of plain ndarrays by central differences."""
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def cube_sum_plain(x: np.ndarray) -> float:
    return float(np.sum(x**2 * x))


def funcdiff_error(exc: BaseException) -> BaseException:
    """The RuntimeError funcdiff raised: NumPy's item assignment chains it as the cause."""
    return exc if isinstance(exc, RuntimeError) else exc.__cause__


# ------------------------------------------------------------------ the two silent bugs
def buffer_from_zeros(x):
    out = np.zeros(3)  # a plain ndarray: NumPy calls float() on each Tensor stored
    for i in range(3):
        out[i] = x[i] ** 2
    return np.sum(out * x)


def buffer_from_zeros_like(x):
    out = np.zeros_like(x)  # a Tensor: the assignments are recorded
    for i in range(3):
        out[i] = x[i] ** 2
    return np.sum(out * x)


def built_with_stack(x):
    return np.sum(np.stack([x[i] ** 2 for i in range(3)]) * x)


def test_storing_into_a_plain_ndarray_raises_instead_of_a_wrong_gradient() -> None:
    # Before, this returned [1, 4, 9]: the x**2 factor was stored as a constant.
    with pytest.raises((RuntimeError, ValueError)) as info:
        vjp(buffer_from_zeros, X0)
    err = funcdiff_error(info.value)
    assert isinstance(err, RuntimeError)
    msg = str(err)
    assert "Can't call float() on a Tensor that requires grad" in msg
    assert "out[i] = t" in msg and "np.zeros_like(x)" in msg and "np.stack" in msg
    assert "tensor.item()" in msg and "float(tensor.detach())" in msg
    # NumPy wraps it in "setting an array element with a sequence"; the traceback the
    # user sees still prints funcdiff's message.
    shown = "".join(traceback.format_exception(info.value))
    assert "Can't call float() on a Tensor that requires grad" in shown


@pytest.mark.parametrize("f", [buffer_from_zeros_like, built_with_stack])
def test_the_recommended_buffers_give_the_true_gradient(f) -> None:
    value, grad = vjp(f, X0)
    np.testing.assert_allclose(value.data, np.sum(X0**3), rtol=1e-15)
    np.testing.assert_allclose(grad.data, 3 * X0**2, rtol=1e-14)  # [3, 12, 27]
    np.testing.assert_allclose(grad.data, central_difference(cube_sum_plain, X0), rtol=1e-7)


def test_math_exp_raises_and_np_exp_gives_the_true_derivative() -> None:
    # Before, this returned e: math.exp(x) was a constant.
    with pytest.raises(RuntimeError, match=r"Can't call float\(\) .*math\.exp"):
        vjp(lambda x: x * math.exp(x), 1.0)
    value, grad = vjp(lambda x: x * np.exp(x), 1.0)
    np.testing.assert_allclose(value.data, math.e, rtol=1e-15)
    np.testing.assert_allclose(grad.data, 2 * math.e, rtol=1e-15)
    fd_grad = central_difference(lambda a: float(a[0] * np.exp(a[0])), np.array([1.0]))
    np.testing.assert_allclose(grad.data, fd_grad[0], rtol=1e-8)


def test_forward_mode_raises_the_same_way() -> None:
    with pytest.raises(RuntimeError, match=r"Can't call float\(\)"):
        jvp(lambda x: x * math.exp(x), fd.tensor(1.0), fd.tensor(1.0))


# ------------------------------------------------------------------ the conversions
CONVERSIONS = {
    "float": (float, "float()"),
    "int": (int, "int()"),
    "complex": (complex, "complex()"),
    "math.exp": (math.exp, "float()"),
    "math.sqrt": (math.sqrt, "float()"),
    "math.floor": (math.floor, "float()"),
    "math.ceil": (math.ceil, "float()"),
    "math.isnan": (math.isnan, "float()"),
    "percent-format": (lambda t: "%.3f" % t, "float()"),  # noqa: UP031
}
TRUE_VALUES = {
    "float": 2.25,
    "int": 2,
    "complex": 2.25 + 0j,
    "math.exp": math.exp(2.25),
    "math.sqrt": 1.5,
    "math.floor": 2,
    "math.ceil": 3,
    "math.isnan": False,
    "percent-format": "2.250",
}


@pytest.mark.parametrize("name", list(CONVERSIONS))
def test_conversion_of_a_leaf_that_requires_grad_raises(name: str) -> None:
    convert, shown = CONVERSIONS[name]
    x = fd.tensor(2.25, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        convert(x)
    msg = str(info.value)
    assert msg.startswith(f"Can't call {shown} on a Tensor that requires grad")
    assert "np.zeros_like(x)" in msg and "tensor.item()" in msg


@pytest.mark.parametrize("name", list(CONVERSIONS))
def test_conversion_of_a_non_leaf_raises(name: str) -> None:
    convert, _ = CONVERSIONS[name]
    x = fd.tensor([1.5, 2.0], requires_grad=True)
    y = (x * 1.5)[0]  # recorded: grad_fn set, requires grad
    assert y.grad_fn is not None
    with pytest.raises(RuntimeError, match="requires grad"):
        convert(y)


@pytest.mark.parametrize("name", list(CONVERSIONS))
def test_conversion_works_where_nothing_can_be_lost(name: str) -> None:
    convert, _ = CONVERSIONS[name]
    expected = TRUE_VALUES[name]
    x = fd.tensor(2.25, requires_grad=True)
    with fd.no_grad():
        assert convert(x) == expected
    with fd.inference_mode():
        assert convert(x) == expected
    with fd.set_grad_enabled(False):
        assert convert(x) == expected
    assert convert(x.detach()) == expected
    assert convert((x * 1.0).detach()) == expected
    assert convert(fd.tensor(2.25)) == expected


def test_conversion_results_have_the_python_types() -> None:
    t = fd.tensor(2.75)
    assert type(float(t)) is float and float(t) == 2.75
    assert type(int(t)) is int and int(t) == 2
    assert type(complex(t)) is complex and complex(t) == 2.75 + 0j
    assert int(fd.tensor(7)) == 7 and complex(fd.tensor(7)) == 7 + 0j


def test_item_and_tolist_are_explicit_and_allowed() -> None:
    x = fd.tensor([1.5, -2.0], requires_grad=True)
    assert x[0].item() == 1.5 and type(x[0].item()) is float
    assert x.tolist() == [1.5, -2.0]
    assert (x * 2).tolist() == [3.0, -4.0]


def test_the_second_order_graph_is_guarded_too() -> None:
    x = fd.tensor(1.5, requires_grad=True)
    (g,) = fd.grad(x**3, x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g.data, 3 * 1.5**2, rtol=1e-15)
    with pytest.raises(RuntimeError, match=r"Can't call float\(\)"):
        float(g)
    (h,) = fd.grad(g, x)
    np.testing.assert_allclose(h.data, 6 * 1.5, rtol=1e-15)


def test_a_custom_function_forward_runs_without_grad_and_may_convert() -> None:
    class Scale(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.factor = float(x[0])  # forward runs under no_grad: allowed
            return x * ctx.factor

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor

    x = fd.tensor([2.0, 3.0], requires_grad=True)
    np.sum(Scale.apply(x)).backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 2.0])


def test_index_needs_an_integer_tensor() -> None:
    # Only integer tensors convert (they never require grad); a float tensor gets NumPy's
    # TypeError, whether or not it requires grad.
    assert operator.index(fd.tensor(3)) == 3
    assert [10, 20, 30, 40][fd.tensor(2)] == 30
    for t in (fd.tensor(2.0, requires_grad=True), fd.tensor(2.0)):
        with pytest.raises(TypeError, match="only integer scalar arrays"):
            operator.index(t)


def test_round_and_trunc_are_not_defined_as_for_ndarrays() -> None:
    x = fd.tensor(2.5, requires_grad=True)
    with pytest.raises(TypeError, match="__round__"):
        round(x)
    with pytest.raises(TypeError, match="__trunc__"):
        math.trunc(x)
    r = np.round(x)  # the recorded way: a constant, derivative zero
    assert r.data == 2.0 and not r.requires_grad


# ------------------------------------------------------------------ allowed exits
def branchy(x):
    # comparisons give constants; the branch picks which recorded operations run
    if x > 0:
        return x**2
    return -3.0 * x


@pytest.mark.parametrize(("x0", "expected"), [(1.5, 3.0), (-2.0, -3.0)])
def test_branching_on_a_scalar_that_requires_grad_is_allowed(x0: float, expected: float) -> None:
    x = fd.tensor(x0, requires_grad=True)
    assert bool(x) is True
    assert bool(x > 0) is (x0 > 0)
    (g,) = fd.grad(branchy(x), x)
    np.testing.assert_allclose(g.data, expected, rtol=1e-15)
    h = 1e-6
    np.testing.assert_allclose(
        g.data, (branchy(fd.tensor(x0 + h)).data - branchy(fd.tensor(x0 - h)).data) / (2 * h)
    )


def test_bool_of_several_elements_is_numpys_ambiguity_error() -> None:
    x = fd.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(x)


def test_formatting_is_allowed_as_display() -> None:
    x = fd.tensor(2.0, requires_grad=True)
    assert f"{x:.3f}" == "2.000"
    assert f"{x * 1.5:8.2f}" == "    3.00"
    assert f"{x}" == repr(x) == "tensor(2., requires_grad=True)"
    assert str(x) == repr(x)
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{fd.tensor([1.0, 2.0]):.3f}"


def test_len_and_iteration_stay_in_the_graph() -> None:
    x = fd.tensor(X0, requires_grad=True)
    assert len(x) == 3
    parts = list(x)
    assert all(p.requires_grad and p.grad_fn is not None for p in parts)
    (g,) = fd.grad(sum(p**3 for p in parts), x)
    np.testing.assert_allclose(g.data, 3 * X0**2, rtol=1e-15)


def test_data_bypasses_tracking() -> None:
    x = fd.tensor([1.0, 2.0], requires_grad=True)
    assert type(x.data) is np.ndarray
    y = x.data * 2  # documented: .data is the raw ndarray, nothing is recorded
    assert type(y) is np.ndarray


# ------------------------------------------------------------------ arrays, copies, pickles
@pytest.mark.parametrize(
    "convert",
    [
        np.asarray,
        np.array,
        lambda t: np.asarray(t, dtype=np.float32),
        lambda t: np.array(t, copy=True),
        lambda t: np.ascontiguousarray(t),
        np.float64,  # goes through __array__
    ],
)
def test_array_conversion_raises_on_every_dtype_and_copy_path(convert) -> None:
    x = fd.tensor(X0, requires_grad=True)
    with pytest.raises(RuntimeError, match="the gradient would be lost"):
        convert(x)
    with fd.no_grad():
        np.testing.assert_array_equal(convert(x), X0)


def test_array_conversion_honours_copy() -> None:
    t = fd.tensor(X0)
    assert np.shares_memory(np.asarray(t), t.data)
    assert not np.shares_memory(np.array(t, copy=True), t.data)
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        np.asarray(t, dtype=np.float32, copy=False)


def test_storing_a_slice_into_a_plain_ndarray_names_zeros_like() -> None:
    x = fd.tensor(X0, requires_grad=True)
    out = np.zeros(3)
    with pytest.raises(RuntimeError, match=r"stored into a plain ndarray .*np\.zeros_like\(x\)"):
        out[:] = x * 2


def test_memoryview_is_not_supported() -> None:
    with pytest.raises(TypeError):
        memoryview(fd.tensor(X0, requires_grad=True))
    assert memoryview(fd.tensor(X0, requires_grad=True).detach().numpy()).tolist() == X0.tolist()


def test_copy_copy_raises_instead_of_detaching() -> None:
    x = fd.tensor(X0, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"copy\.copy\(\) of a Tensor that requires grad"):
        copy.copy(x)
    with pytest.raises(RuntimeError, match=r"copy\.copy\(\)"):
        copy.copy(x * 2)
    with fd.no_grad():
        c = copy.copy(x)
    assert not c.requires_grad and np.shares_memory(c.data, x.data)
    assert not copy.copy(fd.tensor(X0)).requires_grad
    # the recorded copy keeps the gradient
    (g,) = fd.grad(np.sum(x.copy() * x), x)
    np.testing.assert_allclose(g.data, 2 * X0, rtol=1e-15)


def test_pickling_keeps_leaves_and_refuses_non_leaves() -> None:
    x = fd.tensor(X0, requires_grad=True)
    y = pickle.loads(pickle.dumps(x))
    assert y.requires_grad and y.is_leaf and y is not x
    np.testing.assert_array_equal(y.data, X0)
    with pytest.raises(RuntimeError, match="Can't pickle a Tensor that is not a graph leaf"):
        pickle.dumps(x * 2)
    z = pickle.loads(pickle.dumps((x * 2).detach()))
    assert not z.requires_grad
    np.testing.assert_array_equal(z.data, 2 * X0)


# ------------------------------------------------------------------ SciPy functions
A = np.array([[0.3, 1.0], [-0.5, 0.2]])


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda a: scipy.linalg.expm(a), "expm"),
        (lambda a: scipy.linalg.solve(a, a), "solve"),
        (lambda a: scipy.linalg.inv(a), "inv"),
        (lambda a: scipy.linalg.det(a), "det"),
        (lambda a: scipy.linalg.eigh(a), "eigh"),
        (lambda a: scipy.linalg.eigvalsh(a), "eigvalsh"),
    ],
)
def test_a_wrapped_scipy_function_names_the_funcdiff_wrapper(call, name: str) -> None:
    a = fd.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        call(a)
    msg = str(info.value)
    assert msg.startswith("Can't convert a Tensor that requires grad to an ndarray")
    assert f"scipy.linalg.{name} was called on it" in msg
    assert f"use funcdiff.linalg.{name}, which accepts Tensors" in msg


def test_an_unwrapped_scipy_function_is_named() -> None:
    a = fd.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="funcdiff has no rule for scipy.linalg.eigvals"):
        scipy.linalg.eigvals(a)  # reached through SciPy's batching decorator
    with pytest.raises(RuntimeError, match="funcdiff has no rule for scipy.integrate.trapezoid"):
        scipy.integrate.trapezoid(a)
    # quad converts the integrand's value with float(): the float() error names quad
    with pytest.raises(RuntimeError, match=r"Can't call float\(\) .*\(scipy\.integrate\.quad"):
        scipy.integrate.quad(lambda s: a[0, 0] * s, 0.0, 1.0)


def test_the_generic_message_stays_without_a_scipy_frame() -> None:
    a = fd.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        np.asarray(a)
    assert "A NumPy or SciPy function without a funcdiff rule was probably called" in str(
        info.value
    )
    assert "scipy." not in str(info.value)


def test_the_wrapper_list_matches_funcdiff_linalg() -> None:
    linalg = {k for k in SCIPY_ALTERNATIVES if k.startswith("scipy.linalg.")}
    assert linalg == {f"scipy.linalg.{name}" for name in fdl.__all__}
    for name in fdl.__all__:
        assert callable(getattr(scipy.linalg, name))


def test_funcdiff_linalg_expm_gives_the_gradient() -> None:
    w = np.array([[1.0, -2.0], [0.5, 3.0]])
    a = fd.tensor(A, requires_grad=True)
    (g,) = fd.grad(np.sum(fdl.expm(a) * w), a)
    fd_grad = central_difference(lambda m: float(np.sum(scipy.linalg.expm(m) * w)), A)
    np.testing.assert_allclose(g.data, fd_grad, rtol=1e-7, atol=1e-9)
