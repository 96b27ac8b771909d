"""In-place arithmetic on slices and views of recorded Tensors, with torch's semantics.

An in-place change of a view rewrites its base's history, and a view sees in-place
changes of its base. Each case is checked against central finite differences of the
same NumPy program (so it asserts without torch) and, where torch is installed,
against torch's gradients.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import funcdiff as fd


def _fd_gradients(program: Callable, arrays: list[np.ndarray], eps: float = 1e-6) -> list:
    """Central differences of ``program`` run on plain ndarrays."""
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            up = [b.copy() for b in arrays]
            down = [b.copy() for b in arrays]
            up[k][i] += eps
            down[k][i] -= eps
            g[i] = (program(np, up) - program(np, down)) / (2 * eps)
        grads.append(g)
    return grads


def _check(program: Callable, *arrays: np.ndarray, torch_too: bool = True) -> None:
    arrays_list = [np.asarray(a, dtype=float) for a in arrays]
    xs = [fd.tensor(a, requires_grad=True) for a in arrays_list]
    out = program(np, xs)
    grads = fd.grad(out, xs)
    np.testing.assert_allclose(out.item(), program(np, arrays_list), rtol=1e-12)
    for g, ref in zip(grads, _fd_gradients(program, arrays_list)):
        np.testing.assert_allclose(g.data, ref, rtol=1e-5, atol=1e-6)
    if not torch_too:
        return
    torch = pytest.importorskip("torch")
    ts = [torch.tensor(a, requires_grad=True) for a in arrays_list]
    tout = program(torch, ts)
    for g, t in zip(grads, torch.autograd.grad(tout, ts)):
        np.testing.assert_allclose(g.data, t.numpy(), rtol=1e-10, atol=1e-12)


def _copy(m, x):
    return x * 1.0  # a recorded copy, in NumPy, funcdiff and torch alike


def test_stencil_time_stepping_loop() -> None:
    def heat(m, xs):
        u = _copy(m, xs[0])
        for _ in range(50):
            lap = u[2:] - 2 * u[1:-1] + u[:-2]
            u[1:-1] += 0.1 * xs[1] * lap
        return (u * u).sum()

    _check(heat, np.sin(np.linspace(0, 3, 12)), 0.7)


def test_row_view_scaled_in_place_then_base_used() -> None:
    def rows(m, xs):
        y = _copy(m, xs[0])
        for i in range(3):
            row = y[i]
            row *= xs[1][i]
        return (y**2).sum() + y[0, 1] * y[2, 3]

    _check(rows, np.arange(12.0).reshape(3, 4) / 5, [1.0, 2.0, -1.5])


def test_masked_subtraction() -> None:
    def masked(m, xs):
        x = _copy(m, xs[0])
        mask = (x > 0.5) if m is np else (x.detach() > 0.5)
        x[mask] -= xs[1]
        return (x**3).sum()

    _check(masked, [0.1, 0.9, 2.0, -1.0], 0.25)


def test_strided_view_of_a_constant_times_a_tensor_that_requires_grad() -> None:
    def strided(m, xs):
        x = fd.tensor(np.arange(6.0)) if m is np else m.arange(6.0, dtype=m.float64)
        x[::2] *= xs[0]
        return (x * x).sum() + x[1] * x[2]

    def plain(m, xs):  # the same program on ndarrays, for finite differences
        x = np.arange(6.0)
        x[::2] *= xs[0]
        return (x * x).sum() + x[1] * x[2]

    x0 = np.array([1.0, 2.0, 3.0])
    t = fd.tensor(x0, requires_grad=True)
    (g,) = fd.grad(strided(np, [t]), t)
    np.testing.assert_allclose(g.data, _fd_gradients(plain, [x0])[0], rtol=1e-6)
    torch = pytest.importorskip("torch")
    tt = torch.tensor(x0, requires_grad=True)
    np.testing.assert_allclose(g.data, torch.autograd.grad(strided(torch, [tt]), tt)[0].numpy())


def test_transposed_and_reshaped_views() -> None:
    def transposed(m, xs):
        y = _copy(m, xs[0])
        v = y.T if m is np else y.t()
        v[0] += xs[1]
        w = y[1]
        y *= 2
        r = y.reshape(3, 2) if m is np else y.view(3, 2)
        r[:, 1] *= xs[1][0]
        return (w**2).sum() + (y**3).sum()

    _check(transposed, np.arange(6.0).reshape(2, 3) / 3, [0.5, -1.0])


def test_view_of_a_view() -> None:
    def nested(m, xs):
        y = _copy(m, xs[0])
        v = y[1:]
        w = v[::2]
        w *= xs[1]
        return (y**2).sum() + (v**3).sum() + (w**2).sum()

    _check(nested, np.arange(1.0, 8.0) / 4, 3.0)


def test_a_view_sees_the_in_place_change_of_its_base() -> None:
    def base_changed(m, xs):
        y = _copy(m, xs[0])
        v = y[:]
        y *= 3
        return (v * v).sum()

    _check(base_changed, [1.0, -2.0])
    x = fd.tensor([1.0, -2.0], requires_grad=True)
    y = x * 1.0
    v = y[:]
    y *= 3
    (v * v).sum().backward()
    np.testing.assert_allclose(x.grad.data, [18.0, -36.0])  # d/dx sum (3x)^2


def test_second_order_through_a_view_rewrite() -> None:
    x = fd.tensor([0.5, 1.5, -1.0], requires_grad=True)
    y = x * 1.0
    y[1:] *= x[:2]  # y = [x0, x1 x0, x2 x1]
    (g,) = fd.grad((y**2).sum(), x, create_graph=True)
    (h,) = fd.grad(g[0], x)
    # f = x0^2 + x0^2 x1^2 + x1^2 x2^2; df/dx0 = 2 x0 + 2 x0 x1^2
    np.testing.assert_allclose(g.data[0], 2 * 0.5 + 2 * 0.5 * 1.5**2)
    np.testing.assert_allclose(h.data, [2 + 2 * 1.5**2, 4 * 0.5 * 1.5, 0.0])


def test_in_place_on_a_view_of_a_leaf_raises_torchs_error() -> None:
    x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf Variable that requires grad"):
        x[1:] += 1.0
    with pytest.raises(RuntimeError, match="view of a leaf Variable that requires grad"):
        x.reshape(3, 1)[0] = 2.0
    with fd.no_grad():  # an optimiser's step: allowed, and not recorded
        x[1:] -= 1.0
    np.testing.assert_allclose(x.data, [1.0, 1.0, 2.0])
    assert x.is_leaf


def test_saved_value_modified_through_a_view_is_refused() -> None:
    x = fd.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2.0
    z = np.sin(y)  # saves y
    y[1:] += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    w = np.exp(x * 1.0)  # exp's rule reads its output
    v = w[:2]
    v *= 2.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()


def test_augmented_assignment_through_a_basic_slice_on_a_fresh_tensor() -> None:
    x = fd.tensor([0.5, -1.0, 0.25], requires_grad=True)
    w = fd.tensor([0.3, 0.8], requires_grad=True)
    v = x * 1.0
    v[1:] += np.sin(w)
    v.sum().backward()
    np.testing.assert_allclose(x.grad.data, [1.0, 1.0, 1.0])
    np.testing.assert_allclose(w.grad.data, np.cos([0.3, 0.8]))


def test_forward_mode_through_a_view_rewrite() -> None:
    from funcdiff import functional as F

    def f(x):
        y = x * 1.0
        y[1:] *= x[:-1]
        return y

    x0 = np.array([0.5, 1.5, -1.0])
    jac_rev = F.jacobian(f, fd.tensor(x0)).data
    jac_fwd = F.jacobian(f, fd.tensor(x0), strategy="forward-mode").data
    expected = np.array([[1.0, 0, 0], [1.5, 0.5, 0], [0, -1.0, 1.5]])
    np.testing.assert_allclose(jac_rev, expected)
    np.testing.assert_allclose(jac_fwd, expected)


def test_view_index_of_strided_layouts() -> None:
    from funcdiff.ops.inplace import view_index

    base = np.arange(24.0).reshape(2, 3, 4)
    for view in (base[1], base[:, ::2, 1:3], base[..., ::-1], base.transpose(2, 0, 1), base[0].T):
        np.testing.assert_array_equal(base[view_index(base, view)], view)


def test_real_part_view_follows_its_complex_base() -> None:
    x = fd.tensor(np.array([1 + 2j, 3 - 1j]), requires_grad=True)
    z = x * 1.0
    r = np.real(z)  # a view of z's real parts
    z *= 2
    np.testing.assert_allclose(r.data, [2.0, 6.0])
    (g,) = fd.grad((r * r).sum(), x)
    np.testing.assert_allclose(g.data, [8.0, 24.0])  # d/dRe (2 Re x)^2
    torch = pytest.importorskip("torch")
    tx = torch.tensor(np.array([1 + 2j, 3 - 1j]), requires_grad=True)
    tz = tx * 1.0
    tr = tz.real
    tz *= 2
    np.testing.assert_allclose(g.data, torch.autograd.grad((tr * tr).sum(), tx)[0].numpy())
