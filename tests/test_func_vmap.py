"""``funcdiff.func.vmap``: semantics, errors, compositions and chunks, against explicit
loops over the examples, closed forms and ``torch.func.vmap`` where torch is installed."""

from __future__ import annotations

import math
import tracemalloc
import warnings
from typing import Any

import numpy as np
import pytest

import funcdiff as fd
from funcdiff.func import grad, hessian, jacfwd, jacrev, vmap
from funcdiff.func._batching import VmapFallbackWarning
from funcdiff.functional import jacobian

RNG = np.random.default_rng(31)


def loop(f: Any, *args: Any, dims: tuple) -> np.ndarray:
    """The examples one by one (``dims`` per argument, None: shared), stacked on axis 0."""
    size = next(np.shape(a)[d] for a, d in zip(args, dims) if d is not None)
    return np.stack(
        [
            f(*[a if d is None else np.take(a, b, axis=d) for a, d in zip(args, dims)])
            for b in range(size)
        ]
    )


# ---------------------------------------------------------------- in_dims and out_dims
def test_in_dims_ints_negative_none_and_scalars() -> None:
    x = RNG.normal(size=(3, 4))
    w = RNG.normal(size=4)
    f = lambda x, w, c: np.sum(np.sin(x) * w) + c  # noqa: E731
    expected = loop(lambda x: f(x, w, 2.0), x, dims=(0,))
    assert np.allclose(vmap(f, in_dims=(0, None, None))(x, w, 2.0), expected)
    assert np.allclose(vmap(f, in_dims=(-1, None, None))(x.T.copy(), w, 2.0), expected)


def test_in_dims_follow_nested_arguments() -> None:
    params = {"w": RNG.normal(size=(5, 2)), "b": RNG.normal(size=2)}
    xs = [RNG.normal(size=(4, 5)), RNG.normal(size=(5, 4))]

    def f(p: dict, pair: list) -> Any:
        return np.tanh(pair[0] @ p["w"] + p["b"]) * np.sum(pair[1])

    got = vmap(f, in_dims=(None, [0, 1]))(params, xs)
    want = np.stack([f(params, [xs[0][b], xs[1][:, b]]) for b in range(4)])
    assert got.shape == (4, 2) and np.allclose(got, want)
    got = vmap(f, in_dims=({"w": None, "b": None}, [0, -1]))(params, xs)
    assert np.allclose(got, want)


def test_out_dims_place_the_batch_and_broadcast_unbatched_outputs() -> None:
    x = RNG.normal(size=(3, 4))

    def f(x: Any) -> Any:
        return np.outer(x, x[:2]), np.ones(2), 7.0

    a, ones, seven = vmap(f, out_dims=(-1, 0, 0))(x)
    assert a.shape == (4, 2, 3)
    assert np.allclose(a, np.stack([np.outer(r, r[:2]) for r in x], axis=-1))
    assert ones.shape == (3, 2) and np.all(ones == 1.0)
    assert np.array_equal(seven, np.full(3, 7.0))
    ones.fill(0.0)  # a broadcast output is the caller's own array
    single = vmap(lambda x: np.sum(x * x), out_dims=(0,))(x)  # torch.func's form
    assert np.allclose(single, (x * x).sum(1))
    same = vmap(lambda x: (np.sum(x), np.arange(3.0)), out_dims=(0, None))(x)
    assert np.array_equal(same[1], np.arange(3.0)) and np.allclose(same[0], x.sum(1))


def test_nested_vmap_with_different_in_dims_is_a_pairwise_matrix() -> None:
    a, b = RNG.normal(size=(4, 3)), RNG.normal(size=(5, 3))
    dist = lambda x, y: np.sqrt(np.sum((x - y) ** 2))  # noqa: E731
    got = vmap(vmap(dist, in_dims=(None, 0)), in_dims=(0, None))(a, b)
    want = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    assert got.shape == (4, 5) and np.allclose(got, want)
    # The inner vmap maps the other argument's last axis.
    got = vmap(vmap(dist, in_dims=(0, None)), in_dims=(None, -1))(a, b.T.copy())
    assert np.allclose(got, want.T)


# ---------------------------------------------------------------- NumPy 2 semantics
def test_solve_treats_b_as_a_vector_only_when_it_is_one_dimensional_per_example() -> None:
    a = RNG.normal(size=(4, 3, 3)) + 3 * np.eye(3)
    b = RNG.normal(size=(4, 3))
    assert np.allclose(vmap(np.linalg.solve)(a, b), np.linalg.solve(a, b[..., None])[..., 0])
    one = RNG.normal(size=3)  # one vector for a batch of matrices
    got = vmap(np.linalg.solve, in_dims=(0, None))(a, one)
    assert np.allclose(got, loop(np.linalg.solve, a, one, dims=(0, None)))
    stacks = RNG.normal(size=(4, 2, 3, 3)) + 3 * np.eye(3)  # a stack per example, b a vector
    got = vmap(np.linalg.solve)(stacks, b)
    assert np.allclose(got, loop(np.linalg.solve, stacks, b, dims=(0, 0)))


@pytest.mark.parametrize(
    "f",
    [
        lambda a, b: a @ b,
        lambda a, b: b @ a,
        lambda a, b: np.matmul(a[:3], b),
    ],
)
def test_matmul_promotes_vectors_per_example(f: Any) -> None:
    vec, mat = RNG.normal(size=(5, 3)), RNG.normal(size=(5, 3, 3))
    assert np.allclose(vmap(f)(vec, mat), loop(f, vec, mat, dims=(0, 0)))
    assert np.allclose(vmap(f)(vec, vec), loop(f, vec, vec, dims=(0, 0)))
    assert np.allclose(vmap(f, (0, None))(vec, mat[0]), loop(f, vec, mat[0], dims=(0, None)))


@pytest.mark.parametrize(
    "f",
    [
        np.sum,
        np.cumsum,
        np.argmax,
        lambda x: np.max(x, axis=-1, keepdims=True),
        lambda x: np.mean(x, axis=(0, 1)),
        lambda x: x.reshape(-1, 2, order="F"),
        lambda x: x.T,
        lambda x: x[np.array([[0], [1]]), :, np.array([1, 0, 1])],
        lambda x: x[..., 1],
        lambda x: np.concatenate([x, np.ones((2, 3, 4))], axis=-1),
        lambda x: np.einsum("ijk,k->ij", x, np.arange(4.0)),
    ],
)
def test_axes_are_those_of_one_example(f: Any) -> None:
    x = RNG.normal(size=(3, 2, 3, 4))
    assert np.allclose(vmap(f)(x), loop(f, x, dims=(0,)))


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "f",
    [
        lambda x: x if np.sum(x) > 0 else -x,
        lambda x: float(x[0]),
        lambda x: x[0].item(),
        lambda x: math.sin(x[0]),
        lambda x: np.asarray(x),
        lambda x: np.sum(np.ones(int(x[0]))),
    ],
)
def test_control_flow_on_a_batched_value_raises(f: Any) -> None:
    x = RNG.uniform(1, 2, size=(3, 2))
    with pytest.raises(RuntimeError, match="vmap") as err:
        vmap(f)(x)
    assert "batch" in str(err.value)
    # The same code on a value that is the same for every example runs.
    vmap(lambda i, y: f(y) * 0 + i, in_dims=(0, None))(np.arange(3.0), x[0])


def test_in_place_writes_of_batched_values_into_unbatched_arrays_raise() -> None:
    x = RNG.normal(size=(3, 2))

    def into_item(x: Any) -> Any:
        out = np.zeros(2)
        out[0] = x[0]
        return out

    def augmented(x: Any) -> Any:
        out = np.zeros(2)
        out += x
        return out

    def copied(x: Any) -> Any:
        out = np.zeros(2)
        np.copyto(out, x)
        return out

    for f in (into_item, augmented, copied):
        with pytest.raises((RuntimeError, ValueError)):
            vmap(f)(x)


def test_writes_into_a_buffer_made_from_a_batched_value_work_also_under_grad() -> None:
    x = RNG.normal(size=(3, 4))

    def f(x: Any) -> Any:
        out = np.zeros_like(x)
        out[1:] = x[:-1] ** 2
        out += x
        return out

    assert np.allclose(vmap(f)(x), loop(f, x, dims=(0,)))

    def scatter(x: Any) -> Any:  # advanced indices apart: NumPy moves their axes first
        out = np.zeros((3, 2, 4)) * x[0]
        out[np.array([0, 2]), :, np.array([1, 3])] = x[:2, None] * 2.0
        out[np.array([1]), :, np.array([0])] = 7.0
        return out

    xs = RNG.normal(size=(5, 4))
    assert np.allclose(vmap(scatter)(xs), loop(scatter, xs, dims=(0,)))
    w = RNG.normal(size=4)
    g = vmap(grad(lambda w, x: np.sum(f(x) * w)), in_dims=(None, 0))(w, x)
    assert np.allclose(g, loop(f, x, dims=(0,)))


def test_randomness() -> None:
    x = np.zeros((4, 3))
    with pytest.raises(RuntimeError, match="random"):
        vmap(lambda x: x + np.random.normal(size=x.shape))(x)  # noqa: NPY002
    gen = np.random.default_rng(0)
    with pytest.raises(RuntimeError, match="vmap"):
        vmap(lambda x: gen.normal(loc=x))(x)
    np.random.seed(0)  # noqa: NPY002
    same = vmap(lambda x: x + np.random.normal(size=x.shape), randomness="same")(x)  # noqa: NPY002
    assert np.allclose(same, same[0])
    different = vmap(lambda x: x + np.random.normal(size=x.shape), randomness="different")(x)  # noqa: NPY002
    assert not np.allclose(different, different[0])


def test_bad_arguments_raise_value_errors() -> None:
    x, y = np.ones((3, 2)), np.ones((4, 2))
    f = lambda a, b: a + b  # noqa: E731
    with pytest.raises(ValueError, match="in_dims") as err:
        vmap(f)(x, y)
    assert "3" in str(err.value) and "4" in str(err.value)
    with pytest.raises(ValueError, match="in_dims"):
        vmap(f, in_dims=(0,))(x, x)
    with pytest.raises(ValueError, match="in_dims"):
        vmap(f, in_dims=(0, [0, 0]))(x, x)
    with pytest.raises(ValueError, match="out of range"):
        vmap(f, in_dims=(2, 0))(x, x)
    with pytest.raises(ValueError, match="in_dims=None"):
        vmap(f)(x, 1.0)
    with pytest.raises(ValueError, match="maps no argument"):
        vmap(f, in_dims=None)(x, x)
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="chunk_size"):
            vmap(f, chunk_size=bad)
    with pytest.raises(ValueError, match="out_dims"):
        vmap(lambda a: a, out_dims=None)(x)
    with pytest.raises(ValueError, match="randomness"):
        vmap(f, randomness="sometimes")
    with pytest.raises(TypeError, match="func"):
        vmap(3)


def test_vmap_inside_a_replay_or_sparse_trace_is_refused_with_a_clear_error() -> None:
    import funcdiff.replay as replay
    import funcdiff.sparse as fs

    x, w = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    total = lambda w: np.sum(vmap(lambda w, x: np.sin(x @ w), in_dims=(None, 0))(w, x))  # noqa: E731
    with pytest.raises(RuntimeError, match="vmap cannot run while"):
        replay.value_and_grad(total)(w)
    with pytest.raises(RuntimeError, match="vmap cannot run while"):
        fs.prepare_jacobian(lambda w: vmap(np.sin)(w * x), w)
    # Mapping a replayed gradient of one example works.
    g = replay.grad(lambda w, x: np.sin(x @ w))
    assert np.allclose(np.stack([g(w, r) for r in x]), np.cos(x @ w)[:, None] * x)


def test_a_batched_value_prints_as_a_batch() -> None:
    seen: list[str] = []

    def f(x: Any) -> Any:
        t = fd.tensor(np.ones(2), requires_grad=True) * x
        seen.extend([repr(x), repr(t)])
        return x

    with warnings.catch_warnings():
        warnings.simplefilter("error", VmapFallbackWarning)
        vmap(f)(np.ones((3, 2)))
    assert seen == [
        "Batched(size=3, shape=(2,), dtype=float64)",
        "tensor(Batched(size=3, shape=(2,), dtype=float64), grad_fn=<MultiplyBackward>)",
    ]


# ---------------------------------------------------------------- the fallback loop
def _top_two(x: Any) -> Any:
    """A third party's NEP 18 function: dispatches to ``__array_function__``."""
    if type(x) is not np.ndarray and hasattr(type(x), "__array_function__"):
        return x.__array_function__(_top_two, (type(x),), (x,), {})
    return np.sort(x)[-2:].sum()


def test_a_function_without_batching_rule_loops_and_warns_once_per_call() -> None:
    x = RNG.normal(size=(5, 4))
    f = lambda x: np.nanmedian(x) + np.nanmedian(x * 2) + _top_two(x)  # noqa: E731
    for chunk in (None, 2):  # once per call, also when the call runs in chunks
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = vmap(f, chunk_size=chunk)(x)
        names = sorted(
            str(w.message).split()[1] for w in caught if w.category is VmapFallbackWarning
        )
        assert names == ["numpy.nanmedian", f"{__name__}._top_two"]
        assert np.allclose(got, loop(f, x, dims=(0,)))


def test_an_empty_batch() -> None:
    empty = np.empty((0, 3))
    assert vmap(np.sin)(empty).shape == (0, 3)
    assert vmap(grad(lambda x: np.sum(x**2)))(empty).shape == (0, 3)
    with pytest.raises(ValueError, match="empty"):
        vmap(np.nanmedian)(empty)


def test_options_a_rule_refuses_run_through_numpy_per_example() -> None:
    x = RNG.normal(size=(3, 4))
    f = lambda v: np.pad(v, 2, mode="reflect")  # noqa: E731  (no derivative rule)
    with pytest.warns(VmapFallbackWarning, match="numpy.pad"):
        got = vmap(f)(x)
    assert np.array_equal(got, loop(f, x, dims=(0,)))


def test_composites_and_batched_rules_do_not_warn() -> None:
    x = RNG.normal(size=(5, 4))
    f = lambda x: np.median(x) + np.linalg.norm(x) + np.std(np.tanh(x) @ np.ones((4, 2)))  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error", VmapFallbackWarning)
        assert np.allclose(vmap(f)(x), loop(f, x, dims=(0,)))


# ---------------------------------------------------------------- chunks
def test_chunk_size_gives_the_same_results() -> None:
    x, w = RNG.normal(size=(7, 3)), RNG.normal(size=3)
    f = lambda w, x: (np.sin(x * w), np.sum(x))  # noqa: E731
    whole = vmap(f, in_dims=(None, 0), out_dims=(1, 0))(w, x)
    for chunk in (1, 3, 7, 10):
        parts = vmap(f, in_dims=(None, 0), out_dims=(1, 0), chunk_size=chunk)(w, x)
        assert all(np.allclose(a, b) for a, b in zip(parts, whole))


def test_chunk_size_bounds_the_peak_memory() -> None:
    x = RNG.normal(size=(64, 300))
    f = lambda x: np.sum(np.outer(x, x) ** 2)  # noqa: E731  (300 x 300 per example)

    def peak(chunk: int | None) -> int:
        tracemalloc.start()
        vmap(f, chunk_size=chunk)(x)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    assert np.allclose(vmap(f, chunk_size=4)(x), vmap(f)(x))
    assert peak(4) * 6 < peak(None)


# ---------------------------------------------------------------- compositions
def _mlp_loss(params: list, x: Any, y: Any) -> Any:
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    return np.sum((h @ w2 + b2 - y) ** 2)


def _mlp_problem(batch: int = 6) -> tuple[list, np.ndarray, np.ndarray]:
    params = [
        RNG.normal(size=(4, 8)) / 2,
        RNG.normal(size=8),
        RNG.normal(size=(8, 3)) / 3,
        RNG.normal(size=3),
    ]
    return params, RNG.normal(size=(batch, 4)), RNG.normal(size=(batch, 3))


def test_per_sample_gradients_of_shared_parameters() -> None:
    params, x, y = _mlp_problem()
    got = vmap(grad(_mlp_loss), in_dims=(None, 0, 0))(params, x, y)
    for k, g in enumerate(got):
        want = np.stack([grad(_mlp_loss)(params, x[b], y[b])[k] for b in range(len(x))])
        assert g.shape == (len(x), *params[k].shape) and np.allclose(g, want)
    # Their sum is the gradient of the summed loss.
    total = grad(lambda p: sum(_mlp_loss(p, x[b], y[b]) for b in range(len(x))))(params)
    assert all(np.allclose(g.sum(0), t) for g, t in zip(got, total))


def test_vmap_of_jacobians_and_hessians() -> None:
    params, x, _ = _mlp_problem()
    w1, b1, w2, b2 = params
    mlp = lambda x: np.tanh(x @ w1 + b1) @ w2 + b2  # noqa: E731
    closed = np.stack([(w2.T * (1 - np.tanh(r @ w1 + b1) ** 2)) @ w1.T for r in x])
    assert np.allclose(vmap(jacrev(mlp))(x), closed)
    assert np.allclose(vmap(jacfwd(mlp))(x), closed)
    w = RNG.normal(size=4)
    labels = (RNG.uniform(size=len(x)) > 0.5).astype(float)
    logistic = lambda w, x, y: np.logaddexp(0.0, x @ w) - y * (x @ w)  # noqa: E731
    s = 1 / (1 + np.exp(-(x @ w)))
    want = (s * (1 - s))[:, None, None] * x[:, :, None] * x[:, None, :]
    assert np.allclose(vmap(hessian(logistic), in_dims=(None, 0, 0))(w, x, labels), want)


def test_transforms_of_a_vmapped_function() -> None:
    x, w = RNG.normal(size=(5, 3)), RNG.normal(size=3)
    f = lambda w, x: np.sin(x @ w) ** 2  # noqa: E731
    total = lambda w: np.sum(vmap(f, in_dims=(None, 0))(w, x))  # noqa: E731
    closed = (np.sin(2 * (x @ w))[:, None] * x).sum(0)
    assert np.allclose(grad(total)(w), closed)
    assert np.allclose(jacfwd(total)(w), closed)
    assert np.allclose(hessian(total)(w), sum(hessian(f)(w, r) for r in x))
    per_point = lambda x: vmap(f, in_dims=(None, 0))(w, x)  # noqa: E731
    diag = np.sin(2 * (x @ w))[:, None] * w
    for transform in (jacrev, jacfwd):
        jac = transform(per_point)(x)
        assert jac.shape == (5, 5, 3)
        assert np.allclose(jac[np.arange(5), np.arange(5)], diag)
        assert np.allclose(jac.sum(1), diag)  # examples do not interact


def test_vmap_over_funcdiff_grad_and_functional_with_leaves_made_inside() -> None:
    x, w = RNG.normal(size=(4, 3)), RNG.normal(size=3)

    def per_example(x: Any) -> Any:
        leaf = fd.tensor(w, requires_grad=True)
        (g,) = fd.grad(np.sum(np.exp(leaf * x)), leaf)
        return g.data + jacobian(lambda v: np.tanh(v * x), fd.tensor(w)).data.sum(0)

    want = np.exp(w * x) * x + (1 - np.tanh(w * x) ** 2) * x
    assert np.allclose(vmap(per_example)(x), want)


def test_vmap_of_vmap_of_grad() -> None:
    ws, x = RNG.normal(size=(2, 3)), RNG.normal(size=(4, 3))
    f = lambda w, x: np.sum(np.cos(w * x))  # noqa: E731
    got = vmap(vmap(grad(f), in_dims=(None, 0)), in_dims=(0, None))(ws, x)
    assert got.shape == (2, 4, 3)
    assert np.allclose(got, -np.sin(ws[:, None, :] * x[None]) * x[None])


def test_against_torch_func() -> None:
    torch = pytest.importorskip("torch")
    from torch.func import grad as tgrad
    from torch.func import jacrev as tjacrev
    from torch.func import vmap as tvmap

    params, x, y = _mlp_problem()
    got = vmap(grad(_mlp_loss), in_dims=(None, 0, 0))(params, x, y)

    def torch_loss(p: list, x: Any, y: Any) -> Any:
        h = torch.tanh(x @ p[0] + p[1])
        return torch.sum((h @ p[2] + p[3] - y) ** 2)

    tp = [torch.tensor(p) for p in params]
    want = tvmap(tgrad(torch_loss), in_dims=(None, 0, 0))(tp, torch.tensor(x), torch.tensor(y))
    assert all(np.allclose(g, t.numpy()) for g, t in zip(got, want))
    w1, b1, w2, b2 = params
    jac = vmap(jacrev(lambda x: np.tanh(x @ w1 + b1) @ w2 + b2))(x)
    tj = tvmap(tjacrev(lambda v: torch.tanh(v @ tp[0] + tp[1]) @ tp[2] + tp[3]))(torch.tensor(x))
    assert np.allclose(jac, tj.numpy())


def test_vmap_over_funcdiff_functional_calls_gives_arrays_per_example() -> None:
    import funcdiff.functional as F

    X = np.random.default_rng(5).standard_normal((4, 3))
    dfdx = np.cos(X) * X + np.sin(X)  # d/dx (x sin x), elementwise

    tangent = vmap(lambda x: F.jvp(lambda y: np.sin(y) * y, x, np.ones(3))[1])(X)
    assert type(tangent) is np.ndarray
    np.testing.assert_allclose(tangent, dfdx, rtol=1e-14)

    jac = vmap(lambda x: F.jacobian(lambda y: np.sin(y) * y, x))(X)
    assert type(jac) is np.ndarray and jac.shape == (4, 3, 3)
    np.testing.assert_allclose(jac, np.stack([np.diag(d) for d in dfdx]), rtol=1e-14)

    hess = vmap(lambda x: F.hessian(lambda y: np.sum(np.sin(y) * y), x))(X)
    d2 = 2 * np.cos(X) - X * np.sin(X)
    np.testing.assert_allclose(hess, np.stack([np.diag(d) for d in d2]), rtol=1e-13, atol=1e-15)
