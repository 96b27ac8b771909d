"""backward/grad semantics (torch.autograd's), checked against closed forms."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import funcdiff as fd


def leaf(values, **kw) -> fd.Tensor:
    return fd.tensor(np.asarray(values, dtype=float), requires_grad=True, **kw)


class TestHigherOrder:
    def test_third_derivative_of_sin_times_square(self) -> None:
        # f = x^2 sin x; f''' = -x^2 cos x - 6x sin x + 6 cos x
        x0 = np.array([-1.3, 0.0, 0.4, 2.2])
        x = leaf(x0)
        f = x * x * np.sin(x)
        (d1,) = fd.grad(f.sum(), x, create_graph=True)
        (d2,) = fd.grad(d1.sum(), x, create_graph=True)
        (d3,) = fd.grad(d2.sum(), x)
        np.testing.assert_allclose(d1.data, 2 * x0 * np.sin(x0) + x0**2 * np.cos(x0), rtol=1e-13)
        np.testing.assert_allclose(
            d2.data, 2 * np.sin(x0) + 4 * x0 * np.cos(x0) - x0**2 * np.sin(x0), rtol=1e-13
        )
        np.testing.assert_allclose(
            d3.data, -(x0**2) * np.cos(x0) - 6 * x0 * np.sin(x0) + 6 * np.cos(x0), rtol=1e-12
        )

    def test_fourth_derivative_of_exp_of_square(self) -> None:
        # f = exp(x^2): f'''' = (16x^4 + 48x^2 + 12) exp(x^2)
        x0 = 0.7
        x = leaf(x0)
        d = np.exp(x * x)
        for _ in range(4):
            (d,) = fd.grad(d, x, create_graph=True)
        np.testing.assert_allclose(
            d.data, (16 * x0**4 + 48 * x0**2 + 12) * np.exp(x0**2), rtol=1e-12
        )

    def test_backward_create_graph_gives_differentiable_grad(self) -> None:
        x = leaf([1.0, 2.0])
        (x**3).sum().backward(create_graph=True)
        g = x.grad
        assert g.requires_grad and g.grad_fn is not None
        (h,) = fd.grad(g.sum(), x)
        np.testing.assert_allclose(h.data, [6.0, 12.0])

    def test_mixed_partials_are_symmetric(self) -> None:
        x, y = leaf(0.3), leaf(-1.1)
        f = np.sin(x * y) + x**2 * y**3
        gx, gy = fd.grad(f, (x, y), create_graph=True)
        (gxy,) = fd.grad(gx, y, retain_graph=True)
        (gyx,) = fd.grad(gy, x)
        expected = np.cos(0.3 * -1.1) - 0.3 * -1.1 * np.sin(0.3 * -1.1) + 6 * 0.3 * (-1.1) ** 2
        np.testing.assert_allclose(gxy.data, expected, rtol=1e-13)
        np.testing.assert_allclose(gyx.data, expected, rtol=1e-13)


class TestBackwardSemantics:
    def test_gradients_accumulate_across_calls(self) -> None:
        x = leaf([1.0, 2.0])
        (x * x).sum().backward()
        grad_object = x.grad
        (x * 3).sum().backward()
        np.testing.assert_allclose(x.grad.data, [5.0, 7.0])
        assert x.grad is grad_object  # accumulated in place without create_graph

    def test_fan_out_sums(self) -> None:
        x = leaf(2.0)
        y = x * x + x * 3 + x
        y.backward()
        np.testing.assert_allclose(x.grad.data, 2 * 2.0 + 3 + 1)

    def test_non_scalar_needs_a_gradient(self) -> None:
        y = leaf([1.0, 2.0]) * 2
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
            y.backward()

    def test_gradient_argument_is_a_vjp(self) -> None:
        x = leaf([1.0, 2.0, 3.0])
        (x * x).backward(np.array([1.0, 0.0, -1.0]))
        np.testing.assert_allclose(x.grad.data, [2.0, 0.0, -6.0])

    def test_gradient_of_wrong_shape(self) -> None:
        y = leaf([1.0, 2.0]) * 2
        expected = r"Mismatch in shape: grad_output\[0\] has a shape of \(3,\)"
        with pytest.raises(RuntimeError, match=expected):
            y.backward(np.ones(3))

    def test_gradient_of_wrong_type(self) -> None:
        y = leaf([1.0, 2.0]) * 2
        with pytest.raises(TypeError, match="gradients can be either"):
            y.backward("ones")

    def test_second_backward_through_freed_graph(self) -> None:
        x = leaf([1.0, 2.0])
        y = (np.sin(x) * x).sum()
        y.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()

    def test_retain_graph_allows_a_second_pass(self) -> None:
        x = leaf([1.0, 2.0])
        y = (x * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        np.testing.assert_allclose(x.grad.data, [4.0, 8.0])

    def test_backward_on_tensor_without_grad(self) -> None:
        with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
            fd.tensor(1.0).backward()

    def test_backward_inputs_restricts_accumulation(self) -> None:
        x, y = leaf(2.0), leaf(3.0)
        (x * y).backward(inputs=[x])
        np.testing.assert_allclose(x.grad.data, 3.0)
        assert y.grad is None
        with pytest.raises(RuntimeError, match="cannot be empty"):
            (x * y).backward(inputs=[])

    def test_backward_on_a_leaf(self) -> None:
        x = leaf(2.0)
        x.backward()
        np.testing.assert_allclose(x.grad.data, 1.0)

    def test_module_level_backward_with_several_tensors(self) -> None:
        x = leaf([1.0, 2.0])
        fd.backward([(x * x).sum(), x * 3], [None, np.array([1.0, 2.0])])
        np.testing.assert_allclose(x.grad.data, [2 + 3, 4 + 6])
        assert fd.autograd.backward is fd.backward and fd.autograd.grad is fd.grad

    def test_grad_is_independent_of_the_users_gradient_array(self) -> None:
        x = leaf([1.0, 2.0])
        v = np.array([1.0, 1.0])
        (x + 0.0).backward(v)
        x.grad.data[0] = 99.0
        assert v[0] == 1.0


class TestGrad:
    def test_grad_does_not_touch_dot_grad(self) -> None:
        x = leaf([1.0, 2.0])
        (g,) = fd.grad((x**2).sum(), x)
        np.testing.assert_allclose(g.data, [2.0, 4.0])
        assert x.grad is None
        assert not g.requires_grad

    def test_unused_input(self) -> None:
        x, y = leaf(1.0), leaf(2.0)
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            fd.grad(x * 2, (x, y))
        gx, gy = fd.grad(x * 2, (x, y), allow_unused=True)
        assert gy is None and gx.item() == 2.0
        _, gy = fd.grad(x * 2, (x, y), materialize_grads=True)
        assert gy.shape == () and gy.item() == 0.0
        with pytest.raises(ValueError, match="materialize_grads"):
            fd.grad(x * 2, (x, y), materialize_grads=True, allow_unused=False)

    def test_input_must_require_grad(self) -> None:
        with pytest.raises(RuntimeError, match="does not require grad"):
            fd.grad(leaf(1.0) * 2, fd.tensor(1.0))

    def test_grad_with_respect_to_an_intermediate(self) -> None:
        x = leaf([1.0, 2.0])
        h = x * 3
        y = (h * h).sum()
        (gh,) = fd.grad(y, h)
        np.testing.assert_allclose(gh.data, 2 * h.data)

    def test_grad_outputs_shape_mismatch(self) -> None:
        x = leaf([1.0, 2.0])
        with pytest.raises(RuntimeError, match="Mismatch in shape"):
            fd.grad(x * 2, x, grad_outputs=np.ones((2, 1)))

    def test_batched_grads_equal_a_loop(self) -> None:
        rng = np.random.default_rng(1)
        a = rng.standard_normal((4, 3))
        x = leaf(rng.standard_normal(3))
        y = np.tanh(a @ x) * np.exp(x[0]) + x.sum()
        cotangents = rng.standard_normal((5, 4))
        (batched,) = fd.grad(y, x, cotangents, is_grads_batched=True, retain_graph=True)
        assert batched.shape == (5, 3)
        for b in range(5):
            (single,) = fd.grad(y, x, cotangents[b], retain_graph=True)
            np.testing.assert_allclose(batched.data[b], single.data, rtol=1e-13, atol=1e-14)

    def test_batched_grad_shape_errors(self) -> None:
        x = leaf([1.0, 2.0])
        with pytest.raises(RuntimeError, match="is_grads_batched=True"):
            fd.grad(x * 2, x, np.ones((3, 3)), is_grads_batched=True)

    def test_batched_second_order_is_a_batch_of_hvps(self) -> None:
        x0 = np.array([0.3, -0.4, 1.2])
        x = leaf(x0)
        (g,) = fd.grad((np.sin(x) * x.sum()).sum(), x, create_graph=True)
        vs = np.eye(3)
        (h,) = fd.grad(g, x, vs, is_grads_batched=True)
        s = x0.sum()
        # f = S * sum(sin x): H = diag(-S sin x) + cos x_i + cos x_j
        expected = np.diag(-s * np.sin(x0)) + np.cos(x0)[:, None] + np.cos(x0)[None, :]
        np.testing.assert_allclose(h.data, expected, rtol=1e-13)


class TestHooksAndRetainGrad:
    def test_leaf_hook_replaces_the_gradient(self) -> None:
        x = leaf([1.0, 2.0, 3.0])
        x.register_hook(lambda g: g * 2)
        x.backward(np.array([1.0, 2.0, 3.0]))
        np.testing.assert_allclose(x.grad.data, [2.0, 4.0, 6.0])

    def test_non_leaf_hook_sees_and_changes_the_flowing_gradient(self) -> None:
        x = leaf([1.0, 2.0])
        h = x * 3
        seen = []
        h.register_hook(lambda g: seen.append(g.data.copy()))
        handle = h.register_hook(lambda g: g * 0)
        (h * h).sum().backward(retain_graph=True)
        np.testing.assert_allclose(seen[0], 2 * h.data)
        np.testing.assert_allclose(x.grad.data, 0.0)
        handle.remove()
        x.grad = None
        (h * h).sum().backward()
        np.testing.assert_allclose(x.grad.data, 2 * h.data * 3)

    def test_hooks_run_in_registration_order(self) -> None:
        x = leaf(1.0)
        x.register_hook(lambda g: g + 1)
        x.register_hook(lambda g: g * 10)
        (x * 1.0).backward()
        assert x.grad.item() == 20.0

    def test_hook_needs_requires_grad(self) -> None:
        with pytest.raises(RuntimeError, match="doesn't require gradient"):
            fd.tensor(1.0).register_hook(lambda g: g)

    def test_retain_grad(self) -> None:
        x = leaf([1.0, 2.0])
        h = x * 3
        h.retain_grad()
        assert h.retains_grad
        (h * h).sum().backward()
        np.testing.assert_allclose(h.grad.data, 2 * h.data)
        with pytest.raises(RuntimeError, match="requires_grad=False"):
            fd.tensor(1.0).retain_grad()


class TestDetachAndRequiresGrad:
    def test_detach_shares_data_and_version(self) -> None:
        x = leaf([1.0, 2.0])
        d = x.detach()
        assert d.is_leaf and not d.requires_grad
        assert d.data is x.data
        d += 1
        assert x._version == d._version == 1
        np.testing.assert_allclose(x.data, [2.0, 3.0])

    def test_requires_grad_on_non_leaf(self) -> None:
        y = leaf(1.0) * 2
        with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
            y.requires_grad_(False)
        assert y.requires_grad_(True) is y

    def test_detach_in_place(self) -> None:
        y = leaf(1.0) * 2
        y.detach_()
        assert y.is_leaf and not y.requires_grad


class TestGradModes:
    def test_no_grad_context_and_decorator(self) -> None:
        x = leaf(1.0)
        with fd.no_grad():
            assert not (x * 2).requires_grad

        @fd.no_grad()
        def f(t):
            return t * 2

        assert not f(x).requires_grad
        assert (x * 2).requires_grad

    def test_enable_grad_inside_no_grad(self) -> None:
        x = leaf(1.0)
        with fd.no_grad(), fd.enable_grad():
            assert (x * 2).requires_grad

    def test_set_grad_enabled_as_call_and_context(self) -> None:
        x = leaf(1.0)
        fd.set_grad_enabled(False)
        try:
            assert not fd.is_grad_enabled()
            assert not (x * 2).requires_grad
        finally:
            fd.set_grad_enabled(True)
        with fd.set_grad_enabled(False):
            assert not (x * 2).requires_grad
        assert fd.is_grad_enabled()

        @fd.set_grad_enabled(False)
        def f():
            return fd.is_grad_enabled()

        assert fd.is_grad_enabled() and f() is False

    def test_inference_mode(self) -> None:
        x = leaf(1.0)
        with fd.inference_mode():
            assert not (x * 2).requires_grad
        with fd.inference_mode(False):
            assert (x * 2).requires_grad

    def test_leaf_may_be_updated_in_place_under_no_grad(self) -> None:
        x = leaf([1.0, 2.0])
        (x * x).sum().backward()
        with fd.no_grad():
            x -= 0.1 * x.grad
        np.testing.assert_allclose(x.data, [0.8, 1.6])

    def test_grad_mode_is_thread_local(self) -> None:
        x = leaf(1.0)
        results = {}
        barrier = threading.Barrier(2)

        def without():
            with fd.no_grad():
                barrier.wait()
                results["no_grad"] = (x * 2).requires_grad
                barrier.wait()

        def with_grad():
            barrier.wait()
            results["grad"] = (x * 2).requires_grad
            barrier.wait()

        threads = [threading.Thread(target=without), threading.Thread(target=with_grad)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {"no_grad": False, "grad": True}

    def test_threads_compute_independent_gradients(self) -> None:
        def work(k, out):
            for _ in range(20):
                x = leaf(np.linspace(0, 1, 5) + k)
                (g,) = fd.grad((np.sin(x) * x).sum(), x, create_graph=True)
                (h,) = fd.grad(g.sum(), x)
                out[k] = (g.data.copy(), h.data.copy())

        out: dict = {}
        threads = [threading.Thread(target=work, args=(k, out)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k in range(4):
            x0 = np.linspace(0, 1, 5) + k
            np.testing.assert_allclose(out[k][0], np.sin(x0) + x0 * np.cos(x0), rtol=1e-13)
            np.testing.assert_allclose(out[k][1], 2 * np.cos(x0) - x0 * np.sin(x0), rtol=1e-13)


def test_hooks_see_one_gradient_at_a_time_under_a_batch() -> None:
    x = fd.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    seen = []

    def hook(g):
        seen.append(g.shape)
        return g * np.array([1.0, 10.0, 100.0])

    h = x * 2.0
    h.register_hook(hook)
    (jac,) = fd.grad(h, x, np.eye(3), is_grads_batched=True)
    assert seen == [(3,)] * 3
    np.testing.assert_allclose(jac.data, 2.0 * np.diag([1.0, 10.0, 100.0]))


def test_summing_cotangents_in_place_never_touches_visible_arrays() -> None:
    # The engine sums a node's cotangents into the first one when nothing else holds it;
    # the caller's cotangents, captured intermediate gradients and hook arguments must
    # keep their values.
    x = fd.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    a = x * 1.0
    seen = []
    a.register_hook(lambda g: seen.append(g.data.copy()))
    y = a + a * 2.0 + np.sin(a)
    given = np.array([1.0, -1.0, 0.5])
    before = given.copy()
    ga, gx = fd.grad(y, (a, x), grad_outputs=given)
    np.testing.assert_array_equal(given, before)
    expected = given * (3.0 + np.cos([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(ga.numpy(), expected, rtol=1e-15)
    np.testing.assert_allclose(gx.numpy(), expected, rtol=1e-15)
    np.testing.assert_allclose(seen[0], expected, rtol=1e-15)
    # the same cotangent object reaching a node twice (add passes g on unchanged)
    (g2,) = fd.grad(np.sum(x + x + x), x)
    np.testing.assert_array_equal(g2.numpy(), [3.0, 3.0, 3.0])


def test_slice_cotangents_added_in_place_give_the_dense_answer() -> None:
    # x[1:] and x[:-1] hand the engine partial cotangents; every consumer (a leaf's
    # .grad, a hook, retain_grad, a captured input, a batch) must see the dense sum.
    x0 = np.array([0.5, -1.0, 2.0, 0.25])
    expected = np.zeros(4)
    expected[1:] += 3.0 * x0[1:] ** 2
    expected[:-1] += np.cos(x0[:-1])
    expected[2] += 2.0
    for dtype in (np.float64, np.float32):
        x = fd.tensor(x0.astype(dtype), requires_grad=True)
        a = x * 1.0
        a.retain_grad()
        hooked = []
        a.register_hook(lambda g, seen=hooked: seen.append(g.data.copy()))
        loss = np.sum(a[1:] ** 3) + np.sum(np.sin(a[:-1])) + a[2] * 2.0
        loss.backward(retain_graph=True)
        tol = 1e-6 if dtype == np.float32 else 1e-15
        np.testing.assert_allclose(x.grad.numpy(), expected, rtol=tol)
        assert x.grad.dtype == dtype
        np.testing.assert_allclose(a.grad.numpy(), expected, rtol=tol)
        np.testing.assert_allclose(hooked[0], expected, rtol=tol)
        (ga,) = fd.grad(loss, a, retain_graph=True)
        np.testing.assert_allclose(ga.numpy(), expected, rtol=tol)
        batch = np.array([1.0, -2.0])
        (gb,) = fd.grad(loss, x, grad_outputs=batch, is_grads_batched=True)
        np.testing.assert_allclose(gb.numpy(), np.outer(batch, expected), rtol=tol)


def test_slice_cotangent_meets_a_recorded_one_under_create_graph() -> None:
    # A constant cotangent reaches x[0] (partial) while x's other path is recorded.
    x0 = np.array([[0.4, -0.7], [-1.4, -1.5]])
    x = fd.tensor(x0, requires_grad=True)
    y = x[0] + np.sum(np.tanh(np.sin(x)))
    (g,) = fd.grad(y, x, grad_outputs=np.ones(2), create_graph=True)
    dense = 2.0 * (1 - np.tanh(np.sin(x0)) ** 2) * np.cos(x0)
    dense[0] += 1.0
    np.testing.assert_allclose(g.detach().numpy(), dense, rtol=1e-14)
    assert g.requires_grad


def test_every_edge_leads_to_an_older_node() -> None:
    # The engine runs nodes by decreasing creation number; that is a topological order
    # only if every node is newer than the nodes its edges lead to, for every node kind.
    class Square(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.data**2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    x = fd.tensor(np.array([0.3, -0.4, 0.5]), requires_grad=True)
    w = fd.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    a = np.sin(x) * w  # positional nodes
    b = np.sum(a, axis=0, keepdims=True) + Square.apply(x)  # a rule node, a Function
    c = b * 1.0
    c += x  # in place: a new node on top of the old one
    (g,) = fd.grad(np.sum(c * c), x, create_graph=True)  # nodes made by the backward pass
    loss = np.sum(g * w)
    stack, seen = [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for child, _ in node.edges:
            assert child.seq < node.seq, (node.name(), child.name())
            stack.append(child)
    assert len(seen) > 15
    # and the order gives the right answer: d/dw of sum(g * w), by central differences
    (gw,) = fd.grad(loss, w)

    def loss_at(wv):
        xx = fd.tensor(x.data, requires_grad=True)
        cc = np.sum(np.sin(xx) * wv, axis=0, keepdims=True) + xx**2 + xx
        (gg,) = fd.grad(np.sum(cc * cc), xx)
        return float(np.sum(gg.data * wv))

    h = 1e-6
    fdiff = [(loss_at(w.data + h * e) - loss_at(w.data - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(gw.numpy(), fdiff, rtol=1e-6)


@pytest.mark.parametrize("short, long", [(1, 4), (4, 1), (3, 3)])
def test_chains_of_different_lengths_meeting_again(short: int, long: int) -> None:
    # A node reached along a chain runs straight away only when no waiting node can
    # still send it a cotangent; here both branches leave z, and z's cotangent must
    # be the sum of both, whichever branch the engine finishes first.
    x = fd.tensor(np.array([0.2, -0.7, 1.1]), requires_grad=True)
    z = x * 2.0
    a, b = z, z
    for _ in range(short):
        a = np.sin(a)
    for _ in range(long):
        b = b * 1.5
    (g,) = fd.grad(np.sum(a * b), x)

    def value(xv: np.ndarray) -> float:
        av, bv = 2.0 * xv, 2.0 * xv
        for _ in range(short):
            av = np.sin(av)
        bv = bv * 1.5**long
        return float(np.sum(av * bv))

    h = 1e-6
    expected = [(value(x.data + h * e) - value(x.data - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g.data, expected, rtol=1e-7, atol=1e-8)


def test_a_node_keeps_only_the_values_its_rule_reads() -> None:
    # add's derivative reads nothing, tanh's reads its output: nothing in the graph
    # keeps `a` alive, so a long chain holds one array per step, not every intermediate.
    x = fd.tensor(np.array([0.3, -1.2, 2.0]), requires_grad=True)
    a = x + 1.0
    gone = weakref.ref(a)
    b = np.tanh(a)
    del a
    gc.collect()
    assert gone() is None
    # sin's derivative reads its input: that one is kept
    c = b * 3.0
    kept = weakref.ref(c)
    d = np.sin(c)
    del c
    gc.collect()
    assert kept() is not None
    (g,) = fd.grad(np.sum(d), x, retain_graph=True)
    t = np.tanh(x.data + 1.0)
    expected = np.cos(3.0 * t) * 3.0 * (1.0 - t * t)
    np.testing.assert_allclose(g.data, expected, rtol=1e-12)
    # and the second order still sees every value it needs (tanh's output, sin's input)
    (g2,) = fd.grad(np.sum(d), x, create_graph=True)
    (h,) = fd.grad(np.sum(g2), x)
    eps = 1e-6

    def first(xv: np.ndarray) -> np.ndarray:
        tv = np.tanh(xv + 1.0)
        return np.cos(3.0 * tv) * 3.0 * (1.0 - tv * tv)

    np.testing.assert_allclose(
        h.data, (first(x.data + eps) - first(x.data - eps)) / (2 * eps), rtol=1e-6, atol=1e-8
    )


def test_a_reduction_keeps_a_stand_in_of_a_large_argument_not_its_memory() -> None:
    # sum and mean need only the shape of what they reduce: the squared residual of a
    # loss is freed as soon as it is summed (a large array; small ones are kept).
    n = 20_000
    x = fd.tensor(np.linspace(-1.0, 1.0, n), requires_grad=True)
    r = np.tanh(x) - 0.5
    sq = r * r
    gone = weakref.ref(sq)
    gone_data = weakref.ref(sq.data)
    loss = np.mean(sq)
    del sq
    gc.collect()
    assert gone() is None and gone_data() is None
    (g,) = fd.grad(loss, x, create_graph=True)
    t = np.tanh(x.data)
    np.testing.assert_allclose(g.data, 2.0 * (t - 0.5) * (1.0 - t * t) / n, rtol=1e-12)
    # the second derivative (a Hessian-vector product) sees the shapes it needs too
    v = np.cos(np.arange(n))
    (hv,) = fd.grad(g, x, fd.tensor(v))
    d2 = ((1.0 - t * t) ** 2 - 2.0 * t * (t - 0.5) * (1.0 - t * t)) * 2.0 / n
    np.testing.assert_allclose(hv.data, d2 * v, rtol=1e-10, atol=1e-18)
    # a small argument is kept as it is (a stand-in would cost more than it frees)
    small = x[:3] * 2.0
    kept = weakref.ref(small)
    total = np.sum(small)
    del small
    gc.collect()
    assert kept() is not None and total.grad_fn is not None


def test_a_layout_rule_keeps_its_argument() -> None:
    # reshape(order="A") follows the memory layout of its argument, which a stand-in
    # would not have: the cotangent must go back in Fortran order here.
    base = fd.tensor(np.asfortranarray(np.arange(40_000.0).reshape(200, 200)), requires_grad=True)
    y = base * 1.0  # a Fortran-ordered intermediate (NumPy keeps the layout)
    assert y.data.flags.f_contiguous and not y.data.flags.c_contiguous
    flat = np.reshape(y, (-1,), order="A")
    w = np.arange(40_000.0)
    (g,) = fd.grad(np.sum(flat * w), base)
    np.testing.assert_array_equal(g.data, w.reshape(200, 200, order="F"))


def test_an_input_the_rule_does_not_keep_may_change_in_place_afterwards() -> None:
    x = fd.tensor(np.array([0.5, 1.5]), requires_grad=True)
    a = x * 2.0
    b = np.tanh(a)  # keeps its output, not a
    a += 1.0  # legal, as in torch: no rule reads a's old value
    (g,) = fd.grad(np.sum(b), x)
    np.testing.assert_allclose(g.data, 2.0 * (1.0 - np.tanh(2.0 * x.data) ** 2), rtol=1e-12)


def test_a_chain_hands_on_only_cotangents_of_the_inputs_shape_and_dtype() -> None:
    # Along a chain the engine gives a node's cotangent straight to its input; one
    # that must still be summed over a broadcast axis and cast to the leaf's float32
    # goes the general way. The answer, against the closed form
    # d/dx sum_j tanh(sin(x c_j) + 1) = sum_j (1 - tanh^2) cos(x c_j) c_j:
    x = fd.tensor(np.array([[0.5], [-1.0], [2.0]], dtype=np.float32), requires_grad=True)
    c = np.linspace(1.0, 2.0, 12).reshape(3, 4)
    np.sum(np.tanh(np.sin(x * c) + 1.0)).backward()
    xc = x.data.astype(float) * c
    expected = np.sum((1.0 - np.tanh(np.sin(xc) + 1.0) ** 2) * np.cos(xc) * c, axis=1)
    assert x.grad.dtype == np.float32
    assert x.grad.shape == (3, 1)
    np.testing.assert_allclose(x.grad.data[:, 0], expected, rtol=1e-6)
