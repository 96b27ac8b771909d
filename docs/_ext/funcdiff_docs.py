"""Sphinx extension for the funcdiff docs: pages generated from the package at build time.

* ``.. funcdiff-rules::`` writes the table of supported NumPy/SciPy functions from
  :func:`funcdiff.rules.all_rules`, so the page can never disagree with the registry.
* ``.. funcdiff-benchmark-chart::`` shows the newest ``benchmarks/results/*.png`` when
  one exists, and a note otherwise.
* Before reading the sources, the notebooks in ``../notebooks`` are copied into
  ``docs/notebooks`` (generated, ignored by git) so that myst-nb renders them.

The table-building functions import nothing from Sphinx, so the test suite can check
them without a docs toolchain.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent

#: Families in the order the page lists them, with their headings.
FAMILIES = {
    "elementwise": "Elementwise functions and ufuncs",
    "reductions": "Reductions, cumulative operations and norms",
    "shape": "Shape manipulation, joining, splitting and sorting",
    "indexing": "Indexing, selection and scatter",
    "linalg": "Linear algebra",
    "numerical": "Interpolation, polynomials and numerical derivatives",
    "signal": "Convolution and correlation",
    "special": "Special functions (``scipy.special``)",
    "stats": "Probability distributions (``scipy.stats``, called as ``funcdiff.stats``)",
    "constants": "Functions with constant (integer or boolean) results",
}

#: Tensor-only operations (string keys of the registry) and how a user writes them.
NAMED_SYNTAX = {
    "getitem": "``x[index]`` (basic and advanced indexing)",
    "setitem": "``x[index] = value``",
    "astype": "``x.astype(dtype)``",
}


@dataclass(frozen=True)
class RuleRow:
    """One line of the generated table."""

    family: str
    name: str
    calls: tuple[str, ...]
    differentiable: bool
    convention: str
    internal: bool
    complex: bool = False


def _public_module(obj: Any) -> str | None:
    """The shortest public module path under which ``obj`` is reachable by its name."""
    module = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__name__", "")
    parts = module.split(".")
    import importlib

    for n in range(1, len(parts) + 1):
        candidate = ".".join(parts[:n])
        if any(p.startswith("_") for p in parts[:n]):
            break
        try:
            mod = importlib.import_module(candidate)
        except ImportError:  # pragma: no cover - a module path that is not importable
            continue
        if getattr(mod, name, None) is obj:
            return candidate
    return None


def _ufunc_call(uf: np.ufunc) -> str:
    name = uf.__name__
    if getattr(np, name, None) is uf:
        return f"numpy.{name}"
    import scipy.special

    if getattr(scipy.special, name, None) is uf:
        return f"scipy.special.{name}"
    return name  # pragma: no cover - a ufunc from elsewhere


def _function_call(fn: Any) -> tuple[str, bool]:
    """``(how a user calls fn, whether it is an internal helper)``."""
    import funcdiff.linalg
    import funcdiff.signal
    import funcdiff.special

    name = getattr(fn, "__name__", repr(fn))
    module = getattr(fn, "__module__", "") or ""
    public_name = getattr(fn, "public_name", None)
    if isinstance(public_name, str):  # funcdiff.stats methods: distribution.method
        return public_name, False
    if module.startswith("funcdiff."):
        for public in (funcdiff.special, funcdiff.linalg, funcdiff.signal):
            if name in getattr(public, "__all__", ()):
                return f"{public.__name__}.{name}", False
        return f"{module}.{name}", True
    public = _public_module(fn)
    qualified = f"{public or module}.{name}"
    if qualified.startswith("scipy."):
        # SciPy's Python functions do not dispatch to Tensors: funcdiff's wrappers do.
        for wrapper in (funcdiff.special, funcdiff.linalg, funcdiff.signal):
            short = wrapper.__name__.split(".")[-1]
            if qualified.startswith(f"scipy.{short}.") and name in wrapper.__all__:
                return f"{wrapper.__name__}.{name}", False
    return qualified, False


def rule_rows() -> list[RuleRow]:
    """Every registered rule once, with the names a user calls it by."""
    from funcdiff.rules import FUNCTION_RULES, NAMED_RULES, UFUNC_RULES, all_rules

    keys: dict[int, list[tuple[str, bool]]] = {}
    for uf, rule in UFUNC_RULES.items():
        keys.setdefault(id(rule), []).append((_ufunc_call(uf), False))
    for fn, rule in FUNCTION_RULES.items():
        keys.setdefault(id(rule), []).append(_function_call(fn))
    for key, rule in NAMED_RULES.items():
        keys.setdefault(id(rule), []).append((NAMED_SYNTAX.get(key, f"Tensor op {key!r}"), False))

    rows = []
    for rule in all_rules():
        entries = keys.get(id(rule), [])
        public = [c for c, internal in entries if not internal]
        calls = tuple(dict.fromkeys(public or [c for c, _ in entries]))
        rows.append(
            RuleRow(
                family=rule.family or "other",
                name=rule.name,
                calls=calls,
                differentiable=bool(rule.differentiable),
                convention=" ".join(rule.convention.split()),
                internal=not public,
                complex=bool(rule.complex),
            )
        )
    return rows


def rst_escape(text: str) -> str:
    """Plain text for a reStructuredText cell: no markup (``x**y``, ``|x|``) is interpreted."""
    return "".join("\\" + c if c in "\\*`|_" else c for c in text)


def _call_cell(calls: Iterable[str]) -> str:
    out = []
    for c in calls:
        out.append(c if c.startswith("``") else f"``{c}``")
    return ", ".join(out)


def rules_rst(rows: list[RuleRow] | None = None) -> list[str]:
    """The reStructuredText of the whole table (sections per family)."""
    rows = rule_rows() if rows is None else rows
    public = [r for r in rows if not r.internal]
    internal = [r for r in rows if r.internal]
    families = list(FAMILIES) + sorted({r.family for r in public} - set(FAMILIES))
    n_diff = sum(r.differentiable for r in public)
    lines = [
        f"The registry holds **{len(rows)} rules**: {len(public)} for public functions "
        f"({n_diff} differentiable to any order, {len(public) - n_diff} with constant "
        f"results) and {len(internal)} internal primitives.",
        "",
    ]
    for fam in families:
        fam_rows = sorted((r for r in public if r.family == fam), key=lambda r: r.calls)
        if not fam_rows:
            continue
        title = FAMILIES.get(fam, fam.capitalize())
        lines += [title, "-" * len(title), ""]
        lines += _table(fam_rows)
    if internal:
        title = "Internal primitives"
        lines += [
            title,
            "-" * len(title),
            "",
            "Helpers that other rules call inside their derivatives (so that those are "
            "differentiable again). You do not call them yourself.",
            "",
        ]
        lines += _table(internal)
    return lines


def _table(rows: list[RuleRow]) -> list[str]:
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 35 15 50",
        "   :class: funcdiff-rules",
        "",
        "   * - Function",
        "     - Derivative",
        "     - Convention at kinks, ties and degeneracies",
    ]
    for r in rows:
        kind = "any order" if r.differentiable else "constant"
        if r.complex:
            kind += "; complex"
        lines += [
            f"   * - {_call_cell(r.calls)}",
            f"     - {kind}",
            f"     - {rst_escape(r.convention)}",
        ]
    lines.append("")
    return lines


def newest_benchmark_chart() -> Path | None:
    """The newest PNG in ``benchmarks/results``, if any."""
    charts = sorted((ROOT / "benchmarks" / "results").glob("*.png"))
    return charts[-1] if charts else None


# --------------------------------------------------------------------------- Sphinx glue
def _copy_notebooks(app: Any) -> None:
    src = ROOT / "notebooks"
    dst = DOCS / "notebooks"
    dst.mkdir(exist_ok=True)
    wanted = {p.name for p in src.glob("*.ipynb")}
    for old in dst.glob("*.ipynb"):
        if old.name not in wanted:
            old.unlink()
    for nb in sorted(src.glob("*.ipynb")):
        target = dst / nb.name
        # Copy only changed files, so Sphinx does not re-execute unchanged notebooks.
        if not target.exists() or target.read_bytes() != nb.read_bytes():
            shutil.copyfile(nb, target)


def _copy_chart(app: Any) -> None:
    chart = newest_benchmark_chart()
    target = DOCS / "_static" / "generated" / "benchmark_chart.png"
    if chart is None:
        if target.exists():
            target.unlink()
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(chart, target)


def setup(app: Any) -> dict[str, Any]:
    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.util.docutils import SphinxDirective

    class RulesDirective(SphinxDirective):
        has_content = False

        def run(self) -> list[nodes.Node]:
            container = nodes.section()
            container.document = self.state.document
            text = StringList(rules_rst(), source="<funcdiff.rules.all_rules()>")
            self.state.nested_parse(text, self.content_offset, container, match_titles=True)
            return container.children

    class ChartDirective(SphinxDirective):
        """Built from nodes: the page around it is MyST, not reStructuredText."""

        has_content = False

        def run(self) -> list[nodes.Node]:
            chart = newest_benchmark_chart()
            if chart is None:
                note = nodes.note()
                para = nodes.paragraph()
                para += nodes.Text("No benchmark chart yet: ")
                para += nodes.literal(
                    text="python -m benchmarks --chart benchmarks/results/<date>.png"
                )
                para += nodes.Text(" writes one, and the next docs build shows it here.")
                note += para
                return [note]
            figure = nodes.figure()
            figure += nodes.image(
                uri="/_static/generated/benchmark_chart.png",
                alt="funcdiff and its peers: time per call relative to the NumPy forward",
                width="100%",
            )
            caption = nodes.caption()
            caption += nodes.Text("From ")
            caption += nodes.literal(text=f"benchmarks/results/{chart.name}")
            caption += nodes.Text(
                ": time per call as a multiple of the plain NumPy forward (lower is better)."
            )
            figure += caption
            return [figure]

    app.add_directive("funcdiff-rules", RulesDirective)
    app.add_directive("funcdiff-benchmark-chart", ChartDirective)
    app.connect("builder-inited", _copy_notebooks)
    app.connect("builder-inited", _copy_chart)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
