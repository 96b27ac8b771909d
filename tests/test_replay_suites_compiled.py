"""The replay and sparse suites again, with every default ``compile="auto"`` forced to ``True``.

Each test below is one of another module's tests that replays (its source names
``replay``), collected here a second time and run with the transforms' default
``compile="auto"`` resolved as ``compile=True``: every recorded program that JAX can
run is lowered to XLA kernels, however small, and a lowering that fails raises instead
of replaying NumPy calls. The assertions are the original tests' own, so the compiled
programs must give the same numbers, errors and aliasing as NumPy replay. Tests that
pass ``compile`` themselves keep what they pass.

Left out: the rule table of ``test_replay`` (``test_replay_compiled`` runs it compiled,
grouped into a few programs), and the tests of generated NumPy code itself (that a
program is compiled to Python source, the scatter accumulation it contains).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator

import numpy as np
import pytest

import funcdiff.replay as replay
import funcdiff.replay.jit as jit

pytest.importorskip("jax")

SUITES = (
    "test_replay",
    "test_sparse_jacobian",
    "test_sparse_matrices",
    "test_sparse_numpy_functions",
    "test_sparse_linalg",
    "test_implicit_sparse",
    "test_func_vmap",
)
#: Tests that check NumPy replay itself, not its results.
LEFT_OUT = frozenset(
    {
        "test_replay_equals_eager_for_every_rule",
        "test_scatters_are_added_into_the_sum_they_feed",
        "test_a_program_is_recorded_once_and_compiled",
        "test_scatter_added_equals_the_scatter_plus_the_total",
    }
)


def _replaying_tests(suite: str) -> dict[str, object]:
    module = importlib.import_module(suite)
    found = {}
    for name, test in vars(module).items():
        if not name.startswith("test_") or name in LEFT_OUT or not inspect.isfunction(test):
            continue
        if test.__module__ != module.__name__ or "replay" not in inspect.getsource(test):
            continue
        found[f"{name}__{suite.removeprefix('test_')}"] = test
    return found


for _suite in SUITES:
    globals().update(_replaying_tests(_suite))


@pytest.fixture(autouse=True)
def _compile_forced(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``"auto"`` resolved as ``True``; a compiled first run that disagrees with the
    NumPy calls (which then replay silently) fails the test."""
    resolve, agree = jit.resolve, jit.agree
    disagreements: list[str] = []

    def forced(value: object) -> bool | str:
        mode = resolve(value)
        return True if mode == "auto" else mode

    def checked(got: object, expected: object, rtol: float = 1e-12) -> bool:
        same = agree(got, expected, rtol)
        if not same:
            disagreements.append(f"compiled {got!r}, NumPy {expected!r}")
        return same

    monkeypatch.setattr(jit, "resolve", forced)
    monkeypatch.setattr(jit, "agree", checked)
    yield
    assert not disagreements, disagreements


def test_the_default_is_forced_to_compile_here() -> None:
    vg = replay.value_and_grad(lambda x: np.sum(np.tanh(x) ** 2))
    x = np.linspace(-1.0, 1.0, 5)
    value, g = vg(x)
    np.testing.assert_allclose(g, 2 * np.tanh(x) * (1 - np.tanh(x) ** 2), rtol=1e-13)
    assert vg.compile is True
    program = vg._cache[next(iter(vg._cache))][0]
    assert program.info["jit"]["kernels"] == 1
    assert program.info["jit"]["numpy"] == 0
