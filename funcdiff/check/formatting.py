"""How numbers and element indices are written in reports, messages and JSON."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["format_number", "indexed_name", "json_float"]


def indexed_name(name: str, idx: tuple) -> str:
    """``x[1,2]`` for an element of ``x``; ``x`` itself for a 0-d value."""
    if not idx:
        return name
    return f"{name}[{','.join(str(int(i)) for i in idx)}]"


def format_number(x: Any, digits: int = 3) -> str:
    """``1.23e-05``-style with ``digits`` significant digits; ``-`` for None."""
    if x is None:
        return "-"
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits - 1}e}" if x != 0 else "0"


def json_float(x: Any) -> float | None:
    """A float for JSON: NaN, infinities and None become None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None
