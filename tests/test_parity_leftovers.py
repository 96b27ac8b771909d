"""torch.autograd parity: a custom Function's jvp under gradcheck, forward-mode tangents
under no_grad, ``np.imag`` as a view, ``np.put_along_axis`` on Tensors and NumPy's own
scalar types in ``funcdiff.numpy``.

Each behaviour is compared with torch 2.13 where it is installed (those tests skip
without it) and otherwise with closed forms and central differences.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import funcdiff as fd
from funcdiff.check import GradcheckError


def _torch() -> Any:
    return pytest.importorskip("torch")


# ---------------------------------------------------------------- gradcheck uses jvp
def _cube(jvp_factor: float | None, calls: list[int], base: Any = fd.autograd.Function) -> Any:
    """``x**3`` as a custom Function of ``base`` (funcdiff's, or torch's); a jvp
    ``jvp_factor * x**2 * t`` when given (3 is right, anything else wrong), none
    otherwise."""

    class Cube(base):
        @staticmethod
        def forward(x):
            return x**3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            if hasattr(ctx, "save_for_forward"):  # torch's jvp reads only what this saves
                ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3.0 * x**2 * g

    if jvp_factor is not None:

        def jvp(ctx, t):
            calls.append(1)
            (x,) = ctx.saved_tensors
            return jvp_factor * x**2 * t

        Cube.jvp = staticmethod(jvp)
    return Cube


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_forward_ad_uses_the_functions_jvp(fast_mode: bool) -> None:
    x = fd.tensor([0.5, -1.2, 2.0], requires_grad=True)
    calls: list[int] = []
    right = _cube(3.0, calls)
    assert fd.gradcheck(right.apply, (x,), check_forward_ad=True, fast_mode=fast_mode)
    assert calls, "gradcheck(check_forward_ad=True) did not call the Function's jvp"
    # A wrong jvp with a right backward: only the forward-mode check can see it.
    wrong = _cube(2.0, [])
    assert fd.gradcheck(wrong.apply, (x,), fast_mode=fast_mode)
    with pytest.raises(GradcheckError, match="computed with forward mode mismatch") as info:
        fd.gradcheck(
            wrong.apply, (x,), check_forward_ad=True, check_backward_ad=False, fast_mode=fast_mode
        )
    # d/dx x**3 at 2.0 is 12; the wrong jvp gives 8: the table names that element.
    assert "12" in str(info.value) and "8" in str(info.value)
    # Without a jvp forward mode transposes backward, and the check still passes.
    plain = _cube(None, [])
    assert fd.gradcheck(plain.apply, (x,), check_forward_ad=True, fast_mode=fast_mode)
    assert fd.gradcheck(plain.apply, (x,), check_forward_ad=True, check_batched_forward_grad=True)


def test_gradcheck_forward_ad_agrees_with_torch_on_a_wrong_jvp() -> None:
    torch = _torch()
    values = [0.5, -1.2, 2.0]
    for check, base, x in (
        (torch.autograd.gradcheck, torch.autograd.Function, torch.tensor(values).double()),
        (fd.gradcheck, fd.autograd.Function, fd.tensor(values)),
    ):
        x.requires_grad_(True)
        fn = _cube(2.0, [], base).apply
        assert check(fn, (x,), check_forward_ad=False)
        assert not check(
            fn, (x,), check_forward_ad=True, check_backward_ad=False, raise_exception=False
        )


# ---------------------------------------------------------------- put_along_axis
_A = np.arange(12.0).reshape(3, 4) / 7.0
_IDX = np.array([[1], [3], [0]])
_V = np.array([[1.5], [-2.0], [0.25]])
_W = np.linspace(-1.0, 1.0, 12).reshape(3, 4)


def _put_loss(a: Any, v: Any) -> Any:
    b = a * 1.0
    np.put_along_axis(b, _IDX, v, axis=1)
    return np.sum(np.sin(b) * _W)


def test_put_along_axis_gradients_equal_torch_scatter() -> None:
    torch = _torch()
    a = fd.tensor(_A, requires_grad=True)
    v = fd.tensor(_V, requires_grad=True)
    _put_loss(a, v).backward()
    ta = torch.tensor(_A, requires_grad=True)
    tv = torch.tensor(_V, requires_grad=True)
    tb = ta * 1.0
    tb.scatter_(1, torch.tensor(_IDX), tv)
    (torch.sin(tb) * torch.tensor(_W)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-13, atol=1e-15)


def test_put_along_axis_against_closed_form_and_differences() -> None:
    a = fd.tensor(_A, requires_grad=True)
    v = fd.tensor(_V, requires_grad=True)
    _put_loss(a, v).backward()
    written = np.zeros_like(_A, dtype=bool)
    np.put_along_axis(written, _IDX, True, axis=1)
    b = _A.copy()
    np.put_along_axis(b, _IDX, _V, axis=1)
    # d/da: W cos(b) where a survives, 0 where it was overwritten; d/dv: W cos(v) there.
    np.testing.assert_allclose(a.grad.numpy(), np.where(written, 0.0, _W * np.cos(b)))
    expected_v = np.take_along_axis(_W * np.cos(b), _IDX, axis=1)
    np.testing.assert_allclose(v.grad.numpy(), expected_v)
    # Second order, flat indexing (axis=None), against central differences of the gradient.
    flat = np.array([5, -1, 2])

    def loss(a: Any, v: Any) -> Any:
        b = a * 1.0
        np.put_along_axis(b, flat, v**2, axis=None)
        return np.sum(b**3 * _W)

    x = fd.tensor(_A, requires_grad=True)
    y0 = np.array([0.3, -0.7, 1.1])
    y = fd.tensor(y0, requires_grad=True)
    (gy,) = fd.grad(loss(x, y), y, create_graph=True)
    (hyy,) = fd.grad(np.sum(gy), y)
    eps = 1e-6

    def grad_at(yv: np.ndarray) -> np.ndarray:
        t = fd.tensor(yv, requires_grad=True)
        return fd.grad(loss(fd.tensor(_A), t), t)[0].numpy()

    for k in range(3):
        step = np.zeros(3)
        step[k] = eps
        fd_k = np.sum((grad_at(y0 + step) - grad_at(y0 - step)) / (2 * eps))
        np.testing.assert_allclose(hyy.numpy()[k], fd_k, rtol=1e-6, atol=1e-8)


def test_put_along_axis_on_leaves_and_plain_arrays() -> None:
    # Into a Tensor that does not require grad: the gradient reaches values.
    target = fd.tensor(np.zeros((2, 3)))
    v = fd.tensor(np.array([[2.0], [3.0]]), requires_grad=True)
    np.put_along_axis(target, np.array([[2], [0]]), v, axis=1)
    assert target.requires_grad
    np.sum(target * np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).backward()
    np.testing.assert_array_equal(v.grad.numpy(), [[3.0], [4.0]])
    # Into a leaf that requires grad: torch's error.
    leaf = fd.tensor(np.zeros((2, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        np.put_along_axis(leaf, np.array([[0], [1]]), 1.0, axis=1)
    # Into an ndarray, values requiring grad: refused by name, the ndarray unchanged.
    plain = np.zeros((2, 3))
    with pytest.raises(RuntimeError, match="arr is an ndarray"):
        np.put_along_axis(plain, np.array([[0], [1]]), v, axis=1)
    assert not plain.any()
    # ... and without grad it is NumPy's write.
    np.put_along_axis(plain, np.array([[0], [1]]), v.detach(), axis=1)
    np.testing.assert_array_equal(plain, [[2.0, 0, 0], [0, 3.0, 0]])
    with pytest.raises(IndexError, match="integer array"):
        np.put_along_axis(fd.tensor(np.zeros(3)), np.array([0.5]), 1.0, axis=0)


# ---------------------------------------------------------------- real and imag views
_Z = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j])
_Y = np.array([0.3, -0.2, 0.7])
_C = np.array([1.0, 2.0, -1.5])


def _through_part(np_part: Any, z: Any, y: Any) -> tuple[Any, Any]:
    w = z * 1.0
    v = np_part(w)
    v += y * y
    v[1:] *= 3.0
    return w, np.sum(np.abs(w) ** 2 * _C) + np.sum(v * _C)


@pytest.mark.parametrize("part", ["real", "imag"])
def test_inplace_through_real_and_imag_views_equals_torch(part: str) -> None:
    torch = _torch()
    z = fd.tensor(_Z, requires_grad=True)
    y = fd.tensor(_Y, requires_grad=True)
    w, loss = _through_part(getattr(np, part), z, y)
    loss.backward()
    tz = torch.tensor(_Z, requires_grad=True)
    ty = torch.tensor(_Y, requires_grad=True)
    tw = tz * 1.0
    tv = getattr(tw, part)
    tv += ty * ty
    tv[1:] *= 3.0
    ((tw.abs() ** 2 * torch.tensor(_C)).sum() + (tv * torch.tensor(_C)).sum()).backward()
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-13)


def test_imag_is_a_view_of_its_complex_input() -> None:
    # The closed form: w = z + i y**2 on the imaginary parts, then 3x on entries 1:.
    z = fd.tensor(_Z, requires_grad=True)
    y = fd.tensor(_Y, requires_grad=True)
    w, loss = _through_part(np.imag, z, y)
    scale = np.array([1.0, 3.0, 3.0])
    expected = _Z.real + 1j * scale * (_Z.imag + _Y**2)
    np.testing.assert_allclose(w.detach().numpy(), expected)
    loss.backward()
    # d loss / d y = (2 Im w * C + C) * scale * 2 y
    np.testing.assert_allclose(y.grad.numpy(), (2 * expected.imag * _C + _C) * scale * 2 * _Y)
    # Without grad, as NumPy: the write changes the base.
    plain = fd.tensor(_Z.copy())
    im = np.imag(plain)
    im += 1.0
    np.testing.assert_array_equal(plain.numpy(), _Z + 1j)
    # A real input's imaginary part is zeros of its own (NumPy's is read-only).
    zeros = np.imag(fd.tensor(_Y))
    zeros += 1.0
    np.testing.assert_array_equal(zeros.numpy(), np.ones(3))


# ---------------------------------------------------------------- NumPy's scalar types
def test_hips_autograd_dtypes_test_passes_with_funcdiff_numpy() -> None:
    """HIPS autograd's ``test_wrappers.py::test_dtypes``, ported by its import (``grad``
    is ``vjp(f, y)[1]``): the gradient keeps the input's type, NumPy's own."""
    import funcdiff.numpy as fnp
    from funcdiff.functional import vjp

    assert fnp.float32 is np.float32 and fnp.float16 is np.float16
    assert fnp.longdouble is np.longdouble and fnp.double is np.float64

    def f(x: Any) -> Any:
        return fnp.real(fnp.sum(x**2))

    rng = np.random.default_rng(0)
    for dtype in (fnp.float32, fnp.float16):
        y = rng.standard_normal((10, 10)).astype(dtype)
        g = vjp(f, y)[1]
        assert g.dtype.type is dtype
        np.testing.assert_allclose(g.data, 2 * y, rtol=1e-3)
    for dtype in (fnp.longdouble, fnp.clongdouble):
        y = rng.standard_normal((10, 10)).astype(dtype)
        vjp(f, y)
    # Integer types stay Tensor-aware, as HIPS autograd wraps them: a constant cast.
    t = fd.tensor([1.7, -2.2], requires_grad=True)
    n = fnp.int64(t)
    assert not n.requires_grad and n.dtype.type is np.int64
    np.testing.assert_array_equal(n.data, [1, -2])


# ---------------------------------------------------------------- tangents under no_grad
_X = np.array([0.4, 1.3, -0.8])
_T = np.array([1.0, 0.5, -2.0])


def _no_grad_program(lib: Any, ad: Any, primal: Any, tangent: Any, w: Any) -> list:
    """Tangents of values computed under no_grad, inside a dual level: elementwise,
    a reduction, matmul, solve, values mixed with a non-dual Tensor, enable_grad inside
    no_grad, and a use after the no_grad block."""
    sin, sum_, solve = lib
    out = []
    with ad.dual_level():
        d = ad.make_dual(primal, tangent)
        with ad.no_grad():
            a = sin(d) * 2.0
            b = sum_(d * d)
            m = d[:, None] * d[None, :] + 3.0 * ad.eye
            c = m @ d
            s = solve(m, d)
            mixed = sin(d) * w
            with ad.enable_grad():
                e = a * a
        after = a * 3.0
        for v in (a, b, c, s, mixed, e, after):
            out.append(np.asarray(ad.tangent(v)))
    return out


def test_tangents_flow_under_no_grad_as_torchs() -> None:
    import types

    import funcdiff.autograd.forward_ad as fwAD

    torch = _torch()
    import torch.autograd.forward_ad as tAD

    ours = types.SimpleNamespace(
        dual_level=fwAD.dual_level,
        make_dual=fwAD.make_dual,
        no_grad=fd.no_grad,
        enable_grad=fd.enable_grad,
        eye=np.eye(3),
        tangent=lambda v: fwAD.unpack_dual(v).tangent.numpy(),
    )
    theirs = types.SimpleNamespace(
        dual_level=tAD.dual_level,
        make_dual=tAD.make_dual,
        no_grad=torch.no_grad,
        enable_grad=torch.enable_grad,
        eye=torch.eye(3, dtype=torch.float64),
        tangent=lambda v: tAD.unpack_dual(v).tangent.numpy(),
    )
    w = fd.tensor(_X[::-1].copy(), requires_grad=True)
    tw = torch.tensor(_X[::-1].copy(), requires_grad=True)
    got = _no_grad_program((np.sin, np.sum, np.linalg.solve), ours, fd.tensor(_X), fd.tensor(_T), w)
    want = _no_grad_program(
        (torch.sin, torch.sum, torch.linalg.solve), theirs, torch.tensor(_X), torch.tensor(_T), tw
    )
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


def test_no_grad_results_keep_no_reverse_history() -> None:
    import funcdiff.autograd.forward_ad as fwAD

    x = fd.tensor(_X, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, fd.tensor(_T))
        with fd.no_grad():
            z = np.sin(d) * x
        # The tangent: cos(x) t x, with x a constant under no_grad.
        np.testing.assert_allclose(fwAD.unpack_dual(z).tangent.numpy(), np.cos(_X) * _T * _X)
        y = np.sum(d * d)  # recorded as usual: reverse mode reaches x through d only
        (gx,) = fd.grad(y + np.sum(z), x, allow_unused=True)
        np.testing.assert_allclose(gx.numpy(), 2 * _X)
        with fd.inference_mode():  # nothing is recorded there: no tangent, as torch
            assert fwAD.unpack_dual(np.sin(d)).tangent is None
    assert fwAD.unpack_dual(z).tangent is None  # the level ended
    # A level entered under no_grad carries tangents from its start.
    with fd.no_grad(), fwAD.dual_level():
        d = fwAD.make_dual(fd.tensor(_X), fd.tensor(_T))
        np.testing.assert_allclose(fwAD.unpack_dual(np.exp(d)).tangent.numpy(), np.exp(_X) * _T)
    # Outside a dual level no_grad records nothing, as before.
    with fd.no_grad():
        assert not (x * 2.0).requires_grad


def test_custom_function_tangent_under_no_grad_uses_its_jvp() -> None:
    import funcdiff.autograd.forward_ad as fwAD

    calls: list[int] = []
    cube = _cube(3.0, calls)
    with fwAD.dual_level():
        d = fwAD.make_dual(fd.tensor(_X), fd.tensor(_T))
        with fd.no_grad():
            y = cube.apply(d) * 2.0
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(), 6.0 * _X**2 * _T)
    assert calls
