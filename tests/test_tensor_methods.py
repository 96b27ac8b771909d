"""The torch-style elementwise methods and ``zero_``: same values and gradients as NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import funcdiff as fd

X = np.array([0.3, 1.2, 2.5])

METHODS = [
    ("exp", np.exp, lambda x: np.exp(x)),
    ("log", np.log, lambda x: 1.0 / x),
    ("sin", np.sin, np.cos),
    ("cos", np.cos, lambda x: -np.sin(x)),
    ("tanh", np.tanh, lambda x: 1.0 - np.tanh(x) ** 2),
    (
        "sigmoid",
        scipy.special.expit,
        lambda x: scipy.special.expit(x) * (1 - scipy.special.expit(x)),
    ),
    ("sqrt", np.sqrt, lambda x: 0.5 / np.sqrt(x)),
    ("abs", np.abs, np.sign),
    ("neg", np.negative, lambda x: -np.ones_like(x)),
    ("square", np.square, lambda x: 2.0 * x),
]


@pytest.mark.parametrize("name, numpy_fn, derivative", METHODS, ids=[m[0] for m in METHODS])
def test_method_matches_numpy_value_and_gradient(name, numpy_fn, derivative) -> None:
    x = fd.tensor(X, requires_grad=True)
    y = getattr(x, name)()
    np.testing.assert_allclose(y.data, numpy_fn(X), rtol=1e-14)
    np.sum(y).backward()
    np.testing.assert_allclose(x.grad.data, derivative(X), rtol=1e-12)


def test_method_records_through_the_same_rule_as_the_function() -> None:
    x = fd.tensor(X, requires_grad=True)
    assert type(x.exp().grad_fn) is type(np.exp(x).grad_fn)
    (h,) = fd.grad(np.sum(x.sin()), x, create_graph=True)
    (hh,) = fd.grad(np.sum(h), x)
    np.testing.assert_allclose(hh.data, -np.sin(X), rtol=1e-12)


def test_pow_in_base_and_exponent() -> None:
    x = fd.tensor(X, requires_grad=True)
    p = fd.tensor(1.5, requires_grad=True)
    y = x.pow(p)
    np.testing.assert_allclose(y.data, X**1.5)
    gx, gp = fd.grad(np.sum(y), (x, p))
    np.testing.assert_allclose(gx.data, 1.5 * X**0.5, rtol=1e-12)
    np.testing.assert_allclose(gp.data, np.sum(X**1.5 * np.log(X)), rtol=1e-12)


def test_clamp_is_clip() -> None:
    x = fd.tensor([-2.0, 0.5, 3.0], requires_grad=True)
    y = x.clamp(-1.0, 1.0)
    np.testing.assert_array_equal(y.data, [-1.0, 0.5, 1.0])
    np.sum(y).backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(x.detach().clamp(min=0.0).data, [0.0, 0.5, 3.0])


def test_pow_needs_an_exponent() -> None:
    with pytest.raises(TypeError):
        fd.tensor(X).pow()  # type: ignore[call-arg]


class TestZero:
    def test_zero_fills_and_returns_self(self) -> None:
        t = fd.tensor([1.0, 2.0, 3.0])
        before = t._version
        assert t.zero_() is t
        np.testing.assert_array_equal(t.data, 0.0)
        assert t._version == before + 1

    def test_zero_on_a_non_leaf_cuts_the_gradient_through_it(self) -> None:
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3.0
        z = y + x  # uses y before the change: its gradient is unaffected
        y.zero_()
        assert y.requires_grad
        np.sum(z + y * x).backward()
        # z contributes 3 + 1; y * x with y = 0 contributes 0 (y's history is zeroed)
        np.testing.assert_array_equal(x.grad.data, [4.0, 4.0])

    def test_zero_refused_on_a_leaf_that_requires_grad(self) -> None:
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x.zero_()
        np.testing.assert_array_equal(x.data, [1.0, 2.0])
        with fd.no_grad():
            x.zero_()
        np.testing.assert_array_equal(x.data, 0.0)
        assert x.requires_grad

    def test_zero_invalidates_a_saved_value(self) -> None:
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        y = x * 1.0
        z = np.exp(y)  # saves its output
        z.zero_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            np.sum(z).backward()

    def test_zero_of_a_0d_tensor(self) -> None:
        t = fd.tensor(5.0)
        t.zero_()
        assert t.item() == 0.0


def test_astype_copy_false_returns_the_tensor_when_the_dtype_matches() -> None:
    x = fd.tensor([1.0, 2.0], requires_grad=True)
    assert x.astype(np.float64, copy=False) is x
    y = x.astype(np.float32, copy=False)
    assert y is not x and y.dtype == np.float32
    (g,) = fd.grad(np.sum(y.astype(np.float64) * 3.0), [x])
    assert g.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(g), [3.0, 3.0])
