"""funcdiff.replay: the same numbers as eager, for every rule, and never a wrong branch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support.problems import eager_value_and_grad

import funcdiff as fd
import funcdiff.replay as replay
from funcdiff import functional
from funcdiff.functional import hessian as eager_hessian
from funcdiff.functional import jacobian as eager_jacobian
from funcdiff.replay import ReplayError, ReplayGuardError
from funcdiff.rules import all_rules
from funcdiff.testing import flat_case

CASES = [(r, i, c) for r in all_rules() if r.differentiable for i, c in enumerate(r.cases)]


def _loss(rule, case, seed):
    """The case's outputs, weighted and summed: a scalar function of one flat vector."""
    vector, points = flat_case(rule, case, seed)

    def f(x):
        out = vector(x)
        return np.sum(out * np.cos(1.3 * np.arange(np.size(out)) + 0.4))

    return f, points


@pytest.mark.parametrize("rule, index, case", CASES, ids=[f"{r.name}-{i}" for r, i, _ in CASES])
def test_replay_equals_eager_for_every_rule(rule, index, case) -> None:
    f, points = _loss(rule, case, 5 + index)
    if points[0].size == 0:
        vg = replay.value_and_grad(f)
        value, g = vg(points[0])
        assert g.shape == (0,)
        assert value == pytest.approx(eager_value_and_grad(f, points[0])[0], nan_ok=True)
        return
    vg = replay.value_and_grad(f)
    for x in [*points, points[1], points[2]]:  # the last calls run the compiled program
        value, g = vg(x)
        ev, eg = eager_value_and_grad(f, x)
        assert value == pytest.approx(ev, rel=1e-12, abs=1e-12, nan_ok=True)
        scale = max(1.0, np.abs(eg).max(initial=0.0))
        np.testing.assert_allclose(g, eg, rtol=1e-10, atol=1e-12 * scale)
    info = vg.cache_info()
    assert info["replays"] >= 1 or info["guard_failures"] >= 1


def test_a_program_is_recorded_once_and_compiled() -> None:
    vg = replay.value_and_grad(lambda x: np.sum(np.tanh(x) ** 2))
    rng = np.random.default_rng(0)
    for _ in range(100):
        x = rng.standard_normal(5)
        value, g = vg(x)
        np.testing.assert_allclose(g, 2 * np.tanh(x) * (1 - np.tanh(x) ** 2), rtol=1e-13)
    assert vg.trace_count == 1
    program = vg._cache[next(iter(vg._cache))][0]
    assert program.info["compiled"]


def test_both_branches_get_their_own_program() -> None:
    def f(x):
        if np.sum(x) > 0:
            return np.sum(x**2)
        return np.sum(x**3)

    vg = replay.value_and_grad(f)
    for _ in range(3):
        assert vg(np.ones(3)) == (3.0, pytest.approx(np.full(3, 2.0)))
        value, g = vg(-np.ones(3))
        assert value == -3.0 and np.allclose(g, 3.0)
    assert vg.trace_count == 2 and vg.cache_info()["programs"] == 2


def test_a_loop_whose_count_changes_retraces_then_runs_eagerly() -> None:
    def newton_sqrt(a):
        x = a * 1.0
        while np.abs(x * x - a).max() > 1e-12:  # the count depends on a
            x = 0.5 * (x + a / x)
        return np.sum(x)

    vg = replay.value_and_grad(newton_sqrt, max_traces=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for a in (4.0, 9.0, 100.0, 1e4, 2.0, 1e6):
            value, g = vg(np.array([a]))
            assert value == pytest.approx(np.sqrt(a), rel=1e-12)
            assert g[0] == pytest.approx(0.5 / np.sqrt(a), rel=1e-9)
    assert vg.trace_count == 2
    assert vg.cache_info()["eager_calls"] >= 1
    assert any("running eagerly" in str(w.message) for w in caught)


def test_raise_on_another_branch() -> None:
    vg = replay.value_and_grad(
        lambda x: np.sum(x) if x[0] > 0 else np.sum(-x), on_guard_failure="raise"
    )
    vg(np.ones(2))
    with pytest.raises(ReplayGuardError, match="branch"):
        vg(-np.ones(2))


def test_shape_and_dtype_and_scalar_arguments_are_part_of_the_key() -> None:
    vg = replay.value_and_grad(lambda x, s: s * np.sum(x**2))
    assert vg(np.ones(3), 2.0) == (6.0, pytest.approx(np.full(3, 4.0)))
    assert vg(np.ones(4), 2.0)[0] == 8.0  # another shape: never the first program
    assert vg(np.ones(3), 3.0)[0] == 9.0  # another scalar: another program
    value, g = vg(np.ones(3, dtype=np.float32), 2.0)
    assert g.dtype == np.float32
    assert vg.cache_info()["signatures"] == 4


def test_array_arguments_that_are_not_differentiated_stay_inputs() -> None:
    vg = replay.value_and_grad(lambda x, w: np.sum(w * x**2))
    vg(np.ones(2), np.array([1.0, 2.0]))
    value, g = vg(np.ones(2), np.array([3.0, 5.0]))
    assert value == 8.0 and np.allclose(g, [6.0, 10.0])
    assert vg.trace_count == 1


def test_tuple_argnums_and_unused_inputs() -> None:
    vg = replay.value_and_grad(lambda x, y, z: np.sum(x * y), argnums=(0, 1, 2))
    value, (gx, gy, gz) = vg(np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.ones(2))
    assert value == 11.0 and np.allclose(gx, [3, 4]) and np.allclose(gy, [1, 2])
    assert np.array_equal(gz, np.zeros(2))


def test_results_do_not_alias_inputs_or_each_other_across_calls() -> None:
    vg = replay.value_and_grad(lambda x: np.sum(x))
    x = np.array([1.0, 2.0])
    g1 = vg(x)[1]
    g2 = vg(x)[1]
    g1[0] = 100.0
    assert g2[0] == 1.0 and x[0] == 1.0
    ident = replay.jacobian(lambda x: x[:2])
    for _ in range(4):
        out = ident(x)
    out[0, 0] = -1.0
    assert ident(x)[0, 0] == 1.0


def test_inputs_are_never_modified() -> None:
    def f(x):
        y = x * 1.0
        y[0] = 5.0
        y += x
        return np.sum(y**2)

    vg = replay.value_and_grad(f)
    x = np.array([1.0, 2.0, 3.0])
    for _ in range(5):
        value, g = vg(x)
    assert np.array_equal(x, [1.0, 2.0, 3.0])
    # y = [5 + x0, 2 x1, 2 x2]
    assert value == pytest.approx(36 + 16 + 36) and np.allclose(g, [12.0, 16.0, 24.0])


def test_validation_catches_computation_funcdiff_cannot_see() -> None:
    def hidden(x):
        return np.sum(x * x.data)  # .data is a constant to funcdiff: baked in

    with pytest.raises(ReplayError, match="cannot see"):
        replay.value_and_grad(hidden)(np.array([1.0, 2.0]))
    rng = np.random.default_rng(0)

    def noisy(x):
        return np.sum(x * rng.standard_normal(2))

    with pytest.raises(ReplayError):
        replay.value_and_grad(noisy)(np.array([1.0, 2.0]))


def test_jacobian_hessian_and_products_match_eager() -> None:
    def f(x):
        return np.concatenate([np.sin(x) * x[::-1], np.sum(x**3, keepdims=True)])

    def s(x):
        return np.sum(np.exp(x[:-1]) * x[1:] ** 2)

    rng = np.random.default_rng(1)
    J, H = replay.jacobian(f), replay.hessian(s)
    hv, vj, jv = replay.hvp(s), replay.vjp(f), replay.jvp(f)
    for _ in range(4):
        x, u, v = rng.standard_normal(4), rng.standard_normal(5), rng.standard_normal(4)
        dense_j = eager_jacobian(f, fd.tensor(x)).data
        dense_h = eager_hessian(s, fd.tensor(x)).data
        np.testing.assert_allclose(J(x), dense_j, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(H(x), dense_h, rtol=1e-12, atol=1e-12)
        value, hvx = hv(x, v)
        np.testing.assert_allclose(hvx, dense_h @ v, rtol=1e-10, atol=1e-12)
        y, ux = vj(x, u)
        np.testing.assert_allclose(ux, u @ dense_j, rtol=1e-10, atol=1e-12)
        y, jx = jv(x, v)
        np.testing.assert_allclose(jx, dense_j @ v, rtol=1e-10, atol=1e-12)
    assert J.trace_count == H.trace_count == hv.trace_count == 1


def test_decorator_forms_and_bad_input() -> None:
    @replay.grad
    def g(x):
        return np.sum(x**2)

    @replay.value_and_grad(argnums=1)
    def h(x, y):
        return np.sum(x * y)

    assert np.allclose(g(np.array([1.0, 2.0])), [2.0, 4.0])
    assert h(np.ones(2), np.ones(2))[1].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="argnums"):
        replay.grad(lambda x: x, argnums="0")
    with pytest.raises(TypeError, match="callable"):
        replay.grad(3)
    with pytest.raises(ValueError, match="one number"):
        replay.grad(lambda x: x * 2)(np.ones(2))
    with pytest.raises(TypeError, match="argnums"):
        replay.grad(lambda x: np.sum(x), argnums=2)(np.ones(2))
    with pytest.raises(ValueError, match="on_guard_failure"):
        replay.grad(lambda x: x, on_guard_failure="ignore")


def test_once_differentiable_functions_are_refused_at_trace_time() -> None:
    class Square(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @fd.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    with pytest.raises(RuntimeError, match="once_differentiable"):
        replay.hessian(lambda x: np.sum(Square.apply(x)))(np.ones(2))


def test_hooks_are_refused_at_trace_time() -> None:
    def f(x):
        y = x * 2.0
        y.register_hook(lambda g: g * 10)
        return np.sum(y)

    with pytest.raises(replay.TraceError, match="register_hook"):
        replay.grad(f)(np.ones(2))
    x = fd.tensor(np.ones(2), requires_grad=True)
    (g,) = fd.grad(f(x), x)  # eagerly the hook runs: 2 * 10
    assert g.data.tolist() == [20.0, 20.0]


def test_jacobian_of_several_inputs_and_outputs_at_new_points() -> None:
    def f(x, y):
        return x * y, np.exp(x) * y - np.sum(x * y)

    J = replay.jacobian(f, argnums=(0, 1))
    rng = np.random.default_rng(3)
    for _ in range(4):
        x, y = rng.standard_normal(3), rng.standard_normal(3)
        got = J(x, y)
        want = eager_jacobian(f, (fd.tensor(x), fd.tensor(y)), vectorize=True)
        for i in range(2):
            for j in range(2):
                np.testing.assert_allclose(got[i][j], want[i][j].data, rtol=1e-12, atol=1e-12)


def test_concurrent_replays_agree_with_eager() -> None:
    import threading

    vg = replay.value_and_grad(lambda x: np.sum(np.sin(x) * x**2))
    vg(np.ones(4))  # recorded once, in this thread
    errors: list = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(50):
            x = rng.standard_normal(4)
            value, g = vg(x)
            if not np.allclose(g, np.cos(x) * x**2 + 2 * x * np.sin(x), rtol=1e-12):
                errors.append((x, g))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and vg.trace_count == 1


def test_ufunc_out_argument_is_replayed_in_place() -> None:
    def f(x):
        v = x * 1.0
        np.multiply(v, np.tanh(x), out=v)  # v *= tanh(x)
        return np.sum(v)

    vg = replay.value_and_grad(f)
    for x in (np.array([0.5, 1.0]), np.array([1.5, 2.0]), np.array([-1.0, 0.3])):
        value, g = vg(x)
        assert value == pytest.approx(np.sum(x * np.tanh(x)), rel=1e-13)
        np.testing.assert_allclose(g, np.tanh(x) + x * (1 - np.tanh(x) ** 2), rtol=1e-12)


def test_complex_inputs_replay_with_torchs_convention() -> None:
    g = replay.grad(lambda z: np.sum(np.abs(z) ** 2))  # dL/dx + i dL/dy = 2 z
    for z in (np.array([1 + 1j, 2.0]), np.array([0.5 - 1j, 1j]), np.array([3 + 0j, -1j])):
        np.testing.assert_allclose(g(z), 2 * z, rtol=1e-14)
    assert g.trace_count == 1


def test_complex_jacobians_and_products_match_eager() -> None:
    z = np.array([1 + 2j, 0.5 - 1j, 0.3 + 0.1j])
    u = np.array([1 + 0j, 1j, 2 + 0j])

    def tall(z):
        return np.concatenate([z * z, np.exp(z), np.conj(z)])

    J, vj, jv = replay.jacobian(tall), replay.vjp(lambda z: z * z), replay.jvp(lambda z: z * z)
    for k in range(4):
        zz = z + 0.1 * k
        np.testing.assert_allclose(J(zz), eager_jacobian(tall, fd.tensor(zz), vectorize=True).data)
        ev = functional.vjp(lambda z: z * z, fd.tensor(zz), fd.tensor(u))[1].data
        np.testing.assert_allclose(vj(zz, u)[1], ev, rtol=1e-13)
        ej = functional.jvp(lambda z: z * z, fd.tensor(zz), fd.tensor(u))[1].data
        np.testing.assert_allclose(jv(zz, u)[1], ej, rtol=1e-13)


def test_scatters_are_added_into_the_sum_they_feed() -> None:
    """The backward of ``x[1:]`` and ``x[:-1]`` (scatters into zeros, each added to
    another cotangent) runs as a copy with the values added in place, in generated code,
    and the Hessian equals eager's to the bit."""
    from funcdiff.replay import _codegen

    def rosen(v):
        return np.sum(100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2)

    merged = []
    original = _codegen.accumulate_scatters

    def spy(code, outputs, lower):
        new = original(code, outputs, lower)
        merged.extend(ins for ins in new if ins[1] is _codegen.scatter_added)
        return new

    hessian = replay.hessian(rosen, compile=False)
    rng = np.random.default_rng(3)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_codegen, "accumulate_scatters", spy)
        for _ in range(5):
            x = rng.uniform(-1.0, 2.0, 30)
            want = fd.functional.hessian(rosen, fd.tensor(x)).data
            np.testing.assert_array_equal(hessian(x), want)
    assert len(merged) == 2


@pytest.mark.parametrize(
    ("total", "values", "index", "shape"),
    [
        (np.arange(12.0).reshape(3, 4), np.ones((3, 3)), (slice(None), slice(1, None)), (3, 4)),
        (np.arange(4.0), np.array(5.0), (2,), (4,)),  # an int index: a scalar, not a view
        (np.arange(4.0), np.ones(4), (slice(None, None, -1),), (4,)),
        (np.float32(2.0) * np.ones(4, np.float32), np.ones(2), (slice(0, 2),), (4,)),
        (np.arange(12.0).reshape(4, 3), np.ones((2, 3)), (slice(0, 2),), (4,)),  # batch axes
        (np.array(1.5), np.ones(2), (slice(1, 3),), (4,)),  # the total broadcasts
        (np.arange(6.0).reshape(2, 3), np.ones((1, 2, 3)), (None,), (2, 3)),
    ],
    ids=["slices", "ints", "reversed", "float32-total", "batch-axes", "broadcast", "newaxis"],
)
def test_scatter_added_equals_the_scatter_plus_the_total(total, values, index, shape) -> None:
    from funcdiff.replay._codegen import scatter_added
    from funcdiff.rules.indexing import index_add

    want = index_add(values, index, shape) + total
    before = np.array(total, copy=True)
    got = scatter_added(total, values, index, shape)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(total, before)  # the total is not written
