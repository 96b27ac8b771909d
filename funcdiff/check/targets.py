"""What is differentiated: the user's function (first order) or its AD gradient (second).

A :class:`Problem` is ``func`` with its inputs: which ones are differentiated and how
``func`` is called. A :class:`Target` is a function of the differentiated inputs seen
both by AD (``ad_outputs`` on Tensors, recording) and by finite differences
(``fd_eval`` on float64 arrays, ``fd_eval_complex`` on complex arrays), with labels for
its derivative blocks and elements.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from funcdiff._core.tensor import Tensor, tensor
from funcdiff.autograd import enable_grad, no_grad
from funcdiff.autograd.engine import grad
from funcdiff.check._common import (
    as_array,
    as_list,
    complex_dtype_for,
    indexed_name,
    is_float_output,
    lowest_precision,
    machine_eps,
)

__all__ = [
    "FirstOrderTarget",
    "Problem",
    "SecondOrderTarget",
    "Target",
    "func_name",
    "probe_complex",
]


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


def func_name(func: Callable) -> str:
    """A short name of a callable for reports: ``loss``, ``Model.energy``, ``MyFunction.apply``."""
    owner = getattr(func, "__self__", None)
    if inspect.isclass(owner):  # MyFunction.apply, a classmethod bound to its class
        return f"{owner.__name__}.{getattr(func, '__name__', 'apply')}"
    name = getattr(func, "__qualname__", None) or ""
    if not name or "<locals>" in name:
        name = getattr(func, "__name__", None) or type(func).__name__
    return name


def _is_numeric_input(t: Any) -> bool:
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


def _is_complex_input(t: Any) -> bool:
    if isinstance(t, (complex, np.complexfloating)):
        return True
    if isinstance(t, (np.ndarray, list)):
        try:
            return np.asarray(t).dtype.kind == "c"
        except (ValueError, TypeError):
            return False
    return False


class Problem:
    """``func`` and its inputs: which are differentiated, and how it is called."""

    def __init__(self, func: Callable, inputs: Any, argnums: Any) -> None:
        if not callable(func):
            raise TypeError(f"func must be callable, got {type(func).__name__}")
        self.func = func
        items = list(inputs) if isinstance(inputs, tuple) else [inputs]
        # One input, not a tuple: a hand-written derivative gives its block bare.
        self.single_input = not isinstance(inputs, tuple)
        self.tuple_output = False
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
            diff = [i for i, t in enumerate(items) if _is_numeric_input(t)]
        # A complex input is the cause, not a missing one: say so (derivatives here are
        # of real inputs; the complex step makes its own complex points).
        complex_at = [i for i in (diff or range(len(items))) if _is_complex_input(items[i])]
        if complex_at:
            k = complex_at[0]
            raise TypeError(
                f"check_derivatives got a complex value in inputs[{k}] "
                f"(dtype {np.asarray(as_array(items[k])).dtype}): funcdiff differentiates real "
                "floating-point inputs only; split a complex value z into its real and "
                "imaginary parts (z.real, z.imag) and pass them as two real inputs"
            )
        if not diff:
            raise ValueError(
                "check_derivatives found no input to differentiate: inputs must hold numbers, "
                "arrays or Tensors"
            )
        self.diff = diff
        x0 = []
        for i in diff:
            arr = np.array(as_array(items[i]), copy=True)
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
        self.name = func_name(func)

    def args(self, values: Sequence[Any]) -> list:
        """The positional arguments of ``func`` with ``values`` in the differentiated places."""
        args = [t.detach() if isinstance(t, Tensor) else t for t in self.items]
        for i, v in zip(self.diff, values, strict=True):
            args[i] = v
        return args

    def call(self, values: Sequence[Any]) -> list:
        result = self.func(*self.args(values))
        self.tuple_output = isinstance(result, (tuple, list))
        return as_list(result)


class Target:
    """A function of the differentiable inputs, seen by AD and by finite differences.

    ``ad_outputs(ins)`` runs it on Tensors (recording); ``fd_eval(xs)`` returns float64
    arrays for the given input arrays; ``fd_eval_complex`` (optional) runs it on
    complex arrays for the complex step. Its outputs' elements, flattened and
    concatenated, are the rows of its Jacobian with respect to each input.
    """

    kind = "jacobian"
    complex_ok: bool | None = False

    def __init__(self, problem: Problem) -> None:
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

    def row_offsets(self) -> list[int]:
        """Where each output's rows start among all rows; the last entry is their count."""
        offsets = [0]
        for s in self.out_shapes:
            offsets.append(offsets[-1] + int(np.prod(s, dtype=np.int64)))
        return offsets

    def row_eps(self, j: int) -> tuple[np.ndarray, np.dtype]:
        """Machine epsilon of each row against input ``j``, and the lowest precision of all."""
        parts = []
        dts = [self.problem.x0[j].dtype]
        for s, d in zip(self.out_shapes, self.out_dtypes, strict=True):
            e = machine_eps(lowest_precision([d, self.problem.x0[j].dtype]))
            parts.append(np.full(int(np.prod(s, dtype=np.int64)), e))
            dts.append(d)
        return (np.concatenate(parts) if parts else np.zeros(0)), lowest_precision(dts)


class FirstOrderTarget(Target):
    """The user's function itself."""

    kind = "jacobian"

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.complex_ok = None  # unknown until probed
        self.positions: list[int] = []
        self.numpy_path = True
        self.notes: list[str] = []
        self.primal_numpy: list[np.ndarray] | None = None
        self.n_outputs = 0
        self.tuple_output = False

    def setup(self, ad_outs: list[Any]) -> None:
        """Learn the floating outputs from one recorded call, and try plain NumPy."""
        self.n_outputs = len(ad_outs)
        self.tuple_output = self.problem.tuple_output
        self.positions = [k for k, o in enumerate(ad_outs) if is_float_output(o)]
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
        self.out_shapes = [tuple(np.shape(as_array(o))) for o in kept]
        self.out_dtypes = [
            as_array(o).dtype if as_array(o).dtype.kind == "f" else np.dtype(np.float64)
            for o in kept
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

    def _numpy(self, xs: Sequence[np.ndarray | Tensor]) -> list[np.ndarray]:
        outs = self.problem.call(list(xs))
        if len(outs) <= max(self.positions):
            raise ValueError(
                f"{self.problem.name} returned {len(outs)} outputs at a perturbed point, "
                f"{max(self.positions) + 1}+ at the check point"
            )
        return [np.asarray(as_array(outs[k]), dtype=np.float64) for k in self.positions]

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
        return [np.asarray(as_array(outs[k])) for k in self.positions]

    def pair_label(self, q: int, j: int) -> str:
        return f"d{self.out_labels[q]}/d{self.problem.names[j]}"

    def element_label(self, q: int, j: int, out_idx: tuple, in_idx: tuple) -> str:
        return (
            f"{indexed_name(self.out_labels[q], out_idx)}, "
            f"{indexed_name(self.problem.names[j], in_idx)}"
        )


def _scalarize(out: Tensor, w: np.ndarray | None) -> Tensor:
    if w is None:
        return out if out.ndim == 0 else np.sum(out)
    return np.sum(out * w)


class SecondOrderTarget(Target):
    """The AD gradient of each (scalarised) output: its Jacobian is the Hessian."""

    kind = "hessian"

    def __init__(self, problem: Problem, first: FirstOrderTarget, weights: list) -> None:
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
                # Later outputs may share this graph (the parts of one complex result).
                keep = create_graph or i < len(outs) - 1
                gs = grad(s, ins, create_graph=create_graph, retain_graph=keep, allow_unused=True)
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
        return [np.asarray(as_array(g), dtype=np.float64) for g in gs]

    def pair_label(self, q: int, j: int) -> str:
        i, jj = self.map[q]
        names = self.problem.names
        return f"d2{self.first.out_labels[i]}/d{names[jj]} d{names[j]}"

    def element_label(self, q: int, j: int, out_idx: tuple, in_idx: tuple) -> str:
        _, jj = self.map[q]
        names = self.problem.names
        return f"{indexed_name(names[jj], out_idx)}, {indexed_name(names[j], in_idx)}"


def probe_complex(first: Target, x0: list[np.ndarray]) -> bool:
    """Run func once on complex ndarrays; raise a clear error if it cannot."""
    xs = [x.astype(complex_dtype_for(x.dtype)) for x in x0]
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
