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
        for name in set(re.findall(r"\bfuncdiff(?:\.[A-Za-z_]\w*)+", page.read_text("utf-8"))):
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
    for module in ("functional", "linalg", "special", "optimize", "check"):
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
