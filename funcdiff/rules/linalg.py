"""Linear algebra rules: products, ``einsum``, ``numpy.linalg`` and ``scipy.linalg``.

Every vjp here is written with calls that have rules themselves (``matmul``, ``einsum``,
``solve``, ``inv``, ``eigh``, ``expm`` ...), so each rule is differentiable again under
``create_graph=True``. Cotangents may carry one leading batch axis and matrices their own
stack axes ``(..., n, n)``: products broadcast over both, and where one operand is a
single matrix the batch is folded into one BLAS/LAPACK call (a batch of cotangents
against a 2-D matrix is one GEMM; a batch of right-hand sides against one matrix is one
factorisation).

Conventions (also in each rule's ``convention``)
------------------------------------------------
* Symmetric input (``cholesky``, ``eigh``, ``eigvalsh``, ``svd``/``pinv`` with
  ``hermitian=True``, ``cho_factor``): NumPy and SciPy read only one triangle. As in
  torch and JAX the gradient is taken with respect to the symmetric matrix that triangle
  stands for and is returned symmetric; it agrees with the entrywise gradient along
  symmetric perturbations (the only meaningful ones) and not along one-sided ones.
* Eigen- and singular-vector gradients contain ``1 / (l_j - l_i)``; for (near-)equal
  values the factor is set to 0 (safe denominators), so results stay finite at every
  order. Gradients that flow through the values alone (spectral functions such as
  ``sum(f(l))``) are exact even then; gradients through the vectors of a repeated value
  are undefined (the decomposition is not differentiable there), and the finite value
  returned leaves out the rotation inside the degenerate subspace.
* ``det``, ``inv``, ``solve``, ``slogdet``, ``qr`` need invertible (full-rank) inputs;
  ``pinv`` and ``lstsq`` differentiate the pseudo-inverse at constant rank.
"""

from __future__ import annotations

import functools
import math
import operator
import string
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg

from funcdiff._tensor import Tensor
from funcdiff.rules._registry import Arg, Case, Rule, batch_ndim, register

LinAlgError = np.linalg.LinAlgError

_SYMMETRIC = (
    "symmetric convention (torch/JAX): only one triangle is read, and the gradient is "
    "the symmetric one, with respect to the symmetric matrix that triangle stands for; "
    "it equals the entrywise gradient along symmetric perturbations"
)
_DEGENERATE = (
    "1/(l_j - l_i) factors of (near-)equal values are set to 0: finite at every order, exact "
    "for functions of the values alone; vector gradients of repeated values are undefined"
)
_SYM_NOTE = "symmetric convention: checked through a symmetrising wrapper in tests/test_linalg.py"


# ----------------------------------------------------------------------------- helpers
def _mT(a):
    return np.swapaxes(a, -1, -2)


def _prod(shape) -> int:
    return math.prod(int(s) for s in shape)


def _value(x) -> np.ndarray:
    """The numbers of ``x``, only for masks and thresholds (constants, never differentiated)."""
    return x.data if isinstance(x, Tensor) else np.asarray(x)


def _is_zero(g) -> bool:
    """True for a cotangent that is identically zero and carries no derivative.

    Multi-output rules receive zeros for unused outputs; skipping their terms saves
    work (and an extra decomposition) without changing any derivative, because a zero
    Tensor that requires grad is never skipped.
    """
    if isinstance(g, Tensor):
        return not g.requires_grad and not g.data.any()
    return not np.any(g)


def _mm(x, y):
    """``x @ y``; when ``y`` is one matrix and ``x`` a stack, a single GEMM.

    NumPy's matmul loops over the stack of ``x`` even when ``y`` is 2-D; merging the
    leading axes of ``x`` into rows (a view for contiguous data) makes it one call.
    """
    xs = np.shape(x)
    if np.ndim(y) == 2 and len(xs) > 2:
        lead = tuple(xs[:-1])
        out = np.matmul(np.reshape(x, (_prod(lead), xs[-1])), y)
        return np.reshape(out, lead + (np.shape(y)[-1],))
    return np.matmul(x, y)


def _diag_embed(v):
    """Diagonal matrices with the last axis of ``v`` on their diagonals."""
    return np.expand_dims(v, -1) * np.eye(np.shape(v)[-1])


def _sym(a):
    return (a + _mT(a)) * 0.5


def _tri_mask(n: int, lower: bool, k: int = 0) -> np.ndarray:
    ones = np.ones((n, n))
    return np.tril(ones, k) if lower else np.triu(ones, -k)


def _eps(vals: np.ndarray) -> float:
    return float(np.finfo(vals.dtype if vals.dtype.kind == "f" else np.float64).eps)


def _safe_inverse_gaps(values, squared: bool = False):
    """``F[..., i, j] = 1 / (v_j - v_i)``, 0 on the diagonal and for (near-)equal pairs.

    The double ``where`` keeps the discarded branch finite, so no NaN or inf leaks into
    derivatives of any order.
    """
    v = values * values if squared else values
    d = np.expand_dims(v, -2) - np.expand_dims(v, -1)
    vals = _value(v)
    n = vals.shape[-1] if vals.ndim else 1
    scale = np.max(np.abs(vals), axis=-1, keepdims=True, initial=0.0)
    tol = (8 * n * _eps(vals)) * np.expand_dims(scale, -1)
    ok = np.abs(_value(d)) > tol
    return np.where(ok, 1.0 / np.where(ok, d, 1.0), 0.0)


def _safe_reciprocal(s):
    """``1 / s`` for singular values clearly above zero, 0 for (numerically) zero ones."""
    vals = _value(s)
    scale = np.max(vals, axis=-1, keepdims=True, initial=0.0)
    ok = vals > (8 * max(vals.shape[-1:] or (1,)) * _eps(vals)) * scale
    return np.where(ok, 1.0 / np.where(ok, s, 1.0), 0.0)


def _solve_many(solver: Callable, a, rhs, vector: bool):
    """``solver(a, r)`` for right-hand sides ``rhs`` that may carry extra leading axes.

    ``rhs`` is ``(..., M)`` when ``vector`` else ``(..., M, K)``. Leading axes of ``rhs``
    beyond the stack axes of ``a`` (a cotangent batch, or a stack of ``b`` against one
    matrix) are moved into extra columns, so each matrix is factorised once for all of
    them instead of once per batch element.
    """
    if vector:
        rhs = np.expand_dims(rhs, -1)
    rs, ash = tuple(np.shape(rhs)), tuple(np.shape(a))
    extra = len(rs) - len(ash)
    if extra > 0 and rs[extra:-2] == ash[:-2]:
        lead = rs[:extra]
        src = tuple(range(extra))
        dst = tuple(range(len(rs) - 1 - extra, len(rs) - 1))
        r = np.reshape(np.moveaxis(rhs, src, dst), ash[:-2] + (rs[-2], _prod(lead) * rs[-1]))
        x = solver(a, r)
        x = np.reshape(x, tuple(np.shape(x)[:-1]) + lead + (rs[-1],))
        x = np.moveaxis(x, dst, src)
    else:
        x = solver(a, rhs)
    return np.squeeze(x, -1) if vector else x


def _no_out(name: str, out) -> None:
    if out is not None:
        raise TypeError(
            f"funcdiff: {name}(..., out=...) is not supported on Tensors; "
            "use the returned value instead"
        )


def _wrap_kwargs_dispatch(fn: Callable) -> Callable:
    """Like ``_registry.dispatching``, but also finds Tensors one level inside tuples
    and lists and among keyword arguments (``cho_solve((c, lower), b)``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for a in (*args, *kwargs.values()):
            items = a if type(a) in (tuple, list) else (a,)
            for item in items:
                if isinstance(item, Tensor):
                    return item.__array_function__(wrapper, (Tensor,), args, kwargs)
        return fn(*args, **kwargs)

    return wrapper


# ----------------------------------------------------------------------------- matmul
def _matmul_vjp_a(g, ans, a, b):
    na, nb = np.ndim(a), np.ndim(b)
    if nb == 1:  # (..., m, k) @ (k,) or inner product: g[..., m] b[k]
        return np.expand_dims(g, -1) * b
    if na == 1:  # (k,) @ (..., k, n) -> (..., n)
        if nb == 2:
            return _mm(g, _mT(b))
        return np.squeeze(np.matmul(np.expand_dims(g, -2), _mT(b)), -2)
    return _mm(g, _mT(b))


def _matmul_vjp_b(g, ans, a, b):
    na, nb = np.ndim(a), np.ndim(b)
    if na == 2 and nb == 1:  # matrix @ vector: g[..., m] a[m, k], one GEMV or GEMM
        return np.matmul(g, a)
    if na == 1:
        if nb == 1:
            return np.expand_dims(g, -1) * a
        return np.expand_dims(a, -1) * np.expand_dims(g, -2)  # outer a[k] g[..., n]
    ashape = np.shape(a)
    if nb == 1 or (nb == 2 and na > 2):
        # Fold every row of every stacked matrix of ``a`` into one contraction: a single
        # GEMM for the whole stack (and batch) instead of per-matrix products summed later.
        rows = _prod(ashape[:-1])
        a2 = np.reshape(a, (rows, ashape[-1]))
        nbt = batch_ndim(g, ans)
        gshape = np.shape(g)
        if nb == 1:
            return _mm(np.reshape(g, tuple(gshape[:nbt]) + (rows,)), a2)
        g2 = np.reshape(g, tuple(gshape[:nbt]) + (rows, gshape[-1]))
        return np.matmul(_mT(a2), g2)
    return np.matmul(_mT(a), g)


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
        return np.matmul(t, _mT(a)) if na == 2 else np.matmul(t, a)
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


def _tensordot_vjp_a(g, ans, a, b, axes=2):
    nda, ndb = np.ndim(a), np.ndim(b)
    axa, axb = _tensordot_axes(axes, nda, ndb)
    nbt = batch_ndim(g, ans)
    fa = [i for i in range(nda) if i not in axa]
    fb = [j for j in range(ndb) if j not in axb]
    g_fb = [nbt + len(fa) + p for p in range(len(fb))]
    res = np.tensordot(g, b, axes=(g_fb, fb))  # batch + a[fa] + b[axb sorted]
    rank = {j: r for r, j in enumerate(sorted(axb))}
    pos = []
    for i in range(nda):
        pos.append(nbt + fa.index(i) if i in fa else nbt + len(fa) + rank[axb[axa.index(i)]])
    return np.transpose(res, tuple(range(nbt)) + tuple(pos))


def _tensordot_vjp_b(g, ans, a, b, axes=2):
    nda, ndb = np.ndim(a), np.ndim(b)
    axa, axb = _tensordot_axes(axes, nda, ndb)
    nbt = batch_ndim(g, ans)
    fa = [i for i in range(nda) if i not in axa]
    fb = [j for j in range(ndb) if j not in axb]
    g_fa = [nbt + p for p in range(len(fa))]
    res = np.tensordot(g, a, axes=(g_fa, fa))  # batch + b[fb] + a[axa sorted]
    rank = {i: r for r, i in enumerate(sorted(axa))}
    pos = []
    for j in range(ndb):
        pos.append(nbt + fb.index(j) if j in fb else nbt + len(fb) + rank[axa[axb.index(j)]])
    return np.transpose(res, tuple(range(nbt)) + tuple(pos))


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
    )
)


def _vdot_vjp(g, ans, x, y):
    nbt = batch_ndim(g, ans)
    lead = tuple(np.shape(g)[:nbt])
    flat = np.reshape(g, lead + (1,)) * np.ravel(y)
    return np.reshape(flat, lead + tuple(np.shape(x)))


register(
    Rule(
        "vdot",
        np.vdot,
        vjps={
            0: lambda g, ans, a, b: _vdot_vjp(g, ans, a, b),
            1: lambda g, ans, a, b: _vdot_vjp(g, ans, b, a),
        },
        cases=(
            Case((Arg((4,)), Arg((4,)))),
            Case((Arg((2, 3)), Arg((6,)))),
            Case((Arg(()), Arg(()))),
        ),
        family="linalg",
    )
)


# ----------------------------------------------------------------------------- vecdot, matvec
def _vecdot_vjp(g, ans, x, y, axis=-1):
    nd = max(np.ndim(x), np.ndim(y))
    ax = int(axis) % nd - nd if nd else -1
    return np.expand_dims(g, ax) * y


def _vecdot_fn(x1, x2, axis=-1):
    return np.linalg.vecdot(x1, x2, axis=axis)


if hasattr(np.linalg, "vecdot"):
    register(
        Rule(
            "linalg.vecdot",
            _vecdot_fn,
            vjps={
                0: lambda g, ans, x1, x2, axis=-1: _vecdot_vjp(g, ans, x1, x2, axis),
                1: lambda g, ans, x1, x2, axis=-1: _vecdot_vjp(g, ans, x2, x1, axis),
            },
            cases=(
                Case((Arg((2, 3)), Arg((3,)))),
                Case((Arg((3, 2)), Arg((3, 2))), {"axis": 0}),
            ),
            family="linalg",
        ),
        np.linalg.vecdot,
    )
if isinstance(getattr(np, "vecdot", None), np.ufunc):
    register(
        Rule(
            "vecdot",
            np.vecdot,
            vjps={
                0: lambda g, ans, x1, x2: np.expand_dims(g, -1) * x2,
                1: lambda g, ans, x1, x2: np.expand_dims(g, -1) * x1,
            },
            cases=(Case((Arg((2, 3)), Arg((3,)))), Case((Arg((4,)), Arg((2, 4))))),
            family="linalg",
        )
    )
if isinstance(getattr(np, "matvec", None), np.ufunc):
    register(
        Rule(
            "matvec",
            np.matvec,
            vjps={
                0: lambda g, ans, m, v: np.expand_dims(g, -1) * np.expand_dims(v, -2),
                1: lambda g, ans, m, v: np.matvec(_mT(m), g),
            },
            cases=(Case((Arg((3, 4)), Arg((4,)))), Case((Arg((2, 3, 4)), Arg((4,))))),
            family="linalg",
        )
    )
    register(
        Rule(
            "vecmat",
            np.vecmat,
            vjps={
                0: lambda g, ans, v, m: np.matvec(m, g),
                1: lambda g, ans, v, m: np.expand_dims(v, -1) * np.expand_dims(g, -2),
            },
            cases=(Case((Arg((3,)), Arg((3, 4)))), Case((Arg((2, 3)), Arg((3, 4))))),
            family="linalg",
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
    lhs, out = s.split("->") if explicit else (s, None)
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
            extra_ops.append(np.eye(shape_k[pos]))
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
            extra_ops.append(np.ones(shape_k[pos]))
    in_specs = [gspec] + [s for s, _ in others] + extra_specs
    operands = [g] + [o for _, o in others] + extra_ops
    expr = ",".join(in_specs) + "->" + prefix + "".join(target)
    return np.einsum(expr, *operands, optimize=opt)


def _einsum(*operands, out=None, **kwargs):
    _no_out("einsum", out)
    return np.einsum(*operands, **kwargs)


def _einsum_vjp_all(needs, g, ans, *args, **kwargs):
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
    ),
    np.einsum,
)


# ----------------------------------------------------------------------------- multi_dot
def _chain_order(dims: list[int]) -> list[list[int]]:
    """Split points of the cheapest parenthesisation of a matrix chain (textbook DP)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
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
    )
)


# ----------------------------------------------------------------------------- inv, solve, det
def _inv_vjp(g, ans, a):
    xt = _mT(ans)
    return -_mm(np.matmul(xt, g), xt)


register(
    Rule(
        "linalg.inv",
        np.linalg.inv,
        vjps={0: _inv_vjp},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 3, 3), kind="wellcond"),)),
            Case((Arg((1, 1), kind="wellcond"),)),
        ),
        convention="needs an invertible matrix",
        family="linalg",
    ),
    np.linalg.inv,
)


def _linalg_solve(a, b):
    return np.linalg.solve(a, b)


def _solve_vjp_all(needs, g, ans, a, b):
    vector = np.ndim(b) == 1
    gb = _solve_many(np.linalg.solve, _mT(a), g, vector)
    ga = None
    if needs[0]:
        if vector:
            ga = -(np.expand_dims(gb, -1) * np.expand_dims(ans, -2))
        else:
            ga = -_mm(gb, _mT(ans)) if np.ndim(ans) == 2 else -np.matmul(gb, _mT(ans))
    return [ga, gb if needs[1] else None]


register(
    Rule(
        "linalg.solve",
        _linalg_solve,
        vjp_all=_solve_vjp_all,
        cases=(
            Case((Arg((3, 3), kind="wellcond"), Arg((3,)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2)))),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((3,)))),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((2, 3, 2)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((2, 3, 2)))),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((3, 1)))),
        ),
        convention="b is a vector when it is 1-D, else a (stack of) matrices, as in NumPy 2",
        family="linalg",
    ),
    np.linalg.solve,
)


def _det_gradient(a, scale):
    try:
        return np.expand_dims(np.expand_dims(scale, -1), -1) * _mT(np.linalg.inv(a))
    except LinAlgError:
        raise LinAlgError(
            "the gradient of det/slogdet at a singular matrix (the adjugate) is not "
            "implemented: funcdiff computes it as det(A) A^-T"
        ) from None


register(
    Rule(
        "linalg.det",
        np.linalg.det,
        vjps={0: lambda g, ans, a: _det_gradient(a, g * ans)},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 2, 2), kind="wellcond"),)),
            Case((Arg((3, 3)),)),
        ),
        convention="gradient det(A) A^-T; a singular A raises LinAlgError",
        family="linalg",
    ),
    np.linalg.det,
)
register(
    Rule(
        "linalg.slogdet",
        np.linalg.slogdet,
        vjps={0: lambda g, ans, a: _det_gradient(a, g[1])},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 3, 3), kind="spd"),)),
            Case((Arg((3, 3)),)),
        ),
        convention="sign is piecewise constant (zero gradient); d logabsdet = A^-T",
        family="linalg",
    ),
    np.linalg.slogdet,
)


# ----------------------------------------------------------------------------- cholesky
def _cholesky_core_vjp(L, gL):
    """Symmetric gradient with respect to A = L L^T for a cotangent gL of lower L."""
    n = np.shape(L)[-1]
    phi = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    p = np.matmul(_mT(L), gL) * phi
    linv = np.linalg.inv(L)
    s = np.matmul(np.matmul(_mT(linv), p), linv)
    return _sym(s)


def _cholesky_vjp(g, ans, a, upper=False):
    if upper:
        return _cholesky_core_vjp(_mT(ans), _mT(g))
    return _cholesky_core_vjp(ans, g)


def _cholesky(a, upper=False):
    return np.linalg.cholesky(a, upper=upper) if upper else np.linalg.cholesky(a)


register(
    Rule(
        "linalg.cholesky",
        _cholesky,
        vjps={0: _cholesky_vjp},
        cases=(
            Case((Arg((1, 1), kind="spd"),), note=_SYM_NOTE),
            Case((Arg((2, 1, 1), kind="spd"),), {"upper": True}, note=_SYM_NOTE),
        ),
        convention=_SYMMETRIC,
        family="linalg",
    ),
    np.linalg.cholesky,
)


# ----------------------------------------------------------------------------- eigh, eigvalsh
def _eigh_vjp(g, ans, a, UPLO="L"):  # noqa: N803  (NumPy's parameter name)
    w, v = ans
    gw, gv = g
    inner = 0.0
    if not _is_zero(gv):
        p = np.matmul(_mT(v), gv)
        inner = _safe_inverse_gaps(w) * (p - _mT(p)) * 0.5
    if not _is_zero(gw) or np.ndim(inner) == 0:
        inner = inner + _diag_embed(gw)
    return np.matmul(np.matmul(v, inner), _mT(v))


def _eigvalsh_vjp(g, ans, a, UPLO="L"):  # noqa: N803
    _, v = np.linalg.eigh(a, UPLO=UPLO)
    return np.matmul(v * np.expand_dims(g, -2), _mT(v))


def _eigh_gauge(result):
    w, v = result
    return w, v * np.sign(v[..., :1, :])


register(
    Rule(
        "linalg.eigh",
        np.linalg.eigh,
        vjps={0: _eigh_vjp},
        cases=(
            Case((Arg((1, 1), kind="spd"),), output=_eigh_gauge, note=_SYM_NOTE),
            Case((Arg((2, 1, 1), kind="spd"),), {"UPLO": "U"}, output=_eigh_gauge, note=_SYM_NOTE),
        ),
        convention=_SYMMETRIC + "; " + _DEGENERATE,
        family="linalg",
    ),
    np.linalg.eigh,
)
register(
    Rule(
        "linalg.eigvalsh",
        np.linalg.eigvalsh,
        vjps={0: _eigvalsh_vjp},
        cases=(
            Case((Arg((1, 1), kind="spd"),), note=_SYM_NOTE),
            Case((Arg((3, 1, 1), kind="spd"),), {"UPLO": "U"}, note=_SYM_NOTE),
        ),
        convention=_SYMMETRIC,
        family="linalg",
    ),
    np.linalg.eigvalsh,
)


# ----------------------------------------------------------------------------- svd
def _svd_core_vjp(u, s, vh, gu, gs, gvh, shape):
    """Cotangent of A = U diag(s) Vh (reduced) for cotangents of U, s, Vh (None = zero)."""
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    inner = 0.0
    if gs is not None:
        inner = _diag_embed(gs)
    v = _mT(vh)
    gv = None if gvh is None else _mT(gvh)
    extra = 0.0
    if gu is not None or gv is not None:
        f = _safe_inverse_gaps(s, squared=True)
        if gu is not None:
            ju = np.matmul(_mT(u), gu)
            inner = inner + f * (ju - _mT(ju)) * np.expand_dims(s, -2)
        if gv is not None:
            jv = np.matmul(_mT(v), gv)
            inner = inner + np.expand_dims(s, -1) * (f * (jv - _mT(jv)))
        sinv = _safe_reciprocal(s)
        if gu is not None and m > k:
            ortho = gu - np.matmul(u, ju)
            extra = extra + np.matmul(ortho * np.expand_dims(sinv, -2), vh)
        if gv is not None and n > k:
            ortho = gv - np.matmul(v, jv)
            extra = extra + np.matmul(u * np.expand_dims(sinv, -2), _mT(ortho))
    if np.ndim(inner) == 0:
        inner = _diag_embed(np.zeros(np.shape(s)))
    return np.matmul(np.matmul(u, inner), vh) + extra


def _svd_vjp(g, ans, a, full_matrices=True, compute_uv=True, hermitian=False):
    shape = np.shape(a)
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    if not compute_uv:
        u, _, vh = np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
        ga = np.matmul(u * np.expand_dims(g, -2), vh)
        return _sym(ga) if hermitian else ga
    u, s, vh = ans
    gu, gs, gvh = (None if _is_zero(x) else x for x in g)
    if full_matrices and m != n:
        # Singular vectors beyond min(M, N) are any orthonormal completion: no gradient.
        if m > n:
            spare = None if gu is None else gu[..., :, k:]
        else:
            spare = None if gvh is None else gvh[..., k:, :]
        if spare is not None and np.any(_value(spare)):
            raise NotImplementedError(
                "the gradient of svd(..., full_matrices=True) of a non-square matrix is "
                "undefined for the singular vectors beyond min(M, N) (any orthonormal "
                "completion is valid); use full_matrices=False"
            )
        if m > n:
            u = u[..., :, :k]
            gu = None if gu is None else gu[..., :, :k]
        else:
            vh = vh[..., :k, :]
            gvh = None if gvh is None else gvh[..., :k, :]
    ga = _svd_core_vjp(u, s, vh, gu, gs, gvh, shape)
    return _sym(ga) if hermitian else ga


def _svd_gauge(result):
    u, s, vh = result
    signs = np.sign(u[..., :1, :])
    return u * signs, s, vh * _mT(signs)


register(
    Rule(
        "linalg.svd",
        np.linalg.svd,
        vjps={0: _svd_vjp},
        cases=(
            Case((Arg((3, 3)),), output=_svd_gauge),
            Case((Arg((4, 2)),), {"full_matrices": False}, output=_svd_gauge),
            Case((Arg((2, 4)),), {"full_matrices": False}, output=_svd_gauge),
            Case((Arg((2, 3, 2)),), {"full_matrices": False}, output=_svd_gauge),
            Case((Arg((3, 2)),), {"compute_uv": False}),
            Case((Arg((2, 2, 3)),), {"compute_uv": False}),
            Case((Arg((4, 3)),), {"full_matrices": True}, output=lambda r: r[1]),
            Case((Arg((3, 3)),), output=lambda r: np.matmul(r[0] * r[1][..., None, :], r[2])),
        ),
        convention="singular values: U diag(gs) V^T; vectors need full_matrices=False for "
        "non-square input; " + _DEGENERATE + "; 1/s for (numerically) zero s is set to 0; "
        "hermitian=True uses the " + _SYMMETRIC,
        family="linalg",
    ),
    np.linalg.svd,
)
if hasattr(np.linalg, "svdvals"):
    register(
        Rule(
            "linalg.svdvals",
            np.linalg.svdvals,
            vjps={0: lambda g, ans, x: _svd_vjp(g, ans, x, compute_uv=False)},
            cases=(Case((Arg((3, 2)),)), Case((Arg((2, 3, 3)),))),
            convention="U diag(g) V^T",
            family="linalg",
        ),
        np.linalg.svdvals,
    )


# ----------------------------------------------------------------------------- qr
def _copy_upper_to_lower(x):
    n = np.shape(x)[-1]
    return x * np.triu(np.ones((n, n))) + _mT(x * np.triu(np.ones((n, n)), 1))


def _right_solve_upper_t(y, r):
    """``y @ inv(r).T`` for upper-triangular ``r``: a triangular solve, stacks folded."""
    x = _solve_many(lambda rr, rhs: solve_triangular(rr, rhs, lower=False), r, _mT(y), vector=False)
    return _mT(x)


def _qr_square_vjp(q, r, gq, gr):
    """Cotangent of A (m >= n) in the reduced QR A = Q R."""
    nmat = 0.0
    if gr is not None:
        nmat = np.matmul(gr, _mT(r))
    if gq is not None:
        nmat = nmat - np.matmul(_mT(q), gq)
    y = np.matmul(q, _copy_upper_to_lower(nmat))
    if gq is not None:
        y = y + gq
    return _right_solve_upper_t(y, r)


def _qr_vjp(g, ans, a, mode="reduced"):
    shape = np.shape(a)
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    if mode == "raw":
        raise NotImplementedError("qr(mode='raw') (Householder reflectors) is not differentiable")
    if mode == "r":
        q, r = np.linalg.qr(a)
        gq, gr = None, g
    else:
        q, r = ans
        gq, gr = (None if _is_zero(x) else x for x in g)
        if mode == "complete" and m > n:
            if gq is not None and np.any(_value(gq[..., :, k:])):
                raise NotImplementedError(
                    "the gradient of qr(mode='complete') is undefined for the columns of Q "
                    "beyond N (any orthonormal completion is valid); use mode='reduced'"
                )
            q = q[..., :, :k]
            r = r[..., :k, :]
            gq = None if gq is None else gq[..., :, :k]
            gr = None if gr is None else gr[..., :k, :]
    if gq is None and gr is None:
        return None
    if m >= n:
        return _qr_square_vjp(q, r, gq, gr)
    # Wide A = [X | Y] with X = Q U square and Y = Q V: V = Q^T Y feeds Q as well.
    y_part = a[..., :, m:]
    u = r[..., :, :m]
    gu = None if gr is None else gr[..., :, :m]
    gv = None if gr is None else gr[..., :, m:]
    if gv is not None:
        extra = np.matmul(y_part, _mT(gv))
        gq = extra if gq is None else gq + extra
    gx = _qr_square_vjp(q, u, gq, gu)
    sel_x = np.eye(m, n)
    sel_y = np.eye(n - m, n, m)
    out = np.matmul(gx, sel_x)
    if gv is not None:
        out = out + np.matmul(np.matmul(q, gv), sel_y)
    return out


def _qr_gauge(result):
    q, r = result
    signs = np.sign(r[..., np.arange(np.shape(r)[-2]), np.arange(np.shape(r)[-2])])
    return q * np.expand_dims(signs, -2), r * np.expand_dims(signs, -1)


register(
    Rule(
        "linalg.qr",
        np.linalg.qr,
        vjps={0: _qr_vjp},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((4, 2)),)),
            Case((Arg((2, 4)),)),
            Case((Arg((2, 4, 3)),)),
            Case((Arg((4, 3)),), {"mode": "r"}),
            Case((Arg((4, 2)),), {"mode": "complete"}, output=lambda r: r[1]),
        ),
        convention="modes 'reduced' and 'r' (and 'complete' when M <= N); needs full rank "
        "(R invertible); the gradient follows LAPACK's sign choice for diag(R)",
        family="linalg",
    ),
    np.linalg.qr,
)


# ----------------------------------------------------------------------------- pinv, lstsq
def _pinv_core_vjp(g, x, a):
    """Cotangent of A for X = pinv(A), valid where the rank of A is locally constant."""
    xt = _mT(x)
    gt = _mT(g)
    t1 = -np.matmul(np.matmul(xt, g), xt)
    y2 = np.matmul(gt, np.matmul(x, xt))
    t2 = y2 - np.matmul(a, np.matmul(x, y2))
    y3 = np.matmul(np.matmul(xt, x), gt)
    t3 = y3 - np.matmul(np.matmul(y3, x), a)
    return t1 + t2 + t3


def _pinv_vjp(g, ans, a, rcond=None, hermitian=False, *, rtol=None):
    ga = _pinv_core_vjp(g, ans, a)
    return _sym(ga) if hermitian else ga


register(
    Rule(
        "linalg.pinv",
        np.linalg.pinv,
        vjps={0: _pinv_vjp},
        cases=(
            Case((Arg((4, 2)),)),
            Case((Arg((2, 4)),)),
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 3, 2)),)),
        ),
        convention="derivative of the pseudo-inverse at locally constant rank (full column "
        "or row rank in particular); hermitian=True uses the " + _SYMMETRIC,
        family="linalg",
    ),
    np.linalg.pinv,
)


def _lstsq(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)


def _lstsq_vjp_all(needs, g, ans, a, b, rcond=None):
    x, residuals, _rank, s = ans
    gx, gres, _grank, gs = g
    m, n = np.shape(a)
    vector = np.ndim(b) == 1
    if rcond is None:
        rcond = np.finfo(float).eps * max(m, n)
    pa = np.linalg.pinv(a, rcond=rcond)
    bm = np.expand_dims(b, -1) if vector else b
    xm = np.expand_dims(x, -1) if vector else x
    gxm = np.expand_dims(gx, -1) if vector else gx
    r = bm - np.matmul(a, xm)
    gb = np.matmul(_mT(pa), gxm)
    ga = None
    if needs[0]:
        ga = _pinv_like_solution_vjp(gxm, pa, a, xm, r)
    if np.size(_value(residuals)) and not _is_zero(gres):
        weighted = 2.0 * r * np.expand_dims(gres, -2)
        gb = gb + weighted
        if needs[0]:
            ga = ga - np.matmul(weighted, _mT(xm))
    if needs[0] and not _is_zero(gs):
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        ga = ga + np.matmul(u * np.expand_dims(gs, -2), vh)
    if vector:
        gb = np.squeeze(gb, -1)
    return [ga, gb if needs[1] else None]


def _pinv_like_solution_vjp(gx, pa, a, x, r):
    """Cotangent of A in x = pinv(A) b (residual r = b - A x), at constant rank."""
    pat = _mT(pa)
    t1 = -np.matmul(np.matmul(pat, gx), _mT(x))
    t2 = np.matmul(r, _mT(np.matmul(np.matmul(pa, pat), gx)))
    proj = gx - np.matmul(pa, np.matmul(a, gx))
    t3 = np.matmul(np.matmul(pat, x), _mT(proj))
    return t1 + t2 + t3


register(
    Rule(
        "linalg.lstsq",
        _lstsq,
        vjp_all=_lstsq_vjp_all,
        cases=(
            Case((Arg((5, 3)), Arg((5,)))),
            Case((Arg((5, 2)), Arg((5, 3)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2)))),
            Case((Arg((2, 4)), Arg((2,)))),
            Case((Arg((4, 2)), Arg((4,), diff=False))),
        ),
        convention="x (through the pseudo-inverse, at constant rank), residuals "
        "(||A x - b||^2, present at full column rank with M > N) and singular values are "
        "differentiable; rank is an integer constant",
        family="linalg",
    ),
    np.linalg.lstsq,
)


# ----------------------------------------------------------------------------- matrix_power
def _matrix_power(a, n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: the exponent n must be an integer, got {n!r}")
    shape = np.shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise LinAlgError(
            f"matrix_power: a must be a (stack of) square matrices, got shape {tuple(shape)}"
        )
    n = int(n)
    if n == 0:
        # The identity, still connected to ``a`` (with a zero gradient), like torch.
        eye = np.broadcast_to(np.eye(shape[-1], dtype=np.result_type(a)), shape)
        return np.where(np.ones(shape, dtype=bool), eye, a)
    if n < 0:
        a = np.linalg.inv(a)
        n = -n
        if n == 1:
            return a
    if n == 1:
        return np.positive(a)
    result = None
    z = a
    while True:
        if n & 1:
            result = z if result is None else np.matmul(result, z)
        n >>= 1
        if not n:
            return result
        z = np.matmul(z, z)


register(
    Rule(
        "linalg.matrix_power",
        np.linalg.matrix_power,
        impl=_matrix_power,
        cases=(
            Case((Arg((3, 3), -1.0, 1.0), 3)),
            Case((Arg((3, 3), -1.0, 1.0), 1)),
            Case((Arg((2, 2, 2), -1.0, 1.0), 5)),
            Case((Arg((3, 3), kind="wellcond"), -2)),
            Case((Arg((3, 3), kind="wellcond"), -1)),
            Case((Arg((3, 3)), 0)),
        ),
        convention="repeated squaring of matmul; n < 0 through inv; n = 0 gives the "
        "identity with a zero gradient",
        family="linalg",
    )
)
register(
    Rule("linalg.matrix_rank", np.linalg.matrix_rank, differentiable=False, family="linalg"),
    np.linalg.matrix_rank,
)


# ----------------------------------------------------------------------------- scipy.linalg
def _trans_code(trans) -> int:
    codes = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1, "n": 0, "t": 1, "c": 1}
    try:
        return codes[trans]
    except (KeyError, TypeError):
        raise ValueError(
            f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}"
        ) from None


def _solve_triangular(
    a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True
):
    # overwrite_b is dropped: a Tensor's data must never be changed behind its back.
    return scipy.linalg.solve_triangular(
        a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal, check_finite=check_finite
    )


solve_triangular = _wrap_kwargs_dispatch(_solve_triangular)


def _solve_triangular_vjp_all(
    needs,
    g,
    ans,
    a,
    b,
    trans=0,
    lower=False,
    unit_diagonal=False,
    overwrite_b=False,
    check_finite=True,
):
    t = _trans_code(trans)
    vector = np.ndim(b) == 1

    def solver(aa, rhs):
        return solve_triangular(aa, rhs, trans=1 - t, lower=lower, unit_diagonal=unit_diagonal)

    gb = _solve_many(solver, a, g, vector)
    ga = None
    if needs[0]:
        if vector:
            first, second = (gb, ans) if t == 0 else (ans, gb)
            full = np.expand_dims(first, -1) * np.expand_dims(second, -2)
        else:
            full = np.matmul(gb, _mT(ans)) if t == 0 else np.matmul(ans, _mT(gb))
        n = np.shape(a)[-1]
        # Only the triangle that is read (without its diagonal if unit) has a gradient.
        ga = -(full * _tri_mask(n, lower, -1 if unit_diagonal else 0))
    return [ga, gb if needs[1] else None]


register(
    Rule(
        "scipy.linalg.solve_triangular",
        _solve_triangular,
        vjp_all=_solve_triangular_vjp_all,
        cases=(
            Case((Arg((3, 3), kind="wellcond"), Arg((3,))), {"lower": True}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2))), {"trans": "T", "lower": True}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3,))), {"trans": 1}),
            Case((Arg((3, 3)), Arg((3, 2))), {"unit_diagonal": True, "lower": True}),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((2, 3, 2))), {"lower": True}),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((3,)))),
        ),
        convention="the gradient of a lives on the triangle that is read (without the "
        "diagonal when unit_diagonal=True): the other entries are ignored by the solver",
        family="linalg",
    ),
    scipy.linalg.solve_triangular,
    solve_triangular,
)


def _cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    return scipy.linalg.cho_factor(a, lower=lower, check_finite=check_finite)


cho_factor = _wrap_kwargs_dispatch(_cho_factor)


def _cho_factor_vjp(g, ans, a, lower=False, overwrite_a=False, check_finite=True):
    c, gc = ans[0], g[0]
    n = np.shape(a)[-1]
    mask = _tri_mask(n, bool(lower))
    factor = c * mask
    gfactor = gc * mask
    if lower:
        ga = _cholesky_core_vjp(factor, gfactor)
    else:
        ga = _cholesky_core_vjp(_mT(factor), _mT(gfactor))
    # SciPy leaves the other triangle of ``a`` in place: its cotangent passes through.
    return ga + gc * (1.0 - mask)


register(
    Rule(
        "scipy.linalg.cho_factor",
        _cho_factor,
        vjps={0: _cho_factor_vjp},
        cases=(
            Case((Arg((1, 1), kind="spd"),), note=_SYM_NOTE),
            Case((Arg((1, 1), kind="spd"),), {"lower": True}, note=_SYM_NOTE),
        ),
        convention=_SYMMETRIC + "; the triangle not read passes its cotangent through",
        family="linalg",
    ),
    scipy.linalg.cho_factor,
    cho_factor,
)


def _cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    return scipy.linalg.cho_solve(c_and_lower, b, check_finite=check_finite)


cho_solve = _wrap_kwargs_dispatch(_cho_solve)


def _cho_solve_vjp_all(needs, g, ans, c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower_flag = c_and_lower
    lower = bool(np.asarray(_value(lower_flag)).ravel()[0])
    vector = np.ndim(b) == 1

    def solver(cc, rhs):
        return cho_solve((cc, lower_flag), rhs)

    gb = _solve_many(solver, c, g, vector)
    gc = None
    if needs[0]:
        if vector:
            outer = np.expand_dims(gb, -1) * np.expand_dims(ans, -2)
        else:
            outer = np.matmul(gb, _mT(ans))
        s = -(outer + _mT(outer))
        n = np.shape(c)[-1]
        mask = _tri_mask(n, lower)
        if lower:
            gc = (np.matmul(s, c * mask)) * mask
        else:
            gc = (np.matmul(c * mask, s)) * mask
        gc = (gc, None)
    return [gc, gb if needs[1] else None]


register(
    Rule(
        "scipy.linalg.cho_solve",
        _cho_solve,
        vjp_all=_cho_solve_vjp_all,
        cases=(
            Case(([Arg((3, 3), kind="wellcond"), False], Arg((3,)))),
            Case(([Arg((3, 3), kind="wellcond"), True], Arg((3, 2)))),
            Case(([Arg((2, 3, 3), kind="wellcond"), True], Arg((2, 3, 2)))),
        ),
        convention="the factor is read from one triangle of c; the gradient lives there",
        family="linalg",
    ),
    scipy.linalg.cho_solve,
    cho_solve,
)


def _expm(a):
    return scipy.linalg.expm(a)


expm = _wrap_kwargs_dispatch(_expm)


def _block_upper(diag, corner):
    """``[[diag, corner], [0, diag]]`` built with einsum (recorded, stacks broadcast)."""
    n = np.shape(diag)[-1]
    on_diag = np.einsum("pq,...ij->...piqj", np.eye(2), diag)
    off = np.einsum("pq,...ij->...piqj", np.array([[0.0, 1.0], [0.0, 0.0]]), corner)
    block = on_diag + off
    return np.reshape(block, tuple(np.shape(block)[:-4]) + (2 * n, 2 * n))


def _expm_vjp(g, ans, a):
    # The adjoint of the Frechet derivative L(A, .) is L(A^T, .), read off the corner of
    # expm([[A^T, G], [0, A^T]]): expm again, so every order is available.
    n = np.shape(a)[-1]
    return expm(_block_upper(_mT(a), g))[..., :n, n:]


register(
    Rule(
        "scipy.linalg.expm",
        _expm,
        vjps={0: _expm_vjp},
        cases=(
            Case((Arg((3, 3), -1.0, 1.0),)),
            Case((Arg((2, 2, 2), -1.0, 1.0),)),
            Case((Arg((1, 1)),)),
        ),
        convention="the adjoint Frechet derivative through the block-matrix identity",
        family="linalg",
    ),
    scipy.linalg.expm,
    expm,
)


_GENERAL = (None, "gen", "general", "banded")
_SYMMETRIC_KINDS = ("sym", "symmetric", "her", "hermitian", "pos", "positive definite")
_KNOWN_STRUCTURES = (
    _GENERAL
    + _SYMMETRIC_KINDS
    + (
        "diagonal",
        "tridiagonal",
        "upper triangular",
        "lower triangular",
    )
)


def _check_structure(assume_a) -> None:
    if assume_a not in _KNOWN_STRUCTURES:
        raise NotImplementedError(
            f"funcdiff has no derivative for scipy.linalg with assume_a={assume_a!r}; "
            f"supported: {', '.join(repr(k) for k in _KNOWN_STRUCTURES)}"
        )


def _project_structure(ga, n: int, assume_a, lower: bool):
    """Restrict a full-matrix cotangent to the entries the structured solver reads.

    ``None`` (structure detected from the values) and ``"banded"`` (band detected from the
    non-zeros) compute ``inv(A) b`` for every ``A``, so the full gradient is right there.
    """
    if assume_a in _GENERAL:
        return ga
    if assume_a in _SYMMETRIC_KINDS:
        return _sym(ga)
    if assume_a == "diagonal":
        return ga * np.eye(n)
    if assume_a == "tridiagonal":
        return ga * (np.tri(n, n, 1) * np.tri(n, n, 1).T)
    return ga * _tri_mask(n, assume_a == "lower triangular")


def _scipy_solve(
    a,
    b,
    lower=False,
    overwrite_a=False,
    overwrite_b=False,
    check_finite=True,
    assume_a=None,
    transposed=False,
):
    return scipy.linalg.solve(
        a, b, lower=lower, check_finite=check_finite, assume_a=assume_a, transposed=transposed
    )


scipy_solve = _wrap_kwargs_dispatch(_scipy_solve)


def _scipy_solve_vjp_all(
    needs,
    g,
    ans,
    a,
    b,
    lower=False,
    overwrite_a=False,
    overwrite_b=False,
    check_finite=True,
    assume_a=None,
    transposed=False,
):
    _check_structure(assume_a)
    vector = np.ndim(b) == 1
    symmetric = assume_a in _SYMMETRIC_KINDS

    def solver(aa, rhs):
        return scipy_solve(
            aa,
            rhs,
            lower=lower,
            assume_a=assume_a,
            transposed=transposed if symmetric else not transposed,
        )

    gb = _solve_many(solver, a, g, vector)
    ga = None
    if needs[0]:
        first, second = (ans, gb) if transposed else (gb, ans)
        if vector:
            full = np.expand_dims(first, -1) * np.expand_dims(second, -2)
        else:
            full = np.matmul(first, _mT(second))
        ga = -_project_structure(full, np.shape(a)[-1], assume_a, lower)
    return [ga, gb if needs[1] else None]


register(
    Rule(
        "scipy.linalg.solve",
        _scipy_solve,
        vjp_all=_scipy_solve_vjp_all,
        cases=(
            Case((Arg((3, 3), kind="wellcond"), Arg((3,)))),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2))), {"transposed": True}),
            Case((Arg((2, 3, 3), kind="wellcond"), Arg((2, 3, 2))), {"assume_a": "gen"}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3,))), {"assume_a": "diagonal"}),
            Case((Arg((4, 4), kind="wellcond"), Arg((4, 2))), {"assume_a": "tridiagonal"}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3,))), {"assume_a": "upper triangular"}),
            Case((Arg((3, 3), kind="wellcond"), Arg((3, 2))), {"assume_a": "lower triangular"}),
            Case((Arg((1, 1), kind="spd"), Arg((1, 2))), {"assume_a": "pos"}, note=_SYM_NOTE),
        ),
        convention="assume_a: the gradient lives on the entries the solver reads "
        "(diagonal, band, triangle); 'sym'/'her'/'pos' use the " + _SYMMETRIC,
        family="linalg",
    ),
    scipy.linalg.solve,
    scipy_solve,
)


def _scipy_inv(a, overwrite_a=False, check_finite=True, **structure):
    return scipy.linalg.inv(a, check_finite=check_finite, **structure)


scipy_inv = _wrap_kwargs_dispatch(_scipy_inv)


def _scipy_inv_vjp(g, ans, a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    _check_structure(assume_a)
    return _project_structure(_inv_vjp(g, ans, a), np.shape(a)[-1], assume_a, lower)


register(
    Rule(
        "scipy.linalg.inv",
        _scipy_inv,
        vjps={0: _scipy_inv_vjp},
        cases=(
            Case((Arg((3, 3), kind="wellcond"),)),
            Case((Arg((2, 3, 3), kind="wellcond"),)),
            Case((Arg((3, 3), kind="wellcond"),), {"assume_a": "upper triangular"}),
        ),
        convention="as scipy.linalg.solve for assume_a",
        family="linalg",
    ),
    scipy.linalg.inv,
    scipy_inv,
)


def _scipy_det(a, overwrite_a=False, check_finite=True):
    return scipy.linalg.det(a, check_finite=check_finite)


scipy_det = _wrap_kwargs_dispatch(_scipy_det)
register(
    Rule(
        "scipy.linalg.det",
        _scipy_det,
        vjps={0: lambda g, ans, a, overwrite_a=False, check_finite=True: _det_gradient(a, g * ans)},
        cases=(Case((Arg((3, 3), kind="wellcond"),)), Case((Arg((2, 2, 2)),))),
        convention="gradient det(A) A^-T; a singular A raises LinAlgError",
        family="linalg",
    ),
    scipy.linalg.det,
    scipy_det,
)
