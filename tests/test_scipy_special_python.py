"""SciPy's Python-level special functions called on Tensors as the user writes them:
each records (zeta) or is refused with a message naming the funcdiff.special function,
which then matches SciPy's value and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import funcdiff as fd
from funcdiff import special as fds
from funcdiff.rules.zeta import _zeta_derivative

X = np.array([0.7, 1.9, 3.2])


def _central(f, x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        out.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


# (what the user writes on a Tensor, the funcdiff.special name, the same on ndarrays)
REFUSED = [
    (lambda t: sp.logsumexp(t), "logsumexp", lambda a: sp.logsumexp(a)),
    (lambda t: sp.softmax(t), "softmax", lambda a: sp.softmax(a)),
    (lambda t: sp.log_softmax(t), "log_softmax", lambda a: sp.log_softmax(a)),
    (lambda t: sp.polygamma(1, t), "polygamma", lambda a: sp.polygamma(1, a)),
    (lambda t: sp.multigammaln(t + 2.0, 3), "multigammaln", lambda a: sp.multigammaln(a + 2.0, 3)),
]


@pytest.mark.parametrize(("call", "name", "reference"), REFUSED, ids=[r[1] for r in REFUSED])
def test_a_scipy_python_function_names_its_funcdiff_special_replacement(
    call, name, reference
) -> None:
    t = fd.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        call(t)
    msg = str(info.value)
    assert f"scipy.special.{name} was called on it" in msg
    assert f"use funcdiff.special.{name}, which accepts Tensors" in msg
    # The replacement, called the same way, matches SciPy and finite differences.
    replacement = getattr(fds, name)
    args = {
        "polygamma": lambda t: replacement(1, t),
        "multigammaln": lambda t: replacement(t + 2.0, 3),
    }.get(name, replacement)
    y = args(t)
    np.testing.assert_allclose(y.data, reference(X), rtol=1e-13, atol=1e-15)
    w = np.array([0.3, -1.1, 0.8])[: np.size(y.data)].reshape(np.shape(y.data))
    (g,) = fd.grad(np.sum(y * w), t)
    expected = _central(lambda a: float(np.sum(reference(a) * w)), X)
    np.testing.assert_allclose(g.data, expected, rtol=1e-7, atol=1e-9)


ZETA_PRIME_2 = -0.93754825431584375370  # zeta'(2) = zeta(2) (gamma + ln 2pi - 12 ln A)


def test_zeta_records_as_called_and_hits_the_known_derivative() -> None:
    x = fd.tensor(2.0, requires_grad=True)
    ys = (sp.zeta(x), sp.zeta(x, 1.0), fds.zeta(x), fds.zeta(x, 1.0))
    for y, value in zip(ys, (sp.zeta(2.0), sp.zeta(2.0, 1.0)) * 2):
        assert y.data == value
        (g,) = fd.grad(y, x)
        assert abs(g.data - ZETA_PRIME_2) <= 2e-16


def _fd8(f, x: float, h: float = 1e-3) -> float:
    """Eighth-order central difference."""
    c = (1 / 280, -4 / 105, 1 / 5, -4 / 5, 0.0, 4 / 5, -1 / 5, 4 / 105, -1 / 280)
    return sum(ci * f(x + (i - 4) * h) for i, ci in enumerate(c)) / h


@pytest.mark.parametrize(("x", "q"), [(1.5, 0.5), (2.0, 1.0), (3.3, 2.7), (10.0, 0.3), (2.0, 50.0)])
def test_zeta_first_and_second_x_derivatives_match_finite_differences(x: float, q: float) -> None:
    xt = fd.tensor(x, requires_grad=True)
    (d1,) = fd.grad(sp.zeta(xt, q), xt, create_graph=True)
    (d2,) = fd.grad(d1, xt)
    fd1 = _fd8(lambda s: sp.zeta(s, q), x)
    fd2 = _fd8(lambda s: float(_zeta_derivative(1, s, q)), x)
    assert abs(d1.data - fd1) <= 5e-12 * abs(fd1)
    assert abs(d2.data - fd2) <= 5e-12 * abs(fd2)
    # the series itself, summed directly far enough for these x (checks the tail)
    k = np.arange(200000.0) + q
    if x >= 6.0:  # the truncated tail is below 1e-40 there
        assert abs(d1.data + np.sum(np.log(k) * k**-x)) <= 1e-14 * abs(d1.data)
        assert abs(d2.data - np.sum(np.log(k) ** 2 * k**-x)) <= 1e-14 * abs(d2.data)


def test_zeta_q_derivative_is_the_closed_form_at_first_and_second_order() -> None:
    q = fd.tensor(np.array([0.5, 2.0]), requires_grad=True)
    x = fd.tensor(np.array([3.0, 2.5]), requires_grad=True)
    (gq,) = fd.grad(np.sum(sp.zeta(x, q)), q, create_graph=True)
    np.testing.assert_allclose(gq.data, -x.data * sp.zeta(x.data + 1.0, q.data), rtol=1e-14)
    gqq, gqx = fd.grad(np.sum(gq), (q, x))
    xd, qd = x.data, q.data
    np.testing.assert_allclose(gqq.data, xd * (xd + 1.0) * sp.zeta(xd + 2.0, qd), rtol=1e-13)
    expected = np.array(
        [_fd8(lambda s, i=i: -s * sp.zeta(s + 1.0, qd[i]), xd[i]) for i in range(2)]
    )
    np.testing.assert_allclose(gqx.data, expected, rtol=1e-10)


@pytest.mark.parametrize("x", [0.5, -0.3, -0.7, -2.5, -7.3])
def test_riemann_zeta_derivative_below_one(x: float) -> None:
    xt = fd.tensor(x, requires_grad=True)
    (d1,) = fd.grad(sp.zeta(xt), xt)
    fd1 = _fd8(lambda s: sp.zeta(s), x)
    assert abs(d1.data - fd1) <= 1e-10 * abs(fd1)


def test_gammainc_and_kv_name_the_argument_without_a_derivative() -> None:
    a = fd.tensor([1.5, 2.0], requires_grad=True)
    with pytest.raises(
        NotImplementedError,
        match=r"scipy\.special\.gammainc is differentiable "
        r"in x, not in a: .*Pass a constant as a \(a\.detach\(\)\)",
    ):
        sp.gammainc(a, 1.0)
    with pytest.raises(
        NotImplementedError, match="scipy.special.gammaincc is differentiable in x, not in a"
    ):
        sp.gammaincc(a, 1.0)
    with pytest.raises(
        NotImplementedError, match="scipy.special.kv is differentiable in x, not in v"
    ):
        sp.kv(a, 1.0)
    # Only a Tensor that requires grad there is refused; x still differentiates.
    x = fd.tensor([0.5, 1.5], requires_grad=True)
    (g,) = fd.grad(np.sum(sp.gammainc(a.detach(), x)), x)
    np.testing.assert_allclose(
        g.data, _central(lambda s: np.sum(sp.gammainc(a.data, s)), x.data), rtol=1e-8
    )
