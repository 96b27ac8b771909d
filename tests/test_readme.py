"""The README's Python examples run, and the values they state are right."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_examples_run_and_agree_with_closed_forms() -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    a = np.array([[1.0, 2.0], [0.5, -1.0]])
    x = np.array([0.3, -0.7])
    t = np.tanh(a @ x)
    expected_j = np.diag(t) + (1 - t**2)[:, None] * a * x[:, None]
    np.testing.assert_allclose(namespace["J"].data, expected_j, rtol=1e-12)
    h = namespace["H"].data
    np.testing.assert_allclose(h, h.T, rtol=1e-12)
    x0 = 0.7
    np.testing.assert_allclose(namespace["d2y"].item(), (6 * x0 + 6 * x0**2 + x0**3) * np.exp(x0))
    # the sparse Jacobian of the tridiagonal residual, and the replayed gradient
    y = namespace["y"]
    inner = y[1:-1]
    dense = np.zeros((998, 1000))
    rows = np.arange(998)
    dense[rows, rows] = -1.0
    dense[rows, rows + 1] = 3 * inner**2 + 2.0
    dense[rows, rows + 2] = -1.0
    np.testing.assert_allclose(namespace["Js"](y).toarray(), dense, rtol=1e-12, atol=1e-12)
    r = inner**3 - (y[:-2] - 2 * inner + y[2:])
    np.testing.assert_allclose(namespace["g"], 2 * r @ dense, rtol=1e-10, atol=1e-12)
    assert namespace["value"] == np.sum(r**2)
    # per-example gradients against the closed form, and the ODE sensitivity
    w, X, Y = namespace["w"], namespace["X"], namespace["Y"]
    th = np.tanh(X @ w)
    expected_g = (2 * (th - Y) * (1 - th**2))[:, None] * X
    np.testing.assert_allclose(namespace["per_example"], expected_g, rtol=1e-12)
    np.testing.assert_allclose(namespace["k"].grad.item(), -2 * np.exp(-1.0), rtol=1e-7)


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _comparison_row(label: str) -> dict[str, str]:
    """One row of the README's comparison table, as ``{column header: cell}``."""
    lines = [ln for ln in _section("How it compares").splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if label in cells[0]:
            return dict(zip(header, cells, strict=True))
    raise AssertionError(f"no row {label!r} in the README's comparison table")


def test_comparison_table_forward_mode_row_is_what_jvp_does(monkeypatch) -> None:
    """The README says funcdiff has a forward mode: ``jvp`` must not need a backward pass."""
    import funcdiff as fd
    from funcdiff import functional

    cell = _comparison_row("forward mode")["funcdiff"]
    assert cell.startswith("yes"), cell
    assert "double-backward" not in cell and "double backward" not in cell, cell

    def no_backward(*args, **kwargs):
        raise AssertionError("jvp ran a backward pass")

    monkeypatch.setattr(functional, "autograd_grad", no_backward)
    x = np.array([0.3, -0.7, 1.1])
    v = np.array([1.0, 2.0, -1.0])
    _, t = functional.jvp(lambda x: np.sin(x) * x, x, v)
    np.testing.assert_allclose(t.data, (np.cos(x) * x + np.sin(x)) * v, rtol=1e-14)
    assert fd.is_grad_enabled()


def test_comparison_table_scipy_row_matches_what_dispatches() -> None:
    """SciPy's ufuncs run on Tensors; its Python functions raise and need the wrappers."""
    import scipy.linalg
    import scipy.special

    import funcdiff as fd
    import funcdiff.linalg
    import funcdiff.special

    cell = _comparison_row("unchanged NumPy/SciPy code")["funcdiff"]
    for name in ("scipy.special.erf", "funcdiff.linalg", "funcdiff.special", "logsumexp"):
        assert name in cell, name

    x = fd.tensor([0.3, -0.5], requires_grad=True)
    (g,) = fd.grad(np.sum(scipy.special.erf(x)), x)  # a ufunc: dispatches
    np.testing.assert_allclose(g.data, 2 / np.sqrt(np.pi) * np.exp(-(x.data**2)), rtol=1e-14)
    for call in (lambda: scipy.linalg.expm(np.diag(x)), lambda: scipy.special.logsumexp(x)):
        with pytest.raises(RuntimeError, match="gradient would be lost"):
            call()
    (g,) = fd.grad(funcdiff.special.logsumexp(x), x)
    np.testing.assert_allclose(g.data, np.exp(x.data) / np.sum(np.exp(x.data)), rtol=1e-14)
    (g,) = fd.grad(np.trace(funcdiff.linalg.expm(np.diag(x))), x)
    np.testing.assert_allclose(g.data, np.exp(x.data), rtol=1e-12)


def test_comparison_table_chunk_size_claims() -> None:
    """funcdiff's ``chunk_size`` exists and gives the same Jacobian; jax's jacrev has none
    (the README must not say it has)."""
    from funcdiff.functional import jacobian

    row = _comparison_row("vectorized Jacobian")
    assert "chunk_size" in row["funcdiff"]
    assert "chunk_size" not in row["jax"], row["jax"]
    x = np.linspace(0.1, 1.0, 9)
    f = lambda x: np.tanh(x) * np.sum(x**2)  # noqa: E731
    np.testing.assert_allclose(
        jacobian(f, x, vectorize=True, chunk_size=4).data, jacobian(f, x).data, rtol=1e-14
    )


def test_set_up_starts_in_a_virtual_environment() -> None:
    """CI runs the two commands verbatim; a venv comes first so they touch no shared Python."""
    (block,) = re.findall(r"```bash\n(.*?)```", _section("Two commands"), flags=re.S)
    commands = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.strip()]
    assert commands == [
        "python3.11 -m venv .venv && . .venv/bin/activate",
        "pip install . && python -m funcdiff",
        'pip install -e ".[test]" && pytest',
    ]
