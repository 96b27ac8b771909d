"""funcdiff.func against torch.func: the same values in the same structures.

Each function is written once for an array namespace (``np`` or ``torch``), run
through both libraries' transforms, and the results compared leaf by leaf with their
pytree structures. Skipped when torch is not installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import funcdiff.func as ff
from funcdiff.func import tree_flatten, tree_map

torch = pytest.importorskip("torch")
tf = torch.func

RNG = np.random.default_rng(7)


def to_torch(tree: Any) -> Any:
    return tree_map(
        lambda a: torch.tensor(np.asarray(a, dtype=float)) if not callable(a) else a, tree
    )


def assert_same(ours: Any, theirs: Any) -> None:
    """Equal pytree structures and values (torch's tensors as leaves)."""
    our_leaves, our_spec = tree_flatten(ours)
    their_leaves, their_spec = tree_flatten(theirs)
    assert our_spec == their_spec, (our_spec, their_spec)
    for a, b in zip(our_leaves, their_leaves, strict=True):
        assert isinstance(a, (np.ndarray, np.number)), type(a)
        b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
        assert np.shape(a) == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)


def both(build: Callable[[Any], Any], *args: Any) -> tuple[Any, Any]:
    """``build(module)`` run with funcdiff.func on ndarrays and torch.func on tensors."""
    return build(ff)(*args), build(tf)(*to_torch(args))


# Functions of an array namespace (np and torch share these names).
def mlp(xp: Any, params: dict, x: Any) -> Any:
    h = xp.tanh(x @ params["w"] + params["b"][0])
    return xp.sum(h**2) * params["b"][1]


def vector_f(xp: Any, x: Any, y: Any) -> Any:
    return {"p": xp.sin(x) * y[0], "q": (xp.exp(x / 3) @ y,)}


def params_and_x() -> tuple[dict, np.ndarray]:
    params = {"w": RNG.normal(size=(3, 4)), "b": [RNG.normal(size=4), RNG.normal(size=())]}
    return params, RNG.normal(size=(2, 3))


def xp_of(module: Any) -> Any:
    return np if module is ff else torch


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (-1,), (1, -2)])
def test_grad_and_grad_and_value(argnums: Any) -> None:
    params, x = params_and_x()

    def build(m: Any) -> Any:
        return m.grad(lambda p, x: mlp(xp_of(m), p, x), argnums=argnums)

    assert_same(*both(build, params, x))

    def build_value(m: Any) -> Any:
        def f(p: dict, x: Any) -> tuple:
            value = mlp(xp_of(m), p, x)
            return value, {"twice": 2 * value}

        return m.grad_and_value(f, argnums=argnums, has_aux=True)

    assert_same(*both(build_value, params, x))


def test_vjp_jvp_linearize() -> None:
    x, y = RNG.normal(size=3), RNG.normal(size=3)
    u = {"p": RNG.normal(size=3), "q": (RNG.normal(size=()),)}
    ours_out, ours_fn = ff.vjp(lambda x, y: vector_f(np, x, y), x, y)
    theirs_out, theirs_fn = tf.vjp(lambda x, y: vector_f(torch, x, y), *to_torch((x, y)))
    assert_same(ours_out, theirs_out)
    assert_same(ours_fn(u), theirs_fn(to_torch(u)))
    t = (RNG.normal(size=3), RNG.normal(size=3))
    assert_same(
        ff.jvp(lambda x, y: vector_f(np, x, y), (x, y), t),
        tf.jvp(lambda x, y: vector_f(torch, x, y), to_torch((x, y)), to_torch(t)),
    )
    ours_out, ours_lin = ff.linearize(lambda x, y: vector_f(np, x, y), x, y)
    theirs_out, theirs_lin = tf.linearize(lambda x, y: vector_f(torch, x, y), *to_torch((x, y)))
    assert_same(ours_out, theirs_out)
    assert_same(ours_lin(*t), theirs_lin(*to_torch(t)))
    # has_aux: (output, vjp_fn, aux) and (output, jvp_out, aux).
    ours = ff.vjp(lambda x: (np.sin(x), {"a": x}), x, has_aux=True)
    theirs = tf.vjp(lambda x: (torch.sin(x), {"a": x}), *to_torch((x,)), has_aux=True)
    assert_same(ours[2], theirs[2])
    assert_same(ours[1](y), theirs[1](to_torch(y)))
    assert_same(
        ff.jvp(lambda x: (np.sin(x), [x]), (x,), (y,), has_aux=True),
        tf.jvp(lambda x: (torch.sin(x), [x]), to_torch((x,)), to_torch((y,)), has_aux=True),
    )


@pytest.mark.parametrize("name", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, (0, 1), -1])
def test_jacobians(name: str, argnums: Any) -> None:
    x, y = RNG.normal(size=3), RNG.normal(size=3)

    def build(m: Any) -> Any:
        # torch 2.13's jacfwd answers zeros for a negative argnums (jacrev does not):
        # torch is asked with the same position counted from the front.
        theirs = 1 if m is tf and name == "jacfwd" and argnums == -1 else argnums
        return getattr(m, name)(lambda x, y: vector_f(xp_of(m), x, y), argnums=theirs)

    assert_same(*both(build, x, y))
    params, xs = params_and_x()

    def build_mlp(m: Any) -> Any:
        return getattr(m, name)(lambda p, x: mlp(xp_of(m), p, x))

    assert_same(*both(build_mlp, params, xs))


def test_jacrev_chunk_size_and_has_aux() -> None:
    x = RNG.normal(size=5)

    def build(m: Any) -> Any:
        xp = xp_of(m)
        return m.jacrev(lambda x: (xp.cumsum(xp.sin(x), 0), x[0]), has_aux=True, chunk_size=2)

    assert_same(*both(build, x))


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_hessian_and_compositions(argnums: Any) -> None:
    x, y = RNG.normal(size=3), RNG.normal(size=2)

    def scalar(xp: Any, x: Any, y: Any) -> Any:
        return xp.sum(xp.tanh(x) ** 3) * xp.sum(y**2) + xp.sum(xp.exp(x[:2] * y))

    def build(m: Any) -> Any:
        return m.hessian(lambda x, y: scalar(xp_of(m), x, y), argnums=argnums)

    assert_same(*both(build, x, y))

    def build_third(m: Any) -> Any:
        f = lambda x, y: scalar(xp_of(m), x, y)  # noqa: E731
        return m.jacfwd(m.jacrev(m.jacrev(f, argnums), argnums), argnums)

    assert_same(*both(build_third, x, y))

    def build_grad3(m: Any) -> Any:
        xp = xp_of(m)
        return m.grad(m.grad(m.grad(lambda s: xp.sin(s) * xp.exp(s**2))))

    assert_same(*both(build_grad3, 0.4))


def test_tree_flatten_orders_leaves_as_torch_does() -> None:
    from torch.utils import _pytree as torch_pytree

    # (torch counts None as a leaf; funcdiff.func, like JAX, as an empty container.)
    tree = {"b": [1.0, (2.0, 3.0)], "a": {"y": 4.0, "x": (5.0,)}, "c": 6.0}
    ours, spec = tree_flatten(tree)
    theirs, their_spec = torch_pytree.tree_flatten(tree)
    assert ours == theirs == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert spec.num_leaves == their_spec.num_leaves
    # ravel_pytree concatenates the leaves in that order.
    params, _ = params_and_x()
    flat, unravel = ff.ravel_pytree(params)
    torch_leaves = torch_pytree.tree_leaves(to_torch(params))
    np.testing.assert_array_equal(flat, torch.cat([t.reshape(-1) for t in torch_leaves]).numpy())
    assert_same(unravel(flat), to_torch(params))
