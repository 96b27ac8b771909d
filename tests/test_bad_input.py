"""Every kind of bad input in the catalogue gets its exact exception and message.

The entries live in ``tests/support/bad_input_catalogue.py``; ``docs/bad_input.rst`` is rendered
from them, and ``test_docs_page_is_in_sync`` keeps the page honest.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import numpy as np
import pytest
from support import bad_input_catalogue as cat

import funcdiff as fd

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "bad_input.rst"


def _message(exc: BaseException) -> str:
    # KeyError's str() is the repr of its argument
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


@pytest.mark.parametrize("entry", cat.CATALOGUE, ids=[e.id for e in cat.CATALOGUE])
def test_bad_input(entry: cat.Entry) -> None:
    assert fd.is_grad_enabled()
    ns, exc = cat.run(entry)
    # Whatever happened, the grad mode is restored (no_grad blocks, engine failures).
    assert fd.is_grad_enabled()
    if entry.raises is None:
        if exc is not None:
            raise AssertionError(f"{entry.id} raised") from exc
        exec(entry.check, ns)
        return
    assert exc is not None, f"{entry.id}: nothing was raised"
    assert isinstance(exc, entry.raises), (
        f"{entry.id}: expected {entry.raises.__name__}, got "
        f"{''.join(traceback.format_exception(exc))}"
    )
    assert entry.match in _message(exc), f"{entry.id}: message was {_message(exc)!r}"
    if entry.same_object:
        assert exc is ns["ERR"], "the user's exception was replaced or wrapped"
        return
    if isinstance(exc, cat.INTERNAL_ERRORS):
        # allowed only where NumPy raises the very same thing on plain ndarrays
        assert entry.id in cat.NUMPY_OWN_ERRORS, (
            f"{entry.id}: a Python-internal {type(exc).__name__} came out of funcdiff"
        )


def test_catalogue_has_the_required_kinds() -> None:
    assert len(cat.CATALOGUE) >= 40
    assert len({e.id for e in cat.CATALOGUE}) == len(cat.CATALOGUE)
    groups = {e.group for e in cat.CATALOGUE}
    for required in (
        cat.G_TENSOR,
        cat.G_INT,
        cat.G_OPS,
        cat.G_V,
        cat.G_GRAD,
        cat.G_OUT,
        cat.G_RAISE,
        cat.G_TWICE,
        cat.G_INPLACE,
        cat.G_UNSUP,
        cat.G_ARRAY,
        cat.G_NAN,
        cat.G_EMPTY,
        cat.G_MAG,
        cat.G_OPTS,
        cat.G_MODE,
    ):
        assert required in groups, required


def test_numpy_errors_in_the_catalogue_are_numpy_s_own() -> None:
    """The entries that pass NumPy's error through raise the same on plain ndarrays."""
    a = np.array([1.0, 2.0, 3.0])
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        a[5]
    with pytest.raises(np.exceptions.AxisError):
        np.sum(a, axis=3)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        np.linalg.inv(np.zeros((2, 2)))


def test_the_user_exception_keeps_its_traceback_and_no_state_leaks() -> None:
    """After a user exception in the middle of a jacobian, the same call works again."""
    calls = []

    def f(x):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first call fails")
        return x**2

    x = fd.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="first call fails") as info:
        fd.functional.jacobian(f, x)
    assert any(fr.name == "f" for fr in traceback.extract_tb(info.value.__traceback__))
    jac = fd.functional.jacobian(f, x)
    np.testing.assert_array_equal(jac.data, np.diag([2.0, 4.0]))


def test_docs_page_is_in_sync() -> None:
    expected = cat.render_rst()
    assert PAGE.exists(), (
        "run: python tests/support/bad_input_catalogue.py --write docs/bad_input.rst"
    )
    assert PAGE.read_text(encoding="utf-8") == expected, (
        "docs/bad_input.rst is out of date: "
        "python tests/support/bad_input_catalogue.py --write docs/bad_input.rst"
    )


# Regressions: these guarded derivatives (a safe value at 0) turned a NaN input into a
# finite gradient (0, or a weight of 1), so a NaN loss could drive a finite step. Fixed by
# guarding with ``!= 0`` instead of ``> 0`` in the rules.
NAN_GUARDED = {
    "norm": lambda x: np.linalg.norm(x),
    "norm axis": lambda x: np.sum(np.linalg.norm(x.reshape(1, 2), axis=1)),
    "norm ord=3": lambda x: np.linalg.norm(x, 3),
    "vector_norm": lambda x: np.linalg.vector_norm(x),
    "std": lambda x: np.std(x),
    "hypot": lambda x: np.sum(np.hypot(x, 1.0)),
    "arctan2": lambda x: np.sum(np.arctan2(x, 1.0)),
    "logaddexp": lambda x: np.sum(np.logaddexp(x, 1.0)),
    "logaddexp2": lambda x: np.sum(np.logaddexp2(x, 1.0)),
}


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("name", list(NAN_GUARDED))
def test_nan_input_gives_nan_gradient_through_guarded_rules(name: str) -> None:
    x = fd.tensor([np.nan, 1.5], requires_grad=True)
    y = NAN_GUARDED[name](x)
    (g,) = fd.grad(y, x)
    assert np.isnan(y.data)
    assert np.isnan(g.data[0]), f"{name}: a NaN input gave the gradient {g.data[0]}"
    # the guard itself still works: at the guarded point the gradient is 0, not NaN
    z = fd.tensor([0.0, 0.0], requires_grad=True)
    if name in ("norm", "norm axis", "norm ord=3", "vector_norm", "std"):
        (g0,) = fd.grad(NAN_GUARDED[name](z), z)
        assert np.array_equal(g0.data, [0.0, 0.0])
