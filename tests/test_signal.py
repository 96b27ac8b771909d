"""Convolutions on Tensors: NumPy's and SciPy's values for every mode and method, and
gradients against the dense-matrix form of the same linear map."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.signal

import funcdiff as fd
from funcdiff import signal

RNG = np.random.default_rng(7)
SHAPES_1D = [((5,), (3,)), ((4,), (6,)), ((6,), (4,)), ((5,), (2,)), ((2,), (5,)), ((3,), (3,))]
SHAPES_ND = [((4, 5), (2, 3)), ((3, 4), (4, 6)), ((4, 4), (2, 2)), ((5, 3), (2, 3))]
MODES = ["full", "same", "valid"]


def _dense(fn, x: np.ndarray, other: np.ndarray, first: bool, **kwargs) -> np.ndarray:
    """The matrix of the linear map ``x -> fn(x, other)`` (or ``fn(other, x)``)."""
    columns = []
    for e in np.eye(x.size):
        e = e.reshape(x.shape)
        columns.append(np.ravel(fn(e, other, **kwargs) if first else fn(other, e, **kwargs)))
    return np.stack(columns, axis=1)


@pytest.mark.parametrize("fn", [scipy.signal.convolve, scipy.signal.correlate])
@pytest.mark.parametrize("method", ["direct", "fft", "auto"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("s1, s2", SHAPES_1D + SHAPES_ND)
def test_scipy_values_and_gradients(fn, method, mode, s1, s2) -> None:
    a, b = RNG.standard_normal(s1), RNG.standard_normal(s2)
    wrapper = getattr(signal, fn.__name__)
    try:
        want = fn(a, b, mode=mode, method=method)
    except ValueError:
        with pytest.raises(ValueError, match="at least as large"):
            wrapper(fd.tensor(a, requires_grad=True), b, mode, method)
        return
    ta, tb = fd.tensor(a, requires_grad=True), fd.tensor(b, requires_grad=True)
    y = wrapper(ta, tb, mode=mode, method=method)
    np.testing.assert_allclose(y.data, want, atol=1e-12)
    w = RNG.standard_normal(want.shape)
    ga, gb = fd.grad(np.sum(y * w), (ta, tb))
    kw = {"mode": mode, "method": "direct"}
    np.testing.assert_allclose(
        ga.data.ravel(), _dense(fn, a, b, True, **kw).T @ w.ravel(), atol=1e-11
    )
    np.testing.assert_allclose(
        gb.data.ravel(), _dense(fn, b, a, False, **kw).T @ w.ravel(), atol=1e-11
    )


@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("s1, s2", SHAPES_1D)
def test_numpy_values_and_gradients(fn, mode, s1, s2) -> None:
    a, b = RNG.standard_normal(s1), RNG.standard_normal(s2)
    want = fn(a, b, mode)
    ta, tb = fd.tensor(a, requires_grad=True), fd.tensor(b, requires_grad=True)
    y = fn(ta, tb, mode)
    np.testing.assert_allclose(y.data, want, atol=1e-13)
    w = RNG.standard_normal(want.shape)
    ga, gb = fd.grad(np.sum(y * w), (ta, tb))
    np.testing.assert_allclose(ga.data, _dense(fn, a, b, True, mode=mode).T @ w, atol=1e-12)
    np.testing.assert_allclose(gb.data, _dense(fn, b, a, False, mode=mode).T @ w, atol=1e-12)


def test_mixed_second_derivative_is_the_bilinear_form() -> None:
    a = fd.tensor(RNG.standard_normal(4), requires_grad=True)
    b = fd.tensor(RNG.standard_normal(3), requires_grad=True)
    w = RNG.standard_normal(4)
    (ga,) = fd.grad(np.sum(signal.convolve(a, b, mode="same") * w), a, create_graph=True)
    v = RNG.standard_normal(4)
    (h,) = fd.grad(np.sum(ga * v), b)
    # y = sum_w conv(a, b)_same is bilinear: d2/da db [v, e_j] = sum w * conv(v, e_j)_same
    want = [np.sum(w * scipy.signal.convolve(v, e, mode="same")) for e in np.eye(3)]
    np.testing.assert_allclose(h.data, want, atol=1e-12)
    # and there is no second derivative in a alone
    (haa,) = fd.grad(np.sum(ga * v), a, allow_unused=True)
    assert haa is None


def test_plain_arrays_return_scipys_result() -> None:
    a, b = RNG.standard_normal((6, 5)), RNG.standard_normal((3, 2))
    for mode, method in itertools.product(MODES, ["direct", "fft"]):
        got = signal.convolve(a, b, mode, method)
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, scipy.signal.convolve(a, b, mode, method))
        np.testing.assert_array_equal(
            signal.correlate(a, b, mode, method), scipy.signal.correlate(a, b, mode, method)
        )


def test_scipy_on_a_tensor_that_requires_grad_raises() -> None:
    t = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="gradient would be lost"):
        scipy.signal.convolve(t, np.array([1.0, 1.0]))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: signal.convolve(t, np.ones((2, 2))), "same dimensionality"),
        (lambda t: signal.convolve(t, np.ones(2), mode="circular"), "mode must be"),
        (lambda t: signal.correlate(t, np.ones(2), method="fast"), "method must be"),
        (lambda t: np.convolve(t, np.array([])), "v cannot be empty"),
        (lambda t: np.correlate(t, np.ones((2, 2))), "v must be 1-D"),
    ],
)
def test_bad_arguments_are_named(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call(fd.tensor([1.0, 2.0, 3.0], requires_grad=True))
