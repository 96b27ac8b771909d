"""The README's Python examples run, and the values they state are right."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

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
