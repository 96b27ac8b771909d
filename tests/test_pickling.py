"""Replayed functions, prepared sparse derivatives and the optimize/integrate objects a
user holds pickle with ``pickle`` and ``cloudpickle`` and give the same results after
loading, against closed forms (SciPy's Rosenbrock derivatives, hand-written Jacobians).

What pickles is the user's function and the options, never a recorded program (compiled
code of this process): a loaded copy records again on first use.
"""

from __future__ import annotations

import importlib.util
import inspect
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from support import picklable as pk

import funcdiff as fd
import funcdiff.optimize as fo
import funcdiff.replay as replay
import funcdiff.sparse as fs
from funcdiff.integrate import solve_ivp

HAVE_CLOUDPICKLE = importlib.util.find_spec("cloudpickle") is not None
PICKLERS = [
    "pickle",
    pytest.param(
        "cloudpickle",
        marks=pytest.mark.skipif(not HAVE_CLOUDPICKLE, reason="cloudpickle is not installed"),
    ),
]

X0 = np.linspace(-0.5, 1.2, 6)
POINTS = [X0 + 0.13 * k for k in range(5)]  # enough calls to compile the replayed programs
V = np.array([1.0, -2.0, 0.5, 0.0, 3.0, -1.0])
W = np.array([0.5, 1.0, -1.0, 2.0, 0.25])


def _round_trip(obj: Any, how: str) -> Any:
    if how == "pickle":
        return pickle.loads(pickle.dumps(obj))
    import cloudpickle

    return pickle.loads(cloudpickle.dumps(obj))


def _dense(result: Any) -> Any:
    if sp.issparse(result):
        return result.toarray()
    if isinstance(result, tuple):
        return tuple(_dense(r) for r in result)
    return np.asarray(result)


def _assert_same(got: Any, expected: Any, rtol: float = 0.0) -> None:
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _assert_same(g, e, rtol)
        return
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * 1e-3)


# name -> (make the object, evaluate it at x, the closed form at x)
CASES: dict[str, tuple[Callable[[], Any], Callable[[Any, np.ndarray], Any], Callable]] = {
    "replay.value_and_grad": (
        lambda: replay.value_and_grad(pk.rosen),
        lambda o, x: o(x),
        lambda x: (pk.rosen(x), pk.rosen_grad(x)),
    ),
    "replay.grad": (
        lambda: replay.grad(pk.rosen),
        lambda o, x: o(x),
        pk.rosen_grad,
    ),
    "replay.jacobian": (
        lambda: replay.jacobian(pk.residual),
        lambda o, x: o(x),
        pk.residual_jac,
    ),
    "replay.hessian": (
        lambda: replay.hessian(pk.rosen),
        lambda o, x: o(x),
        pk.rosen_hess,
    ),
    "replay.hvp": (
        lambda: replay.hvp(pk.rosen, max_traces=4),
        lambda o, x: o(x, V),
        lambda x: (pk.rosen(x), pk.rosen_hess(x) @ V),
    ),
    "replay.vjp": (
        lambda: replay.vjp(pk.residual),
        lambda o, x: o(x, W),
        lambda x: (pk.residual(x), W @ pk.residual_jac(x)),
    ),
    "replay.jvp": (
        lambda: replay.jvp(pk.residual, on_guard_failure="raise", validate=False),
        lambda o, x: o(x, V),
        lambda x: (pk.residual(x), pk.residual_jac(x) @ V),
    ),
    "replay.decorated": (
        lambda: pk.replayed_rosen,
        lambda o, x: o(x),
        lambda x: (pk.rosen(x), pk.rosen_grad(x)),
    ),
    "sparse.jacobian.forward": (
        lambda: fs.prepare_jacobian(pk.residual, X0, mode="forward"),
        lambda o, x: o(x),
        pk.residual_jac,
    ),
    "sparse.jacobian.reverse.replay": (
        lambda: fs.prepare_jacobian(pk.residual, X0, mode="reverse", replay=True),
        lambda o, x: o.value_and_jacobian(x),
        lambda x: (pk.residual(x), pk.residual_jac(x)),
    ),
    "sparse.jacobian.branches.replay": (
        lambda: fs.prepare_jacobian(pk.branchy, X0, replay=True),
        lambda o, x: (o(x), o(-x)),
        lambda x: (pk.branchy_jac(x), pk.branchy_jac(-x)),
    ),
    "sparse.hessian.star": (
        lambda: fs.prepare_hessian(pk.rosen, X0),
        lambda o, x: (o(x), o.hessp(x, V)),
        lambda x: (pk.rosen_hess(x), pk.rosen_hess(x) @ V),
    ),
    "sparse.hessian.column.replay": (
        lambda: fs.prepare_hessian(pk.rosen, X0, coloring="column", replay=True),
        lambda o, x: o(x),
        pk.rosen_hess,
    ),
    "optimize.derivatives": (
        lambda: fo.derivatives(pk.rosen),
        lambda o, x: (o.fun(x), o.jac(x), o.hess(x), o.hessp(x, V)),
        lambda x: (pk.rosen(x), pk.rosen_grad(x), pk.rosen_hess(x), pk.rosen_hess(x) @ V),
    ),
}


@pytest.mark.parametrize("how", PICKLERS)
@pytest.mark.parametrize("name", list(CASES))
def test_a_used_object_round_trips_and_gives_the_same_results(name: str, how: str) -> None:
    make, evaluate, truth = CASES[name]
    obj = make()
    before = [_dense(evaluate(obj, x)) for x in POINTS]  # records, replays, compiles
    for x, result in zip(POINTS, before):
        _assert_same(result, _dense(truth(x)), rtol=1e-12)
    loaded = _round_trip(obj, how)
    assert type(loaded) is type(obj)
    for x, result in zip(POINTS[::-1], before[::-1]):
        _assert_same(_dense(evaluate(loaded, x)), result, rtol=0.0)  # bit for bit
    # The copy works on its own (a point neither evaluated before).
    x = X0 - 0.21
    _assert_same(_dense(evaluate(loaded, x)), _dense(truth(x)), rtol=1e-12)


@pytest.mark.parametrize("how", PICKLERS)
@pytest.mark.parametrize("kind", ["value_and_grad", "grad", "jacobian", "hessian"])
def test_a_replayed_function_pickles_without_its_programs(kind: str, how: str) -> None:
    maker = getattr(replay, kind)
    f = pk.residual if kind == "jacobian" else pk.rosen
    used = maker(f, max_traces=3)
    for x in POINTS:
        used(x)
    assert used.cache_info()["programs"] == 1 and used.trace_count == 1
    fresh = maker(f, max_traces=3)
    # Only f and the options travel: the pickle of a used one is that of a fresh one.
    assert pickle.dumps(used) == pickle.dumps(fresh)
    loaded = _round_trip(used, how)
    assert loaded.f is pk.rosen or loaded.f is pk.residual
    assert (loaded.argnums, loaded.kind, loaded.max_traces) == (0, kind, 3)
    assert loaded.trace_count == 0 and loaded.cache_info()["programs"] == 0
    loaded(POINTS[1])
    loaded(POINTS[2])
    info = loaded.cache_info()
    assert info["trace_count"] == 1 and info["replays"] == 1


def test_the_pickle_rebuilds_every_option_of_a_replayed_function() -> None:
    # The reduction passes each parameter of __init__ from the attribute of its name:
    # an option added later must be stored under its own name to travel.
    params = list(inspect.signature(replay.Replayed.__init__).parameters)[1:]
    obj = replay.Replayed(pk.rosen, (0,), "grad", max_traces=5, on_guard_failure="raise")
    for p in params:
        assert hasattr(obj, p), p
    loaded = pickle.loads(pickle.dumps(obj))
    for p in params:
        assert getattr(loaded, p) == getattr(obj, p), p


def test_a_decorated_module_level_function_pickles_by_its_name() -> None:
    pk.replayed_rosen(X0)
    data = pickle.dumps(pk.replayed_rosen)
    assert b"replayed_rosen" in data and len(data) < 100
    assert pickle.loads(data) is pk.replayed_rosen


@pytest.mark.parametrize("how", PICKLERS)
def test_a_loaded_replayed_sparse_jacobian_records_again_then_replays(how: str) -> None:
    J = fs.prepare_jacobian(pk.counted_residual, X0, replay=True)
    for x in POINTS:
        J(x)
    calls = pk.CALLS[0]
    J(POINTS[0])
    assert pk.CALLS[0] == calls  # replayed: the Python function did not run
    loaded = _round_trip(J, how)
    assert loaded.ncolors == J.ncolors and loaded.mode == J.mode
    assert (loaded.sparsity != J.sparsity).nnz == 0
    loaded(POINTS[1])  # eager (no program travelled), then recorded
    assert pk.CALLS[0] > calls
    calls = pk.CALLS[0]
    got = loaded(POINTS[2])
    assert pk.CALLS[0] == calls  # replayed again
    np.testing.assert_allclose(got.toarray(), pk.residual_jac(POINTS[2]), rtol=1e-14)


@pytest.mark.parametrize("how", PICKLERS)
def test_a_dense_output_of_solve_ivp_pickles(how: str) -> None:
    # y'' = -y from (1, 0): the state (cos t, -sin t), and its sensitivity to y0.
    y0 = fd.tensor([1.0, 0.0], requires_grad=True)
    res = solve_ivp(
        lambda t, y: np.stack([y[1], -y[0]]),
        (0.0, 2.0),
        y0,
        dense_output=True,
        rtol=1e-10,
        atol=1e-12,
    )
    ts = np.array([0.3, 1.1, 1.9])
    loaded = _round_trip(res.sol, how)
    np.testing.assert_array_equal(loaded(ts), res.sol(ts))
    np.testing.assert_allclose(loaded(ts), [np.cos(ts), -np.sin(ts)], atol=1e-8)
    # The solution itself is on the graph: its values travel once detached.
    with pytest.raises(RuntimeError, match="Pickle tensor.detach"):
        pickle.dumps(res.y)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(res.y.detach())).data, res.y.data)


@pytest.mark.skipif(not HAVE_CLOUDPICKLE, reason="cloudpickle is not installed")
def test_lambdas_and_closures_travel_with_cloudpickle() -> None:
    import cloudpickle

    scale = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])

    def scaled(x):
        return np.sum(scale * x**3)

    objects = {
        "grad": (replay.grad(scaled), lambda o, x: o(x), lambda x: 3.0 * scale * x**2),
        "jacobian": (
            fs.prepare_jacobian(lambda x: scale[1:] * x[1:] * x[:-1], X0, replay=True),
            lambda o, x: o(x).toarray(),
            lambda x: (
                np.diag(scale[1:] * x[1:]) @ np.eye(6)[:-1]
                + np.diag(scale[1:] * x[:-1]) @ np.eye(6)[1:]
            ),
        ),
        "derivatives": (
            fo.derivatives(lambda x: np.sum(scale * x**3)),
            lambda o, x: o.hess(x),
            lambda x: np.diag(6.0 * scale * x),
        ),
    }
    for name, (obj, evaluate, truth) in objects.items():
        before = [evaluate(obj, x) for x in POINTS]
        loaded = pickle.loads(cloudpickle.dumps(obj))
        for x, result in zip(POINTS, before):
            np.testing.assert_allclose(result, truth(x), rtol=1e-12, err_msg=name)
            np.testing.assert_array_equal(evaluate(loaded, x), result, err_msg=name)


@pytest.mark.parametrize("how", PICKLERS)
def test_a_custom_root_solver_at_module_level_pickles(how: str) -> None:
    loaded = _round_trip(pk.newton_sqrt, how)
    assert loaded is pk.newton_sqrt  # by its name, as the function it wraps
    c = fd.tensor(2.0, requires_grad=True)
    x = loaded(1.0, c)
    (dc,) = fd.grad(x, c)
    assert x.item() == pytest.approx(np.sqrt(2.0), rel=1e-15)
    assert dc.item() == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-12)  # d sqrt(c) / dc
