"""Random well-conditioned NumPy programs, and the derivative checks funcdiff must pass.

A *program* is straight-line NumPy/SciPy source: a function ``f(x0, x1, ...)`` built from
the operations funcdiff has rules for (elementwise and special functions inside their
domains, broadcasting, reductions, indexing and in-place assignment, shape functions,
products and linear algebra on diagonally dominant matrices), plus a scalar
``loss = sum(W * f(...))`` with fixed weights ``W``. The generator evaluates every
candidate operation on the actual input values while it builds the program, and keeps it
only when the result is finite, moderate, and at a safe distance from every kink, pole
and branch cut the operation has. The same source runs on ndarrays (the independent
truth: finite differences) and on Tensors (funcdiff).

:func:`check_program` then compares, for one program:

* the forward value on Tensors with the value on ndarrays;
* the gradient with fourth-order central differences (two step sizes, whose agreement
  bounds the error of the differences themselves);
* ``hessian`` with central differences of the gradient along random directions, and
  its symmetry;
* ``jacobian`` with differences along a random direction, and every way of computing
  it with each other: the row loop, ``vectorize=True``, ``strategy="forward-mode"``
  (looped and vectorized) and several ``chunk_size`` values; the same for ``hessian``;
* ``vjp``, ``jvp``, ``hvp`` and ``vhp`` with the Jacobian and Hessian;
* the third derivative through ``hessian(create_graph=True)`` with differences of the
  second-order result;
* float32 inputs: gradient, Jacobian and Hessian in float32, within float32 tolerances
  of the float64 results at the same (rounded) point.

Generation is written against a *chooser* (``integer``, ``choice``, ``boolean``), so the
same code serves a seeded generator (:class:`RandomChooser`, the long budget) and a
hypothesis strategy (:func:`programs`, which shrinks a failing program to a minimal one).

Run the long budget with ``python tests/support/fuzz_programs.py --programs 10000``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import re
import sys
import textwrap
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sps
import scipy.special as sp

import funcdiff as fd
from funcdiff import linalg as fdl
from funcdiff import signal as fdsig
from funcdiff import special as fds
from funcdiff import stats as fdst
from funcdiff.functional import hessian, hvp, jacobian, jvp, vhp, vjp

__all__ = [
    "Program",
    "CheckResult",
    "RandomChooser",
    "generate_program",
    "make_program",
    "check_program",
    "programs",
    "run_budget",
]

NAMESPACE = {"np": np, "sp": sp, "sps": sps, "fdl": fdl, "fds": fds, "fdsig": fdsig, "fdst": fdst}
MAX_SIZE = 36  # elements of any value
MAX_INPUT_SIZE = 24  # elements of all inputs together
MAX_OUT = 12  # elements of the program's output
MAX_ABS = 50.0  # magnitude of any value
MARGIN = 0.05  # distance from kinks, poles, ties and branch cuts

# --------------------------------------------------------------------------- choosers


class RandomChooser:
    """Choices from a seeded NumPy generator (the long budget)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def choice(self, seq: Sequence) -> Any:
        return seq[self.integer(0, len(seq) - 1)]

    def boolean(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)


class DrawChooser:
    """Choices drawn by hypothesis; every choice shrinks towards the simplest option
    (the first of a sequence, the low end of a range, False)."""

    def __init__(self, draw: Callable) -> None:
        from hypothesis import strategies as st

        self.draw = draw
        self.st = st

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(self.st.integers(lo, hi))

    def choice(self, seq: Sequence) -> Any:
        return seq[self.integer(0, len(seq) - 1)]

    def boolean(self, p: float = 0.5) -> bool:
        return self.integer(0, 99) >= 100 - round(100 * p)


# --------------------------------------------------------------------------- programs


@dataclass
class Program:
    """A generated program: inputs, straight-line source lines and the output names.

    ``f`` returns one array, or a tuple when there are several outputs; ``loss`` is
    ``sum_i sum(W_i * out_i)`` with fixed weights.
    """

    inputs: list[np.ndarray]
    lines: list[str]
    outs: list[str]
    out_shapes: list[tuple[int, ...]]
    seed: int
    ops: list[str] = field(default_factory=list)

    def function_source(self) -> str:
        args = ", ".join(f"x{i}" for i in range(len(self.inputs)))
        body = "\n".join("    " + line for line in self.lines)
        return f"def f({args}):\n{body}\n    return {', '.join(self.outs)}\n"

    def weights_source(self) -> str:
        ws = []
        for i, shape in enumerate(self.out_shapes):
            size = int(np.prod(shape, dtype=np.int64))
            ws.append(f"np.cos(1.3 * np.arange({size}) + {0.4 + i}).reshape({shape!r})")
        return ", ".join(ws) + ("," if len(ws) == 1 else "")

    def source(self) -> str:
        """A self-contained script that reproduces the program and its point."""
        values = ",\n    ".join(f"np.array({x.tolist()!r})" for x in self.inputs)
        outs = "(f(*xs),)" if len(self.outs) == 1 else "f(*xs)"
        return (
            "import numpy as np\nimport scipy.sparse as sps\nimport scipy.special as sp\n"
            "from funcdiff import linalg as fdl, special as fds\n\n\n"
            f"{self.function_source()}\n\n"
            f"W = ({self.weights_source()})\n\n\n"
            "def loss(*xs):\n"
            f"    return sum(np.sum(o * w) for o, w in zip({outs}, W))\n\n\n"
            f"INPUTS = (\n    {values},\n)\n"
        )

    def build(self) -> tuple[Callable, Callable, tuple[np.ndarray, ...]]:
        """``(f, loss, W)`` compiled from the source."""
        ns = dict(NAMESPACE)
        exec(compile(self.function_source(), f"<program {self.seed}>", "exec"), ns)
        f = ns["f"]
        ws = eval(f"({self.weights_source()})", dict(NAMESPACE))
        multi = len(self.outs) > 1

        def loss(*xs: Any) -> Any:
            outs = f(*xs) if multi else (f(*xs),)
            total = np.sum(outs[0] * ws[0])
            for o, w in zip(outs[1:], ws[1:]):
                total = total + np.sum(o * w)
            return total

        return f, loss, ws

    def __repr__(self) -> str:
        shapes = [x.shape for x in self.inputs]
        return f"Program(seed={self.seed}, inputs={shapes}, ops={self.ops})\n{self.source()}"


# Elementwise unary operations: (source template, guard on the argument's values).
def _pos(m: float) -> Callable:
    return lambda a: a.min() >= m


def _away(points: Sequence[float], m: float = MARGIN) -> Callable:
    return lambda a: all(np.abs(a - p).min() >= m for p in points)


def _below(m: float) -> Callable:
    return lambda a: a.max() <= m


def _frac_away(a: np.ndarray) -> bool:
    frac = a - np.floor(a)
    return bool(frac.min() >= MARGIN and frac.max() <= 1 - MARGIN)


UNARY: list[tuple[str, Callable | None]] = [
    ("np.sin({a})", None),
    ("np.cos({a})", None),
    ("np.tanh({a})", None),
    ("2.5 * {a} - 1.0", None),
    ("-{a}", None),
    ("{a} ** 2", None),
    ("{a} ** 3", None),
    ("np.square({a})", None),
    ("np.arctan({a})", None),
    ("np.arcsinh({a})", None),
    ("np.exp({a})", _below(3.0)),
    ("np.expm1({a})", _below(3.0)),
    ("np.exp2({a})", _below(3.0)),
    ("np.sinh({a})", lambda a: np.abs(a).max() <= 3.0),
    ("np.cosh({a})", lambda a: np.abs(a).max() <= 3.0),
    ("np.tan({a})", lambda a: np.abs(a).max() <= 1.2),
    ("np.log(np.logaddexp(0.0, {a}))", None),  # log of softplus
    ("np.log({a} * {a} + 1.0)", None),
    ("np.log1p(np.exp({a}))", _below(5.0)),
    ("np.log1p({a} ** 2)", None),
    ("np.log({a})", _pos(0.2)),
    ("np.log2(np.cosh({a}))", None),
    ("np.log10({a} ** 2 + 0.5)", None),
    ("np.sqrt({a} * {a} + 0.25)", None),
    ("np.sqrt(np.exp({a}))", _below(4.0)),
    ("np.sqrt({a})", _pos(0.2)),
    ("np.cbrt({a})", _away([0.0], 0.2)),
    ("1.0 / ({a} ** 2 + 1.0)", None),
    ("np.reciprocal({a})", _away([0.0], 0.3)),
    ("np.power({a} ** 2 + 0.5, 1.5)", None),
    ("np.float_power({a} ** 2 + 0.5, -0.5)", None),
    ("np.abs({a})", _away([0.0])),
    ("np.arcsin(0.9 * np.tanh({a}))", None),
    ("np.arccos(0.8 * np.sin({a}))", None),
    ("np.arctanh(0.9 * np.tanh({a}))", None),
    ("np.arccosh({a} ** 2 + 1.5)", None),
    ("np.sinc({a})", None),
    ("np.hypot({a}, 1.0)", None),
    ("np.deg2rad({a})", None),
    ("np.ldexp({a}, 1)", None),
    ("{a} - np.floor({a})", _frac_away),
    ("np.clip({a}, -1.0, 1.0)", _away([-1.0, 1.0])),
    ("np.nan_to_num({a})", None),
    ("sp.gammaln({a} ** 2 + 0.5)", None),
    ("sp.gamma({a} ** 2 + 0.5)", None),
    ("sp.digamma({a} ** 2 + 0.5)", None),
    ("sp.rgamma({a})", None),
    ("sp.erf({a})", None),
    ("sp.erfc({a})", None),
    ("sp.erfcx({a})", _pos(-1.5)),
    ("sp.erfinv(0.9 * np.tanh({a}))", None),
    ("sp.ndtr({a})", None),
    ("sp.log_ndtr({a})", None),
    ("sp.ndtri(0.8 * sp.expit({a}) + 0.1)", None),
    ("sp.expit({a})", None),
    ("sp.logit(0.8 * sp.expit({a}) + 0.1)", None),
    ("sp.log_expit({a})", None),
    ("sp.entr({a} ** 2 + 0.1)", None),
    ("sp.j0({a})", None),
    ("sp.j1({a})", None),
    ("sp.i0({a})", None),
    ("sp.i1({a})", None),
    ("sp.i0e({a})", _away([0.0])),
    ("sp.k0({a} ** 2 + 0.5)", None),
    ("sp.k1e({a} ** 2 + 0.5)", None),
    ("sp.y0({a} ** 2 + 0.5)", None),
    ("sp.jv(1.5, {a} ** 2 + 0.2)", None),
    ("sp.iv(0.5, {a} ** 2 + 0.2)", None),
    ("sp.kv(1.5, {a} ** 2 + 0.5)", None),
    ("sp.yn(1, {a} ** 2 + 0.5)", None),
    ("sp.gammainc(2.0, {a} ** 2 + 0.1)", None),
    ("sp.xlogy({a}, {a} ** 2 + 0.5)", None),
    ("sp.exp10(0.5 * {a})", _below(3.0)),
    ("sp.cosm1({a})", None),
    ("sp.pseudo_huber(1.0, {a})", None),
    ("sp.huber(1.0, {a})", _away([-1.0, 1.0])),
    ("fds.polygamma(1, {a} ** 2 + 0.5)", None),
    ("abs({a})", _away([0.0])),
    ("+{a}", None),
    ("{a}.copy()", None),
    ("{a}.clip(-1.0, 1.0)", _away([-1.0, 1.0])),
    ("{a} % 1.7", lambda a: _frac_away(a / 1.7)),
    ("({a} // 0.7) * {a}", lambda a: _frac_away(a / 0.7)),
    ("np.round({a}, 1) * {a}", lambda a: _frac_away(10 * a + 0.5)),
    ("np.sign({a}) * {a} ** 2", _away([0.0])),
    ("{a} * ({a} > 0.3)", _away([0.3])),
    ("np.where(np.isfinite({a}), {a}, 0.0)", None),
    ("2.0 ** {a}", _below(3.0)),
    ("np.array(2.0) - {a}", None),
    ("np.float32(1.5) * {a}", None),
    ("{a} * np.arange(1, np.shape({a})[-1] + 1) if np.ndim({a}) else {a} * 3", None),
    ("np.arange(np.shape({a})[-1] if np.ndim({a}) else 1) - {a}", None),
    ("np.fmin({a}, 0.5)", _away([0.5])),
    ("np.heaviside({a}, 0.5) * {a}", _away([0.0])),
    ("np.ldexp({a}, 2)", None),
]


def _apart(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.abs(a - b).min() >= MARGIN)


def _off_origin(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.broadcast_arrays(a, b)
    # arctan2 jumps across the negative x axis (a = 0, b < 0); both have a point at 0.
    return bool(np.hypot(a, b).min() >= 0.1 and np.abs(a[b < 0]).min(initial=1.0) >= MARGIN)


def _both_away(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.abs(a).min() >= MARGIN and np.abs(b).min() >= MARGIN)


BINARY: list[tuple[str, Callable | None]] = [
    ("{a} + {b}", None),
    ("{a} - {b}", None),
    ("{a} * {b}", None),
    ("{a} / ({b} ** 2 + 1.0)", None),
    ("{a} / {b}", lambda a, b: np.abs(b).min() >= 0.3),
    ("np.hypot({a}, {b})", lambda a, b: np.hypot(a, b).min() >= 0.1),
    ("np.arctan2({a}, {b})", _off_origin),
    ("np.logaddexp({a}, {b})", None),
    ("np.logaddexp2({a}, {b})", None),
    ("np.maximum({a}, {b})", _apart),
    ("np.minimum({a}, {b})", _apart),
    ("np.fmax({a}, {b})", _apart),
    ("np.power({a} ** 2 + 0.5, {b})", None),
    ("({a} ** 2 + 0.5) ** {b}", None),
    ("sp.xlogy({a}, {b} ** 2 + 0.5)", None),
    ("sp.beta({a} ** 2 + 0.5, {b} ** 2 + 0.5)", None),
    ("sp.betaln({a} ** 2 + 0.5, {b} ** 2 + 0.5)", None),
    ("sp.kl_div({a} ** 2 + 0.1, {b} ** 2 + 0.1)", None),
    ("sp.rel_entr({a} ** 2 + 0.1, {b} ** 2 + 0.1)", None),
    ("np.where({a} > {b}, {a}, 2.0 * {b})", _apart),
    ("np.copysign({a}, {b})", _both_away),
    ("np.sin({a}) * np.cos({b})", None),
]


# --------------------------------------------------------------------------- generation


class _Builder:
    """The state of one program under construction: values, their inputs, and source."""

    def __init__(self, ch: Any, inputs: list[np.ndarray]) -> None:
        self.ch = ch
        self.env: dict[str, Any] = {f"x{i}": x for i, x in enumerate(inputs)}
        # the same program on Tensors, to tell what funcdiff supports (None once broken)
        self.tenv: dict[str, Any] | None = {
            f"x{i}": fd.tensor(x, requires_grad=True) for i, x in enumerate(inputs)
        }
        self.pool: list[str] = list(self.env)
        self.deps: dict[str, frozenset] = {f"x{i}": frozenset({i}) for i in range(len(inputs))}
        self.lines: list[str] = []
        self.ops: list[str] = []
        self.consumed: set[str] = set()
        self.counter = 0

    def value(self, name: str) -> np.ndarray:
        return np.asarray(self.env[name])

    def pick(self, pred: Callable[[np.ndarray], bool] = lambda a: True) -> str | None:
        cands = [v for v in self.pool if pred(self.value(v))]
        if not cands:
            return None
        if self.ch.boolean(0.5):
            return cands[-1]  # extend the newest value: deep compositions
        return self.ch.choice(cands)

    def attempt(
        self, op: str, lines: list[str], uses: list[str], name: str, guard: Callable | None
    ) -> bool:
        """Run the candidate lines on the current values; keep them if the result is sane."""
        local = dict(self.env)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec("\n".join(lines), dict(NAMESPACE), local)
                out = np.asarray(local[name])
                if (
                    out.dtype.kind != "f"
                    or out.size == 0
                    or out.size > MAX_SIZE
                    or not np.all(np.isfinite(out))
                    or np.abs(out).max() > MAX_ABS
                ):
                    return False
                if guard is not None and not guard(local):
                    return False
        except Exception:
            return False
        self.env = local
        if self.tenv is not None:
            tlocal = dict(self.tenv)
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    exec("\n".join(lines), dict(NAMESPACE), tlocal)
                self.tenv = tlocal
            except Exception:  # a failure the checks will report
                self.tenv = None
        self.pool.append(name)
        self.deps[name] = frozenset().union(*(self.deps[u] for u in uses))
        self.consumed.update(uses)
        self.lines.extend(lines)
        self.ops.append(op)
        return True


def _axis(ch: Any, nd: int, allow_none: bool = True) -> int | None:
    if allow_none and ch.boolean(0.3):
        return None
    return ch.integer(-nd, nd - 1)


def _gaps_ok(a: np.ndarray, axis: int | None) -> bool:
    """Distinct values along ``axis`` are far apart (max, min, sort, ptp are smooth)."""
    s = np.sort(a.ravel() if axis is None else a, axis=-1 if axis is None else axis)
    d = np.diff(s, axis=-1 if axis is None else axis)
    return d.size == 0 or bool(d.min() >= MARGIN)


INDEX_KINDS = ("int", "slice", "fancy", "ellipsis", "newaxis", "mask", "fancy2")
COPY_INDEX_KINDS = ("fancy", "mask", "fancy2")  # advanced indexing: a copy, never a view


def _index_expr(ch: Any, shape: tuple[int, ...], kinds: Sequence[str] = INDEX_KINDS) -> str:
    """A random (basic, advanced or boolean) index for an array of ``shape``."""
    nd = len(shape)
    kind = ch.choice(kinds)
    k = ch.integer(0, nd - 1)
    n = shape[k]
    lead = ":, " * k
    if kind == "int":
        return f"[{lead}{ch.integer(-n, n - 1)}]"
    if kind == "slice":
        start = ch.integer(0, n - 1)
        step = ch.choice([1, 2, -1])
        if step < 0:
            return f"[{lead}{start}::-1]"
        return f"[{lead}{start}:{ch.integer(start + 1, n)}:{step}]"
    if kind == "fancy":
        idx = [ch.integer(-n, n - 1) for _ in range(ch.integer(1, 4))]
        return f"[{lead}{idx}]"
    if kind == "ellipsis":
        return f"[..., {ch.integer(0, shape[-1] - 1)}]"
    if kind == "newaxis":
        return f"[None, ..., {ch.integer(0, shape[-1] - 1)}:]"
    if kind == "mask":
        mask = np.array([ch.boolean(0.6) for _ in range(int(np.prod(shape)))]).reshape(shape)
        mask.flat[0] = True
        return f"[np.array({mask.tolist()!r})]"
    # two advanced indices that broadcast together
    if nd < 2:
        return f"[[{ch.integer(0, n - 1)}, {ch.integer(0, n - 1)}]]"
    i = [ch.integer(0, shape[0] - 1) for _ in range(2)]
    j = [ch.integer(0, shape[1] - 1) for _ in range(2)]
    return f"[{i}, {j}]"


def op_unary(b: _Builder, name: str) -> tuple | None:
    a = b.pick()
    tmpl, guard = b.ch.choice(UNARY)
    g = (lambda e: guard(np.asarray(e[a]))) if guard else None
    return [f"{name} = {tmpl.format(a=a)}"], [a], g


def op_binary(b: _Builder, name: str) -> tuple | None:
    a = b.pick()
    c = b.pick()
    tmpl, guard = b.ch.choice(BINARY)
    g = (lambda e: guard(*np.broadcast_arrays(e[a], e[c]))) if guard else None
    return [f"{name} = {tmpl.format(a=a, b=c)}"], [a, c], g


def op_reduce(b: _Builder, name: str) -> tuple | None:
    a = b.pick(lambda v: v.ndim >= 1)
    if a is None:
        return None
    ch = b.ch
    nd = b.value(a).ndim
    ax = _axis(ch, nd)
    kd = ch.boolean(0.3)
    kind = ch.choice(
        [
            "sum",
            "mean",
            "prod",
            "max",
            "min",
            "var",
            "std",
            "logsumexp",
            "norm",
            "ptp",
            "cumsum",
            "cumprod",
            "average",
            "softmax",
            "log_softmax",
            "sort",
            "diff",
            "nansum",
            "method_sum",
            "trace",
            "amax",
            "take_along",
            "cumulative_sum",
            "nanmean",
            "vector_norm",
            "trapezoid",
            "ufunc_reduce",
            "ufunc_accumulate",
            "method_mean",
            "method_max",
            "method_prod",
            "method_std",
            "bincount",
            "einsum_diag",
            "average_none",
        ]
    )
    guard = None
    axs = f", axis={ax}" if ax is not None else ""
    kds = ", keepdims=True" if kd else ""
    if kind in ("sum", "mean", "prod", "nansum"):
        src = f"np.{kind}({a}{axs}{kds})"
    elif kind == "method_sum":
        src = f"{a}.sum({'axis=' + str(ax) if ax is not None else ''})"
    elif kind in ("max", "min", "ptp", "amax"):
        src = f"np.{kind}({a}{axs}{kds})"
        guard = lambda e: _gaps_ok(np.asarray(e[a]), ax)  # noqa: E731
    elif kind in ("var", "std"):
        ddof = ch.integer(0, 1)
        src = f"np.{kind}({a}{axs}, ddof={ddof}{kds})"
        length = b.value(a).size if ax is None else b.value(a).shape[ax]
        if length <= ddof:
            return None
        if kind == "std":
            guard = lambda e: np.all(np.var(np.asarray(e[a]), axis=ax) >= 0.01)  # noqa: E731
    elif kind == "logsumexp":
        src = f"fds.logsumexp({a}{axs}{kds})"
    elif kind == "norm":
        if ax is None:
            src = f"np.linalg.norm({a})"
            guard = lambda e: np.linalg.norm(np.asarray(e[a])) >= 0.1  # noqa: E731
        else:
            order = ch.choice([None, 1, 3, "np.inf"])
            src = f"np.linalg.norm({a}, ord={order}, axis={ax}{kds})"

            def guard(e: dict) -> bool:
                v = np.asarray(e[a])
                if order == 1:
                    return bool(np.abs(v).min() >= MARGIN)
                if order == "np.inf":
                    return _gaps_ok(np.abs(v), ax) and bool(np.abs(v).min() >= MARGIN)
                return bool(np.linalg.norm(v, axis=ax).min() >= 0.1)

    elif kind in ("cumsum", "cumprod", "diff", "sort"):
        ax = ch.integer(-nd, nd - 1)
        src = f"np.{kind}({a}, axis={ax})"
        if kind == "sort":
            guard = lambda e: _gaps_ok(np.asarray(e[a]), ax)  # noqa: E731
    elif kind == "take_along":
        ax = ch.integer(-nd, nd - 1)
        src = f"np.take_along_axis({a}, np.argsort({a}, axis={ax}), axis={ax})"
        guard = lambda e: _gaps_ok(np.asarray(e[a]), ax)  # noqa: E731
    elif kind == "average":
        ax = ch.integer(-nd, nd - 1)
        w = [round(0.5 + 0.25 * i, 2) for i in range(b.value(a).shape[ax])]
        src = f"np.average({a}, axis={ax}, weights=np.array({w}))"
    elif kind in ("softmax", "log_softmax"):
        src = f"fds.{kind}({a}, axis={ch.integer(-nd, nd - 1)})"
    elif kind == "cumulative_sum":
        src = f"np.cumulative_sum({a}, axis={ch.integer(-nd, nd - 1)}, include_initial=True)"
    elif kind == "nanmean":
        src = f"np.nanmean({a}{axs}{kds})"
    elif kind == "vector_norm":
        src = f"np.linalg.vector_norm({a}{axs}{kds})"
        guard = lambda e: np.all(np.linalg.vector_norm(np.asarray(e[a]), axis=ax) >= 0.1)  # noqa: E731
    elif kind == "trapezoid":
        src = f"np.trapezoid({a}, dx=0.5, axis={ch.integer(-nd, nd - 1)})"
    elif kind == "ufunc_reduce":
        fn = ch.choice(["add", "multiply", "maximum", "minimum"])
        ax = ch.integer(0, nd - 1)
        src = f"np.{fn}.reduce({a}, axis={ax})"
        if fn in ("maximum", "minimum"):
            guard = lambda e: _gaps_ok(np.asarray(e[a]), ax)  # noqa: E731
    elif kind == "ufunc_accumulate":
        src = f"np.{ch.choice(['add', 'multiply'])}.accumulate({a}, axis={ch.integer(0, nd - 1)})"
    elif kind in ("method_mean", "method_prod"):
        src = f"{a}.{kind[7:]}({'' if ax is None else f'axis={ax}'})"
    elif kind == "method_max":
        src = f"{a}.max({'' if ax is None else f'axis={ax}'})"
        guard = lambda e: _gaps_ok(np.asarray(e[a]), ax)  # noqa: E731
    elif kind == "method_std":
        src = f"{a}.std({'' if ax is None else f'axis={ax}'})"
        guard = lambda e: np.all(np.var(np.asarray(e[a]), axis=ax) >= 0.01)  # noqa: E731
    elif kind == "bincount":
        size = b.value(a).size
        idx = [ch.integer(0, 3) for _ in range(size)]
        src = f"np.bincount(np.array({idx}), weights={a}.ravel(), minlength=4)"
    elif kind == "einsum_diag":
        if nd < 2 or b.value(a).shape[-1] != b.value(a).shape[-2]:
            return None
        src = f"np.einsum('...ii->...i', {a})"
    elif kind == "average_none":
        w = np.round(np.linspace(0.5, 1.5, b.value(a).size), 3).reshape(b.value(a).shape)
        src = f"np.average({a}, weights=np.array({w.tolist()!r}))"
    else:  # trace
        if nd < 2:
            return None
        src = f"np.trace({a}, axis1={nd - 2}, axis2={nd - 1})"
    return [f"{name} = {src}"], [a], guard


def op_index(b: _Builder, name: str) -> tuple | None:
    a = b.pick(lambda v: v.ndim >= 1)
    if a is None:
        return None
    shape = b.value(a).shape
    ch = b.ch
    if ch.boolean(0.2):
        k = ch.integer(0, len(shape) - 1)
        idx = [ch.integer(0, shape[k] - 1) for _ in range(ch.integer(1, 3))]
        return [f"{name} = np.take({a}, {idx}, axis={k})"], [a], None
    return [f"{name} = {a}{_index_expr(ch, shape)}"], [a], None


def op_shape(b: _Builder, name: str) -> tuple | None:
    a = b.pick(lambda v: v.ndim >= 1)
    if a is None:
        return None
    ch = b.ch
    shape = b.value(a).shape
    nd = len(shape)
    kind = ch.choice(
        [
            "reshape",
            "transpose",
            "T",
            "swapaxes",
            "moveaxis",
            "expand_dims",
            "squeeze",
            "broadcast_to",
            "flip",
            "roll",
            "tile",
            "repeat",
            "pad",
            "diag",
            "diagonal",
            "tril",
            "triu",
            "rot90",
            "atleast_2d",
            "ravel",
            "split",
            "append",
            "insert",
            "delete",
            "flipud",
        ]
    )
    k = ch.integer(0, nd - 1)
    if kind == "reshape":
        options = [(-1,), tuple(reversed(shape)), (1, *shape), (*shape, 1)]
        size = int(np.prod(shape))
        for m in (2, 3, 4):
            if size % m == 0 and size > m:
                options.append((m, -1))
            if size == m * m:
                options.append((m, m))
        src = f"np.reshape({a}, {ch.choice(options)!r})"
    elif kind == "transpose":
        perm = list(range(nd))
        for i in range(nd - 1, 0, -1):
            j = ch.integer(0, i)
            perm[i], perm[j] = perm[j], perm[i]
        src = f"np.transpose({a}, {tuple(perm)!r})"
    elif kind == "T":
        src = f"{a}.T"
    elif kind == "swapaxes":
        src = f"np.swapaxes({a}, {k}, {ch.integer(-nd, nd - 1)})"
    elif kind == "moveaxis":
        src = f"np.moveaxis({a}, {k}, {ch.integer(-nd, nd - 1)})"
    elif kind == "expand_dims":
        src = f"np.expand_dims({a}, {ch.integer(0, nd)})"
    elif kind == "squeeze":
        if 1 not in shape:
            return None
        src = f"np.squeeze({a})"
    elif kind == "broadcast_to":
        target = tuple(ch.integer(2, 3) if s == 1 else s for s in shape)
        if ch.boolean(0.5):
            target = (2, *target)
        src = f"np.broadcast_to({a}, {target!r})"
    elif kind == "flip":
        src = f"np.flip({a}, axis={k})"
    elif kind == "roll":
        src = f"np.roll({a}, {ch.integer(-2, 2)}, axis={k})"
    elif kind == "tile":
        src = f"np.tile({a}, {ch.choice([2, (2, 1), (1, 2)])!r})"
    elif kind == "repeat":
        src = f"np.repeat({a}, {ch.integer(1, 2)}, axis={k})"
    elif kind == "pad":
        src = f"np.pad({a}, {ch.integer(0, 1)})"
    elif kind == "diag":
        if nd > 2:
            return None
        src = f"np.diag({a})"
    elif kind in ("diagonal", "tril", "triu", "rot90"):
        if nd < 2:
            return None
        src = f"np.{kind}({a})"
    elif kind == "atleast_2d":
        src = f"np.atleast_2d({a})"
    elif kind == "ravel":
        src = f"{a}.ravel()"
    elif kind == "split":
        if shape[k] < 2:
            return None
        src = f"np.array_split({a}, 2, axis={k})[{ch.integer(0, 1)}]"
    elif kind in ("append", "insert", "delete"):
        if nd != 1:
            return None
        if kind == "append":
            src = f"np.append({a}, np.sin({a}))"
        elif kind == "insert":
            src = f"np.insert({a}, {ch.integer(0, shape[0])}, 0.5)"
        else:
            if shape[0] < 2:
                return None
            src = f"np.delete({a}, {ch.integer(0, shape[0] - 1)})"
    else:  # flipud
        src = f"np.flipud({a})"
    return [f"{name} = {src}"], [a], None


def op_join(b: _Builder, name: str) -> tuple | None:
    a = b.pick(lambda v: v.ndim >= 1)
    if a is None:
        return None
    ch = b.ch
    shape = b.value(a).shape
    kind = ch.choice(
        [
            "concatenate",
            "stack",
            "where_mask",
            "hstack",
            "vstack",
            "dstack",
            "column_stack",
            "where_broadcast",
            "broadcast_arrays",
        ]
    )
    if kind in ("stack", "where_mask"):
        c = b.pick(lambda v: v.shape == shape)
    elif kind in ("where_broadcast", "broadcast_arrays"):
        c = b.pick(lambda v: _broadcastable(v.shape, shape))
    else:
        c = b.pick(lambda v: v.ndim == len(shape))
    if c is None:
        return None
    if kind == "concatenate":
        src = f"np.concatenate([{a}, {c}], axis={ch.integer(0, len(shape) - 1)})"
    elif kind == "stack":
        src = f"np.stack([{a}, {c}], axis={ch.integer(0, len(shape))})"
    elif kind == "where_mask":
        mask = np.array([ch.boolean() for _ in range(int(np.prod(shape)))]).reshape(shape)
        src = f"np.where(np.array({mask.tolist()!r}), {a}, {c})"
    elif kind == "where_broadcast":
        src = f"np.where(np.sin(3.0 * {c}) > 0, {a}, {c})"
        return (
            [f"{name} = {src}"],
            [a, c],
            lambda e: np.abs(np.sin(3.0 * np.asarray(e[c]))).min() >= MARGIN,
        )
    elif kind == "broadcast_arrays":
        return (
            [
                f"{name}_p, {name}_q = np.broadcast_arrays({a}, {c})",
                f"{name} = {name}_p * np.cos({name}_q)",
            ],
            [a, c],
            None,
        )
    else:
        src = f"np.{kind}([{a}, {c}])"
    return [f"{name} = {src}"], [a, c], None


def _broadcastable(s1: tuple, s2: tuple) -> bool:
    try:
        np.broadcast_shapes(s1, s2)
        return True
    except ValueError:
        return False


def op_inplace(b: _Builder, name: str) -> tuple | None:
    """A fresh array changed in place: ``r[idx] = ...`` or ``r op= ...``."""
    a = b.pick(lambda v: v.ndim >= 1)
    if a is None:
        return None
    ch = b.ch
    shape = b.value(a).shape
    first = f"{name} = {a} * 1.0"
    if ch.boolean(0.5):
        aug = ch.choice(["", "+", "*"])
        # ``r[view] += ...`` is refused by funcdiff (in-place on a view, see
        # test_fuzz.py::test_augmented_assignment_through_a_basic_slice): keep to copies.
        idx = _index_expr(ch, shape, INDEX_KINDS if not aug else COPY_INDEX_KINDS)
        try:
            target = np.shape(eval(f"v{idx}", {"np": np}, {"v": b.value(a)}))
        except Exception:
            return None
        c = b.pick(lambda v: v.ndim <= len(target) and _broadcasts(v.shape, target))
        value = f"np.sin({c})" if c is not None else f"np.cos({a}{idx})"
        uses = [a] if c is None else [a, c]
        return [first, f"{name}{idx} {aug}= {value}"], uses, None
    c = b.pick(lambda v: _broadcasts(v.shape, shape))
    if c is None:
        return None
    aug = ch.choice(["+", "-", "*", "/", "out"])
    if aug == "out":
        return [first, f"np.multiply({name}, np.tanh({c}), out={name})"], [a, c], None
    if aug == "/":
        return [first, f"{name} /= {c} ** 2 + 1.0"], [a, c], None
    return [first, f"{name} {aug}= {c}"], [a, c], None


def _broadcasts(small: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(small, target) == tuple(target)
    except ValueError:
        return False


def op_product(b: _Builder, name: str) -> tuple | None:
    ch = b.ch
    a = b.pick(lambda v: v.ndim >= 1)
    if a is None:
        return None
    sa = b.value(a).shape
    kind = ch.choice(
        [
            "matmul",
            "dot",
            "inner",
            "tensordot",
            "einsum",
            "outer",
            "kron",
            "vdot",
            "vecdot",
            "cross",
            "multi_dot",
        ]
    )
    if kind in ("matmul", "dot", "tensordot"):
        c = b.pick(lambda v: v.ndim >= 1 and v.shape[-2 if v.ndim > 1 else 0] == sa[-1])
        if c is None:
            return None
        src = {
            "matmul": f"{a} @ {c}",
            "dot": f"np.dot({a}, {c})",
            "tensordot": f"np.tensordot({a}, {c}, axes=1)",
        }[kind]
    elif kind in ("inner", "vecdot"):
        c = b.pick(lambda v: v.ndim >= 1 and v.shape[-1] == sa[-1])
        if c is None:
            return None
        src = f"np.{kind}({a}, {c})"
    elif kind in ("outer", "kron", "vdot"):
        c = b.pick(lambda v: v.ndim >= 1 and (kind != "vdot" or v.size == b.value(a).size))
        if c is None:
            return None
        src = f"np.{kind}({a}, {c})"
    elif kind == "cross":
        c = b.pick(lambda v: v.ndim >= 1 and v.shape[-1] == 3)
        if c is None or sa[-1] != 3:
            return None
        src = f"np.cross({a}, {c})"
    elif kind == "multi_dot":
        if len(sa) != 2:
            return None
        c = b.pick(lambda v: v.ndim == 2 and v.shape[0] == sa[1])
        if c is None:
            return None
        src = f"np.linalg.multi_dot([{a}, {c}, {a}.T])"
    else:  # einsum with random subscripts
        c = b.pick(lambda v: v.ndim >= 1)
        sc = b.value(c).shape
        if len(sa) > 8 or len(sc) > 8:
            return None
        la = "abcdefgh"[: len(sa)]
        lc = ""
        for s in sc:
            shared = [la[i] for i, t in enumerate(sa) if t == s and la[i] not in lc]
            lc += shared[0] if shared and ch.boolean(0.6) else "pqrstuvw"[len(lc)]
        letters = sorted(set(la + lc))
        keep = [x for x in letters if ch.boolean(0.5)]
        src = f"np.einsum('{la},{lc}->{''.join(keep)}', {a}, {c})"
    return [f"{name} = {src}"], [a, c], None


def op_sparse_matmul(b: _Builder, name: str) -> tuple | None:
    """``L @ a``, ``a @ L`` or ``L.T @ a`` with a random constant scipy.sparse ``L``."""
    ch = b.ch
    a = b.pick(lambda v: v.ndim in (1, 2))
    if a is None:
        return None
    sa = b.value(a).shape
    form = ch.choice(["L @ a", "a @ L", "L.T @ a"])
    inner, other = (sa[-1] if form == "a @ L" else sa[0]), ch.integer(1, 4)
    shape = (other, inner) if form == "L @ a" else (inner, other)
    fmt = ch.choice(["csr", "csc", "coo", "lil", "dia", "bsr"])
    cls = ch.choice(["array", "matrix"])
    L = f"sps.{fmt}_{cls}(sps.random_array({shape}, density=0.6, rng={ch.integer(0, 999)}))"
    src = {"L @ a": f"{L} @ {a}", "a @ L": f"{a} @ {L}", "L.T @ a": f"{L}.T @ {a}"}[form]
    return [f"{name} = {src}"], [a], None


def _eig_gaps(s: np.ndarray) -> bool:
    w = np.linalg.eigvalsh(s)
    return w.shape[-1] < 2 or bool(np.diff(w, axis=-1).min() >= 0.1)


def _sv_gaps(m: np.ndarray) -> bool:
    s = np.linalg.svd(m, compute_uv=False)
    return s.shape[-1] < 2 or bool((-np.diff(s, axis=-1)).min() >= 0.1)


def op_linalg(b: _Builder, name: str) -> tuple | None:
    ch = b.ch
    a = b.pick(lambda v: v.ndim >= 2 and v.shape[-1] == v.shape[-2])
    if a is None:
        return None
    n = b.value(a).shape[-1]
    m = f"{name}_m"
    # diagonally dominant: eigenvalues and singular values within (1, 3)
    lines = [f"{m} = np.tanh({a}) / {n} + 2.0 * np.eye({n})"]
    uses = [a]
    guard = None
    kind = ch.choice(
        [
            "inv",
            "solve",
            "det",
            "slogdet",
            "cholesky",
            "eigvalsh",
            "eigh",
            "svdvals",
            "svd",
            "qr",
            "pinv",
            "matrix_power",
            "expm",
            "solve_triangular",
            "cho_solve",
            "fdl_solve",
            "fdl_inv",
            "fdl_det",
            "fdl_solve_pos",
            "matmul",
            "norm_fro",
            "norm_2",
            "norm_nuc",
            "lstsq",
            "tall_pinv",
            "tall_qr",
            "tall_svdvals",
            "matrix_norm",
            "eigvals_sum",
        ]
    )
    sym = f"{m} + np.swapaxes({m}, -1, -2)"
    spd = f"{m} @ np.swapaxes({m}, -1, -2)"
    rhs = None
    if kind in ("solve", "solve_triangular", "cho_solve", "fdl_solve", "fdl_solve_pos"):
        rhs = b.pick(
            lambda v: (v.ndim == 1 and v.shape[0] == n) or (v.ndim >= 2 and v.shape[-2] == n)
        )
        if rhs is None:
            return None
        uses.append(rhs)
    if kind == "inv":
        src = f"np.linalg.inv({m})"
    elif kind == "solve":
        src = f"np.linalg.solve({m}, {rhs})"
    elif kind == "det":
        src = f"np.linalg.det({m})"
    elif kind == "slogdet":
        src = f"np.linalg.slogdet({m})[1]"
    elif kind == "cholesky":
        src = f"np.linalg.cholesky({spd})"
    elif kind == "eigvalsh":
        src = f"np.linalg.eigvalsh({sym})"
        guard = lambda e: _eig_gaps(e[m] + np.swapaxes(e[m], -1, -2))  # noqa: E731
    elif kind == "eigh":
        lines.append(f"{name}_w, {name}_v = np.linalg.eigh({sym})")
        src = f"({name}_v * np.tanh({name}_w)[..., None, :]) @ np.swapaxes({name}_v, -1, -2)"
        guard = lambda e: _eig_gaps(e[m] + np.swapaxes(e[m], -1, -2))  # noqa: E731
    elif kind == "svdvals":
        src = f"np.linalg.svd({m}, compute_uv=False)"
        guard = lambda e: _sv_gaps(e[m])  # noqa: E731
    elif kind == "svd":
        lines.append(f"{name}_u, {name}_s, {name}_vh = np.linalg.svd({m})")
        src = f"({name}_u * np.sqrt({name}_s)[..., None, :]) @ {name}_vh"
        guard = lambda e: _sv_gaps(e[m])  # noqa: E731
    elif kind == "qr":
        src = f"np.linalg.qr({m})[{ch.integer(0, 1)}]"
    elif kind == "pinv":
        src = f"np.linalg.pinv({m})"
    elif kind == "matrix_power":
        src = f"np.linalg.matrix_power({m}, {ch.choice([2, 3, -1, 0])})"
    elif kind == "expm":
        src = f"fdl.expm(np.tanh({a}))"
    elif kind == "solve_triangular":
        lower = ch.boolean()
        src = f"fdl.solve_triangular({m}, {rhs}, lower={lower})"
    elif kind == "cho_solve":
        src = f"fdl.cho_solve(fdl.cho_factor({spd}), {rhs})"
    elif kind == "fdl_solve":
        src = f"fdl.solve({m}, {rhs})"
    elif kind == "fdl_solve_pos":
        src = f"fdl.solve({spd}, {rhs}, assume_a='pos')"
    elif kind == "fdl_inv":
        src = f"fdl.inv({m})"
    elif kind == "fdl_det":
        src = f"fdl.det({m})"
    elif kind == "matmul":
        src = f"{m} @ {a}"
    elif kind == "norm_fro":
        src = f"np.linalg.norm({m}, 'fro', axis=(-2, -1))"
    elif kind == "norm_2":
        src = f"np.linalg.norm({m}, 2, axis=(-2, -1))"
        guard = lambda e: _sv_gaps(e[m])  # noqa: E731
    elif kind == "norm_nuc":
        src = f"np.linalg.norm({m}, 'nuc', axis=(-2, -1))"
    elif kind == "matrix_norm":
        src = f"np.linalg.matrix_norm({m}, ord={ch.choice(['fro', 1, 'np.inf'])})"
        guard = lambda e: (
            _gaps_ok(np.abs(np.asarray(e[m])).sum(-2), -1)
            and _gaps_ok(  # noqa: E731
                np.abs(np.asarray(e[m])).sum(-1), -1
            )
        )
    elif kind == "eigvals_sum":
        src = f"np.sum(np.log(np.linalg.eigvalsh({spd})), axis=-1)"  # log det, eigen route
    else:  # tall matrices: the first n - 1 columns of a dominant matrix have full rank
        if n < 2:
            return None
        tall = f"{m}[..., :{n - 1}]"
        if kind == "lstsq":
            rhs = b.pick(lambda v: v.ndim in (1, 2) and v.shape[0] == n)
            if rhs is None or b.value(a).ndim != 2:
                return None
            uses.append(rhs)
            src = f"np.linalg.lstsq({tall}, {rhs})[0]"
        elif kind == "tall_pinv":
            src = f"np.linalg.pinv({tall})"
        elif kind == "tall_qr":
            src = f"np.linalg.qr({tall})[{ch.integer(0, 1)}]"
        else:
            src = f"np.linalg.svd({tall}, compute_uv=False)"
            guard = lambda e: _sv_gaps(np.asarray(e[m])[..., : n - 1])  # noqa: E731
    lines.append(f"{name} = {src}")
    return lines, uses, guard


# --------------------------------------------------------------------------- registry
def _callee(key: Any, rule: Any) -> str | None:
    """How a program spells the registered function ``key`` (None: not reachable).

    SciPy functions that are not ufuncs do not dispatch to Tensors (no NEP 18), so they
    are spelled through funcdiff's namespaces of the same names (``funcdiff.special``,
    ``.linalg``, ``.signal``, ``.stats``), as a user calls them.
    """
    name = getattr(key, "__name__", None)
    if name:
        for prefix, mod in (("np", np), ("np.linalg", np.linalg), ("np.fft", np.fft), ("sp", sp)):
            if getattr(mod, name, None) is key:
                return f"{prefix}.{name}"
    for scipy_module, alias in _FUNCDIFF_SPELLINGS.items():
        if rule.name.startswith(scipy_module + "."):
            path = rule.name[len(scipy_module) + 1 :]
            obj: Any = NAMESPACE[alias]
            for part in path.split("."):
                obj = getattr(obj, part, None)
            return f"{alias}.{path}" if callable(obj) else None
    short = rule.name.rsplit(".", 1)[-1]
    scipy_function = not isinstance(key, np.ufunc) and str(
        getattr(key, "__module__", "")
    ).startswith("scipy")
    if scipy_function or not name or name.startswith("_"):  # e.g. scipy's private _zeta
        for prefix in ("fds", "fdl"):
            if hasattr(NAMESPACE[prefix], short):
                return f"{prefix}.{short}"
    return None


#: SciPy's Python-level modules and the funcdiff namespace a program calls instead.
_FUNCDIFF_SPELLINGS = {
    "scipy.special": "fds",
    "scipy.linalg": "fdl",
    "scipy.signal": "fdsig",
    "scipy.stats": "fdst",
}


def _literal(c: Any) -> str | None:
    """Source text for a constant argument, or None if it has none."""
    if isinstance(c, np.ndarray):
        return f"np.array({c.tolist()!r}, dtype=np.{c.dtype.name})"
    if isinstance(c, np.dtype):
        return f"np.dtype({c.name!r})"
    text = repr(c)
    try:
        back = eval(text, dict(NAMESPACE))
        same = bool(np.all(back == c)) if not isinstance(c, (tuple, list)) else back == c
    except Exception:
        return None
    return text if same else None


_REGISTRY_CASES: list[tuple[str, Any, Any]] | None = None
#: funcdiff's messages for calls it does not support on Tensors (clear errors by design)
UNSUPPORTED_MARKERS = (
    "has no derivative rule",
    "Can't convert a Tensor that requires grad",
    "the Python number would carry no derivative",
)


def registry_cases() -> list[tuple[str, Any, Any]]:
    """``(callee, rule, case)`` for every test case of every differentiable registered
    rule that a program line can express (second-order cases, no output wrapper)."""
    global _REGISTRY_CASES
    if _REGISTRY_CASES is None:
        from funcdiff.rules import FUNCTION_RULES, UFUNC_RULES, Arg

        seen: set = set()
        found = []
        for table in (UFUNC_RULES, FUNCTION_RULES):
            for key, rule in table.items():
                callee = _callee(key, rule)
                if callee is None or not rule.differentiable:
                    continue
                for i, case in enumerate(rule.cases):
                    values = list(case.args) + list(case.kwargs.values())
                    if (
                        (callee, i) in seen
                        or case.output is not None
                        or case.writes is not None  # in place: the call returns None
                        or case.order < 2
                        or case.atol > 1e-6
                        or case.rtol > 1e-5
                        or not any(isinstance(a, Arg) and a.diff for a in values)
                        or any(isinstance(a, list) for a in values)
                        or any(not isinstance(a, Arg) and _literal(a) is None for a in values)
                    ):
                        continue
                    seen.add((callee, i))
                    found.append((callee, rule, case))
        _REGISTRY_CASES = found
    return _REGISTRY_CASES


def _arg_expr(b: _Builder, arg: Any, rng: np.random.Generator, uses: list[str]) -> str:
    """An expression for one :class:`Arg` of a rule's case: a constant, or a pool value
    tiled into the case's shape and mapped smoothly into the case's domain."""
    shape = tuple(arg.shape)
    size = int(np.prod(shape, dtype=np.int64))
    if arg.kind in ("int", "bool") or not arg.diff or size == 0:
        return _literal(np.asarray(arg.sample(rng)))
    v = b.pick()
    uses.append(v)
    reps = -(-size // b.value(v).size)
    flat = f"np.ravel({v})" if reps == 1 else f"np.tile(np.ravel({v}), {reps})"
    spread = f"np.linspace(-1.0, 1.0, {size}).reshape({shape!r})"
    t = f"({flat}[:{size}].reshape({shape!r}) + {spread})"
    if arg.kind == "uniform":
        return f"({arg.low!r} + {arg.high - arg.low!r} * sp.expit({t}))"
    n = shape[-1] if shape else 1
    if arg.kind == "spd":
        return f"(np.tanh({t}) @ np.swapaxes(np.tanh({t}), -1, -2) / {n} + np.eye({n}))"
    if arg.kind == "wellcond":
        return f"(np.tanh({t}) / {n} + 2.0 * np.eye({n}))"
    # "distinct": evenly spread values, perturbed by a fifth of their spacing at most
    spacing = (arg.high - arg.low) / max(size, 1)
    base = np.asarray(arg.sample(rng))
    return f"({_literal(base)} + {0.2 * spacing!r} * np.tanh({t}))"


def op_registry(b: _Builder, name: str) -> tuple | None:
    """Any registered rule, on one of its own test cases' shapes and domains."""
    from funcdiff.rules import Arg

    cases = registry_cases()
    callee, rule, case = cases[b.ch.integer(0, len(cases) - 1)]
    rng = np.random.default_rng(b.ch.integer(0, 2**31 - 1))
    uses: list[str] = []
    args = [_arg_expr(b, a, rng, uses) if isinstance(a, Arg) else _literal(a) for a in case.args]
    kwargs = [
        f"{k}={_arg_expr(b, a, rng, uses) if isinstance(a, Arg) else _literal(a)}"
        for k, a in case.kwargs.items()
    ]
    call = f"{callee}({', '.join(args + kwargs)})"
    if rule.family == "linalg":
        # A matrix tiled from few program values can be nearly singular; its higher
        # derivatives then lose digits as cond**3, beyond any fixed tolerance.
        built = [a for a in args if a is not None] + [k.split("=", 1)[1] for k in kwargs]
        for expr in built:
            try:
                m = np.asarray(eval(expr, dict(NAMESPACE), dict(b.env)))
            except Exception:
                return None
            if m.dtype.kind != "f" or m.ndim < 2 or not m.size:
                continue
            with np.errstate(all="ignore"):
                if not np.all(np.linalg.cond(m) <= 50.0):
                    return None
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = eval(call, dict(NAMESPACE), dict(b.env))
    except Exception:
        return None
    if b.tenv is not None:
        # Calls NumPy does not hand to funcdiff (np.full_like dispatches on its template
        # only) end in funcdiff's clear "unsupported" errors: not what is tested here.
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                eval(call, dict(NAMESPACE), dict(b.tenv))
        except NotImplementedError:
            return None
        except (TypeError, RuntimeError) as exc:
            if any(m in str(exc) for m in UNSUPPORTED_MARKERS):
                return None
        except Exception:
            pass  # anything else is for the checks to report
    if isinstance(probe, (tuple, list)):  # several outputs: one of them
        call += f"[{b.ch.integer(0, len(probe) - 1)}]"
    if not uses:  # only constants (empty arrays): nothing to differentiate
        return None
    return [f"{name} = {call}"], uses, None


OPS: list[Callable] = [
    op_unary,
    op_binary,
    op_reduce,
    op_index,
    op_shape,
    op_linalg,
    op_unary,
    op_binary,
    op_join,
    op_inplace,
    op_product,
    op_linalg,
    op_reduce,
    op_linalg,
    op_product,
    op_registry,
    op_registry,
    op_registry,
    op_sparse_matmul,
]


def _base_shape(ch: Any) -> tuple[int, ...]:
    rank = ch.choice([1, 2, 2, 0, 3])
    shape = [ch.integer(1, 4) if ch.boolean(0.2) else ch.integer(2, 4) for _ in range(rank)]
    if rank >= 2 and ch.boolean(0.6):
        shape[-1] = shape[-2] = max(shape[-1], 2)
    while int(np.prod(shape)) > 16:
        shape[int(np.argmax(shape))] -= 1
    return tuple(shape)


def generate_program(ch: Any, max_ops: int = 10) -> Program:
    """Draw one program with the chooser ``ch`` (see :class:`RandomChooser`)."""
    seed = ch.integer(0, 2**31 - 1)
    rng = np.random.default_rng(seed)
    base = _base_shape(ch)
    n_inputs = ch.integer(1, 3)
    inputs = []
    total = 0
    for i in range(n_inputs):
        # the first input has the full shape; the others broadcast against it
        keep = len(base) if i == 0 else ch.integer(0, len(base))
        shape = tuple(1 if i and ch.boolean(0.2) else s for s in base[len(base) - keep :])
        size = int(np.prod(shape))
        if inputs and total + size > MAX_INPUT_SIZE:
            break
        total += size
        inputs.append(rng.uniform(-1.5, 1.5, size=shape))
    b = _Builder(ch, inputs)
    n_ops = ch.integer(1, max_ops)
    for _ in range(n_ops):
        name = f"v{b.counter}"
        for _attempt in range(40):
            op = ch.choice(OPS)
            emitted = op(b, name)
            if emitted is None:
                continue
            lines, uses, guard = emitted
            if b.attempt(op.__name__[3:], lines, uses, name, guard):
                b.counter += 1
                break
    outs = [b.pool[-1]]
    if len(b.pool) > len(inputs) + 1 and ch.boolean(0.25):
        outs.append(b.ch.choice(b.pool[len(inputs) : -1]))  # a second output
    for k, out in enumerate(outs):
        # Keep outputs small (Jacobian loops) ...
        while b.value(out).size > MAX_OUT:
            name = f"v{b.counter}"
            b.counter += 1
            if not any(
                b.attempt("reduce_out", [f"{name} = {src}"], [out], name, None)
                for src in (f"np.mean({out}, axis=0)", f"np.ravel({out})[:{MAX_OUT}]")
            ):
                break
            out = name
        outs[k] = out
    # ... let dead values reach the output (so every operation is differentiated) ...
    consumed = set(b.consumed) | set(outs)
    dead = [v for v in b.pool[len(inputs) :] if v not in consumed]
    if dead and ch.boolean(0.9):
        name = f"v{b.counter}"
        b.counter += 1
        extra = " + ".join(f"np.sum(np.tanh({v}))" for v in dead)
        if b.attempt("use_dead", [f"{name} = {outs[0]} + ({extra})"], [outs[0], *dead], name, None):
            outs[0] = name
    # ... and let most programs use every input.
    used = frozenset().union(*(b.deps[o] for o in outs))
    unused = [i for i in range(len(inputs)) if i not in used]
    if unused and (ch.boolean(0.8) or not used):
        name = f"v{b.counter}"
        b.counter += 1
        extra = " + ".join(f"np.sum(np.sin(x{i}))" for i in unused)
        if b.attempt(
            "use_inputs",
            [f"{name} = {outs[0]} + {extra}"],
            [outs[0]] + [f"x{i}" for i in unused],
            name,
            None,
        ):
            outs[0] = name
    if ch.boolean(0.06):  # an empty input, which contributes nothing
        k = len(inputs)
        inputs.append(np.zeros(ch.choice([(0,), (2, 0), (0, 3)])))
        b.env[f"x{k}"] = inputs[-1]
        b.deps[f"x{k}"] = frozenset({k})
        name = f"v{b.counter}"
        if b.attempt(
            "empty_input",
            [f"{name} = {outs[0]} + np.sum(np.exp(x{k}))"],
            [outs[0], f"x{k}"],
            name,
            None,
        ):
            outs[0] = name
    return Program(
        inputs=inputs,
        lines=b.lines,
        outs=outs,
        out_shapes=[tuple(b.value(o).shape) for o in outs],
        seed=seed,
        ops=b.ops,
    )


def programs(max_ops: int = 10) -> Any:
    """A hypothesis strategy of random programs (shrinks to minimal failing ones)."""
    from hypothesis import strategies as st

    @st.composite
    def _programs(draw: Callable) -> Program:
        return generate_program(DrawChooser(draw), max_ops=max_ops)

    return _programs()


def make_program(
    lines: Sequence[str] | str, inputs: Sequence[Any], outs: Sequence[str] | None = None
) -> Program:
    """A program from hand-written lines (regression tests of minimal programs)."""
    if isinstance(lines, str):
        lines = [ln for ln in textwrap.dedent(lines).strip().splitlines() if ln.strip()]
    lines = list(lines)
    inputs = [np.array(x, dtype=float) for x in inputs]
    if outs is None:  # the last name assigned to
        names = [m.group(1) for ln in lines if (m := re.match(r"(\w+)\s*=[^=]", ln))]
        outs = [names[-1]]
    env = {f"x{i}": x for i, x in enumerate(inputs)}
    exec("\n".join(lines), dict(NAMESPACE), env)
    return Program(
        inputs=inputs,
        lines=lines,
        outs=list(outs),
        out_shapes=[tuple(np.shape(env[o])) for o in outs],
        seed=0,
        ops=["manual"],
    )


# --------------------------------------------------------------------------- checks


@dataclass
class CheckResult:
    """What :func:`check_program` found: failures, and checks skipped as unreliable."""

    failures: list[str] = field(default_factory=list)
    unreliable: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    checks: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures


def _flat(arrays: Sequence[Any]) -> np.ndarray:
    return np.concatenate(
        [np.asarray(a.data if isinstance(a, fd.Tensor) else a, dtype=float).ravel() for a in arrays]
    )


def _data(a: Any) -> np.ndarray:
    return np.asarray(a.data if isinstance(a, fd.Tensor) else a)


def _hess_matrix(h: Sequence[Sequence[Any]], sizes: Sequence[int]) -> np.ndarray:
    return np.block(
        [
            [_data(h[i][j]).reshape(sizes[i], sizes[j]) for j in range(len(sizes))]
            for i in range(len(sizes))
        ]
    )


def _split(vec: np.ndarray, shapes: Sequence[tuple], dtype: Any = float) -> list[np.ndarray]:
    out, start = [], 0
    for s in shapes:
        n = int(np.prod(s, dtype=np.int64))
        out.append(vec[start : start + n].reshape(s).astype(dtype))
        start += n
    return out


def _fd_directional(fn: Callable[[list], np.ndarray], xs: list, d: list, h: float) -> np.ndarray:
    """Fourth-order central difference of ``fn`` at ``xs`` along ``d``."""

    def at(t: float) -> np.ndarray:
        return np.asarray(fn([x + t * v for x, v in zip(xs, d)]), dtype=float)

    return (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)


def _fd_pair(fn: Callable, xs: list, d: list, h: float = 1e-3) -> tuple[np.ndarray, float]:
    """The difference quotient at step ``h``, and how much it moves at ``2h``."""
    a = _fd_directional(fn, xs, d, h)
    b = _fd_directional(fn, xs, d, 2 * h)
    return a, float(np.max(np.abs(a - b))) if a.size else 0.0


class _Checker:
    def __init__(self, prog: Program, result: CheckResult) -> None:
        self.prog = prog
        self.result = result
        self.f, self.loss, self.ws = prog.build()
        self.xs = [x.copy() for x in prog.inputs]
        self.shapes = [x.shape for x in self.xs]
        self.sizes = [x.size for x in self.xs]
        self.n = sum(self.sizes)
        self.multi = len(prog.outs) > 1
        self.out_sizes = [int(np.prod(s, dtype=np.int64)) for s in prog.out_shapes]
        self.m = sum(self.out_sizes)
        self.rng = np.random.default_rng(prog.seed + 1)
        # A single input is passed bare half of the time (the un-tupled API).
        self.bare = len(self.xs) == 1 and prog.seed % 2 == 1

    # ---- helpers
    def fail(self, what: str, msg: str) -> None:
        self.result.failures.append(f"{what}: {msg}")

    def compare(
        self, what: str, got: np.ndarray, want: np.ndarray, tol: float, fd_err: float = 0.0
    ) -> bool:
        self.result.checks += 1
        got = np.asarray(got, dtype=float)
        want = np.asarray(want, dtype=float)
        if got.shape != want.shape:
            self.fail(what, f"shape {got.shape}, expected {want.shape}")
            return False
        if got.size == 0:
            return True
        scale = max(1.0, float(np.max(np.abs(want))))
        err = np.abs(got - want)
        bound = tol * scale + 4 * fd_err
        if not np.all(np.isfinite(got)) or float(err.max()) > bound:
            k = int(np.argmax(np.where(np.isfinite(err), err, np.inf)))
            self.fail(
                what,
                f"max error {err.ravel()[k]:.3g} > {bound:.3g} at flat index {k}: "
                f"got {got.ravel()[k]!r}, expected {want.ravel()[k]!r}",
            )
            return False
        return True

    def verify(self, what: str, ad: np.ndarray, fd_at: Callable, tol: float) -> None:
        """Compare ``ad`` with finite differences ``fd_at(step)``.

        The differences at step h are trusted when they agree with those at 2h. A mismatch
        is retried at steps 1e-4 and 1e-5 before it counts: a kink or a jump within the
        stencil (1e-3 from the point, too close for the generator's margins to exclude
        after several operations) spoils the large steps only, while a wrong derivative
        stays wrong at every step.
        """
        ad = np.asarray(ad, dtype=float)
        first: tuple | None = None
        notes = []
        for step in (1e-3, 1e-4, 1e-5):
            ref, err = fd_at(step)
            scale = max(1.0, float(np.max(np.abs(ref), initial=0.0)))
            if err > 1e-4 * scale:
                notes.append(f"step {step:g}: differences moved by {err:.2g}")
                continue
            bound = tol * max(1.0, float(np.max(np.abs(ref), initial=0.0))) + 4 * err
            if ad.shape == ref.shape and np.all(np.abs(ad - ref) <= bound):
                self.result.checks += 1
                if step != 1e-3:
                    self.result.retried.append(f"{what}: agreed at step {step:g}")
                return
            if first is None:
                first = (ref, err)
        if first is None:
            self.result.unreliable.append(f"{what}: " + "; ".join(notes))
            return
        self.compare(what, ad, first[0], tol, first[1])  # records the failure

    def tensors(self, dtype: Any = np.float64, requires_grad: bool = True) -> list:
        # a fifth of the programs get Fortran-ordered inputs (rules must not assume C order)
        order = "F" if self.prog.seed % 5 == 0 else "C"
        return [
            fd.tensor(x.astype(dtype, order=order), requires_grad=requires_grad) for x in self.xs
        ]

    def arg(self, ts: Sequence) -> Any:
        return ts[0] if self.bare else tuple(ts)

    def tup(self, res: Any) -> tuple:
        return (res,) if self.bare else tuple(res)

    def outs(self, res: Any) -> tuple:
        return tuple(res) if self.multi else (res,)

    def hess_tup(self, res: Any) -> tuple:
        return ((res,),) if self.bare else tuple(tuple(r) for r in res)

    def out_flat(self, res: Any) -> np.ndarray:
        return _flat(self.outs(res))

    def jac_matrix(self, res: Any) -> np.ndarray:
        """Jacobian blocks in any of the four return structures, as an ``m x n`` matrix."""
        rows = []
        for i, row in enumerate(self.outs(res)):
            blocks = self.tup(row)
            for j, blk in enumerate(blocks):
                want = self.prog.out_shapes[i] + self.shapes[j]
                if blk.shape != want:
                    raise AssertionError(f"J[{i}][{j}] has shape {blk.shape}, expected {want}")
            rows.append(
                np.concatenate(
                    [_data(blk).reshape(self.out_sizes[i], -1) for blk in blocks], axis=1
                )
            )
        return np.concatenate(rows, axis=0)

    def gradient(self, xs: list, dtype: Any = np.float64) -> list[np.ndarray]:
        ts = [fd.tensor(np.asarray(x, dtype=dtype), requires_grad=True) for x in xs]
        out = self.loss(*ts)
        if not (isinstance(out, fd.Tensor) and out.requires_grad):
            return [np.zeros(x.shape, dtype) for x in xs]
        gs = fd.grad(out, ts, allow_unused=True, materialize_grads=True)
        return [g.data for g in gs]

    def hess(self, xs: list, **kw: Any) -> np.ndarray:
        ts = tuple(fd.tensor(x) for x in xs)
        return _hess_matrix(hessian(self.loss, ts, **kw), self.sizes)

    # ---- the checks
    def run(self, which: Sequence[str]) -> None:
        for name in which:
            try:
                getattr(self, "check_" + name)()
            except Exception as exc:  # every exception from funcdiff is a failure
                tb = traceback.extract_tb(exc.__traceback__)
                where = next(
                    (
                        f"{fr.filename.split('/')[-1]}:{fr.lineno}"
                        for fr in reversed(tb)
                        if "funcdiff" in fr.filename
                    ),
                    "?",
                )
                self.fail(name, f"raised {type(exc).__name__} ({where}): {exc}")

    def check_forward(self) -> None:
        want = self.out_flat(self.f(*self.xs))
        got = self.outs(self.f(*self.tensors()))
        self.compare("forward value", _flat(got), want, 1e-12)
        for o in got:
            if not isinstance(o, fd.Tensor):
                self.fail("forward value", f"returned {type(o).__name__}, not a Tensor")

    def check_gradient(self) -> None:
        g = _flat(self.gradient(self.xs))
        eye = np.eye(self.n)

        def fd_at(h: float) -> tuple[np.ndarray, float]:
            pairs = [
                _fd_pair(lambda xs: self.loss(*xs), self.xs, _split(eye[k], self.shapes), h)
                for k in range(self.n)
            ]
            return np.array([v for v, _ in pairs]), max((e for _, e in pairs), default=0.0)

        self.verify("gradient vs finite differences", g, fd_at, 1e-7)
        # .backward() accumulates the same gradient into .grad, twice over two passes
        ts = self.tensors()
        for k in (1, 2):
            out = self.loss(*ts)
            if isinstance(out, fd.Tensor) and out.requires_grad:
                out.backward()
            acc = [t.grad.data if t.grad is not None else np.zeros(t.shape) for t in ts]
            self.compare(f"backward() accumulation, pass {k}", _flat(acc), k * g, 1e-12)

    def check_hessian(self) -> None:
        h = self.hess(self.xs)
        self.h64 = h
        self.compare("hessian symmetry", h, h.T, 1e-9)
        for _ in range(2):
            d = _split(self.rng.standard_normal(self.n), self.shapes)
            self.verify(
                "hessian vs differences of the gradient",
                h @ _flat(d),
                lambda step, d=d: _fd_pair(lambda xs: _flat(self.gradient(xs)), self.xs, d, step),
                1e-7,
            )

    def check_hessian_modes(self) -> None:
        ref = getattr(self, "h64", None)
        if ref is None:  # the reference failed, and was reported
            return
        k = int(self.rng.integers(1, self.n + 1))
        variants = {
            "hessian vectorize=True": dict(vectorize=True),
            "hessian forward-mode outer, vectorized": dict(
                vectorize=True, outer_jacobian_strategy="forward-mode"
            ),
            "hessian forward-mode outer, loop": dict(outer_jacobian_strategy="forward-mode"),
            f"hessian vectorize=True chunk_size={k}": dict(vectorize=True, chunk_size=k),
            "hessian forward-mode outer, chunk_size=1": dict(
                vectorize=True, outer_jacobian_strategy="forward-mode", chunk_size=1
            ),
        }
        for what, kw in variants.items():
            self.compare(what, self.hess(self.xs, **kw), ref, 1e-9)
        ts = self.tensors(requires_grad=False)
        res = self.hess_tup(hessian(self.loss, self.arg(ts), vectorize=True))
        for i, row in enumerate(res):
            for j, blk in enumerate(row):
                want = self.shapes[i] + self.shapes[j]
                if blk.shape != want:
                    self.fail("hessian block shape", f"H[{i}][{j}] {blk.shape} != {want}")
                    return
        self.compare(
            "hessian (bare/tuple input structure)", _hess_matrix(res, self.sizes), ref, 1e-9
        )

    def check_jacobian(self) -> None:
        ts = self.tensors(requires_grad=False)
        ref = self.jac_matrix(jacobian(self.f, self.arg(ts)))
        self.j64 = ref
        d = _split(self.rng.standard_normal(self.n), self.shapes)
        self.verify(
            "jacobian vs finite differences",
            ref @ _flat(d),
            lambda step: _fd_pair(lambda xs: self.out_flat(self.f(*xs)), self.xs, d, step),
            1e-7,
        )
        k1 = int(self.rng.integers(1, self.m + 1))
        k2 = int(self.rng.integers(1, self.n + 1))
        variants = {
            "jacobian vectorize=True": dict(vectorize=True),
            "jacobian forward-mode, loop": dict(strategy="forward-mode"),
            "jacobian forward-mode, vectorized": dict(strategy="forward-mode", vectorize=True),
            f"jacobian vectorize=True chunk_size={k1}": dict(vectorize=True, chunk_size=k1),
            f"jacobian forward-mode chunk_size={k2}": dict(
                strategy="forward-mode", vectorize=True, chunk_size=k2
            ),
            "jacobian chunk_size=1 without vectorize": dict(chunk_size=1),
        }
        for what, kw in variants.items():
            self.compare(what, self.jac_matrix(jacobian(self.f, self.arg(ts), **kw)), ref, 1e-9)

    def check_products(self) -> None:
        if not (hasattr(self, "h64") and hasattr(self, "j64")):
            return
        ts = self.tensors(requires_grad=False)
        v = tuple(fd.tensor(w) for w in self.ws)
        out, g = vjp(self.f, self.arg(ts), v if self.multi else v[0])
        self.compare("vjp value", self.out_flat(out), self.out_flat(self.f(*self.xs)), 1e-12)
        w = np.concatenate([w.ravel() for w in self.ws])
        self.compare("vjp vs jacobian", _flat(self.tup(g)), w @ self.j64, 1e-9)
        d = _split(self.rng.standard_normal(self.n), self.shapes)
        dt = self.arg([fd.tensor(v) for v in d])
        _, jd = jvp(self.f, self.arg(ts), dt)
        self.compare("jvp vs jacobian", self.out_flat(jd), self.j64 @ _flat(d), 1e-9)
        _, hd = hvp(self.loss, self.arg(ts), dt)
        self.compare("hvp vs hessian", _flat(self.tup(hd)), self.h64 @ _flat(d), 1e-9)
        _, dh = vhp(self.loss, self.arg(ts), dt)
        self.compare("vhp vs hessian", _flat(self.tup(dh)), _flat(d) @ self.h64, 1e-9)

    def check_third_order(self) -> None:
        if not hasattr(self, "h64"):
            return
        u = self.rng.standard_normal((self.n, self.n))
        vec = bool(self.prog.seed % 3 == 0)
        ts = self.tensors()
        hc = self.hess_tup(hessian(self.loss, self.arg(ts), create_graph=True, vectorize=vec))
        offsets = np.cumsum([0, *self.sizes])
        s: Any = 0.0
        for i, row in enumerate(hc):
            for j, blk in enumerate(row):
                uij = u[offsets[i] : offsets[i + 1], offsets[j] : offsets[j + 1]]
                s = s + np.sum(blk * uij.reshape(blk.shape))
        self.compare("hessian(create_graph=True) value", _data(s), np.sum(u * self.h64), 1e-9)
        if isinstance(s, fd.Tensor) and s.requires_grad:
            t = _flat(fd.grad(s, ts, allow_unused=True, materialize_grads=True))
        else:
            t = np.zeros(self.n)
        d = _split(self.rng.standard_normal(self.n), self.shapes)
        self.verify(
            "third order vs differences of the hessian",
            t @ _flat(d),
            lambda step: _fd_pair(
                lambda xs: np.sum(u * self.hess(xs, vectorize=True)), self.xs, d, step
            ),
            1e-6,
        )

    def check_float32(self) -> None:
        x32 = [x.astype(np.float32) for x in self.xs]
        x64 = [x.astype(np.float64) for x in x32]  # the same point: rounding is excluded
        out32 = self.out_flat(self.f(*[fd.tensor(x) for x in x32]))
        out64 = self.out_flat(self.f(*x64))
        fwd_err = float(np.abs(out32 - out64).max()) / max(1.0, float(np.abs(out64).max()))
        if fwd_err > 1e-4:
            self.result.unreliable.append(f"float32: forward relative error {fwd_err:.2g}")
            return
        g32 = self.gradient(x32, np.float32)
        for i, g in enumerate(g32):
            if g.dtype != np.float32:
                self.fail("float32 gradient dtype", f"input {i} got {g.dtype}")
        self.compare("float32 gradient", _flat(g32), _flat(self.gradient(x64)), 2e-3)
        t32 = [fd.tensor(x) for x in x32]
        res = jacobian(self.f, self.arg(t32), vectorize=True)
        for row in self.outs(res):
            for j, blk in enumerate(self.tup(row)):
                if blk.dtype != np.float32:
                    self.fail("float32 jacobian dtype", f"block for input {j} got {blk.dtype}")
        j64 = self.jac_matrix(
            jacobian(self.f, self.arg([fd.tensor(x) for x in x64]), vectorize=True)
        )
        self.compare("float32 jacobian", self.jac_matrix(res), j64, 2e-3)
        h32 = _hess_matrix(hessian(self.loss, tuple(t32), vectorize=True), self.sizes)
        self.compare("float32 hessian", h32, self.hess(x64, vectorize=True), 1e-2)


ALL_CHECKS = (
    "forward",
    "gradient",
    "hessian",
    "hessian_modes",
    "jacobian",
    "products",
    "third_order",
    "float32",
)


def check_program(prog: Program, which: Sequence[str] = ALL_CHECKS) -> CheckResult:
    """Run the checks ``which`` on ``prog``; never raises (exceptions become failures)."""
    result = CheckResult()
    checker = _Checker(prog, result)
    needed = list(which)
    # later checks reuse the reference gradient, Hessian and Jacobian
    for dep, users in (
        ("hessian", ("hessian_modes", "products", "third_order")),
        ("jacobian", ("products",)),
    ):
        if any(u in needed for u in users) and dep not in needed:
            needed.insert(0, dep)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        checker.run([c for c in ALL_CHECKS if c in needed])
    return result


def report(prog: Program, result: CheckResult) -> str:
    lines = [repr(prog), "failures:"] + ["  " + f for f in result.failures]
    return "\n".join(lines)


# --------------------------------------------------------------------------- long budget


def _run_one(seed: int) -> tuple[int, bool, int, str, int, int]:
    try:
        prog = generate_program(RandomChooser(seed))
    except Exception:  # a bug of the generator: counted as a failure, never lost
        return seed, False, 0, "generator raised:\n" + traceback.format_exc(), 0, 0
    result = check_program(prog)
    text = report(prog, result) if result.failures else ""
    return seed, result.ok, len(result.unreliable), text, result.checks, len(result.retried)


def run_budget(n: int, seed: int = 0, jobs: int = 1, log: Any = None) -> dict:
    """Generate and check ``n`` programs (seeds ``seed .. seed + n - 1``)."""
    seeds = range(seed, seed + n)
    failed: list[tuple[int, str]] = []
    unreliable = 0
    comparisons = 0
    retried = 0
    t0 = time.perf_counter()
    pool = multiprocessing.Pool(jobs) if jobs > 1 else None
    try:
        it = pool.imap_unordered(_run_one, seeds, chunksize=8) if pool else map(_run_one, seeds)
        for done, (s, ok, unrel, text, checks, retry) in enumerate(it, 1):
            unreliable += unrel > 0
            retried += retry > 0
            comparisons += checks
            if not ok:
                failed.append((s, text))
                if log is not None:
                    print(f"--- program seed {s} FAILED\n{text}", file=log, flush=True)
            if log is not None and done % 500 == 0:
                print(
                    f"[{time.perf_counter() - t0:.0f}s] {done} ran, {len(failed)} failed",
                    file=log,
                    flush=True,
                )
    finally:
        if pool is not None:
            pool.terminate()  # nothing is left to run, or the run is being abandoned
            pool.join()
    return {
        "ran": n,
        "failed": len(failed),
        "with_unreliable_checks": unreliable,
        "comparisons": comparisons,
        "with_retried_steps": retried,
        "seconds": time.perf_counter() - t0,
        "failures": failed,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--show", type=int, default=5, help="failing programs to print")
    args = parser.parse_args(argv)
    summary = run_budget(args.programs, args.seed, args.jobs, log=sys.stderr)
    for s, text in summary["failures"][: args.show]:
        print(f"--- seed {s}\n{text}\n")
    print(
        f"programs: {summary['ran']} ran, {summary['failed']} failed "
        f"({summary['with_unreliable_checks']} with a check skipped as ill-conditioned, "
        f"{summary['with_retried_steps']} with a kink near the point checked at a smaller "
        f"step; {summary['comparisons']} comparisons) in {summary['seconds']:.0f} s"
    )
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
