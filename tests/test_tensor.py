"""The Tensor itself: construction, attributes, conversion, operators' values."""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest

import funcdiff as fd


class TestConstruction:
    def test_python_float_becomes_float64(self) -> None:
        assert fd.tensor(1.5).dtype == np.float64
        assert fd.tensor([1.0, 2.0]).dtype == np.float64

    def test_python_int_stays_integer(self) -> None:
        assert fd.tensor(3).dtype == np.int64
        assert fd.tensor([1, 2]).dtype.kind == "i"

    def test_float32_stays_float32(self) -> None:
        t = fd.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
        assert t.dtype == np.float32
        (t * 2).sum().backward()
        assert t.grad.dtype == np.float32

    def test_data_is_a_copy_of_an_ndarray(self) -> None:
        a = np.arange(3.0)
        t = fd.tensor(a)
        a[0] = 100.0
        assert t.data[0] == 0.0
        assert isinstance(t.data, np.ndarray)

    def test_dtype_argument(self) -> None:
        assert fd.tensor([1, 2], dtype=np.float32).dtype == np.float32

    @pytest.mark.parametrize(
        "garbage, kind",
        [
            ("abc", TypeError),
            (b"abc", TypeError),
            ({"a": 1}, TypeError),
            ({1, 2}, TypeError),
            (None, TypeError),
            (object(), TypeError),
            ([1, "a"], TypeError),
            ([[1, 2], [3]], ValueError),
        ],
    )
    def test_garbage_is_refused_with_a_clear_error(self, garbage, kind) -> None:
        with pytest.raises(kind, match="tensor\\(\\)"):
            fd.tensor(garbage)

    @pytest.mark.parametrize("data", [3, [1, 2], np.array([True, False])])
    def test_only_floating_tensors_may_require_grad(self, data) -> None:
        with pytest.raises(RuntimeError, match="floating point"):
            fd.tensor(data, requires_grad=True)
        with pytest.raises(RuntimeError, match="floating point"):
            fd.tensor(data).requires_grad_()


class TestAttributes:
    def test_shape_ndim_size_dtype_T(self) -> None:
        t = fd.tensor(np.arange(6.0).reshape(2, 3))
        assert t.shape == (2, 3)
        assert t.ndim == 2
        assert t.size == 6
        assert t.dtype == np.float64
        np.testing.assert_array_equal(t.T.data, np.arange(6.0).reshape(2, 3).T)
        assert len(t) == 2

    def test_leaf_and_grad_fn(self) -> None:
        x = fd.tensor([1.0], requires_grad=True)
        c = fd.tensor([1.0])
        y = x * 2
        assert x.is_leaf and c.is_leaf and not y.is_leaf
        assert x.grad_fn is None
        assert y.grad_fn.name() == "MultiplyBackward"
        assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
        assert (c * 2).is_leaf and not (c * 2).requires_grad

    def test_numpy_refuses_a_tensor_that_requires_grad(self) -> None:
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match=r"detach\(\)\.numpy\(\)"):
            x.numpy()
        np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0])

    def test_item_and_errors(self) -> None:
        assert fd.tensor([[2.5]]).item() == 2.5
        with pytest.raises(ValueError, match="exactly one element"):
            fd.tensor([1.0, 2.0]).item()

    def test_astype_gradient_cast_back(self) -> None:
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        y = x.astype(np.float32)
        assert y.dtype == np.float32 and y.requires_grad
        (y * y).sum().backward()
        assert x.grad.dtype == np.float64
        np.testing.assert_allclose(x.grad.data, [2.0, 4.0])
        assert not x.astype(int).requires_grad

    def test_array_protocol(self) -> None:
        c = fd.tensor([1.0, 2.0])
        np.testing.assert_array_equal(np.asarray(c), [1.0, 2.0])
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="detach"):
            np.asarray(x)
        with fd.no_grad():
            np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0])

    def test_repr(self) -> None:
        assert repr(fd.tensor([1.0, 2.0], requires_grad=True)) == (
            "tensor([1., 2.], requires_grad=True)"
        )
        assert "grad_fn=<AddBackward>" in repr(fd.tensor([1.0], requires_grad=True) + 1)
        assert "dtype=float32" in repr(fd.tensor([1.0], dtype=np.float32))

    def test_grad_of_non_leaf_warns(self) -> None:
        y = fd.tensor([1.0], requires_grad=True) * 2
        with pytest.warns(UserWarning, match="not a leaf"):
            assert y.grad is None

    def test_grad_assignment(self) -> None:
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        x.grad = np.array([3.0, 4.0])
        assert isinstance(x.grad, fd.Tensor)
        with pytest.raises(RuntimeError, match="shape"):
            x.grad = np.ones(3)
        x.grad = None
        assert x.grad is None

    def test_tensor_is_hashable_by_identity(self) -> None:
        a, b = fd.tensor([1.0]), fd.tensor([1.0])
        assert len({a, b}) == 2


BINARY = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
]


class TestOperatorValues:
    @pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
    def test_binary_matches_numpy_in_both_orders(self, op) -> None:
        rng = np.random.default_rng(0)
        a = rng.uniform(0.5, 2.0, (3, 4))
        b = rng.uniform(0.5, 2.0, (4,))
        t = fd.tensor(a)
        np.testing.assert_array_equal(op(t, b).data, op(a, b))
        np.testing.assert_array_equal(op(b, t).data, op(b, a))
        np.testing.assert_array_equal(op(t, fd.tensor(b)).data, op(a, b))
        np.testing.assert_array_equal(op(t, 2.0).data, op(a, 2.0))
        np.testing.assert_array_equal(op(2.0, t).data, op(2.0, a))

    def test_ndarray_on_the_left_returns_a_tensor(self) -> None:
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        y = np.array([3.0, 4.0]) * x
        assert isinstance(y, fd.Tensor) and y.requires_grad

    def test_matmul_and_unary(self) -> None:
        a = np.arange(6.0).reshape(2, 3)
        t = fd.tensor(a)
        np.testing.assert_array_equal((t @ a.T).data, a @ a.T)
        np.testing.assert_array_equal((a.T @ t).data, a.T @ a)
        np.testing.assert_array_equal((-t).data, -a)
        np.testing.assert_array_equal((+t).data, a)
        np.testing.assert_array_equal(abs(t - 3).data, np.abs(a - 3))
        np.testing.assert_array_equal((t - 3).abs().data, np.abs(a - 3))

    def test_comparisons_are_constant_boolean_tensors(self) -> None:
        x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
        for result, expected in [
            (x < 2, [True, False, False]),
            (x <= 2, [True, True, False]),
            (x > 2, [False, False, True]),
            (x >= 2, [False, True, True]),
            (x == 2, [False, True, False]),
            (x != 2, [True, False, True]),
        ]:
            assert result.dtype == bool and not result.requires_grad
            np.testing.assert_array_equal(result.data, expected)

    def test_inplace_operators_on_constants_follow_numpy(self) -> None:
        t = fd.tensor([1.0, 2.0])
        data = t.data
        t += 1
        t *= 3
        t -= 1
        t /= 2
        t **= 2
        assert t.data is data  # really in place
        np.testing.assert_allclose(t.data, ((np.array([1.0, 2.0]) + 1) * 3 - 1) ** 2 / 4)
        assert t._version == 5

    def test_bool_and_float(self) -> None:
        assert bool(fd.tensor([1.0]))
        assert float(fd.tensor(2.5)) == 2.5
        with pytest.raises(ValueError):
            bool(fd.tensor([1.0, 2.0]))

    def test_iteration_yields_rows(self) -> None:
        x = fd.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
        rows = list(x)
        assert len(rows) == 3 and rows[1].shape == (2,)
        sum(r.sum() * (i + 1) for i, r in enumerate(rows)).backward()
        np.testing.assert_array_equal(x.grad.data, [[1, 1], [2, 2], [3, 3]])


def test_no_warning_on_plain_use() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = fd.tensor([1.0, 2.0], requires_grad=True)
        (np.sin(x) * x).sum().backward()
        assert x.grad is not None


class TestFunctionsWithoutRules:
    def test_refused_when_a_gradient_would_be_lost(self) -> None:
        x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with pytest.raises(TypeError, match="numpy.histogram"):
            np.histogram(x)

    def test_run_on_the_data_when_nothing_requires_grad(self) -> None:
        x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
        counts, edges = np.histogram(x.detach(), bins=2)
        np.testing.assert_array_equal(counts.data, [1, 2])
        np.testing.assert_array_equal(edges.data, [1.0, 2.0, 3.0])
        with fd.no_grad():
            np.testing.assert_array_equal(np.histogram(x, bins=2)[0].data, [1, 2])
        assert np.add.outer(x.detach(), x.detach()).shape == (3, 3)
