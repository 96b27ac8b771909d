"""``funcdiff.checkpoint`` (torch's non-reentrant semantics) and saved-tensor hooks."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
from funcdiff.autograd.graph import saved_tensors_hooks

RNG = np.random.default_rng(3)
X0 = RNG.standard_normal(5)
W0 = RNG.standard_normal(5)


def _program(m, x, w, cp):
    def step(u, c):
        return m.tanh(u * w) + c * m.sin(u), u.sum()

    u, s = x, None
    for _ in range(4):
        u, s = cp(step, u, 0.5) if cp else step(u, 0.5)
    return (u**2).sum() + s


def test_gradients_equal_without_checkpointing_closure_included() -> None:
    grads = []
    for cp in (None, fd.checkpoint):
        x, w = fd.tensor(X0, requires_grad=True), fd.tensor(W0, requires_grad=True)
        _program(np, x, w, cp).backward()  # w reaches the steps through the closure
        grads.append((x.grad.data, w.grad.data))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-13)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-13)
    # and a central finite difference of one component
    eps = 1e-6
    up, down = X0.copy(), X0.copy()
    up[2] += eps
    down[2] -= eps
    f = lambda a: _program(np, a, W0, None)  # noqa: E731
    np.testing.assert_allclose(grads[1][0][2], (f(up) - f(down)) / (2 * eps), rtol=1e-6)
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    tx, tw = torch.tensor(X0, requires_grad=True), torch.tensor(W0, requires_grad=True)
    _program(torch, tx, tw, lambda f, *a: torch_checkpoint(f, *a, use_reentrant=False)).backward()
    np.testing.assert_allclose(grads[1][0], tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(grads[1][1], tw.grad.numpy(), rtol=1e-12)


def test_runs_once_forward_and_once_more_in_backward() -> None:
    calls = []

    def fn(t, scale):
        calls.append(scale)
        return np.exp(t) * scale

    x = fd.tensor([0.0, 1.0], requires_grad=True)
    y = fd.checkpoint(fn, x, 2.0)
    assert len(calls) == 1
    y.sum().backward()
    assert calls == [2.0, 2.0]
    np.testing.assert_allclose(x.grad.data, 2.0 * np.exp([0.0, 1.0]))


def test_second_order_through_a_checkpoint() -> None:
    x, w = fd.tensor(X0, requires_grad=True), fd.tensor(W0, requires_grad=True)
    (g,) = fd.grad(_program(np, x, w, fd.checkpoint), x, create_graph=True)
    (h,) = fd.grad(g.sum(), w)
    x2, w2 = fd.tensor(X0, requires_grad=True), fd.tensor(W0, requires_grad=True)
    (g2,) = fd.grad(_program(np, x2, w2, None), x2, create_graph=True)
    (h2,) = fd.grad(g2.sum(), w2)
    np.testing.assert_allclose(h.data, h2.data, rtol=1e-12)


def test_argument_modified_in_place_after_the_call_is_refused() -> None:
    x = fd.tensor([1.0, 2.0], requires_grad=True)
    u = x * 1.0
    y = fd.checkpoint(np.sin, u)
    u += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_under_no_grad_it_is_a_plain_call() -> None:
    x = fd.tensor([1.0], requires_grad=True)
    with fd.no_grad():
        y = fd.checkpoint(np.sin, x)
    assert not y.requires_grad


def test_saved_tensor_hooks_pack_and_unpack_what_backward_reads() -> None:
    packed, unpacked = [], []

    def pack(t):
        packed.append(t)
        return ("box", t.data.copy())

    def unpack(box):
        unpacked.append(box)
        assert box[0] == "box"  # exactly what pack returned
        return fd.tensor(box[1])

    x = fd.tensor([0.3, -1.2], requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = np.sin(x) * x  # sin saves x; multiply saves sin(x) and x

        class Square(fd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.save_for_backward(t)
                return t * t

            @staticmethod
            def backward(ctx, g):
                (t,) = ctx.saved_tensors
                return 2.0 * t * g

        z = Square.apply(y)
    n_packed = len(packed)
    assert n_packed >= 4 and not unpacked
    z.sum().backward()
    assert len(unpacked) >= n_packed
    xs = x.data
    yv = np.sin(xs) * xs
    np.testing.assert_allclose(x.grad.data, 2 * yv * (np.cos(xs) * xs + np.sin(xs)))


def _peak_and_gradient(checkpointed: bool) -> tuple[int, np.ndarray]:
    """The loop of benchmarks/checkpoint_memory.py, smaller: tracemalloc's peak bytes."""
    import tracemalloc

    def step(u, w):
        return u + 0.01 * (np.tanh(u * w) - u**3 / 3.0 + np.sin(u) * np.cos(u))

    x = fd.tensor(np.linspace(-1, 1, 20_000), requires_grad=True)
    w = fd.tensor(np.linspace(0.5, 1.5, 20_000), requires_grad=True)
    tracemalloc.start()
    u = x
    for _ in range(10):
        u = fd.checkpoint(step, u, w) if checkpointed else step(u, w)
    (u**2).sum().backward()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, np.concatenate([x.grad.data, w.grad.data])


def test_checkpointing_each_step_halves_the_peak_memory() -> None:
    plain_peak, plain_grad = _peak_and_gradient(False)
    peak, grad = _peak_and_gradient(True)
    np.testing.assert_allclose(grad, plain_grad, rtol=1e-12)
    assert peak < 0.5 * plain_peak
