"""Complex linear algebra: closed forms, finite differences along both axes, and torch.

The rule-table tests (tests/test_complex_rules.py) check every decomposition against
finite differences of the function NumPy computes; here the conventions that such a
check cannot see: Hermitian inputs (cholesky, eigh against torch), losses that depend
on the phases of eigenvectors (refused), and torch as an oracle where it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd

RNG = np.random.default_rng(23)


def _complex(shape, rng=RNG):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _grad(loss, z):
    t = fd.tensor(z, requires_grad=True)
    out = loss(t)
    out.backward()
    return t.grad.numpy()


def _fd_grad(loss, z, eps=1e-6):
    """``dL/dx + i dL/dy`` by central differences along both axes of every entry."""
    out = np.zeros_like(z)
    for m in range(z.size):
        for unit in (1.0, 1j):
            zp, zm = z.copy(), z.copy()
            zp.flat[m] += unit * eps
            zm.flat[m] -= unit * eps
            out.flat[m] += unit * (loss(zp) - loss(zm)) / (2 * eps)
    return out


def _value(t):
    return float(np.asarray(t.data if isinstance(t, fd.Tensor) else t))


def _hermitian_input(x):
    """A Hermitian positive definite matrix made of any square ``x``."""
    n = np.shape(x)[-1]
    return np.matmul(x, np.conj(np.swapaxes(x, -1, -2))) + n * np.eye(n)


# --------------------------------------------------------------------------- closed forms
def test_eigvals_sum_is_the_trace():
    a = _complex((4, 4))
    g = _grad(lambda t: np.real(np.sum(np.linalg.eigvals(t))), a)
    np.testing.assert_allclose(g, np.eye(4), atol=1e-10)


def test_slogdet_of_a_complex_matrix():
    # d log|det A| = Re tr(A^-1 dA): gradient conj(A^-T) in torch's convention.
    a = _complex((3, 3)) + 3 * np.eye(3)
    g = _grad(lambda t: np.linalg.slogdet(t)[1], a)
    np.testing.assert_allclose(g, np.conj(np.linalg.inv(a).T), rtol=1e-12)
    # the phase: sign = exp(i arg det A), d arg det = Im tr(A^-1 dA)
    c = 0.3 - 0.7j

    def loss(t):
        return np.real(np.conj(c) * np.linalg.slogdet(t)[0])

    np.testing.assert_allclose(_grad(loss, a), _fd_grad(lambda z: _value(loss(z)), a), atol=1e-7)


def test_norm_of_a_complex_vector_is_the_modulus_direction():
    z = _complex(5)
    np.testing.assert_allclose(_grad(np.linalg.norm, z), z / np.linalg.norm(z), rtol=1e-13)
    g = _grad(lambda t: np.linalg.norm(t, 3), z)
    want = z * np.abs(z) / np.linalg.norm(z, 3) ** 2  # d|z|_3 = |z_i| z_i / |z|_3^2
    np.testing.assert_allclose(g, want, rtol=1e-12)


@pytest.mark.parametrize("ord", [None, 1, np.inf, -np.inf, 0.5, "fro", "nuc", 2, -2])
def test_norms_of_complex_arrays_match_finite_differences(ord):
    z = _complex((5,) if ord in (0.5,) else (3, 4))
    if ord in (np.inf, -np.inf, 1) and z.ndim == 2:
        z = z * np.arange(1, 5)  # distinct row and column sums
    g = _grad(lambda t: np.linalg.norm(t, ord), z)
    np.testing.assert_allclose(g, _fd_grad(lambda x: np.linalg.norm(x, ord), z), atol=1e-7)


# --------------------------------------------------------------------------- Hermitian input
def test_cholesky_of_a_hermitian_matrix_matches_finite_differences():
    x = _complex((3, 3))
    w = _complex((3, 3))

    def loss(t):
        low = np.linalg.cholesky(_hermitian_input(t))
        return np.sum(np.real(np.conj(w) * low))

    got = _grad(loss, x)
    np.testing.assert_allclose(got, _fd_grad(lambda z: _value(loss(z)), x), atol=1e-7)

    # upper=True gives the conjugate transpose, and the same gradient through it
    def upper(t):
        up = np.linalg.cholesky(_hermitian_input(t), upper=True)
        return np.sum(np.real(np.conj(w) * np.conj(np.swapaxes(up, -1, -2))))

    np.testing.assert_allclose(_grad(upper, x), got, rtol=1e-10, atol=1e-12)


def test_cholesky_second_order():
    x = _complex((2, 2))

    def first(z):
        t = fd.tensor(z, requires_grad=True)
        low = np.linalg.cholesky(_hermitian_input(t))
        (g,) = fd.grad(np.sum(np.abs(low) ** 3), t, create_graph=True)
        return t, g

    t, g = first(x)
    v = _complex((2, 2))
    (h,) = fd.grad(np.sum(np.real(np.conj(v) * g)), t)

    def directional(z):
        return float(np.sum(np.real(np.conj(v) * first(z)[1].data)))

    np.testing.assert_allclose(h.numpy(), _fd_grad(directional, x, 1e-5), atol=1e-6)


# --------------------------------------------------------------------------- phases
def _phase_dependent(decompose):
    a = fd.tensor(_complex((3, 3)), requires_grad=True)
    # Changes with the phase of the first vector (LAPACK may return an entry real, so a
    # real part alone could be stationary in that phase).
    loss = np.real((1.0 + 2.0j) * decompose(a)[0, 0])
    with pytest.raises(RuntimeError, match="defined up to a phase"):
        loss.backward()


def test_losses_that_depend_on_eigenvector_phases_are_refused():
    _phase_dependent(lambda a: np.linalg.eigh(a)[1])
    _phase_dependent(lambda a: np.linalg.eig(a)[1])
    _phase_dependent(lambda a: np.linalg.svd(a)[0])
    _phase_dependent(lambda a: np.linalg.svd(a)[2])


def test_a_real_matrix_with_complex_eigenvalues_gets_a_real_gradient():
    a = np.array([[0.0, -2.0, 0.5], [1.0, 0.3, 0.0], [0.2, 0.1, 1.5]])
    assert np.iscomplexobj(np.linalg.eigvals(a))

    def loss(t):
        w = np.linalg.eigvals(t)
        return np.sum(np.imag(w) ** 2 + np.real(w) ** 3)

    g = _grad(loss, a)
    assert g.dtype == np.float64
    eps = 1e-6
    want = np.zeros_like(a)
    for m in range(a.size):
        e = np.zeros(a.size)
        e[m] = eps
        e = e.reshape(a.shape)
        want.flat[m] = (_value(loss(a + e)) - _value(loss(a - e))) / (2 * eps)
    np.testing.assert_allclose(g, want, atol=1e-7)


# --------------------------------------------------------------------------- torch
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _torch_grad(torch, loss, z):
    t = torch.tensor(z, requires_grad=True)
    loss(t).backward()
    return t.grad.numpy()


def test_eig_matches_torch(torch):
    a = _complex((3, 3))
    w = _complex(3)

    def ours(t):
        vals, vecs = np.linalg.eig(t)
        f = np.matmul(vecs * np.exp(vals)[None, :], np.linalg.inv(vecs))  # expm(A)
        return np.sum(np.real(np.conj(w) * vals)) + np.sum(np.abs(f))

    def theirs(t):
        vals, vecs = torch.linalg.eig(t)
        f = (vecs * torch.exp(vals)[None, :]) @ torch.linalg.inv(vecs)
        return (torch.conj(torch.tensor(w)) * vals).real.sum() + f.abs().sum()

    np.testing.assert_allclose(_grad(ours, a), _torch_grad(torch, theirs, a), rtol=1e-9)
    real = a.real.copy()
    np.testing.assert_allclose(_grad(ours, real), _torch_grad(torch, theirs, real), rtol=1e-9)


def test_svd_slogdet_and_norms_match_torch(torch):
    a = _complex((4, 3))
    b = _complex((3, 3)) + 2 * np.eye(3)

    def ours(t, s):
        u, sv, vh = np.linalg.svd(t, full_matrices=False)
        sign, logabs = np.linalg.slogdet(s)
        return (
            np.sum(np.abs(u[:, :2] @ vh[:2]) ** 2 * np.arange(1, 4))
            + np.sum(sv**1.5)
            + np.real(sign * (0.2 + 0.4j))
            + logabs
            + np.linalg.norm(t, "nuc")
            + np.linalg.norm(s, 2)
            + np.linalg.norm(t[:, 0], 3)
        )

    def theirs(t, s):
        u, sv, vh = torch.linalg.svd(t, full_matrices=False)
        sign, logabs = torch.linalg.slogdet(s)
        return (
            ((u[:, :2] @ vh[:2]).abs() ** 2 * torch.arange(1, 4)).sum()
            + (sv**1.5).sum()
            + (sign * (0.2 + 0.4j)).real
            + logabs
            + torch.linalg.matrix_norm(t, "nuc")
            + torch.linalg.matrix_norm(s, 2)
            + torch.linalg.vector_norm(t[:, 0], 3)
        )

    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    theirs(ta, tb).backward()
    fa, fb = fd.tensor(a, requires_grad=True), fd.tensor(b, requires_grad=True)
    ours(fa, fb).backward()
    np.testing.assert_allclose(fa.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fb.grad.numpy(), tb.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_eigh_and_cholesky_match_torch_along_hermitian_directions(torch):
    # torch's eigh gradient is not one-triangle, so compare what both define: the
    # derivative along a Hermitian direction of a Hermitian input.
    x = _complex((3, 3))
    w = _complex((3, 3))

    def ours(t):
        vals, vecs = np.linalg.eigh(_hermitian_input(t))
        f = np.matmul(vecs * np.sin(vals)[None, :], np.conj(vecs.T))
        low = np.linalg.cholesky(_hermitian_input(t))
        return np.sum(np.real(np.conj(w) * f)) + np.sum(vals**2) + np.sum(np.abs(low))

    def theirs(t):
        h = t @ t.mH + 3 * torch.eye(3)
        vals, vecs = torch.linalg.eigh(h)
        f = (vecs * torch.sin(vals)[None, :]) @ vecs.mH
        low = torch.linalg.cholesky(h)
        return (torch.conj(torch.tensor(w)) * f).real.sum() + (vals**2).sum() + low.abs().sum()

    np.testing.assert_allclose(_grad(ours, x), _torch_grad(torch, theirs, x), rtol=1e-9)


# --------------------------------------------------------------------------- checkers
def _conj_rule():
    from funcdiff._core.registry import all_rules

    return next(r for r in all_rules() if r.name == "conjugate")


def test_gradcheck_and_gradgradcheck_on_complex_functions():
    from funcdiff.check import check_derivatives, gradcheck, gradgradcheck

    z = fd.tensor(_complex(3), requires_grad=True)
    x = fd.tensor(RNG.standard_normal(3), requires_grad=True)

    def f(a, b):
        return np.sin(a) * np.conj(a) * b, np.abs(a) ** 2 + b

    assert gradcheck(f, (z, x))
    assert gradgradcheck(f, (z, x))
    v = (fd.tensor(_complex(3), requires_grad=True), fd.tensor(np.ones(3), requires_grad=True))
    assert gradgradcheck(f, (z, x), v)
    assert gradcheck(lambda t: np.fft.fft(t), (x,))  # real input, complex result
    report = check_derivatives(f, (z.detach().numpy(), x.detach().numpy()), order=2)
    assert report.ok
    # np.conj given the vjp of a holomorphic function (a classic bug): only the derivative
    # with respect to conj(z) is wrong, and every checker sees it.
    import dataclasses

    from funcdiff._core.registry import UFUNC_RULES

    rule = _conj_rule()
    UFUNC_RULES[np.conjugate] = dataclasses.replace(rule, complex_vjps={0: lambda g, ans, x: g})
    try:
        assert not gradcheck(f, (z, x), raise_exception=False)
        assert not gradgradcheck(f, (z, x), raise_exception=False)
        assert not check_derivatives(f, (z.detach().numpy(), x.detach().numpy())).ok
    finally:
        UFUNC_RULES[np.conjugate] = rule


def test_check_derivatives_second_order_with_outputs_sharing_a_graph():
    from funcdiff.check import check_derivatives

    def f(a, b):
        t = np.sin(a) * b
        return t * 2.0, t * 3.0

    x = np.array([0.3, 0.5, 0.7])
    assert check_derivatives(f, (x, x + 1.0), order=2).ok
