"""Iterating over a Tensor (``a, b, c = y``): one recorded node for all the rows."""

from __future__ import annotations

import numpy as np
import pytest

import funcdiff as fd
from funcdiff import replay
from funcdiff.functional import hessian, jacobian


def test_unpacking_records_one_node_and_differentiates():
    x = fd.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    a, b, c = x
    if hasattr(np, "unstack"):
        assert a.grad_fn is b.grad_fn is c.grad_fn
    np.testing.assert_array_equal(b.data, [2.0, 3.0])
    (b * c).sum().backward()  # a unused: a zero gradient
    np.testing.assert_array_equal(x.grad, [[0.0, 0.0], [4.0, 5.0], [2.0, 3.0]])


def test_second_order_and_replay_through_unpacking():
    def f(y):
        a, b, c = y
        return a * b * c + np.sin(a) * c

    y0 = np.array([0.3, -1.2, 2.0])
    a, b, c = y0
    expected = np.array(
        [
            [-np.sin(a) * c, c, b + np.cos(a)],
            [c, 0.0, a],
            [b + np.cos(a), a, 0.0],
        ]
    )
    np.testing.assert_allclose(hessian(f, fd.tensor(y0)), expected, rtol=1e-14)
    jac = replay.jacobian(lambda y: np.stack(list(y)) ** 2)
    for point in (y0, 2 * y0):
        np.testing.assert_allclose(jac(point), np.diag(2 * point), rtol=1e-14)
    np.testing.assert_allclose(
        jacobian(lambda y: np.stack([r.sum() for r in y]), fd.tensor(np.ones((2, 3)))),
        np.kron(np.eye(2), np.ones(3)).reshape(2, 2, 3),
    )


def test_a_zero_dimensional_tensor_is_not_iterable():
    with pytest.raises(TypeError, match="0-d"):
        iter(fd.tensor(1.0))
