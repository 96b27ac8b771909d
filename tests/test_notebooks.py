"""The notebooks in ``notebooks/`` run top to bottom and stay clean.

Each notebook is executed by nbclient in a fresh kernel with matplotlib's Agg backend.
The ``assert`` statements inside the notebooks compare funcdiff with independent
references (finite differences, SciPy's analytic derivatives), so a wrong derivative
fails the run. The committed files must carry no outputs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Optional test dependencies (the `test` extra): without them the suite still collects.
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: A hung kernel ends the run after this long per cell; it is no speed limit (the
#: notebooks' cost is the docs build's, measured there).
CELL_TIMEOUT = 600


def test_there_are_at_least_four_notebooks() -> None:
    names = [p.stem for p in NOTEBOOKS]
    assert len(names) >= 4, names
    for topic in ("quickstart", "optimization", "verifying", "ode", "sparse"):
        assert any(topic in n for n in names), f"no notebook about {topic}: {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name}: cell {i} has outputs"
            assert cell.get("execution_count") is None, f"{path.name}: cell {i} was executed"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # The kernel imports funcdiff from this checkout, whether or not it is installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(path, as_version=4)
    # A last cell reports the backend and how many figures the story drew.
    probe = nbformat.v4.new_code_cell(
        "import matplotlib, matplotlib.pyplot as plt\n"
        "print(matplotlib.get_backend(), len(plt.get_fignums()))"
    )
    probe["id"] = "probe-figures"
    nb.cells.append(probe)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"{path.name} failed:\n{exc}")

    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    probe = nb.cells[-1]
    assert probe.get("id") == "probe-figures"
    text = "".join(o.get("text", "") for o in probe.outputs if o.get("output_type") == "stream")
    backend, count = text.split()
    assert backend.lower() == "agg", f"{path.name} ran with backend {backend}"
    assert int(count) >= 1, f"{path.name} draws no figure"
