"""The cells of ``python -m benchmarks.sparse``: one builder per library.

A builder takes a :class:`~benchmarks.sparse_problems.SparseProblem` and returns its
:class:`Cell` list. A library's one-time work (sparsity detection, colouring, graph
building, compilation) is a ``prepare`` cell; the derivative at a new point is a
``call`` cell whose result is a SciPy sparse matrix (or a dense array for the dense
columns) and is checked against the analytic reference before it is timed. The
builder runs the preparation once itself (the "cold" run, kept in the results file),
and the call cells use what it produced. A library that is not installed yields
skipped cells with the reason.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import scipy.sparse as sp

from benchmarks import sparse_problems as SP

CALL_COLUMNS = (
    "funcdiff dense",
    "jax.jit dense",
    "scipy FD",
    "asdex",
    "casadi",
    "funcdiff sparse",
    "funcdiff compiled",
    "funcdiff one-shot",
)
PREPARE_COLUMNS = ("scipy colouring", "asdex prepare", "casadi build", "funcdiff prepare")
LIBRARIES = ("funcdiff", "jax", "asdex", "casadi", "scipy")


@dataclass
class Cell:
    """One timed callable: ``kind`` is ``"call"`` or ``"prepare"``.

    ``fn=None`` makes a skipped cell with ``note`` as the reason. ``exact=False`` (finite
    differences) checks the answer with ``loose_rtol`` normwise instead of elementwise
    and reports its errors. ``info`` goes into the results row (colours, mode, the
    cold preparation time, the symbol type); ``info["table"] = False`` keeps a setting
    out of the table.
    """

    column: str
    setting: str
    kind: str
    fn: Callable[[], Any] | None
    note: str = ""
    exact: bool = True
    loose_rtol: float = 1e-5
    info: dict[str, Any] = field(default_factory=dict)
    #: Turns the result into a matrix for the check only (outside the timed call).
    check_as: Callable[[Any], Any] | None = None


def skipped(columns: tuple[str, ...], kind: str, note: str) -> list[Cell]:
    return [Cell(c, "-", kind, None, note=note) for c in columns]


def _cold(prepare: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = prepare()
    return out, time.perf_counter() - t0


# ----------------------------------------------------------------------------- loading
class Libraries:
    """The optional peers, imported once; ``notes`` says why a library is missing."""

    def __init__(self, wanted: set[str]) -> None:
        self.versions: dict[str, str] = {}
        self.notes: dict[str, str] = {}
        self.fd: Any = None
        self.functional: Any = None
        self.sparse: Any = None
        self.jax: Any = None
        self.jnp: Any = None
        self.asdex: Any = None
        self.casadi: Any = None
        self._load(wanted)

    def _try(self, name: str) -> Any:
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            self.notes[name] = f"not installed ({exc.name or exc})"
        except Exception as exc:  # noqa: BLE001  (a broken install is a note, not a crash)
            self.notes[name] = f"failed to load: {type(exc).__name__}: {exc}"
        return None

    def _load(self, wanted: set[str]) -> None:
        import scipy

        self.versions["scipy"] = scipy.__version__
        self.fd = importlib.import_module("funcdiff")
        self.versions["funcdiff"] = getattr(self.fd, "__version__", "?")
        if "funcdiff" in wanted:
            self.functional = self._try("funcdiff.functional")
            # An editable install elsewhere can serve funcdiff.sparse from another
            # checkout than the funcdiff imported here: only this checkout's counts.
            here = Path(self.fd.__file__).resolve().parent
            if (here / "sparse" / "__init__.py").exists():
                sparse = self._try("funcdiff.sparse")
            else:
                sparse = None
                self.notes["funcdiff.sparse"] = f"not in this funcdiff checkout ({here})"
            needed = ("prepare_jacobian", "prepare_hessian", "jacobian", "hessian")
            if sparse is not None and not all(hasattr(sparse, n) for n in needed):
                missing = [n for n in needed if not hasattr(sparse, n)]
                self.notes["funcdiff.sparse"] = f"lacks {', '.join(missing)}"
                sparse = None
            self.sparse = sparse
        if {"jax", "asdex"} & wanted:
            self.jax = self._try("jax")
            if self.jax is not None:
                self.jax.config.update("jax_enable_x64", True)
                self.jax.config.update("jax_platforms", "cpu")
                self.jnp = importlib.import_module("jax.numpy")
                self.versions["jax"] = self.jax.__version__
                if "asdex" in wanted:
                    self.asdex = self._try("asdex")
                    if self.asdex is not None:
                        self.versions["asdex"] = _dist_version("asdex")
            elif "asdex" in wanted:
                self.notes["asdex"] = "needs jax, which is not installed"
        if "casadi" in wanted:
            self.casadi = self._try("casadi")
            if self.casadi is not None:
                self.versions["casadi"] = self.casadi.__version__


def _dist_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


# ----------------------------------------------------------------------------- funcdiff
def funcdiff_cells(p: SP.SparseProblem, libs: Libraries) -> list[Cell]:
    cells: list[Cell] = []
    f, x, x0 = p.f, p.x, p.x0
    F = libs.functional
    if p.dense:
        if F is None:
            cells += skipped(("funcdiff dense",), "call", libs.notes.get("funcdiff.functional", ""))
        elif p.kind == "jacobian":
            xt = libs.fd.tensor(x)
            cells.append(
                Cell(
                    "funcdiff dense",
                    "functional.jacobian(vectorize=True, strategy='forward-mode')",
                    "call",
                    lambda: F.jacobian(f, xt, vectorize=True, strategy="forward-mode"),
                )
            )
        else:
            xt = libs.fd.tensor(x)
            for outer in ("reverse-mode", "forward-mode"):
                cells.append(
                    Cell(
                        "funcdiff dense",
                        f"functional.hessian(vectorize=True, outer_jacobian_strategy='{outer}')",
                        "call",
                        lambda outer=outer: F.hessian(
                            f, xt, vectorize=True, outer_jacobian_strategy=outer
                        ),
                    )
                )
    fs = libs.sparse
    columns = ("funcdiff sparse", "funcdiff one-shot")
    if fs is None:
        note = libs.notes.get("funcdiff.sparse", "funcdiff.sparse is not available")
        return (
            cells + skipped(columns, "call", note) + skipped(("funcdiff prepare",), "prepare", note)
        )
    if p.kind == "jacobian":
        prepare, oneshot, what = fs.prepare_jacobian, fs.jacobian, "jacobian"
    else:
        prepare, oneshot, what = fs.prepare_hessian, fs.hessian, "hessian"
    try:
        prepared, cold = _cold(lambda: prepare(f, x0))
    except Exception as exc:  # noqa: BLE001  (the cells say what went wrong)
        fail = _raiser(f"prepare_{what} raised {type(exc).__name__}: {exc}"[:300])
        return cells + [
            Cell("funcdiff prepare", f"prepare_{what}(f, x0)", "prepare", fail),
            Cell("funcdiff sparse", f"prepare_{what}(f, x0)(x)", "call", fail),
            Cell(
                "funcdiff one-shot", f"funcdiff.sparse.{what}(f, x)", "call", lambda: oneshot(f, x)
            ),
        ]
    info = {
        "ncolors": getattr(prepared, "ncolors", None),
        "mode": str(getattr(prepared, "mode", "")) or None,
        "cold_prepare_s": cold,
        "prepared_info": dict(getattr(prepared, "info", {})),
    }

    def prepare_and_first_call() -> Any:
        # The first call at a new pattern also checks J @ w against one directional
        # derivative; asdex's prepare cell includes its first call too.
        out = prepare(f, x0)
        out(x0)
        return out

    cells += [
        Cell(
            "funcdiff prepare",
            f"prepare_{what}(f, x0)",
            "prepare",
            lambda: prepare(f, x0),
            info=info,
        ),
        Cell(
            "funcdiff prepare",
            f"prepare_{what}(f, x0) + first call (not in the table)",
            "prepare",
            prepare_and_first_call,
            info={**info, "table": False},
        ),
        Cell(
            "funcdiff sparse", f"prepare_{what}(f, x0)(x)", "call", lambda: prepared(x), info=info
        ),
        Cell("funcdiff one-shot", f"funcdiff.sparse.{what}(f, x)", "call", lambda: oneshot(f, x)),
    ]
    try:
        replayed = prepare(f, x0, replay=True, compile=False)
        for _ in range(4):  # record the program, then compile it (see funcdiff.replay)
            replayed(x)
    except TypeError:  # a funcdiff without replay= or compile=
        return cells
    cells.append(
        Cell(
            "funcdiff sparse",
            f"prepare_{what}(f, x0, replay=True, compile=False)(x)",
            "call",
            lambda: replayed(x),
            info=info,
        )
    )
    from funcdiff.replay import jit

    if not jit.available():
        return cells + skipped(("funcdiff compiled",), "call", "the funcdiff[jit] extra is missing")
    start = time.perf_counter()
    compiled = prepare(f, x0, replay=True, compile=True)
    for _ in range(2):  # the second call records and compiles the program
        compiled(x)
    first = time.perf_counter() - start
    programs = [q for q in compiled._programs.values() if q is not None]
    jit_info = programs[0].info["jit"] if programs else None
    cells.append(
        Cell(
            "funcdiff compiled",
            f"prepare_{what}(f, x0, replay=True, compile=True)(x)",
            "call",
            lambda: compiled(x),
            info={**info, "compile_first_calls_s": first, "jit": jit_info},
        )
    )
    return cells


def _raiser(message: str) -> Callable[[], Any]:
    def fn() -> Any:
        raise RuntimeError(message)

    return fn


# ----------------------------------------------------------------------------- jax, asdex
def _jax_namespace(libs: Libraries) -> Any:
    jnp = libs.jnp
    return SimpleNamespace(roll=jnp.roll, concatenate=jnp.concatenate, sum=jnp.sum)


def jax_cells(p: SP.SparseProblem, libs: Libraries) -> list[Cell]:
    if not p.dense:
        return []
    if libs.jax is None:
        return skipped(("jax.jit dense",), "call", libs.notes.get("jax", ""))
    jax = libs.jax
    f = p.function(_jax_namespace(libs))
    x = jax.device_put(libs.jnp.asarray(p.x))
    if p.kind == "jacobian":
        op, setting = jax.jit(jax.jacfwd(f)), "jax.jit(jax.jacfwd(f))"
    else:
        op, setting = jax.jit(jax.hessian(f)), "jax.jit(jax.hessian(f))"
    return [Cell("jax.jit dense", setting, "call", lambda: jax.block_until_ready(op(x)))]


def asdex_cells(p: SP.SparseProblem, libs: Libraries) -> list[Cell]:
    if libs.asdex is None:
        note = libs.notes.get("asdex") or libs.notes.get("jax", "")
        return skipped(("asdex",), "call", note) + skipped(("asdex prepare",), "prepare", note)
    jax, jnp, asdex = libs.jax, libs.jnp, libs.asdex
    f = p.function(_jax_namespace(libs))
    x0 = jax.device_put(jnp.asarray(p.x0))
    x = jax.device_put(jnp.asarray(p.x))
    if p.kind == "jacobian":
        colour, from_colouring = asdex.jacobian_coloring, asdex.jacobian_from_coloring
    else:
        colour, from_colouring = asdex.hessian_coloring, asdex.hessian_from_coloring

    def prepare() -> tuple[Any, Any]:
        # Detection and colouring at x0, then jax.jit's trace and XLA compile, which
        # happen on the first call.
        colouring = colour(f, x0)
        jitted = jax.jit(from_colouring(f, colouring))
        jax.block_until_ready(jitted(x0))
        return colouring, jitted

    (colouring, jitted), cold = _cold(prepare)
    info = {
        "ncolors": int(colouring.num_colors),
        "mode": str(colouring.mode),
        "cold_prepare_s": cold,
    }
    # The BCOO result keeps the detected pattern's order; the CSR conversion a user
    # needs for SciPy is part of the call.
    shape = (p.size, p.size)

    def bcoo_to_csr(out: Any) -> sp.csr_array:
        idx = np.asarray(out.indices)
        return sp.coo_array((np.asarray(out.data), (idx[:, 0], idx[:, 1])), shape=shape).tocsr()

    def call_csr() -> sp.csr_array:
        return bcoo_to_csr(jitted(x))

    # asdex's own SciPy output: not jittable from outside (the result is a host array),
    # asdex compiles the compressed evaluation itself and builds the matrix per call.
    native = from_colouring(f, colouring, output_format="scipy_csr")
    native(x0)  # the first call compiles
    return [
        Cell(
            "asdex prepare",
            "coloring + jax.jit(from_coloring) + first call",
            "prepare",
            lambda: prepare(),
            info=info,
        ),
        Cell(
            "asdex", "jax.jit(from_coloring)(x) -> BCOO -> csr_array", "call", call_csr, info=info
        ),
        Cell(
            "asdex",
            "from_coloring(output_format='scipy_csr')(x)",
            "call",
            lambda: native(x),
            info=info,
        ),
        Cell(
            "asdex",
            "jax.jit(from_coloring)(x) -> BCOO (no conversion; not in the table)",
            "call",
            lambda: jax.block_until_ready(jitted(x)),
            info={**info, "table": False},
            check_as=bcoo_to_csr,
        ),
    ]


# ----------------------------------------------------------------------------- casadi
def _casadi_namespace(ca: Any) -> Any:
    def roll(w: Any, shift: int) -> Any:
        # np.roll(w, 1)[i] = w[i-1]; np.roll(w, -1)[i] = w[i+1] (column vectors).
        if shift == 1:
            return ca.vertcat(w[-1], w[:-1])
        if shift == -1:
            return ca.vertcat(w[1:], w[0])
        raise ValueError(f"roll: shift must be 1 or -1, got {shift}")

    return SimpleNamespace(roll=roll, concatenate=lambda parts: ca.vertcat(*parts), sum=ca.sum1)


def casadi_cells(p: SP.SparseProblem, libs: Libraries, symbols: tuple[str, ...]) -> list[Cell]:
    ca = libs.casadi
    if ca is None:
        note = libs.notes.get("casadi", "")
        return skipped(("casadi",), "call", note) + skipped(("casadi build",), "prepare", note)
    m = _casadi_namespace(ca)
    fun = p.function(m)
    x = p.x
    cells: list[Cell] = []
    for sym in symbols:
        kind = getattr(ca, sym)

        def build(kind: Any = kind) -> Any:
            y = kind.sym("y", p.size)
            expr = fun(y)
            if p.kind == "jacobian":
                d = ca.jacobian(expr, y)
            else:
                d, _ = ca.hessian(expr, y)
            return ca.Function("d", [y], [d])

        func, cold = _cold(build)
        pattern = func.sparsity_out(0)
        colouring = pattern.star_coloring() if p.kind == "hessian" else pattern.uni_coloring()
        info = {
            "symbols": sym,
            "ncolors": int(colouring.size2()),
            "colouring": "star_coloring" if p.kind == "hessian" else "uni_coloring",
            "cold_prepare_s": cold,
        }
        row = np.asarray(pattern.row(), dtype=np.int32)
        colind = np.asarray(pattern.colind(), dtype=np.int32)
        # Function.buffer: CasADi reads the input from and writes the nonzeros into
        # NumPy memory, so a call is one evaluation and one csc_array around copies. The
        # index arrays are copied too: every call of every library here returns a
        # matrix whose arrays are its own (one sharing them with the last call's would
        # change when its caller sorts or prunes it in place).
        buf, evaluate = func.buffer()
        xin = np.empty(p.size)
        res = np.empty(pattern.nnz())
        buf.set_arg(0, memoryview(xin))
        buf.set_res(0, memoryview(res))

        def call_buffer(
            evaluate: Any = evaluate,
            xin: Any = xin,
            res: Any = res,
            row: Any = row,
            colind: Any = colind,
            keep: Any = (buf, func),  # evaluate() needs both alive
        ) -> sp.csc_array:
            np.copyto(xin, x)
            evaluate()
            return sp.csc_array((res.copy(), row.copy(), colind.copy()), shape=(p.size, p.size))

        cells += [
            Cell(
                "casadi build", f"{sym}: symbols, {p.kind}, Function", "prepare", build, info=info
            ),
            Cell("casadi", f"{sym}: Function.buffer -> csc_array", "call", call_buffer, info=info),
            Cell(
                "casadi",
                f"{sym}: Function(x).sparse() (scipy csc_matrix)",
                "call",
                lambda func=func: func(x).sparse(),
                info=info,
            ),
        ]
    return cells


# ----------------------------------------------------------------------------- scipy
def scipy_cells(p: SP.SparseProblem) -> list[Cell]:
    import scipy.optimize
    from scipy.optimize._numdiff import approx_derivative, group_columns

    pattern = sp.csr_array(p.reference.astype(bool))
    groups = group_columns(pattern)
    info = {"ncolors": int(groups.max()) + 1, "mode": "group_columns"}
    if p.kind == "jacobian":
        fun, what = p.f, "f"
    else:
        # Finite differences of a gradient: SciPy's hand-written rosen_der.
        fun, what = scipy.optimize.rosen_der, "rosen_der"
    x = p.x
    return [
        Cell(
            "scipy colouring",
            "group_columns(pattern)",
            "prepare",
            lambda: group_columns(pattern),
            info=info,
        ),
        Cell(
            "scipy FD",
            f"approx_derivative({what}, x, sparsity=(pattern, groups)), 2-point",
            "call",
            lambda: approx_derivative(fun, x, sparsity=(pattern, groups)),
            exact=False,
            info=info,
        ),
    ]


def build_cells(p: SP.SparseProblem, libs: Libraries, wanted: set[str], quick: bool) -> list[Cell]:
    """Every cell of problem ``p`` for the libraries in ``wanted``."""
    out: list[Cell] = []
    builders: list[tuple[str, Callable[[], list[Cell]], tuple[str, ...]]] = [
        (
            "funcdiff",
            lambda: funcdiff_cells(p, libs),
            ("funcdiff dense", "funcdiff sparse", "funcdiff one-shot", "funcdiff prepare"),
        ),
        ("jax", lambda: jax_cells(p, libs), ("jax.jit dense",)),
        ("asdex", lambda: asdex_cells(p, libs), ("asdex", "asdex prepare")),
        (
            "casadi",
            lambda: casadi_cells(p, libs, _casadi_symbols(p, quick)),
            ("casadi", "casadi build"),
        ),
        ("scipy", lambda: scipy_cells(p), ("scipy FD", "scipy colouring")),
    ]
    for name, builder, columns in builders:
        if name not in wanted:
            continue
        try:
            out += builder()
        except Exception as exc:  # noqa: BLE001  (a library's failure is a table entry)
            message = f"setup raised {type(exc).__name__}: {exc}"[:300]
            out += [
                Cell(c, "setup", "prepare" if c in PREPARE_COLUMNS else "call", _raiser(message))
                for c in columns
            ]
    return out


def _casadi_symbols(p: SP.SparseProblem, quick: bool) -> tuple[str, ...]:
    # SX's graph build is the slow one at 2e5 unknowns; --quick keeps MX only there.
    return ("MX",) if quick and not p.dense else ("SX", "MX")
