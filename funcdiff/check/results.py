"""The records of :func:`check_derivatives`: the report, its blocks and elements, its
consistency checks and the step sweep.

:class:`DerivativeReport` holds one :class:`PairResult` per derivative block and the
:class:`ConsistencyCheck` s; ``str(report)`` is a table, ``report.to_dict()`` its JSON
form, and ``report.step_sweep()`` gives a :class:`StepSweep`: the error of finite
differences against AD on one element as a function of the step, the "V" of a
difference quotient (truncation error falling with the step until rounding error takes
over). :meth:`StepSweep.plot` draws it (needs matplotlib).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from funcdiff.check._common import FD_TRUST_FACTOR, GradcheckError, format_number, json_float
from funcdiff.check.finite_differences import step_quotients

__all__ = [
    "SWEEP_METHODS",
    "ConsistencyCheck",
    "DerivativeReport",
    "ElementResult",
    "PairResult",
    "StepSweep",
    "require_matplotlib",
]

SWEEP_METHODS = ("forward", "central", "complex-step")

_METHOD_NAMES = {
    "central": "central differences",
    "richardson": "Richardson extrapolation",
    "complex-step": "complex step, cross-checked with central differences",
}


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
            "ad": json_float(self.ad),
            "fd": json_float(self.fd),
            "fd_error_estimate": json_float(self.fd_error),
            "abs_error": json_float(self.abs_error),
            "rel_error": json_float(self.rel_error),
            "step": json_float(self.step),
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
            "max_abs_error": json_float(self.max_abs_error),
            "max_abs_index": idx(self.max_abs_index),
            "max_rel_error": json_float(self.max_rel_error),
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
            "lhs": json_float(self.lhs),
            "rhs": json_float(self.rhs),
            "abs_error": json_float(self.abs_error),
            "tolerance": json_float(self.tolerance),
            "verdict": self.verdict,
            "note": self.note,
        }


# Built by keyword only; eq=False keeps reports compared by identity (and hashable);
# __repr__ is the class's own.
@dataclass(kw_only=True, eq=False)
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

    name: str
    order: int
    method: str
    dtype: np.dtype
    pairs: list[PairResult]
    checks: list[ConsistencyCheck]
    notes: list[str]
    rtol: float
    atol: float | None
    nfev: int
    seconds: float
    fast_mode: bool

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
            f"{FD_TRUST_FACTOR:g}*(FD error estimate) and is inconclusive if not; an element "
            "where the one-sided differences disagree (a kink) is inconclusive, or fails "
            "if AD lies outside them"
        )

    def raise_if_failed(self) -> DerivativeReport:
        """Raise :class:`GradcheckError` describing the first failure; return self if ok."""
        if self.ok:
            return self
        for p in self.pairs:
            if p.verdict == "fail":
                raise GradcheckError(_failure_message(p) + "\n\n" + str(self))
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
        head = (
            f"Derivative check of {self.name}: {self.verdict.upper()} (order {self.order}, "
            f"{_METHOD_NAMES[self.method]}, {self.dtype})"
        )
        lines = [
            head,
            *textwrap.wrap(self.tolerance_rule, 96, initial_indent="  ", subsequent_indent="  "),
            "",
        ]
        w = max([len(p.label) for p in self.pairs] + [4]) + 2
        lines += self._block_summary(w)
        lines.append("")
        lines += self._worst_elements(w)
        for p in self.pairs:
            if p.verdict != "pass":
                lines.append("")
                lines += _failing_elements(p)
        notes = [f"{p.label}: {n}" for p in self.pairs for n in p.notes]
        if self.checks:
            lines.append("")
            lines.append("  consistency checks (no finite differences):")
            for c in self.checks:
                lines.append(
                    f"    {c.name:<44}{c.lhs:>13.7g} vs {c.rhs:<13.7g} "
                    f"err {format_number(c.abs_error, 2):<8} "
                    f"tol {format_number(c.tolerance, 2):<8} "
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

    def _block_summary(self, w: int) -> list[str]:
        """One line per block: verdict, elements out of tolerance, largest errors."""
        lines = [
            f"  {'pair':<{w}}{'verdict':<14}{'out of tol':>14}   "
            f"{'max abs err (element)':<34}{'max rel err (element)'}"
        ]
        for p in self.pairs:
            verdict = p.verdict.upper() if p.verdict == "fail" else p.verdict
            count = f"{p.n_out_of_tolerance}/{p.n_elements}"
            if p.max_abs_index is not None and p.max_rel_index is not None:
                ea = f"{format_number(p.max_abs_error)} ({_element_label(p, p.max_abs_index)})"
                er = f"{format_number(p.max_rel_error)} ({_element_label(p, p.max_rel_index)})"
            else:
                ea = er = "- (projection only)"
            lines.append(f"  {p.label:<{w}}{verdict:<14}{count:>14}   {ea:<34}{er}")
        return lines

    def _worst_elements(self, w: int) -> list[str]:
        """One line per block: its worst element, AD, FD, the FD error estimate, the step."""
        lines = [
            f"  {'pair':<{w}}{'worst element':<24}{'AD':>17}{'FD':>17}"
            f"{'FD err est':>12}{'step':>10}"
        ]
        for p in self.pairs:
            e = p.worst
            if e is None:
                continue
            lines.append(
                f"  {p.label:<{w}}{e.label:<24}{e.ad:>17.9g}{e.fd:>17.9g}"
                f"{format_number(e.fd_error):>12}{format_number(e.step, 2):>10}"
            )
        return lines

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
        methods: Sequence[str] = SWEEP_METHODS,
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
            if m not in SWEEP_METHODS:
                raise ValueError(f"methods must be among {SWEEP_METHODS}, got {m!r}")
        return _sweep(self._pick(pair), element, steps, methods)

    def plot_step_sweep(
        self, path: Any, pair: Any = None, element: Any = None, **kwargs: Any
    ) -> Any:
        """Run :meth:`step_sweep` and draw its log-log chart to ``path``.

        Needs matplotlib (``pip install funcdiff[plot]``); returns ``path``.
        """
        require_matplotlib("plot_step_sweep")
        return self.step_sweep(pair, element, **kwargs).plot(path)


def _failing_elements(p: PairResult) -> list[str]:
    """The counts of a block that did not pass, and a table of its worst elements."""
    lines = [
        f"  {p.label}: {p.n_failed} failed, {p.n_inconclusive} inconclusive "
        f"of {p.n_elements}; worst elements:",
        f"    {'element':<24}{'AD':>17}{'FD':>17}{'|AD-FD|':>11}{'FD err est':>12}  verdict",
    ]
    for e in p.top:
        lines.append(
            f"    {e.label:<24}{e.ad:>17.9g}{e.fd:>17.9g}"
            f"{format_number(e.abs_error):>11}{format_number(e.fd_error):>12}  {e.verdict}"
            + (f" ({e.note})" if e.note else "")
        )
    return lines


def _element_label(p: PairResult, idx: tuple) -> str:
    """The label of the element ``(output_index, input_index)`` of block ``p``."""
    return p._target.element_label(p._q, p.input, idx[0], idx[1])


def _failure_message(p: PairResult) -> str:
    """``Jacobian mismatch for output i with respect to input j (label),`` and counts."""
    t = p._target
    if p.kind == "hessian":
        i, jj = t.map[p._q]
        head = (
            f"Hessian mismatch for output {t.first.positions[i]} with respect to "
            f"inputs {t.problem.diff[jj]} and {t.problem.diff[p.input]} ({p.label})"
        )
    else:
        head = (
            f"Jacobian mismatch for output {t.positions[p._q]} with respect to "
            f"input {t.problem.diff[p.input]} ({p.label})"
        )
    rows = [
        f"{head},",
        f"{p.n_failed} of {p.n_elements} elements fail; max abs error "
        f"{format_number(p.max_abs_error)} at {_element_label(p, p.max_abs_index)}"
        if p.max_abs_index is not None
        else f"{p.n_failed} elements fail",
    ]
    return "\n".join(rows)


def _default_element(p: PairResult) -> tuple:
    """The worst element of the block, or its largest AD value when it was only projected."""
    if p.worst is not None:
        return (p.worst.output_index, p.worst.input_index)
    ad_block = p._ad
    flat = int(np.argmax(np.abs(ad_block))) if ad_block.size else 0
    ij = np.unravel_index(flat, ad_block.shape) if ad_block.size else ()
    no = len(p.output_shape)
    return (tuple(ij[:no]), tuple(ij[no:]))


def _sweep(
    p: PairResult, element: Any, steps: Sequence[float] | None, methods: Sequence[str]
) -> StepSweep:
    """The step sweep of one element of the block ``p`` (see DerivativeReport.step_sweep)."""
    target = p._target
    if element is None:
        element = _default_element(p)
    out_idx, in_idx = (tuple(element[0]), tuple(element[1]))
    try:
        ad = float(p._ad[out_idx + in_idx])
    except IndexError:
        raise ValueError(
            f"element {element!r} is outside the block of shape {p.output_shape} x {p.input_shape}"
        ) from None
    row = target.row_offsets()[p._q]
    row += int(np.ravel_multi_index(out_idx, p.output_shape)) if out_idx else 0
    xk, hs, quotients, notes = step_quotients(target, p.input, row, in_idx, steps, methods)
    tiny = max(abs(ad), np.finfo(float).tiny)
    errors = {m: np.abs(d - ad) / tiny for m, d in quotients.items()}
    best_step: dict[str, float | None] = {}
    best_error: dict[str, float | None] = {}
    for m, e in errors.items():
        if np.any(np.isfinite(e)):
            i = int(np.nanargmin(e))
            best_step[m], best_error[m] = float(hs[i]), float(e[i])
        else:
            best_step[m] = best_error[m] = None
    return StepSweep(
        label=p.label,
        element=target.element_label(p._q, p.input, out_idx, in_idx),
        x=xk,
        ad=ad,
        steps=hs,
        errors=errors,
        best_step=best_step,
        best_error=best_error,
        check_step=float(p._steps[out_idx + in_idx]) if p._steps is not None else None,
        notes=notes,
    )
