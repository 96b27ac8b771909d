"""Every code example in ``docs/`` runs, and every value a page shows is checked.

The pages are MyST Markdown. Their fenced blocks are executed page by page, in order, in
one namespace per page (a later block may use an earlier block's names):

* ``python`` blocks are executed; the asserts in them are the page's stated values.
  A block whose first line is ``# file: NAME.py`` is written to ``NAME.py`` in the
  working directory instead (a module that a later command imports).
* ``pycon`` blocks (``>>>`` prompts) run as doctests: the shown output must match
  (``...`` matches anything, whitespace is normalised).
* ``console`` blocks: each ``$ python -m funcdiff ...`` line runs as a subprocess in
  the working directory; its exit status must be the ``[exit N]`` shown after the
  output (0 when nothing is shown), and every output line shown that is not ``...``
  must appear in what the command printed.

Everything runs in a temporary directory with matplotlib's Agg backend.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "README.md")
RST_PAGES = sorted(DOCS.glob("*.rst"))
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass
class Block:
    page: Path
    lineno: int  # 1-based line of the first line of code
    lang: str
    code: str


def extract_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with their language and position."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        lang = m["info"].strip().split()[0] if m["info"].strip() else ""
        start = i + 1
        j = start
        body = []
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        else:
            raise AssertionError(f"{path.name}:{i + 1}: unclosed code fence")
        blocks.append(Block(path, start + 1, lang, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def _run_python(block: Block, ns: dict, workdir: Path) -> None:
    first = block.code.lstrip().splitlines()[0] if block.code.strip() else ""
    m = re.match(r"#\s*file:\s*(\S+\.py)\s*$", first)
    if m:
        (workdir / m.group(1)).write_text(block.code, encoding="utf-8")
        return
    code = compile(block.code, f"{block.page.name}:{block.lineno}", "exec")
    exec(code, ns)


def _run_pycon(block: Block, ns: dict) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.code, ns, block.page.name, str(block.page), block.lineno - 1)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags, verbose=False)
    failures: list[str] = []
    runner.run(test, out=failures.append, clear_globs=False)
    ns.update(test.globs)  # the DocTest ran on a copy; later blocks see its names
    if runner.failures:
        pytest.fail(f"{block.page.name}:{block.lineno}: doctest failed\n" + "".join(failures))


def _console_commands(block: Block) -> list[tuple[str, list[str], int]]:
    """``(command, shown output lines, expected exit status)`` for each ``$`` line."""
    commands: list[tuple[str, list[str], int]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:].strip(), [], 0))
        elif commands:
            cmd, shown, status = commands[-1]
            m = re.fullmatch(r"\[exit (\d+)\]", line.strip())
            if m:
                commands[-1] = (cmd, shown, int(m.group(1)))
            else:
                shown.append(line)
    return commands


def _run_console(block: Block, workdir: Path) -> None:
    for cmd, shown, status in _console_commands(block):
        argv = shlex.split(cmd)
        if argv[:3] != ["python", "-m", "funcdiff"]:
            continue  # installation commands and the like are not run
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join([str(ROOT), "."]))
        proc = subprocess.run(
            [sys.executable, *argv[1:]],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        where = f"{block.page.name}:{block.lineno}: `{cmd}`"
        assert proc.returncode == status, (
            f"{where} exited {proc.returncode}, the page says {status}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
        printed = proc.stdout + proc.stderr
        squashed = " ".join(printed.split())
        for line in shown:
            text = line.strip()
            if not text or text == "...":
                continue
            pattern = r"\s+".join(
                ".*?" if part == "..." else re.escape(part) for part in text.split()
            )
            assert re.search(pattern, squashed), f"{where}: shown line not printed: {text!r}"


def test_there_are_pages_with_examples() -> None:
    names = {p.stem for p in PAGES + RST_PAGES}
    expected = {
        "index",
        "getting_started",
        "concepts",
        "functional",
        "sparse",
        "replay",
        "supported",
        "verifying",
        "optimization",
        "performance",
        "migrating",
    }
    assert expected <= names, f"missing pages: {sorted(expected - names)}"
    runnable = sum(b.lang in ("python", "pycon") for p in PAGES for b in extract_blocks(p))
    assert runnable >= 40, f"only {runnable} runnable examples in docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    ns: dict = {"__name__": f"docs_{page.stem}"}
    blocks = extract_blocks(page)
    try:
        for block in blocks:
            if block.lang == "python":
                _run_python(block, ns, tmp_path)
            elif block.lang == "pycon":
                _run_pycon(block, ns)
            elif block.lang == "console":
                _run_console(block, tmp_path)
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")


def test_extractor_reads_indented_fences_and_languages(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "text\n\n```python\nx = 1\n```\n\n1. item\n\n   ```pycon\n   >>> x + 1\n   2\n   ```\n"
        "\n````console\n$ python -m funcdiff nothing\n[exit 2]\n````\n",
        encoding="utf-8",
    )
    blocks = extract_blocks(page)
    assert [(b.lang, b.lineno) for b in blocks] == [("python", 4), ("pycon", 10), ("console", 15)]
    assert blocks[1].code == ">>> x + 1\n2\n"
    assert _console_commands(blocks[2]) == [("python -m funcdiff nothing", [], 2)]


def test_a_wrong_value_on_a_page_fails(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("```pycon\n>>> 1 + 1\n3\n```\n", encoding="utf-8")
    (block,) = extract_blocks(page)
    with pytest.raises(pytest.fail.Exception, match="doctest failed"):
        _run_pycon(block, {})


# --------------------------------------------------------------------------- generated pages
def _docs_extension():
    spec = importlib.util.spec_from_file_location(
        "funcdiff_docs", DOCS / "_ext" / "funcdiff_docs.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["funcdiff_docs"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_supported_functions_table_covers_every_rule() -> None:
    from funcdiff.rules import FUNCTION_RULES, NAMED_RULES, UFUNC_RULES, all_rules

    ext = _docs_extension()
    rows = ext.rule_rows()
    assert [r.name for r in rows] == [r.name for r in all_rules()]
    text = "\n".join(ext.rules_rst(rows))
    for uf in UFUNC_RULES:
        assert f"{uf.__name__}``" in text, uf
    for fn in FUNCTION_RULES:
        if fn.__module__.split(".")[0] == "numpy":
            assert f"{fn.__module__}.{fn.__name__}``" in text, fn
    assert all(r.calls for r in rows)
    for key in NAMED_RULES:
        assert ext.NAMED_SYNTAX.get(key, key) in text, key
    # conventions are shown as the registry states them
    for rule in all_rules():
        if rule.convention:
            assert ext.rst_escape(" ".join(rule.convention.split())) in text, rule.name


def test_supported_functions_table_names_public_entry_points() -> None:
    ext = _docs_extension()
    calls = {c for r in ext.rule_rows() if not r.internal for c in r.calls}
    assert {"numpy.sin", "numpy.linalg.solve", "scipy.special.erf"} <= calls
    # SciPy's Python functions do not dispatch: the table sends users to the wrappers
    assert {"funcdiff.linalg.expm", "funcdiff.special.logsumexp"} <= calls
    assert not any(c.startswith("scipy.linalg.") for c in calls)
    for r in ext.rule_rows():
        if r.internal:
            assert all(c.startswith("funcdiff.rules.") for c in r.calls), r
        else:
            assert not any("._" in c or c.startswith("funcdiff.rules") for c in r.calls), r


def test_the_pages_name_only_existing_api() -> None:
    """Every ``funcdiff.x.y`` and ``fd.x`` named on a page exists."""
    import funcdiff

    missing = []
    for page in PAGES + RST_PAGES:
        text = page.read_text("utf-8").replace("\\_", "_")  # reST escapes np.r\_
        for name in set(re.findall(r"\bfuncdiff(?:\.[A-Za-z_]\w*)+", text)):
            obj: object = funcdiff
            parts = name.split(".")[1:]
            for k, part in enumerate(parts):
                if hasattr(obj, part):
                    obj = getattr(obj, part)
                    continue
                try:
                    obj = importlib.import_module(".".join(["funcdiff", *parts[: k + 1]]))
                except ImportError:
                    missing.append(f"{page.name}: {name}")
                    break
        for attr in set(re.findall(r"(?<![\w.])fd\.([A-Za-z_]\w*)", page.read_text("utf-8"))):
            if not hasattr(funcdiff, attr):
                missing.append(f"{page.name}: fd.{attr}")
    assert not missing, missing


def test_api_reference_lists_every_public_name() -> None:
    """The API pages name everything in the public ``__all__`` lists, so none is forgotten."""
    import funcdiff

    api = {p.stem: p.read_text("utf-8") for p in (DOCS / "api").glob("*.rst")}
    everything = "\n".join(api.values())
    missing = []
    for module in ("functional", "sparse", "replay", "linalg", "special", "optimize", "check"):
        mod = importlib.import_module(f"funcdiff.{module}")
        for name in mod.__all__:
            if not re.search(rf"^\s+{re.escape(name)}$", api[module], re.MULTILINE):
                missing.append(f"funcdiff.{module}.{name}")
    for name in funcdiff.__all__:
        obj = getattr(funcdiff, name)
        if isinstance(obj, type(funcdiff)):
            assert name == "autograd" or name in api, f"no API page for funcdiff.{name}"
        elif not re.search(rf"^\s+{re.escape(name)}$", everything, re.MULTILINE):
            missing.append(f"funcdiff.{name}")
    assert not missing, f"not in docs/api: {missing}"


def test_numbers_in_examples_are_real(tmp_path: Path) -> None:
    """The harness really compares: a python block with a false assert fails."""
    page = tmp_path / "p.md"
    page.write_text("```python\nimport numpy as np\nassert np.isclose(0.1 + 0.2, 0.4)\n```\n")
    (block,) = extract_blocks(page)
    with pytest.raises(AssertionError):
        _run_python(block, {}, tmp_path)


# ------------------------------------------------------------ benchmark figures and prose
# Pages whose prose must speak to users: no narrative about the benchmark machine, the
# project's issues or its history (benchmarks/results/HISTORY.md is the place for that).
USER_PAGES = [
    ROOT / "README.md",
    DOCS / "index.md",
    DOCS / "performance.md",
    DOCS / "migrating.md",
    DOCS / "sparse.md",
    DOCS / "replay.md",
    DOCS / "reliability.rst",
    ROOT / "benchmarks" / "README.md",
]
NARRATIVE = [
    r"slow phase",
    r"\bdrift",
    r"reference figures",
    r"rounds? of work",
    r"\bissues?\b",
    r"virtual machine",
    r"\bVM\b",
    r"before the (last|latest) (round|change)",
]
# The pages that quote the committed benchmark run, and the section that quotes it.
FIGURE_SECTIONS = [
    (ROOT / "README.md", "## Performance"),
    (DOCS / "performance.md", "## Benchmarks"),
]


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_tell_no_story_of_machines_issues_or_rounds_of_work(page: Path) -> None:
    text = page.read_text("utf-8")
    found = [m.group(0) for pat in NARRATIVE for m in re.finditer(pat, text, re.IGNORECASE)]
    assert not found, f"{page.name}: {found}"


def _figure_section(page: Path, heading: str) -> str:
    text = page.read_text("utf-8")
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _two_digits(value: float) -> float:
    return float(f"{value:.2g}")


def _results_for(section: str) -> dict:
    import json

    names = set(re.findall(r"benchmarks/results/([\w-]+)\.json", section))
    assert len(names) == 1, f"the section must name exactly one results file: {names}"
    (name,) = names
    path = ROOT / "benchmarks" / "results" / f"{name}.json"
    assert path.exists(), path
    return json.loads(path.read_text("utf-8"))


def _tables(section: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in section.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def _seconds(cell: str) -> float:
    m = re.fullmatch(r"([\d.]+) (ms|us|s)( per op)?", cell)
    assert m, f"not a time: {cell!r}"
    return float(m.group(1)) * {"s": 1.0, "ms": 1e-3, "us": 1e-6}[m.group(2)]


def _allowed_ratios(results: dict) -> set[float]:
    """Every ratio of the run that prose may quote, rounded to two significant digits."""
    ratios = [b["ratio"] for b in results["best"].values()]
    extras = results.get("extras", {})
    if "dispatch" in extras:
        d = extras["dispatch"]
        ratios += [d["tensor_us"] / d["ndarray_us"], d["tensor_requires_grad_us"] / d["ndarray_us"]]
    if "chain" in extras:
        ratios.append(extras["chain"]["growth"])
    ratios += [r["ratio"] for r in extras.get("memory", {}).get("rows", [])]
    return {_two_digits(r) for r in ratios}


@pytest.mark.parametrize(("page", "heading"), FIGURE_SECTIONS, ids=lambda p: getattr(p, "name", p))
def test_quoted_benchmark_figures_are_the_committed_run(page: Path, heading: str) -> None:
    """Every ratio a page quotes is the committed results file's, to two digits; so are the
    command that produced it and the spread it states. A stale figure fails here."""
    _check_quoted_figures(page, _figure_section(page, heading))


def _check_quoted_figures(page: Path, section: str) -> None:
    results = _results_for(section)
    assert results["command"] in section, f"{page.name}: quote the run's command"
    best = results["best"]
    problems = sorted(results["problems"], key=len, reverse=True)
    checked = 0
    for table in _tables(section):
        header = table[0]
        for cells in table[1:]:
            key = next((p for p in problems if cells[0].startswith(p)), None)
            assert key is not None, f"{page.name}: unknown problem in row {cells[0]!r}"
            for column, cell in zip(header[1:], cells[1:], strict=True):
                where = f"{page.name}: {key} | {column} = {cell!r}"
                if column == "numpy f":
                    if cell.endswith("per op"):
                        row = next(
                            r
                            for r in results["rows"]
                            if r["problem"] == key and r["column"] == "numpy f"
                        )
                        want = row["us_per_op"] * 1e-6
                    else:
                        want = results["numpy_forward_s"][key]
                    assert np.isclose(_seconds(cell), _two_digits(want), rtol=1e-9), where
                elif column == "funcdiff's setting":
                    assert cell.strip("`") == best[f"{key} | funcdiff"]["setting"], where
                else:
                    m = re.fullmatch(r"([\d.]+)x", cell)
                    assert m, where
                    want = _two_digits(best[f"{key} | {column}"]["ratio"])
                    assert np.isclose(float(m.group(1)), want, rtol=1e-9), f"{where}, run: {want}x"
                checked += 1
    assert checked >= 20, f"{page.name}: only {checked} figures in tables"
    # ratios in the prose must be ratios of the run too
    prose = "\n".join(ln for ln in section.splitlines() if not ln.startswith("|"))
    allowed = _allowed_ratios(results)
    for m in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?)x\b", prose):
        assert any(np.isclose(float(m.group(1)), a, rtol=1e-9) for a in allowed), (
            f"{page.name}: {m.group(0)} is no ratio of the committed run"
        )
    # the spread stated is the spread of funcdiff's cells in the run
    m = re.search(r"within (\d+)% of their medians", section)
    assert m, f"{page.name}: state the spread of the run"
    spread = 0.0
    for k, b in best.items():
        if k.endswith("| funcdiff"):
            row = next(
                r
                for r in results["rows"]
                if f"{r['problem']} | {r['column']}" == k and r["setting"] == b["setting"]
            )
            spread = max(
                spread, 1 - row["q1_s"] / row["median_s"], row["q3_s"] / row["median_s"] - 1
            )
    assert int(m.group(1)) == int(np.ceil(spread * 100)), f"{page.name}: spread {spread:.1%}"


def test_a_stale_benchmark_figure_fails() -> None:
    """The check above really compares: a README whose B1 ratio is off fails it."""
    section = _figure_section(ROOT / "README.md", "## Performance")
    row = next(ln for ln in section.splitlines() if ln.startswith("| B1"))
    cells = row.split("|")
    cells[2] = " 9.9x "
    with pytest.raises(AssertionError, match=r"B1 \| funcdiff = '9.9x', run: 1.9x"):
        _check_quoted_figures(ROOT / "README.md", section.replace(row, "|".join(cells)))
