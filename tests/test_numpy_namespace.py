"""funcdiff.numpy: NumPy's namespace, with the conversions NumPy cannot dispatch recorded.

Each override is checked against NumPy's own result on plain arrays (values, shapes,
dtypes), and its gradients against closed forms and central finite differences; typical
autograd-style programs ported by changing the import are differentiated and checked.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy
import pytest

import funcdiff as fd
import funcdiff.numpy as fnp
from funcdiff import functional


def central_gradient(f: Callable[[numpy.ndarray], float], x: numpy.ndarray) -> numpy.ndarray:
    """Central finite differences of a scalar function of a float array."""
    x = numpy.asarray(x, dtype=float)
    g = numpy.zeros_like(x)
    h = 1e-6
    for i in numpy.ndindex(x.shape):
        e = numpy.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def value(y: Any) -> Any:
    return y.data if isinstance(y, fd.Tensor) else numpy.asarray(y)


def grad_of(f: Callable[[fd.Tensor], Any], x: numpy.ndarray) -> numpy.ndarray:
    t = fd.tensor(x, requires_grad=True)
    (g,) = fd.grad(f(t), t)
    return g.data


def check_gradient(f: Callable[[Any], Any], x: Any) -> None:
    x = numpy.asarray(x, dtype=float)
    numeric = central_gradient(lambda y: float(value(f(fd.tensor(y)))), x)
    numpy.testing.assert_allclose(grad_of(f, x), numeric, rtol=1e-6, atol=1e-8)


def assert_same(ours: Any, theirs: Any) -> None:
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    ours, theirs = numpy.asarray(ours), numpy.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    numpy.testing.assert_array_equal(ours, theirs)


# -- the namespace ---------------------------------------------------------------------


def test_every_public_numpy_name_is_there_and_the_rest_are_numpys_own() -> None:
    names = set(numpy.__all__) | {n for n in dir(numpy) if not n.startswith("_")}
    missing = [n for n in sorted(names) if not hasattr(fnp, n)]
    assert missing == []
    overridden = set(fnp.OVERRIDES) | {"linalg", "fft", "r_", "c_"}
    for name in sorted(names - overridden):
        assert getattr(fnp, name) is getattr(numpy, name), name
    assert fnp.sin is numpy.sin and fnp.pi == numpy.pi and fnp.newaxis is None
    assert fnp.ndarray is numpy.ndarray and fnp.random is numpy.random
    assert fnp.__version__ == numpy.__version__
    for name in numpy.linalg.__all__:
        expected = "norm" if name == "norm" else None
        assert (getattr(fnp.linalg, name) is getattr(numpy.linalg, name)) != (name == expected)
    for name in numpy.fft.__all__:
        assert getattr(fnp.fft, name) is getattr(numpy.fft, name), name


def test_submodules_import_as_modules() -> None:
    import funcdiff.numpy.random as random

    import funcdiff.numpy.fft as fft
    import funcdiff.numpy.linalg as linalg

    assert random is numpy.random and fnp.linalg is linalg and fnp.fft is fft
    assert fnp.linalg.__name__ == "funcdiff.numpy.linalg"


def test_star_import_gives_the_overrides() -> None:
    namespace: dict[str, Any] = {}
    exec("from funcdiff.numpy import *", namespace)
    assert namespace["array"] is fnp.array and namespace["sin"] is numpy.sin
    assert namespace["r_"] is fnp.r_ and namespace["float64"] is fnp.float64


def test_numpy_itself_is_untouched() -> None:
    # Inside funcdiff, ``import numpy`` is the real NumPy; nothing was patched on it.
    assert numpy.array is not fnp.array and numpy.__name__ == "numpy"
    assert numpy.int64 is not fnp.int64 and numpy.r_ is not fnp.r_
    assert "funcdiff" not in numpy.__file__


# -- array / asarray ---------------------------------------------------------------------

PLAIN_ARRAY_INPUTS = [
    [1.0, 2.0],
    [[1, 2], [3, 4]],
    (1.5, numpy.float32(2.0)),
    numpy.arange(6.0).reshape(2, 3),
    3.0,
    [[True, False]],
    [numpy.ones(2), numpy.zeros(2)],
]


@pytest.mark.parametrize("obj", PLAIN_ARRAY_INPUTS, ids=repr)
@pytest.mark.parametrize("name", ["array", "asarray", "asanyarray"])
def test_array_functions_on_plain_input_are_numpys(name: str, obj: Any) -> None:
    assert_same(getattr(fnp, name)(obj), getattr(numpy, name)(obj))
    assert_same(
        getattr(fnp, name)(obj, dtype=numpy.float32), getattr(numpy, name)(obj, numpy.float32)
    )
    assert_same(fnp.array(obj, ndmin=3), numpy.array(obj, ndmin=3))


def test_array_of_nested_tensors_matches_numpy_values_and_records() -> None:
    x = numpy.array([0.3, -1.2, 2.0])
    a, b, c = (fd.tensor(v, requires_grad=True) for v in x)
    m = fnp.array([[a, b * c], [1.0, a**2]])
    expected = numpy.array([[x[0], x[1] * x[2]], [1.0, x[0] ** 2]])
    assert isinstance(m, fd.Tensor) and m.shape == (2, 2) and m.dtype == numpy.float64
    numpy.testing.assert_array_equal(m.data, expected)
    # d/d(a,b,c) sum(m * w) with w = [[1, 2], [3, 4]]: (1 + 8a, 2c, 2b).
    w = numpy.array([[1.0, 2.0], [3.0, 4.0]])
    ga, gb, gc = fd.grad((m * w).sum(), [a, b, c])
    numpy.testing.assert_allclose(
        [ga.item(), gb.item(), gc.item()], [1 + 8 * x[0], 2 * x[2], 2 * x[1]]
    )


def test_array_mixes_tensors_and_arrays_as_numpy_would() -> None:
    v = fd.tensor([1.0, 2.0], requires_grad=True)
    m = fnp.array([v, numpy.array([3.0, 4.0]), [5, 6]])
    assert m.shape == (3, 2)
    numpy.testing.assert_array_equal(m.data, numpy.array([[1, 2], [3, 4], [5, 6]], dtype=float))
    numpy.testing.assert_array_equal(fd.grad(m[:, 1].sum(), v)[0].data, [0.0, 1.0])
    check_gradient(lambda t: fnp.sum(fnp.array([t, t**2, [1.0, 1.0]]) ** 3), [0.4, -0.7])


def test_array_of_a_tensor_copies_casts_and_pads() -> None:
    t = fd.tensor([1.0, 2.0], requires_grad=True)
    copied = fnp.array(t)
    assert copied is not t and copied.requires_grad
    assert fnp.array(t, copy=False) is t and fnp.asarray(t) is t
    padded = fnp.array(t, ndmin=3)
    assert padded.shape == (1, 1, 2)
    numpy.testing.assert_array_equal(fd.grad((padded * 3.0).sum(), t)[0].data, [3.0, 3.0])
    single = fnp.asarray([t[0], t[1]], dtype=numpy.float32)
    assert single.dtype == numpy.float32 and single.requires_grad
    g = fd.grad(single.sum(), t)[0]
    assert g.dtype == numpy.float64
    numpy.testing.assert_array_equal(g.data, [1.0, 1.0])
    # An integer dtype is a constant: a Tensor that does not require grad.
    ints = fnp.array([t[0], t[1] * 2], dtype=numpy.int64)
    assert ints.dtype == numpy.int64 and not ints.requires_grad
    numpy.testing.assert_array_equal(ints.data, [1, 4])


def test_array_refuses_what_would_be_an_object_array() -> None:
    t = fd.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"array\(object\).*same shape.*object array"):
        fnp.array([t, 3.0])
    with pytest.raises(TypeError, match=r"array\(dtype\): dtype=object"):
        fnp.array([t, t], dtype=object)
    with pytest.raises(TypeError, match="not also hold objects"):
        fnp.array([t[0], "text"])
    with pytest.raises(ValueError, match=r"asarray\(a\).*same shape"):
        fnp.asarray([[t[0]], [t[0], t[1]]])


# -- r_ and c_ ---------------------------------------------------------------------------

R_KEYS = [
    (slice(0, 5, 2),),
    (slice(0, 1, 5j), 7.0),
    (numpy.array([1.0, 2.0]), 3, slice(4, 6)),
    (numpy.arange(4.0).reshape(2, 2), numpy.ones((1, 2))),
    (2.5,),
]
C_KEYS = [
    (numpy.array([1.0, 2.0]), numpy.array([3.0, 4.0])),
    (numpy.ones((2, 2)), [5.0, 6.0]),
    (1.0, 2.0),
    (slice(0, 3),),
]


@pytest.mark.parametrize("key", R_KEYS, ids=repr)
def test_r_on_plain_input_is_numpys(key: tuple) -> None:
    assert_same(fnp.r_[key], numpy.r_[key])


@pytest.mark.parametrize("key", C_KEYS, ids=repr)
def test_c_on_plain_input_is_numpys(key: tuple) -> None:
    assert_same(fnp.c_[key], numpy.c_[key])


@pytest.mark.parametrize("key", R_KEYS + [("0,2", [1.0], [2.0])], ids=repr)
def test_r_with_a_tensor_piece_matches_numpy_and_records(key: tuple) -> None:
    if isinstance(key[0], str):
        assert_same(fnp.r_[key], numpy.r_[key])  # no Tensor: directives are NumPy's
        return
    last = numpy.atleast_1d(numpy.asarray(key[-1] if not isinstance(key[-1], slice) else 0.0))
    t = (
        fd.tensor(numpy.asarray(key[-1], dtype=float), requires_grad=True)
        if not isinstance(key[-1], slice)
        else fd.tensor(last[0], requires_grad=True)
    )
    pieces = key[:-1] + (t,) if not isinstance(key[-1], slice) else key + (t,)
    plain = tuple(p.data if isinstance(p, fd.Tensor) else p for p in pieces)
    got = fnp.r_[pieces]
    expected = numpy.r_[plain]
    assert got.shape == expected.shape
    numpy.testing.assert_array_equal(got.data, expected)
    # The gradient of sum(w * r_[...]) reaches t: the weights at t's positions.
    w = numpy.arange(1.0, expected.size + 1).reshape(expected.shape)
    (g,) = fd.grad((got * w).sum(), t)
    tail = w.reshape(-1)[-t.data.size :] if t.ndim <= 1 else w[-t.shape[0] :]
    numpy.testing.assert_array_equal(g.data, tail.reshape(t.shape))


def test_c_with_tensors_matches_numpy_and_records() -> None:
    u = fd.tensor([1.0, 2.0], requires_grad=True)
    m = fnp.c_[u, numpy.array([3.0, 4.0]), u**2]
    numpy.testing.assert_array_equal(m.data, numpy.c_[[1.0, 2.0], [3.0, 4.0], [1.0, 4.0]])
    # sum(m) = sum(u) + 7 + sum(u**2): gradient 1 + 2u.
    numpy.testing.assert_array_equal(fd.grad(m.sum(), u)[0].data, [3.0, 5.0])
    s = fd.tensor(2.0, requires_grad=True)
    row = fnp.c_[s, 1.0]
    assert row.shape == numpy.c_[2.0, 1.0].shape == (1, 2)
    block = fnp.c_[numpy.ones((2, 2)), u]
    assert block.shape == (2, 3)
    check_gradient(lambda t: fnp.sum(fnp.c_[t, 0:2, t**3] ** 2), [0.5, -1.5])


def test_r_with_a_tensor_refuses_string_directives() -> None:
    t = fd.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="string directives"):
        fnp.r_["0,2", t, t]


# -- joins, reductions and the lifted functions -----------------------------------------

NESTED = [[0.5, -1.0], [2.0, 0.25]]


def nested_tensors(t: fd.Tensor) -> list:
    return [[t[0], t[1] * t[0]], [t[1], 1.0]]


def nested_plain(x: numpy.ndarray) -> list:
    return [[x[0], x[1] * x[0]], [x[1], 1.0]]


@pytest.mark.parametrize("name", fnp.JOINING)
def test_joins_of_nested_lists_of_tensors(name: str) -> None:
    x = numpy.array([0.7, -1.3])
    our, theirs = getattr(fnp, name), getattr(numpy, name)
    assert_same(our(NESTED), theirs(NESTED))
    pair = [nested_plain(x), nested_plain(2 * x)]
    got = our([nested_tensors(fd.tensor(x)), nested_tensors(fd.tensor(2 * x))])
    numpy.testing.assert_array_equal(got.data, theirs(pair))
    check_gradient(lambda t: fnp.sum(our([nested_tensors(t), nested_tensors(t**2)]) ** 2), x)


#: Call of each lifted function with plain inputs (lists) and the arguments after them.
LIFTED_CALLS: dict[str, tuple[tuple, dict]] = {
    "sum": ((), {}),
    "prod": ((), {}),
    "mean": ((), {"axis": 0}),
    "std": ((), {}),
    "var": ((), {"ddof": 1}),
    "average": ((), {"weights": [[1.0, 2.0], [3.0, 4.0]]}),
    "max": ((), {}),
    "min": ((), {"axis": 1}),
    "amax": ((), {"axis": 0}),
    "amin": ((), {}),
    "cumsum": ((), {}),
    "cumprod": ((), {"axis": 0}),
    "ptp": ((), {}),
    "nansum": ((), {}),
    "nanmean": ((), {}),
    "nanvar": ((), {}),
    "nanstd": ((), {"axis": 0}),
    "median": ((), {"axis": 1}),
    "transpose": ((), {}),
    "reshape": (((4,),), {}),
    "ravel": ((), {}),
    "squeeze": ((), {}),
    "expand_dims": ((0,), {}),
    "atleast_1d": ((), {}),
    "atleast_2d": ((), {}),
    "atleast_3d": ((), {}),
    "diag": ((), {}),
    "trace": ((), {}),
    "clip": ((-0.5, 1.5), {}),
    "append": (([3.0, 4.0],), {}),
    "diagflat": ((), {"k": 1}),
    "cov": ((), {}),
    "corrcoef": ((), {"rowvar": False}),
    "dot": (([[1.0, 2.0], [3.0, 4.0]],), {}),
    "vdot": (([[1.0, 2.0], [3.0, 4.0]],), {}),
    "outer": (([1.0, 2.0],), {}),
    "inner": (([[1.0, 2.0], [3.0, 4.0]],), {}),
    "matmul": (([[1.0, 2.0], [3.0, 4.0]],), {}),
    "tensordot": (([[1.0, 2.0], [3.0, 4.0]],), {"axes": 2}),
    "kron": (([1.0, 2.0],), {}),
    "where": (([[True, False], [False, True]], 0.0), {}),
}


def test_every_lifted_function_is_tested() -> None:
    assert set(LIFTED_CALLS) == set(fnp.LIFTED)


@pytest.mark.parametrize("name", sorted(LIFTED_CALLS))
def test_lifted_functions_match_numpy_and_differentiate(name: str) -> None:
    rest, kwargs = LIFTED_CALLS[name]
    our, theirs = getattr(fnp, name), getattr(numpy, name)
    assert our.__name__ == name and our.__wrapped__ is theirs

    def call(fn: Callable, first: Any) -> Any:
        if name == "where":  # where(condition, x, y): lift x (the differentiable one)
            return fn(rest[0], first, rest[1])
        return fn(first, *rest, **kwargs)

    assert_same(call(our, NESTED), call(theirs, NESTED))
    x = numpy.array([0.7, -1.3])
    got = call(our, nested_tensors(fd.tensor(x, requires_grad=True)))
    assert isinstance(got, fd.Tensor) and got.requires_grad
    numpy.testing.assert_allclose(got.data, call(theirs, nested_plain(x)), rtol=1e-15)
    check_gradient(lambda t: fnp.sum(fnp.sin(call(our, nested_tensors(t)))), x)


def test_reductions_of_lists_of_tensors_against_closed_forms() -> None:
    x = numpy.array([0.3, 1.1, -0.4])
    t = fd.tensor(x, requires_grad=True)
    n = x.size

    def items() -> list:
        return [t[0], t[1], t[2]]

    numpy.testing.assert_allclose(fd.grad(fnp.mean(items()), t)[0].data, numpy.full(n, 1 / n))
    numpy.testing.assert_allclose(fd.grad(fnp.var(items()), t)[0].data, 2 * (x - x.mean()) / n)
    numpy.testing.assert_allclose(
        fd.grad(fnp.std(items()), t)[0].data, (x - x.mean()) / (n * x.std()), rtol=1e-12
    )
    numpy.testing.assert_allclose(fd.grad(fnp.sum(items()), t)[0].data, numpy.ones(n))
    norm = fnp.linalg.norm(items())
    numpy.testing.assert_allclose(norm.data, numpy.linalg.norm(x))
    numpy.testing.assert_allclose(fd.grad(norm, t)[0].data, x / numpy.linalg.norm(x))
    # A second derivative through the lifted list: d²/dt² sum([t0², t1², t2²]) = 2 I.
    h = functional.hessian(lambda u: fnp.sum([u[0] ** 2, u[1] ** 2, u[2] ** 2]), t)
    numpy.testing.assert_allclose(h.data, 2 * numpy.eye(n))


def test_norm_of_plain_input_and_keyword_arguments() -> None:
    assert_same(fnp.linalg.norm([3.0, 4.0]), numpy.linalg.norm([3.0, 4.0]))
    m = [[1.0, 2.0], [3.0, 4.0]]
    assert_same(fnp.linalg.norm(m, ord="fro"), numpy.linalg.norm(m, ord="fro"))
    t = fd.tensor([3.0, 4.0], requires_grad=True)
    n = fnp.linalg.norm(x=[t[0], t[1]], ord=1)
    numpy.testing.assert_allclose(fd.grad(n, t)[0].data, [1.0, 1.0])


def test_a_ragged_list_in_a_reduction_names_the_function() -> None:
    t = fd.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"mean\(a\): .*same shape"):
        fnp.mean([t, t[0]])
    with pytest.raises(ValueError, match=r"stack\(arrays\[0\]\): .*same shape"):
        fnp.stack([[t, t[0]], [t, t]])


# -- scalar casts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["float64", "float32", "double", "int64", "int32", "uint8", "intp"]
)
def test_cast_types_behave_as_numpys_on_plain_values(name: str) -> None:
    ours, theirs = getattr(fnp, name), getattr(numpy, name)
    assert_same(ours(3), theirs(3))
    assert_same(ours("7"), theirs("7"))
    assert_same(ours([1, 2]), theirs([1, 2]))
    assert type(ours(2)) is theirs  # NumPy's scalar, not the subclass
    assert numpy.dtype(ours) == numpy.dtype(theirs)
    assert numpy.zeros(2, dtype=ours).dtype == numpy.dtype(theirs)
    assert isinstance(theirs(1), ours) and issubclass(theirs, ours)
    assert numpy.issubdtype(numpy.dtype(theirs), ours)
    assert numpy.arange(3).astype(ours).dtype == numpy.dtype(theirs)
    assert pickle.loads(pickle.dumps(ours)) is ours
    assert pickle.loads(pickle.dumps(ours(5))) == theirs(5)


def test_aliases_share_one_cast_type() -> None:
    assert fnp.double is fnp.float64 and fnp.single is fnp.float32
    assert (fnp.intp is fnp.int64) == (numpy.intp is numpy.int64)


def test_float_types_are_numpys_and_astype_casts_a_tensor() -> None:
    # NumPy's own types, as HIPS autograd's (its tests assert g.dtype.type is np.float32).
    for name in ("float16", "float32", "float64", "half", "single", "double", "longdouble"):
        assert getattr(fnp, name) is getattr(numpy, name)
    x = fd.tensor(1.5, requires_grad=True)
    # NumPy's type converts the Tensor to numbers: refused, naming the recorded cast.
    with pytest.raises(RuntimeError, match=r"t\.astype\(np\.float64\) records"):
        fnp.float64(x**2)
    y = (x**2).astype(fnp.float64)
    assert isinstance(y, fd.Tensor) and y.shape == () and y.requires_grad
    numpy.testing.assert_allclose(fd.grad(y, x)[0].data, 3.0)
    single = (x * 3.0).astype(fnp.float32)
    assert single.dtype.type is fnp.float32 and single.requires_grad
    g = fd.grad(single, x)[0]
    assert g.dtype == numpy.float64 and g.item() == 3.0
    vec = fnp.array([x, x**3]).astype(fnp.float64)
    numpy.testing.assert_allclose(fd.grad(vec.sum(), x)[0].data, 1 + 3 * 1.5**2)
    check_gradient(lambda t: fnp.sum(t**2).astype(fnp.float64) * 2.0, [0.5, -2.0])
    # Plain values: NumPy's scalars and arrays, as before.
    assert type(fnp.float32(2)) is numpy.float32


def test_integer_cast_of_a_tensor_is_a_constant() -> None:
    x = fd.tensor([1.7, -2.2], requires_grad=True)
    n = fnp.int64(x)
    assert isinstance(n, fd.Tensor) and not n.requires_grad and n.dtype == numpy.int64
    numpy.testing.assert_array_equal(n.data, numpy.int64(numpy.array([1.7, -2.2])))
    # Used in arithmetic it is a constant: d/dx (x * int64(x)) = int64(x).
    (g,) = fd.grad((x * n).sum(), x)
    numpy.testing.assert_array_equal(g.data, [1.0, -2.0])


# -- autograd-style programs ported by changing the import ------------------------------


def test_tanh_and_its_derivatives() -> None:
    np = fnp

    def tanh(x: Any) -> Any:
        y = np.exp(-2.0 * x)
        return (1.0 - y) / (1.0 + y)

    x = fd.tensor(0.6, requires_grad=True)
    (d1,) = fd.grad(tanh(x), x, create_graph=True)
    (d2,) = fd.grad(d1, x)
    t = numpy.tanh(0.6)
    numpy.testing.assert_allclose(d1.data, 1 - t**2)
    numpy.testing.assert_allclose(d2.data, -2 * t * (1 - t**2))
    # Elementwise over a grid, through functional.jacobian: a diagonal of 1 - tanh².
    grid = numpy.linspace(-2.0, 2.0, 5)
    jac = functional.jacobian(tanh, fd.tensor(grid))
    numpy.testing.assert_allclose(jac.data, numpy.diag(1 - numpy.tanh(grid) ** 2), atol=1e-12)


def test_logistic_regression_with_parameters_from_a_list() -> None:
    np = fnp
    rng = numpy.random.default_rng(0)
    inputs = rng.normal(size=(6, 3))
    targets = numpy.array([1, 0, 1, 1, 0, 0])

    def loss(theta: Any) -> Any:
        weights = np.array([theta[0], theta[1], theta[2] * 2.0])  # built from a list
        bias = theta[3]
        z = np.dot(inputs, weights) + bias
        p = 0.5 * (np.tanh(z / 2.0) + 1.0)
        likelihood = p * targets + (1 - p) * (1 - targets)
        return -np.sum(np.log(likelihood))

    theta = numpy.array([0.2, -0.4, 0.1, 0.05])
    check_gradient(loss, theta)
    # Closed form: dL/dz = p - y; the chain through w = (t0, t1, 2 t2) and b = t3.
    w = numpy.array([theta[0], theta[1], 2 * theta[2]])
    p = 1 / (1 + numpy.exp(-(inputs @ w + theta[3])))
    dz = p - targets
    expected = numpy.r_[inputs.T @ dz * [1.0, 1.0, 2.0], dz.sum()]
    numpy.testing.assert_allclose(grad_of(loss, theta), expected, rtol=1e-10)


def test_rnn_loop_stacking_outputs_with_array_of_a_list() -> None:
    np = fnp
    rng = numpy.random.default_rng(1)
    xs = rng.normal(size=(4, 2))

    def run(params: Any) -> Any:
        w_in = params[:4].reshape(2, 2)
        w_rec = params[4:8].reshape(2, 2)
        h = np.zeros(2)
        outputs = []
        for x in xs:
            h = np.tanh(np.dot(x, w_in) + np.dot(h, w_rec))
            outputs.append(np.sum(h * params[8:10]))
        return np.array(outputs)  # a list of 0-d Tensors

    params = rng.normal(size=10) * 0.5
    out = run(fd.tensor(params))
    assert out.shape == (4,)
    jac = functional.jacobian(run, fd.tensor(params))
    h = 1e-6
    numeric = numpy.stack(
        [
            (run(fd.tensor(params + h * e)).data - run(fd.tensor(params - h * e)).data) / (2 * h)
            for e in numpy.eye(10)
        ],
        axis=1,
    )
    numpy.testing.assert_allclose(jac.data, numeric, rtol=1e-6, atol=1e-9)
    check_gradient(lambda p: np.mean(run(p) ** 2), params)


def test_parameter_vector_pack_and_unpack_with_r_() -> None:
    np = fnp
    shapes = [(2, 2), (2,), ()]

    def pack(parts: list) -> Any:
        return np.r_[tuple(np.ravel(p) for p in parts)]

    def unpack(vector: Any) -> list:
        parts, start = [], 0
        for shape in shapes:
            size = int(numpy.prod(shape))
            parts.append(vector[start : start + size].reshape(shape))
            start += size
        return parts

    def objective(vector: Any) -> Any:
        w, b, s = unpack(vector)
        repacked = pack([w * s, b, s])  # round trip through r_
        return np.sum(np.tanh(repacked) ** 2) + np.sum(np.dot(w, b))

    v0 = numpy.array([0.3, -0.2, 0.5, 0.1, 0.7, -0.6, 1.2])
    assert pack([numpy.ones((2, 2)), numpy.zeros(2), 3.0]).tolist() == [1, 1, 1, 1, 0, 0, 3]
    parts = unpack(fd.tensor(v0, requires_grad=True))
    packed = pack(parts)
    numpy.testing.assert_array_equal(packed.data, v0)
    numpy.testing.assert_array_equal(fd.grad((packed * 2.0).sum(), parts[0])[0].data, 2.0)
    check_gradient(objective, v0)


def test_plain_numpy_code_keeps_working() -> None:
    # The same program with NumPy itself: flat lists reach funcdiff by dispatch already.
    x = fd.tensor([0.5, 1.5], requires_grad=True)
    y = numpy.stack([x[0] ** 2, x[1]])
    numpy.testing.assert_array_equal(fd.grad(y.sum(), x)[0].data, [1.0, 1.0])
    with pytest.raises(RuntimeError, match="Can't convert a Tensor that requires grad"):
        numpy.array([x[0], x[1]])
