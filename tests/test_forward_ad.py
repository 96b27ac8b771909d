"""Forward-mode dual numbers (``funcdiff.autograd.forward_ad``) against closed forms,
reverse mode and torch."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
import funcdiff.autograd.forward_ad as fwAD
from funcdiff import functional as F

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
X0 = RNG.standard_normal(3)
V0 = RNG.standard_normal(3)


def program(m, x):
    matrix = A if m is np else m.tensor(A)
    y = m.exp(x) * m.sin(x) + x**2
    z = matrix @ y
    s = m.linalg.solve(matrix, z + x)
    return (s * s).sum() + m.tanh(z).mean()


def test_tangent_equals_the_jacobian_times_v() -> None:
    with fwAD.dual_level():
        dual = fwAD.make_dual(fd.tensor(X0), fd.tensor(V0))
        out = program(np, dual)
        primal, tangent = fwAD.unpack_dual(out)
    x = fd.tensor(X0, requires_grad=True)
    (grad,) = fd.grad(program(np, x), x)
    np.testing.assert_allclose(tangent.item(), grad.data @ V0, rtol=1e-12)
    np.testing.assert_allclose(primal.item(), program(np, fd.tensor(X0)).item())
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tAD

    with tAD.dual_level():
        tdual = tAD.make_dual(torch.tensor(X0), torch.tensor(V0))
        ttangent = tAD.unpack_dual(program(torch, tdual)).tangent
    np.testing.assert_allclose(tangent.item(), ttangent.item(), rtol=1e-12)


def test_elementwise_matmul_and_reduction_tangents_closed_form() -> None:
    with fwAD.dual_level():
        x = fwAD.make_dual(fd.tensor([0.5, 2.0]), fd.tensor([1.0, -1.0]))
        np.testing.assert_allclose(fwAD.unpack_dual(x**3).tangent.data, [0.75, -12.0])
        y = fd.tensor(np.eye(2) * 2.0) @ x
        np.testing.assert_allclose(fwAD.unpack_dual(y.sum()).tangent.item(), 0.0)
        np.testing.assert_allclose(fwAD.unpack_dual(np.max(x)).tangent.item(), -1.0)


def test_forward_over_reverse_hessian_vector_product() -> None:
    x = fd.tensor(X0, requires_grad=True)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, fd.tensor(V0))
        (g,) = fd.grad(program(np, dual), x, create_graph=True)
        hv = fwAD.unpack_dual(g).tangent
    hessian = F.hessian(lambda t: program(np, t), fd.tensor(X0)).data
    np.testing.assert_allclose(hv.data, hessian @ V0, rtol=1e-10)
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tAD

    tx = torch.tensor(X0, requires_grad=True)
    with tAD.dual_level():
        tdual = tAD.make_dual(tx, torch.tensor(V0))
        (tg,) = torch.autograd.grad(program(torch, tdual), tx, create_graph=True)
        thv = tAD.unpack_dual(tg).tangent
    np.testing.assert_allclose(hv.data, thv.detach().numpy(), rtol=1e-10)


def test_custom_function_jvp_is_used() -> None:
    class Cube(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x**2 * g

        @staticmethod
        def jvp(ctx, t):
            Cube.used = True
            (x,) = ctx.saved_tensors
            return 3 * x**2 * t

    Cube.used = False
    with fwAD.dual_level():
        x = fwAD.make_dual(fd.tensor([1.0, 2.0]), fd.tensor([1.0, 0.5]))
        tangent = fwAD.unpack_dual(Cube.apply(x)).tangent
    assert Cube.used
    np.testing.assert_allclose(tangent.data, [3.0, 6.0])


def test_errors_and_missing_tangents() -> None:
    with pytest.raises(RuntimeError, match="dual level"):
        fwAD.make_dual(fd.tensor([1.0]), fd.tensor([1.0]))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(fd.tensor([1.0, 2.0]), fd.tensor([1.0]))
        plain = fd.tensor([1.0])
        assert fwAD.unpack_dual(plain).tangent is None
        assert fwAD.unpack_dual(plain * 2.0).tangent is None
        x = fwAD.make_dual(fd.tensor([1.0]), fd.tensor([2.0]))
        y = x * 3.0
    assert fwAD.unpack_dual(y).tangent is None  # the level ended
    assert isinstance(fwAD.unpack_dual(y), fwAD.UnpackedDualTensor)
