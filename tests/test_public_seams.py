"""The seams the transforms use instead of private state: ``gradient_edge``, forward
mode through ``_jacobian`` (``push_tangents``, ``jacobian_forward``), replay's public
recording API (``funcdiff.replay.program``), and the shared option checks."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
import funcdiff.replay as replay
import funcdiff.sparse as fs
from funcdiff._core.graph import AccumulateGrad
from funcdiff._core.tensor import gradient_edge
from funcdiff._jacobian import jacobian_forward, push_tangents
from funcdiff.autograd.forward import push_forward
from funcdiff.functional import jacobian as eager_jacobian
from funcdiff.replay.program import GuardFailure, Program, build, recording

X = np.array([0.4, -1.1, 2.3])


def test_gradient_edge_names_where_a_tensors_gradient_arrives() -> None:
    x = fd.tensor(X, requires_grad=True)
    node, nr = gradient_edge(x)
    assert type(node) is AccumulateGrad and nr == 0
    assert gradient_edge(x) == (node, nr)  # the same accumulator every time
    y = np.sin(x) * x
    assert gradient_edge(y) == (y.grad_fn, 0)
    # Seeding forward mode there gives J v.
    v = np.array([1.0, 2.0, -1.0])
    (t,) = push_forward([y], {gradient_edge(x): v}, create_graph=False)
    np.testing.assert_allclose(t, (np.cos(X) * X + np.sin(X)) * v, rtol=1e-15)


@pytest.mark.parametrize("as_tensor", [False, True])
def test_push_tangents_takes_arrays_or_tensors_and_never_hands_them_back(as_tensor: bool) -> None:
    x = fd.tensor(X, requires_grad=True)
    y, z = x**3, x * 1.0
    v = np.array([[1.0, 0.0, 2.0], [0.0, -1.0, 0.5]])
    seeds = fd.tensor(v) if as_tensor else v
    ty, tz = push_tangents((y, z), (x,), (seeds,), create_graph=False, batched=True)
    np.testing.assert_allclose(ty.data, 3 * X**2 * v, rtol=1e-15)
    np.testing.assert_allclose(tz.data, v)
    assert not np.shares_memory(tz.data, v)  # the identity's tangent is a copy
    assert not ty.requires_grad and not tz.requires_grad


def test_a_recorded_forward_jacobian_differentiates_again() -> None:
    x = fd.tensor(X, requires_grad=True)
    outputs = (x**3, fd.tensor([5.0, 6.0]))  # the second does not depend on x
    plain = jacobian_forward(outputs, (x,), True, None)
    recorded = jacobian_forward(outputs, (x,), True, None, create_graph=True)
    for (p,), (r,) in zip(plain, recorded):
        np.testing.assert_allclose(r.data, p.data, rtol=1e-15)
        assert not p.requires_grad
    np.testing.assert_allclose(plain[0][0].data, np.diag(3 * X**2), rtol=1e-15)
    np.testing.assert_array_equal(plain[1][0].data, np.zeros((2, 3)))
    # d/dx of the sum of the diagonal 3 x^2: 6 x.
    (g,) = fd.grad(recorded[0][0].sum(), x)
    np.testing.assert_allclose(g.data, 6 * X, rtol=1e-15)
    # One column per pass gives the same blocks.
    single = jacobian_forward(outputs, (x,), False, None)
    np.testing.assert_allclose(single[0][0].data, plain[0][0].data, rtol=1e-15)


def test_a_replayed_forward_jacobian_with_a_constant_output_matches_eager() -> None:
    def tall(x):  # more outputs than inputs: replay pushes the identity forward
        return np.concatenate([x**2, np.sin(x) * x[0]]), fd.tensor([1.0, 2.0])

    J = replay.jacobian(tall)
    rng = np.random.default_rng(5)
    for _ in range(4):
        x = rng.standard_normal(2)
        got = J(x)
        want = eager_jacobian(tall, fd.tensor(x), vectorize=True)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.data, rtol=1e-13, atol=1e-15)
        np.testing.assert_array_equal(got[1], np.zeros((2, 2)))
    assert J.trace_count == 1 and J.cache_info()["replays"] == 3


def test_a_program_recorded_through_the_public_api_replays_and_guards() -> None:
    with recording() as tracer:
        x = fd.tensor(X, requires_grad=True)
        tracer.input(x)
        y = np.sin(x) * x if np.sum(x) > 0 else np.cos(x)
        (g,) = fd.grad(np.sum(y), x, create_graph=True)
    program = build(tracer, (tracer.slot_of(y), tracer.slot_of(g)))
    assert isinstance(program, Program) and program.info["guards"] == 1
    for point in (X, X + 0.5, np.array([3.0, -1.0, 0.2])):
        value, gradient = program.run([point])
        np.testing.assert_allclose(value, np.sin(point) * point, rtol=1e-15)
        np.testing.assert_allclose(gradient, np.cos(point) * point + np.sin(point), rtol=1e-15)
    with pytest.raises(GuardFailure, match="bool guard: recorded True, got False"):
        program.run([-X])
    with pytest.raises(RuntimeError, match="already traced"), recording(), recording():
        pass


def test_the_transforms_share_one_validator() -> None:
    for make in (replay.grad, lambda f: fs.prepare_jacobian(f, np.ones(2))):
        with pytest.raises(TypeError, match="^f must be callable, got int$"):
            make(3)
    with pytest.raises(TypeError, match=r"argnums must be an int or a tuple of ints, got \[0\]"):
        replay.grad(np.sum, argnums=[0])
    with pytest.raises(TypeError, match="argnums 2 names argument 2, but the call has 1"):
        replay.grad(np.sum, argnums=2)(np.ones(2))
    with pytest.raises(ValueError, match="^max_traces must be a positive integer, got 0$"):
        replay.grad(np.sum, max_traces=0)
    with pytest.raises(ValueError, match="^max_patterns must be a positive integer, got True$"):
        fs.prepare_jacobian(lambda x: x, np.ones(2), max_patterns=True)
    with pytest.raises(ValueError, match="^on_guard_failure must be 'retrace' or 'raise', got"):
        replay.grad(np.sum, on_guard_failure="redetect")
    with pytest.raises(ValueError, match="^mode must be 'auto', 'forward' or 'reverse', got 'x'$"):
        fs.prepare_jacobian(lambda x: x, np.ones(2), mode="x")
    with pytest.raises(ValueError, match="^coloring must be 'star' or 'column', got 'row'$"):
        fs.prepare_hessian(lambda x: np.sum(x**2), np.ones(2), coloring="row")
