"""funcdiff.functional (torch.autograd.functional semantics).

Values are checked against closed forms and central finite differences of the same
NumPy code run on plain ndarrays; funcdiff is compared with itself only in
mode-agreement tests (vectorized vs loop, forward vs reverse strategy, chunked vs
unchunked, vjp vs jvp through the dot-product identity).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest

import funcdiff as fd
from funcdiff import _jacobian
from funcdiff._jacobian import basis_rows, construct_standard_basis_for
from funcdiff.functional import (
    hessian,
    hvp,
    jacobian,
    jvp,
    vhp,
    vjp,
)

RTOL = 1e-6
ATOL = 1e-8


# --------------------------------------------------------------------------- references
def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def numeric_jacobian(fn: Callable, arrays, eps: float = 1e-6) -> list[list[np.ndarray]]:
    """Central differences: ``blocks[i][j]`` of shape ``out_i.shape + in_j.shape``."""
    arrays = [np.array(a, dtype=float) for a in arrays]

    def call(arrs):
        return [np.asarray(o, dtype=float) for o in _as_tuple(fn(*arrs))]

    base = call(arrays)
    blocks = [[np.zeros(o.shape + a.shape) for a in arrays] for o in base]
    for j, a in enumerate(arrays):
        for k in np.ndindex(a.shape):
            plus = [b.copy() for b in arrays]
            minus = [b.copy() for b in arrays]
            plus[j][k] += eps
            minus[j][k] -= eps
            fp, fm = call(plus), call(minus)
            for i in range(len(base)):
                blocks[i][j][(Ellipsis, *k)] = (fp[i] - fm[i]) / (2 * eps)
    return blocks


def numeric_hessian(fn: Callable, arrays, h: float = 1e-4) -> list[list[np.ndarray]]:
    """Second central differences of a scalar function: ``H[i][j]``."""
    arrays = [np.array(a, dtype=float) for a in arrays]

    def value(shifts):
        arrs = [a.copy() for a in arrays]
        for j, k, s in shifts:
            arrs[j][k] += s
        return float(np.sum(fn(*arrs)))

    H = [[np.zeros(a.shape + b.shape) for b in arrays] for a in arrays]
    for i, a in enumerate(arrays):
        for ka in np.ndindex(a.shape):
            for j, b in enumerate(arrays):
                for kb in np.ndindex(b.shape):
                    pp = value([(i, ka, h), (j, kb, h)])
                    pm = value([(i, ka, h), (j, kb, -h)])
                    mp = value([(i, ka, -h), (j, kb, h)])
                    mm = value([(i, ka, -h), (j, kb, -h)])
                    H[i][j][(*ka, *kb)] = (pp - pm - mp + mm) / (4 * h * h)
    return H


def contract_left(v: np.ndarray, block: np.ndarray) -> np.ndarray:
    """``v^T J``: sum over the output axes of a Jacobian block."""
    return np.tensordot(v, block, axes=v.ndim)


def contract_right(block: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``J v``: sum over the input axes of a Jacobian block."""
    return np.tensordot(
        block, v, axes=(tuple(range(block.ndim - v.ndim, block.ndim)), tuple(range(v.ndim)))
    )


def close(t, expected, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert isinstance(t, fd.Tensor), type(t)
    np.testing.assert_allclose(t.detach().numpy(), expected, rtol=rtol, atol=atol)


def tensor(values, requires_grad: bool = False) -> fd.Tensor:
    return fd.tensor(np.asarray(values, dtype=float), requires_grad=requires_grad)


def unpack_blocks(res, in_tuple: bool, out_tuple: bool, n_in: int, n_out: int):
    """The Jacobian blocks ``[i][j]`` of a jacobian() result, checking its nesting."""
    if out_tuple and in_tuple:
        assert isinstance(res, tuple) and len(res) == n_out
        assert all(isinstance(r, tuple) and len(r) == n_in for r in res)
        return res
    if out_tuple:
        assert isinstance(res, tuple) and len(res) == n_out
        return tuple((r,) for r in res)
    if in_tuple:
        assert isinstance(res, tuple) and len(res) == n_in
        return (res,)
    assert isinstance(res, fd.Tensor)
    return ((res,),)


def no_history(*objs) -> bool:
    flat = []
    for o in objs:
        stack = [o]
        while stack:
            e = stack.pop()
            if isinstance(e, tuple):
                stack.extend(e)
            else:
                flat.append(e)
    return all(isinstance(t, fd.Tensor) and t.grad_fn is None and not t.requires_grad for t in flat)


# --------------------------------------------------------------------------- test functions
RNG = np.random.default_rng(20240607)
X0 = RNG.uniform(-1.5, 1.5, (2, 3))
Y0 = RNG.uniform(-1.0, 1.0, (3,))
YC = RNG.uniform(-1.0, 1.0, (3,))  # stands in for y when there is a single input


def core(x, y):
    """Two outputs, each depending on both inputs: (2,) and (3,)."""
    return np.sin(x) @ y, np.sum(x * x) * np.exp(y)


IN_KINDS = ["single", "tuple1", "tuple2"]
OUT_KINDS = ["single", "tuple1", "tuple2"]


def make_case(in_kind: str, out_kind: str):
    """(func, inputs as ndarrays, is_inputs_tuple, is_outputs_tuple)."""

    def select(outs):
        if out_kind == "single":
            return outs[0]
        if out_kind == "tuple1":
            return (outs[0],)
        return outs

    if in_kind == "tuple2":
        return (lambda x, y: select(core(x, y))), [X0, Y0], True, out_kind != "single"
    return (lambda x: select(core(x, YC))), [X0], in_kind == "tuple1", out_kind != "single"


def pack_inputs(arrays, in_tuple: bool, requires_grad: bool = False):
    ts = tuple(tensor(a, requires_grad) for a in arrays)
    return ts if in_tuple else ts[0]


def scalar_core(x, y):
    """A scalar whose Hessian has every block non-zero and input-dependent."""
    return np.sum(np.sin(x) @ y) + np.sum(x * x) * np.sum(y * y * y)


def make_scalar_case(in_kind: str):
    if in_kind == "tuple2":
        return scalar_core, [X0, Y0], True
    return (lambda x: scalar_core(x, YC)), [X0], in_kind == "tuple1"


# --------------------------------------------------------------------------- jacobian
JAC_MODES = {
    "loop": {},
    "loop-strict": {"strict": True},
    "vectorized": {"vectorize": True},
    "vectorized-chunk2": {"vectorize": True, "chunk_size": 2},
    "forward-loop": {"strategy": "forward-mode"},
    "forward-vectorized": {"strategy": "forward-mode", "vectorize": True},
    "forward-chunk4": {"strategy": "forward-mode", "vectorize": True, "chunk_size": 4},
}


@pytest.mark.parametrize("mode", list(JAC_MODES))
@pytest.mark.parametrize("out_kind", OUT_KINDS)
@pytest.mark.parametrize("in_kind", IN_KINDS)
def test_jacobian_structure_and_values(in_kind: str, out_kind: str, mode: str) -> None:
    func, arrays, in_tuple, out_tuple = make_case(in_kind, out_kind)
    expected = numeric_jacobian(func, arrays)
    res = jacobian(func, pack_inputs(arrays, in_tuple), **JAC_MODES[mode])
    n_out = 1 if out_kind != "tuple2" else 2
    blocks = unpack_blocks(res, in_tuple, out_tuple, len(arrays), n_out)
    for i in range(n_out):
        for j in range(len(arrays)):
            assert blocks[i][j].shape == expected[i][j].shape
            close(blocks[i][j], expected[i][j])
    assert no_history(res)


@pytest.mark.parametrize("mode", ["loop", "vectorized", "vectorized-chunk2"])
def test_jacobian_create_graph_single_input(mode: str) -> None:
    # f = x sin x elementwise: J = diag(d), d = sin x + x cos x, d' = 2 cos x - x sin x
    x0 = np.array([0.3, -1.2, 2.0])
    x = tensor(x0, requires_grad=True)
    J = jacobian(lambda x: x * np.sin(x), x, create_graph=True, **JAC_MODES[mode])
    assert J.grad_fn is not None
    close(J, np.diag(np.sin(x0) + x0 * np.cos(x0)))
    W = RNG.normal(size=(3, 3))
    (g,) = fd.grad(np.sum(J * W), x)
    close(g, np.diag(W) * (2 * np.cos(x0) - x0 * np.sin(x0)), rtol=1e-12)


@pytest.mark.parametrize("mode", ["loop", "vectorized", "vectorized-chunk2"])
def test_jacobian_create_graph_two_inputs(mode: str) -> None:
    # f = x*x*y elementwise: J_x = diag(2xy), J_y = diag(x^2)
    x0, y0 = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.3, -0.7])
    x, y = tensor(x0, True), tensor(y0, True)
    jx, jy = jacobian(lambda x, y: x * x * y, (x, y), create_graph=True, **JAC_MODES[mode])
    close(jx, np.diag(2 * x0 * y0))
    close(jy, np.diag(x0 * x0))
    W1, W2 = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3))
    gx, gy = fd.grad(np.sum(jx * W1) + np.sum(jy * W2), (x, y))
    close(gx, np.diag(W1) * 2 * y0 + np.diag(W2) * 2 * x0, rtol=1e-12)
    close(gy, np.diag(W1) * 2 * x0, rtol=1e-12)


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_create_graph_through_non_leaf_input(vectorize: bool) -> None:
    # x = cos z; J = diag(d(x)), d = sin x + x cos x; sum(exp(J)) has
    # d/dz = exp(d) d'(x) (-sin z) (the off-diagonal exp(0) terms are constant).
    z0 = np.array([0.4, 1.1, -0.6])
    z = tensor(z0, True)
    x = np.cos(z)
    J = jacobian(lambda x: x * np.sin(x), x, create_graph=True, vectorize=vectorize)
    (gz,) = fd.grad(np.sum(np.exp(J)), z)
    xv = np.cos(z0)
    d = np.sin(xv) + xv * np.cos(xv)
    dd = 2 * np.cos(xv) - xv * np.sin(xv)
    close(gz, np.exp(d) * dd * -np.sin(z0), rtol=1e-12)


C_EXPAND = np.array([1.0, -2.0, 3.0, 0.5])


def test_jacobian_output_examples() -> None:
    # torch test_jacobian_output / test_jacobian_scalar, with closed forms
    x0 = RNG.normal(size=(4, 4))
    for vec in (False, True):
        J = jacobian(lambda x: np.sum(np.exp(x), axis=1), tensor(x0), vectorize=vec)
        expected = np.zeros((4, 4, 4))
        for a in range(4):
            expected[a, a, :] = np.exp(x0[a])
        close(J, expected, rtol=1e-14)
        close(jacobian(lambda x: x * 1.0, tensor(x0[0]), vectorize=vec), np.eye(4))
        close(jacobian(lambda x: np.sum(x), tensor(x0), vectorize=vec), np.ones((4, 4)))
        Jx = jacobian(lambda x: x * C_EXPAND, tensor(0.7), vectorize=vec)
        assert Jx.shape == (4,)
        close(Jx, C_EXPAND)


def test_jacobian_two_inputs_block_shapes() -> None:
    # torch test_jacobian_err_check: f(a, b) = (b, 3 a[:3])
    a0, b0 = RNG.normal(size=4), RNG.normal(size=5)
    for vec in (False, True):
        res = jacobian(lambda a, b: (b * 1.0, 3 * a[:3]), (tensor(a0), tensor(b0)), vectorize=vec)
        assert [[t.shape for t in row] for row in res] == [[(5, 4), (5, 5)], [(3, 4), (3, 5)]]
        close(res[0][0], np.zeros((5, 4)))
        close(res[0][1], np.eye(5))
        close(res[1][0], 3 * np.eye(4)[:3])
        close(res[1][1], np.zeros((3, 5)))


def test_jacobian_empty_output_and_zero_dim() -> None:
    x0 = np.array([1.0, 2.0])
    for kw in ({}, {"vectorize": True}, {"strategy": "forward-mode", "vectorize": True}):
        J = jacobian(lambda x: x[:0] * 2.0, tensor(x0), **kw)
        assert J.shape == (0, 2)
        H = hessian(
            lambda x: x * x * x,
            tensor(1.5),
            **{k.replace("strategy", "outer_jacobian_strategy"): v for k, v in kw.items()},
        )
        assert H.shape == ()
        close(H, 9.0)


# --------------------------------------------------------------------------- mode agreement
def _agree_cases():
    r = np.random.default_rng(7)
    yield "simple", (lambda x: 3 * x * x), [r.normal(size=(2, 3, 5))]
    yield (
        "multi_input",
        (lambda x, y: (np.cos(x) * x) @ np.sin(y)),
        [
            r.normal(size=(2, 3)),
            r.normal(size=(3, 5)),
        ],
    )
    yield (
        "multi_input_multi_output",
        (lambda x, y: ((x * x) @ y, x @ (np.sum(x, axis=1) * y), np.sum(y))),
        [r.normal(size=(5, 3)), r.normal(size=(3, 5))],
    )
    yield "unrelated_outputs", (lambda x, y: (x, y, x, y)), [r.normal(size=3), r.normal(size=2)]
    yield (
        "zero_dim",
        (lambda x, y: (np.sum(x), np.sum(y), x * y)),
        [
            r.normal(size=3),
            r.normal(size=3),
        ],
    )
    yield "zero_dim_expand", (lambda x: x * np.ones(3)), [np.array(0.7)]
    yield "zero_dim_broadcast", (lambda x, y: (np.sum(y), x * y)), [np.array(0.3), r.normal(size=1)]


AGREE = list(_agree_cases())


def _flat(res):
    out = []
    stack = [res]
    while stack:
        e = stack.pop(0)
        if isinstance(e, tuple):
            stack[:0] = list(e)
        else:
            out.append(e)
    return out


def _assert_same(a, b) -> None:
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb)
    for ta, tb in zip(fa, fb, strict=True):
        assert ta.shape == tb.shape and ta.dtype == tb.dtype
        np.testing.assert_allclose(ta.numpy(), tb.numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name, func, arrays", AGREE, ids=[c[0] for c in AGREE])
def test_jacobian_vectorize_and_forward_agree_with_loop(name, func, arrays) -> None:
    inputs = tuple(tensor(a) for a in arrays)
    ref = jacobian(func, inputs)
    expected = numeric_jacobian(func, arrays)
    out_tuple = isinstance(func(*arrays), tuple)
    blocks = unpack_blocks(ref, True, out_tuple, len(arrays), len(expected))
    for i, row in enumerate(expected):
        for j, e in enumerate(row):
            close(blocks[i][j], e)
    total = sum(int(np.prod(np.shape(o))) for o in _as_tuple(func(*arrays)))
    n_in = sum(a.size for a in arrays)
    for kw in (
        {"vectorize": True},
        {"vectorize": True, "chunk_size": 1},
        {"vectorize": True, "chunk_size": 3},
        {"vectorize": True, "chunk_size": total + 5},
        {"strategy": "forward-mode"},
        {"strategy": "forward-mode", "vectorize": True},
        {"strategy": "forward-mode", "vectorize": True, "chunk_size": 2},
        {"strategy": "forward-mode", "vectorize": True, "chunk_size": n_in},
    ):
        _assert_same(jacobian(func, inputs, **kw), ref)


def test_jacobian_block_dtypes_by_strategy() -> None:
    # reverse-mode blocks take the input's dtype, forward-mode blocks the output's
    x = fd.tensor(np.array([1.0, 2.0], dtype=np.float32))
    y = fd.tensor(np.array([3.0, -1.0]))

    def f(x, y):
        return x * x, x * y  # float32, float64

    for kw in ({}, {"vectorize": True}):
        rev = jacobian(f, (x, y), **kw)
        assert [[b.dtype for b in row] for row in rev] == [[np.float32, np.float64]] * 2
        close(rev[0][0], np.diag([2.0, 4.0]))
        close(rev[1][1], np.diag([1.0, 2.0]))
    fwd = jacobian(f, (x, y), strategy="forward-mode", vectorize=True)
    assert [[b.dtype for b in row] for row in fwd] == [[np.float32] * 2, [np.float64] * 2]
    close(fwd[1][0], np.diag([3.0, -1.0]))
    _assert_same(jacobian(f, (x, y), vectorize=True), jacobian(f, (x, y)))


def test_vectorized_jacobian_uses_one_batched_backward_pass(monkeypatch) -> None:
    calls = []
    real = _jacobian.grad

    def counting(*args, **kwargs):
        calls.append(kwargs.get("is_grads_batched", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(_jacobian, "grad", counting)
    x = tensor(RNG.normal(size=(3, 4)))
    f = lambda x: (np.sin(x), np.sum(x * x))  # 13 output elements
    jacobian(f, x, vectorize=True)
    assert calls == [True]
    calls.clear()
    jacobian(f, x, vectorize=True, chunk_size=5)
    assert calls == [True, True, True]
    calls.clear()
    # The default batches the row loop too (same rows, bounded memory); strict mode
    # keeps one pass per row, so that its checks see every row.
    jacobian(f, x)
    assert calls == [True]
    calls.clear()
    jacobian(f, x, chunk_size=5)
    assert calls == [True, True, True]
    calls.clear()
    jacobian(f, x, strict=True)
    assert calls == [False] * 13
    calls.clear()
    real_push = _jacobian.push_forward

    def counting_push(*args, **kwargs):
        calls.append(("push", kwargs.get("batched", False)))
        return real_push(*args, **kwargs)

    monkeypatch.setattr(_jacobian, "push_forward", counting_push)
    jacobian(f, x, strategy="forward-mode", vectorize=True)
    # one batched forward-mode pass pushes the whole input basis through the graph (sin
    # and multiply have tangent maps; only sum's vjp is transposed, by one small pass)
    assert calls == [("push", True)]
    calls.clear()
    jacobian(f, x, strategy="forward-mode", vectorize=True, chunk_size=5)
    assert calls == [("push", True)] * 3


def test_vectorize_emits_no_warnings() -> None:
    x = tensor(RNG.normal(size=(2, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jacobian(lambda a: np.sum(a * a), x, vectorize=True)
        hessian(lambda a: np.sum(a * a), x, vectorize=True)
        jacobian(lambda a: a * a, x, vectorize=True, strategy="forward-mode")
        hessian(
            lambda a: np.sum(a * a * a), x, vectorize=True, outer_jacobian_strategy="forward-mode"
        )


@pytest.mark.parametrize("chunk_size", [0, -3, 1.5, "2", True, np.float64(2.0)])
def test_chunk_size_must_be_a_positive_integer(chunk_size) -> None:
    with pytest.raises(ValueError, match="chunk_size must be None or a positive integer"):
        jacobian(lambda x: x * x, tensor([1.0]), vectorize=True, chunk_size=chunk_size)


def test_chunk_size_accepts_numpy_integers_and_is_ignored_without_vectorize() -> None:
    x = tensor([1.0, 2.0, 3.0])
    close(
        jacobian(lambda x: x * x, x, vectorize=True, chunk_size=np.int64(2)), np.diag([2.0, 4, 6])
    )
    close(jacobian(lambda x: x * x, x, chunk_size=2), np.diag([2.0, 4, 6]))


def test_construct_standard_basis_for() -> None:
    cases = [
        [(2, 3)],
        [(1,)],
        [()],
        [(1,), (), ()],
        [(2,), (3,), ()],
        [(2,), (), (3,)],
        [(2, 3), (3,), (3, 4, 2)],
    ]
    for shapes in cases:
        for dtypes in (
            [np.float64] * len(shapes),
            [np.float32, np.float64, np.float32][: len(shapes)],
        ):
            ts = [fd.tensor(np.zeros(s, dtype=d)) for s, d in zip(shapes, dtypes, strict=True)]
            numels = [int(np.prod(s)) for s in shapes]
            chunks = construct_standard_basis_for(ts, numels)
            n = sum(numels)
            for c, k, d in zip(chunks, numels, dtypes, strict=True):
                assert c.shape == (n, k) and c.dtype == d
            np.testing.assert_array_equal(
                np.concatenate([c.astype(float) for c in chunks], 1), np.eye(n)
            )


def test_basis_rows_are_the_identity_block_for_any_row_range() -> None:
    # chunked passes cut the identity anywhere: before, across and after a block
    total = 9
    for shape, offset in (((2, 2), 3), ((3,), 0), ((), 8), ((1, 2), 7)):
        n = int(np.prod(shape))
        for start in range(total):
            for stop in range(start + 1, total + 1):
                rows = basis_rows(shape, np.float32, offset, start, stop)
                assert rows.shape == (stop - start, *shape) and rows.dtype == np.float32
                want = np.eye(total)[start:stop, offset : offset + n]
                np.testing.assert_array_equal(rows.reshape(stop - start, n), want)


# --------------------------------------------------------------------------- vjp / jvp
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("out_kind", OUT_KINDS)
@pytest.mark.parametrize("in_kind", IN_KINDS)
def test_vjp_structure_and_values(in_kind, out_kind, create_graph, strict) -> None:
    func, arrays, in_tuple, out_tuple = make_case(in_kind, out_kind)
    J = numeric_jacobian(func, arrays)
    outs_np = _as_tuple(func(*arrays))
    vs = [RNG.normal(size=np.shape(o)) for o in outs_np]
    v = tuple(tensor(a) for a in vs) if out_tuple else tensor(vs[0])
    out, res = vjp(
        func, pack_inputs(arrays, in_tuple, requires_grad=create_graph), v, create_graph, strict
    )
    assert isinstance(out, tuple) == out_tuple and isinstance(res, tuple) == in_tuple
    for o, e in zip(_as_tuple(out), outs_np, strict=True):
        close(o, e, rtol=1e-14)
    for j, r in enumerate(_as_tuple(res)):
        assert r.shape == arrays[j].shape
        close(r, sum(contract_left(vs[i], J[i][j]) for i in range(len(vs))))
        assert (r.grad_fn is not None) == create_graph
    if not create_graph:
        assert no_history(out, res)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("out_kind", OUT_KINDS)
@pytest.mark.parametrize("in_kind", IN_KINDS)
def test_jvp_structure_and_values(in_kind, out_kind, create_graph, strict) -> None:
    func, arrays, in_tuple, out_tuple = make_case(in_kind, out_kind)
    J = numeric_jacobian(func, arrays)
    vs = [RNG.normal(size=a.shape) for a in arrays]
    v = tuple(tensor(a) for a in vs) if in_tuple else tensor(vs[0])
    out, res = jvp(
        func, pack_inputs(arrays, in_tuple, requires_grad=create_graph), v, create_graph, strict
    )
    assert isinstance(out, tuple) == out_tuple and isinstance(res, tuple) == out_tuple
    outs_np = _as_tuple(func(*arrays))
    for i, r in enumerate(_as_tuple(res)):
        assert r.shape == np.shape(outs_np[i])
        close(r, sum(contract_right(J[i][j], vs[j]) for j in range(len(vs))))
        assert (r.grad_fn is not None) == create_graph
    if not create_graph:
        assert no_history(out, res)


def test_vjp_jvp_dot_product_identity() -> None:
    # <u, J v> = <J^T u, v> for a two-input, two-output function
    x, y = tensor(X0), tensor(Y0)
    outs = core(X0, Y0)
    for seed in range(3):
        r = np.random.default_rng(seed)
        u = tuple(tensor(r.normal(size=np.shape(o))) for o in outs)
        v = (tensor(r.normal(size=X0.shape)), tensor(r.normal(size=Y0.shape)))
        _, Jv = jvp(core, (x, y), v)
        _, JTu = vjp(core, (x, y), u)
        lhs = sum(np.sum(a.numpy() * b.numpy()) for a, b in zip(u, Jv, strict=True))
        rhs = sum(np.sum(a.numpy() * b.numpy()) for a, b in zip(JTu, v, strict=True))
        assert abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs))


def test_jacobian_matches_vjp_and_jvp_closed_form() -> None:
    # f = x^3 + sum(x): J = diag(3x^2) + 1 1^T
    x0 = np.array([0.5, -1.0, 2.0, 0.1])
    J = np.diag(3 * x0**2) + np.ones((4, 4))
    v = RNG.normal(size=4)
    f = lambda x: x * x * x + np.sum(x)
    close(jacobian(f, tensor(x0)), J, rtol=1e-14)
    close(jvp(f, tensor(x0), tensor(v))[1], J @ v, rtol=1e-13)
    close(vjp(f, tensor(x0), tensor(v))[1], v @ J, rtol=1e-13)


def test_vjp_scalar_cases() -> None:
    x0 = RNG.normal(size=(4, 4))
    for v in (fd.tensor(1.0), None, 1.0):
        out, g = vjp(lambda x: np.sum(x), tensor(x0), v)
        assert out.shape == () and g.shape == (4, 4)
        close(g, np.ones((4, 4)))
    c = np.array([1.0, -2.0, 3.0, 0.5])
    v = np.array([0.3, 0.1, -1.0, 2.0])
    out, g = vjp(lambda x: x * c, tensor(0.7), tensor(v))
    assert out.shape == (4,) and g.shape == ()
    close(g, np.sum(v * c))
    # any one-element shape allows v=None
    out, g = vjp(lambda x: np.sum(x * x).reshape(1, 1), tensor([1.0, 2.0]))
    assert out.shape == (1, 1)
    close(g, [2.0, 4.0])


def test_jvp_scalar_cases() -> None:
    x0 = RNG.normal(size=(4, 4))
    v0 = RNG.normal(size=(4, 4))
    out, t = jvp(lambda x: np.sum(x), tensor(x0), tensor(v0))
    assert out.shape == () and t.shape == ()
    close(t, np.sum(v0))
    c = np.array([1.0, -2.0, 3.0, 0.5])
    for v in (fd.tensor(1.0), None):
        out, t = jvp(lambda x: x * c, tensor(0.7), v)
        assert out.shape == (4,) and t.shape == (4,)
        close(t, c)


@pytest.mark.parametrize("fn", ["vjp", "jvp"])
def test_vjp_jvp_create_graph_closed_form(fn: str) -> None:
    # f = x sin x elementwise: both products are d*v with d = sin x + x cos x, so
    # d/dx sum(w r) = w v (2 cos x - x sin x) and d/dv sum(w r) = w d.
    x0, v0, w = np.array([0.3, -1.2, 2.0]), np.array([1.0, -0.5, 2.0]), np.array([0.7, 1.3, -0.4])
    x, v = tensor(x0, True), tensor(v0, True)
    api = vjp if fn == "vjp" else jvp
    out, r = api(lambda x: x * np.sin(x), x, v, create_graph=True)
    assert out.grad_fn is not None and r.grad_fn is not None
    # out and r share the forward graph: keep it for the second call
    gx, gv = fd.grad(np.sum(r * w), (x, v), retain_graph=True)
    close(gx, w * v0 * (2 * np.cos(x0) - x0 * np.sin(x0)), rtol=1e-12)
    close(gv, w * (np.sin(x0) + x0 * np.cos(x0)), rtol=1e-12)
    (go,) = fd.grad(np.sum(out * w), x)
    close(go, w * (np.sin(x0) + x0 * np.cos(x0)), rtol=1e-12)


def test_jvp_create_graph_two_inputs_closed_form() -> None:
    # f(x, y) = x*y: J v = y a + x b
    x0, y0 = np.array([1.0, 2.0]), np.array([-0.5, 3.0])
    a0, b0, w = np.array([0.2, 0.4]), np.array([1.5, -1.0]), np.array([2.0, -3.0])
    x, y, a, b = (tensor(t, True) for t in (x0, y0, a0, b0))
    _, r = jvp(lambda x, y: x * y, (x, y), (a, b), create_graph=True)
    close(r, y0 * a0 + x0 * b0)
    gx, gy, ga, gb = fd.grad(np.sum(np.exp(r) * w), (x, y, a, b))
    s = w * np.exp(y0 * a0 + x0 * b0)
    for g, e in ((gx, s * b0), (gy, s * a0), (ga, s * y0), (gb, s * x0)):
        close(g, e, rtol=1e-12)


def test_vjp_composite_third_order() -> None:
    # vjp of f = x^3 through a non-leaf input x = cos z, differentiated twice more:
    # r = 3 x^2 v; d/dz r = -6 x sin z v; d2/dz2 r = (6 sin^2 z - 6 x cos z) v
    z0, v0 = np.array([0.4, -0.9]), np.array([1.3, 0.6])
    z = tensor(z0, True)
    _, r = vjp(lambda x: x * x * x, np.cos(z), tensor(v0), create_graph=True)
    (d1,) = fd.grad(np.sum(r), z, create_graph=True)
    (d2,) = fd.grad(np.sum(d1), z)
    x0 = np.cos(z0)
    close(d1, -6 * x0 * np.sin(z0) * v0, rtol=1e-12)
    close(d2, (6 * np.sin(z0) ** 2 - 6 * x0 * np.cos(z0)) * v0, rtol=1e-12)


# --------------------------------------------------------------------------- hessian / vhp / hvp
HESS_MODES = {
    "loop": {},
    "loop-strict": {"strict": True},
    "vectorized": {"vectorize": True},
    "vectorized-chunk3": {"vectorize": True, "chunk_size": 3},
    "forward-loop": {"outer_jacobian_strategy": "forward-mode"},
    "forward-vectorized": {"outer_jacobian_strategy": "forward-mode", "vectorize": True},
}


@pytest.mark.parametrize("mode", list(HESS_MODES))
@pytest.mark.parametrize("in_kind", IN_KINDS)
def test_hessian_structure_and_values(in_kind: str, mode: str) -> None:
    func, arrays, in_tuple = make_scalar_case(in_kind)
    expected = numeric_hessian(func, arrays)
    res = hessian(func, pack_inputs(arrays, in_tuple), **HESS_MODES[mode])
    blocks = unpack_blocks(res, in_tuple, in_tuple, len(arrays), len(arrays))
    for i in range(len(arrays)):
        for j in range(len(arrays)):
            assert blocks[i][j].shape == arrays[i].shape + arrays[j].shape
            close(blocks[i][j], expected[i][j], rtol=1e-5, atol=1e-6)
    assert no_history(res)


def _hessian_agree_cases():
    r = np.random.default_rng(11)
    yield "simple", (lambda x: np.sum(3 * x * x)), [r.normal(size=(2, 3, 5))]
    yield (
        "multi_input",
        (lambda x, y, z: np.sum((np.tanh(x) * x) @ np.sin(y) @ z)),
        [
            r.normal(size=(2, 3)),
            r.normal(size=(3, 5)),
            r.normal(size=(5, 2)),
        ],
    )
    yield "unrelated_input", (lambda x, y: np.sum(x * x)), [r.normal(size=(2, 3)), r.normal(size=4)]
    yield "constant", (lambda x, y: fd.tensor(1.0)), [r.normal(size=(2, 3)), r.normal(size=4)]


HESS_AGREE = list(_hessian_agree_cases())


@pytest.mark.parametrize("name, func, arrays", HESS_AGREE, ids=[c[0] for c in HESS_AGREE])
def test_hessian_vectorize_and_forward_agree_with_loop(name, func, arrays) -> None:
    inputs = tuple(tensor(a) for a in arrays)
    ref = hessian(func, inputs)
    if name != "constant":
        expected = numeric_hessian(func, arrays)
        for i, row in enumerate(expected):
            for j, e in enumerate(row):
                close(ref[i][j], e, rtol=1e-5, atol=1e-6)
    else:
        assert all(np.all(t.numpy() == 0) for t in _flat(ref))
    if name == "unrelated_input":
        assert np.all(ref[1][1].numpy() == 0) and np.all(ref[0][1].numpy() == 0)
    for kw in (
        {"vectorize": True},
        {"vectorize": True, "chunk_size": 4},
        {"outer_jacobian_strategy": "forward-mode"},
        {"outer_jacobian_strategy": "forward-mode", "vectorize": True},
    ):
        _assert_same(hessian(func, inputs, **kw), ref)


def test_hessian_examples() -> None:
    # torch: pow_adder_reducer(x, y) = (2x^2 + 3y^2).sum()
    x, y = tensor([1.0, 2.0]), tensor([-1.0, 0.5])
    for vec in (False, True):
        H = hessian(lambda x, y: np.sum(2 * x * x + 3 * y * y), (x, y), vectorize=vec)
        close(H[0][0], 4 * np.eye(2))
        close(H[0][1], np.zeros((2, 2)))
        close(H[1][0], np.zeros((2, 2)))
        close(H[1][1], 6 * np.eye(2))
        # a 1-tuple keeps both levels of nesting
        (H11,) = hessian(lambda x: np.sum(x * x * x), (x,), vectorize=vec)
        close(H11[0], np.diag(6 * np.array([1.0, 2.0])))
        # shapes (4,),(5,) give blocks (4,4),(4,5),(5,4),(5,5)
        a, b = tensor(RNG.normal(size=4)), tensor(RNG.normal(size=5))
        H2 = hessian(lambda a, b: np.sum(a * a) * np.sum(b * b), (a, b), vectorize=vec)
        assert [[t.shape for t in row] for row in H2] == [[(4, 4), (4, 5)], [(5, 4), (5, 5)]]
        close(H2[0][1], 4 * np.outer(a.numpy(), b.numpy()), rtol=1e-13)


def test_hessian_scalar_cases() -> None:
    x0 = RNG.normal(size=(2, 2))
    expected = np.diag(6 * x0.ravel()).reshape(2, 2, 2, 2)
    for vec in (False, True):
        close(hessian(lambda x: np.sum(x * x * x), tensor(x0), vectorize=vec), expected, rtol=1e-13)
        # a (1,1,1) output is accepted: it is squeezed
        H = hessian(lambda x: np.sum(x * x * x).reshape(1, 1, 1), tensor(x0), vectorize=vec)
        close(H, expected, rtol=1e-13)
        H0 = hessian(lambda x: x * x * x, tensor(0.7), vectorize=vec)
        assert H0.shape == ()
        close(H0, 4.2, rtol=1e-14)


def _poly(x):
    # f = sum(c x^4) + (a.x)^3
    return np.sum(C4 * x * x * x * x) + np.sum(A3 * x) ** 3


C4 = np.array([0.5, -1.0, 2.0])
A3 = np.array([1.0, 0.3, -0.7])


@pytest.mark.parametrize(
    "kw",
    [{}, {"vectorize": True}, {"vectorize": True, "chunk_size": 2}],
    ids=["loop", "vectorized", "chunked"],
)
def test_hessian_create_graph_third_order_closed_form(kw) -> None:
    # H = diag(12 c x^2) + 6 (a.x) a a^T
    # sum_ij W_ij dH_ij/dx_k = 24 c_k x_k W_kk + 6 (a^T W a) a_k
    x0 = np.array([0.4, -1.1, 0.8])
    x = tensor(x0, True)
    H = hessian(_poly, x, create_graph=True, **kw)
    s = np.sum(A3 * x0)
    close(H, np.diag(12 * C4 * x0**2) + 6 * s * np.outer(A3, A3), rtol=1e-13)
    assert H.grad_fn is not None
    W = RNG.normal(size=(3, 3))
    (g3,) = fd.grad(np.sum(H * W), x, create_graph=True)
    close(g3, 24 * C4 * x0 * np.diag(W) + 6 * (A3 @ W @ A3) * A3, rtol=1e-12)
    # fourth order: d/dx_l of the above = 24 c_l W_ll delta + 0
    (g4,) = fd.grad(np.sum(g3), x)
    close(g4, 24 * C4 * np.diag(W), rtol=1e-12)


@pytest.mark.parametrize(
    "outer",
    [{}, {"vectorize": True}, {"vectorize": True, "chunk_size": 2}, {"strategy": "forward-mode"}],
    ids=["loop", "vectorized", "chunked", "forward"],
)
@pytest.mark.parametrize("inner_vectorize", [False, True])
def test_third_order_tensor_by_nesting_jacobian_and_hessian(outer, inner_vectorize) -> None:
    # T_ijk = 24 c_i x_i delta_ijk + 6 a_i a_j a_k; the outer (batched) pass runs
    # through the recorded Hessian, including its stacking node
    x0 = np.array([0.4, -1.1, 0.8])
    T = jacobian(
        lambda x: hessian(_poly, x, create_graph=True, vectorize=inner_vectorize),
        tensor(x0),
        **outer,
    )
    expected = 6 * np.einsum("i,j,k->ijk", A3, A3, A3)
    expected[np.arange(3), np.arange(3), np.arange(3)] += 24 * C4 * x0
    close(T, expected, rtol=1e-12, atol=1e-13)


def test_hessian_create_graph_two_inputs_closed_form() -> None:
    # f = sum(x^2 y^3): H_xy = diag(6 x y^2); d/dx sum(W H_xy) = 6 diag(W) y^2,
    # d/dy sum(W H_xy) = 12 diag(W) x y
    x0, y0 = np.array([0.5, -1.5]), np.array([1.2, 0.7])
    x, y = tensor(x0, True), tensor(y0, True)
    H = hessian(lambda x, y: np.sum(x * x * y * y * y), (x, y), create_graph=True)
    close(H[0][0], np.diag(2 * y0**3), rtol=1e-13)
    close(H[0][1], np.diag(6 * x0 * y0**2), rtol=1e-13)
    close(H[1][1], np.diag(6 * x0**2 * y0), rtol=1e-13)
    W = RNG.normal(size=(2, 2))
    gx, gy = fd.grad(np.sum(H[0][1] * W), (x, y))
    close(gx, 6 * np.diag(W) * y0**2, rtol=1e-12)
    close(gy, 12 * np.diag(W) * x0 * y0, rtol=1e-12)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("in_kind", IN_KINDS)
@pytest.mark.parametrize("fn", ["vhp", "hvp"])
def test_vhp_hvp_structure_and_values(fn, in_kind, create_graph, strict) -> None:
    func, arrays, in_tuple = make_scalar_case(in_kind)
    H = numeric_hessian(func, arrays)
    vs = [RNG.normal(size=a.shape) for a in arrays]
    v = tuple(tensor(a) for a in vs) if in_tuple else tensor(vs[0])
    api = vhp if fn == "vhp" else hvp
    out, res = api(func, pack_inputs(arrays, in_tuple, create_graph), v, create_graph, strict)
    assert isinstance(out, fd.Tensor) and out.shape == ()
    close(out, func(*arrays), rtol=1e-14)
    assert isinstance(res, tuple) == in_tuple
    n = len(arrays)
    for k, r in enumerate(_as_tuple(res)):
        assert r.shape == arrays[k].shape
        if fn == "vhp":
            e = sum(contract_left(vs[i], H[i][k]) for i in range(n))
        else:
            e = sum(contract_right(H[k][j], vs[j]) for j in range(n))
        close(r, e, rtol=1e-5, atol=1e-6)
        assert (r.grad_fn is not None) == create_graph
    if not create_graph:
        assert no_history(out, res)


def test_hessian_matches_vhp_and_hvp_closed_form() -> None:
    # f = 3 sum(exp(a[:3])): H = diag(3 exp(a[:3]), 0)
    a0 = np.array([0.2, -0.4, 1.0, 0.5])
    v0 = np.array([1.0, 2.0, -1.0, 3.0])
    H = np.diag(np.concatenate([3 * np.exp(a0[:3]), [0.0]]))
    f = lambda a: 3 * np.sum(np.exp(a[:3]))
    close(hessian(f, tensor(a0)), H, rtol=1e-14)
    close(hvp(f, tensor(a0), tensor(v0))[1], H @ v0, rtol=1e-14)
    close(vhp(f, tensor(a0), tensor(v0))[1], v0 @ H, rtol=1e-14)


def test_vhp_hvp_scalar_cases() -> None:
    x0 = RNG.normal(size=(4, 4))
    v0 = RNG.normal(size=(4, 4))
    for api in (vhp, hvp):
        out, r = api(lambda x: np.sum(np.exp(x)), tensor(x0), tensor(v0))
        assert out.shape == ()
        close(r, np.exp(x0) * v0, rtol=1e-13)
        for v in (fd.tensor(1.0), None):
            out, r = api(lambda x: x * x * x, tensor(0.5), v)
            assert r.shape == ()
            close(r, 3.0, rtol=1e-14)
        # the output is not squeezed
        out, r = api(lambda x: np.sum(x * x * x).reshape(1, 1, 1), tensor(x0), tensor(v0))
        assert out.shape == (1, 1, 1)
        close(r, 6 * x0 * v0, rtol=1e-13)


@pytest.mark.parametrize("fn", ["vhp", "hvp"])
def test_vhp_hvp_create_graph_closed_form(fn: str) -> None:
    # f = sum(x^4): product 12 x^2 v; d/dx sum(w r) = 24 w x v; d/dv = 12 w x^2
    x0, v0, w = np.array([0.3, -1.2]), np.array([1.5, 0.5]), np.array([2.0, -1.0])
    x, v = tensor(x0, True), tensor(v0, True)
    api = vhp if fn == "vhp" else hvp
    out, r = api(lambda x: np.sum(x * x * x * x), x, v, create_graph=True)
    assert out.grad_fn is not None and r.grad_fn is not None
    gx, gv = fd.grad(np.sum(w * r), (x, v))
    close(gx, 24 * w * x0 * v0, rtol=1e-12)
    close(gv, 12 * w * x0**2, rtol=1e-12)


# --------------------------------------------------------------------------- no_grad
def test_functions_work_inside_no_grad() -> None:
    x0 = np.array([[0.5, 1.0], [-1.0, 2.0]])
    v0 = np.ones((2, 2))
    f = lambda x: np.sum(x * x * x)
    g = lambda x: x * x
    with fd.no_grad():
        x = tensor(x0)
        out, r = vjp(g, x, tensor(v0))
        assert no_history(out, r)
        close(r, 2 * x0)
        out, r = jvp(g, x, tensor(v0))
        assert no_history(out, r)
        close(r, 2 * x0)
        J = jacobian(g, x)
        assert no_history(J)
        close(J, np.diag(2 * x0.ravel()).reshape(2, 2, 2, 2))
        H = hessian(f, x)
        assert no_history(H) and H[0][0].grad_fn is None
        for api in (vhp, hvp):
            out, r = api(f, x, tensor(v0))
            assert no_history(out, r)
            close(r, 6 * x0)
        # with create_graph the results have history even though nothing required grad
        x = tensor(x0)
        out, r = vjp(g, x, tensor(v0, True), create_graph=True)
        assert out.grad_fn is not None and r.grad_fn is not None
        assert jvp(g, x, tensor(v0, True), create_graph=True)[1].grad_fn is not None
        assert jacobian(g, x, create_graph=True).grad_fn is not None
        assert jacobian(g, x, create_graph=True, vectorize=True).grad_fn is not None
        assert hessian(f, x, create_graph=True).grad_fn is not None
        assert vhp(f, x, tensor(v0), create_graph=True)[1].grad_fn is not None
        assert hvp(f, x, tensor(v0), create_graph=True)[1].grad_fn is not None
        assert not fd.is_grad_enabled()


def test_v_requiring_grad_is_a_constant_without_create_graph() -> None:
    x, v = tensor([1.0, 2.0], True), tensor([3.0, 4.0], True)
    out, r = vjp(lambda x: x * x, x, v)
    assert no_history(out, r)
    close(r, [6.0, 16.0])


# --------------------------------------------------------------------------- strict mode
def _disconnected(a):
    # requires grad, but is not connected to the argument
    return a.detach().requires_grad_() * 1.0


def test_vjp_strict() -> None:
    inp = tensor(RNG.normal(size=4))
    v = tensor(RNG.normal(size=4))
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function does not require gradients."
    ):
        vjp(lambda a: a.detach(), inp, v, strict=True)
    close(vjp(lambda a: a.detach(), inp, v)[1], np.zeros(4))
    with pytest.raises(
        RuntimeError, match="The output of the user-provided function is independent of input 0"
    ):
        vjp(_disconnected, inp, v, strict=True)
    close(vjp(_disconnected, inp, v)[1], np.zeros(4))
    x = tensor(RNG.normal(size=4), True)
    with pytest.raises(
        RuntimeError, match="jacobian of the user-provided function is independent of input 0."
    ):
        vjp(lambda a: a * 1.0, x, v, create_graph=True, strict=True)
    _, r = vjp(lambda a: a * 1.0, x, v, create_graph=True)
    np.testing.assert_array_equal(r.detach().numpy(), v.numpy())


def test_jvp_strict() -> None:
    inp = tensor(RNG.normal(size=4))
    v = tensor(RNG.normal(size=4))
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function does not require gradients."
    ):
        jvp(lambda a: a.detach(), inp, v, strict=True)
    r = jvp(lambda a: a.detach() * np.ones((2, 1)), inp, v)[1]
    assert r.shape == (2, 4)  # shaped like the output
    close(r, np.zeros((2, 4)))
    with pytest.raises(
        RuntimeError, match="The output of the user-provided function is independent of input 0"
    ):
        jvp(_disconnected, inp, v, strict=True)
    close(jvp(_disconnected, inp, v)[1], np.zeros(4))
    x = tensor(RNG.normal(size=4), True)
    with pytest.raises(
        RuntimeError, match="jacobian of the user-provided function is independent of input 0."
    ):
        jvp(lambda a: a * 1.0, x, v, create_graph=True, strict=True)
    _, r = jvp(lambda a: a * 1.0, x, v, create_graph=True)
    np.testing.assert_array_equal(r.detach().numpy(), v.numpy())


def test_jvp_strict_independent_of_one_input() -> None:
    x, y = tensor([1.0, 2.0]), tensor([3.0])
    v = (tensor([1.0, 1.0]), tensor([1.0]))
    with pytest.raises(RuntimeError, match="independent of input 1"):
        jvp(lambda x, y: x * x, (x, y), v, strict=True)
    close(jvp(lambda x, y: x * x, (x, y), v)[1], [2.0, 4.0])


def test_jacobian_strict() -> None:
    inp = tensor(RNG.normal(size=4))
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function does not require gradients."
    ):
        jacobian(lambda a: a.detach(), inp, strict=True)
    close(jacobian(lambda a: a.detach(), inp), np.zeros((4, 4)))
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function is independent of input 0."
    ):
        jacobian(_disconnected, inp, strict=True)
    close(jacobian(_disconnected, inp), np.zeros((4, 4)))
    x = tensor(RNG.normal(size=4), True)
    with pytest.raises(
        RuntimeError, match="jacobian of the user-provided function is independent of input 0."
    ):
        jacobian(lambda a: a * 1.0, x, create_graph=True, strict=True)
    J = jacobian(lambda a: a * 1.0, x, create_graph=True)
    np.testing.assert_array_equal(J.detach().numpy(), np.eye(4))
    # the second input is unused: the message names the output and input indices
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function is independent of input 1."
    ):
        jacobian(lambda a, b: (a * a, a * b), (inp, tensor(2.0)), strict=True)


def test_strict_vectorize_and_forward_mode_combinations() -> None:
    inp = tensor([1.0, 2.0])
    calls = []

    def f(a):
        calls.append(1)
        return a * a

    with pytest.raises(RuntimeError, match="not supported together"):
        jacobian(f, inp, strict=True, vectorize=True)
    assert calls == [1]  # torch calls func before refusing the combination
    with pytest.raises(RuntimeError, match="not supported together"):
        hessian(lambda a: np.sum(a * a * a), inp, strict=True, vectorize=True)
    with pytest.raises(RuntimeError, match=r'`strict=True` and `strategy="forward-mode"`'):
        jacobian(f, inp, strict=True, strategy="forward-mode", vectorize=True)
    with pytest.raises(
        NotImplementedError, match=r'`create_graph=True` and `strategy="forward-mode"`'
    ):
        jacobian(f, inp, create_graph=True, strategy="forward-mode", vectorize=True)
    with pytest.raises(NotImplementedError, match="not supported together"):
        hessian(
            lambda a: np.sum(a * a * a),
            inp,
            create_graph=True,
            outer_jacobian_strategy="forward-mode",
        )


def test_hessian_strict() -> None:
    inp = tensor(RNG.normal(size=4))
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function does not require gradients."
    ):
        hessian(lambda a: np.sum(a.detach()), inp, strict=True)
    with pytest.raises(
        RuntimeError, match="jacobian of the user-provided function with respect to input 0"
    ):
        hessian(lambda a: np.sum(_disconnected(a)), inp, strict=True)
    with pytest.raises(
        RuntimeError, match="jacobian of the user-provided function with respect to input 0 is"
    ):
        hessian(lambda a: np.sum(3 * a), inp, strict=True)
    for f in (
        lambda a: np.sum(a.detach()),
        lambda a: np.sum(_disconnected(a)),
        lambda a: np.sum(3 * a),
    ):
        close(hessian(f, inp), np.zeros((4, 4)))
        close(hessian(f, inp, vectorize=True), np.zeros((4, 4)))


@pytest.mark.parametrize("fn", ["vhp", "hvp"])
def test_vhp_hvp_strict(fn: str) -> None:
    api = vhp if fn == "vhp" else hvp
    inp = tensor(RNG.normal(size=4))
    v = tensor(RNG.normal(size=4))
    with pytest.raises(
        RuntimeError, match="Output 0 of the user-provided function does not require gradients."
    ):
        api(lambda a: np.sum(a.detach()), inp, v, strict=True)
    with pytest.raises(
        RuntimeError, match="The output of the user-provided function is independent of input 0"
    ):
        api(lambda a: np.sum(_disconnected(a)), inp, v, strict=True)
    with pytest.raises(
        RuntimeError, match="jacobian of the user-provided function with respect to input 0 is"
    ):
        api(lambda a: np.sum(3 * a), inp, v, strict=True)
    for f in (
        lambda a: np.sum(a.detach()),
        lambda a: np.sum(_disconnected(a)),
        lambda a: np.sum(3 * a),
    ):
        close(api(f, inp, v)[1], np.zeros(4))
    # create_graph with a quadratic: the Hessian is constant, so v^T H does not depend on
    # the inputs and v does not require grad
    x = tensor(RNG.normal(size=4), True)
    with pytest.raises(
        RuntimeError, match="hessian of the user-provided function is independent of input 0"
    ):
        api(lambda a: np.sum(a * a), x, v, create_graph=True, strict=True)
    close(api(lambda a: np.sum(a * a), x, v, create_graph=True)[1], 2 * v.numpy())


# --------------------------------------------------------------------------- errors
def test_vjp_errors() -> None:
    inp = tensor(RNG.normal(size=4))
    v = tensor(np.ones(3))
    foo = lambda a: 3 * a[:3]
    with pytest.raises(TypeError, match="The inputs given to vjp must be either a Tensor"):
        vjp(foo, (inp, "2"), v)
    with pytest.raises(
        TypeError, match="The outputs of the user-provided function given to vjp must"
    ):
        vjp(lambda a: (foo(a), "bar"), inp, v)
    with pytest.raises(
        RuntimeError, match="The vector v can only be None if the user-provided function returns"
    ):
        vjp(foo, inp)
    with pytest.raises(RuntimeError, match="The given v should contain a single Tensor."):
        vjp(foo, inp, (v, v))
    with pytest.raises(
        RuntimeError, match=r"^v has invalid size: should be \(3,\) but got \(2,\)\.$"
    ):
        vjp(foo, inp, v[:2])
    with pytest.raises(
        RuntimeError, match=r"v is a tuple of invalid length: should be 2 but got 1\."
    ):
        vjp(lambda a: (a, a), inp, (tensor(np.ones(4)),))
    with pytest.raises(
        RuntimeError, match=r"Entry 1 in v has invalid size: should be \(4,\) but got \(3,\)\."
    ):
        vjp(lambda a: (a * 1.0, a * 2.0), inp, (tensor(np.ones(4)), v))
    with pytest.raises(
        TypeError, match="The v given to vjp must be either a Tensor or a tuple of Tensors"
    ):
        vjp(foo, inp, (v, None))
    assert vjp(foo, inp, v)[1].shape == (4,)
    # a 1-tuple v is accepted for a single output
    close(vjp(foo, inp, (v,))[1], [3.0, 3.0, 3.0, 0.0])


def test_jvp_errors() -> None:
    inp = tensor(RNG.normal(size=4))
    v = tensor(RNG.normal(size=4))
    foo = lambda a: 3 * a[:3]
    with pytest.raises(TypeError, match="The inputs given to jvp must be either a Tensor"):
        jvp(foo, (inp, "2"), v)
    with pytest.raises(
        TypeError, match="The outputs of the user-provided function given to jvp must"
    ):
        jvp(lambda a: (foo(a), "bar"), inp, v)
    with pytest.raises(
        RuntimeError,
        match="The vector v can only be None if the input to the user-provided function",
    ):
        jvp(foo, inp)
    with pytest.raises(RuntimeError, match="The given v should contain a single Tensor."):
        jvp(foo, inp, (v, v))
    with pytest.raises(
        RuntimeError, match=r"v has invalid size: should be \(4,\) but got \(2,\)\."
    ):
        jvp(foo, inp, v[:2])
    assert jvp(foo, inp, v)[1].shape == (3,)


def test_jacobian_errors() -> None:
    inp = tensor(RNG.normal(size=4))
    with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor"):
        jacobian(lambda a: a * a, (inp, "2"))
    with pytest.raises(
        TypeError, match="The outputs of the user-provided function given to jacobian must"
    ):
        jacobian(lambda a: "bar", inp)
    with pytest.raises(TypeError, match="funcdiff.tensor"):
        jacobian(lambda a: np.ones(3), inp)  # a plain ndarray result gets a hint
    with pytest.raises(
        ValueError, match='Expected strategy to be either "forward-mode" or "reverse-mode". Hint'
    ):
        jacobian(lambda a: a * a, inp, strategy="forward")
    assert jacobian(lambda a: 3 * a[:3], inp).shape == (3, 4)


def test_hessian_errors() -> None:
    inp = tensor(RNG.normal(size=4))
    for vec in (False, True):
        with pytest.raises(TypeError, match="The inputs given to hessian must be either a Tensor"):
            hessian(lambda a: np.sum(a * a), (inp, "2"), vectorize=vec)
        with pytest.raises(
            TypeError, match="The outputs of the user-provided function given to hessian must"
        ):
            hessian(lambda a: "bar", inp, vectorize=vec)
        with pytest.raises(
            RuntimeError,
            match="The Tensor returned by the function given to hessian should contain a single",
        ):
            hessian(lambda a: 3 * a[:3], inp, vectorize=vec)
        with pytest.raises(
            RuntimeError, match="The function given to hessian should return a single Tensor"
        ):
            hessian(lambda a: (np.sum(a * a), np.sum(a)), inp, vectorize=vec)
        with pytest.raises(
            RuntimeError, match="The function given to hessian should return a single Tensor"
        ):
            hessian(lambda a: (np.sum(a * a),), inp, vectorize=vec)
    with pytest.raises(
        ValueError, match=r'Expected strategy to be either "forward-mode" or "reverse-mode"\. Got'
    ):
        hessian(lambda a: np.sum(a * a), inp, outer_jacobian_strategy="reverse")
    with pytest.raises(ValueError, match="chunk_size"):
        hessian(lambda a: np.sum(a * a), inp, vectorize=True, chunk_size=0)


@pytest.mark.parametrize("fn", ["vhp", "hvp"])
def test_vhp_hvp_errors(fn: str) -> None:
    api = vhp if fn == "vhp" else hvp
    inp = tensor(RNG.normal(size=4))
    v = tensor(RNG.normal(size=4))
    f = lambda a: np.sum(a * a * a)
    with pytest.raises(TypeError, match=f"The inputs given to {fn} must be either a Tensor"):
        api(f, (inp, "2"), v)
    with pytest.raises(
        TypeError, match=f"The outputs of the user-provided function given to {fn} must"
    ):
        api(lambda a: "bar", inp, v)
    with pytest.raises(
        RuntimeError,
        match=f"The Tensor returned by the function given to {fn} should contain a single element",
    ):
        api(lambda a: 3 * a[:3], inp, v)
    with pytest.raises(
        RuntimeError, match=f"The function given to {fn} should return a single Tensor"
    ):
        api(lambda a: (f(a),), inp, v)
    with pytest.raises(
        RuntimeError, match=r"v has invalid size: should be \(4,\) but got \(5,\)\."
    ):
        api(f, inp, tensor(np.ones(5)))
    with pytest.raises(
        TypeError, match=f"The v given to {fn} must be either a Tensor or a tuple of Tensors"
    ):
        api(f, inp, (v, "2"))
    with pytest.raises(
        RuntimeError,
        match="The vector v can only be None if the input to the user-provided function",
    ):
        api(f, inp)
    assert api(f, inp, v)[1].shape == (4,)
    r = api(
        lambda a, b: np.sum(a * a) * np.sum(b), (inp, tensor([1.0, 2.0])), (v, tensor([1.0, 1.0]))
    )[1]
    assert [t.shape for t in r] == [(4,), (2,)]


def test_check_order() -> None:
    inp = tensor([1.0, 2.0])
    calls = []

    def never(*a):
        calls.append(1)
        return a[0] * a[0]

    # a bad strategy wins over bad inputs in jacobian; hessian checks the inputs first
    with pytest.raises(ValueError):
        jacobian(never, (inp, "2"), strategy="bad")
    with pytest.raises(TypeError):
        hessian(never, (inp, "2"), outer_jacobian_strategy="bad")
    # forward mode: create_graph, then strict, then the inputs
    with pytest.raises(NotImplementedError):
        jacobian(never, (inp, "2"), create_graph=True, strict=True, strategy="forward-mode")
    with pytest.raises(RuntimeError):
        jacobian(never, (inp, "2"), strict=True, strategy="forward-mode")
    # jvp, vhp and hvp check v before calling func
    for api in (jvp, vhp, hvp):
        with pytest.raises(RuntimeError, match="v has invalid size"):
            api(never, inp, tensor([1.0]))
    assert calls == []
    # vjp checks the outputs (type, then strict) before v
    with pytest.raises(TypeError, match="outputs of the user-provided function"):
        vjp(lambda a: "x", inp, "not a tensor")
    with pytest.raises(RuntimeError, match="does not require gradients"):
        vjp(lambda a: a.detach(), inp, tensor([1.0]), strict=True)
    # vhp: the strict output check comes before the single-Tensor check
    with pytest.raises(RuntimeError, match="does not require gradients"):
        vhp(lambda a: (a.detach(),), inp, tensor([1.0, 1.0]), strict=True)


# --------------------------------------------------------------------------- inputs
def test_numpy_and_scalar_inputs() -> None:
    J = jacobian(lambda x: x * x, np.array([1, 2, 3]))
    assert isinstance(J, fd.Tensor) and J.dtype == np.float64
    close(J, np.diag([2.0, 4.0, 6.0]))
    J32 = jacobian(lambda x: x * x, np.array([1.0, 2.0], dtype=np.float32))
    assert J32.dtype == np.float32
    H = hessian(lambda x: x * x * x, 2.0)
    assert isinstance(H, fd.Tensor) and H.shape == () and H.dtype == np.float64
    close(H, 12.0)
    close(hessian(lambda x: x * x * x, 2), 12.0)
    close(hessian(lambda x: x * x * x, np.float32(2.0)), 12.0)
    out, r = vjp(lambda x, y: x * y, (np.array([1.0, 2.0]), 3.0), np.array([1.0, -1.0]))
    assert isinstance(out, fd.Tensor) and all(isinstance(t, fd.Tensor) for t in r)
    close(r[0], [3.0, -3.0])
    close(r[1], -1.0)
    out, t = jvp(lambda x: np.sin(x), np.array([0.0, 1.0]), np.array([2.0, 1.0]))
    close(t, [2.0, np.cos(1.0)], rtol=1e-14)
    _, r = hvp(lambda x: np.sum(x * x * x), np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    close(r, [6.0, 12.0])
    # the caller's arrays are not modified
    a = np.array([1.0, 2.0])
    jacobian(lambda x: x * x, a)
    np.testing.assert_array_equal(a, [1.0, 2.0])


@pytest.mark.parametrize("bad", [[1.0, 2.0], "x", None, True, np.array([True])])
def test_rejected_input_types(bad) -> None:
    with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor"):
        jacobian(lambda x: x * 2.0, bad)


def test_integer_tensor_input_is_refused() -> None:
    with pytest.raises(RuntimeError, match="floating-point or complex dtype"):
        jacobian(lambda x: x * 2.0, fd.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="at least one Tensor"):
        jacobian(lambda: fd.tensor(1.0), ())


def test_closure_captured_tensors_are_constants() -> None:
    x = tensor([1.0, 2.0], True)
    w = tensor([3.0, 4.0], True)
    # the function ignores its argument and uses the captured x: zero Jacobian
    close(jacobian(lambda a: x * x, x), np.zeros((2, 2)))
    with pytest.raises(RuntimeError, match="independent of input 0"):
        jacobian(lambda a: x * x, x, strict=True)
    close(jacobian(lambda a: a * w, x), np.diag([3.0, 4.0]))
    # the caller's tensors are neither modified nor given a .grad
    for t in (x, w):
        assert t.grad is None
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0])


def test_caller_inputs_untouched_by_every_function() -> None:
    x = tensor([0.5, 1.5], True)
    v = tensor([1.0, -1.0])
    f = lambda a: np.sum(a * a * np.sin(a))
    vjp(f, x)
    jvp(lambda a: a * a, x, v)
    jacobian(lambda a: a * a, x, vectorize=True)
    hessian(f, x)
    vhp(f, x, v, create_graph=True)
    hvp(f, x, v)
    assert x.grad is None and x.is_leaf
    np.testing.assert_array_equal(x.detach().numpy(), [0.5, 1.5])


# --------------------------------------------------------------------------- default batching
def _sin_chain(x):
    return np.sum(np.sin(x) ** 2) + np.sum(x[1:] * x[:-1])


def _sin_chain_hessian(x: np.ndarray) -> np.ndarray:
    n = x.size
    return np.diag(2.0 * np.cos(2.0 * x)) + np.eye(n, k=1) + np.eye(n, k=-1)


def _rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def _rosenbrock_hessian(x: np.ndarray) -> np.ndarray:
    n = x.size
    h = np.zeros((n, n))
    i = np.arange(n - 1)
    h[i, i] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    h[i + 1, i + 1] += 200.0
    h[i, i + 1] = h[i + 1, i] = -400.0 * x[:-1]
    return h


def _count_passes(monkeypatch) -> list[bool]:
    calls: list[bool] = []
    real = _jacobian.grad

    def counting(*args, **kwargs):
        calls.append(kwargs.get("is_grads_batched", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(_jacobian, "grad", counting)
    return calls


@pytest.mark.parametrize(
    "f, closed_form",
    [(_sin_chain, _sin_chain_hessian), (_rosenbrock, _rosenbrock_hessian)],
    ids=["sin_chain", "rosenbrock"],
)
def test_default_hessian_in_chunks_equals_the_row_loop(monkeypatch, f, closed_form) -> None:
    x = tensor(np.linspace(-1.0, 1.5, 60))
    loop = hessian(f, x, strict=True)  # strict mode: one backward pass per row
    vectorized = hessian(f, x, vectorize=True)
    # 7 rows of 60 per pass: 9 batched passes, the last one partial
    monkeypatch.setattr(_jacobian, "_DEFAULT_BATCH_ELEMENTS", 7 * 60)
    calls = _count_passes(monkeypatch)
    default = hessian(f, x)
    assert calls.count(True) == 9
    np.testing.assert_array_equal(default.numpy(), loop.numpy())
    np.testing.assert_array_equal(default.numpy(), vectorized.numpy())
    np.testing.assert_allclose(default.numpy(), closed_form(x.numpy()), rtol=1e-13, atol=1e-12)


def test_default_hessian_bounds_a_pass_at_a_large_size(monkeypatch) -> None:
    n = 2100  # more rows than 2**22 / n = 1997: two passes
    x = tensor(np.linspace(-1.0, 1.5, n))
    calls = _count_passes(monkeypatch)
    default = hessian(_sin_chain, x)
    assert calls.count(True) == 2
    np.testing.assert_allclose(default.numpy(), _sin_chain_hessian(x.numpy()), atol=1e-12)
    vectorized = hessian(_sin_chain, x, vectorize=True)
    np.testing.assert_array_equal(default.numpy(), vectorized.numpy())


def test_default_jacobian_in_chunks_with_several_inputs_and_outputs(monkeypatch) -> None:
    x, y = tensor(RNG.normal(size=(3, 4))), tensor(RNG.normal(size=5))
    f = lambda x, y: (np.sin(x) * np.sum(y), np.exp(y[:3]) * x[0, :3], np.sum(x * x) * y[4])
    loop = jacobian(f, (x, y), strict=True)
    monkeypatch.setattr(_jacobian, "_DEFAULT_BATCH_ELEMENTS", 5 * 17)  # 5 rows per pass
    default = jacobian(f, (x, y))
    for row_d, row_l in zip(default, loop, strict=True):
        for d, lp in zip(row_d, row_l, strict=True):
            assert d.shape == lp.shape and d.dtype == lp.dtype
            np.testing.assert_array_equal(d.numpy(), lp.numpy())


def test_default_hessian_create_graph_in_chunks(monkeypatch) -> None:
    # Third derivatives through the batched default: d/dx_k sum(H) for sum(x**4)
    # is 24 x_k, as with the row loop.
    x = tensor(np.linspace(-1.0, 1.0, 9), True)
    monkeypatch.setattr(_jacobian, "_DEFAULT_BATCH_ELEMENTS", 4 * 9)
    h = hessian(lambda x: np.sum(x**4), x, create_graph=True)
    assert h.requires_grad
    (g,) = fd.grad(np.sum(h), x)
    np.testing.assert_allclose(g.numpy(), 24.0 * x.detach().numpy(), rtol=1e-14)
    h_loop = hessian(lambda x: np.sum(x**4), x, create_graph=True, strict=True)
    (g_loop,) = fd.grad(np.sum(h_loop), x)
    np.testing.assert_array_equal(g.numpy(), g_loop.numpy())


def test_default_jacobian_runs_a_custom_function_row_by_row(monkeypatch) -> None:
    # A custom Function's backward that knows nothing of batches still gets one row.
    class Cube(fd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            assert g.shape == (3,), g.shape
            (x,) = ctx.saved_tensors
            return 3.0 * g * x * x

    x = tensor([1.0, 2.0, -1.0])
    close(jacobian(Cube.apply, x), np.diag([3.0, 12.0, 3.0]))
