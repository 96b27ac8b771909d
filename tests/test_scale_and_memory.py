"""Deep graphs and memory: no recursion limit, and a finished backward frees its graph."""

from __future__ import annotations

import gc
import sys
import tracemalloc
import weakref

import numpy as np
import pytest

import funcdiff as fd


@pytest.mark.slow
def test_million_op_chain_runs_backward_without_recursion_error() -> None:
    x = fd.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(1_000_000):
        y = y + 1.0
    assert sys.getrecursionlimit() < 1_000_000
    y.backward()
    assert x.grad.item() == 1.0
    assert y.item() == 1_000_001.0


def test_deep_chain_with_create_graph_second_order() -> None:
    x = fd.tensor(0.5, requires_grad=True)
    y = x
    for _ in range(20_000):
        y = y * 1.0001
    y = y * y
    (g,) = fd.grad(y, x, create_graph=True)
    (h,) = fd.grad(g, x)
    c = 1.0001**20_000
    np.testing.assert_allclose(g.item(), 2 * c * c * 0.5, rtol=1e-10)
    np.testing.assert_allclose(h.item(), 2 * c * c, rtol=1e-10)


@pytest.mark.slow
def test_memory_stays_flat_over_many_backward_passes_on_large_arrays() -> None:
    rng = np.random.default_rng(0)
    x = fd.tensor(rng.standard_normal(1_000_000), requires_grad=True)

    def one_pass() -> None:
        y = (np.sin(x) * x + np.exp(-x * x)).sum()
        y.backward()

    one_pass()  # warm-up: .grad is allocated once
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(100):
            one_pass()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # One array is 8 MB: the growth after 100 passes must be far below one array,
    # and the peak bounded by the few temporaries of one pass.
    assert after - before < 1_000_000, f"memory grew by {after - before} bytes"
    assert peak - before < 12 * 8_000_000


def test_saved_values_are_released_after_backward() -> None:
    x = fd.tensor(np.ones(1000), requires_grad=True)
    h = np.sin(x)
    ref = weakref.ref(h)
    y = np.cos(h).sum()  # cos's derivative reads its input (exp's would read its output)
    del h
    assert ref() is not None  # kept alive by the graph for backward
    y.backward()
    assert ref() is None  # released as soon as the node has run


def test_retained_graph_keeps_values_until_dropped() -> None:
    x = fd.tensor(np.ones(10), requires_grad=True)
    h = np.sin(x)
    ref = weakref.ref(h)
    y = np.cos(h).sum()
    del h
    y.backward(retain_graph=True)
    assert ref() is not None
    del y
    assert ref() is None
