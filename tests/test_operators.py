"""Every operator and Tensor method, through the Tensor API, against central differences
at first and second order, on broadcasting pairs, 0-d and empty arrays."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import funcdiff as fd


def central_gradient(f, xs, eps=1e-6):
    """Gradient of scalar f(*xs) by central differences, one array per input."""
    grads = []
    for k, x in enumerate(xs):
        g = np.zeros_like(x)
        for m in range(x.size):
            step = eps * max(1.0, abs(x.flat[m]))
            plus = [y.copy() for y in xs]
            minus = [y.copy() for y in xs]
            plus[k].flat[m] += step
            minus[k].flat[m] -= step
            g.flat[m] = (f(*plus) - f(*minus)) / (2 * step)
        grads.append(g)
    return grads


def check(fn, *arrays, rtol=1e-6, atol=1e-7):
    """First and second order of sum(w * fn(*tensors)) against central differences."""
    rng = np.random.default_rng(7)
    out_shape = np.shape(fn(*[fd.tensor(a) for a in arrays]).data)
    w = rng.standard_normal(out_shape)

    def scalar(*xs):
        return float(np.sum(w * fn(*[fd.tensor(x) for x in xs]).data))

    def gradient(*xs):
        ts = [fd.tensor(x, requires_grad=True) for x in xs]
        gs = fd.grad((fn(*ts) * w).sum(), ts, allow_unused=True, materialize_grads=True)
        return [g.data for g in gs]

    ts = [fd.tensor(a, requires_grad=True) for a in arrays]
    gs = fd.grad(
        (fn(*ts) * w).sum(), ts, create_graph=True, allow_unused=True, materialize_grads=True
    )
    for g, expected in zip(gs, central_gradient(scalar, list(arrays))):
        np.testing.assert_allclose(g.data, expected, rtol=rtol, atol=atol)
    # Second order: Hessian-vector product against differences of the gradient.
    vs = [rng.standard_normal(a.shape) for a in arrays]
    live = [(g, v) for g, v in zip(gs, vs) if g.requires_grad]
    if not live:
        return
    hv = fd.grad(
        [g for g, _ in live], ts, [v for _, v in live], allow_unused=True, materialize_grads=True
    )
    h = 1e-5
    plus = gradient(*[a + h * v for a, v in zip(arrays, vs)])
    minus = gradient(*[a - h * v for a, v in zip(arrays, vs)])
    for got, p, m in zip(hv, plus, minus):
        np.testing.assert_allclose(got.data, (p - m) / (2 * h), rtol=1e-4, atol=1e-6)


SHAPE_PAIRS = [((2, 3), (2, 3)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ()), ((0, 3), (3,))]
BINARY_OPS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "pow": operator.pow,
    "radd": lambda a, b: 1.5 + a + b,
    "rsub": lambda a, b: 1.5 - a - b,
    "rmul": lambda a, b: 1.5 * a * b,
    "rtruediv": lambda a, b: 1.5 / a + b,
    "rpow": lambda a, b: 1.5**a + b,
    "floordiv": lambda a, b: a // b + a * b,
    "mod": lambda a, b: a % b,
}


@pytest.mark.parametrize("name", sorted(BINARY_OPS))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_binary_operator(name, shapes) -> None:
    rng = np.random.default_rng(0)
    low, high = (0.1, 0.9) if name == "mod" else (0.6, 1.9)
    a = np.asarray(rng.uniform(low, high, shapes[0]))
    b = np.asarray(rng.uniform(0.6 if name != "mod" else 1.1, 1.9, shapes[1]))
    check(BINARY_OPS[name], a, b)


def test_matmul_operator() -> None:
    rng = np.random.default_rng(1)
    check(operator.matmul, rng.standard_normal((3, 4)), rng.standard_normal((4, 2)))
    check(operator.matmul, rng.standard_normal((3, 4)), rng.standard_normal(4))
    check(lambda a, b: a.T @ b, rng.standard_normal((4, 3)), rng.standard_normal(4))
    check(lambda a, b: np.ones((2, 4)) @ (a * b), rng.standard_normal(4), rng.standard_normal(4))


UNARY = {
    "neg": lambda a: -a,
    "pos": lambda a: +a,
    "abs": lambda a: abs(a),
    "abs_method": lambda a: a.abs() * a,
    "T": lambda a: a.T * 2.0,
    "sum": lambda a: a.sum(),
    "sum_axis": lambda a: a.sum(axis=-1 if a.ndim else None, keepdims=True) * a,
    "mean": lambda a: a.mean(axis=0 if a.ndim else None),
    "reshape": lambda a: a.reshape(-1) * a.reshape(a.size)[::-1],
    "transpose": lambda a: a.transpose() @ a if a.ndim == 2 else a.transpose(),
    "flatten": lambda a: a.flatten() ** 2,
    "ravel": lambda a: a.ravel() ** 3,
    "getitem": lambda a: (a[..., ::-1] if a.ndim else a[...]) * a,
    "copy": lambda a: a.copy() * a,
    "astype": lambda a: a.astype(np.float64) ** 2,
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(3, 4), (), (0, 2)], ids=str)
def test_unary_operator_and_method(name, shape) -> None:
    if name == "transpose" and shape == ():
        shape = (3,)
    signs = np.where(np.arange(int(np.prod(shape))).reshape(shape) % 2, 1.0, -1.0)
    a = np.asarray(np.random.default_rng(2).uniform(0.3, 1.7, shape) * signs)
    check(UNARY[name], a)


METHODS = {
    "prod": lambda a: a.prod(axis=1),
    "max": lambda a: a.max(axis=0),
    "min": lambda a: a.min(),
    "var": lambda a: a.var(axis=1, ddof=1),
    "std": lambda a: a.std(),
    "cumsum": lambda a: a.cumsum(axis=1),
    "squeeze": lambda a: a[None].squeeze(0) * a,
    "clip": lambda a: a.clip(-0.5, 0.5) * a,
    "dot": lambda a: a.dot(a.T),
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_numpy_like_methods(name) -> None:
    a = np.array([[0.3, -1.2, 0.8, 2.1], [1.7, -0.1, -0.7, 1.1], [0.2, 0.9, -1.4, 0.6]])
    check(METHODS[name], a)


def test_inplace_operators_record_correct_gradients() -> None:
    def f(a, b):
        y = a * 1.0
        y += b
        y *= b
        y -= a
        y /= b + 3.0
        y **= 2
        return y

    rng = np.random.default_rng(3)
    check(f, rng.uniform(0.5, 1.5, (2, 3)), rng.uniform(0.5, 1.5, (3,)))
