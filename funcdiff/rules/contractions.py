"""Contraction rules: ``matmul``, ``tensordot``, ``dot``/``inner``/``vdot``,
``vecdot``/``matvec``, ``einsum``, ``multi_dot``, ``outer``, ``kron`` and ``cross``.

Every vjp is a contraction again (``matmul``, ``einsum``, ``tensordot``), so each rule is
differentiable to any order under ``create_graph=True``. Cotangents may carry one leading
batch axis and matrices their own stack axes ``(..., n, n)``: products broadcast over
both, and a batch of cotangents against a single 2-D matrix is folded into one GEMM.
``matmul`` also has forward-mode tangent maps (it is bilinear), so ``jvp`` through a
product costs one product per tangent.

Examples
--------
>>> import numpy as np
>>> import funcdiff as fd
>>> a = fd.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> b = np.array([1.0, -1.0])
>>> np.sum(a @ b).backward()
>>> a.grad
tensor([[ 1., -1.],
        [ 1., -1.]])
"""

from __future__ import annotations

import math
import operator
import string
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff._core.backends import on_device_of
from funcdiff._core.registry import Rule, Structure, batch_ndim, dispatching, register
from funcdiff.rules import batching
from funcdiff.rules.cases import Arg, Case
from funcdiff.rules.linalg_common import conjugating_first, mm, mT, size_of
from funcdiff.rules.shape import _axis, _batch, _rule
from funcdiff.rules.shape import _no_out as _no_numpy_out  # numpy.<name>-style message
from funcdiff.rules.structure import CONTRACT, last_axis


# ----------------------------------------------------------------------------- helpers
def _no_out(name: str, out) -> None:
    if out is not None:
        raise TypeError(
            f"funcdiff: {name}(..., out=...) is not supported on Tensors; "
            "use the returned value instead"
        )


# ----------------------------------------------------------------------------- matmul
def _matmul_vjp_a(g, ans, a, b):
    na, nb = np.ndim(a), np.ndim(b)
    if nb == 1:  # (..., m, k) @ (k,) or inner product: g[..., m] b[k]
        return np.expand_dims(g, -1) * b
    if na == 1:  # (k,) @ (..., k, n) -> (..., n)
        if nb == 2:
            return mm(g, mT(b))
        return np.squeeze(np.matmul(np.expand_dims(g, -2), mT(b)), -2)
    return mm(g, mT(b))


def _matmul_vjp_b(g, ans, a, b):
    na, nb = np.ndim(a), np.ndim(b)
    if na == 2 and nb == 1:  # matrix @ vector: g[..., m] a[m, k], one GEMV or GEMM
        return np.matmul(g, a)
    if na == 1:
        if nb == 1:
            return np.expand_dims(g, -1) * a
        if np.shape(g)[-1] < np.shape(a)[-1]:  # the long axis innermost: 5x faster
            return np.swapaxes(np.expand_dims(g, -1) * np.expand_dims(a, -2), -1, -2)
        return np.expand_dims(a, -1) * np.expand_dims(g, -2)  # outer a[k] g[..., n]
    ashape = np.shape(a)
    if nb == 1 or (nb == 2 and na > 2):
        # Fold every row of every stacked matrix of ``a`` into one contraction: a single
        # GEMM for the whole stack (and batch) instead of per-matrix products summed later.
        rows = size_of(ashape[:-1])
        a2 = np.reshape(a, (rows, ashape[-1]))
        nbt = batch_ndim(g, ans)
        gshape = np.shape(g)
        if nb == 1:
            return mm(np.reshape(g, tuple(gshape[:nbt]) + (rows,)), a2)
        g2 = np.reshape(g, tuple(gshape[:nbt]) + (rows, gshape[-1]))
        return np.matmul(mT(a2), g2)
    return np.matmul(mT(a), g)


# Forward mode: matmul is bilinear, so a tangent of either factor is multiplied through.
# A batch of tangents stays one product where matmul's own broadcasting allows it.
def _matmul_jvp_a(t, ans, a, b):
    if batch_ndim(t, a) and (np.ndim(a) < 2 or np.ndim(b) > 2):
        return NotImplemented
    return np.matmul(t, b)


def _matmul_jvp_b(t, ans, a, b):
    na, nb = np.ndim(a), np.ndim(b)
    if not batch_ndim(t, b):
        return np.matmul(a, t)
    if nb == 1 and na <= 2:  # rows of tangents times a^T: (B, k) @ (k, m)
        return np.matmul(t, mT(a)) if na == 2 else np.matmul(t, a)
    if nb == 2 and na <= 2:
        return np.matmul(a, t)
    return NotImplemented


_MATMUL_JVPS = {0: _matmul_jvp_a, 1: _matmul_jvp_b}

_matmul_cases = (
    Case((Arg((3, 4)), Arg((4, 2)))),
    Case((Arg((3, 4)), Arg((4,)))),
    Case((Arg((4,)), Arg((4, 2)))),
    Case((Arg((4,)), Arg((4,)))),
    Case((Arg((2, 3, 4)), Arg((4, 2)))),
    Case((Arg((2, 3, 4)), Arg((4,)))),
    Case((Arg((4,)), Arg((2, 4, 3)))),
    Case((Arg((3, 4)), Arg((2, 4, 2)))),
    Case((Arg((2, 1, 2, 3)), Arg((3, 3, 2)))),
    Case((Arg((2, 3, 4)), Arg((2, 4, 2), diff=False))),
)
register(
    Rule(
        "matmul",
        np.matmul,
        vjps={0: _matmul_vjp_a, 1: _matmul_vjp_b},
        jvps=_MATMUL_JVPS,
        cases=_matmul_cases,
        family="linalg",
        structure=CONTRACT,
        batch=batching.matmul,
        complex=True,
    )
)
if hasattr(np.linalg, "matmul"):  # NumPy >= 2.0
    register(
        Rule(
            "linalg.matmul",
            np.linalg.matmul,
            vjps={0: _matmul_vjp_a, 1: _matmul_vjp_b},
            jvps=_MATMUL_JVPS,
            cases=_matmul_cases[:2],
            family="linalg",
            structure=CONTRACT,
            batch=batching.matmul,
            complex=True,
        )
    )


# ----------------------------------------------------------------------------- tensordot
def _tensordot_axes(axes, nda: int, ndb: int) -> tuple[list[int], list[int]]:
    """``axes`` of ``tensordot`` as two lists of non-negative axes."""
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(nda, ndb):
            raise ValueError(f"tensordot: axes={n} does not fit arrays of ndim {nda} and {ndb}")
        return list(range(nda - n, nda)), list(range(n))
    try:
        xa, xb = axes
    except (TypeError, ValueError):
        raise TypeError(
            f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}"
        ) from None
    xa = [int(xa)] if isinstance(xa, (int, np.integer)) else [int(i) for i in xa]
    xb = [int(xb)] if isinstance(xb, (int, np.integer)) else [int(i) for i in xb]
    return [i % nda for i in xa], [i % ndb for i in xb]


def _tensordot_vjp(operand: int):
    """The vjp of ``tensordot`` for ``a`` (``operand`` 0) or ``b`` (1).

    ``g`` has the batch axes, then the free axes of ``a``, then those of ``b``. It is
    contracted with the other operand over that operand's free axes, which leaves the
    batch, this operand's free axes and its contracted ones (in the other operand's
    sorted order); a transpose puts them back in this operand's order.
    """

    def vjp(g, ans, a, b, axes=2):
        nda, ndb = np.ndim(a), np.ndim(b)
        axa, axb = _tensordot_axes(axes, nda, ndb)
        nbt = batch_ndim(g, ans)
        fa = [i for i in range(nda) if i not in axa]
        fb = [j for j in range(ndb) if j not in axb]
        if operand == 0:
            nd, free, summed, other, other_free, other_summed = nda, fa, axa, b, fb, axb
            g_other = [nbt + len(fa) + p for p in range(len(fb))]
        else:
            nd, free, summed, other, other_free, other_summed = ndb, fb, axb, a, fa, axa
            g_other = [nbt + p for p in range(len(fa))]
        res = np.tensordot(g, other, axes=(g_other, other_free))
        rank = {j: r for r, j in enumerate(sorted(other_summed))}
        pos = [
            nbt + free.index(i)
            if i in free
            else nbt + len(free) + rank[other_summed[summed.index(i)]]
            for i in range(nd)
        ]
        return np.transpose(res, tuple(range(nbt)) + tuple(pos))

    return vjp


_tensordot_vjp_a = _tensordot_vjp(0)
_tensordot_vjp_b = _tensordot_vjp(1)


def _tensordot(a, b, axes=2):
    return np.tensordot(a, b, axes=axes)


_tensordot_cases = (
    Case((Arg((2, 3, 4)), Arg((3, 4, 5))), {"axes": 2}),
    Case((Arg((2, 3)), Arg((3, 4))), {"axes": 1}),
    Case((Arg((2, 3)), Arg((4,))), {"axes": 0}),
    Case((Arg((2, 3, 4)), Arg((4, 2, 3))), {"axes": ([0, 2], [1, 0])}),
    Case((Arg((3, 2)), Arg((2, 3))), {"axes": (-1, 0)}),
)
register(
    Rule(
        "tensordot",
        _tensordot,
        vjps={0: _tensordot_vjp_a, 1: _tensordot_vjp_b},
        cases=_tensordot_cases,
        family="linalg",
        structure=CONTRACT,
        complex=True,
    ),
    np.tensordot,
)
if hasattr(np.linalg, "tensordot"):
    register(
        Rule(
            "linalg.tensordot",
            lambda x1, x2, axes=2: np.tensordot(x1, x2, axes=axes),
            vjps={
                0: lambda g, ans, x1, x2, axes=2: _tensordot_vjp_a(g, ans, x1, x2, axes),
                1: lambda g, ans, x1, x2, axes=2: _tensordot_vjp_b(g, ans, x1, x2, axes),
            },
            cases=_tensordot_cases[:2],
            family="linalg",
            structure=CONTRACT,
            complex=True,
        ),
        np.linalg.tensordot,
    )


# ----------------------------------------------------------------------------- dot, inner, vdot
def _dot(a, b, out=None):
    _no_out("dot", out)
    return np.dot(a, b)


def _dot_axes(a, b):
    return ([np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)])


def _dot_vjp_a(g, ans, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return g * b
    return _tensordot_vjp_a(g, ans, a, b, _dot_axes(a, b))


def _dot_vjp_b(g, ans, a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return g * a
    return _tensordot_vjp_b(g, ans, a, b, _dot_axes(a, b))


register(
    Rule(
        "dot",
        _dot,
        vjps={0: _dot_vjp_a, 1: _dot_vjp_b},
        cases=(
            Case((Arg(()), Arg((3,)))),
            Case((Arg((2, 3)), Arg(()))),
            Case((Arg((4,)), Arg((4,)))),
            Case((Arg((3, 4)), Arg((4,)))),
            Case((Arg((4,)), Arg((4, 2)))),
            Case((Arg((3, 4)), Arg((4, 2)))),
            Case((Arg((2, 3, 4)), Arg((4,)))),
            Case((Arg((2, 3, 4)), Arg((5, 4, 2)))),
            Case((Arg((3,)), Arg((2, 3, 4)))),
        ),
        family="linalg",
        structure=CONTRACT,
        batch=batching.dot,
        complex=True,
    ),
    np.dot,
)


def _inner_axes(a, b):
    return ([np.ndim(a) - 1], [np.ndim(b) - 1])


register(
    Rule(
        "inner",
        np.inner,
        vjps={
            0: lambda g, ans, a, b: (
                g * b
                if np.ndim(a) == 0 or np.ndim(b) == 0
                else _tensordot_vjp_a(g, ans, a, b, _inner_axes(a, b))
            ),
            1: lambda g, ans, a, b: (
                g * a
                if np.ndim(a) == 0 or np.ndim(b) == 0
                else _tensordot_vjp_b(g, ans, a, b, _inner_axes(a, b))
            ),
        },
        cases=(
            Case((Arg((4,)), Arg((4,)))),
            Case((Arg((2, 3)), Arg((4, 3)))),
            Case((Arg((2, 2, 3)), Arg((3,)))),
            Case((Arg(()), Arg((2, 3)))),
        ),
        family="linalg",
        structure=CONTRACT,
        batch=batching.inner,
        complex=True,
    )
)


def _vdot_vjp(g, ans, x, y):
    nbt = batch_ndim(g, ans)
    lead = tuple(np.shape(g)[:nbt])
    flat = np.reshape(g, lead + (1,)) * np.ravel(y)
    return np.reshape(flat, lead + tuple(np.shape(x)))


_VDOT_VJPS: dict[int | str, Callable[..., Any]] = {
    0: lambda g, ans, a, b: _vdot_vjp(g, ans, a, b),
    1: lambda g, ans, a, b: _vdot_vjp(g, ans, b, a),
}
register(
    Rule(
        "vdot",
        np.vdot,
        vjps=_VDOT_VJPS,
        complex_vjps=conjugating_first(_VDOT_VJPS),
        cases=(
            Case((Arg((4,)), Arg((4,)))),
            Case((Arg((2, 3)), Arg((6,)))),
            Case((Arg(()), Arg(()))),
        ),
        family="linalg",
        structure=CONTRACT,
        batch=batching.vdot,
        complex=True,
    )
)


# ----------------------------------------------------------------------------- vecdot, matvec
def _vecdot_vjp(g, ans, x, y, axis=-1):
    nd = max(np.ndim(x), np.ndim(y))
    ax = int(axis) % nd - nd if nd else -1
    return np.expand_dims(g, ax) * y


def _vecdot_fn(x1, x2, axis=-1):
    return np.linalg.vecdot(x1, x2, axis=axis)


_LINALG_VECDOT_VJPS: dict[int | str, Callable[..., Any]] = {
    0: lambda g, ans, x1, x2, axis=-1: _vecdot_vjp(g, ans, x1, x2, axis),
    1: lambda g, ans, x1, x2, axis=-1: _vecdot_vjp(g, ans, x2, x1, axis),
}
if hasattr(np.linalg, "vecdot"):
    register(
        Rule(
            "linalg.vecdot",
            _vecdot_fn,
            vjps=_LINALG_VECDOT_VJPS,
            complex_vjps=conjugating_first(_LINALG_VECDOT_VJPS),
            cases=(
                Case((Arg((2, 3)), Arg((3,)))),
                Case((Arg((3, 2)), Arg((3, 2))), {"axis": 0}),
            ),
            family="linalg",
            structure=CONTRACT,
            complex=True,
        ),
        np.linalg.vecdot,
    )
_VECDOT_VJPS: dict[int | str, Callable[..., Any]] = {
    0: lambda g, ans, x1, x2: np.expand_dims(g, -1) * x2,
    1: lambda g, ans, x1, x2: np.expand_dims(g, -1) * x1,
}
if isinstance(getattr(np, "vecdot", None), np.ufunc):
    register(
        Rule(
            "vecdot",
            np.vecdot,
            vjps=_VECDOT_VJPS,
            complex_vjps=conjugating_first(_VECDOT_VJPS),
            cases=(Case((Arg((2, 3)), Arg((3,)))), Case((Arg((4,)), Arg((2, 4))))),
            family="linalg",
            structure=CONTRACT,
            complex=True,
        )
    )
_VECMAT_VJPS: dict[int | str, Callable[..., Any]] = {
    0: lambda g, ans, v, m: np.matvec(m, g),
    1: lambda g, ans, v, m: np.expand_dims(v, -1) * np.expand_dims(g, -2),
}
if isinstance(getattr(np, "matvec", None), np.ufunc):
    register(
        Rule(
            "matvec",
            np.matvec,
            vjps={
                0: lambda g, ans, m, v: np.expand_dims(g, -1) * np.expand_dims(v, -2),
                1: lambda g, ans, m, v: np.matvec(mT(m), g),
            },
            cases=(Case((Arg((3, 4)), Arg((4,)))), Case((Arg((2, 3, 4)), Arg((4,))))),
            family="linalg",
            structure=CONTRACT,
            complex=True,
        )
    )
    register(
        Rule(
            "vecmat",
            np.vecmat,
            vjps=_VECMAT_VJPS,
            complex_vjps=conjugating_first(_VECMAT_VJPS),
            cases=(Case((Arg((3,)), Arg((3, 4)))), Case((Arg((2, 3)), Arg((3, 4))))),
            family="linalg",
            structure=CONTRACT,
            complex=True,
        )
    )


# ----------------------------------------------------------------------------- einsum
_LABELS = string.ascii_uppercase + string.ascii_lowercase


def _sublist_to_str(sub) -> str:
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        else:
            i = operator.index(s)
            if not 0 <= i < len(_LABELS):
                raise ValueError(f"einsum: subscript {i} out of range [0, {len(_LABELS)})")
            out.append(_LABELS[i])
    return "".join(out)


def _einsum_call(args: tuple) -> tuple[str, list, list[int]]:
    """``(subscripts, operands, positions of the operands in args)`` for both conventions."""
    if not args:
        raise TypeError("einsum() needs subscripts and operands")
    if isinstance(args[0], str):
        return args[0], list(args[1:]), list(range(1, len(args)))
    ops = list(args[0::2])
    subs = [_sublist_to_str(s) for s in args[1::2]]
    positions = list(range(0, len(args), 2))
    out = None
    if len(args) % 2 == 1:
        out = _sublist_to_str(args[-1])
        ops, positions = ops[:-1], positions[:-1]
    spec = ",".join(subs) + ("" if out is None else "->" + out)
    return spec, ops, positions


def _einsum_specs(subscripts: str, shapes: list) -> tuple[list[str], str, list[str]]:
    """Per-operand label strings with ``...`` replaced by explicit labels, the output
    labels (implicit mode resolved like NumPy) and the labels still free."""
    s = subscripts.replace(" ", "")
    explicit = "->" in s
    lhs, out = s.split("->") if explicit else (s, "")
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(
            f"einsum: {len(ins)} operand subscripts for {len(shapes)} operands in {subscripts!r}"
        )
    fresh = [c for c in _LABELS if c not in s]
    ell_nd = [
        len(sh) - (len(spec) - 3) if "..." in spec else 0
        for spec, sh in zip(ins, shapes, strict=True)
    ]
    n_ell = max(ell_nd, default=0)
    ell = "".join(fresh[:n_ell])
    fresh = fresh[n_ell:]
    specs = [spec.replace("...", ell[n_ell - k :]) for spec, k in zip(ins, ell_nd, strict=True)]
    if explicit:
        out = out.replace("...", ell)
    else:
        counts = Counter("".join(spec.replace("...", "") for spec in ins))
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1))
    return specs, out, fresh


def _einsum_optimize(kwargs: dict):
    opt = kwargs.get("optimize", False)
    # A precomputed path belongs to the forward contraction, not to its cotangents.
    return True if isinstance(opt, (list, tuple)) else opt


def _einsum_operand_vjp(k: int, g, nbt: int, specs: list, out: str, fresh: list, ops: list, opt):
    fresh = list(fresh)
    gspec = out
    prefix = ""
    if nbt:
        prefix = fresh.pop()
        gspec = prefix + out
    spec_k = specs[k]
    shape_k = np.shape(ops[k])
    others = [(specs[j], ops[j]) for j in range(len(ops)) if j != k]
    extra_specs: list[str] = []
    extra_ops: list = []
    target = []
    seen: set[str] = set()
    for pos, c in enumerate(spec_k):
        if c in seen:
            # A repeated label (a diagonal, 'ii'): write the cotangent on the diagonal
            # through a Kronecker delta, since an output label may not repeat.
            new = fresh.pop()
            target.append(new)
            extra_specs.append(c + new)
            extra_ops.append(on_device_of(np.eye(shape_k[pos]), g))
        else:
            seen.add(c)
            target.append(c)
    available = set(gspec).union(*(set(s) for s, _ in others), *(set(s) for s in extra_specs))
    done: set[str] = set()
    for pos, c in enumerate(spec_k):
        if c not in available and c not in done:
            # Summed over in operand k alone: every entry gets the same cotangent.
            done.add(c)
            extra_specs.append(c)
            extra_ops.append(on_device_of(np.ones(shape_k[pos]), g))
    in_specs = [gspec] + [s for s, _ in others] + extra_specs
    operands = [g] + [o for _, o in others] + extra_ops
    expr = ",".join(in_specs) + "->" + prefix + "".join(target)
    return np.einsum(expr, *operands, optimize=opt)


def _einsum(*operands, out=None, **kwargs):
    _no_out("einsum", out)
    return np.einsum(*operands, **kwargs)


def _einsum_vjp_all(needs: tuple[bool, ...], g: Any, ans: Any, *args: Any, **kwargs: Any) -> list:
    subscripts, ops, positions = _einsum_call(args)
    specs, out, fresh = _einsum_specs(subscripts, [np.shape(o) for o in ops])
    nbt = batch_ndim(g, ans)
    opt = _einsum_optimize(kwargs)
    result: list = [None] * len(args)
    for k, p in enumerate(positions):
        if needs[p]:
            result[p] = _einsum_operand_vjp(k, g, nbt, specs, out, fresh, ops, opt)
    return result


register(
    Rule(
        "einsum",
        _einsum,
        vjp_all=_einsum_vjp_all,
        cases=(
            Case(("ij,jk->ik", Arg((2, 3)), Arg((3, 4)))),
            Case(("ij,jk", Arg((2, 3)), Arg((3, 4)))),
            Case(("ii->i", Arg((3, 3)))),
            Case(("ii", Arg((3, 3)))),
            Case(("ij->", Arg((2, 3)))),
            Case(("ij->j", Arg((2, 3)))),
            Case(("i,i", Arg((4,)), Arg((4,)))),
            Case(("i,j->ij", Arg((2,)), Arg((3,)))),
            Case(("...ij,...jk->...ik", Arg((2, 2, 3)), Arg((3, 2)))),
            Case(("...i,...i", Arg((2, 3)), Arg((1, 3)))),
            Case(("bij,jk,bk->bi", Arg((2, 3, 4)), Arg((4, 2)), Arg((2, 2))), {"optimize": True}),
            Case(("iij,j->i", Arg((3, 3, 2)), Arg((2,)))),
            Case(("ij,ij->ij", Arg((1, 3)), Arg((2, 3)))),
            Case(("i,j,k->", Arg((2,)), Arg((3,)), Arg((2,))), {"optimize": "greedy"}),
            Case((Arg((2, 3)), [0, 1], Arg((3, 4)), [1, 2], [0, 2])),
            Case(("ji,kj->ik", Arg((3, 2)), Arg((4, 3), diff=False))),
        ),
        convention="the cotangent of each operand is another einsum (a delta for repeated "
        "labels); optimize= is passed on to the cotangent contractions",
        family="linalg",
        structure=CONTRACT,
        batch=batching.einsum,
        complex=True,
    ),
    np.einsum,
)


# ----------------------------------------------------------------------------- multi_dot
def _chain_order(dims: list[int]) -> list[list[int]]:
    """Split points of the cheapest parenthesisation of a matrix chain (textbook DP)."""
    n = len(dims) - 1
    cost: list[list[float]] = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _multi_dot(arrays, *, out=None):
    _no_out("multi_dot", out)
    arrays = list(arrays)
    n = len(arrays)
    if n < 2:
        raise ValueError("multi_dot: expecting at least two arrays")
    first_vec = np.ndim(arrays[0]) == 1
    last_vec = np.ndim(arrays[-1]) == 1
    mats = list(arrays)
    if first_vec:
        mats[0] = np.expand_dims(mats[0], 0)
    if last_vec:
        mats[-1] = np.expand_dims(mats[-1], -1)
    for i, m in enumerate(mats):
        if np.ndim(m) != 2:
            raise ValueError(f"multi_dot: array {i} has ndim {np.ndim(arrays[i])}, expected 2")
    dims = [np.shape(mats[0])[0]] + [np.shape(m)[1] for m in mats]
    split = _chain_order(dims)

    def product(i: int, j: int):
        if i == j:
            return mats[i]
        k = split[i][j]
        return np.dot(product(i, k), product(k + 1, j))

    result = product(0, n - 1)
    if first_vec:
        result = np.squeeze(result, 0)
    if last_vec:
        result = np.squeeze(result, -1)
    return result


register(
    Rule(
        "multi_dot",
        np.linalg.multi_dot,
        impl=_multi_dot,
        cases=(
            Case(([Arg((2, 5)), Arg((5, 3)), Arg((3, 4))],)),
            Case(([Arg((4,)), Arg((4, 3)), Arg((3, 2)), Arg((2,))],)),
        ),
        convention="a composition of dot products in the cheapest order",
        family="linalg",
        complex=True,
    )
)


# ---------------------------------------------------------------- products of vectors
def _outer(a, b, out=None):
    _no_numpy_out(out, "outer")
    return np.outer(a, b)


register(
    _rule(
        "outer",
        _outer,
        {
            0: lambda g, ans, a, b, out=None: np.reshape(
                np.matmul(g, np.ravel(b)), _batch(g, ans) + np.shape(a)
            ),
            1: lambda g, ans, a, b, out=None: np.reshape(
                np.matmul(np.ravel(a), g), _batch(g, ans) + np.shape(b)
            ),
        },
        cases=(
            Case((Arg((3,)), Arg((4,)))),
            Case((Arg((2, 2)), Arg(()))),
            Case((Arg((0,)), Arg((2,)))),
        ),
        structure=Structure("outer", "bilinear"),
        batch=batching.outer,
        complex=True,
    ),
    np.outer,
)


def _kron_layout(g, ans, a, b):
    """``g`` with its axes split into interleaved (a, b) pairs, and a, b shaped to match."""
    batch = _batch(g, ans)
    sa, sb = np.shape(a), np.shape(b)
    d = max(len(sa), len(sb))
    sa = (1,) * (d - len(sa)) + sa
    sb = (1,) * (d - len(sb)) + sb
    pairs = tuple(x for p in zip(sa, sb, strict=True) for x in p)
    a_axes = tuple(2 * i - 2 * d for i in range(d))
    b_axes = tuple(2 * i + 1 - 2 * d for i in range(d))
    a_shaped = np.reshape(a, tuple(x for n in sa for x in (n, 1)))
    b_shaped = np.reshape(b, tuple(x for n in sb for x in (1, n)))
    return batch, np.reshape(g, batch + pairs), a_shaped, b_shaped, a_axes, b_axes


def _kron_vjp_a(g, ans, a, b):
    batch, grid, _, b_shaped, _, b_axes = _kron_layout(g, ans, a, b)
    return np.reshape(np.sum(grid * b_shaped, axis=b_axes), batch + np.shape(a))


def _kron_vjp_b(g, ans, a, b):
    batch, grid, a_shaped, _, a_axes, _ = _kron_layout(g, ans, a, b)
    return np.reshape(np.sum(grid * a_shaped, axis=a_axes), batch + np.shape(b))


register(
    _rule(
        "kron",
        np.kron,
        {0: _kron_vjp_a, 1: _kron_vjp_b},
        cases=(
            Case((Arg((2, 3)), Arg((2, 2)))),
            Case((Arg((3,)), Arg((2, 2)))),
            Case((Arg(()), Arg((3,)))),
            Case((Arg((2,)), Arg((3,)))),
        ),
        structure=Structure("kron", "bilinear"),
        complex=True,
    )
)


@dispatching
def cross_last(a: Any, b: Any) -> Any:
    """Cross product of 3-vectors along the last axis (with broadcasting)."""
    return np.cross(a, b)


register(
    _rule(
        "cross_last",
        cross_last.__wrapped__,
        {0: lambda g, ans, a, b: cross_last(b, g), 1: lambda g, ans, a, b: cross_last(g, a)},
        cases=(Case((Arg((3,)), Arg((3,)))), Case((Arg((2, 3)), Arg((4, 1, 3))))),
        structure=Structure("fibre", "bilinear", last_axis),
        complex=True,
    ),
    cross_last,
)


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    if np.ndim(a) < 1 or np.ndim(b) < 1:
        raise ValueError("At least one array has zero dimension")
    a = np.moveaxis(a, _axis(axisa, np.ndim(a), "axisa"), -1)
    b = np.moveaxis(b, _axis(axisb, np.ndim(b), "axisb"), -1)
    na, nb = np.shape(a)[-1], np.shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if na == 2 or nb == 2:
        warnings.warn(
            "Arrays of 2-dimensional vectors are deprecated. Use arrays of "
            "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
            DeprecationWarning,
            stacklevel=4,
        )
    if na == 2:
        a = np.concatenate([a, np.zeros(np.shape(a)[:-1] + (1,))], axis=-1)
    if nb == 2:
        b = np.concatenate([b, np.zeros(np.shape(b)[:-1] + (1,))], axis=-1)
    c = cross_last(a, b)
    if na == 2 and nb == 2:
        return c[..., 2]
    return np.moveaxis(c, -1, _axis(axisc, np.ndim(c), "axisc"))


register(
    _rule(
        "cross",
        np.cross,
        cases=(
            Case((Arg((3,)), Arg((3,)))),
            Case((Arg((2, 3)), Arg((3,)))),
            Case((Arg((3, 2)), Arg((2, 3))), {"axisa": 0, "axisc": 0}),
            Case((Arg((3, 4)), Arg((3, 4))), {"axis": 0}),
        ),
        impl=_cross,
        complex=True,
    )
)
