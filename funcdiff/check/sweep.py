"""The step sweep: error of finite differences against AD as a function of the step.

It shows the "V" of a difference quotient: truncation error falling with the step
until rounding error takes over. :meth:`DerivativeReport.step_sweep` runs it on one
element of a checked block; :meth:`StepSweep.plot` draws it (needs matplotlib).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from funcdiff.check.finite_differences import evaluate_perturbed
from funcdiff.check.formatting import format_number, json_float
from funcdiff.check.precision import complex_dtype_for
from funcdiff.check.targets import Target, probe_complex

if TYPE_CHECKING:
    from funcdiff.check.report import PairResult

__all__ = ["SWEEP_METHODS", "StepSweep", "check_sweep_methods", "require_matplotlib", "sweep"]

SWEEP_METHODS = ("forward", "central", "complex-step")


def require_matplotlib(what: str) -> None:
    """Raise an ImportError that says how to install matplotlib if it is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"{what} needs matplotlib, which is not installed; install the optional extra "
            "with `pip install funcdiff[plot]` (or `pip install matplotlib`)"
        ) from exc


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
            "x": json_float(self.x),
            "ad": json_float(self.ad),
            "steps": [json_float(s) for s in self.steps],
            "errors": {k: [json_float(e) for e in v] for k, v in self.errors.items()},
            "best_step": {k: json_float(v) for k, v in self.best_step.items()},
            "best_error": {k: json_float(v) for k, v in self.best_error.items()},
            "check_step": json_float(self.check_step),
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
                f"  {h:8.1e}  "
                + "".join(f"{format_number(self.errors[m][k]):>14}" for m in methods)
            )
        for m in methods:
            if self.best_step[m] is not None:
                lines.append(
                    f"  best {m}: step {self.best_step[m]:.1e}, "
                    f"error {format_number(self.best_error[m])}"
                )
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def plot(self, path: Any, *, title: str | None = None) -> Any:
        """Draw the log-log error-versus-step chart (the "V") to ``path`` (PNG, SVG, PDF).

        Needs matplotlib, the optional extra ``funcdiff[plot]``.
        """
        require_matplotlib("plotting a step sweep")
        from matplotlib.figure import Figure

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


def check_sweep_methods(methods: Sequence[str]) -> None:
    for m in methods:
        if m not in SWEEP_METHODS:
            raise ValueError(f"methods must be among {SWEEP_METHODS}, got {m!r}")


def _default_element(p: PairResult) -> tuple:
    """The worst element of the block, or its largest AD value when it was only projected."""
    if p.worst is not None:
        return (p.worst.output_index, p.worst.input_index)
    ad_block = p._ad
    flat = int(np.argmax(np.abs(ad_block))) if ad_block.size else 0
    ij = np.unravel_index(flat, ad_block.shape) if ad_block.size else ()
    no = len(p.output_shape)
    return (tuple(ij[:no]), tuple(ij[no:]))


def _quotient(method: str, at: Any, x: np.ndarray, xk: float, f0: float, h: float) -> float:
    """One difference quotient of ``at`` (the row's value at a new element value) at step h."""
    if method == "forward":
        p1 = x.dtype.type(xk + h)
        dxp = float(p1) - xk
        return (at(p1) - f0) / dxp if dxp else np.nan
    if method == "central":
        p1, m1 = x.dtype.type(xk + h), x.dtype.type(xk - h)
        dd = float(p1) - float(m1)
        return (at(p1) - at(m1)) / dd if dd else np.nan
    cdt = complex_dtype_for(x.dtype)
    return float(np.imag(at(cdt(complex(xk, h)), cdt))) / h


def sweep(
    p: PairResult, element: Any, steps: Sequence[float] | None, methods: Sequence[str]
) -> StepSweep:
    """The step sweep of one element of the block ``p`` (see DerivativeReport.step_sweep)."""
    target: Target = p._target
    j = p.input
    ad_block = p._ad
    if element is None:
        element = _default_element(p)
    out_idx, in_idx = (tuple(element[0]), tuple(element[1]))
    try:
        ad = float(ad_block[out_idx + in_idx])
    except IndexError:
        raise ValueError(
            f"element {element!r} is outside the block of shape {p.output_shape} x {p.input_shape}"
        ) from None
    x = target.problem.x0[j]
    k = int(np.ravel_multi_index(in_idx, x.shape)) if x.ndim else 0
    q_off = target.row_offsets()[p._q]
    row = q_off + (int(np.ravel_multi_index(out_idx, p.output_shape)) if out_idx else 0)
    xk = float(x.flat[k])
    scale = abs(xk) if xk != 0 else 1.0
    rel = np.asarray(steps if steps is not None else np.logspace(-16, 0, 33), dtype=float)
    hs = rel * scale
    notes: list[str] = []

    def at(value: Any, complex_dtype: Any = None) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return evaluate_perturbed(target, j, k, value, complex_dtype)[row]

    tiny = max(abs(ad), np.finfo(float).tiny)
    f0 = at(x.dtype.type(xk))
    errors: dict[str, np.ndarray] = {}
    for m in methods:
        errs = np.full(hs.shape, np.nan)
        if m == "complex-step" and target.complex_ok is None:
            try:
                probe_complex(target, target.problem.x0)
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
                d = _quotient(m, at, x, xk, f0, h)
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
