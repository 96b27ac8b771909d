"""Every public entry point through which a Tensor that requires grad can arrive
(positional ``args``, keywords, containers, closures) and leave as an ndarray either
differentiates or raises a TypeError naming the argument: no gradient is dropped.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import funcdiff as fd
from funcdiff import functional as F
from funcdiff import optimize, replay, sparse

X0 = np.array([1.0, 2.0])


def weights() -> fd.Tensor:
    return fd.tensor([0.5, 2.0], requires_grad=True)


def _refused(call, name: str) -> None:
    with pytest.raises(TypeError, match="requires grad") as info:
        call()
    assert name in str(info.value)


@pytest.mark.parametrize(
    "entry",
    ["jacobian", "hessian", "jacobian_sparsity", "hessian_sparsity", "prepare_jacobian"],
)
def test_sparse_refuses_a_recorded_tensor_in_args(entry: str) -> None:
    L = weights()
    scalar = entry.startswith("hessian")

    def f(x, a):
        return np.sum(x**2 * a) if scalar else x * a

    _refused(lambda: getattr(sparse, entry)(f, X0, args=(L,)), "args[0]")
    _refused(lambda: getattr(sparse, entry)(f, X0, args=([1.0, {"w": L}],)), "args[0][1]['w']")
    # The same call with a constant works, and gives the closed form.
    if entry == "jacobian":
        jac = sparse.jacobian(f, X0, args=(L.detach(),))
        np.testing.assert_allclose(jac.toarray(), np.diag(L.data))


def test_sparse_refuses_a_recorded_tensor_as_x_in_a_closure_and_in_a_partial() -> None:
    L = weights()
    _refused(lambda: sparse.jacobian(lambda x: x * 2.0, L), "x")
    _refused(lambda: sparse.jacobian(lambda x: x * L, X0), "'L'")
    _refused(lambda: sparse.jacobian(functools.partial(lambda a, x: x * a, L), X0), "partial")
    J = sparse.prepare_jacobian(lambda x, a: x * a, X0, args=(np.ones(2),))
    _refused(lambda: J(X0, L), "args[0]")
    with fd.no_grad():  # nothing is recorded, so nothing can be lost
        np.testing.assert_allclose(sparse.jacobian(lambda x: x * L, X0).toarray(), np.diag(L.data))


GLOBAL_WEIGHTS = None  # a module global a function reads (set by the test below)


def test_a_recorded_tensor_in_a_global_a_default_or_a_keyword_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    L = weights()
    monkeypatch.setitem(globals(), "GLOBAL_WEIGHTS", L)

    def uses_global(x):
        return x * GLOBAL_WEIGHTS

    def uses_default(x, a=L):
        return x * a

    _refused(lambda: sparse.jacobian(uses_global, X0), "the global 'GLOBAL_WEIGHTS'")
    _refused(lambda: replay.jacobian(uses_global)(X0), "the global 'GLOBAL_WEIGHTS'")
    _refused(lambda: replay.jacobian(uses_default)(X0), "the function's default argument 0")
    keyword = functools.partial(lambda x, a: x * a, a=L)
    _refused(lambda: sparse.jacobian(keyword, X0), "the partial's keyword 'a'")
    monkeypatch.setitem(globals(), "GLOBAL_WEIGHTS", L.detach())  # a constant: no error
    np.testing.assert_allclose(replay.jacobian(uses_global)(X0), np.diag(L.data))


@pytest.mark.parametrize("maker", ["value_and_grad", "grad", "jacobian", "hessian"])
def test_replay_refuses_a_recorded_tensor(maker: str) -> None:
    L = weights()
    make = getattr(replay, maker)
    scalar = maker != "jacobian"
    compiled = make(lambda x, a: np.sum(x * a) if scalar else x * a)
    _refused(lambda: compiled(X0, L), "positional argument 1")
    closure = make(lambda x: np.sum(x * L) if scalar else x * L)
    _refused(lambda: closure(X0), "'L'")
    _refused(lambda: compiled(L, X0), "positional argument 0")


def test_replay_hvp_value_is_a_float() -> None:
    value, hv = replay.hvp(lambda x: np.sum(x**3))(X0, np.array([1.0, 0.0]))
    assert type(value) is float and value == 9.0
    np.testing.assert_allclose(hv, [6.0, 0.0])  # diag(6 x) v


@pytest.mark.parametrize("solver", ["minimize", "root", "least_squares"])
def test_optimize_args_differentiate_or_raise_naming_them(solver: str) -> None:
    # x*(L) = L for each solver; f = x*(L) + L^2 has df/dL = 1 + 2L = 3 at L = 1.
    def call(L):
        if solver == "minimize":
            res = optimize.minimize(lambda w, a: np.sum((w - a) ** 2), np.zeros(1), args=(L,))
        elif solver == "root":
            res = optimize.root(lambda w, a: w - a, np.zeros(1), args=(L,))
        else:
            res = optimize.least_squares(lambda w, a: w - a, np.zeros(1), args=(L,))
        return res.x[0] + L**2

    # The solvers differentiate their Tensor args by the implicit function theorem.
    L = fd.tensor(1.0, requires_grad=True)
    (g,) = fd.grad(call(L), L)
    np.testing.assert_allclose(g.item(), 3.0, rtol=1e-6)


def test_functional_entry_points_differentiate_closures_under_create_graph() -> None:
    L = weights()
    x = fd.tensor(X0)
    jac = F.jacobian(lambda t: t * L, x, create_graph=True)
    (g,) = fd.grad(np.trace(jac), L)  # d/dL sum(L) = 1
    np.testing.assert_allclose(g.data, [1.0, 1.0])
    hess = F.hessian(lambda t: np.sum(t**3 * L), x, create_graph=True)
    (g,) = fd.grad(np.trace(hess), L)  # trace = sum(6 x L)
    np.testing.assert_allclose(g.data, 6 * X0)


def test_conversions_to_ndarrays_refuse_a_recorded_tensor() -> None:
    L = weights()
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(L)
    with pytest.raises(RuntimeError, match="requires grad"):
        L.numpy()
    with pytest.raises(RuntimeError, match="requires grad"):
        float(L[0])
    out = np.zeros(2)
    with pytest.raises((RuntimeError, ValueError)):  # never stored as a bare number
        out[0] = L[0]
    assert not out.any()
