"""Shared pieces of the library adapters: the Variant record and result flattening."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Variant:
    """One way of computing a problem with one library.

    ``column`` is the table column (``"torch.func"``), ``setting`` the options used
    (``"jacrev"``, ``"vectorize=True"``). ``fn()`` computes the whole answer once;
    ``pick`` selects, from its flattened result, the arrays that are compared with the
    reference (all of them by default), and ``ref_pick`` the reference arrays that
    they are compared with. A variant with ``fn=None`` is listed as skipped
    with ``note`` as the reason.
    """

    column: str
    setting: str
    fn: Callable[[], Any] | None
    pick: Callable[[list], list] | None = None
    ref_pick: Callable[[list], list] | None = None
    note: str = ""
    quick: bool = True  # False: left out of --quick runs (slow and never the best)


def to_arrays(obj: Any) -> list[np.ndarray]:
    """Flatten a (nested) result of any library into a list of float64 ndarrays."""
    if isinstance(obj, (tuple, list)):
        out: list[np.ndarray] = []
        for item in obj:
            out.extend(to_arrays(item))
        return out
    if hasattr(obj, "detach") and hasattr(obj, "numpy"):  # torch and funcdiff tensors
        obj = obj.detach().numpy()
    return [np.asarray(obj, dtype=np.float64)]


def compare(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float) -> str:
    """Empty string when ``got`` matches ``want``; otherwise what is wrong."""
    if len(got) != len(want):
        return f"got {len(got)} arrays, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        w = np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return f"array {i}: shape {g.shape}, expected {w.shape}"
        if not np.all(np.isfinite(g)):
            return f"array {i}: non-finite values"
        if not np.allclose(g, w, rtol=rtol, atol=atol):
            err = np.abs(g - w)
            rel = err / np.maximum(np.abs(w), np.finfo(float).tiny)
            k = int(np.argmax(err - atol - rtol * np.abs(w)))
            return (
                f"array {i}: max abs err {err.max():.3g}, max rel err {rel.max():.3g} "
                f"(at flat index {k}: {float(g.flat[k])!r} vs {float(w.flat[k])!r})"
            )
    return ""
