"""funcdiff.integrate: derivatives through solve_ivp, odeint and quad.

References are independent: matrix exponentials for linear ODEs, closed forms, central
differences of SciPy's own solves at tight tolerances, and agreement between the
forward-sensitivity and adjoint modes.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate as si
import scipy.linalg as sl

import funcdiff as fd
from funcdiff.functional import hessian, hvp, jacobian, jvp
from funcdiff.integrate import odeint, quad, solve_ivp

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
REFERENCE = {"rtol": 1e-12, "atol": 1e-12}
A = np.array([[-1.0, 2.0], [-3.0, -0.5]])
Y0 = np.array([1.0, 0.5])
T_OUT = np.array([0.3, 0.7, 1.5])


def linear(t, y, a):
    return a @ y


def exact_linear(a: np.ndarray, y0: np.ndarray, ts: np.ndarray) -> np.ndarray:
    return np.stack([sl.expm(t * a) @ y0 for t in ts], axis=1)


def central(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of ``f`` (ndarray -> ndarray), shape ``f(x).shape + x.shape``."""
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = h * max(1.0, abs(x.flat[j]))
        up = f(x + e.reshape(x.shape))
        down = f(x - e.reshape(x.shape))
        cols.append((up - down) / (2 * e[j]))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(f(x)) + x.shape)


# ---------------------------------------------------------------- closed forms
FAST_CASES = {("RK45", "forward"), ("RK45", "adjoint"), ("BDF", "forward"), ("Radau", "adjoint")}
CASES = [
    pytest.param(
        method,
        mode,
        marks=() if (method, mode) in FAST_CASES or mode == "auto" else pytest.mark.slow,
    )
    for method in ("RK45", "DOP853", "BDF", "Radau", "LSODA")
    for mode in ("forward", "adjoint", "auto")
]


@pytest.mark.parametrize(("method", "mode"), CASES)
def test_linear_ode_gradients_match_the_matrix_exponential(method, mode) -> None:
    y0 = fd.tensor(Y0, requires_grad=True)
    a = fd.tensor(A, requires_grad=True)
    w = np.array([[1.0, -2.0, 0.5], [0.3, 1.0, -1.0]])
    res = solve_ivp(
        linear, (0.0, 2.0), y0, method=method, t_eval=T_OUT, args=(a,), sensitivity=mode, **TIGHT
    )
    np.testing.assert_allclose(res.y.data, exact_linear(A, Y0, T_OUT), rtol=1e-7, atol=1e-9)
    gy0, ga = fd.grad(np.sum(w * res.y), (y0, a))
    expected_y0 = sum(w[:, i] @ sl.expm(t * A) for i, t in enumerate(T_OUT))
    np.testing.assert_allclose(gy0.data, expected_y0, rtol=1e-7, atol=1e-9)

    def loss_of_a(m: np.ndarray) -> float:
        return float(np.sum(w * exact_linear(m, Y0, T_OUT)))

    np.testing.assert_allclose(ga.data, central(loss_of_a, A), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", ["forward", "adjoint"])
def test_full_jacobian_matches_the_matrix_exponential(mode) -> None:
    def outputs(y0):
        return solve_ivp(
            linear, (0.0, 1.5), y0, t_eval=T_OUT, args=(A,), sensitivity=mode, **TIGHT
        ).y

    jac = jacobian(outputs, Y0).data  # (2, 3, 2)
    for i, t in enumerate(T_OUT):
        np.testing.assert_allclose(jac[:, i, :], sl.expm(t * A), rtol=1e-7, atol=1e-9)
    jac_fwd = jacobian(outputs, Y0, strategy="forward-mode").data
    np.testing.assert_allclose(jac_fwd, jac, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("vectorize", [False, True])
def test_auto_mode_jacobian_rows_by_adjoint_then_forward(vectorize) -> None:
    # 15 states and 15 inputs: "auto" takes the adjoint (15 * 16 > 200), and switches to
    # forward sensitivities once the rows asked for would cost as much.
    rng = np.random.default_rng(0)
    a = rng.normal(size=(15, 15)) / 4 - np.eye(15)
    y0 = rng.normal(size=15)

    def outputs(x):
        return solve_ivp(lambda t, y: a @ y, (0.0, 1.0), x, t_eval=[0.5, 1.0], **TIGHT).y

    jac = jacobian(outputs, y0, vectorize=vectorize).data  # (15, 2, 15)
    for i, t in enumerate((0.5, 1.0)):
        np.testing.assert_allclose(jac[:, i, :], sl.expm(t * a), rtol=1e-7, atol=1e-9)


def test_jvp_matches_forward_sensitivities() -> None:
    v = np.array([0.3, -1.0])

    def outputs(y0):
        return solve_ivp(linear, (0.0, 1.5), y0, t_eval=T_OUT, args=(A,), **TIGHT).y

    _, tangent = jvp(outputs, Y0, v)
    expected = np.stack([sl.expm(t * A) @ v for t in T_OUT], axis=1)
    np.testing.assert_allclose(tangent.data, expected, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("mode", ["forward", "adjoint"])
def test_output_times_are_differentiated(mode) -> None:
    t_eval = fd.tensor(T_OUT, requires_grad=True)
    res = solve_ivp(linear, (0.0, 2.0), Y0, t_eval=t_eval, args=(A,), sensitivity=mode, **TIGHT)
    w = np.array([[1.0, 0.0, 2.0], [0.0, -1.0, 1.0]])
    (gt,) = fd.grad(np.sum(w * res.y), t_eval)
    y = exact_linear(A, Y0, T_OUT)
    np.testing.assert_allclose(gt.data, np.sum(w * (A @ y), axis=0), rtol=1e-7)
    assert isinstance(res.t, np.ndarray)


def test_jvp_along_output_times_and_parameters() -> None:
    def outputs(t_eval, a):
        return solve_ivp(linear, (0.0, 2.0), Y0, t_eval=t_eval, args=(a,), **TIGHT).y

    dt = np.array([1.0, -0.5, 2.0])
    da = np.array([[0.0, 1.0], [0.5, 0.0]])
    _, tangent = jvp(outputs, (T_OUT, A), (dt, da))
    y = exact_linear(A, Y0, T_OUT)
    by_a = central(lambda s: exact_linear(A + s[0] * da, Y0, T_OUT), np.zeros(1))[..., 0]
    np.testing.assert_allclose(tangent.data, (A @ y) * dt + by_a, rtol=1e-6, atol=1e-8)


def test_args_mix_zero_d_tensors_floats_and_arrays() -> None:
    def decay(t, y, k, offset, scale):
        return -k * y * scale + offset

    k = fd.tensor(0.7, requires_grad=True)
    scale = np.array([1.0, 2.0])
    res = solve_ivp(decay, (0.0, 1.0), [1.0, 2.0], t_eval=[1.0], args=(k, 0.0, scale), **TIGHT)
    (gk,) = fd.grad(np.sum(res.y), k)
    # y_j(1) = y0_j exp(-k s_j): d/dk = -s_j y0_j exp(-k s_j)
    expected = np.sum(-scale * np.array([1.0, 2.0]) * np.exp(-0.7 * scale))
    assert gk.shape == () and abs(gk.item() - expected) < 1e-8


@pytest.mark.parametrize("mode", ["forward", "adjoint"])
def test_default_output_times_are_the_solvers_and_held_fixed(mode) -> None:
    y0 = fd.tensor(Y0, requires_grad=True)
    res = solve_ivp(linear, (0.0, 1.0), y0, args=(A,), sensitivity=mode, **TIGHT)
    if mode == "adjoint":  # the state alone: SciPy's own steps
        plain = si.solve_ivp(linear, (0.0, 1.0), Y0, args=(A,), **TIGHT)
        np.testing.assert_array_equal(res.t, plain.t)
        np.testing.assert_array_equal(res.y.data, plain.y)
    w = np.cos(np.arange(2 * len(res.t))).reshape(2, -1)
    (g,) = fd.grad(np.sum(w * res.y), y0)
    expected = sum(w[:, i] @ sl.expm(t * A) for i, t in enumerate(res.t))
    np.testing.assert_allclose(g.data, expected, rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------- nonlinear, against SciPy
def lotka(t, y, p):
    prey, pred = y[0], y[1]
    return np.stack([p[0] * prey - p[1] * prey * pred, -p[2] * pred + p[3] * prey * pred])


P_LV = np.array([1.1, 0.4, 0.4, 0.1])


@pytest.mark.parametrize("mode", ["forward", "adjoint"])
def test_lotka_volterra_matches_central_differences_of_scipy(mode) -> None:
    t_eval = np.linspace(0.5, 6.0, 8)
    y0 = np.array([10.0, 5.0])
    w = np.cos(np.arange(16.0)).reshape(2, 8)

    def scipy_loss(x: np.ndarray) -> float:
        r = si.solve_ivp(
            lotka, (0, 6.0), x[:2], t_eval=t_eval, args=(x[2:],), rtol=1e-12, atol=1e-12
        )
        return float(np.sum(w * r.y))

    x = fd.tensor(np.concatenate([y0, P_LV]), requires_grad=True)
    res = solve_ivp(lotka, (0, 6.0), x[:2], t_eval=t_eval, args=(x[2:],), sensitivity=mode, **TIGHT)
    (g,) = fd.grad(np.sum(w * res.y), x)
    reference = central(scipy_loss, x.data, h=1e-5)
    np.testing.assert_allclose(g.data, reference, rtol=1e-6)


def test_forward_and_adjoint_agree_on_robertson_early_times() -> None:
    def rob(t, y, k):
        y1, y2, y3 = y
        r1, r2, r3 = k[0] * y1, k[1] * y2 * y2, k[2] * y2 * y3
        return np.stack([r3 - r1, r1 - r2 - r3, r2])

    k0 = np.array([0.04, 3e7, 1e4])
    t_eval = np.logspace(-5, 1, 7)
    grads = {}
    for mode in ("forward", "adjoint"):
        k = fd.tensor(k0, requires_grad=True)
        y0 = fd.tensor([1.0, 0.0, 0.0], requires_grad=True)
        r = solve_ivp(
            rob,
            (0.0, 10.0),
            y0,
            method="BDF",
            t_eval=t_eval,
            args=(k,),
            rtol=1e-8,
            atol=1e-10,
            sensitivity=mode,
        )
        grads[mode] = np.concatenate([g.data for g in fd.grad(np.sum(r.y**2), (y0, k))])
    scale = np.abs(grads["forward"])
    assert np.all(np.abs(grads["forward"] - grads["adjoint"]) <= 1e-5 * scale + 1e-12)


# ---------------------------------------------------------------- second order
def test_hessian_with_respect_to_parameters_matches_differences_of_gradients() -> None:
    t_eval = np.linspace(0.5, 3.0, 4)
    y0 = np.array([10.0, 5.0])

    def loss(p):
        r = solve_ivp(lotka, (0, 3.0), y0, t_eval=t_eval, args=(p,), **TIGHT)
        return np.sum(r.y**2) / 100.0

    def gradient(p: np.ndarray) -> np.ndarray:
        return jacobian(loss, p).data

    h = hessian(loss, P_LV).data
    np.testing.assert_allclose(h, h.T, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(h, central(gradient, P_LV, h=1e-5), rtol=1e-5, atol=1e-6)
    v = np.array([1.0, -0.5, 0.25, 2.0])
    _, hv = hvp(loss, P_LV, v)
    np.testing.assert_allclose(hv.data, h @ v, rtol=1e-7)


def test_hessian_in_initial_values_and_parameters_with_the_adjoint() -> None:
    def logistic(t, y, r):
        return r * y * (1.0 - y)

    def loss(x):
        res = solve_ivp(
            logistic,
            (0.0, 2.0),
            x[:1],
            t_eval=[1.0, 2.0],
            args=(x[1],),
            sensitivity="adjoint",
            **TIGHT,
        )
        return np.sum(res.y**3)

    x0 = np.array([0.2, 1.3])

    def exact(x: np.ndarray) -> float:  # y(t) = 1 / (1 + (1/y0 - 1) exp(-r t))
        ys = [1.0 / (1.0 + (1.0 / x[0] - 1.0) * np.exp(-x[1] * t)) for t in (1.0, 2.0)]
        return float(np.sum(np.array(ys) ** 3))

    def exact_gradient(x: np.ndarray) -> np.ndarray:
        return central(exact, x, h=1e-6)

    h = hessian(loss, x0).data
    np.testing.assert_allclose(h, central(exact_gradient, x0, h=1e-4), rtol=1e-5)


def test_second_derivatives_of_too_many_inputs_are_refused_clearly() -> None:
    a = -np.eye(30)

    def loss(y0):
        return np.sum(solve_ivp(lambda t, y: a @ y, (0.0, 1.0), y0, t_eval=[1.0]).y ** 2)

    with pytest.raises(NotImplementedError, match="second-order sensitivity"):
        hessian(loss, np.ones(30))


def test_second_derivative_with_respect_to_y0_of_a_linear_ode_is_zero_and_in_time_exact() -> None:
    y0 = fd.tensor(Y0, requires_grad=True)
    res = solve_ivp(linear, (0.0, 1.0), y0, t_eval=[1.0], args=(A,), **TIGHT)
    (g,) = fd.grad(np.sum(res.y**2), y0, create_graph=True)
    h = np.stack([fd.grad(g[i], y0, retain_graph=True)[0].data for i in range(2)])
    e = sl.expm(A)
    np.testing.assert_allclose(h, 2 * e.T @ e, rtol=1e-7)


# ---------------------------------------------------------------- plain inputs
def test_plain_inputs_give_scipys_result() -> None:
    ours = solve_ivp(linear, (0.0, 2.0), Y0, t_eval=T_OUT, args=(A,))
    theirs = si.solve_ivp(linear, (0.0, 2.0), Y0, t_eval=T_OUT, args=(A,))
    assert type(ours.y) is np.ndarray
    np.testing.assert_array_equal(ours.y, theirs.y)
    assert ours.nfev == theirs.nfev and ours.status == theirs.status


@pytest.mark.parametrize("method", ["BDF", "Radau", "LSODA"])
def test_implicit_methods_get_the_exact_jacobian_not_finite_differences(method) -> None:
    calls = []

    def vdp(t, y, mu):
        calls.append(np.shape(y))
        return np.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])

    res = solve_ivp(vdp, (0.0, 20.0), [2.0, 0.0], method=method, args=(10.0,), rtol=1e-6)
    assert res.success and res.njev > 0
    assert all(shape == (2,) for shape in calls)  # no vectorized finite-difference calls
    # Beyond SciPy's nfev: the shape check, and the recording of the Jacobian with its
    # check at a nearby point; finite differences would take 2 calls per Jacobian.
    assert len(calls) <= res.nfev + 6 < res.nfev + 2 * res.njev
    ref = si.solve_ivp(
        vdp, (0.0, 20.0), [2.0, 0.0], method=method, args=(10.0,), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(res.y[:, -1], ref.y[:, -1], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("mode", ["forward", "adjoint"])
def test_a_user_jacobian_is_honoured_and_solver_classes_work(mode) -> None:
    used = []

    def jac(t, y, a):
        used.append(t)
        return a

    y0 = fd.tensor(Y0, requires_grad=True)
    res = solve_ivp(
        linear,
        (0.0, 1.0),
        y0,
        method=si.BDF,
        t_eval=[1.0],
        args=(A,),
        jac=jac,
        sensitivity=mode,
        vectorized=True,
        **TIGHT,
    )
    (g,) = fd.grad(np.sum(res.y), y0)
    np.testing.assert_allclose(g.data, np.ones(2) @ sl.expm(A), rtol=1e-7)
    assert used
    plain = solve_ivp(linear, (0.0, 1.0), Y0, method="Radau", args=(A,), jac=jac)
    theirs = si.solve_ivp(linear, (0.0, 1.0), Y0, method="Radau", args=(A,), jac=jac)
    np.testing.assert_array_equal(plain.y, theirs.y)


def test_a_large_sparse_system_gets_a_sparse_jacobian() -> None:
    n = 40

    def brusselator(t, u, a, b):
        x, y = u[:n], u[n:]
        c = (n + 1) ** 2 / 50.0
        lap_x = np.diff(x, 2, prepend=a, append=a)
        lap_y = np.diff(y, 2, prepend=b / a, append=b / a)
        return np.concatenate(
            [a + x * x * y - (b + 1) * x + c * lap_x, b * x - x * x * y + c * lap_y]
        )

    grid = np.linspace(0, 1, n + 2)[1:-1]
    u0 = np.concatenate([1 + np.sin(2 * np.pi * grid), np.full(n, 3.0)])
    res = solve_ivp(
        brusselator, (0.0, 2.0), u0, method="BDF", args=(1.0, 3.0), rtol=1e-6, atol=1e-8
    )
    ref = si.solve_ivp(
        brusselator, (0.0, 2.0), u0, method="BDF", args=(1.0, 3.0), rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(res.y[:, -1], ref.y[:, -1], rtol=1e-4, atol=1e-5)
    p = fd.tensor([1.0, 3.0], requires_grad=True)
    grads = {}
    for mode in ("forward", "adjoint"):
        r = solve_ivp(
            brusselator,
            (0.0, 2.0),
            u0,
            method="BDF",
            t_eval=[1.0, 2.0],
            args=(p[0], p[1]),
            rtol=1e-8,
            atol=1e-10,
            sensitivity=mode,
        )
        grads[mode] = fd.grad(np.sum(r.y**2), p)[0].data
    np.testing.assert_allclose(grads["adjoint"], grads["forward"], rtol=1e-5)


# ---------------------------------------------------------------- bad input and failure
def test_unknown_sensitivity_raises_for_plain_and_tensor_inputs() -> None:
    for y0 in (Y0, fd.tensor(Y0, requires_grad=True)):
        with pytest.raises(ValueError, match="sensitivity"):
            solve_ivp(linear, (0.0, 1.0), y0, args=(A,), sensitivity="backsolve")


@pytest.mark.parametrize("size", [3, 1, None])
def test_wrong_shaped_fun_result_raises_at_the_call(size) -> None:
    def bad(t, y):
        return 1.0 if size is None else np.ones(size)

    with pytest.raises(ValueError, match="shape"):
        solve_ivp(bad, (0.0, 1.0), Y0)
    with pytest.raises(ValueError, match="shape"):
        solve_ivp(bad, (0.0, 1.0), fd.tensor(Y0, requires_grad=True))


def test_a_failed_solve_raises_when_differentiated_quoting_scipy() -> None:
    k = fd.tensor(1.0, requires_grad=True)
    res = solve_ivp(lambda t, y, k: k * y**2, (0.0, 2.0), [1.0], args=(k,), sensitivity="adjoint")
    assert not res.success
    with pytest.raises(RuntimeError, match="failed") as info:
        fd.grad(np.sum(res.y), k)
    assert res.message in str(info.value)


@pytest.mark.parametrize("mode", ["forward", "adjoint"])
def test_terminal_event_point_moves_with_the_inputs(mode) -> None:
    def clock_and_decay(t, y, k):
        return np.stack([np.ones_like(y[0]), -k * y[1]])

    def half(t, y, k):
        return y[1] - 0.5

    half.terminal = True
    k = fd.tensor(0.8, requires_grad=True)
    y0 = fd.tensor([0.0, 2.0], requires_grad=True)
    res = solve_ivp(
        clock_and_decay, (0.0, 10.0), y0, events=half, args=(k,), sensitivity=mode, **TIGHT
    )
    assert res.status == 1
    # The event point: y1(t*) = t* = log(2 y0[1]) / k, y2(t*) = 0.5 whatever the inputs.
    gk, gy0 = fd.grad(res.y[0, -1] + 3.0 * res.y[1, -1], (k, y0))
    assert abs(gk.item() + np.log(4.0) / 0.8**2) < 1e-7
    np.testing.assert_allclose(gy0.data, [1.0, 1.0 / (0.8 * 2.0)], rtol=1e-7, atol=1e-9)
    # Outputs at fixed times before the event need no correction.
    res = solve_ivp(clock_and_decay, (0.0, 5.0), y0, t_eval=[0.5], events=half, args=(k,), **TIGHT)
    (g,) = fd.grad(res.y[1, 0], k)
    assert abs(g.item() + 0.5 * 2.0 * np.exp(-0.4)) < 1e-8


def test_gradients_are_never_dropped() -> None:
    k = fd.tensor(1.0, requires_grad=True)
    with pytest.raises(ValueError, match="args"):
        solve_ivp(lambda t, y: -k * y, (0.0, 1.0), [1.0])
    with pytest.raises(TypeError, match="args\\[0\\]"):
        solve_ivp(lambda t, y, c: -c[0] * y, (0.0, 1.0), [1.0], args=([k],))
    with pytest.raises(TypeError, match="t_span"):
        solve_ivp(lambda t, y: -y, (0.0, k), [1.0])

    def uses_float(t, y, k):
        return -float(k) * y

    with pytest.raises(RuntimeError, match="float"):
        res = solve_ivp(uses_float, (0.0, 1.0), [1.0], args=(k,))
        fd.grad(np.sum(res.y), k)


def test_result_fields_with_tensor_inputs() -> None:
    y0 = fd.tensor(Y0, requires_grad=True)
    res = solve_ivp(linear, (0.0, 1.0), y0, args=(A,), dense_output=True, **TIGHT)
    assert isinstance(res.y, fd.Tensor) and res.y.shape == (2, len(res.t))
    np.testing.assert_allclose(res.sol(1.0), sl.expm(A) @ Y0, rtol=1e-7)
    assert isinstance(res.sol(0.5), np.ndarray)


def test_derivative_programs_are_shared_but_do_not_keep_functions_alive() -> None:
    import gc
    import weakref

    def make():
        return lambda t, y, k: -k * y

    f = make()
    for value in (0.5, 0.7):  # the second solve reuses the first one's programs
        k = fd.tensor(value, requires_grad=True)
        res = solve_ivp(f, (0.0, 1.0), [1.0], method="BDF", t_eval=[1.0], args=(k,), **TIGHT)
        (g,) = fd.grad(res.y[0, 0], k)
        assert abs(g.item() + np.exp(-value)) < 1e-8
    ref = weakref.ref(f)
    del f, res, k, g
    gc.collect()
    assert ref() is None


def test_forward_mode_result_fields_are_the_states() -> None:
    def crossing(t, y, a):
        return y[0]

    y0 = fd.tensor(Y0, requires_grad=True)
    res = solve_ivp(
        linear,
        (0.0, 3.0),
        y0,
        args=(A,),
        events=crossing,
        dense_output=True,
        sensitivity="forward",
        **TIGHT,
    )
    ref = si.solve_ivp(linear, (0.0, 3.0), Y0, args=(A,), events=crossing, **TIGHT)
    assert res.y.shape[0] == 2 and all(ye.shape[1] == 2 for ye in res.y_events)
    np.testing.assert_allclose(res.t_events[0], ref.t_events[0], rtol=1e-8)
    np.testing.assert_allclose(res.y_events[0], ref.y_events[0], atol=1e-9)
    np.testing.assert_allclose(res.sol(2.0), sl.expm(2.0 * A) @ Y0, rtol=1e-7)


# ---------------------------------------------------------------- odeint
def test_odeint_plain_is_scipys() -> None:
    t = np.linspace(0, 2, 5)
    f = lambda y, t: -0.5 * y  # noqa: E731
    np.testing.assert_array_equal(odeint(f, [1.0, 2.0], t), si.odeint(f, [1.0, 2.0], t))


def test_odeint_derivatives_match_closed_forms() -> None:
    k = fd.tensor(0.5, requires_grad=True)
    y0 = fd.tensor([2.0], requires_grad=True)
    t = fd.tensor([0.2, 1.0, 3.0], requires_grad=True)
    y = odeint(lambda y, t, k: -k * y, y0, t, args=(k,), rtol=1e-11, atol=1e-12)
    assert y.shape == (3, 1)
    w = np.array([1.0, 2.0, -1.0])
    gk, gy0, gt = fd.grad(np.sum(w * y[:, 0]), (k, y0, t))
    tt, kk = t.data, 0.5
    sol = 2.0 * np.exp(-kk * (tt - tt[0]))
    np.testing.assert_allclose(gk.item(), np.sum(w * -(tt - tt[0]) * sol), rtol=1e-7)
    np.testing.assert_allclose(gy0.data, [np.sum(w * sol / 2.0)], rtol=1e-7)
    expected_t = w * -kk * sol
    expected_t[0] = -np.sum(expected_t[1:])  # t[0] is the initial time
    np.testing.assert_allclose(gt.data, expected_t, rtol=1e-6, atol=1e-9)


def test_odeint_tfirst() -> None:
    k = fd.tensor(1.5, requires_grad=True)
    y = odeint(
        lambda t, y, k: -k * y,
        [1.0],
        np.array([0.0, 1.0]),
        args=(k,),
        tfirst=True,
        rtol=1e-11,
        atol=1e-12,
    )
    assert abs(fd.grad(y[1, 0], k)[0].item() + np.exp(-1.5)) < 1e-8


# ---------------------------------------------------------------- quad
def test_quad_gradients_follow_the_leibniz_rule() -> None:
    a = fd.tensor(0.5, requires_grad=True)
    b = fd.tensor(2.0, requires_grad=True)
    s = fd.tensor([1.5, 0.25], requires_grad=True)

    def h(x, s, c):
        return np.sin(s[0] * x) + s[1] * x**2 + c

    value, err = quad(h, a, b, args=(s, 3.0))
    assert isinstance(err, float)
    exact = (np.cos(0.75) - np.cos(3.0)) / 1.5 + 0.25 * (8 - 0.125) / 3 + 3.0 * 1.5
    assert abs(value.item() - exact) < 1e-10
    ga, gb, gs = fd.grad(value, (a, b, s))
    assert abs(ga.item() + (np.sin(0.75) + 0.25 * 0.25 + 3.0)) < 1e-10
    assert abs(gb.item() - (np.sin(3.0) + 0.25 * 4 + 3.0)) < 1e-10
    ds0 = (2.0 * np.sin(3.0) / 1.5 + np.cos(3.0) / 1.5**2) - (
        0.5 * np.sin(0.75) / 1.5 + np.cos(0.75) / 1.5**2
    )
    np.testing.assert_allclose(gs.data, [ds0, (8 - 0.125) / 3], rtol=1e-9)


def test_quad_refuses_what_it_cannot_differentiate() -> None:
    s = fd.tensor(2.0, requires_grad=True)
    value, _ = quad(lambda x, s: np.exp(-s * x), 0.0, 1.0, args=(s,))
    with pytest.raises(NotImplementedError, match="second derivatives"):
        fd.grad(value, s, create_graph=True)
    # Forward mode transposes the first-order vjp: d/ds of the integral is -(1/4 - 3/4 e^-2).
    _, tangent = jvp(
        lambda s: quad(lambda x, s: np.exp(-s * x), 0.0, 1.0, args=(s,))[0], np.array(2.0)
    )
    assert abs(tangent.item() + (0.25 - 0.75 * np.exp(-2.0))) < 1e-12
    with pytest.raises(NotImplementedError, match="weight"):
        quad(lambda x, s: s * x, 0.0, 1.0, args=(s,), weight="cos", wvar=1.0)


def test_quad_infinite_limit_and_plain_inputs() -> None:
    assert quad(lambda x: np.exp(-x), 0.0, np.inf) == si.quad(lambda x: np.exp(-x), 0.0, np.inf)
    s = fd.tensor(2.0, requires_grad=True)
    a = fd.tensor(0.0, requires_grad=True)
    value, _ = quad(lambda x, s: np.exp(-s * x), a, np.inf, args=(s,))
    gs, ga = fd.grad(value, (s, a))
    assert abs(gs.item() + 0.25) < 1e-9 and abs(ga.item() + 1.0) < 1e-12
