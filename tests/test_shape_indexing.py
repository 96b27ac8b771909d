"""Shape, indexing and constant rules: values against NumPy, gradients against hand
formulas, the second derivative through the cotangent (the double-vjp trick that
forward mode relies on), in-place semantics and the documented refusals.

First and second derivatives with respect to the inputs are checked for every rule
case by ``tests/test_rules.py``; this file adds what those generic checks cannot see.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import funcdiff as fd
from funcdiff.rules import all_rules
from funcdiff.testing import call_case, materialize_case

RNG = np.random.default_rng(20261202)


def leaf(values) -> fd.Tensor:
    return fd.tensor(np.asarray(values, dtype=float), requires_grad=True)


def data(obj):
    """Plain arrays out of a Tensor result, a tuple or a list of them."""
    if isinstance(obj, fd.Tensor):
        return obj.data
    if isinstance(obj, (tuple, list)):
        return type(obj)(data(o) for o in obj)
    return obj


def assert_same(got, expected) -> None:
    """Equal values, shapes, dtypes and structure (list vs tuple vs array)."""
    got = data(got)
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected), (type(got), type(expected))
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert_same(g, e)
        return
    expected = np.asarray(expected)
    got = np.asarray(got)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected)


def both(fn, *args, **kwargs):
    """Run ``fn`` on ndarrays and on Tensors (float ones requiring grad); compare."""

    def as_tensor(a):
        if isinstance(a, np.ndarray):
            return fd.tensor(a, requires_grad=a.dtype.kind == "f")
        if isinstance(a, list) and any(isinstance(x, np.ndarray) for x in a):
            return [as_tensor(x) for x in a]
        return a

    expected = fn(*args, **kwargs)
    got = fn(*(as_tensor(a) for a in args), **{k: as_tensor(v) for k, v in kwargs.items()})
    assert_same(got, expected)
    return got


def r(*shape):
    return RNG.standard_normal(shape)


# ---------------------------------------------------------------- values vs NumPy
A = r(2, 3)
B = r(3, 4)
C = r(2, 3, 4)
V = r(5)
S = np.array(0.7)
E = np.zeros((0, 3))

VALUE_CALLS = [
    ("reshape", np.reshape, (B, (2, 6)), {}),
    ("reshape-F", np.reshape, (C, (4, 6)), {"order": "F"}),
    ("reshape-A", np.reshape, (np.asfortranarray(C), (4, 6)), {"order": "A"}),
    ("reshape-shape=", np.reshape, (B,), {"shape": (6, -1)}),
    ("reshape-0d", np.reshape, (S, (1, 1)), {}),
    ("ravel", np.ravel, (C,), {}),
    ("ravel-F", np.ravel, (C, "F"), {}),
    ("transpose", np.transpose, (C, (2, 0, 1)), {}),
    ("transpose-neg", np.transpose, (C, (-1, 0, -2)), {}),
    ("swapaxes", np.swapaxes, (C, 0, -1), {}),
    ("moveaxis", np.moveaxis, (C, (0, 1), (-1, 0)), {}),
    ("rollaxis", np.rollaxis, (C, -1, 1), {}),
    ("squeeze", np.squeeze, (r(1, 3, 1),), {"axis": -1}),
    ("expand_dims", np.expand_dims, (A, (0, -1)), {}),
    ("broadcast_to", np.broadcast_to, (r(3, 1), (2, 3, 4)), {}),
    ("broadcast_arrays", np.broadcast_arrays, (r(3, 1), r(4), S), {}),
    ("copy", np.copy, (A,), {}),
    ("atleast_1d", np.atleast_1d, (S,), {}),
    ("atleast_2d-many", np.atleast_2d, (S, V, A), {}),
    ("atleast_3d-many", np.atleast_3d, (V, A, C), {}),
    ("concatenate", np.concatenate, ([A, r(4, 3)],), {}),
    ("concatenate-neg", np.concatenate, ([A, r(2, 1)],), {"axis": -1}),
    ("concatenate-None", np.concatenate, ([A, V, S],), {"axis": None}),
    ("concatenate-empty", np.concatenate, ([E, A],), {}),
    ("stack", np.stack, ([A, A * 2],), {"axis": -1}),
    ("stack-0d", np.stack, ([S, S],), {}),
    ("unstack", getattr(np, "unstack", None), (C,), {"axis": -2}),
    ("hstack", np.hstack, ([V, r(2), S],), {}),
    ("hstack-2d", np.hstack, ([A, r(2, 1)],), {}),
    ("vstack", np.vstack, ([A, r(3)],), {}),
    ("dstack", np.dstack, ([A, r(2, 3, 2)],), {}),
    ("column_stack", np.column_stack, ([r(3), r(3, 2)],), {}),
    ("split", np.split, (r(6, 2), 3), {}),
    ("split-indices", np.split, (B, [1, 3]), {"axis": -1}),
    ("array_split", np.array_split, (r(2, 5), 3), {"axis": 1}),
    ("hsplit", np.hsplit, (B, 2), {}),
    ("vsplit", np.vsplit, (r(4, 2), [1])),
    ("dsplit", np.dsplit, (C, [1, 3]), {}),
    ("append", np.append, (A, V), {}),
    ("append-axis", np.append, (A, r(1, 3)), {"axis": 0}),
    ("insert", np.insert, (V, [1, 1, 4], r(3)), {}),
    ("insert-axis", np.insert, (A, 1, r(2)), {"axis": 1}),
    ("insert-scalar", np.insert, (A, 2, S), {}),
    ("delete", np.delete, (B, [0, 2]), {"axis": -1}),
    ("delete-slice", np.delete, (V, slice(1, 4))),
    ("delete-mask", np.delete, (A, np.array([True, False]), 0), {}),
    ("tile", np.tile, (A, (2, 1, 2)), {}),
    ("tile-0d", np.tile, (S, 3), {}),
    ("repeat", np.repeat, (A, 2), {}),
    ("repeat-array", np.repeat, (A, np.array([1, 0, 3])), {"axis": -1}),
    ("flip", np.flip, (C,), {}),
    ("flip-tuple", np.flip, (C, (0, -1)), {}),
    ("fliplr", np.fliplr, (A,), {}),
    ("flipud", np.flipud, (A,), {}),
    ("rot90", np.rot90, (C, 3), {"axes": (2, 0)}),
    ("roll", np.roll, (C, (1, -2), (0, -1)), {}),
    ("roll-None", np.roll, (A, 4), {}),
    ("pad", np.pad, (A, ((1, 0), (2, 1))), {"constant_values": 3.5}),
    ("pad-dict", np.pad, (A, {1: (1, 2)}), {}),
    ("pad-values-per-axis", np.pad, (A, 1), {"constant_values": ((1.0, 2.0), (3.0, 4.0))}),
    ("diag-1to2", np.diag, (V, -1), {}),
    ("diag-2to1", np.diag, (B, 2), {}),
    ("diagonal", np.diagonal, (C, 1, -1, 0), {}),
    ("tril", np.tril, (B, 1), {}),
    ("triu-1d", np.triu, (V, -1), {}),
    ("clip", np.clip, (B, -0.5, 0.5), {}),
    ("clip-min-max", np.clip, (B,), {"min": r(3, 1), "max": 1.0}),
    ("clip-crossed", np.clip, (B, 1.0, -1.0), {}),
    ("clip-only-upper", np.clip, (B, None, 0.0), {}),
    ("sort", np.sort, (C,), {"axis": 1}),
    ("sort-None", np.sort, (C, None), {}),
    ("diff", np.diff, (B, 2), {"axis": 0}),
    ("diff-prepend", np.diff, (B,), {"prepend": 0.5, "append": r(3, 2)}),
    ("diff-n0", np.diff, (V, 0), {}),
    ("ediff1d", np.ediff1d, (A,), {"to_begin": S, "to_end": r(2)}),
    ("trapezoid", getattr(np, "trapezoid", None), (B, np.cumsum(np.abs(r(4)))), {}),
    ("trapezoid-dx", getattr(np, "trapezoid", None), (B,), {"dx": 0.3, "axis": 0}),
    ("outer", np.outer, (A, V), {}),
    ("kron", np.kron, (A, r(2, 2)), {}),
    ("kron-mixed", np.kron, (V, A), {}),
    ("cross", np.cross, (r(4, 3), r(3)), {}),
    ("cross-axes", np.cross, (r(3, 2), r(2, 3)), {"axisa": 0, "axisc": 0}),
    ("cross-axis", np.cross, (r(3, 4), r(3, 4)), {"axis": 0}),
    ("take", np.take, (B, np.array([[0, -1], [2, 2]])), {"axis": 1}),
    ("take-flat", np.take, (B, [11, 0, 0])),
    ("take-wrap", np.take, (V, np.array([-7, 12])), {"mode": "wrap"}),
    ("take-clip", np.take, (V, np.array([-7, 12])), {"mode": "clip"}),
    ("take_along_axis", np.take_along_axis, (B, np.argsort(B, axis=0), 0), {}),
    ("take_along_axis-None", np.take_along_axis, (B, np.array([3, 3, 0])), {"axis": None}),
    ("bincount", np.bincount, (np.array([0, 2, 2, 5]), r(4)), {"minlength": 7}),
    ("where", np.where, (B > 0, B, -B), {}),
    ("where-1arg", np.where, (B > 0,), {}),
    ("full_like", np.full_like, (A, S), {}),
    ("argmax", np.argmax, (B,), {"axis": 0}),
    ("argsort", np.argsort, (C, -1), {}),
    ("argpartition", np.argpartition, (V, 2), {}),
    ("nonzero", np.nonzero, (B > 0,), {}),
    ("searchsorted", np.searchsorted, (np.sort(V), B), {}),
    ("digitize", np.digitize, (B, np.array([-1.0, 0.0, 1.0])), {}),
    ("isclose", np.isclose, (A, A + 1e-12), {}),
    ("lexsort", np.lexsort, ((V, -V),), {}),
    ("count_nonzero", np.count_nonzero, (B > 0,), {"axis": 1}),
    ("unique-constant", np.unique, (np.array([3, 1, 3, 2]),), {"return_counts": True}),
]


@pytest.mark.parametrize(
    "fn, args, kwargs",
    [
        pytest.param(c[1], c[2], c[3] if len(c) > 3 else {}, id=c[0])
        for c in VALUE_CALLS
        if c[1] is not None  # functions this NumPy does not have
    ],
)
def test_values_match_numpy(fn, args, kwargs) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if fn is np.unique:  # np.unique refuses Tensors that require grad (tested below)
            assert_same(fn(fd.tensor(args[0]), **kwargs), fn(*args, **kwargs))
            return
        both(fn, *args, **kwargs)


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a.T,
        lambda a: a[:, ::-1, ::2],
        lambda a: a.transpose(1, 2, 0)[::-1],
        lambda a: a[:, 1:],
    ],
    ids=["transposed", "negative-step", "permuted-reversed", "slice"],
)
@pytest.mark.parametrize("order", ["K", "A"])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_ravel_follows_the_memory_layout_of_views(view, order, layout) -> None:
    base = np.array(np.arange(24.0).reshape(2, 3, 4), order=layout)
    x = fd.tensor(base, requires_grad=True)
    assert x.data.flags.f_contiguous == (layout == "F")
    v = view(x)  # a view of the Tensor's data, like the ndarray view
    assert_same(np.ravel(v, order=order), np.ravel(view(base), order=order))
    w = r(v.size)
    np.sum(np.ravel(v, order=order) * w).backward()
    # the gradient lands where each raveled element came from
    expected = np.zeros(base.size)
    np.add.at(expected, np.ravel(view(base), order=order).astype(int), w)
    np.testing.assert_allclose(x.grad.data, expected.reshape(base.shape))


def test_results_of_numpy_functions_on_tensors_are_tensors() -> None:
    x = leaf(A)
    pieces = np.split(x, 3, axis=1)
    assert type(pieces) is list and all(isinstance(p, fd.Tensor) for p in pieces)
    out = np.broadcast_arrays(x, np.ones((1, 3)))
    assert type(out) is tuple and all(isinstance(o, fd.Tensor) for o in out)
    assert out[0].requires_grad and not out[1].requires_grad
    assert isinstance(np.atleast_2d(x, x), tuple)


# ---------------------------------------------------------------- gradients by hand
def test_gather_with_repeated_indices_is_a_bincount() -> None:
    x = leaf(r(6))
    idx = np.array([0, 5, 5, 2, 0, 5])
    w = r(6)
    np.sum(w * x[idx]).backward()
    np.testing.assert_allclose(x.grad.data, np.bincount(idx, w, minlength=6))
    x.grad = None
    np.sum(w * np.take(x, idx)).backward()
    np.testing.assert_allclose(x.grad.data, np.bincount(idx, w, minlength=6))


def test_index_tensors_are_constants() -> None:
    x = leaf(B)
    i = fd.tensor(np.array([2, 0, 2]))
    y = x[i, fd.tensor(1)]
    assert_same(y, B[[2, 0, 2], 1])
    np.sum(y).backward()
    expected = np.zeros_like(B)
    expected[0, 1], expected[2, 1] = 1.0, 2.0
    np.testing.assert_allclose(x.grad.data, expected)
    mask = fd.tensor(B > 0)
    assert_same(x[mask], B[B > 0])


@pytest.mark.parametrize(
    "index",
    [
        (np.array([[0], [2]]), slice(None), np.array([1, 1, 3])),  # advanced, split by a slice
        (np.array([True, False, True]),),  # mask of lower rank than x
        (slice(None), np.array([True, True]), np.array([0, 3])),  # mask next to an array
        (Ellipsis, None, np.array([3, 0, 3])),
        (1, slice(None, None, -1), [0, 0]),
    ],
    ids=["split-advanced", "low-rank-mask", "mask-and-array", "ellipsis-newaxis", "int-array"],
)
def test_batched_cotangents_through_indexing(index) -> None:
    base = r(3, 2, 4)
    x = leaf(base)
    y = x[index]
    cot = r(3, *y.shape)
    (batched,) = fd.grad(y, x, grad_outputs=cot, is_grads_batched=True)
    for b in range(3):
        expected = np.zeros_like(base)
        np.add.at(expected, index, cot[b])  # scatter-add: the transpose of the gather
        np.testing.assert_allclose(batched.data[b], expected)


@pytest.mark.parametrize(
    "index",
    [(slice(1, None),), (slice(None), slice(None, -1)), (1, None, slice(None, None, 2)), (-1, 1)],
    ids=["slice", "two-slices", "int-newaxis-step", "ints"],
)
def test_batched_cotangents_through_basic_indexing(index) -> None:
    """Under create_graph a basic index scatters the whole batch at once, batch axes
    leading: the result is the per-sample scatters, contiguous (no transposed view that
    every later pass, or a compiled kernel, would read across)."""
    base = r(3, 2, 4)
    x = leaf(base)
    y = x[index]
    cot = r(5, *y.shape)
    (batched,) = fd.grad(
        y, x, grad_outputs=fd.tensor(cot), is_grads_batched=True, create_graph=True
    )
    assert batched.data.flags.c_contiguous
    for b in range(5):
        expected = np.zeros_like(base)
        expected[index] += cot[b]
        np.testing.assert_array_equal(batched.data[b], expected)


def test_second_derivative_of_a_gather_times_a_square() -> None:
    x = leaf([1.0, 2.0, 3.0])
    idx = np.array([2, 2, 0])
    (g,) = fd.grad(np.sum(x[idx] ** 3), x, create_graph=True)
    np.testing.assert_allclose(g.data, [3.0, 0.0, 2 * 27.0])
    (h,) = fd.grad(np.sum(g * np.array([1.0, 1.0, 1.0])), x)
    np.testing.assert_allclose(h.data, [6.0, 0.0, 2 * 18.0])


def test_setitem_on_a_non_leaf_gives_the_right_gradient() -> None:
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1.0
    y[1] = x[0] * 5.0
    np.sum(y * np.array([1.0, 10.0, 100.0])).backward()
    np.testing.assert_allclose(x.grad.data, [1.0 + 50.0, 0.0, 100.0])


def test_setitem_on_a_leaf_that_requires_grad_is_refused() -> None:
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 3.0
    with fd.no_grad():
        x[0] = 3.0  # explicitly outside the graph: allowed
    np.testing.assert_allclose(x.data, [3.0, 2.0])


def test_setitem_with_repeated_indices_only_the_kept_write_gets_gradient() -> None:
    v = leaf([1.0, 2.0, 3.0])
    y = fd.tensor(np.zeros(3))
    y[np.array([1, 1, 2])] = v
    expected_values = np.zeros(3)
    expected_values[np.array([1, 1, 2])] = [1.0, 2.0, 3.0]
    assert_same(y, expected_values)
    np.sum(y * np.array([1.0, 10.0, 100.0])).backward()
    np.testing.assert_allclose(v.grad.data, [0.0, 10.0, 100.0])


def test_setitem_broadcast_value_sums_its_gradient() -> None:
    x = leaf(np.zeros((3, 4)))
    y = x * 1.0
    c = leaf(2.0)
    y[np.array([True, False, True])] = c
    w = r(3, 4)
    np.sum(y * w).backward()
    np.testing.assert_allclose(c.grad.data, w[0].sum() + w[2].sum())
    np.testing.assert_allclose(x.grad.data, w * np.array([[0.0], [1.0], [0.0]]))


def test_clip_gradient_is_zero_at_and_beyond_the_bounds() -> None:
    x = leaf([-2.0, -1.0, 0.0, 1.0, 2.0])
    np.sum(np.clip(x, -1.0, 1.0) * np.array([1.0, 2.0, 3.0, 4.0, 5.0])).backward()
    np.testing.assert_allclose(x.grad.data, [0.0, 0.0, 3.0, 0.0, 0.0])


def test_clip_gradient_flows_to_active_tensor_bounds() -> None:
    x = leaf([-2.0, -1.0, 0.0, 1.0, 2.0])
    lo, hi = leaf(-1.0), leaf([1.5, 1.5, 1.5, 1.0, 1.5])
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    np.sum(np.clip(x, lo, hi) * w).backward()
    np.testing.assert_allclose(x.grad.data, [0.0, 0.0, 3.0, 0.0, 0.0])
    np.testing.assert_allclose(lo.grad.data, 1.0 + 2.0)  # x <= lo, ties included
    np.testing.assert_allclose(hi.grad.data, [0.0, 0.0, 0.0, 4.0, 5.0])  # x >= hi
    # keywords min=/max= and a crossed pair (NumPy returns a_max everywhere)
    lo, hi, x.grad = leaf(3.0), leaf(np.full(5, 1.5)), None
    np.sum(np.clip(x, min=lo, max=hi) * w).backward()
    np.testing.assert_allclose(hi.grad.data, w)
    np.testing.assert_allclose(lo.grad.data, 0.0)
    np.testing.assert_allclose(x.grad.data, 0.0)


def test_sort_gradient_is_the_argsort_permutation() -> None:
    base = r(4, 5)
    x = leaf(base)
    w = r(4, 5)
    np.sum(np.sort(x, axis=1) * w).backward()
    perm = np.argsort(base, axis=1)
    expected = np.zeros_like(base)
    np.put_along_axis(expected, perm, w, axis=1)
    np.testing.assert_allclose(x.grad.data, expected)


def test_sort_with_ties_gives_each_element_one_cotangent() -> None:
    x = leaf([1.0, 0.0, 1.0])
    np.sum(np.sort(x) * np.array([1.0, 10.0, 100.0])).backward()
    np.testing.assert_allclose(np.sort(x.grad.data), [1.0, 10.0, 100.0])
    np.testing.assert_allclose(x.grad.data[1], 1.0)


def test_reshape_order_f_gradient() -> None:
    x = leaf(C)
    w = r(4, 6)
    np.sum(np.reshape(x, (4, 6), order="F") * w).backward()
    np.testing.assert_allclose(x.grad.data, np.reshape(w, C.shape, order="F"))


def test_reshape_order_a_follows_the_layout_of_the_data() -> None:
    base = np.asfortranarray(C)
    x = fd.tensor(base, requires_grad=True)
    w = r(4, 6)
    y = np.reshape(x, (4, 6), order="A")
    assert_same(y, np.reshape(base, (4, 6), order="A"))
    np.sum(y * w).backward()
    np.testing.assert_allclose(x.grad.data, np.reshape(w, C.shape, order="F"))


def test_an_array_argument_is_a_sequence_of_sub_arrays() -> None:
    x = leaf(C)
    for fn in (np.concatenate, np.stack):
        y = fn(x, axis=1)
        assert_same(y, fn(C, axis=1))
        w = r(2, *y.shape)
        (batched,) = fd.grad(y, x, grad_outputs=w, is_grads_batched=True, retain_graph=True)
        u = fd.tensor(w[1], requires_grad=True)
        (g,) = fd.grad(y, x, grad_outputs=u, create_graph=True, retain_graph=True)
        np.testing.assert_allclose(batched.data[1], g.data)
        assert g.requires_grad  # the cotangent's graph is kept: g is linear in u
        (back,) = fd.grad(np.sum(g * x.detach()), u)
        np.testing.assert_allclose(back.data, fn(C, axis=1))


def test_reshape_keyword_names_follow_numpy() -> None:
    x = leaf(B)
    assert_same(np.reshape(x, shape=(6, 2)), B.reshape(6, 2))
    try:
        expected = np.reshape(B, newshape=(6, 2))
    except TypeError:  # NumPy >= 2.4 removed newshape=
        with pytest.raises(TypeError, match="newshape"):
            np.reshape(x, newshape=(6, 2))
    else:
        assert_same(np.reshape(x, newshape=(6, 2)), expected)


def test_split_gradient_of_one_piece() -> None:
    x = leaf(r(6))
    a, b, c = np.split(x, 3)
    np.sum(b * 2.0).backward()
    np.testing.assert_allclose(x.grad.data, [0.0, 0.0, 2.0, 2.0, 0.0, 0.0])


@pytest.mark.skipif(not hasattr(np, "trapezoid"), reason="NumPy < 2.0")
def test_trapezoid_gradient_is_the_rule_weights() -> None:
    y = leaf(r(5))
    xs = np.array([0.0, 0.5, 1.5, 2.0, 4.0])
    np.trapezoid(y, xs).backward()
    dx = np.diff(xs)
    expected = np.zeros(5)
    expected[:-1] += dx / 2
    expected[1:] += dx / 2
    np.testing.assert_allclose(y.grad.data, expected)


def test_diff_gradient_and_prepend() -> None:
    x = leaf([1.0, 4.0, 9.0, 16.0])
    p = leaf(0.0)
    d = np.diff(x, n=2, prepend=p)
    assert_same(d, np.diff([1.0, 4.0, 9.0, 16.0], n=2, prepend=0.0))
    np.sum(d * np.array([1.0, 2.0, 3.0])).backward()
    # d_k = z_{k+2} - 2 z_{k+1} + z_k with z = (p, x0, ..., x3)
    np.testing.assert_allclose(p.grad.data, 1.0)
    np.testing.assert_allclose(x.grad.data, [-2.0 + 2.0, 1.0 - 4.0 + 3.0, 2.0 - 6.0, 3.0])


def test_pad_constant_values_gradient_per_side() -> None:
    x = leaf(np.ones((2, 2)))
    cv = leaf([[1.0, 2.0], [3.0, 4.0]])
    w = r(4, 5)
    np.sum(np.pad(x, ((1, 1), (2, 1)), constant_values=cv) * w).backward()
    # NumPy pads axis 0 first, then axis 1 over the whole (already padded) extent
    np.testing.assert_allclose(cv.grad.data[1], [w[:, :2].sum(), w[:, -1].sum()])
    np.testing.assert_allclose(cv.grad.data[0], [w[0, 2:4].sum(), w[-1, 2:4].sum()])
    np.testing.assert_allclose(x.grad.data, w[1:3, 2:4])


def test_full_like_gradient_goes_to_the_fill_value() -> None:
    template = leaf(np.zeros((2, 3)))
    fill = leaf(1.5)
    y = np.full_like(template, fill)
    np.sum(y * A).backward()
    np.testing.assert_allclose(fill.grad.data, A.sum())
    assert template.grad is None


def test_bincount_weights_gradient() -> None:
    w = leaf(r(5))
    idx = np.array([3, 0, 3, 1, 1])
    g = r(4)
    np.sum(np.bincount(idx, w) * g).backward()
    np.testing.assert_allclose(w.grad.data, g[idx])
    counts = np.bincount(fd.tensor(idx))
    assert_same(counts, np.bincount(idx))
    assert not counts.requires_grad


def test_astype_float32_gradient_is_cast_back() -> None:
    x = leaf([1.0, 2.0])
    y = x.astype(np.float32)
    assert y.dtype == np.float32
    np.sum(y * np.float32(3.0)).backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.data, [3.0, 3.0])


# ---------------------------------------------------------------- constants and refusals
def test_piecewise_constant_functions_return_constants() -> None:
    x = leaf(B)
    for result in (
        np.argmax(x),
        np.argsort(x, axis=0),
        np.searchsorted(np.sort(x.detach().data.ravel()), x),
        np.isclose(x, x),
        np.count_nonzero(x > 0),
    ):
        assert isinstance(result, fd.Tensor) and not result.requires_grad
    rows, cols = np.where(x > 0)
    assert not rows.requires_grad
    assert_same((rows, cols), np.nonzero(B > 0))


def test_histogram_is_not_supported() -> None:
    with pytest.raises(TypeError, match=r"numpy\.histogram"):
        np.histogram(leaf(V))


def test_unique_refuses_a_tensor_that_requires_grad() -> None:
    with pytest.raises(TypeError, match=r"numpy\.unique"):
        np.unique(leaf([1.0, 1.0, 2.0]))
    values = np.unique(leaf([1.0, 1.0, 2.0]).detach())
    assert_same(values, np.array([1.0, 2.0]))
    with fd.no_grad():
        assert_same(np.unique(leaf([2.0, 2.0])), np.array([2.0]))


def test_asarray_refuses_instead_of_dropping_the_gradient() -> None:
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="gradient would be lost"):
        np.asarray(x)
    with pytest.raises(RuntimeError, match="gradient would be lost"):
        np.asanyarray(x)
    np.testing.assert_array_equal(np.asarray(x.detach()), [1.0, 2.0])


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap", "symmetric", "mean"])
def test_pad_modes_other_than_constant_raise_naming_the_mode(mode) -> None:
    with pytest.raises(NotImplementedError, match=f"mode='{mode}'"):
        np.pad(leaf(V), 1, mode=mode)


def test_out_arguments_are_refused() -> None:
    x = leaf(A)
    with pytest.raises(TypeError, match="out="):
        np.concatenate([x, x], out=np.empty((4, 3)))
    with pytest.raises(TypeError, match="out="):
        np.clip(x, 0.0, 1.0, out=np.empty((2, 3)))


def test_cross_of_2d_vectors_warns_like_numpy() -> None:
    a, b = r(4, 2), r(4, 2)
    with pytest.warns(DeprecationWarning):
        expected = np.cross(a, b)
    with pytest.warns(DeprecationWarning):
        got = np.cross(leaf(a), leaf(b))
    assert_same(got, expected)


def test_bad_axis_is_a_clear_error() -> None:
    with pytest.raises(np.exceptions.AxisError):
        np.diff(leaf(A), axis=2)
    with pytest.raises(ValueError, match="order must be non-negative"):
        np.diff(leaf(A), n=-1)


# ---------------------------------------------------------------- in-place after layout ops
def test_inplace_after_a_layout_rule_is_legal() -> None:
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2.0
    z = np.sum(np.flip(np.concatenate([y, y])) * np.arange(6.0))
    y += 1.0  # flip/concatenate only need shapes: no saved value is stale
    z.backward()
    # flip(concatenate([y, y]))[k] = y[(5 - k) % 3], so y_i collects weights 5 - i and 2 - i
    i = np.arange(3.0)
    np.testing.assert_allclose(x.grad.data, 2.0 * ((5.0 - i) + (2.0 - i)))


def test_inplace_after_sort_is_refused() -> None:
    x = leaf([3.0, 1.0, 2.0])
    y = x * 2.0
    z = np.sum(np.sort(y) * np.arange(3.0))
    y += 1.0  # sort's gradient needs the values of y (their order)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


# ---------------------------------------------------------------- the cotangent direction
_FAMILIES = {"shape", "indexing", "constants"}
_LINEAR_CASES = [
    pytest.param(rule, i, case, id=f"{rule.name}-{i}")
    for rule in all_rules()
    if rule.family in _FAMILIES and rule.differentiable
    for i, case in enumerate(rule.cases)
]


@pytest.mark.parametrize("rule, index, case", _LINEAR_CASES)
def test_jvp_by_double_vjp_matches_finite_differences(rule, index, case) -> None:
    """Differentiate the vjp with respect to its cotangent: ``d/du <vjp(u), v> = J v``.

    This is how forward mode is built on reverse mode, and it exercises the vjps as
    functions of ``g`` (the generic checks differentiate them only with respect to x).
    """
    rng = np.random.default_rng(index + 17)
    args, slots, kwargs = materialize_case(case, rng)

    def call(values, as_tensors):
        ins = [fd.tensor(v, requires_grad=True) if as_tensors else v for v in values]
        out = call_case(rule, args, slots, kwargs, ins, case.writes)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        outs = [o for o in outs if np.asarray(data(o)).dtype.kind == "f"]
        if case.output is not None:
            outs = list(case.output(out))
        return ins, outs

    x0 = [np.asarray(s[2], dtype=float) for s in slots]
    direction = [rng.standard_normal(x.shape) for x in x0]
    ins, outs = call(x0, True)
    us = [fd.tensor(np.zeros(o.shape), requires_grad=True) for o in outs]
    grads = fd.grad(outs, ins, grad_outputs=us, create_graph=True, materialize_grads=True)
    live = [(g, v) for g, v in zip(grads, direction, strict=True) if g.requires_grad]
    assert live, "the vjp does not depend on the cotangent"
    jv = fd.grad(
        [g for g, _ in live],
        us,
        grad_outputs=[v for _, v in live],
        allow_unused=True,
        materialize_grads=True,
    )
    step = 1e-6
    _, plus = call([x + step * v for x, v in zip(x0, direction, strict=True)], False)
    _, minus = call([x - step * v for x, v in zip(x0, direction, strict=True)], False)
    for got, p, m in zip(jv, plus, minus, strict=True):
        expected = (np.asarray(data(p)) - np.asarray(data(m))) / (2 * step)
        np.testing.assert_allclose(got.data, expected, atol=1e-6, rtol=1e-5)
