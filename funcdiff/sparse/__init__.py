"""Sparse Jacobians and Hessians, with the sparsity detected from the code.

The pattern of a Jacobian (which outputs depend on which inputs) is found by running
the function once on Tensors and following every operation's structure, never its
values; the columns (or rows) that share no row (column) are then coloured alike, and
one forward pass with one tangent per colour (or one backward pass with one cotangent
per colour) gives every nonzero entry exactly. The result is a
``scipy.sparse.csr_array``.

>>> import numpy as np
>>> import funcdiff.sparse as fs
>>> def f(x):
...     return x[1:] ** 2 - x[:-1]
>>> fs.jacobian_sparsity(f, np.ones(4)).toarray().astype(int)
array([[1, 1, 0, 0],
       [0, 1, 1, 0],
       [0, 0, 1, 1]])
>>> J = fs.prepare_jacobian(f, np.ones(4))
>>> J(np.arange(4.0)).toarray()
array([[-1.,  2.,  0.,  0.],
       [ 0., -1.,  4.,  0.],
       [ 0.,  0., -1.,  6.]])
>>> J.ncolors, J.mode
(2, 'forward')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import scipy.sparse as sp

from funcdiff._core.exits import refuse_recorded_arguments
from funcdiff._core.tensor import tensor
from funcdiff.sparse import linalg  # noqa: F401  (fs.linalg, the submodule)
from funcdiff.sparse._detect import run_traced
from funcdiff.sparse._prepared import (
    SparseHessian,
    SparseJacobian,
    SparsityError,
    SparsityGuardError,
    _output,
    as_point,
)
from funcdiff.sparse.matrices import csr_array

__all__ = [
    "jacobian_sparsity",
    "hessian_sparsity",
    "jacobian",
    "hessian",
    "prepare_jacobian",
    "prepare_hessian",
    "SparseJacobian",
    "SparseHessian",
    "SparsityError",
    "SparsityGuardError",
    "csr_array",
]


def jacobian_sparsity(f: Callable[..., Any], x: Any, *, args: Sequence[Any] = ()) -> sp.csr_array:
    """The sparsity pattern of the Jacobian of ``f`` at ``x``, from ``f``'s code.

    Parameters
    ----------
    f : callable
        ``f(x, *args)``, NumPy code returning one array.
    x : array_like
        The point; its elements are the columns, in C order.
    args : sequence, optional
        Further arguments of ``f``, constants (not differentiated).

    Returns
    -------
    scipy.sparse.csr_array
        Boolean, shape ``(f(x).size, x.size)``: ``True`` where an output element may
        depend on an input element.

    Notes
    -----
    The pattern is structural: it holds at every point where ``f`` takes the same
    Python branches as at ``x`` (``x[0] * x[1]`` traced at zeros still has both
    entries). Operations that choose between values (``where``, ``maximum``, ``abs``,
    ``sort``) count every branch; an operation whose structure funcdiff does not know
    (a matrix factorization, a custom Function) makes its outputs depend on all of
    its inputs' dependencies. A pattern may hold more entries than the Jacobian's
    nonzeros, never fewer.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff.sparse as fs
    >>> fs.jacobian_sparsity(lambda x: np.cumsum(x), np.zeros(3)).toarray()
    array([[ True, False, False],
           [ True,  True, False],
           [ True,  True,  True]])
    """
    refuse_recorded_arguments("funcdiff.sparse", [("x", x), ("args", tuple(args))], f)
    x = as_point(x)
    xt = tensor(x, requires_grad=True)
    out, tracer = run_traced(f, (xt,), tuple(args), hessian=False)
    out = _output(out, "funcdiff.sparse.jacobian_sparsity")
    p = tracer.pattern_of(out)
    if p is None:
        return sp.csr_array((int(out.data.size), int(x.size)), dtype=bool)
    rows = p.rows()
    rows.sort_indices()
    return rows


def hessian_sparsity(f: Callable[..., Any], x: Any, *, args: Sequence[Any] = ()) -> sp.csr_array:
    """The sparsity pattern of the Hessian of a scalar ``f`` at ``x``, from its code.

    For a function with several outputs, the pattern is that of the Hessian of every
    linear combination of them (what a Lagrangian needs).

    Returns
    -------
    scipy.sparse.csr_array
        Boolean and symmetric, shape ``(x.size, x.size)``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff.sparse as fs
    >>> f = lambda x: np.sum((x[1:] - x[:-1] ** 2) ** 2)
    >>> fs.hessian_sparsity(f, np.zeros(4)).toarray().astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])
    """
    refuse_recorded_arguments("funcdiff.sparse", [("x", x), ("args", tuple(args))], f)
    x = as_point(x)
    xt = tensor(x, requires_grad=True)
    out, tracer = run_traced(f, (xt,), tuple(args), hessian=True)
    _output(out, "funcdiff.sparse.hessian_sparsity")
    assert tracer.acc is not None  # traced with hessian=True
    return tracer.acc.pattern()


def prepare_jacobian(
    f: Callable[..., Any],
    x: Any,
    sparsity: Any = None,
    *,
    mode: str = "auto",
    args: Sequence[Any] = (),
    on_guard_failure: str = "redetect",
    max_patterns: int = 8,
    replay: bool = False,
    compile: bool | str = "auto",
) -> SparseJacobian:
    """Detect and colour the Jacobian's pattern once, for evaluation at many points.

    Parameters
    ----------
    f : callable
        ``f(x, *args)``, NumPy code returning one array.
    x : array_like
        A point with the shape of every later point.
    sparsity : scipy.sparse matrix or array_like of bool, optional
        The pattern, ``(f(x).size, x.size)``; detected from the code when None. A given
        pattern is trusted: one that misses entries gives wrong values (the first
        evaluation compares ``J @ w`` with a directional derivative and raises
        :class:`SparsityError` when they differ).
    mode : {"auto", "forward", "reverse"}
        Column colouring and one batched forward pass, or row colouring and one
        batched backward pass; ``"auto"`` takes whichever needs fewer colours (forward
        on a tie).
    args : sequence, optional
        Default further arguments of ``f``; a call ``J(x, *args)`` may pass others.
    on_guard_failure : {"redetect", "raise"}
        What a call at a point where ``f`` branches differently (an ``if`` on a value
        computed from ``x``) does: detect that path's pattern (kept, up to
        ``max_patterns`` paths) or raise :class:`SparsityGuardError`. It never returns
        a matrix built on another path's pattern.
    max_patterns : int
        How many paths' patterns are kept.
    replay : bool
        Record the run of ``f`` and the compressed pass once per pattern (after its
        first evaluation) and replay them as plain NumPy calls at later points
        (:mod:`funcdiff.replay`): the same values, without the cost of recording a graph.
        A point where ``f`` branches differently runs eagerly, as without replay.
    compile : {False, True, "auto"}, default "auto"
        With ``replay=True``: lower the recorded program to XLA kernels through JAX
        (:mod:`funcdiff.replay.jit`; ``True`` needs the extra ``funcdiff[jit]``,
        ``"auto"`` compiles when it is installed and the program is large enough).

    Returns
    -------
    SparseJacobian
        ``J(x, *args)`` returns the Jacobian as a float ``csr_array`` whose structure is
        ``J.sparsity`` at every call (entries that happen to be zero are stored), so a
        factorization can reuse it. ``J.value_and_jacobian(x)`` also returns ``f(x)``.
        ``J.colors``, ``J.ncolors``, ``J.mode``, ``J.info`` (timings, redetections and
        the operations taken as dense) describe it.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff.sparse as fs
    >>> J = fs.prepare_jacobian(lambda y: np.diff(y ** 3), np.ones(5))
    >>> J(np.arange(5.0)).toarray()
    array([[  0.,   3.,   0.,   0.,   0.],
           [  0.,  -3.,  12.,   0.,   0.],
           [  0.,   0., -12.,  27.,   0.],
           [  0.,   0.,   0., -27.,  48.]])
    >>> J.ncolors
    2
    """
    return SparseJacobian(
        f,
        x,
        sparsity,
        mode=mode,
        args=args,
        on_guard_failure=on_guard_failure,
        max_patterns=max_patterns,
        replay=replay,
        compile=compile,
    )


def prepare_hessian(
    f: Callable[..., Any],
    x: Any,
    sparsity: Any = None,
    *,
    coloring: str = "star",
    args: Sequence[Any] = (),
    on_guard_failure: str = "redetect",
    max_patterns: int = 8,
    replay: bool = False,
    compile: bool | str = "auto",
) -> SparseHessian:
    """Detect and colour a scalar function's Hessian pattern once, for many points.

    Parameters are those of :func:`prepare_jacobian`, with ``coloring``: ``"star"``
    (a symmetric colouring: an arrowhead Hessian needs 2 products, where a
    column colouring needs ``n``) or ``"column"`` (each product recovers its entries
    directly). Each colour costs one Hessian-vector product, all in one batched
    forward pass through the recorded gradient.

    Returns
    -------
    SparseHessian
        ``H(x, *args)`` returns the Hessian as a symmetric float ``csr_array``;
        ``H.hessp(x, p)`` one Hessian-vector product.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff.sparse as fs
    >>> H = fs.prepare_hessian(lambda x: np.sum(x[0] * x[1:]) + np.sum(x ** 4), np.ones(4))
    >>> H(np.ones(4)).toarray()
    array([[12.,  1.,  1.,  1.],
           [ 1., 12.,  0.,  0.],
           [ 1.,  0., 12.,  0.],
           [ 1.,  0.,  0., 12.]])
    >>> H.ncolors
    2
    """
    return SparseHessian(
        f,
        x,
        sparsity,
        coloring=coloring,
        args=args,
        on_guard_failure=on_guard_failure,
        max_patterns=max_patterns,
        replay=replay,
        compile=compile,
    )


def jacobian(
    f: Callable[..., Any],
    x: Any,
    sparsity: Any = None,
    *,
    mode: str = "auto",
    args: Sequence[Any] = (),
) -> sp.csr_array:
    """The Jacobian of ``f`` at ``x`` as a float ``scipy.sparse.csr_array``.

    ``sparsity=None`` detects the pattern (see :func:`jacobian_sparsity`); a given
    pattern is used as it is. For many points, :func:`prepare_jacobian` detects and
    colours once.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff.sparse as fs
    >>> fs.jacobian(lambda x: x * x[::-1], np.array([1.0, 2.0, 3.0])).toarray()
    array([[3., 0., 1.],
           [0., 4., 0.],
           [3., 0., 1.]])
    """
    return SparseJacobian(f, x, sparsity, mode=mode, args=args)(x)


def hessian(
    f: Callable[..., Any],
    x: Any,
    sparsity: Any = None,
    *,
    coloring: str = "star",
    args: Sequence[Any] = (),
) -> sp.csr_array:
    """The Hessian of a scalar ``f`` at ``x`` as a float ``scipy.sparse.csr_array``.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff.sparse as fs
    >>> fs.hessian(lambda x: np.sum(x[1:] * x[:-1]), np.ones(3)).toarray()
    array([[0., 1., 0.],
           [1., 0., 1.],
           [0., 1., 0.]])
    """
    return SparseHessian(f, x, sparsity, coloring=coloring, args=args)(x)
