"""funcdiff.func: torch.func's transforms on plain NumPy functions.

Every value is checked against an independent truth: a closed form, central finite
differences, or funcdiff.functional's result for the same function.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
import pytest

import funcdiff as fd
import funcdiff.func as funcdiff_func
import funcdiff.functional as F
from funcdiff.func import (
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    ravel_pytree,
    tree_flatten,
    tree_map,
    tree_unflatten,
    vjp,
)

RNG = np.random.default_rng(0)


def central_jacobian(f: Any, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d f / d x by central differences, shape f(x).shape + x.shape."""
    x = np.asarray(x, dtype=float)
    f0 = np.asarray(f(x))
    jac = np.zeros(f0.shape + x.shape)
    for k in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[k] = h
        jac[(..., *k)] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h)
    return jac


def mlp_loss(params: dict, x: np.ndarray, y: np.ndarray) -> Any:
    h = np.tanh(x @ params["w1"] + params["b1"])
    out = h @ params["w2"] + params["b2"]
    return np.sum((out - y) ** 2)


def make_params(d: int = 3, h: int = 4, o: int = 2) -> dict:
    return {
        "w1": RNG.normal(size=(d, h)),
        "b1": RNG.normal(size=h),
        "w2": RNG.normal(size=(h, o)),
        "b2": RNG.normal(size=o),
    }


# --------------------------------------------------------------------------- pytrees
def test_tree_flatten_round_trips_nested_containers() -> None:
    Point = namedtuple("Point", "x y")
    tree = {"a": [1.0, (2.0, None)], "b": Point(np.ones(2), {"c": 3}), "d": ()}
    leaves, spec = tree_flatten(tree)
    assert len(leaves) == spec.num_leaves == 4
    rebuilt = tree_unflatten(spec, leaves)
    assert rebuilt["a"] == [1.0, (2.0, None)]
    assert type(rebuilt["b"]) is Point and rebuilt["b"].y == {"c": 3}
    assert rebuilt["d"] == ()
    assert tree_flatten(rebuilt)[1] == spec and hash(spec) == hash(tree_flatten(tree)[1])
    with pytest.raises(ValueError, match="holds 4 leaves, got 3"):
        tree_unflatten(spec, leaves[:3])
    with pytest.raises(ValueError, match="differ in structure"):
        tree_map(lambda a, b: a, [1, 2], (1, 2))
    # None as a leaf, when asked.
    leaves, _ = tree_flatten([None, 1], is_leaf=lambda v: v is None)
    assert leaves == [None, 1]


def test_ravel_pytree_flattens_and_unravels() -> None:
    tree = {"w": np.arange(6.0).reshape(2, 3), "b": [np.float32(2.0), 4]}
    flat, unravel = ravel_pytree(tree)
    np.testing.assert_array_equal(flat, [0, 1, 2, 3, 4, 5, 2, 4])
    assert flat.dtype == np.float64
    back = unravel(flat + 1)
    np.testing.assert_array_equal(back["w"], tree["w"] + 1)
    assert back["b"][0].dtype == np.float32 and back["b"][0] == 3.0
    with pytest.raises(ValueError, match="flat must be a 1-d array of length 8"):
        unravel(np.zeros(7))
    # Differentiable: the gradient of a loss of the flat vector, through unravel.
    p = make_params()
    x, y = RNG.normal(size=(5, 3)), RNG.normal(size=(5, 2))
    flat, unravel = ravel_pytree(p)
    g_flat = grad(lambda v: mlp_loss(unravel(v), x, y))(flat)
    g_tree = grad(mlp_loss)(p, x, y)
    np.testing.assert_allclose(g_flat, ravel_pytree(g_tree)[0], rtol=1e-12)
    with pytest.raises(TypeError, match="ravel_pytree: leaf 1 must be an array or a number"):
        ravel_pytree([1.0, "text"])
    empty, unravel_empty = ravel_pytree({})
    assert empty.shape == (0,) and unravel_empty(empty) == {}


# --------------------------------------------------------------------------- grad
def test_grad_closed_forms_and_argnums() -> None:
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(grad(lambda x: np.sum(np.sin(x) * x))(x), np.sin(x) + x * np.cos(x))
    f = lambda a, b, c: np.sum(a * b**2) + c  # noqa: E731
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    ga, gb = grad(f, argnums=(0, -2))(a, b, 1.0)
    np.testing.assert_allclose(ga, b**2)
    np.testing.assert_allclose(gb, 2 * a * b)
    assert grad(f, argnums=2)(a, b, 1.0) == 1.0
    # Results are ndarrays, never Tensors; integers count as float64.
    g = grad(lambda x: x**3)(2)
    assert type(g) is np.ndarray and g.dtype == np.float64 and g == 12.0
    # kwargs pass through, undifferentiated.
    assert grad(lambda x, *, k: k * x**2)(3.0, k=2.0) == 12.0
    # A constant function: zeros shaped like the argument.
    np.testing.assert_array_equal(grad(lambda x: 1.0)(np.ones(3)), np.zeros(3))


def test_grad_of_pytree_parameters_matches_functional() -> None:
    p = make_params()
    x, y = RNG.normal(size=(5, 3)), RNG.normal(size=(5, 2))
    g = grad(mlp_loss)(p, x, y)
    assert set(g) == set(p)
    names = list(p)
    ref = F.jacobian(
        lambda *ts: mlp_loss(dict(zip(names, ts)), x, y), tuple(fd.tensor(p[k]) for k in names)
    )
    for k, r in zip(names, ref, strict=True):
        np.testing.assert_allclose(g[k], r.data, rtol=1e-12)
        assert g[k].shape == p[k].shape


def test_grad_and_value_with_aux() -> None:
    def f(x: np.ndarray) -> tuple:
        return np.sum(x**2), {"mean": np.mean(x), "n": 3}

    (g, (value, aux)) = grad_and_value(f, has_aux=True)(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(g, [2.0, 4.0, 6.0])
    assert value == 14.0 and aux["mean"] == 2.0 and aux["n"] == 3
    assert type(aux["mean"]) is np.ndarray
    g2, aux2 = grad(f, has_aux=True)(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(g2, g)
    assert aux2["n"] == 3


# --------------------------------------------------------------------------- vjp / jvp
def test_vjp_and_jvp_match_finite_differences() -> None:
    def f(x: np.ndarray, y: np.ndarray) -> tuple:
        return np.sin(x) * y[0], {"s": np.sum(x * y)}

    x, y = RNG.normal(size=3), RNG.normal(size=3)
    out, vjp_fn = vjp(f, x, y)
    np.testing.assert_allclose(out[0], np.sin(x) * y[0])
    u0, u1 = RNG.normal(size=3), 1.5
    gx, gy = vjp_fn((u0, {"s": u1}))
    jx0 = central_jacobian(lambda x: f(x, y)[0], x)
    jx1 = central_jacobian(lambda x: f(x, y)[1]["s"], x)
    jy0 = central_jacobian(lambda y: f(x, y)[0], y)
    jy1 = central_jacobian(lambda y: f(x, y)[1]["s"], y)
    np.testing.assert_allclose(gx, u0 @ jx0 + u1 * jx1, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gy, u0 @ jy0 + u1 * jy1, rtol=1e-7, atol=1e-9)
    # vjp_fn can be called again.
    np.testing.assert_allclose(vjp_fn((u0, {"s": 0.0}))[0], u0 @ jx0, rtol=1e-7, atol=1e-9)
    tx, ty = RNG.normal(size=3), RNG.normal(size=3)
    out2, t_out = jvp(f, (x, y), (tx, ty))
    np.testing.assert_allclose(t_out[0], jx0 @ tx + jy0 @ ty, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(t_out[1]["s"], jx1 @ tx + jy1 @ ty, rtol=1e-7, atol=1e-9)
    out3, lin = linearize(f, x, y)
    np.testing.assert_allclose(lin(tx, ty)[0], t_out[0], rtol=1e-12)
    np.testing.assert_allclose(lin(ty, tx)[0], jx0 @ ty + jy0 @ tx, rtol=1e-7, atol=1e-9)


# --------------------------------------------------------------------------- Jacobians
@pytest.mark.parametrize("transform", [jacrev, jacfwd])
def test_jacobians_match_functional_and_structure(transform: Any) -> None:
    def f(x: np.ndarray, p: dict) -> dict:
        return {"a": np.tanh(p["A"] @ x), "b": (np.sum(x**2) * p["c"],)}

    x = RNG.normal(size=3)
    p = {"A": RNG.normal(size=(2, 3)), "c": 0.7}
    j = transform(f, argnums=(0, 1))(x, p)
    ja_x, ja_p = j["a"]
    assert ja_x.shape == (2, 3) and ja_p["A"].shape == (2, 2, 3) and ja_p["c"].shape == (2,)
    np.testing.assert_allclose(ja_x, central_jacobian(lambda x: f(x, p)["a"], x), atol=1e-8)
    np.testing.assert_allclose(
        ja_p["A"], central_jacobian(lambda a: f(x, {"A": a, "c": 0.7})["a"], p["A"]), atol=1e-8
    )
    (jb_x, jb_p) = j["b"][0]
    np.testing.assert_allclose(jb_x, 2 * x * 0.7, rtol=1e-12)
    np.testing.assert_allclose(jb_p["c"], np.sum(x**2), rtol=1e-12)
    ref = F.jacobian(lambda x: np.tanh(p["A"] @ x), fd.tensor(x))
    np.testing.assert_allclose(transform(lambda x: f(x, p)["a"])(x), ref.data, rtol=1e-12)


def test_jacrev_chunk_size_gives_the_same_result() -> None:
    f = lambda x: np.cumsum(np.sin(x)) * x  # noqa: E731
    x = RNG.normal(size=7)
    full = jacrev(f)(x)
    for chunk in (1, 3, 7, 100):
        np.testing.assert_array_equal(jacrev(f, chunk_size=chunk)(x), full)
    np.testing.assert_allclose(full, central_jacobian(f, x), atol=1e-8)


def test_hessian_matches_functional_and_closed_form() -> None:
    def rosen(x: np.ndarray) -> Any:
        return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    x = RNG.normal(size=4)
    h = hessian(rosen)(x)
    ref = F.hessian(rosen, fd.tensor(x))
    np.testing.assert_allclose(h, ref.data, rtol=1e-12)
    h2 = hessian(lambda a, b: np.sum(a**2 * b), argnums=(0, 1))(np.array([1.0, 2.0]), 3.0)
    np.testing.assert_allclose(h2[0][0], np.diag([6.0, 6.0]))
    np.testing.assert_allclose(h2[0][1], [2.0, 4.0])
    np.testing.assert_allclose(h2[1][0], [2.0, 4.0])
    assert h2[1][1] == 0.0


# --------------------------------------------------------------------------- composition
def test_grad_to_depth_three_closed_form() -> None:
    x = 0.7
    assert np.isclose(grad(grad(grad(np.sin)))(x), -np.cos(x), rtol=1e-14)
    f = lambda x: x**2 * np.exp(x)  # noqa: E731
    # d3/dx3 x^2 e^x = (x^2 + 6x + 6) e^x
    np.testing.assert_allclose(grad(grad(grad(f)))(x), (x**2 + 6 * x + 6) * np.exp(x))
    # Closures over an outer level's value: d/dx [d/dy (x y^2)](y = x) = 2y|_{y=x} = 2x.
    g = grad(lambda x: grad(lambda y: x * y**2)(x))
    np.testing.assert_allclose(g(1.5), 2 * 1.5 + 2 * 1.5)


def test_errors_name_the_argument() -> None:
    with pytest.raises(RuntimeError, match=r"scalar \(0-d\) output, got shape \(2,\)"):
        grad(lambda x: x * 2)(np.ones(2))
    with pytest.raises(ValueError, match="argnums 2 names argument 2"):
        grad(lambda x, y: x * y, argnums=2)(1.0, 2.0)
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
        grad(lambda x: x, argnums=[0])(1.0)
    with pytest.raises(ValueError, match="has_aux=True.*pair"):
        grad(lambda x: x**2, has_aux=True)(1.0)
    with pytest.raises(ValueError, match="tangents must have the structure of primals"):
        jvp(lambda x, y: x * y, (1.0, 2.0), (1.0,))
    with pytest.raises(ValueError, match=r"tangents: leaf 0 has shape \(3,\)"):
        jvp(np.sin, (np.ones(2),), (np.ones(3),))
    _, vjp_fn = vjp(lambda x: (x, x), np.ones(2))
    with pytest.raises(ValueError, match="cotangents must have the structure of the output"):
        vjp_fn(np.ones(2))
    with pytest.raises(TypeError, match="argument 0 must be an ndarray"):
        grad(lambda s: 1.0)("abc")
    with pytest.raises(ValueError, match="chunk_size"):
        jacrev(np.sin, chunk_size=0)


# --------------------------------------------------------------------------- every composition
def _f(x: Any) -> Any:
    return np.sin(x) * np.exp(x / 2)


def _f_derivative(n: int, x: float) -> float:
    """d^n/dx^n sin(x) e^(x/2) = Im((1/2 + i)^n e^((1/2 + i) x))."""
    return float(np.imag((0.5 + 1j) ** n * np.exp((0.5 + 1j) * x)))


#: Each turns a scalar function into its derivative, through one transform.
DERIVATIVES: dict[str, Any] = {
    "grad": grad,
    "grad_and_value": lambda f: lambda x: grad_and_value(f)(x)[0],
    "jacrev": jacrev,
    "jacfwd": jacfwd,
    "vjp": lambda f: lambda x: vjp(f, x)[1](1.0)[0],
    "jvp": lambda f: lambda x: jvp(f, (x,), (1.0,))[1],
    "linearize": lambda f: lambda x: linearize(f, x)[1](1.0),
}


@pytest.mark.parametrize("outer", sorted(DERIVATIVES))
@pytest.mark.parametrize("middle", sorted(DERIVATIVES))
def test_every_transform_composes_with_every_other_to_depth_three(outer: str, middle: str) -> None:
    x = 0.3
    for inner in sorted(DERIVATIVES):
        d3 = DERIVATIVES[outer](DERIVATIVES[middle](DERIVATIVES[inner](_f)))
        value = d3(x)
        assert isinstance(value, np.ndarray) and np.shape(value) == (), (outer, middle, inner)
        np.testing.assert_allclose(value, _f_derivative(3, x), rtol=1e-12, err_msg=inner)
    # hessian counts twice, inside or outside.
    np.testing.assert_allclose(
        DERIVATIVES[outer](DERIVATIVES[middle](hessian(_f)))(x), _f_derivative(4, x), rtol=1e-12
    )
    np.testing.assert_allclose(
        hessian(DERIVATIVES[outer](DERIVATIVES[middle](_f)))(x), _f_derivative(4, x), rtol=1e-12
    )


def test_compositions_on_vectors_match_finite_differences() -> None:
    A = RNG.normal(size=(3, 3))

    def f(x: np.ndarray) -> Any:
        return np.sum(np.tanh(A @ x) ** 2) + x[0] * x[1] * x[2]

    x = RNG.normal(size=3)
    h = hessian(f)(x)
    assert h.shape == (3, 3)
    np.testing.assert_allclose(h, h.T, atol=1e-12)
    np.testing.assert_allclose(h, central_jacobian(grad(f), x), atol=1e-7)
    for third in (
        jacfwd(jacrev(jacrev(f))),
        jacrev(jacfwd(jacrev(f))),
        jacrev(hessian(f)),
        jacfwd(jacfwd(grad(f))),
    ):
        t = third(x)
        assert t.shape == (3, 3, 3)
        np.testing.assert_allclose(t, central_jacobian(hessian(f), x), atol=1e-6)
    # Gradient of a Hessian-vector product (jvp of grad), against the third derivative.
    v = RNG.normal(size=3)
    hvp = lambda x: jvp(grad(f), (x,), (v,))[1]  # noqa: E731
    np.testing.assert_allclose(hvp(x), h @ v, rtol=1e-12)
    np.testing.assert_allclose(
        jacrev(hvp)(x), np.einsum("ijk,k->ij", jacfwd(hessian(f))(x), v), atol=1e-12
    )


def test_transforms_over_code_that_calls_the_engine_and_functional() -> None:
    x = RNG.normal(size=3)

    def through_engine(x: Any) -> Any:
        # The gradient of sum(x^3) by the engine, inside the function: 3x^2.
        (g,) = fd.grad(np.sum(x**3), x, create_graph=True)
        return np.sum(g * x)  # 3 sum x^3

    np.testing.assert_allclose(grad(through_engine)(x), 9 * x**2, rtol=1e-12)
    np.testing.assert_allclose(grad(grad(through_engine))(0.5), 18 * 0.5, rtol=1e-12)
    np.testing.assert_allclose(hessian(through_engine)(x), np.diag(18 * x), rtol=1e-12)

    def through_functional(x: Any) -> Any:
        # The Hessian of sum(x^4) by funcdiff.functional: diag(12 x^2); its trace.
        h = F.hessian(lambda t: np.sum(t**4), x, create_graph=True)
        return np.trace(h)

    np.testing.assert_allclose(grad(through_functional)(x), 24 * x, rtol=1e-12)
    np.testing.assert_allclose(jacfwd(grad(through_functional))(x), 24 * np.eye(3), rtol=1e-12)
    np.testing.assert_allclose(
        grad(grad(grad(lambda s: through_functional(s * np.ones(2)))))(0.4), 0.0, atol=1e-12
    )

    def with_an_inner_leaf(x: Any) -> Any:
        # A leaf made inside, differentiated inside: d/dw (w x^2) = x^2.
        w = fd.tensor(2.0, requires_grad=True)
        (gw,) = fd.grad(np.sum(w * x**2), w, create_graph=True)
        return gw

    np.testing.assert_allclose(grad(with_an_inner_leaf)(x), 2 * x, rtol=1e-12)


def test_a_closure_over_a_tensor_keeps_its_gradient() -> None:
    # The transform's result depends on w through the closure: it stays a Tensor
    # connected to w, so that w's gradient is not dropped.
    w = fd.tensor([1.0, -2.0], requires_grad=True)
    x = np.array([0.5, 3.0])
    g = grad(lambda x: np.sum(w * x**2))(x)
    assert isinstance(g, fd.Tensor) and g.requires_grad
    np.testing.assert_allclose(g.data, 2 * w.data * x)
    np.sum(g).backward()
    np.testing.assert_allclose(w.grad.data, 2 * x)
    # The same with the argument a Tensor that requires grad.
    xt = fd.tensor(x, requires_grad=True)
    g = grad(lambda x: np.sum(x**3))(xt)
    (gg,) = fd.grad(np.sum(g), xt)
    np.testing.assert_allclose(gg.data, 6 * x)


# --------------------------------------------------------------------------- dtypes and edges
def test_dtypes_follow_the_inputs() -> None:
    g32 = grad(lambda x: np.sum(x**2))(np.ones(2, dtype=np.float32))
    assert g32.dtype == np.float32 and np.allclose(g32, 2.0)
    z = np.array([1 + 2j, 0.5 - 1j])
    # torch's convention for a real function of complex inputs: the conjugate
    # Wirtinger gradient times two, 2z for |z|^2.
    np.testing.assert_allclose(grad(lambda z: np.sum(np.abs(z) ** 2))(z), 2 * z)
    out, t = jvp(lambda z: z**2, (z,), (np.ones(2, dtype=complex),))
    np.testing.assert_allclose(t, 2 * z)
    for transform in (jacrev, jacfwd):
        with pytest.raises(RuntimeError, match="expected all inputs to be real, got complex"):
            transform(lambda z: z**2)(z)
        with pytest.raises(RuntimeError, match="expected all outputs to be real"):
            transform(lambda x: x * 1j)(np.ones(2))


def test_constant_and_empty_outputs_and_inputs() -> None:
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(jacrev(lambda x: np.arange(3))(x), np.zeros((3, 2)))
    np.testing.assert_array_equal(jacfwd(lambda x: np.ones((2, 2)))(x), np.zeros((2, 2, 2)))
    assert jacrev(lambda x: np.sum(x) * np.ones(4))(np.zeros(0)).shape == (4, 0)
    assert jacfwd(lambda x: x * 2)(np.zeros(0)).shape == (0, 0)
    # An output that does not depend on the differentiated argument.
    j = jacrev(lambda x, y: (x * 2, y), argnums=0)(x, 3.0)
    np.testing.assert_array_equal(j[1], np.zeros(2))
    _, vjp_fn = vjp(lambda x, y: x * 2, x, np.ones(3))
    gx, gy = vjp_fn(np.ones(2))
    np.testing.assert_array_equal(gy, np.zeros(3))
    _, t = jvp(lambda x: (x, 5.0), (x,), (np.ones(2),))
    assert t[1] == 0.0


def test_linearize_runs_the_function_once() -> None:
    calls = []

    def f(x: Any) -> Any:
        calls.append(1)
        return np.sin(x) * x

    x = np.array([0.2, 0.4])
    out, jvp_fn = linearize(f, x)
    for v in np.eye(2):
        np.testing.assert_allclose(jvp_fn(v), (np.sin(x) + x * np.cos(x)) * v, rtol=1e-12)
    assert len(calls) == 1
    with pytest.raises(ValueError, match=r"jvp_fn: tangents: leaf 0 has shape \(3,\)"):
        jvp_fn(np.ones(3))


def test_more_errors() -> None:
    with pytest.raises(TypeError, match="primals must be a tuple or list"):
        jvp(np.sin, np.ones(2), (np.ones(2),))
    with pytest.raises(TypeError, match="tangents must be a tuple or list"):
        jvp(np.sin, (np.ones(2),), np.ones(2))
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
        grad(lambda x: x, argnums=True)(1.0)
    with pytest.raises(ValueError, match="must not repeat"):
        grad(lambda x, y: x * y, argnums=(0, -2))(1.0, 2.0)
    with pytest.raises(ValueError, match="at least one argument"):
        grad(lambda x: x, argnums=())(1.0)
    with pytest.raises(ValueError, match="got a tuple of length 3"):
        jacrev(lambda x: (x, x, x), has_aux=True)(np.ones(2))
    with pytest.raises(RuntimeError, match=r"got shape \(1,\)"):
        grad(lambda x: np.sum(x, keepdims=True))(np.ones(2))
    with pytest.raises(RuntimeError, match="got a tuple of length 2"):
        grad(lambda x: (x, x))(1.0)
    with pytest.raises(ValueError, match="randomness must be 'error', 'same' or 'different'"):
        jacfwd(np.sin, randomness="sometimes")
    with pytest.raises(TypeError, match="func must be callable"):
        grad(3)
    _, vjp_fn = vjp(np.sin, np.ones(2))
    with pytest.raises(ValueError, match=r"cotangents: leaf 0 has shape \(\)"):
        vjp_fn(1.0)
    with pytest.raises(TypeError, match="cotangents: leaf 0 must be an ndarray or a number"):
        vjp_fn("ab")
    with pytest.raises(TypeError, match="cotangents: leaf 0 must be an ndarray or a number"):
        vjp_fn(np.array(["a", "b"]))
    with pytest.raises(TypeError, match="argument 0, leaf 1, must hold floating point"):
        grad(lambda p: 1.0)([1.0, np.array(["a"])])
    # An error inside the function leaves no transform level behind.
    with pytest.raises(ZeroDivisionError):
        grad(lambda x: 1 / 0)(1.0)
    assert isinstance(grad(np.sin)(0.0), np.ndarray)


def test_vjp_and_linearize_keep_the_point_they_were_called_at() -> None:
    x = np.array([1.0, 2.0])
    _, vjp_fn = vjp(lambda x: x**2, x)
    _, jvp_fn = linearize(lambda x: x**3, x)
    x[:] = 100.0  # the caller reuses its array
    np.testing.assert_array_equal(vjp_fn(np.ones(2))[0], [2.0, 4.0])
    np.testing.assert_array_equal(jvp_fn(np.ones(2)), [3.0, 12.0])
    # grad reads the array without copying it, and leaves it as it was.
    y = np.array([3.0, 4.0])
    np.testing.assert_array_equal(grad(lambda y: np.sum(y**2))(y), [6.0, 8.0])
    np.testing.assert_array_equal(y, [3.0, 4.0])


def test_functional_over_the_transforms_and_hessian_of_a_dict() -> None:
    def f(x: Any) -> Any:
        return np.sum(np.sin(x) * x**2)

    x = RNG.normal(size=3)
    # funcdiff.functional differentiates a transformed function: its inputs are Tensors
    # that require grad, so the transform's result stays connected to them.
    ref = hessian(f)(x)
    np.testing.assert_allclose(F.jacobian(grad(f), fd.tensor(x)).data, ref, rtol=1e-12)
    np.testing.assert_allclose(
        F.jacobian(jacrev(f), fd.tensor(x), vectorize=True).data, ref, rtol=1e-12
    )
    # Hessian blocks of a dict of parameters, against functional.hessian on a tuple.
    p = {"a": RNG.normal(size=2), "b": [RNG.normal(size=(2, 2))]}

    def g(p: dict) -> Any:
        return np.sum(np.tanh(p["b"][0] @ p["a"]) ** 2) * np.sum(p["a"])

    h = hessian(g)(p)
    ref_blocks = F.hessian(
        lambda a, b: g({"a": a, "b": [b]}), (fd.tensor(p["a"]), fd.tensor(p["b"][0]))
    )
    np.testing.assert_allclose(h["a"]["a"], ref_blocks[0][0].data, rtol=1e-12)
    np.testing.assert_allclose(h["a"]["b"][0], ref_blocks[0][1].data, rtol=1e-12)
    np.testing.assert_allclose(h["b"][0]["a"], ref_blocks[1][0].data, rtol=1e-12)
    np.testing.assert_allclose(h["b"][0]["b"][0], ref_blocks[1][1].data, rtol=1e-12)
    assert h["b"][0]["b"][0].shape == (2, 2, 2, 2)


def test_an_aux_over_a_tensor_keeps_its_gradient() -> None:
    w = fd.tensor(3.0, requires_grad=True)
    g, aux = grad(lambda x: (x**2, w * x), has_aux=True)(2.0)
    # Only the aux reaches w: the gradient is an ndarray, the aux a Tensor.
    assert type(g) is np.ndarray and g == 4.0 and isinstance(aux, fd.Tensor)
    aux.backward()
    assert w.grad.item() == 2.0


def test_the_hips_autograd_logistic_regression_example_ports_by_its_imports() -> None:
    # HIPS autograd's README example, with `from funcdiff.func import grad` and plain
    # NumPy in place of autograd's imports; the gradient has the closed form X^T (p - t).
    def sigmoid(x: Any) -> Any:
        return 0.5 * (np.tanh(x / 2.0) + 1)

    def logistic_predictions(weights: Any, inputs: Any) -> Any:
        return sigmoid(np.dot(inputs, weights))

    inputs = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30]])
    targets = np.array([True, True, False])

    def training_loss(weights: Any) -> Any:
        preds = logistic_predictions(weights, inputs)
        label_probabilities = preds * targets + (1 - preds) * (1 - targets)
        return -np.sum(np.log(label_probabilities))

    training_gradient_fun = grad(training_loss)
    weights = np.array([0.0, 0.0, 0.0])
    first = training_loss(weights)
    for _ in range(100):
        g = training_gradient_fun(weights)
        p = 1 / (1 + np.exp(-inputs @ weights))
        np.testing.assert_allclose(g, inputs.T @ (p - targets), rtol=1e-12, atol=1e-15)
        weights -= g * 0.01
    assert training_loss(weights) < first


VMAP = getattr(funcdiff_func, "vmap", None)


@pytest.mark.skipif(VMAP is None, reason="funcdiff.func has no vmap in this build")
def test_vmap_over_the_products_matches_a_loop() -> None:
    vmap: Any = VMAP
    X, T = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))

    def f(x: Any) -> Any:
        return np.sin(x) * x

    d = np.sin(X) + X * np.cos(X)  # f' elementwise
    np.testing.assert_allclose(vmap(lambda x, u: vjp(f, x)[1](u)[0])(X, T), d * T, rtol=1e-12)
    np.testing.assert_allclose(vmap(lambda x, v: jvp(f, (x,), (v,))[1])(X, T), d * T, rtol=1e-12)
    np.testing.assert_allclose(vmap(lambda x: linearize(f, x)[1](np.ones(3)))(X), d, rtol=1e-12)
    np.testing.assert_allclose(vmap(lambda v: jvp(f, (X[0],), (v,))[1])(T), d[0] * T, rtol=1e-12)
    g = lambda x: np.sum(np.tanh(x) ** 2) * np.sum(x**2)  # noqa: E731
    np.testing.assert_allclose(
        vmap(hessian(g))(X), np.stack([hessian(g)(x) for x in X]), rtol=1e-12
    )
