"""BasisBatch, the structured cotangents of vectorized Jacobians: every operation, kept
structured or not, gives what the dense array gives."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
from funcdiff import _jacobian
from funcdiff._core.structured import BasisBatch
from funcdiff.functional import jacobian

RNG = np.random.default_rng(11)

LAYOUTS = [((4,), 0, 4), ((3,), 2, 7), ((2, 3), 1, 9), ((), 0, 1)]


@pytest.mark.parametrize("shape, offset, rows", LAYOUTS)
def test_operations_agree_with_the_dense_array(shape, offset, rows) -> None:
    g = BasisBatch(RNG.normal(size=shape), offset, rows)
    G = g.dense()
    assert G.shape == g.shape == (rows, *shape)
    np.testing.assert_array_equal(np.asarray(g), G)
    y = RNG.normal(size=shape)
    h = BasisBatch(RNG.normal(size=shape), offset, rows)
    # the same rows shifted (possible where the block does not fill every row)
    size = int(np.prod(shape))
    other = BasisBatch(RNG.normal(size=shape), 0 if offset else rows - size, rows)
    cases = [
        (g * y, G * y, True),
        (y * g, y * G, True),
        (g * 2.5, G * 2.5, True),
        (g / (y * y + 1), G / (y * y + 1), True),
        (-g, -G, True),
        (g * h, G * h.dense(), True),
        (g + h, G + h.dense(), True),
        (g - h, G - h.dense(), True),
        (g + other, G + other.dense(), size == rows),  # other rows: dense
        (g + y, G + y, False),  # adds to zero entries: dense
        (np.exp(g), np.exp(G), False),
        (np.sum(g, axis=0), np.sum(G, axis=0), False),
        (g.reshape(rows, -1), G.reshape(rows, -1), False),
        (g[1:], G[1:], False),
    ]
    if shape:
        wide = RNG.normal(size=(5, *shape))  # broadcasting beyond the row shape
        cases.append((g[:, None] * wide, G[:, None] * wide, False))
        unit = np.full((1,) * len(shape), 3.0)  # broadcasts within the row shape
        cases.append((g * unit, G * unit, True))
    if len(shape) == 1:
        A = RNG.normal(size=(shape[0], 5))
        cases.append((g @ A, G @ A, False))
        cases.append((np.matmul(g, A), G @ A, False))
    for got, want, structured in cases:
        assert (type(got) is BasisBatch) == structured
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-15, atol=1e-15)


def test_add_to_any_memory_layout() -> None:
    scalar = BasisBatch(np.array(2.0), 1, 3)
    np.testing.assert_array_equal(scalar.add_to(np.ones(3)), [1.0, 3.0, 1.0])
    g = BasisBatch(RNG.normal(size=(2, 3)), 1, 8)
    for order in ("C", "F"):
        dense = (
            np.asfortranarray(RNG.normal(size=(8, 2, 3)))
            if order == "F"
            else (RNG.normal(size=(8, 2, 3)))
        )
        want = dense + g.dense()
        assert g.add_to(dense) is dense
        np.testing.assert_allclose(dense, want, rtol=1e-15)


def test_vectorized_jacobian_with_structured_rows_equals_the_loop(monkeypatch) -> None:
    made = []
    real = _jacobian.identity_rows
    monkeypatch.setattr(_jacobian, "identity_rows", lambda *a: made.append(a) or real(*a))
    # Blocks of 160 x 60 rows: large enough to be pulled back in structured form.
    A = RNG.normal(size=(60, 40)) / 8
    B = RNG.normal(size=(40, 60)) / 8
    C = RNG.normal(size=(60, 60)) / 8

    def f(x, y):
        h = np.tanh(A @ x) * (C @ y)
        return h, np.exp(x) * y[:40] + np.sum(h), (x @ B) / (1.0 + y * y)

    x, y = fd.tensor(RNG.normal(size=40)), fd.tensor(RNG.normal(size=60))
    looped = jacobian(f, (x, y), strict=True)  # strict mode: one backward pass per row
    assert made == []
    for chunk in (None, 3, 7):
        fast = jacobian(f, (x, y), vectorize=True, chunk_size=chunk)
        for row_l, row_f in zip(looped, fast):
            for jl, jf in zip(row_l, row_f):
                np.testing.assert_allclose(jf.numpy(), jl.numpy(), rtol=1e-13, atol=1e-14)
    assert len(made) == 3  # one structured block per output, in the unchunked pass


def test_gradients_handed_out_are_writable_arrays() -> None:
    # A structured cotangent that reaches a captured input, a hook or a leaf unchanged
    # comes out as the caller's own writable array.
    x = fd.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = x * 2.0
    g = BasisBatch(np.ones(3), 0, 3)
    (gy,) = fd.grad(y, y, grad_outputs=[g], is_grads_batched=True)
    gy.data[0, 0] = 7.0
    np.testing.assert_array_equal(g.dense(), np.eye(3))
    (gx,) = fd.grad(y + y, x, grad_outputs=[g], is_grads_batched=True)
    np.testing.assert_array_equal(gx.numpy(), 4.0 * np.eye(3))
    assert gx.data.flags.writeable
