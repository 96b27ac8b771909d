"""Verify derivatives against finite differences.

Two entry points:

* :func:`gradcheck` and :func:`gradgradcheck` follow ``torch.autograd.gradcheck``
  (same signatures, defaults and pass rule), but a failure names the worst
  elements in a short table instead of printing two full Jacobians.
* :func:`check_derivatives` returns a :class:`DerivativeReport`: for every
  (output, input) pair the largest absolute and relative errors with their
  multi-indices, the AD value, the finite-difference value and its error estimate at
  the worst element, and a verdict ``pass``, ``fail`` or ``inconclusive``.

How :func:`check_derivatives` differentiates numerically
---------------------------------------------------------
* Steps are relative to each element and depend on the dtype: ``h = c * s`` with
  ``c = eps**(1/3)`` (central) or ``eps**(1/5)`` (Richardson) of the lower-precision
  dtype among the input and the outputs, and ``s = max(|x|, 1)``; for ``|x| < 1/16``
  also ``s = |x|``. Where the error estimate is still poor, steps 16 times larger or
  smaller are tried (up to 16**4 either way) and each element keeps the step with the
  smallest estimate: inputs near 1e6 (``sin``) and near 1e-6 (``log``) both work.
* Every element is evaluated at ``x +- h`` and ``x +- 2h``. The difference between the
  two central quotients estimates the error of the finite difference, to which a
  rounding term ``eps * |f| / h`` is added.
* One-sided quotients at ``h`` and ``2h`` detect kinks: for a smooth function
  ``2 (F(h) - B(h)) - (F(2h) - B(2h))`` is O(h^3); at a kink it stays at the jump of
  the slope. Such elements are inconclusive (or failures when the AD value is outside
  the one-sided interval).
* ``method="complex-step"`` evaluates ``func`` on complex ndarrays, ``Im f(x + ih)/h``,
  and cross-checks every element against central differences; where they disagree
  (``abs``, comparisons, ``conj``: code that is not analytic) central differences are
  used.

The analytical side uses the engine only: ``funcdiff.grad`` with a batch of basis
cotangents (``is_grads_batched=True``) gives a whole Jacobian block in one backward
pass; Hessians come from double backward; Jacobian-vector products from the
double-backward trick.
"""

from __future__ import annotations

import inspect
import math
import textwrap
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from funcdiff._ops import RuleNode
from funcdiff._tensor import Tensor, tensor
from funcdiff.autograd.engine import grad
from funcdiff.autograd.grad_mode import enable_grad, no_grad
from funcdiff.autograd.graph import AccumulateGrad

__all__ = [
    "GradcheckError",
    "gradcheck",
    "gradgradcheck",
    "check_derivatives",
    "DerivativeReport",
    "PairResult",
    "ElementResult",
    "ConsistencyCheck",
    "StepSweep",
]

# Elements of a batched basis of cotangents per backward pass (bounds memory).
_CHUNK = 1 << 22
_METHODS = ("central", "richardson", "complex-step")
_SWEEP_METHODS = ("forward", "central", "complex-step")
# A finite-difference quotient is trusted to within this multiple of its estimate.
_EST_FACTOR = 3.0
# Default relative tolerances of check_derivatives, by dtype of the comparison.
_RTOL = {np.dtype(np.float64): 1e-5, np.dtype(np.float32): 2e-3, np.dtype(np.float16): 5e-2}


class GradcheckError(RuntimeError):
    """Raised when analytical derivatives disagree with finite differences.

    The message opens with ``Jacobian mismatch for output i with respect to input j``
    (as torch's) and continues with a table of the worst elements.
    """


# ====================================================================== small helpers
def _eps(dtype: Any) -> float:
    dt = np.dtype(dtype)
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    return float(np.finfo(dt).eps)


def _low_precision(dtypes: Sequence[Any]) -> np.dtype:
    """The floating dtype with the largest machine epsilon among ``dtypes``."""
    best = np.dtype(np.float64)
    for d in dtypes:
        d = np.dtype(d)
        if d.kind == "c":
            d = np.dtype(d.char.lower()) if d.char in "FD" else np.dtype(np.float64)
            d = np.dtype(np.float32) if d == np.dtype(np.complex64) else d
        if d.kind == "f" and _eps(d) > _eps(best):
            best = d
    return best


def _data(o: Any) -> np.ndarray:
    return o.data if isinstance(o, Tensor) else np.asarray(o)


def _is_float_output(o: Any) -> bool:
    """Floating arrays and Tensors, and plain Python numbers (constants)."""
    if isinstance(o, Tensor):
        return o.data.dtype.kind == "f"
    if isinstance(o, bool):
        return False
    if isinstance(o, (float, int)):
        return True
    if isinstance(o, (np.ndarray, np.generic)):
        return o.dtype.kind == "f"
    return False


def _as_list(result: Any) -> list:
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def _fmt_index(name: str, idx: tuple) -> str:
    if not idx:
        return name
    return f"{name}[{','.join(str(int(i)) for i in idx)}]"


def _num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits - 1}e}" if x != 0 else "0"


def _json_float(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _param_names(func: Callable, count: int) -> list[str]:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) >= count:
        return names[:count]
    if count == 1:
        return ["x"]
    return [f"x{i}" for i in range(count)]


def _func_name(func: Callable) -> str:
    owner = getattr(func, "__self__", None)
    if inspect.isclass(owner):  # MyFunction.apply, a classmethod bound to its class
        return f"{owner.__name__}.{getattr(func, '__name__', 'apply')}"
    name = getattr(func, "__qualname__", None) or ""
    if not name or "<locals>" in name:
        name = getattr(func, "__name__", None) or type(func).__name__
    return name


def _basis(n: int, start: int, stop: int, shape: tuple, dtype: Any) -> np.ndarray:
    rows = stop - start
    b = np.zeros((rows, n), dtype=dtype)
    b[np.arange(rows), np.arange(start, stop)] = 1
    return b.reshape((rows,) + tuple(shape))


# ====================================================================== AD building blocks
# Small private helpers on the public engine; funcdiff.functional offers the same
# quantities (jacobian, jvp, hvp) and these could switch to it.
def _batch_safe(outs: Sequence[Any]) -> bool:
    """True if every node behind ``outs`` is a registered rule or a leaf, without hooks.

    Registered rules are tested with batched cotangents; a custom Function's backward
    or a hook may be written for one cotangent only (``A.T @ g``), so a checker must
    not feed it a batch.
    """
    stack = [o.grad_fn for o in outs if isinstance(o, Tensor) and o.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if not isinstance(node, (RuleNode, AccumulateGrad)) or node.pre_hooks:
            return False
        stack.extend(e[0] for e in node.edges if e is not None)
    return True


def _vjp_rows(out: Any, ins: Sequence[Tensor], force_batched: bool = False) -> list[np.ndarray]:
    """Jacobian of ``out`` w.r.t. each of ``ins``: shape ``out.shape + in.shape`` (float64).

    One backward pass per chunk of rows, with a batch of one-hot cotangents (one pass
    per row when the graph holds custom Functions or hooks, unless ``force_batched``).
    """
    if not force_batched and not _batch_safe([out]):
        return _vjp_rows_looped(out, ins)
    shape = tuple(np.shape(_data(out)))
    m = int(np.prod(shape, dtype=np.int64))
    blocks = [np.zeros((m,) + t.shape) for t in ins]
    if m and isinstance(out, Tensor) and out.requires_grad and ins:
        per_row = m + sum(t.size for t in ins)
        step = max(1, _CHUNK // max(per_row, 1))
        for start in range(0, m, step):
            stop = min(m, start + step)
            basis = _basis(m, start, stop, shape, out.dtype)
            gs = grad(
                out, list(ins), basis, retain_graph=True, allow_unused=True, is_grads_batched=True
            )
            for b, g in zip(blocks, gs, strict=True):
                if g is not None:
                    b[start:stop] = g.data
    return [b.reshape(shape + t.shape) for b, t in zip(blocks, ins, strict=True)]


def _vjp_rows_looped(out: Any, ins: Sequence[Tensor]) -> list[np.ndarray]:
    """As :func:`_vjp_rows` with one backward pass per row (for check_batched_grad)."""
    shape = tuple(np.shape(_data(out)))
    m = int(np.prod(shape, dtype=np.int64))
    blocks = [np.zeros((m,) + t.shape) for t in ins]
    if m and isinstance(out, Tensor) and out.requires_grad:
        for r in range(m):
            row = _basis(m, r, r + 1, shape, out.dtype)[0]
            gs = grad(out, list(ins), row, retain_graph=True, allow_unused=True)
            for b, g in zip(blocks, gs, strict=True):
                if g is not None:
                    b[r] = g.data
    return [b.reshape(shape + t.shape) for b, t in zip(blocks, ins, strict=True)]


def _jvp(
    outs: Sequence[Any],
    ins: Sequence[Tensor],
    dirs: Sequence[np.ndarray],
    batched: bool = False,
    force_batched: bool = False,
) -> list[np.ndarray]:
    """``J v`` for every output, by the double-backward trick.

    ``dirs[j]`` has the shape of ``ins[j]`` (with a leading batch axis if ``batched``).
    The gradient with respect to a dummy cotangent ``u`` of ``<grad(out, x, u), v>``
    is ``J v``; this needs the vjps to be differentiable, which funcdiff's are.
    """
    nb = (np.shape(dirs[0])[0],) if batched and dirs else ()
    results = [np.zeros(nb + np.shape(_data(o))) for o in outs]
    live = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not live:
        return results
    us = [tensor(np.zeros(outs[k].shape, dtype=outs[k].dtype), requires_grad=True) for k in live]
    gs = grad(
        [outs[k] for k in live],
        list(ins),
        us,
        create_graph=True,
        retain_graph=True,
        allow_unused=True,
    )
    pairs = [(g, d) for g, d in zip(gs, dirs, strict=True) if g is not None and g.requires_grad]
    if not pairs:
        return results
    gl = [g for g, _ in pairs]
    if batched and not force_batched and not _batch_safe(gl):
        for b in range(nb[0]):
            one = _jvp(outs, ins, [d[b] for d in dirs])
            for r, o in zip(results, one, strict=True):
                r[b] = o
        return results
    jv = grad(
        gl,
        us,
        [np.asarray(d, dtype=g.dtype) for g, d in pairs],
        retain_graph=True,
        allow_unused=True,
        is_grads_batched=batched,
    )
    for k, r in zip(live, jv, strict=True):
        if r is not None:
            results[k] = np.asarray(r.data, dtype=np.float64)
    return results


def _scalarize(out: Tensor, w: np.ndarray | None) -> Tensor:
    if w is None:
        return out if out.ndim == 0 else np.sum(out)
    return np.sum(out * w)


# ====================================================================== targets
class _Target:
    """A function of the differentiable inputs, seen by AD and by finite differences.

    ``ad_outputs(ins)`` runs it on Tensors (recording); ``fd_eval(xs)`` returns float64
    arrays for the given input arrays; ``fd_eval_complex`` (optional) runs it on
    complex arrays for the complex step.
    """

    kind = "jacobian"
    complex_ok: bool | None = False

    def __init__(self, problem: _Problem) -> None:
        self.problem = problem
        self.out_labels: list[str] = []
        self.out_shapes: list[tuple] = []
        self.out_dtypes: list[np.dtype] = []
        self.nfev = 0

    def ad_outputs(self, ins: list[Tensor]) -> list[Any]:
        raise NotImplementedError

    def fd_eval(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    def fd_eval_complex(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    def pair_label(self, q: int, j: int) -> str:
        raise NotImplementedError

    def element_label(self, q: int, j: int, out_idx: tuple, in_idx: tuple) -> str:
        raise NotImplementedError


class _Problem:
    """``func`` and its inputs: which are differentiated, and how it is called."""

    def __init__(self, func: Callable, inputs: Any, argnums: Any) -> None:
        if not callable(func):
            raise TypeError(f"func must be callable, got {type(func).__name__}")
        self.func = func
        items = list(inputs) if isinstance(inputs, tuple) else [inputs]
        if not items:
            raise ValueError("inputs is an empty tuple: give at least one input to differentiate")
        self.items = items
        if argnums is not None:
            nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
            for a in nums:
                if not isinstance(a, int) or not -len(items) <= a < len(items):
                    raise ValueError(
                        f"argnums must hold positions of inputs (0..{len(items) - 1}), got {a!r}"
                    )
            diff = sorted({a % len(items) for a in nums})
        elif any(isinstance(t, Tensor) and t.requires_grad for t in items):
            diff = [i for i, t in enumerate(items) if isinstance(t, Tensor) and t.requires_grad]
        else:
            diff = [i for i, t in enumerate(items) if self._numeric(t)]
        if not diff:
            raise ValueError(
                "check_derivatives found no input to differentiate: inputs must hold numbers, "
                "arrays or Tensors"
            )
        self.diff = diff
        x0 = []
        for i in diff:
            arr = np.array(_data(items[i]), copy=True)
            if arr.dtype.kind in "biu":
                arr = arr.astype(np.float64)
            if arr.dtype.kind != "f":
                raise TypeError(
                    f"input {i} must hold real numbers, got an array of dtype {arr.dtype}"
                )
            x0.append(arr)
        self.x0 = x0
        names = _param_names(func, len(items))
        self.names = [names[i] for i in diff]
        self.name = _func_name(func)

    @staticmethod
    def _numeric(t: Any) -> bool:
        if isinstance(t, Tensor):
            return t.dtype.kind == "f"
        if isinstance(t, bool):
            return False
        if isinstance(t, (int, float, np.ndarray, np.generic, list)):
            try:
                return np.asarray(t).dtype.kind in "iuf"
            except (ValueError, TypeError):
                return False
        return False

    def args(self, values: Sequence[Any]) -> list:
        args = [t.detach() if isinstance(t, Tensor) else t for t in self.items]
        for i, v in zip(self.diff, values, strict=True):
            args[i] = v
        return args

    def call(self, values: Sequence[Any]) -> list:
        return _as_list(self.func(*self.args(values)))


class _FirstOrder(_Target):
    """The user's function itself."""

    kind = "jacobian"

    def __init__(self, problem: _Problem) -> None:
        super().__init__(problem)
        self.complex_ok = None  # unknown until probed
        self.positions: list[int] = []
        self.numpy_path = True
        self.notes: list[str] = []
        self.primal_numpy: list[np.ndarray] | None = None

    def setup(self, ad_outs: list[Any]) -> None:
        self.positions = [k for k, o in enumerate(ad_outs) if _is_float_output(o)]
        if not self.positions:
            raise TypeError(
                f"{self.problem.name} returned no floating-point output "
                f"(got {', '.join(type(o).__name__ for o in ad_outs) or 'nothing'})"
            )
        if len(self.positions) != len(ad_outs):
            skipped = len(ad_outs) - len(self.positions)
            self.notes.append(f"{skipped} non-floating output(s) ignored")
        many = len(ad_outs) > 1
        self.out_labels = [f"f{k}" if many else "f" for k in self.positions]
        kept = [ad_outs[k] for k in self.positions]
        self.out_shapes = [tuple(np.shape(_data(o))) for o in kept]
        self.out_dtypes = [
            _data(o).dtype if _data(o).dtype.kind == "f" else np.dtype(np.float64) for o in kept
        ]
        # Finite differences run the function as plain NumPy code when it allows it:
        # faster, and independent of the Tensor path (the values are compared too).
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                vals = self._numpy(self.problem.x0)
            if [v.shape for v in vals] != self.out_shapes:
                raise ValueError("different output shapes")
            self.primal_numpy = vals
        except Exception as exc:  # noqa: BLE001  (any failure means: use Tensors instead)
            self.numpy_path = False
            self.notes.append(
                f"func could not run on plain ndarrays ({type(exc).__name__}: {exc}); finite "
                "differences evaluated it on funcdiff Tensors"
            )

    def ad_outputs(self, ins: list[Tensor]) -> list[Any]:
        outs = self.problem.call(ins)
        return [outs[k] for k in self.positions]

    def _numpy(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        outs = self.problem.call(list(xs))
        if len(outs) <= max(self.positions):
            raise ValueError(
                f"{self.problem.name} returned {len(outs)} outputs at a perturbed point, "
                f"{max(self.positions) + 1}+ at the check point"
            )
        return [np.asarray(_data(outs[k]), dtype=np.float64) for k in self.positions]

    def fd_eval(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.nfev += 1
        if self.numpy_path:
            vals = self._numpy(xs)
        else:
            with no_grad():
                vals = self._numpy([tensor(x) for x in xs])
        for v, s in zip(vals, self.out_shapes, strict=True):
            if v.shape != s:
                raise ValueError(
                    f"{self.problem.name} returned an output of shape {v.shape} at a perturbed "
                    f"point, but {s} at the check point"
                )
        return vals

    def fd_eval_complex(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.nfev += 1
        outs = self.problem.call(list(xs))
        return [np.asarray(_data(outs[k])) for k in self.positions]

    def pair_label(self, q: int, j: int) -> str:
        return f"d{self.out_labels[q]}/d{self.problem.names[j]}"

    def element_label(self, q: int, j: int, out_idx: tuple, in_idx: tuple) -> str:
        return (
            f"{_fmt_index(self.out_labels[q], out_idx)}, "
            f"{_fmt_index(self.problem.names[j], in_idx)}"
        )


class _SecondOrder(_Target):
    """The AD gradient of each (scalarised) output: its Jacobian is the Hessian."""

    kind = "hessian"

    def __init__(self, problem: _Problem, first: _FirstOrder, weights: list) -> None:
        super().__init__(problem)
        self.first = first
        self.weights = weights
        self.map: list[tuple[int, int]] = []
        nd = len(problem.x0)
        for i in range(len(first.out_labels)):
            for j in range(nd):
                self.map.append((i, j))
        self.out_shapes = [problem.x0[j].shape for _, j in self.map]
        self.out_dtypes = [problem.x0[j].dtype for _, j in self.map]
        self.out_labels = [
            ("w." if weights[i] is not None else "") + first.out_labels[i] for i, _ in self.map
        ]

    def _grads(self, ins: list[Tensor], create_graph: bool) -> list[Any]:
        outs = self.first.ad_outputs(ins)
        result: list[Any] = []
        for i, o in enumerate(outs):
            if isinstance(o, Tensor) and o.requires_grad:
                s = _scalarize(o, self.weights[i])
                gs = grad(
                    s, ins, create_graph=create_graph, retain_graph=create_graph, allow_unused=True
                )
            else:
                gs = (None,) * len(ins)
            for t, g in zip(ins, gs, strict=True):
                result.append(np.zeros(t.shape) if g is None else g)
        return result

    def ad_outputs(self, ins: list[Tensor]) -> list[Any]:
        return self._grads(ins, create_graph=True)

    def fd_eval(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.nfev += 1
        ins = [tensor(x, requires_grad=True) for x in xs]
        with enable_grad():
            gs = self._grads(ins, create_graph=False)
        return [np.asarray(_data(g), dtype=np.float64) for g in gs]

    def pair_label(self, q: int, j: int) -> str:
        i, jj = self.map[q]
        names = self.problem.names
        return f"d2{self.first.out_labels[i]}/d{names[jj]} d{names[j]}"

    def element_label(self, q: int, j: int, out_idx: tuple, in_idx: tuple) -> str:
        _, jj = self.map[q]
        names = self.problem.names
        return f"{_fmt_index(names[jj], out_idx)}, {_fmt_index(names[j], in_idx)}"


# ====================================================================== finite differences
def _step_base(method: str, dtype: np.dtype, override: float | None) -> float:
    if override is not None:
        return float(override)
    eps = _eps(dtype)
    return eps ** (1 / 5) if method == "richardson" else eps ** (1 / 3)


def _pow2(h: float) -> float:
    """Round a step to a power of two, so that 2h and 4h are exact multiples."""
    return float(2.0 ** np.round(np.log2(h)))


def _scale_candidates(xk: float, typical: float) -> list[float]:
    """Scales s of the step h = c*s for one element: max(|x|, 1), and |x| when much smaller."""
    a = abs(xk)
    cands = [max(a, 1.0)]
    if 0.0 < a < 1 / 16:
        cands.append(a)
    elif a == 0.0 and 0.0 < typical < 1 / 16:
        cands.append(typical)
    return cands


def _typical(x: np.ndarray) -> float:
    nz = np.abs(x[np.isfinite(x) & (x != 0)])
    return float(np.median(nz)) if nz.size else 0.0


_FIELDS = (
    "value",
    "est",
    "central",
    "central_est",
    "fwd",
    "bwd",
    "kink",
    "kink_floor",
    "step",
    "cs",
)


def _quotients(
    fvals: dict, f0: np.ndarray, dx: dict, t: float, method: str, row_eps: np.ndarray
) -> dict[str, np.ndarray]:
    """Difference quotients from values at x + o*t (o in +-1, +-2, +-4) and their estimates."""
    c1 = (fvals[1] - fvals[-1]) / (dx[1] - dx[-1])
    c2 = (fvals[2] - fvals[-2]) / (dx[2] - dx[-2])
    fw1 = (fvals[1] - f0) / dx[1]
    bw1 = (f0 - fvals[-1]) / (-dx[-1])
    fw2 = (fvals[2] - f0) / dx[2]
    bw2 = (f0 - fvals[-2]) / (-dx[-2])
    with np.errstate(invalid="ignore", over="ignore"):
        fmax = np.maximum.reduce([np.abs(f0)] + [np.abs(v) for v in fvals.values()])
        noise = row_eps * fmax / t
        diff12 = np.abs(c1 - c2)
        central_est = diff12 + 2.0 * noise
        # For a smooth f, F - B = h f'' + O(h^3) doubles with h; at a kink it stays at
        # the jump of the slope. Require both a large and a scale-free signature.
        gap1, gap2 = fw1 - bw1, fw2 - bw2
        kink = np.abs(2.0 * gap1 - gap2)
        kink_floor = np.maximum(
            10.0 * noise + _EST_FACTOR * diff12, 0.25 * np.maximum(np.abs(gap1), np.abs(gap2))
        )
        if method == "richardson":
            c4 = (fvals[4] - fvals[-4]) / (dx[4] - dx[-4])
            ra = (4.0 * c1 - c2) / 3.0
            rb = (4.0 * c2 - c4) / 3.0
            r = (16.0 * ra - rb) / 15.0
            value, est = r, np.abs(r - ra) + 4.0 * noise
        else:
            value, est = c1, central_est
    return {
        "value": value,
        "est": est,
        "central": c1,
        "central_est": central_est,
        "fwd": fw1,
        "bwd": bw1,
        "kink": kink,
        "kink_floor": kink_floor,
        "step": np.full(c1.shape, t),
    }


def _fd_elementwise(
    target: _Target,
    j: int,
    method: str,
    f0: list[np.ndarray],
    base: float,
    row_eps: np.ndarray,
    rtol: float,
) -> dict[str, np.ndarray]:
    """Numerical Jacobian columns of ``target`` w.r.t. input ``j``, element by element.

    Returns fields of shape ``(m, n)``: m = all outputs' elements concatenated. Each
    (row, element) keeps the step whose error estimate is smallest: the relative
    candidates first, then, where the estimate is still poor, steps 16x larger or
    smaller (up to 16**4 either way): relative steps are wrong for sin(x) at x = 1e6,
    absolute ones for log(x) at x = 1e-6.
    """
    xs = target.problem.x0
    x = xs[j]
    dtype = x.dtype
    n = x.size
    f0c = np.concatenate([v.ravel() for v in f0]) if f0 else np.zeros(0)
    m = f0c.size
    fields = _FIELDS if method == "complex-step" else _FIELDS[:-1]
    out = {k: np.zeros((m, n)) for k in fields}
    flat = x.ravel()
    typical = _typical(flat)
    offsets = (1, -1, 2, -2, 4, -4) if method == "richardson" else (1, -1, 2, -2)
    good = 1e-2 * rtol

    def evaluate(k: int, value: Any, kind: Any = None) -> np.ndarray:
        xj = x.copy() if kind is None else x.astype(kind)
        xj.flat[k] = value
        vals = list(xs)
        vals[j] = xj
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            with np.errstate(all="ignore"):
                res = target.fd_eval(vals) if kind is None else target.fd_eval_complex(vals)
        return np.concatenate([np.ravel(v) for v in res]) if res else np.zeros(0)

    def at_step(k: int, xk: Any, t: float) -> dict[str, np.ndarray] | None:
        fvals: dict[int, np.ndarray] = {}
        dx: dict[int, float] = {}
        for o in offsets:
            p = dtype.type(xk + o * t)
            dx[o] = float(p) - float(xk)
            if dx[o] == 0 or not math.isfinite(dx[o]):
                return None
        for o in offsets:
            fvals[o] = evaluate(k, dtype.type(xk + o * t))
        q = _quotients(fvals, f0c, dx, t, method, row_eps)
        q["est"] = np.where(np.isfinite(q["est"]) & np.isfinite(q["value"]), q["est"], np.inf)
        return q

    def merge(best: dict | None, q: dict | None) -> dict | None:
        if q is None:
            return best
        if best is None:
            return q
        better = q["est"] < best["est"]
        return {f: np.where(better, q[f], best[f]) for f in q}

    def poor(q: dict) -> np.ndarray:
        live = (q["value"] != 0) | (q["central"] != q["fwd"]) | ~np.isfinite(q["est"])
        return live & ~(q["est"] <= good * np.abs(q["value"]))

    def score(q: dict | None, rows: np.ndarray) -> float:
        if q is None:
            return math.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            r = q["est"][rows] / np.maximum(np.abs(q["value"][rows]), 1e-300)
        r = np.where(np.isfinite(r), r, 1e300)
        return float(np.exp(np.mean(np.log(np.maximum(r, 1e-300)))))

    for k in range(n):
        xk = flat[k]
        best = None
        for sc in _scale_candidates(float(xk), typical):
            best = merge(best, at_step(k, xk, _pow2(base * sc)))
        if best is None:
            raise ValueError(
                f"input {target.problem.names[j]} element {k} = {xk!r}: every finite-difference "
                "step is below its floating-point resolution"
            )
        need = poor(best)
        if np.any(need):
            # Search steps 16x apart from the step of the worst row, keep what improves.
            worst_row = int(np.argmax(np.where(need, best["est"], -1.0)))
            t0 = float(best["step"][worst_row])
            trials = {f: at_step(k, xk, t0 * f) for f in (16.0, 1 / 16)}
            ref = score(best, need)
            direction = min(trials, key=lambda f: score(trials[f], need))
            for q in trials.values():
                best = merge(best, q)
            current = trials[direction]
            t = t0 * direction
            for _ in range(3):
                if current is None or score(current, need) >= ref or not np.any(poor(best)):
                    break
                ref = score(current, need)
                t *= direction
                current = at_step(k, xk, t)
                best = merge(best, current)
        for f, v in best.items():
            out[f][:, k] = v
        if method == "complex-step":
            sc = max(abs(float(xk)), 1.0)
            cdt = np.complex64 if dtype == np.float32 else np.complex128
            tc = sc * (1e-12 if dtype == np.float32 else 1e-20)
            vals = evaluate(k, cdt(complex(float(xk), tc)), kind=cdt)
            out["cs"][:, k] = np.imag(vals) / tc if np.iscomplexobj(vals) else 0.0
    return out


def _fd_direction(
    target: _Target,
    j: int,
    d: np.ndarray,
    t: float,
    method: str,
    f0: list[np.ndarray],
    row_eps: np.ndarray,
) -> dict[str, np.ndarray]:
    """Directional derivative of ``target`` along ``d`` for input ``j`` (fast mode)."""
    xs = target.problem.x0
    x = xs[j]
    offsets = (1, -1, 2, -2, 4, -4) if method == "richardson" else (1, -1, 2, -2)
    f0c = np.concatenate([v.ravel() for v in f0])
    fvals = {}
    for o in offsets:
        vals = list(xs)
        vals[j] = (x + (o * t) * d).astype(x.dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with np.errstate(all="ignore"):
                fvals[o] = np.concatenate([np.ravel(v) for v in target.fd_eval(vals)])
    dx = {o: o * t for o in offsets}
    return _quotients(fvals, f0c, dx, t, "central" if method == "complex-step" else method, row_eps)


# ====================================================================== the report
@dataclass
class ElementResult:
    """One element of a derivative block: where it is and how AD and FD compare."""

    label: str
    output_index: tuple
    input_index: tuple
    ad: float
    fd: float
    fd_error: float
    abs_error: float
    rel_error: float
    step: float | None
    verdict: str
    note: str = ""

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "output_index": [int(i) for i in self.output_index],
            "input_index": [int(i) for i in self.input_index],
            "ad": _json_float(self.ad),
            "fd": _json_float(self.fd),
            "fd_error_estimate": _json_float(self.fd_error),
            "abs_error": _json_float(self.abs_error),
            "rel_error": _json_float(self.rel_error),
            "step": _json_float(self.step),
            "verdict": self.verdict,
            "note": self.note,
        }


@dataclass
class PairResult:
    """The comparison of one derivative block: an (output, input) pair, or for
    ``kind="hessian"`` an (output, input, input) triple."""

    kind: str
    label: str
    output: int
    input: int
    output_shape: tuple
    input_shape: tuple
    n_elements: int
    n_out_of_tolerance: int
    n_failed: int
    n_inconclusive: int
    max_abs_error: float | None
    max_abs_index: tuple | None
    max_rel_error: float | None
    max_rel_index: tuple | None
    worst: ElementResult | None
    top: list[ElementResult]
    verdict: str
    rtol: float
    atol: float
    fast_mode: bool = False
    notes: list[str] = field(default_factory=list)
    _target: Any = field(default=None, repr=False, compare=False)
    _q: int = field(default=0, repr=False, compare=False)
    _ad: Any = field(default=None, repr=False, compare=False)
    _steps: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True unless the block failed (inconclusive counts as ok)."""
        return self.verdict != "fail"

    def to_dict(self) -> dict:
        def idx(pair: tuple | None) -> dict | None:
            if pair is None:
                return None
            return {"output": [int(i) for i in pair[0]], "input": [int(i) for i in pair[1]]}

        return {
            "kind": self.kind,
            "label": self.label,
            "output": self.output,
            "input": self.input,
            "output_shape": list(self.output_shape),
            "input_shape": list(self.input_shape),
            "n_elements": self.n_elements,
            "n_out_of_tolerance": self.n_out_of_tolerance,
            "n_failed": self.n_failed,
            "n_inconclusive": self.n_inconclusive,
            "max_abs_error": _json_float(self.max_abs_error),
            "max_abs_index": idx(self.max_abs_index),
            "max_rel_error": _json_float(self.max_rel_error),
            "max_rel_index": idx(self.max_rel_index),
            "worst": self.worst.to_dict() if self.worst else None,
            "top": [e.to_dict() for e in self.top],
            "verdict": self.verdict,
            "rtol": self.rtol,
            "atol": self.atol,
            "fast_mode": self.fast_mode,
            "notes": list(self.notes),
        }


@dataclass
class ConsistencyCheck:
    """A check that needs no finite differences (adjoint test, symmetry, primal values)."""

    name: str
    lhs: float
    rhs: float
    abs_error: float
    tolerance: float
    verdict: str
    note: str = ""

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "lhs": _json_float(self.lhs),
            "rhs": _json_float(self.rhs),
            "abs_error": _json_float(self.abs_error),
            "tolerance": _json_float(self.tolerance),
            "verdict": self.verdict,
            "note": self.note,
        }


@dataclass
class StepSweep:
    """Error of finite differences against the AD value as a function of the step.

    ``errors[method][k]`` is ``|FD(steps[k]) - AD| / max(|AD|, tiny)`` (NaN where the
    function could not be evaluated); ``best_step[method]`` minimises it.
    """

    label: str
    element: str
    x: float
    ad: float
    steps: np.ndarray
    errors: dict[str, np.ndarray]
    best_step: dict[str, float | None]
    best_error: dict[str, float | None]
    check_step: float | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "element": self.element,
            "x": _json_float(self.x),
            "ad": _json_float(self.ad),
            "steps": [_json_float(s) for s in self.steps],
            "errors": {k: [_json_float(e) for e in v] for k, v in self.errors.items()},
            "best_step": {k: _json_float(v) for k, v in self.best_step.items()},
            "best_error": {k: _json_float(v) for k, v in self.best_error.items()},
            "check_step": _json_float(self.check_step),
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        methods = list(self.errors)
        lines = [
            f"Step sweep for {self.label} at {self.element} (x = {self.x:.6g}, "
            f"AD = {self.ad:.10g}); relative error of each difference quotient",
            "  step      " + "".join(f"{m:>14}" for m in methods),
        ]
        for k, h in enumerate(self.steps):
            lines.append(
                f"  {h:8.1e}  " + "".join(f"{_num(self.errors[m][k]):>14}" for m in methods)
            )
        for m in methods:
            if self.best_step[m] is not None:
                lines.append(
                    f"  best {m}: step {self.best_step[m]:.1e}, error {_num(self.best_error[m])}"
                )
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def plot(self, path: Any, *, title: str | None = None) -> Any:
        """Draw the log-log error-versus-step chart (the "V") to ``path`` (PNG, SVG, PDF).

        Needs matplotlib, the optional extra ``funcdiff[plot]``.
        """
        try:
            from matplotlib.figure import Figure
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "plotting a step sweep needs matplotlib, which is not installed; install the "
                "optional extra with `pip install funcdiff[plot]` (or `pip install matplotlib`)"
            ) from exc
        fig = Figure(figsize=(6.4, 4.4), dpi=100)
        ax = fig.add_subplot(1, 1, 1)
        positive = [e[np.isfinite(e) & (e > 0)] for e in self.errors.values()]
        floor = min((float(p.min()) for p in positive if p.size), default=1e-16) / 10
        styles = {
            "forward": ("o-", "tab:blue"),
            "central": ("s-", "tab:orange"),
            "complex-step": ("^-", "tab:green"),
        }
        for m, e in self.errors.items():
            if not np.any(np.isfinite(e)):
                continue
            marker, color = styles.get(m, (".-", None))
            shown = np.where(np.isfinite(e), np.maximum(e, floor), np.nan)
            ax.loglog(self.steps, shown, marker, color=color, markersize=3, label=m)
        if self.check_step:
            ax.axvline(
                self.check_step,
                color="gray",
                linestyle="--",
                linewidth=1,
                label="step used by the check",
            )
        ax.set_xlabel("step h")
        ax.set_ylabel("relative error |FD - AD| / |AD|")
        ax.set_title(title or f"{self.label} at {self.element}", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
        return path


class DerivativeReport:
    """The result of :func:`check_derivatives`.

    Attributes
    ----------
    pairs : list of PairResult
        One entry per derivative block (Jacobian pairs, then Hessian blocks).
    checks : list of ConsistencyCheck
        Checks without finite differences (primal values, dot-product tests, symmetry).
    ok : bool
        No block and no check failed (inconclusive ones do not count as failures).
    verdict : str
        ``"fail"``, else ``"inconclusive"`` if anything was inconclusive, else ``"pass"``.
    """

    def __init__(
        self,
        *,
        name: str,
        order: int,
        method: str,
        dtype: np.dtype,
        pairs: list[PairResult],
        checks: list[ConsistencyCheck],
        notes: list[str],
        rtol: float,
        atol: float | None,
        nfev: int,
        seconds: float,
        fast_mode: bool,
    ) -> None:
        self.name = name
        self.order = order
        self.method = method
        self.dtype = dtype
        self.pairs = pairs
        self.checks = checks
        self.notes = notes
        self.rtol = rtol
        self.atol = atol
        self.nfev = nfev
        self.seconds = seconds
        self.fast_mode = fast_mode

    @property
    def ok(self) -> bool:
        return all(p.verdict != "fail" for p in self.pairs) and all(
            c.verdict != "fail" for c in self.checks
        )

    @property
    def verdict(self) -> str:
        states = [p.verdict for p in self.pairs] + [c.verdict for c in self.checks]
        if "fail" in states:
            return "fail"
        if "inconclusive" in states:
            return "inconclusive"
        return "pass"

    @property
    def tolerance_rule(self) -> str:
        atol = (
            f"atol={self.atol:g}"
            if self.atol is not None
            else "atol=sqrt(eps)*max|FD| of the block"
        )
        return (
            f"an element passes if |AD - FD| <= atol + rtol*max(|AD|, |FD|) "
            f"(rtol={self.rtol:g}, {atol}); otherwise it fails if |AD - FD| > "
            f"{_EST_FACTOR:g}*(FD error estimate) and is inconclusive if not; an element "
            "where the one-sided differences disagree (a kink) is inconclusive, or fails "
            "if AD lies outside them"
        )

    def raise_if_failed(self) -> DerivativeReport:
        """Raise :class:`GradcheckError` describing the first failure; return self if ok."""
        if self.ok:
            return self
        for p in self.pairs:
            if p.verdict == "fail":
                raise GradcheckError(_pair_message(p) + "\n\n" + str(self))
        bad = [c for c in self.checks if c.verdict == "fail"]
        raise GradcheckError(
            f"Consistency check failed: {bad[0].name}: {bad[0].lhs!r} vs {bad[0].rhs!r}"
            + "\n\n"
            + str(self)
        )

    def to_dict(self) -> dict:
        """Everything in the report as JSON-serialisable Python objects (NaN/inf -> None)."""
        return {
            "function": self.name,
            "ok": self.ok,
            "verdict": self.verdict,
            "order": self.order,
            "method": self.method,
            "dtype": str(self.dtype),
            "rtol": self.rtol,
            "atol": self.atol,
            "tolerance_rule": self.tolerance_rule,
            "fast_mode": self.fast_mode,
            "nfev": self.nfev,
            "seconds": self.seconds,
            "pairs": [p.to_dict() for p in self.pairs],
            "checks": [c.to_dict() for c in self.checks],
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        n_fail = sum(p.verdict == "fail" for p in self.pairs)
        return (
            f"<DerivativeReport {self.name}: {self.verdict.upper()}, {len(self.pairs)} "
            f"blocks, {n_fail} failed>"
        )

    def __str__(self) -> str:
        method = {
            "central": "central differences",
            "richardson": "Richardson extrapolation",
            "complex-step": "complex step, cross-checked with central differences",
        }
        head = (
            f"Derivative check of {self.name}: {self.verdict.upper()} (order {self.order}, "
            f"{method[self.method]}, {self.dtype})"
        )
        lines = [
            head,
            *textwrap.wrap(self.tolerance_rule, 96, initial_indent="  ", subsequent_indent="  "),
            "",
        ]
        w = max([len(p.label) for p in self.pairs] + [4]) + 2
        lines.append(
            f"  {'pair':<{w}}{'verdict':<14}{'out of tol':>14}   "
            f"{'max abs err (element)':<34}{'max rel err (element)'}"
        )
        for p in self.pairs:
            verdict = p.verdict.upper() if p.verdict == "fail" else p.verdict
            count = f"{p.n_out_of_tolerance}/{p.n_elements}"
            if p.max_abs_index is not None:
                ea = f"{_num(p.max_abs_error)} ({_label(p, p.max_abs_index)})"
                er = f"{_num(p.max_rel_error)} ({_label(p, p.max_rel_index)})"
            else:
                ea = er = "- (projection only)"
            lines.append(f"  {p.label:<{w}}{verdict:<14}{count:>14}   {ea:<34}{er}")
        lines.append("")
        lines.append(
            f"  {'pair':<{w}}{'worst element':<24}{'AD':>17}{'FD':>17}"
            f"{'FD err est':>12}{'step':>10}"
        )
        for p in self.pairs:
            e = p.worst
            if e is None:
                continue
            lines.append(
                f"  {p.label:<{w}}{e.label:<24}{e.ad:>17.9g}{e.fd:>17.9g}"
                f"{_num(e.fd_error):>12}{_num(e.step, 2):>10}"
            )
        bad = [p for p in self.pairs if p.verdict != "pass"]
        for p in bad:
            lines.append("")
            lines.append(
                f"  {p.label}: {p.n_failed} failed, {p.n_inconclusive} inconclusive "
                f"of {p.n_elements}; worst elements:"
            )
            lines.append(
                f"    {'element':<24}{'AD':>17}{'FD':>17}{'|AD-FD|':>11}{'FD err est':>12}  verdict"
            )
            for e in p.top:
                lines.append(
                    f"    {e.label:<24}{e.ad:>17.9g}{e.fd:>17.9g}"
                    f"{_num(e.abs_error):>11}{_num(e.fd_error):>12}  {e.verdict}"
                    + (f" ({e.note})" if e.note else "")
                )
        notes = [f"{p.label}: {n}" for p in self.pairs for n in p.notes]
        if self.checks:
            lines.append("")
            lines.append("  consistency checks (no finite differences):")
            for c in self.checks:
                lines.append(
                    f"    {c.name:<44}{c.lhs:>13.7g} vs {c.rhs:<13.7g} "
                    f"err {_num(c.abs_error, 2):<8} tol {_num(c.tolerance, 2):<8} "
                    f"{c.verdict}" + (f"  [{c.note}]" if c.note else "")
                )
        if self.notes or notes:
            lines.append("")
            lines.extend(f"  note: {n}" for n in self.notes + notes)
        n_fail = sum(p.verdict == "fail" for p in self.pairs)
        n_inc = sum(p.verdict == "inconclusive" for p in self.pairs)
        lines.append("")
        lines.append(
            f"  {len(self.pairs)} blocks: {len(self.pairs) - n_fail - n_inc} passed, "
            f"{n_fail} failed, {n_inc} inconclusive; {self.nfev} function evaluations "
            f"in {self.seconds:.2f} s"
        )
        return "\n".join(lines)

    # ------------------------------------------------------------------ step sweep
    def _pick(self, pair: Any) -> PairResult:
        if pair is None:
            order = {"fail": 0, "inconclusive": 1, "pass": 2}
            cands = [p for p in self.pairs if p.kind == "jacobian"] or self.pairs
            return sorted(
                cands, key=lambda p: (order[p.verdict], -(p.worst.rel_error if p.worst else 0.0))
            )[0]
        if isinstance(pair, PairResult):
            return pair
        if isinstance(pair, int):
            return self.pairs[pair]
        if isinstance(pair, str):
            for p in self.pairs:
                if p.label == pair:
                    return p
            raise ValueError(f"no pair labelled {pair!r}; labels: {[p.label for p in self.pairs]}")
        raise TypeError(f"pair must be None, an int, a label or a PairResult, got {pair!r}")

    def step_sweep(
        self,
        pair: Any = None,
        element: Any = None,
        *,
        steps: Sequence[float] | None = None,
        methods: Sequence[str] = _SWEEP_METHODS,
    ) -> StepSweep:
        """Error of forward, central and complex-step differences against AD, per step.

        Parameters
        ----------
        pair : int, str or PairResult, optional
            Which block (index into ``pairs`` or its label); default: the worst
            first-order block.
        element : tuple, optional
            ``(output_index, input_index)``; default: the worst element of the block
            (the largest AD value when the block was only projected).
        steps : sequence of float, optional
            Steps relative to the element's scale; default 10**-16 ... 10**0.
        methods : sequence of str
            Any of ``"forward"``, ``"central"``, ``"complex-step"`` (complex step only
            for first-order blocks whose function runs on complex ndarrays).

        Returns
        -------
        StepSweep
        """
        for m in methods:
            if m not in _SWEEP_METHODS:
                raise ValueError(f"methods must be among {_SWEEP_METHODS}, got {m!r}")
        p = self._pick(pair)
        target: _Target = p._target
        j = p.input
        ad_block = p._ad
        if element is None:
            if p.worst is not None:
                element = (p.worst.output_index, p.worst.input_index)
            else:
                flat = int(np.argmax(np.abs(ad_block))) if ad_block.size else 0
                ij = np.unravel_index(flat, ad_block.shape) if ad_block.size else ()
                no = len(p.output_shape)
                element = (tuple(ij[:no]), tuple(ij[no:]))
        out_idx, in_idx = (tuple(element[0]), tuple(element[1]))
        try:
            ad = float(ad_block[out_idx + in_idx])
        except IndexError:
            raise ValueError(
                f"element {element!r} is outside the block of shape "
                f"{p.output_shape} x {p.input_shape}"
            ) from None
        x = target.problem.x0[j]
        k = int(np.ravel_multi_index(in_idx, x.shape)) if x.ndim else 0
        q_off = int(sum(int(np.prod(s)) for s in target.out_shapes[: p._q]))
        row = q_off + (int(np.ravel_multi_index(out_idx, p.output_shape)) if out_idx else 0)
        xk = float(x.flat[k])
        scale = abs(xk) if xk != 0 else 1.0
        rel = np.asarray(steps if steps is not None else np.logspace(-16, 0, 33), dtype=float)
        hs = rel * scale
        notes: list[str] = []

        def at(value: Any, kind: Any = None) -> float:
            xj = x.copy() if kind is None else x.astype(kind)
            xj.flat[k] = value
            vals = list(target.problem.x0)
            vals[j] = xj
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with np.errstate(all="ignore"):
                    res = target.fd_eval(vals) if kind is None else target.fd_eval_complex(vals)
            return np.concatenate([np.ravel(v) for v in res])[row]

        tiny = max(abs(ad), np.finfo(float).tiny)
        f0 = at(x.dtype.type(xk))
        errors: dict[str, np.ndarray] = {}
        for m in methods:
            errs = np.full(hs.shape, np.nan)
            if m == "complex-step" and target.complex_ok is None:
                try:
                    _probe_complex(target, target.problem.x0)
                except ValueError as exc:
                    target.complex_ok = False
                    notes.append(str(exc))
            if m == "complex-step" and not target.complex_ok:
                if target.kind != "jacobian":
                    notes.append("complex step not available for second-order blocks")
                errors[m] = errs
                continue
            for i, h in enumerate(hs):
                try:
                    if m == "forward":
                        p1 = x.dtype.type(xk + h)
                        dxp = float(p1) - xk
                        d = (at(p1) - f0) / dxp if dxp else np.nan
                    elif m == "central":
                        p1, m1 = x.dtype.type(xk + h), x.dtype.type(xk - h)
                        dd = float(p1) - float(m1)
                        d = (at(p1) - at(m1)) / dd if dd else np.nan
                    else:
                        cdt = np.complex64 if x.dtype == np.float32 else np.complex128
                        d = float(np.imag(at(cdt(complex(xk, h)), kind=cdt))) / h
                except Exception as exc:  # noqa: BLE001  (a failed evaluation is a gap)
                    if m == "complex-step":
                        notes.append(f"complex step failed: {type(exc).__name__}: {exc}")
                        break
                    d = np.nan
                errs[i] = abs(d - ad) / tiny
            errors[m] = errs
        best_step: dict[str, float | None] = {}
        best_error: dict[str, float | None] = {}
        for m, e in errors.items():
            if np.any(np.isfinite(e)):
                i = int(np.nanargmin(e))
                best_step[m], best_error[m] = float(hs[i]), float(e[i])
            else:
                best_step[m] = best_error[m] = None
        used = None
        if p._steps is not None:
            used = float(p._steps[out_idx + in_idx])
        return StepSweep(
            label=p.label,
            element=target.element_label(p._q, j, out_idx, in_idx),
            x=xk,
            ad=ad,
            steps=hs,
            errors=errors,
            best_step=best_step,
            best_error=best_error,
            check_step=used,
            notes=notes,
        )

    def plot_step_sweep(
        self, path: Any, pair: Any = None, element: Any = None, **kwargs: Any
    ) -> Any:
        """Run :meth:`step_sweep` and draw its log-log chart to ``path``.

        Needs matplotlib (``pip install funcdiff[plot]``); returns ``path``.
        """
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "plot_step_sweep needs matplotlib, which is not installed; install the "
                "optional extra with `pip install funcdiff[plot]` (or `pip install matplotlib`)"
            ) from exc
        return self.step_sweep(pair, element, **kwargs).plot(path)


def _label(p: PairResult, idx: tuple) -> str:
    return p._target.element_label(p._q, p.input, idx[0], idx[1])


def _pair_message(p: PairResult) -> str:
    if p.kind == "hessian":
        i, jj = p._target.map[p._q]
        head = (
            f"Hessian mismatch for output {p._target.first.positions[i]} with respect to "
            f"inputs {p._target.problem.diff[jj]} and {p._target.problem.diff[p.input]} "
            f"({p.label})"
        )
    else:
        head = (
            f"Jacobian mismatch for output {p._target.positions[p._q]} with respect to "
            f"input {p._target.problem.diff[p.input]} ({p.label})"
        )
    rows = [
        f"{head},",
        f"{p.n_failed} of {p.n_elements} elements fail; max abs error "
        f"{_num(p.max_abs_error)} at {_label(p, p.max_abs_index)}"
        if p.max_abs_index is not None
        else f"{p.n_failed} elements fail",
    ]
    return "\n".join(rows)


# ====================================================================== judging a block
def _judge(
    target: _Target,
    q: int,
    j: int,
    ad: np.ndarray,
    fd: dict[str, np.ndarray],
    method: str,
    rtol: float | None,
    atol: float | None,
    top_k: int,
) -> PairResult:
    """Compare one AD block with its finite differences and summarise it."""
    out_shape = target.out_shapes[q]
    in_shape = target.problem.x0[j].shape
    shape = out_shape + in_shape
    dtype = _low_precision([target.out_dtypes[q], target.problem.x0[j].dtype])
    eps = _eps(dtype)
    rt = float(rtol) if rtol is not None else _RTOL.get(dtype, 1e-5)
    a = np.asarray(ad, dtype=np.float64).reshape(shape)
    get = {k: v.reshape(shape) for k, v in fd.items()}
    n = get["value"].copy()
    est = get["est"].copy()
    notes: list[str] = []

    def floor_of(vals: np.ndarray) -> float:
        fin = np.abs(vals[np.isfinite(vals)])
        big = float(fin.max()) if fin.size else 0.0
        if big == 0.0:
            fa = np.abs(a[np.isfinite(a)])
            big = float(fa.max()) if fa.size else 0.0
        return math.sqrt(eps) * big

    if method == "complex-step":
        c1, c1e = get["central"], get["central_est"]
        fl = atol if atol is not None else floor_of(c1)
        with np.errstate(invalid="ignore"):
            disagree = ~(np.abs(get["cs"] - c1) <= fl + rt * np.abs(c1) + _EST_FACTOR * c1e)
        disagree &= np.isfinite(c1)
        if np.any(disagree):
            notes.append(
                f"complex step disagreed with central differences at {int(disagree.sum())} "
                "element(s): the function is not analytic there (abs, comparisons, conj?); "
                "central differences used"
            )
        n = np.where(disagree, c1, get["cs"])
        est = np.where(disagree, c1e, 8 * eps * np.abs(get["cs"]) + np.finfo(float).tiny)

    scale_floor = floor_of(n)
    at = float(atol) if atol is not None else scale_floor
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.maximum(np.abs(a), np.abs(n))
        tol = at + rt * mag
        err = np.abs(a - n)
        rel = err / np.maximum(mag, max(scale_floor, np.finfo(float).tiny))
        fin_n = np.isfinite(n) & np.isfinite(est)
        fin_a = np.isfinite(a)
        kink = fin_n & (get["kink"] > np.maximum(tol, get["kink_floor"]))
        # AD outside the one-sided interval fails only beyond what the FD can resolve.
        margin = tol + _EST_FACTOR * get["central_est"]
        lo = np.minimum(get["fwd"], get["bwd"]) - margin
        hi = np.maximum(get["fwd"], get["bwd"]) + margin
        inside = (a >= lo) & (a <= hi)
        out = ~(err <= tol)
    state = np.zeros(shape, dtype=np.int8)  # 0 pass, 1 inconclusive, 2 fail
    smooth_bad = fin_n & fin_a & ~kink & out
    state[smooth_bad & (err <= _EST_FACTOR * est)] = 1
    state[smooth_bad & ~(err <= _EST_FACTOR * est)] = 2
    state[kink & fin_a & inside] = 1
    state[kink & fin_a & ~inside] = 2
    state[~fin_n] = 1
    state[fin_n & ~fin_a] = 2

    def reason(idx: tuple) -> str:
        if not fin_n[idx]:
            return "finite difference not finite"
        if not fin_a[idx]:
            return "AD value not finite"
        if kink[idx]:
            side = (
                f"one-sided differences {get['bwd'][idx]:.6g} (left), {get['fwd'][idx]:.6g} (right)"
            )
            if inside[idx]:
                return f"kink: {side}; not differentiable here"
            return f"kink, and AD is outside the {side}"
        if out[idx] and state[idx] == 1:
            return "FD error estimate as large as the mismatch"
        return ""

    size = int(np.prod(shape, dtype=np.int64))
    no = len(out_shape)

    def split(flat: int) -> tuple[tuple, tuple]:
        ij = np.unravel_index(flat, shape) if shape else ()
        return tuple(int(v) for v in ij[:no]), tuple(int(v) for v in ij[no:])

    def element(flat: int) -> ElementResult:
        idx = np.unravel_index(flat, shape) if shape else ()
        oi, ii = split(flat)
        return ElementResult(
            label=target.element_label(q, j, oi, ii),
            output_index=oi,
            input_index=ii,
            ad=float(a[idx]),
            fd=float(n[idx]),
            fd_error=float(est[idx]),
            abs_error=float(err[idx]),
            rel_error=float(rel[idx]),
            step=float(get["step"][idx]),
            verdict=("pass", "inconclusive", "fail")[state[idx]],
            note=reason(idx),
        )

    if size:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(tol > 0, err / tol, np.where(err > 0, np.inf, 0.0))
        ratio = np.where(np.isfinite(err), ratio, np.inf).ravel()
        flat_state = state.ravel()
        order = np.lexsort((-ratio, -flat_state))
        worst = element(int(order[0]))
        top = [element(int(k)) for k in order[:top_k] if flat_state[k] > 0]
        err_f = np.where(np.isfinite(err), err, -1.0).ravel()
        rel_f = np.where(np.isfinite(rel), rel, -1.0).ravel()
        ka, kr = int(np.argmax(err_f)), int(np.argmax(rel_f))
        max_abs, max_abs_idx = float(err.ravel()[ka]), split(ka)
        max_rel, max_rel_idx = float(rel.ravel()[kr]), split(kr)
        n_fail = int((state == 2).sum())
        n_inc = int((state == 1).sum())
        n_out = int((out | kink).sum())
        verdict = "fail" if n_fail else ("inconclusive" if n_inc else "pass")
    else:
        worst, top = None, []
        max_abs = max_rel = None
        max_abs_idx = max_rel_idx = None
        n_fail = n_inc = n_out = 0
        verdict = "pass"
    n_kink = int(kink.sum())
    if n_kink:
        notes.append(f"{n_kink} element(s) at or near a kink (one-sided differences disagree)")
    n_nonfinite = int((~fin_n).sum())
    if n_nonfinite:
        notes.append(f"finite differences not finite at {n_nonfinite} element(s)")
    return PairResult(
        kind=target.kind,
        label=target.pair_label(q, j),
        output=q,
        input=j,
        output_shape=out_shape,
        input_shape=in_shape,
        n_elements=size,
        n_out_of_tolerance=n_out,
        n_failed=n_fail,
        n_inconclusive=n_inc,
        max_abs_error=max_abs,
        max_abs_index=max_abs_idx,
        max_rel_error=max_rel,
        max_rel_index=max_rel_idx,
        worst=worst,
        top=top,
        verdict=verdict,
        rtol=rt,
        atol=at,
        notes=notes,
        _target=target,
        _q=q,
        _ad=a,
        _steps=get["step"],
    )


# ====================================================================== check_derivatives
def _row_eps(target: _Target, j: int) -> tuple[np.ndarray, np.dtype]:
    parts = []
    dts = [target.problem.x0[j].dtype]
    for s, d in zip(target.out_shapes, target.out_dtypes, strict=True):
        e = _eps(_low_precision([d, target.problem.x0[j].dtype]))
        parts.append(np.full(int(np.prod(s, dtype=np.int64)), e))
        dts.append(d)
    return (np.concatenate(parts) if parts else np.zeros(0)), _low_precision(dts)


def _split_rows(target: _Target, arr: np.ndarray) -> list[np.ndarray]:
    out = []
    start = 0
    for s in target.out_shapes:
        m = int(np.prod(s, dtype=np.int64))
        out.append(arr[start : start + m])
        start += m
    return out


def _check_target(
    target: _Target,
    ad_outs: list[Any],
    ins: list[Tensor],
    method: str,
    rtol: float | None,
    atol: float | None,
    fast_mode: bool,
    rng: np.random.Generator,
    step: float | None,
    top_k: int,
    f0: list[np.ndarray],
) -> list[PairResult]:
    """Every (output, input) block of ``target``, element-wise or projected first."""
    problem = target.problem
    nd = len(problem.x0)
    fd_method = (
        method if target.kind == "jacobian" else ("central" if method == "complex-step" else method)
    )
    results: dict[tuple[int, int], PairResult] = {}
    rows_cache: dict[int, list[np.ndarray]] = {}

    def rows(q: int) -> list[np.ndarray]:
        if q not in rows_cache:
            rows_cache[q] = _vjp_rows(ad_outs[q], ins)
        return rows_cache[q]

    for j in range(nd):
        row_eps, low = _row_eps(target, j)
        base = _step_base(fd_method, low, step)
        elementwise = set(range(len(ad_outs)))
        fast_info: dict[int, str] = {}
        if fast_mode and problem.x0[j].size > 1:
            x = problem.x0[j]
            s = np.abs(x)
            typ = _typical(x.ravel())
            s = np.where(s > 0, s, typ if typ > 0 else 1.0)
            u = rng.choice([-1.0, 1.0], size=x.shape)
            d = u * s
            t = _pow2(base)
            q_all = _fd_direction(target, j, d, t, fd_method, f0, row_eps)
            elementwise = set()
            for q, (val, e1) in enumerate(
                zip(
                    _split_rows(target, q_all["value"]),
                    _split_rows(target, q_all["est"]),
                    strict=True,
                )
            ):
                v = rng.choice([-1.0, 1.0], size=val.shape)
                o = ad_outs[q]
                if isinstance(o, Tensor) and o.requires_grad:
                    (gj,) = grad(
                        o,
                        [ins[j]],
                        np.asarray(v.reshape(target.out_shapes[q]), dtype=o.dtype),
                        retain_graph=True,
                        allow_unused=True,
                    )
                    vj = np.zeros(x.shape) if gj is None else gj.data.astype(np.float64)
                else:
                    vj = np.zeros(x.shape)
                a_proj = float(np.sum(vj * d))
                scale = float(np.sum(np.abs(vj * d)))
                n_proj = float(np.sum(v * val))
                est = float(np.sum(np.abs(e1)))
                dt = _low_precision([target.out_dtypes[q], x.dtype])
                rt = float(rtol) if rtol is not None else _RTOL.get(dt, 1e-5)
                mismatch = abs(a_proj - n_proj)
                agrees = mismatch <= _EST_FACTOR * est + 10 * _eps(dt) * scale
                certified = _EST_FACTOR * est <= rt * scale if scale > 0 else est == 0
                info = f"projection v^T J d: AD {a_proj:.9g}, FD {n_proj:.9g}, FD err est {est:.2g}"
                if agrees and certified and math.isfinite(n_proj):
                    results[(q, j)] = PairResult(
                        kind=target.kind,
                        label=target.pair_label(q, j),
                        output=q,
                        input=j,
                        output_shape=target.out_shapes[q],
                        input_shape=x.shape,
                        n_elements=int(np.prod(target.out_shapes[q] + x.shape)),
                        n_out_of_tolerance=0,
                        n_failed=0,
                        n_inconclusive=0,
                        max_abs_error=None,
                        max_abs_index=None,
                        max_rel_error=None,
                        max_rel_index=None,
                        worst=None,
                        top=[],
                        verdict="pass",
                        rtol=rt,
                        atol=float(atol) if atol is not None else 0.0,
                        fast_mode=True,
                        notes=[f"fast mode: checked along one random direction ({info})"],
                        _target=target,
                        _q=q,
                        _ad=None,
                        _steps=None,
                    )
                else:
                    why = "mismatch" if not agrees else "FD not accurate enough to certify"
                    fast_info[q] = (
                        f"fast mode flagged this block ({why}; {info}); re-run element-wise"
                    )
                    elementwise.add(q)
        if not elementwise:
            continue
        rt_j = float(rtol) if rtol is not None else _RTOL.get(low, 1e-5)
        fd = _fd_elementwise(target, j, fd_method, f0, base, row_eps, rt_j)
        offsets = np.cumsum([0] + [int(np.prod(s, dtype=np.int64)) for s in target.out_shapes])
        for q in sorted(elementwise):
            block = {k: v[offsets[q] : offsets[q + 1]] for k, v in fd.items()}
            ad_block = rows(q)[j]
            res = _judge(target, q, j, ad_block, block, fd_method, rtol, atol, top_k)
            if q in fast_info:
                res.notes.insert(0, fast_info[q])
                res.fast_mode = True
            results[(q, j)] = res
    for res in results.values():
        if res._ad is None:
            res._ad = rows(res.output)[res.input]
    return [results[key] for key in sorted(results, key=lambda k: (k[0], k[1]))]


def _dot_test(
    name: str, outs: list[Any], ins: list[Tensor], rng: np.random.Generator, eps: float
) -> ConsistencyCheck:
    """<u, J v> (double-backward jvp) against <J^T u, v> (vjp), for random u and v."""
    vs = [rng.standard_normal(t.shape) for t in ins]
    us = [rng.standard_normal(np.shape(_data(o))) for o in outs]
    jv = _jvp(outs, ins, vs)
    lhs_terms = [u * w for u, w in zip(us, jv, strict=True)]
    live = [
        (o, u) for o, u in zip(outs, us, strict=True) if isinstance(o, Tensor) and o.requires_grad
    ]
    rhs_terms = []
    if live:
        gs = grad(
            [o for o, _ in live],
            ins,
            [np.asarray(u, dtype=o.dtype) for o, u in live],
            retain_graph=True,
            allow_unused=True,
        )
        rhs_terms = [np.zeros(1) if g is None else g.data * v for g, v in zip(gs, vs, strict=True)]
    lhs = float(sum(np.sum(t) for t in lhs_terms))
    rhs = float(sum(np.sum(t) for t in rhs_terms))
    scale = float(sum(np.sum(np.abs(t)) for t in lhs_terms + rhs_terms))
    tol = 1e3 * eps * scale
    err = abs(lhs - rhs)
    return ConsistencyCheck(name, lhs, rhs, err, tol, "pass" if err <= tol else "fail")


def check_derivatives(
    func: Callable[..., Any],
    inputs: Any,
    *,
    order: int = 1,
    method: str = "central",
    rtol: float | None = None,
    atol: float | None = None,
    fast_mode: bool = False,
    seed: int = 0,
    argnums: int | Sequence[int] | None = None,
    step: float | None = None,
    top_k: int = 5,
) -> DerivativeReport:
    """Compare funcdiff's derivatives of ``func`` with finite differences, element by element.

    Parameters
    ----------
    func : callable
        ``func(*inputs)`` written with NumPy calls; returns an array, a Tensor, a number,
        or a tuple/list of those.
    inputs : array_like, Tensor or tuple
        A tuple holds one entry per positional argument; anything else is one argument.
        Numeric entries are differentiated (integers are promoted to float64); other
        objects are passed unchanged. If some entries are Tensors with
        ``requires_grad=True``, only those are differentiated.
    order : {1, 2}
        1 checks the Jacobian blocks. 2 also checks the Hessian blocks (the Jacobian of
        the AD gradient, by finite differences of the gradient; a vector output is first
        scalarised with a seeded random weight ``w``), the symmetry of the Hessian, and
        jvp/vjp and hvp/vhp consistency (dot-product tests, no finite differences).
    method : {"central", "richardson", "complex-step"}
        Central differences with an error estimate; Richardson extrapolation (more
        accurate, 6 evaluations per element); complex step (``func`` must run on complex
        ndarrays; every element is cross-checked against central differences).
    rtol, atol : float, optional
        Element tolerances: pass if ``|AD - FD| <= atol + rtol*max(|AD|, |FD|)``.
        Default rtol 1e-5 (float64) or 2e-3 (float32); default atol
        ``sqrt(eps) * max|FD|`` of each block.
    fast_mode : bool
        Check each (output, input) block along one random direction (seeded) first, and
        re-run element-wise only the blocks whose projection disagrees with finite
        differences beyond their error estimate (or cannot certify it), so the report
        still names the worst element.
    seed : int
        Seed of the random directions and weights.
    argnums : int or sequence of int, optional
        Differentiate only these positional inputs.
    step : float, optional
        Relative step ``c`` (``h = c*max(|x|, 1)`` or ``c*|x|``); default by dtype.
    top_k : int
        How many of the worst elements to keep per block.

    Returns
    -------
    DerivativeReport
        ``str(report)`` is a table; ``report.ok``; ``report.raise_if_failed()``;
        ``report.to_dict()``; ``report.step_sweep()``; ``report.plot_step_sweep(path)``.

    Examples
    --------
    >>> import numpy as np
    >>> from funcdiff.check import check_derivatives
    >>> report = check_derivatives(lambda x: np.sum(np.sin(x) * x), np.array([0.5, 2.0]))
    >>> report.ok, report.verdict
    (True, 'pass')
    >>> check_derivatives(np.abs, 0.0).verdict
    'inconclusive'
    """
    start = time.perf_counter()
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if rtol is not None and not rtol >= 0:
        raise ValueError(f"rtol must be a non-negative number, got {rtol!r}")
    if atol is not None and not atol >= 0:
        raise ValueError(f"atol must be a non-negative number, got {atol!r}")
    if step is not None and not step > 0:
        raise ValueError(f"step must be a positive number, got {step!r}")
    problem = _Problem(func, inputs, argnums)
    rng = np.random.default_rng(seed)
    first = _FirstOrder(problem)
    ins = [tensor(x, requires_grad=True) for x in problem.x0]
    with enable_grad():
        raw = problem.call(ins)
    first.setup(raw)
    ad_outs = [raw[k] for k in first.positions]
    notes = list(first.notes)
    checks: list[ConsistencyCheck] = []
    dtype = _low_precision([x.dtype for x in problem.x0] + first.out_dtypes)
    eps = _eps(dtype)

    f0 = first.fd_eval(problem.x0)
    first.nfev -= 1
    ad_vals = [np.asarray(_data(o), dtype=np.float64) for o in ad_outs]
    if first.primal_numpy is not None:
        diffs = [np.max(np.abs(a - b), initial=0.0) for a, b in zip(ad_vals, f0, strict=True)]
        mags = [np.max(np.abs(b), initial=0.0) for b in f0]
        err, mag = float(max(diffs)), float(max(mags))
        tol = math.sqrt(eps) * mag  # a rule computing the same value differently is fine
        checks.append(
            ConsistencyCheck(
                "forward values: Tensors vs plain NumPy",
                float(ad_vals[0].ravel()[0]) if ad_vals[0].size else 0.0,
                float(f0[0].ravel()[0]) if f0[0].size else 0.0,
                err,
                tol,
                "pass" if err <= tol else "fail",
            )
        )

    if method == "complex-step":
        _probe_complex(first, problem.x0)

    with enable_grad():
        pairs = _check_target(
            first, ad_outs, ins, method, rtol, atol, fast_mode, rng, step, top_k, f0
        )
    nfev = first.nfev
    if order == 2:
        weights = []
        for o in ad_outs:
            shape = np.shape(_data(o))
            weights.append(
                None if len(shape) == 0 or int(np.prod(shape)) == 1 else rng.standard_normal(shape)
            )
        second = _SecondOrder(problem, first, weights)
        if any(w is not None for w in weights):
            notes.append(
                "vector outputs were scalarised as w.f with a seeded random weight w "
                "for the second-order checks"
            )
        if method == "complex-step":
            notes.append(
                "Hessian blocks use central differences of the AD gradient "
                "(the complex step needs a complex-valued gradient)"
            )
        ins2 = [tensor(x, requires_grad=True) for x in problem.x0]
        with enable_grad():
            outs2 = second.ad_outputs(ins2)
            g0 = second.fd_eval(problem.x0)
            second.nfev -= 1
            pairs += _check_target(
                second, outs2, ins2, method, rtol, atol, fast_mode, rng, step, top_k, g0
            )
            checks.extend(_second_order_checks(first, second, ad_outs, ins, outs2, ins2, rng, eps))
        nfev += second.nfev
    return DerivativeReport(
        name=problem.name,
        order=order,
        method=method,
        dtype=dtype,
        pairs=pairs,
        checks=checks,
        notes=notes,
        rtol=float(rtol) if rtol is not None else _RTOL.get(dtype, 1e-5),
        atol=atol,
        nfev=nfev,
        seconds=time.perf_counter() - start,
        fast_mode=fast_mode,
    )


def _probe_complex(first: _FirstOrder, x0: list[np.ndarray]) -> bool:
    """Run func once on complex ndarrays; raise a clear error if it cannot."""
    xs = [x.astype(np.complex64 if x.dtype == np.float32 else np.complex128) for x in x0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.ComplexWarning)
            outs = first.fd_eval_complex(xs)
        first.nfev -= 1
    except Exception as exc:
        first.complex_ok = False
        raise ValueError(
            f"method='complex-step' needs {first.problem.name} to run on complex ndarrays, "
            f"but calling it on complex inputs raised {type(exc).__name__}: {exc}"
        ) from exc
    for o, s in zip(outs, first.out_shapes, strict=True):
        if np.shape(o) != s:
            first.complex_ok = False
            raise ValueError(
                f"method='complex-step': {first.problem.name} returned shape {np.shape(o)} "
                f"on complex inputs, {s} on real ones"
            )
    first.complex_ok = True
    return True


def _second_order_checks(
    first: _FirstOrder,
    second: _SecondOrder,
    ad_outs: list[Any],
    ins: list[Tensor],
    outs2: list[Any],
    ins2: list[Tensor],
    rng: np.random.Generator,
    eps: float,
) -> list[ConsistencyCheck]:
    checks = []
    with enable_grad():
        checks.append(_dot_test("dot product <u, J v> = <J^T u, v>", ad_outs, ins, rng, eps))
        # Hessian symmetry, block by block.
        nd = len(ins2)
        worst, mag = 0.0, 0.0
        blocks = {}
        for q, g in enumerate(outs2):
            i, jj = second.map[q]
            for k, b in enumerate(_vjp_rows(g, ins2)):
                blocks[(i, jj, k)] = b
                mag = max(mag, float(np.max(np.abs(b), initial=0.0)))
        for (i, jj, k), b in blocks.items():
            other = blocks[(i, k, jj)]
            nj, nk = ins2[jj].ndim, ins2[k].ndim
            perm = tuple(range(nk, nk + nj)) + tuple(range(nk))
            bt = np.transpose(other, perm) if other.ndim else other
            worst = max(worst, float(np.max(np.abs(b - bt), initial=0.0)))
        tol = math.sqrt(eps) * mag
        checks.append(
            ConsistencyCheck(
                "Hessian symmetry max|H - H^T|",
                worst,
                0.0,
                worst,
                tol,
                "pass" if worst <= tol else "fail",
            )
        )
        # hvp (double-backward trick on the gradient) against vhp (reverse over reverse).
        vs = [rng.standard_normal(t.shape) for t in ins2]
        by_out: dict[int, list[int]] = {}
        for q, (i, _) in enumerate(second.map):
            by_out.setdefault(i, []).append(q)
        for qs in by_out.values():
            grads_i = [outs2[q] for q in qs]
            name = f"hvp = vhp for {second.out_labels[qs[0]]}" if nd else "hvp"
            try:
                hv = _jvp(grads_i, ins2, vs)
                live = [
                    (g, v)
                    for g, v in zip(grads_i, vs, strict=True)
                    if isinstance(g, Tensor) and g.requires_grad
                ]
                vh = [np.zeros(t.shape) for t in ins2]
                if live:
                    res = grad(
                        [g for g, _ in live],
                        ins2,
                        [np.asarray(v, dtype=g.dtype) for g, v in live],
                        retain_graph=True,
                        allow_unused=True,
                    )
                    vh = [
                        np.zeros(t.shape) if r is None else r.data
                        for r, t in zip(res, ins2, strict=True)
                    ]
                err = max(
                    float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(hv, vh, strict=True)
                )
                big = max(float(np.max(np.abs(a), initial=0.0)) for a in hv + vh)
                tol = math.sqrt(eps) * big
                lhs = float(sum(np.sum(a) for a in hv))
                rhs = float(sum(np.sum(b) for b in vh))
                checks.append(
                    ConsistencyCheck(name, lhs, rhs, err, tol, "pass" if err <= tol else "fail")
                )
            except (NotImplementedError, RuntimeError, TypeError) as exc:
                checks.append(
                    ConsistencyCheck(
                        name,
                        math.nan,
                        math.nan,
                        math.nan,
                        math.nan,
                        "inconclusive",
                        f"third-order pass failed: {exc}",
                    )
                )
    return checks


# ====================================================================== gradcheck
def _gc_inputs(inputs: Any) -> tuple:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _gc_outputs(result: Any) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _gc_table(
    a: np.ndarray,
    n: np.ndarray,
    out_shape: tuple,
    in_shape: tuple,
    atol: float,
    rtol: float,
    k: int = 5,
) -> str:
    err = np.abs(a - n)
    tol = atol + rtol * np.abs(n)
    bad = ~(err <= tol)
    nbad = int(bad.sum())
    lines = [
        f"{nbad} of {a.size} elements differ by more than atol + rtol*|numerical| "
        f"(atol={atol:g}, rtol={rtol:g})."
    ]
    if a.size:
        score = np.where(np.isfinite(err), err, np.inf).ravel()
        order = np.argsort(-score, kind="stable")[:k]
        no = len(out_shape)
        ka = int(order[0])
        ij = np.unravel_index(ka, a.shape) if a.ndim else ()
        lines.append(
            f"max abs error {_num(err.ravel()[ka])} at output index "
            f"{tuple(int(v) for v in ij[:no])}, input index "
            f"{tuple(int(v) for v in ij[no:])}."
        )
        lines.append(
            f"  {'output':<14}{'input':<14}{'analytical':>17}{'numerical':>17}{'abs err':>11}"
        )
        for f in order:
            if not bad.ravel()[f] and nbad:
                continue
            ij = np.unravel_index(int(f), a.shape) if a.ndim else ()
            oi = str(tuple(int(v) for v in ij[:no]))
            ii = str(tuple(int(v) for v in ij[no:]))
            lines.append(
                f"  {oi:<14}{ii:<14}{a.ravel()[f]:>17.9g}{n.ravel()[f]:>17.9g}"
                f"{_num(err.ravel()[f]):>11}"
            )
    return "\n".join(lines)


def _gc_numerical(
    func: Callable, tupled: tuple, diff: list[int], eps: float, out_meta: list[tuple]
) -> dict[tuple[int, int], np.ndarray]:
    """torch's slow-mode numerical Jacobian: central differences with absolute ``eps``."""
    result = {}

    def run(j: int, arr: np.ndarray) -> list[np.ndarray]:
        args = list(tupled)
        t = tupled[j]
        args[j] = tensor(arr, requires_grad=t.requires_grad)
        with enable_grad():
            outs = _gc_outputs(func(*args))
        vals = []
        for pos, shape, dtype in out_meta:
            o = outs[pos]
            d = _data(o)
            if d.shape != shape or d.dtype != dtype:
                raise GradcheckError(
                    "Expected `func` to return outputs with the same shape and dtype when "
                    f"inputs are perturbed: output {pos} had shape {shape} and dtype {dtype}, "
                    f"but {d.shape} and {d.dtype} after perturbing input {j}"
                )
            vals.append(np.asarray(d, dtype=np.float64))
        return vals

    for j in diff:
        x = tupled[j].data
        cols = [np.zeros((int(np.prod(s, dtype=np.int64)), x.size)) for _, s, _ in out_meta]
        for k in range(x.size):
            xp = x.copy()
            xp.flat[k] = xp.flat[k] + eps
            xm = x.copy()
            xm.flat[k] = xm.flat[k] - eps
            for c, vp, vm in zip(cols, run(j, xp), run(j, xm), strict=True):
                c[:, k] = ((vp - vm) / (2 * eps)).ravel()
        for i, ((_, s, _), c) in enumerate(zip(out_meta, cols, strict=True)):
            result[(i, j)] = c.reshape(s + x.shape)
    return result


def gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
    seed: int = 0,
) -> bool:
    """Check analytical Jacobians against central finite differences (torch's gradcheck).

    Only Tensor inputs with ``requires_grad=True`` are checked. The numerical Jacobian
    uses central differences with the absolute step ``eps``; an element passes if
    ``|analytical - numerical| <= atol + rtol * |numerical|``. For relative steps,
    error estimates and a full report, use :func:`check_derivatives`.

    Parameters
    ----------
    func : callable
        Takes the inputs, returns a Tensor or a tuple of Tensors.
    inputs : Tensor or tuple of Tensor
        Inputs; the ones requiring grad are checked, others are constants.
    eps, atol, rtol : float
        Step and tolerances (torch's defaults, tuned for float64).
    raise_exception : bool
        Raise :class:`GradcheckError` on failure (else return False).
    nondet_tol : float
        Tolerance for two identical backward passes to differ (reentrancy check).
    check_undefined_grad : bool
        For multi-output functions, a zero cotangent on each output in turn must give
        finite gradients (funcdiff fills missing cotangents with zeros).
    check_grad_dtypes : bool
        Gradients must have their input's dtype.
    check_batched_grad : bool
        The batched backward (``is_grads_batched``) must equal a loop of backward passes.
    check_batched_forward_grad : bool
        A batch of forward-mode products must equal a loop of single ones (needs
        ``check_forward_ad``).
    check_forward_ad : bool
        Also compare Jacobian columns from funcdiff's forward-mode products (the
        double-backward trick, as ``funcdiff.functional.jvp``).
    check_backward_ad : bool
        Compare reverse-mode Jacobians (the default).
    fast_mode : bool
        Compare ``v^T J u`` for random unit ``u``, ``v`` (seeded by ``seed``) instead of full
        Jacobians; a failing pair is re-checked element-wise for the message. A
        projection can hide an error in a small component; ``check_derivatives(...,
        fast_mode=True)`` guards against that with error estimates.
    masked : None or bool
        Accepted for compatibility; funcdiff has no sparse tensors, so it has no effect.
    seed : int
        Seed of the random vectors of fast mode (a funcdiff addition).

    Returns
    -------
    bool
        True if every check passed; False if one failed and ``raise_exception=False``.

    Raises
    ------
    GradcheckError
        Message ``Jacobian mismatch for output i with respect to input j,`` and a table
        of the worst elements.

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.check import gradcheck
    >>> x = fd.tensor([0.3, -1.2, 2.0], requires_grad=True)
    >>> gradcheck(lambda t: np.sin(t) * t, (x,))
    True
    """
    try:
        return _gradcheck(
            func,
            inputs,
            eps=eps,
            atol=atol,
            rtol=rtol,
            nondet_tol=nondet_tol,
            check_undefined_grad=check_undefined_grad,
            check_grad_dtypes=check_grad_dtypes,
            check_batched_grad=check_batched_grad,
            check_batched_forward_grad=check_batched_forward_grad,
            check_forward_ad=check_forward_ad,
            check_backward_ad=check_backward_ad,
            fast_mode=fast_mode,
            seed=seed,
        )
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck(
    func: Callable,
    inputs: Any,
    *,
    eps: float,
    atol: float,
    rtol: float,
    nondet_tol: float,
    check_undefined_grad: bool,
    check_grad_dtypes: bool,
    check_batched_grad: bool,
    check_batched_forward_grad: bool,
    check_forward_ad: bool,
    check_backward_ad: bool,
    fast_mode: bool,
    seed: int,
) -> bool:
    if not callable(func):
        raise TypeError(f"func must be callable, got {type(func).__name__}")
    if not check_forward_ad and not check_backward_ad:
        raise ValueError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True"
        )
    if check_batched_grad and not check_backward_ad:
        raise ValueError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise ValueError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to be True"
        )
    if not eps > 0:
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    tupled = _gc_inputs(inputs)
    diff = [i for i, t in enumerate(tupled) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, "
            "but none of the them have requires_grad=True."
        )
    for i in diff:
        if tupled[i].dtype != np.float64:
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point. "
                "gradcheck's default eps and tolerances are tuned for float64 and will likely "
                "fail (use check_derivatives, whose steps and tolerances follow the dtype).",
                UserWarning,
                stacklevel=3,
            )
    ins = [tupled[i] for i in diff]
    with enable_grad():
        outs = _gc_outputs(func(*tupled))
    meta = []
    for pos, o in enumerate(outs):
        if _is_float_output(o) and _data(o).dtype.kind == "f":
            d = _data(o)
            meta.append((pos, d.shape, d.dtype))
    if not meta:
        raise ValueError("gradcheck: func returned no floating-point output")
    diff_outs = [outs[pos] for pos, _, _ in meta]
    differentiable = [isinstance(o, Tensor) and o.requires_grad for o in diff_outs]

    if fast_mode:
        _gc_fast(func, tupled, diff, ins, diff_outs, meta, eps, atol, rtol, seed)
    else:
        numerical = _gc_numerical(func, tupled, diff, eps, meta)
        if check_backward_ad:
            with enable_grad():
                analytical = [_vjp_rows(o, ins) for o in diff_outs]
            _gc_compare(analytical, numerical, meta, diff, atol, rtol, "", differentiable)
            with enable_grad():
                again = [_vjp_rows(o, ins) for o in diff_outs]
            for a_i, b_i in zip(analytical, again, strict=True):
                for a, b in zip(a_i, b_i, strict=True):
                    if a.size and float(np.max(np.abs(a - b))) > nondet_tol:
                        raise GradcheckError(
                            "Backward is not reentrant, i.e., running backward with same input "
                            "and grad_output multiple times gives different values, although "
                            "analytical gradient matches numerical gradient. The tolerance for "
                            f"nondeterminism was {nondet_tol}."
                        )
            if check_batched_grad:
                with enable_grad():
                    looped = [_vjp_rows_looped(o, ins) for o in diff_outs]
                    try:
                        batched = [_vjp_rows(o, ins, force_batched=True) for o in diff_outs]
                    except Exception as exc:  # noqa: BLE001  (reported as the check's failure)
                        raise GradcheckError(
                            "While computing batched gradients (is_grads_batched=True), got: "
                            f"{type(exc).__name__}: {exc}"
                        ) from exc
                for i, (a_i, b_i) in enumerate(zip(batched, looped, strict=True)):
                    for j, (a, b) in zip(diff, zip(a_i, b_i, strict=True), strict=True):
                        if not np.allclose(
                            a, b, rtol=1e-12, atol=1e-12 * (1 + np.abs(b).max(initial=0))
                        ):
                            raise GradcheckError(
                                f"Batched grad mismatch for output {meta[i][0]} with respect "
                                f"to input {j}: the batched backward (is_grads_batched=True) "
                                "differs from a loop of backward passes.\n"
                                + _gc_table(a, b, meta[i][1], tupled[j].shape, 1e-12, 1e-12)
                            )
        if check_forward_ad:
            with enable_grad():
                fwd = [[None] * len(ins) for _ in diff_outs]
                for jj, t in enumerate(ins):
                    basis = _basis(t.size, 0, t.size, t.shape, np.float64)
                    dirs = [
                        basis if k == jj else np.zeros((t.size,) + u.shape)
                        for k, u in enumerate(ins)
                    ]
                    cols = _jvp(diff_outs, ins, dirs, batched=True)
                    if check_batched_forward_grad:
                        _gc_batched_forward(diff_outs, ins, dirs, meta, diff[jj], t.shape)
                    for i, c in enumerate(cols):
                        # c: (n_in, *out_shape) -> out_shape + in_shape
                        c = np.moveaxis(c.reshape((t.size, -1)), 0, -1)
                        fwd[i][jj] = c.reshape(meta[i][1] + t.shape)
            _gc_compare(
                fwd,
                numerical,
                meta,
                diff,
                atol,
                rtol,
                "computed with forward mode ",
                differentiable,
            )
    if check_backward_ad:
        _gc_backward_sanity(diff_outs, ins, meta, diff, check_undefined_grad, check_grad_dtypes)
    return True


def _gc_batched_forward(
    diff_outs: list,
    ins: list[Tensor],
    dirs: list[np.ndarray],
    meta: list,
    j: int,
    in_shape: tuple,
) -> None:
    """A batch of forward-mode products must equal a loop of single ones."""
    try:
        batched = _jvp(diff_outs, ins, dirs, batched=True, force_batched=True)
    except Exception as exc:  # noqa: BLE001  (reported as the check's failure)
        raise GradcheckError(
            "While computing batched forward-mode products (is_grads_batched=True), got: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for b in range(len(dirs[0])):
        single = _jvp(diff_outs, ins, [d[b] for d in dirs])
        for i, (bat, one) in enumerate(zip(batched, single, strict=True)):
            scale = 1.0 + float(np.max(np.abs(one), initial=0.0))
            if not np.allclose(bat[b], one, rtol=1e-12, atol=1e-12 * scale):
                raise GradcheckError(
                    f"Batched forward grad mismatch for output {meta[i][0]} with respect to "
                    f"input {j}, column {np.unravel_index(b, in_shape)}: the batched "
                    "forward-mode product differs from a single one"
                )


def _gc_compare(
    analytical: list,
    numerical: dict,
    meta: list,
    diff: list[int],
    atol: float,
    rtol: float,
    mode: str,
    differentiable: list[bool],
) -> None:
    for i, (pos, shape, _) in enumerate(meta):
        for jj, j in enumerate(diff):
            a = analytical[i][jj]
            n = numerical[(i, j)]
            if np.allclose(a, n, rtol=rtol, atol=atol):
                continue
            if not differentiable[i] and not mode:
                head = (
                    f"Jacobian mismatch for output {pos} with respect to input {j},\n"
                    "Numerical gradient for function expected to be zero (the analytical "
                    "gradient is zero: the output does not depend on this input in the "
                    "recorded graph)."
                )
            else:
                head = f"Jacobian {mode}mismatch for output {pos} with respect to input {j},"
            raise GradcheckError(
                head + "\n" + _gc_table(a, n, shape, a.shape[len(shape) :], atol, rtol)
            )


def _gc_backward_sanity(
    diff_outs: list,
    ins: list[Tensor],
    meta: list,
    diff: list[int],
    check_undefined_grad: bool,
    check_grad_dtypes: bool,
) -> None:
    live = [o for o in diff_outs if isinstance(o, Tensor) and o.requires_grad]
    if not live:
        return
    with enable_grad():
        zeros = [np.zeros(o.shape, dtype=o.dtype) for o in live]
        gs = grad(live, ins, zeros, retain_graph=True, allow_unused=True)
    for j, (t, g) in zip(diff, zip(ins, gs, strict=True), strict=True):
        if g is None:
            continue
        if g.shape != t.shape:
            raise GradcheckError(
                f"Analytical gradient has incorrect size: input {j} has shape "
                f"{t.shape}, its gradient {g.shape}"
            )
        if check_grad_dtypes and g.dtype != t.dtype:
            raise GradcheckError(
                f"Gradient has dtype mismatch: input {j} is {t.dtype}, its gradient {g.dtype}"
            )
        if np.any(g.data != 0):
            raise GradcheckError(
                f"backward not multiplied by grad_output: zero cotangents gave a nonzero "
                f"gradient for input {j} (max {float(np.max(np.abs(g.data))):.3g})"
            )
    if check_undefined_grad and len(live) > 1:
        rng = np.random.default_rng(0)
        for k in range(len(live)):
            cot = [
                np.zeros(o.shape, dtype=o.dtype)
                if m == k
                else rng.standard_normal(o.shape).astype(o.dtype)
                for m, o in enumerate(live)
            ]
            with enable_grad():
                gs = grad(live, ins, cot, retain_graph=True, allow_unused=True)
            for j, g in zip(diff, gs, strict=True):
                if g is not None and not np.all(np.isfinite(g.data)):
                    raise GradcheckError(
                        "Expected backward function to handle undefined output grads: with a "
                        f"zero cotangent for output {meta[k][0]}, the gradient of input {j} "
                        "is not finite"
                    )


def _gc_fast(
    func: Callable,
    tupled: tuple,
    diff: list[int],
    ins: list[Tensor],
    diff_outs: list,
    meta: list,
    eps: float,
    atol: float,
    rtol: float,
    seed: int,
) -> None:
    """torch's fast mode: ``v^T J u`` against a central difference along ``u``.

    A projection that fails torch's rule is re-checked element-wise for the message.
    So is one that passes it but differs from the difference quotient by more than
    the quotient's own error (from a second step 2*eps): a projection hides a wrong
    small component under the tolerance of the large ones, the error estimate does not.
    """
    rng = np.random.default_rng(seed)
    us = []
    for t in ins:
        u = rng.standard_normal(t.shape)
        us.append(u / max(float(np.linalg.norm(u)), 1e-300))
    vs = []
    for _, shape, _ in meta:
        v = rng.standard_normal(shape)
        vs.append(v / max(float(np.linalg.norm(v)), 1e-300))
    # Analytical: one backward pass per output gives v^T J for every input.
    proj_a = np.zeros((len(meta), len(ins)))
    scale = np.zeros_like(proj_a)
    with enable_grad():
        for i, o in enumerate(diff_outs):
            if isinstance(o, Tensor) and o.requires_grad:
                gs = grad(
                    o, ins, np.asarray(vs[i], dtype=o.dtype), retain_graph=True, allow_unused=True
                )
                for jj, g in enumerate(gs):
                    if g is not None:
                        proj_a[i, jj] = float(np.sum(g.data * us[jj]))
                        scale[i, jj] = float(np.sum(np.abs(g.data * us[jj])))
    proj_n = np.zeros_like(proj_a)
    proj_est = np.zeros_like(proj_a)
    for jj, j in enumerate(diff):
        vals = {}
        for step in (1, -1, 2, -2):
            args = list(tupled)
            arr = (tupled[j].data + step * eps * us[jj]).astype(tupled[j].dtype)
            args[j] = tensor(arr, requires_grad=True)
            with enable_grad():
                outs = _gc_outputs(func(*args))
            vals[step] = [np.asarray(_data(outs[pos]), dtype=np.float64) for pos, _, _ in meta]
        for i, (_, _, dt) in enumerate(meta):
            d1 = (vals[1][i] - vals[-1][i]) / (2 * eps)
            d2 = (vals[2][i] - vals[-2][i]) / (4 * eps)
            proj_n[i, jj] = float(np.sum(vs[i] * d1))
            fmax = max(float(np.max(np.abs(vals[s][i]), initial=0.0)) for s in vals)
            noise = 2 * _eps(_low_precision([dt, tupled[j].dtype])) * fmax / eps
            proj_est[i, jj] = abs(float(np.sum(vs[i] * (d1 - d2)))) + noise * float(
                np.sum(np.abs(vs[i]))
            )
    for i, (pos, shape, dt) in enumerate(meta):
        for jj, j in enumerate(diff):
            a, n = proj_a[i, jj], proj_n[i, jj]
            torch_ok = abs(a - n) <= atol + rtol * abs(n)
            est_ok = abs(a - n) <= (_EST_FACTOR * proj_est[i, jj] + 10 * _eps(dt) * scale[i, jj])
            if torch_ok and est_ok:
                continue
            numerical = _gc_numerical(func, tupled, [j], eps, [meta[i]])[(0, j)]
            with enable_grad():
                analytical = _vjp_rows(diff_outs[i], [ins[jj]])[0]
            slow_ok = bool(np.allclose(analytical, numerical, rtol=rtol, atol=atol))
            if slow_ok and torch_ok:
                continue
            msg = (
                f"Jacobian mismatch for output {pos} with respect to input {j},\n"
                f"fast mode: v^T J u analytical {a:.9g}, numerical {n:.9g} (error estimate "
                f"{proj_est[i, jj]:.2g}) for random unit u and v (seed {seed}).\n"
                "Element-wise re-check of this pair:\n"
                + _gc_table(analytical, numerical, shape, tupled[j].shape, atol, rtol)
            )
            if slow_ok:
                msg += (
                    "\nNote: the element-wise check of this pair passes; the fast-mode "
                    "failure may be a false positive of the projection."
                )
            raise GradcheckError(msg)


def gradgradcheck(
    func: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
    seed: int = 0,
) -> bool:
    """Check second derivatives: gradcheck of ``(inputs, v) -> vjp(func, inputs, v)``.

    Builds the function that returns ``grad(func(*inputs), inputs, v, create_graph=True)``
    and runs :func:`gradcheck` on it with respect to the inputs and the cotangents ``v``
    (random in [-1, 1], seeded, when ``grad_outputs`` is None).

    Parameters
    ----------
    func, inputs, eps, atol, rtol, raise_exception, nondet_tol, check_undefined_grad,
    check_grad_dtypes, check_batched_grad, fast_mode, seed
        As in :func:`gradcheck`.
    grad_outputs : Tensor or tuple of Tensor, optional
        The cotangents ``v``, one per floating output.
    gen_non_contig_grad_outputs : bool
        Accepted for compatibility; ndarray memory layout does not affect funcdiff.
    check_fwd_over_rev : bool
        Also check with funcdiff's forward-mode products (``check_forward_ad``).
    check_rev_over_rev : bool
        Check reverse over reverse (the default).
    masked : bool
        Accepted for compatibility; no effect.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> import funcdiff as fd
    >>> from funcdiff.check import gradgradcheck
    >>> x = fd.tensor([0.3, -1.2, 2.0], requires_grad=True)
    >>> gradgradcheck(lambda t: np.exp(t) * t**2, (x,))
    True
    """
    tupled = _gc_inputs(inputs)
    diff = [i for i, t in enumerate(tupled) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError(
            "gradgradcheck expects at least one input tensor to require gradient, "
            "but none of the them have requires_grad=True."
        )
    with enable_grad():
        outs = _gc_outputs(func(*tupled))
    diff_pos = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        gos = tuple(
            tensor(rng.uniform(-1.0, 1.0, outs[k].shape).astype(outs[k].dtype), requires_grad=True)
            for k in diff_pos
        )
    else:
        gos = _gc_inputs(grad_outputs)
        if len(gos) != len(diff_pos):
            raise ValueError(
                f"grad_outputs has {len(gos)} entries, but func has "
                f"{len(diff_pos)} differentiable outputs"
            )
        for k, (g, pos) in enumerate(zip(gos, diff_pos, strict=True)):
            if not isinstance(g, Tensor):
                raise TypeError(f"grad_outputs[{k}] must be a Tensor, got {type(g).__name__}")
            if g.shape != outs[pos].shape:
                raise ValueError(
                    f"grad_outputs[{k}] has shape {g.shape}, but output {pos} has "
                    f"shape {outs[pos].shape}"
                )
    n_in = len(tupled)

    def new_func(*args: Any) -> tuple:
        xs = args[:n_in]
        vs = args[n_in:]
        res = _gc_outputs(func(*xs))
        d_outs = [res[k] for k in diff_pos]
        d_ins = [xs[i] for i in diff]
        keep = [
            (o, v)
            for o, v in zip(d_outs, vs, strict=True)
            if isinstance(o, Tensor) and o.requires_grad
        ]
        if not keep:
            return ()
        gs = grad(
            [o for o, _ in keep], d_ins, [v for _, v in keep], create_graph=True, allow_unused=True
        )
        return tuple(g for g in gs if g is not None)

    return gradcheck(
        new_func,
        tupled + tuple(gos),
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        check_forward_ad=check_fwd_over_rev,
        check_backward_ad=check_rev_over_rev,
        fast_mode=fast_mode,
        seed=seed,
    )
