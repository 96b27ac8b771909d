"""Complex numbers against torch as the oracle: gradients, the functional API, FFTs.

Skipped where torch is not installed (an optional test dependency).
"""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
from funcdiff import functional as F

torch = pytest.importorskip("torch")
TF = torch.autograd.functional

Z0 = np.array([1.0 + 1.0j, 2.0 - 0.5j, -0.3 + 0.8j])
V0 = np.array([1.0 + 0.0j, 1.0j, 0.5 - 0.25j])
X0 = np.array([0.3, 0.7, -1.1])


def _numpy(value):
    if isinstance(value, tuple):
        return tuple(_numpy(v) for v in value)
    if isinstance(value, torch.Tensor):
        return value.detach().resolve_conj().numpy()
    return value.detach().numpy() if isinstance(value, fd.Tensor) else np.asarray(value)


def _same(ours, theirs):
    ours, theirs = _numpy(ours), _numpy(theirs)
    if isinstance(ours, tuple):
        assert isinstance(theirs, tuple) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
        return
    assert ours.shape == theirs.shape
    assert np.iscomplexobj(ours) == np.iscomplexobj(theirs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


# Pairs of the same function written for funcdiff (NumPy) and for torch.
FUNCTIONS = {
    "holomorphic": (lambda z: z**2 * np.exp(z), lambda z: z**2 * torch.exp(z)),
    "conj": (lambda z: np.conj(z) * z[0], lambda z: torch.conj(z) * z[0]),
    "abs": (lambda z: np.abs(z) * z, lambda z: z.abs() * z),
    "angle": (lambda z: np.angle(z) + 0j * z, lambda z: z.angle() + 0j * z),
    "real-imag": (
        lambda z: np.real(z) * np.imag(z) + 1j * np.real(z),
        lambda z: z.real * z.imag + 1j * z.real,
    ),
    "trig": (lambda z: np.sin(z) / np.cosh(z), lambda z: torch.sin(z) / torch.cosh(z)),
    "log-sqrt": (lambda z: np.log(z) * np.sqrt(z), lambda z: torch.log(z) * torch.sqrt(z)),
    "matmul": (
        lambda z: np.outer(z, np.conj(z)) @ z,
        lambda z: torch.outer(z, torch.conj(z)) @ z,
    ),
    "fft": (
        lambda z: np.fft.fft(z * np.arange(1, 4)),
        lambda z: torch.fft.fft(z * torch.arange(1, 4)),
    ),
    "ifft-n-ortho": (
        lambda z: np.fft.ifft(z, n=5, norm="ortho"),
        lambda z: torch.fft.ifft(z, n=5, norm="ortho"),
    ),
    "irfft": (lambda z: np.fft.irfft(z, n=5) + 0j, lambda z: torch.fft.irfft(z, n=5) + 0j),
    "hfft": (lambda z: np.fft.hfft(z) + 0j, lambda z: torch.fft.hfft(z) + 0j),
}
REAL_LOSSES = {
    "abs2": (lambda z: np.sum(np.abs(z) ** 2), lambda z: torch.sum(z.abs() ** 2)),
    "real-cube": (lambda z: np.sum(np.real(z**3)), lambda z: torch.sum((z**3).real)),
    "mixed": (
        lambda z: np.sum(np.abs(np.fft.fft(z)) * np.angle(z + 3)),
        lambda z: torch.sum(torch.fft.fft(z).abs() * (z + 3).angle()),
    ),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_vjp_and_jvp_match_torch(name):
    ours, theirs = FUNCTIONS[name]
    out = ours(fd.tensor(Z0))
    v = np.linspace(0.5, 1.5, out.size).reshape(out.shape) * (1 - 0.5j)
    _same(F.vjp(ours, Z0, v), TF.vjp(theirs, torch.tensor(Z0), torch.tensor(v)))
    _same(F.jvp(ours, Z0, V0), TF.jvp(theirs, torch.tensor(Z0), torch.tensor(V0)))


# torch's forward mode fails an internal assertion on conjugate views in these.
_TORCH_FORWARD_FAILS = {"abs", "angle", "conj", "hfft", "matmul", "real-imag"}


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_vectorized_jacobian_matches_torch(name, strategy):
    ours, theirs = FUNCTIONS[name]
    jac = F.jacobian(ours, Z0, vectorize=True, strategy=strategy)
    if strategy == "forward-mode" and name in _TORCH_FORWARD_FAILS:
        # Forward-mode columns are the derivatives along each input's real axis.
        h = 1e-6
        columns = []
        for j in range(Z0.size):
            e = np.zeros(Z0.size)
            e[j] = h
            plus, minus = ours(fd.tensor(Z0 + e)).numpy(), ours(fd.tensor(Z0 - e)).numpy()
            columns.append((plus - minus) / (2 * h))
        np.testing.assert_allclose(jac.numpy(), np.stack(columns, axis=-1), atol=1e-7)
        return
    _same(jac, TF.jacobian(theirs, torch.tensor(Z0), vectorize=True, strategy=strategy))


@pytest.mark.parametrize("name", sorted(REAL_LOSSES))
def test_gradients_and_hessians_of_real_losses_match_torch(name):
    ours, theirs = REAL_LOSSES[name]
    z = fd.tensor(Z0, requires_grad=True)
    ours(z).backward()
    zt = torch.tensor(Z0, requires_grad=True)
    theirs(zt).backward()
    _same(z.grad, zt.grad)
    _same(F.jacobian(ours, Z0), TF.jacobian(theirs, torch.tensor(Z0)))
    _same(F.hessian(ours, Z0, vectorize=True), TF.hessian(theirs, torch.tensor(Z0), vectorize=True))
    _same(F.hvp(ours, Z0, V0), TF.hvp(theirs, torch.tensor(Z0), torch.tensor(V0)))
    _same(F.vhp(ours, Z0, V0), TF.vhp(theirs, torch.tensor(Z0), torch.tensor(V0)))


def test_real_inputs_with_complex_intermediates_match_torch():
    def ours(x):
        return np.sum(np.abs(np.exp(1j * x) * (2 + x)) + np.real(np.fft.rfft(x) ** 2).sum())

    def theirs(x):
        return torch.sum((torch.exp(1j * x) * (2 + x)).abs() + (torch.fft.rfft(x) ** 2).real.sum())

    _same(F.jacobian(ours, X0), TF.jacobian(theirs, torch.tensor(X0)))
    _same(F.hessian(ours, X0), TF.hessian(theirs, torch.tensor(X0)))
    assert F.jacobian(ours, X0).dtype == np.float64


def test_backward_semantics_match_torch():
    z = fd.tensor(Z0, requires_grad=True)
    with pytest.raises(RuntimeError, match="implicitly created only for real scalar outputs"):
        np.sum(z * 2).backward()
    with pytest.raises(RuntimeError, match="same dtype"):
        np.sum(z * 2).backward(np.array(1.0))
    zt = torch.tensor(Z0, requires_grad=True)
    with pytest.raises(RuntimeError, match="implicitly created only for real scalar outputs"):
        (zt * 2).sum().backward()
    np.sum(z * z).backward(np.array(0.5 + 2j))
    (zt * zt).sum().backward(torch.tensor(0.5 + 2j, dtype=torch.complex128))
    _same(z.grad, zt.grad)
    # hooks see torch's form of the gradient
    seen, seen_t = [], []
    z = fd.tensor(Z0, requires_grad=True)
    y = z * z
    y.register_hook(lambda g: seen.append(g.detach().numpy().copy()))
    np.sum(np.abs(y)).backward()
    zt = torch.tensor(Z0, requires_grad=True)
    yt = zt * zt
    yt.register_hook(lambda g: seen_t.append(g.detach().resolve_conj().numpy().copy()))
    yt.abs().sum().backward()
    _same(seen[0], seen_t[0])
    _same(z.grad, zt.grad)


def test_complex64_matches_torch():
    z64 = Z0.astype(np.complex64)
    z = fd.tensor(z64, requires_grad=True)
    np.sum(np.abs(np.sin(z)) ** 2).backward()
    zt = torch.tensor(z64, requires_grad=True)
    (torch.sin(zt).abs() ** 2).sum().backward()
    assert z.grad.dtype == np.complex64
    np.testing.assert_allclose(z.grad.numpy(), zt.grad.numpy(), rtol=1e-5)


def test_create_graph_through_complex_code_matches_torch():
    z = fd.tensor(Z0, requires_grad=True)
    (g,) = fd.grad(np.sum(np.abs(np.exp(z) * np.conj(z)) ** 2), z, create_graph=True)
    (gg,) = fd.grad(np.sum(np.real(g * np.conj(V0))), z)
    zt = torch.tensor(Z0, requires_grad=True)
    (gt,) = torch.autograd.grad(
        ((torch.exp(zt) * torch.conj(zt)).abs() ** 2).sum(), zt, create_graph=True
    )
    (ggt,) = torch.autograd.grad((gt * torch.conj(torch.tensor(V0))).real.sum(), zt)
    _same(g, gt)
    _same(gg, ggt)
