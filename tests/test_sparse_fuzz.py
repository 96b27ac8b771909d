"""Sparsity patterns of random NumPy programs cover their dense Jacobians and Hessians.

The programs are those of ``tests/support/fuzz_programs.py`` (elementwise and special functions,
broadcasting, reductions, indexing and in-place assignment, shape functions, products
and linear algebra), with all their inputs flattened into one vector.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import fuzz_programs as fp

import funcdiff as fd
import funcdiff.sparse as fs
from funcdiff.functional import hessian, jacobian

#: Programs checked in the fast tier; the slow tier checks many more.
SEEDS = [*range(30), *(pytest.param(s, marks=pytest.mark.slow) for s in range(30, 150))]


def _flat_program(seed: int):
    prog = fp.generate_program(fp.RandomChooser(7_000 + seed))
    f, loss, _ = prog.build()
    shapes = [x.shape for x in prog.inputs]
    sizes = [x.size for x in prog.inputs]

    def split(v):
        parts, start = [], 0
        for shape, size in zip(shapes, sizes):
            parts.append(v[start : start + size].reshape(shape))
            start += size
        return parts

    def vector(v):
        outs = f(*split(v))
        outs = outs if isinstance(outs, tuple) else (outs,)
        return np.concatenate([np.reshape(o, -1) for o in outs])

    x = np.concatenate([np.ravel(v) for v in prog.inputs])
    return prog, vector, lambda v: loss(*split(v)), x


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program_patterns(seed: int) -> None:
    prog, vector, scalar, x = _flat_program(seed)
    dense = np.asarray(jacobian(vector, fd.tensor(x), vectorize=True).data).reshape(-1, x.size)
    pattern = fs.jacobian_sparsity(vector, x).toarray()
    scale = max(1.0, np.abs(dense).max(initial=0.0))
    missed = (np.abs(dense) > 1e-13 * scale) & ~pattern
    assert not missed.any(), f"pattern misses {np.argwhere(missed)[:5]}\n{prog!r}"
    np.testing.assert_allclose(fs.jacobian(vector, x).toarray(), dense, rtol=0, atol=1e-12 * scale)

    h_dense = np.asarray(hessian(scalar, fd.tensor(x)).data).reshape(x.size, x.size)
    h_pattern = fs.hessian_sparsity(scalar, x).toarray()
    h_scale = max(1.0, np.abs(h_dense).max(initial=0.0))
    missed = (np.abs(h_dense) > 1e-12 * h_scale) & ~h_pattern
    assert not missed.any(), f"Hessian pattern misses {np.argwhere(missed)[:5]}\n{prog!r}"
    np.testing.assert_allclose(
        fs.hessian(scalar, x).toarray(), h_dense, rtol=0, atol=1e-10 * h_scale
    )
