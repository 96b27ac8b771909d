"""Prepared sparse derivatives: detect and colour once, evaluate at every new point.

An evaluation runs the function once on Tensors (recording its graph, as every funcdiff
derivative does), checks that it took the branches of the run the pattern was detected
on, pushes one tangent per colour through the graph in a single batched pass (or pulls
one cotangent per colour back), and scatters the compressed result into a
``scipy.sparse.csr_array`` whose structure is the pattern's, the same at every call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from funcdiff._core import grad_mode, tracing
from funcdiff._core.backends import is_foreign, type_name
from funcdiff._core.exits import refuse_recorded_arguments
from funcdiff._core.tensor import Tensor, tensor
from funcdiff._functional_args import check_callable, check_choice, check_positive_int
from funcdiff._jacobian import push_tangents
from funcdiff.autograd.engine import grad
from funcdiff.replay import jit
from funcdiff.replay.program import GuardFailure, Program, build, recording
from funcdiff.sparse._coloring import Coloring, color_hessian, color_jacobian
from funcdiff.sparse._decompress import Decompressor
from funcdiff.sparse._detect import GuardRecorder, run_traced, same_outcome

__all__ = ["SparseJacobian", "SparseHessian", "SparsityGuardError", "SparsityError"]


class SparsityGuardError(RuntimeError):
    """A prepared derivative was called at a point where the function branches
    differently from the point its pattern was detected at."""


class SparsityError(RuntimeError):
    """A sparse derivative disagrees with a direct product: the pattern misses entries
    (a user-given pattern that is too small, or control flow funcdiff cannot see)."""


def as_point(x: Any, name: str = "x", copy: bool = True) -> np.ndarray:
    """``x`` as a float array (a copy unless ``copy`` is False), or a clear error."""
    if isinstance(x, Tensor):
        x = x.detach().data
    if np.iscomplexobj(x):
        raise TypeError(
            f"{name} must be real: funcdiff.sparse builds real sparse matrices; pass the real "
            "and imaginary parts of a complex vector as one real vector (np.concatenate([z.real, "
            "z.imag])) and rebuild z inside the function"
        )
    try:
        arr = np.array(x, dtype=float, copy=True if copy else None)
    except (TypeError, ValueError) as exc:
        got = type_name(x) if is_foreign(x) else type(x).__name__  # a device array: its module
        raise TypeError(f"{name} must be an array of real numbers, got {got}") from exc
    if arr.dtype.kind != "f":
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    return arr


def checked_pattern(sparsity: Any, shape: tuple[int, int]) -> sp.csr_array:
    """A user-given pattern as a canonical boolean CSR array of ``shape``."""
    if isinstance(sparsity, (bool, str)) or sparsity is None:
        raise TypeError(
            "sparsity must be None (detect) or a pattern: a scipy.sparse matrix or a 2-D "
            f"boolean array_like, got {sparsity!r}"
        )
    if sp.issparse(sparsity):
        m = sp.csr_array(sparsity)
    else:
        dense = np.asarray(sparsity)
        if dense.ndim != 2:
            raise ValueError(
                f"sparsity must be 2-D with shape {shape}, got an array of shape {dense.shape}"
            )
        m = sp.csr_array(dense)
    if m.shape != shape:
        raise ValueError(f"sparsity must have shape {shape}, got {m.shape}")
    m = sp.csr_array(m != 0, dtype=bool)
    m.sum_duplicates()
    m.sort_indices()
    return m


def _output(value: Any, what: str) -> Tensor:
    if isinstance(value, Tensor):
        if value.data.dtype.kind == "c":
            raise TypeError(
                f"{what} needs a real output, got {value.data.dtype}: return the real and "
                "imaginary parts as one real array (np.concatenate([y.real, y.imag]))"
            )
        return value
    if isinstance(value, (np.ndarray, np.generic, float, int)):
        return tensor(np.asarray(value, dtype=float))  # independent of x
    raise TypeError(
        f"the function must return an array (a Tensor), got {type(value).__name__}; "
        f"{what} needs one array output"
    )


def _snapshot(args: tuple) -> tuple:
    """The further arguments as they were at detection (arrays copied)."""
    return tuple(
        np.array(a.data if isinstance(a, Tensor) else a, copy=True)
        if isinstance(a, (np.ndarray, Tensor))
        else a
        for a in args
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Tensor):
        a = a.data
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    try:
        return a is b or bool(a == b)
    except Exception:  # an object without a usable ==: only itself is the same
        return False


class _Entry:
    """One detected path: its branch outcomes, further arguments, pattern, colouring.

    A pattern holds for the further arguments it was detected with (an index array or
    a constant matrix passed as an argument shapes it), so an evaluation with others
    detects again, like one that branches differently.
    """

    __slots__ = ("guards", "args", "pattern", "coloring", "verified", "_decompressor")

    def __init__(
        self, guards: list | None, args: tuple, pattern: sp.csr_array, coloring: Coloring
    ) -> None:
        self.guards = guards
        self.args = _snapshot(args)
        self.pattern = pattern
        self.coloring = coloring
        self.verified = False
        self._decompressor: Decompressor | None = None

    @property
    def decompressor(self) -> Decompressor:
        """The decompression, prepared once per pattern at its first use."""
        if self._decompressor is None:
            self._decompressor = Decompressor(self.coloring, self.pattern)
        return self._decompressor

    def decompress(self, compressed: np.ndarray) -> sp.csr_array:
        """The matrix from its compressed products."""
        return self.decompressor(compressed)

    def matches(self, outcomes: list, args: tuple) -> bool:
        if self.guards is None:
            return True  # a user-given pattern: trusted on every path
        if len(args) != len(self.args) or not all(map(_same, args, self.args)):
            return False
        if len(outcomes) != len(self.guards):
            return False
        for seen, (expected, tainted) in zip(outcomes, self.guards):
            if seen[0] != expected[0] or (tainted and not same_outcome(seen, expected)):
                return False
        return True


class _Prepared:
    """What SparseJacobian and SparseHessian share: the point cache and guards."""

    _what = "prepare"

    def __init__(
        self,
        f: Callable[..., Any],
        x: Any,
        sparsity: Any,
        args: Sequence[Any],
        on_guard_failure: str,
        max_patterns: int,
        replay: bool = False,
        compile: bool | str = "auto",
    ) -> None:
        check_callable(f, "f")
        check_choice(on_guard_failure, "on_guard_failure", ("redetect", "raise"))
        check_positive_int(max_patterns, "max_patterns")
        refuse_recorded_arguments("funcdiff.sparse", [("x", x), ("args", tuple(args))], f)
        self.f = f
        self.replay = bool(replay)
        self.compile = jit.resolve(compile) if self.replay else jit.check_compile(compile)
        self._programs: dict[int, Program | None] = {}
        self.args = tuple(args)
        self.on_guard_failure = on_guard_failure
        self.max_patterns = max_patterns
        x = as_point(x)
        self.x_shape = x.shape
        self.info: dict[str, Any] = {"redetections": 0, "dense_ops": []}
        self._entries: list[_Entry] = []
        self._given = None
        if sparsity is not None:
            out = self._record(x, self.args)[1]
            self._given = checked_pattern(sparsity, self._shape(out))
            self._entries.append(self._colour(self._given, None, self.args))
        else:
            self._entries.append(self._detect(x, self.args))
        self._entry = self._entries[0]

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the replay programs: they hold compiled code and are keyed by
        this process's object ids. A loaded copy keeps the detected patterns and their
        colourings, and records its programs again (``replay=True``)."""
        state = self.__dict__.copy()
        state["_programs"] = {}
        return state

    # -- subclasses: the shape, the detection, the colouring and the compressed pass
    def _shape(self, out: Tensor) -> tuple[int, int]:
        raise NotImplementedError

    def _detect(self, x: np.ndarray, args: tuple) -> _Entry:
        raise NotImplementedError

    def _colour(self, pattern: sp.csr_array, guards: list | None, args: tuple) -> _Entry:
        raise NotImplementedError

    # -- shared
    @property
    def sparsity(self) -> sp.csr_array:
        """The boolean pattern the last evaluation used."""
        return self._entry.pattern

    @property
    def colors(self) -> np.ndarray:
        """The colour of each column (forward, star) or row (reverse); ``-1`` for one
        with no entry."""
        return self._entry.coloring.colors

    @property
    def ncolors(self) -> int:
        """How many tangents (or cotangents) one evaluation pushes through the graph."""
        return self._entry.coloring.ncolors

    @property
    def mode(self) -> str:
        """``"forward"`` (column colouring), ``"reverse"`` (row colouring), ``"star"``
        (a symmetric colouring of a Hessian) or ``"dense"`` (no compression)."""
        return _MODE_NAMES[self._entry.coloring.kind]

    @property
    def shape(self) -> tuple[int, int]:
        """The shape of the matrix an evaluation returns."""
        return self._entry.pattern.shape

    def _point(self, x: Any, args: tuple) -> tuple[np.ndarray, tuple]:
        refuse_recorded_arguments("funcdiff.sparse", [("x", x), ("args", args)])
        # Not copied: a replayed program never writes its inputs, and a Tensor made of
        # x for an evaluation copies it.
        x = as_point(x, copy=False)
        if x.shape != self.x_shape:
            raise ValueError(
                f"x must have the shape the derivative was prepared for, {self.x_shape}, "
                f"got {x.shape}; prepare again for a new shape"
            )
        return x, (args if args else self.args)

    def _record(self, x: np.ndarray, args: tuple) -> tuple[Tensor, Tensor, list]:
        recorder = GuardRecorder()
        xt = tensor(x, requires_grad=True)
        with grad_mode.enable_grad(), tracing.installed(observer=recorder):
            out = _output(self.f(xt, *args), f"funcdiff.sparse.{self._what}")
        return xt, out, recorder.outcomes()

    # -- replay: the run of f and the compressed pass as one recorded program per entry
    def _replayed(self, x: np.ndarray, args: tuple) -> tuple | None:
        """``(value, matrix)`` by replaying the current entry's program, or None (no
        program yet, other arguments, or a branch the program does not cover).

        The program computes the stored entries' values itself (the gather from the
        compressed products is its last instruction, fused into a compiled kernel), so
        the matrix is assembled around them without a further pass."""
        entry = self._entry
        program = self._programs.get(id(entry))
        if program is None or not (
            len(args) == len(entry.args) and all(map(_same, args, entry.args))
        ):
            return None
        try:
            value, data = program.run([x])
            return value, entry.decompressor.assemble(data)
        except GuardFailure:
            self._programs[id(entry)] = None
            return None

    def _record_program(
        self, entry: _Entry, x: np.ndarray, args: tuple, expected: np.ndarray
    ) -> None:
        """Record ``entry``'s program (once, from its second evaluation), and keep it only
        if it reproduces the eager compressed result at this point. ``entry`` is the one
        the caller evaluated, not ``self._entry``, which a call on another path in another
        thread may have changed since."""
        if not self.replay or id(entry) in self._programs or not entry.verified:
            return
        if tracing.is_watched():
            return  # called inside another trace: evaluate eagerly, record nothing
        with recording() as tracer:
            xt = tensor(x, requires_grad=True)
            tracer.input(xt)
            out = _output(self.f(xt, *args), f"funcdiff.sparse.{self._what}")
            compressed = self._compressed_tensors(xt, out, entry.coloring)
            if compressed is not None:
                gather = entry.decompressor.gather
                data = cast(Tensor, np.take(np.reshape(compressed, (-1,)), gather))
        if compressed is None:
            self._programs[id(entry)] = None
            return
        structure = (tracer.slot_of(out), tracer.slot_of(data))
        program = build(tracer, structure, self.compile)
        expected = expected.ravel().take(gather)
        try:
            _, replayed = program.run([x])
        except GuardFailure:
            replayed = None
        same = replayed is not None and np.allclose(
            replayed, expected, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(expected).max(initial=0))
        )
        self._programs[id(entry)] = program if same else None

    def _compressed_tensors(self, xt: Tensor, out: Tensor, coloring: Coloring) -> Any:
        raise NotImplementedError

    def _entry_for(self, x: np.ndarray, args: tuple, outcomes: list) -> _Entry:
        for entry in self._entries:
            if entry.matches(outcomes, args):
                return entry
        if self.on_guard_failure == "raise":
            raise SparsityGuardError(
                "the function takes other branches at this x than at the point its sparsity "
                "was detected (an if or while on a value computed from x, an item() or "
                "tolist() of one, came out differently), or was given other further "
                "arguments, so the detected pattern may not hold here. Use "
                "on_guard_failure='redetect' to detect the pattern of this path."
            )
        entry = self._detect(x, args)
        self.info["redetections"] += 1
        if len(self._entries) >= self.max_patterns:
            self._entries.pop(1 if len(self._entries) > 1 else 0)
        self._entries.append(entry)
        return entry


_MODE_NAMES = {"column": "forward", "row": "reverse", "star": "star", "dense": "dense"}


class SparseJacobian(_Prepared):
    """A sparse Jacobian prepared for repeated evaluation (see :func:`prepare_jacobian`)."""

    _what = "prepare_jacobian"

    def __init__(
        self,
        f,
        x,
        sparsity=None,
        *,
        mode="auto",
        args=(),
        on_guard_failure="redetect",
        max_patterns=8,
        replay=False,
        compile="auto",
    ) -> None:
        check_choice(mode, "mode", ("auto", "forward", "reverse"))
        self._mode_asked = mode
        super().__init__(f, x, sparsity, args, on_guard_failure, max_patterns, replay, compile)

    def _shape(self, out: Tensor) -> tuple[int, int]:
        return (int(out.data.size), int(np.prod(self.x_shape)))

    def _detect(self, x: np.ndarray, args: tuple) -> _Entry:
        start = time.perf_counter()
        xt = tensor(x, requires_grad=True)
        out, tracer = run_traced(self.f, (xt,), args, hessian=False)
        out = _output(out, "funcdiff.sparse.prepare_jacobian")
        n = int(xt.data.size)
        p = tracer.pattern_of(out)
        if p is None:
            pattern = sp.csr_array((int(out.data.size), n), dtype=bool)
        else:
            pattern = p.rows()
            pattern.sort_indices()
        self.info["detection_seconds"] = time.perf_counter() - start
        self.info["dense_ops"] = sorted(set(tracer.fallbacks))
        return self._colour(pattern, tracer.guards(), args)

    def _colour(self, pattern: sp.csr_array, guards: list | None, args: tuple) -> _Entry:
        start = time.perf_counter()
        coloring = color_jacobian(pattern, mode=self._mode_asked)
        self.info["coloring_seconds"] = time.perf_counter() - start
        return _Entry(guards, args, pattern, coloring)

    def value_and_jacobian(self, x: Any, *args: Any) -> tuple[np.ndarray, sp.csr_array]:
        """``(f(x), J(x))`` from one run of ``f``."""
        x, args = self._point(x, args)
        replayed = self._replayed(x, args) if self.replay else None
        if replayed is not None:
            return replayed
        xt, out, outcomes = self._record(x, args)
        entry = self._entry_for(x, args, outcomes)
        self._entry = entry
        shape = (int(out.data.size), int(xt.data.size))
        if entry.pattern.shape != shape:
            raise ValueError(
                f"the function's output has {shape[0]} elements here, "
                f"{entry.pattern.shape[0]} where the derivative was prepared"
            )
        compressed = _compressed_jacobian(xt, out, entry.coloring)
        jac = entry.decompress(compressed)
        if not entry.verified:
            _probe(xt, out, jac)
            entry.verified = True
        elif self.replay:
            self._record_program(entry, x, args, compressed)
        return np.array(out.data, copy=True), jac

    def _compressed_tensors(self, xt: Tensor, out: Tensor, coloring: Coloring) -> Any:
        """The compressed pass on Tensors (recorded, for replay)."""
        m, n, k = int(out.data.size), int(xt.data.size), coloring.ncolors
        if k == 0 or not out.requires_grad:
            return None
        if coloring.kind == "row":
            seeds = tensor(coloring.seeds(m).reshape((k,) + out.data.shape))
            (g,) = grad([out], [xt], [seeds], is_grads_batched=True, create_graph=True)
            return np.reshape(cast(Tensor, g), (k, n))  # not allow_unused: never None
        seeds = tensor(coloring.seeds(n).reshape((k,) + xt.data.shape))
        (t,) = push_tangents((out,), (xt,), (seeds,), create_graph=True, batched=True)
        return None if t is None else np.reshape(t, (k, m))

    def __call__(self, x: Any, *args: Any) -> sp.csr_array:
        """The Jacobian at ``x`` as a ``(f(x).size, x.size)`` float ``csr_array``."""
        return self.value_and_jacobian(x, *args)[1]

    def __repr__(self) -> str:
        m, n = self.shape
        return (
            f"SparseJacobian(shape=({m}, {n}), nnz={self.sparsity.nnz}, "
            f"mode={self.mode!r}, ncolors={self.ncolors})"
        )


def _compressed_jacobian(xt: Tensor, out: Tensor, coloring: Coloring) -> np.ndarray:
    m, n = int(out.data.size), int(xt.data.size)
    k = coloring.ncolors
    if coloring.kind == "row":
        if k == 0 or not out.requires_grad:
            return np.zeros((k, n))
        seeds = coloring.seeds(m).reshape((k,) + out.data.shape)
        (g,) = grad(
            [out], [xt], [seeds], allow_unused=True, is_grads_batched=True, retain_graph=True
        )
        return np.zeros((k, n)) if g is None else np.reshape(g.data, (k, n))
    if k == 0 or not out.requires_grad:
        return np.zeros((k, m))
    seeds = coloring.seeds(n).reshape((k,) + xt.data.shape)
    (t,) = push_tangents((out,), (xt,), (seeds,), create_graph=False, batched=True)
    return np.zeros((k, m)) if t is None else np.reshape(t.data, (k, m))


def _probe(xt: Tensor, out: Tensor, jac: sp.csr_array) -> None:
    """Compare ``J @ w`` with one directional derivative through the same graph."""
    if not out.requires_grad or jac.shape[1] == 0:
        return
    rng = np.random.default_rng(0)
    w = rng.standard_normal(xt.data.shape)
    (t,) = push_tangents((out,), (xt,), (w,), create_graph=False)
    direct = np.zeros(out.data.size) if t is None else np.ravel(t.data)
    via = jac @ w.ravel()
    scale = np.abs(jac).multiply(np.abs(w.ravel())).sum(axis=1) + np.abs(direct)
    # Round-off where terms cancel (x / x) or where an exact zero is the sum of large
    # terms (an FFT mixes every element into every row): floors at the scale of the
    # largest row and of the function's values over its inputs'; a missed entry errs by
    # the size of a Jacobian entry.
    floor = 1e-13 * float(np.max(scale, initial=0.0)) + (
        1e-12
        * float(np.max(np.abs(out.data), initial=0.0))
        / (1.0 + float(np.max(np.abs(xt.data), initial=0.0)))
    )
    bad = np.abs(via - direct) > 1e-8 * scale + floor + 1e-300
    bad &= np.isfinite(direct)
    if np.any(bad):
        rows = np.flatnonzero(bad)[:5].tolist()
        raise SparsityError(
            f"the sparse Jacobian misses entries in rows {rows}: J @ w differs from the "
            "directional derivative there. A given sparsity pattern is too small, or the "
            "function branches on values funcdiff cannot see (Tensor.data, NumPy on "
            "detached data)."
        )


class SparseHessian(_Prepared):
    """A sparse Hessian prepared for repeated evaluation (see :func:`prepare_hessian`)."""

    _what = "prepare_hessian"

    def __init__(
        self,
        f,
        x,
        sparsity=None,
        *,
        coloring="star",
        args=(),
        on_guard_failure="redetect",
        max_patterns=8,
        replay=False,
        compile="auto",
    ) -> None:
        check_choice(coloring, "coloring", ("star", "column"))
        self._method = coloring
        super().__init__(f, x, sparsity, args, on_guard_failure, max_patterns, replay, compile)

    def _shape(self, out: Tensor) -> tuple[int, int]:
        n = int(np.prod(self.x_shape))
        _scalar(out)
        return (n, n)

    def _detect(self, x: np.ndarray, args: tuple) -> _Entry:
        start = time.perf_counter()
        xt = tensor(x, requires_grad=True)
        out, tracer = run_traced(self.f, (xt,), args, hessian=True)
        _scalar(_output(out, "funcdiff.sparse.prepare_hessian"))
        assert tracer.acc is not None  # traced with hessian=True
        pattern = tracer.acc.pattern()
        self.info["detection_seconds"] = time.perf_counter() - start
        self.info["dense_ops"] = sorted(set(tracer.fallbacks))
        return self._colour(pattern, tracer.guards(), args)

    def _colour(self, pattern: sp.csr_array, guards: list | None, args: tuple) -> _Entry:
        start = time.perf_counter()
        if guards is None:
            pattern = sp.csr_array((pattern + pattern.T).astype(bool))
            pattern.sort_indices()
        coloring = color_hessian(pattern, method=self._method)
        self.info["coloring_seconds"] = time.perf_counter() - start
        return _Entry(guards, args, pattern, coloring)

    def _gradient(self, x: np.ndarray, args: tuple) -> tuple[Tensor, Tensor, Any, _Entry]:
        xt, out, outcomes = self._record(x, args)
        _scalar(out)
        entry = self._entry_for(x, args, outcomes)
        self._entry = entry
        g = None
        if out.requires_grad:
            (g,) = grad([out], [xt], create_graph=True, allow_unused=True)
        return xt, out, g, entry

    def __call__(self, x: Any, *args: Any) -> sp.csr_array:
        """The Hessian at ``x`` as an ``(x.size, x.size)`` float ``csr_array``."""
        x, args = self._point(x, args)
        replayed = self._replayed(x, args) if self.replay else None
        if replayed is not None:
            return replayed[1]
        xt, out, g, entry = self._gradient(x, args)
        n = int(xt.data.size)
        k = entry.coloring.ncolors
        compressed = np.zeros((k, n))
        if g is not None and g.requires_grad and k:
            seeds = entry.coloring.seeds(n).reshape((k,) + xt.data.shape)
            (t,) = push_tangents((g,), (xt,), (seeds,), create_graph=False, batched=True)
            if t is not None:
                compressed = np.reshape(t.data, (k, n))
        if self.replay and entry.verified:
            self._record_program(entry, x, args, compressed)
        entry.verified = True
        return entry.decompress(compressed)

    def _compressed_tensors(self, xt: Tensor, out: Tensor, coloring: Coloring) -> Any:
        """Hessian-vector products of every colour, on Tensors (recorded, for replay)."""
        n, k = int(xt.data.size), coloring.ncolors
        if k == 0 or not out.requires_grad:
            return None
        (g,) = grad([out], [xt], create_graph=True, allow_unused=True)
        if g is None or not g.requires_grad:
            return None
        seeds = tensor(coloring.seeds(n).reshape((k,) + xt.data.shape))
        (t,) = push_tangents((g,), (xt,), (seeds,), create_graph=True, batched=True)
        return None if t is None else np.reshape(t, (k, n))

    def hessp(self, x: Any, p: Any, *args: Any) -> np.ndarray:
        """The Hessian-vector product ``H(x) @ p`` (one forward pass through the
        recorded gradient), shaped like ``x``."""
        x, args = self._point(x, args)
        p = as_point(p, "p")
        if p.size != x.size:
            raise ValueError(f"p must have {x.size} elements like x, got shape {p.shape}")
        xt, out, g, _ = self._gradient(x, args)
        if g is None or not g.requires_grad:
            return np.zeros(x.shape)
        (t,) = push_tangents((g,), (xt,), (p.reshape(x.shape),), create_graph=False)
        return np.zeros(x.shape) if t is None else np.array(t.data, copy=True).reshape(x.shape)

    def __repr__(self) -> str:
        n = self.shape[0]
        return (
            f"SparseHessian(shape=({n}, {n}), nnz={self.sparsity.nnz}, "
            f"coloring={self.mode!r}, ncolors={self.ncolors})"
        )


def _scalar(out: Tensor) -> None:
    if out.data.size != 1:
        raise ValueError(
            "a Hessian needs a function with one output element, got an output of shape "
            f"{out.data.shape}"
        )
