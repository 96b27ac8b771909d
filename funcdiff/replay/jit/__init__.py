"""Compiled replay: a recorded program's NumPy calls fused into XLA kernels (``funcdiff[jit]``).

Every transform of :mod:`funcdiff.replay` and :func:`funcdiff.sparse.prepare_jacobian`
/ :func:`~funcdiff.sparse.prepare_hessian` with ``replay=True`` take
``compile=False | True | "auto"``. With ``True`` a recorded program is lowered through
JAX (an optional dependency, ``pip install "funcdiff[jit]"``) to XLA, which fuses its
elementwise operations, slices, concatenations and reductions into a few compiled
loops; instructions JAX cannot run (guards, in-place writes, SciPy's special functions,
integer and complex values) stay NumPy calls in the same program. ``"auto"`` does the
same when the extra is installed and the program is large enough to repay compiling
(about :data:`AUTO_MIN_WORK` elements computed per call for each kernel it needs);
``False`` replays NumPy calls.

JAX runs in float64 inside the compiled calls only (no global setting changes). The
first run of a compiled program also runs it with NumPy and compares: a program whose
compiled values are not within 1e-12 (normwise, relative) of NumPy's is replayed with
NumPy from then on.

Examples
--------
>>> check_compile("auto")
'auto'
>>> check_compile("yes")
Traceback (most recent call last):
...
ValueError: compile must be False, True or "auto", got 'yes'
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff.replay.jit._handover import kernel_output

__all__ = [
    "AUTO_MIN_WORK",
    "EXTRA",
    "agree",
    "available",
    "check_compile",
    "kernel_output",
    "lower",
    "resolve",
]

#: The optional extra that installs the backend.
EXTRA = "funcdiff[jit]"
#: ``compile="auto"`` compiles programs that compute at least this many elements per
#: call (the sum of their results' sizes) for each kernel they need: a kernel call
#: costs tens of microseconds, which fusing fewer elements does not repay, and smaller
#: programs replay faster than they compile.
AUTO_MIN_WORK = 20_000

_lock = threading.Lock()
_state: dict[str, Any] = {"warned": False, "error": None}


def check_compile(value: Any) -> bool | str:
    """``value`` if it is ``False``, ``True`` or ``"auto"``; a ValueError naming it otherwise."""
    if value is False or value is True or (isinstance(value, str) and value == "auto"):
        return value
    raise ValueError(f'compile must be False, True or "auto", got {value!r}')


def available() -> bool:
    """Whether the extra is installed (JAX can be found; it is not imported here)."""
    return importlib.util.find_spec("jax") is not None


def _import_jax() -> Any:
    """JAX, or an ImportError naming the extra."""
    try:
        return importlib.import_module("jax")
    except Exception as error:  # noqa: BLE001  (a broken install fails in many ways)
        raise ImportError(
            f"compiled replay needs the optional extra {EXTRA} (JAX): "
            f'pip install "{EXTRA}" ({type(error).__name__}: {error})'
        ) from error


def resolve(value: Any) -> bool | str:
    """What a transform's ``compile`` argument means here: ``False``, ``True`` or
    ``"auto"``. ``True`` without the extra raises an ImportError naming it; ``"auto"``
    without it is ``False``, silently."""
    value = check_compile(value)
    if value is False:
        return False
    if value is True:
        if not available():
            raise ImportError(
                f'compile=True needs the optional extra {EXTRA} (JAX): pip install "{EXTRA}"'
            )
        _import_jax()
        return True
    return "auto" if available() else False


def _usable(mode: bool | str) -> bool:
    """Import the backend; under ``"auto"`` a broken one warns once and is not used."""
    if mode is True:
        _import_jax()
        return True
    with _lock:
        if _state["error"] is not None:
            return False
        try:
            _import_jax()
        except ImportError as error:
            _state["error"] = error
            if not _state["warned"]:
                _state["warned"] = True
                warnings.warn(
                    f"funcdiff.replay: the {EXTRA} extra is installed but does not load "
                    f"({error}); replaying NumPy calls instead",
                    RuntimeWarning,
                    stacklevel=4,
                )
            return False
    return True


def lower(
    code: list,
    inputs: tuple,
    template: list,
    outputs: list[int],
    specs: list,
    ops: dict,
    mode: bool | str,
) -> tuple[list, dict] | None:
    """The program with its runs of JAX-able instructions as compiled kernels, and a
    summary; None when nothing is compiled (``"auto"`` on a small program, a broken
    extra under ``"auto"``, or no run worth a kernel).

    ``ops`` names the program's opcodes and ``specs`` holds each slot's recorded
    ``(shape, dtype)`` (None for slots the program does not use).
    """
    if mode is False:
        return None
    if mode == "auto":
        work = sum(int(np.prod(s[0])) for s in specs if s is not None)
        if work < AUTO_MIN_WORK:
            return None
        from funcdiff.replay.jit._lower import kernels_at_least

        # A long loop of small steps (an ODE solver's) needs a kernel every few steps
        # and runs faster as NumPy calls.
        if work < AUTO_MIN_WORK * kernels_at_least(code, template, specs, ops):
            return None
    if not _usable(mode):
        return None
    from funcdiff.replay.jit._lower import lower as lower_segments

    new_code, summary = lower_segments(code, inputs, template, outputs, specs, ops)
    if not summary["kernels"]:
        return None
    return new_code, summary


def runner(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run with JAX in float64 (the compiled kernels' arguments keep their dtype)."""
    from funcdiff.replay.jit._lower import x64

    def run(*arrays: Any) -> Any:
        with x64():
            return fn(*arrays)

    return run


def agree(got: Any, expected: Any, rtol: float = 1e-12) -> bool:
    """Whether two output structures agree: the same shapes, NaN and inf in the same
    places, and the rest within ``rtol`` of the largest finite magnitude."""
    if got is None or expected is None:
        return got is expected
    if isinstance(expected, tuple):
        return (
            isinstance(got, tuple) and len(got) == len(expected) and all(map(agree, got, expected))
        )
    a, b = np.asarray(got), np.asarray(expected)
    if a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    finite = np.isfinite(b)
    if not np.array_equal(finite, np.isfinite(a)):
        return False
    if not np.array_equal(a[~finite], b[~finite], equal_nan=True):
        return False
    scale = np.abs(b[finite]).max(initial=0.0)
    return bool(np.abs(a[finite] - b[finite]).max(initial=0.0) <= rtol * scale + 1e-300)
