"""In-place safety (version counters) and custom Functions."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd


def leaf(values) -> fd.Tensor:
    return fd.tensor(np.asarray(values, dtype=float), requires_grad=True)


class TestInPlace:
    def test_modified_saved_output_is_refused(self) -> None:
        x = leaf([1.0, 2.0])
        y = np.exp(x)  # exp's rule reads its output
        y += 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            y.sum().backward()
        assert "output of ExpBackward" in str(info.value)
        assert "modified in place since it was computed" in str(info.value)

    def test_modified_saved_input_is_refused(self) -> None:
        x = leaf([1.0, 2.0])
        h = x * 2
        y = np.sin(h)  # sin reads its input
        h[0] = 5.0
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            y.sum().backward()
        assert "is at version 1; expected version 0" in str(info.value)

    def test_change_after_a_verified_pass_is_still_refused(self) -> None:
        # A retained node that passed its version check once must check again after a
        # later in-place change (the check is skipped only while nothing changed).
        x = leaf([1.0, 2.0])
        h = x * 2
        y = np.sin(h)
        y.sum().backward(retain_graph=True)
        np.testing.assert_allclose(x.grad.data, 2 * np.cos(2 * x.data))
        h += 1
        with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
            y.sum().backward()

    def test_version_saved_at_record_time_is_the_reference(self) -> None:
        # The input was already modified once before it was used: its saved version is
        # 1, not 0, and only a change after the use is an error.
        x = leaf([0.5, 1.5])
        h = x * 2
        h += 1
        y = np.sin(h)
        y.sum().backward(retain_graph=True)
        np.testing.assert_allclose(x.grad.data, 2 * np.cos(2 * x.data + 1))
        h += 1
        with pytest.raises(RuntimeError, match="is at version 2; expected version 1"):
            y.sum().backward()

    def test_modified_value_that_no_rule_reads_is_fine(self) -> None:
        x = leaf([1.0, 2.0])
        y = x * 2  # multiply reads x and the constant, not its output
        y += 1
        y *= 3
        y.sum().backward()
        np.testing.assert_allclose(x.grad.data, [6.0, 6.0])
        np.testing.assert_allclose(y.data, (np.array([1.0, 2.0]) * 2 + 1) * 3)

    def test_inplace_multiply_by_a_tensor_that_requires_grad(self) -> None:
        x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
        y = x * 1.0
        y *= w
        y.sum().backward()
        np.testing.assert_allclose(x.grad.data, [3.0, 4.0])
        np.testing.assert_allclose(w.grad.data, [1.0, 2.0])

    def test_setitem_on_a_non_leaf(self) -> None:
        x = leaf([1.0, 2.0, 3.0])
        y = x * 1.0
        y[1] = x[0] * 5.0
        (y * np.array([1.0, 10.0, 100.0])).sum().backward()
        # y = [x0, 5 x0, x2]
        np.testing.assert_allclose(x.grad.data, [1.0 + 50.0, 0.0, 100.0])

    def test_setitem_into_a_constant_makes_it_differentiable(self) -> None:
        x = leaf([2.0, 3.0])
        out = fd.tensor(np.zeros(3))
        out[0] = x[0] ** 2
        out[2] = x[1] * x[0]
        assert out.requires_grad and not out.is_leaf
        out.sum().backward()
        np.testing.assert_allclose(x.grad.data, [2 * 2.0 + 3.0, 2.0])

    def test_setitem_with_advanced_index_and_second_order(self) -> None:
        x = leaf([1.0, 2.0])
        out = fd.tensor(np.zeros(4))
        out[np.array([0, 3])] = x**3
        (g,) = fd.grad(out.sum(), x, create_graph=True)
        np.testing.assert_allclose(g.data, [3.0, 12.0])
        (h,) = fd.grad(g.sum(), x)
        np.testing.assert_allclose(h.data, [6.0, 12.0])

    def test_leaf_that_requires_grad_refuses_in_place(self) -> None:
        x = leaf([1.0, 2.0])
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x += 1
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x[0] = 3.0

    def test_version_counter_counts(self) -> None:
        t = fd.tensor([1.0, 2.0])
        assert t._version == 0
        t[0] = 3.0
        t += 1
        assert t._version == 2

    def test_view_of_a_recorded_tensor_is_modified_in_place(self) -> None:
        x = leaf(np.arange(6.0))
        y = x * 1.0
        v = y[1:3]
        v *= 3.0  # rewrites y's history (tests/test_views_inplace.py has the rest)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.data, [1.0, 3.0, 3.0, 1.0, 1.0, 1.0])

    def test_view_shares_the_version_counter(self) -> None:
        x = leaf(np.arange(4.0))
        y = x * 1.0
        v = y.reshape(2, 2)
        s = np.sin(v)  # saves v, whose counter is y's
        y[0] = 10.0
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            s.sum().backward()

    def test_out_argument_writes_in_place(self) -> None:
        x = leaf([1.0, 2.0])
        y = x * 1.0
        np.multiply(y, 3.0, out=y)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.data, [3.0, 3.0])


class Cube(fd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2


class ScaledProduct(fd.Function):
    """f(x, y, k) = k * x * y with a non-Tensor argument."""

    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_backward(x, y)
        ctx.k = k
        return k * x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False, False)
        return g * ctx.k * y, None, None


class TestCustomFunction:
    def test_first_and_second_order(self) -> None:
        x = leaf([0.5, -2.0])
        y = Cube.apply(x)
        assert y.grad_fn.name() == "CubeBackward"
        (g,) = fd.grad(y.sum(), x, create_graph=True)
        np.testing.assert_allclose(g.data, 3 * x.data**2)
        (h,) = fd.grad(g.sum(), x)
        np.testing.assert_allclose(h.data, 6 * x.data)

    def test_needs_input_grad_and_none_gradients(self) -> None:
        x = leaf([1.0, 2.0])
        y = fd.tensor([3.0, 4.0])
        ScaledProduct.apply(x, y, 2.0).sum().backward()
        np.testing.assert_allclose(x.grad.data, [6.0, 8.0])

    def test_wrong_number_of_gradients(self) -> None:
        class Bad(fd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g

        x, y = leaf(1.0), leaf(2.0)
        expected = r"incorrect number of gradients \(expected 2, got 1\)"
        with pytest.raises(RuntimeError, match=expected):
            Bad.apply(x, y).backward()

    def test_saved_tensor_modified_in_place(self) -> None:
        x = leaf([1.0, 2.0])
        h = x * 1.0
        y = Cube.apply(h)
        h += 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()

    def test_once_differentiable(self) -> None:
        class Once(fd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @fd.once_differentiable
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 2 * x

        x = leaf(3.0)
        (g,) = fd.grad(Once.apply(x), x)
        assert g.item() == 6.0
        with pytest.raises(RuntimeError, match="once_differentiable"):
            fd.grad(Once.apply(x), x, create_graph=True)

    def test_non_differentiable_output(self) -> None:
        class SortWithIndex(fd.Function):
            @staticmethod
            def forward(ctx, x):
                order = np.argsort(x.data)
                ctx.order = order
                idx = fd.tensor(order.astype(float))
                ctx.mark_non_differentiable(idx)
                return fd.tensor(x.data[order]), idx

            @staticmethod
            def backward(ctx, g, g_idx):
                out = np.zeros_like(g.data)
                out[ctx.order] = g.data
                return fd.tensor(out)

        x = leaf([3.0, 1.0, 2.0])
        values, idx = SortWithIndex.apply(x)
        assert values.requires_grad and not idx.requires_grad
        (values * np.array([1.0, 2.0, 3.0])).sum().backward()
        np.testing.assert_allclose(x.grad.data, [3.0, 1.0, 2.0])

    def test_instantiating_a_function_is_an_error(self) -> None:
        with pytest.raises(RuntimeError, match="apply"):
            Cube()

    def test_missing_backward(self) -> None:
        class NoBackward(fd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

        with pytest.raises(NotImplementedError, match="backward"):
            NoBackward.apply(leaf(1.0))

    def test_batched_through_a_custom_function(self) -> None:
        x = leaf([0.5, -2.0, 1.0])
        y = Cube.apply(x)
        (jac,) = fd.grad(y, x, np.eye(3), is_grads_batched=True)
        np.testing.assert_allclose(jac.data, np.diag(3 * x.data**2))


def test_index_tensor_modified_in_place_is_refused() -> None:
    x = leaf([1.0, 2.0, 3.0])
    idx = fd.tensor(np.array([0, 2]))
    y = (x * 1.0)[idx]
    idx[0] = 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


class MatVec(fd.Function):
    """y = A x with a backward written for a single cotangent."""

    @staticmethod
    def forward(ctx, a, x):
        ctx.save_for_backward(a)
        return fd.tensor(a.data @ x.data)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return None, fd.tensor(a.data.T) @ g


def test_batched_cotangents_reach_an_unbatched_backward_one_at_a_time() -> None:
    a = np.arange(6.0).reshape(2, 3)
    x = leaf([1.0, -1.0, 0.5])
    y = MatVec.apply(fd.tensor(a), x)
    (jac,) = fd.grad(y, x, np.eye(2), is_grads_batched=True)
    np.testing.assert_allclose(jac.data, a)
    from funcdiff.functional import jacobian

    np.testing.assert_allclose(
        jacobian(lambda t: MatVec.apply(fd.tensor(a), t), x, vectorize=True).data, a
    )


def test_batched_backward_flag_passes_the_whole_batch() -> None:
    seen = []

    class Double(fd.Function):
        batched_backward = True

        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(g.shape)
            return g * 2

    x = leaf([1.0, 2.0, 3.0])
    (jac,) = fd.grad(Double.apply(x), x, np.eye(3), is_grads_batched=True)
    np.testing.assert_allclose(jac.data, 2 * np.eye(3))
    assert seen == [(3, 3)]
