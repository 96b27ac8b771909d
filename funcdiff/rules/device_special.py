"""``scipy.special`` functions that a backend's special-function module lacks, written
with the ones it has: the forwards of their rules on backend arrays (CuPy).

``cupyx.scipy.special`` has ``betainc`` but not ``betaincc``, its complement. On a
backend array the rule's forward computes ``betaincc(a, b, x)`` from the backend's
``betainc`` by the identity that keeps the digits: ``1 - betainc(a, b, x)`` while
``betainc(a, b, x) <= 0.999`` (at most three digits of cancellation), else the upper
tail ``betainc(b, a, 1 - x)`` plus the density times the rounding error of ``1 - x``
(exact in floating point; the first-order term keeps the digits of a small ``x``).
Against SciPy it agrees to ``1e-12`` relative for ``a, b`` up to about 30, and within
the function's own conditioning beyond. The derivative is the rule's own.

``stdtr`` has no such form here: the identities through ``betainc`` round ``t`` away
where ``t^2`` is small beside ``df``, so it stays refused on backend arrays.

Examples
--------
>>> import numpy as np
>>> import scipy.special as sp
>>> x = np.array([1e-12, 0.3, 0.97, 1.0])
>>> bool(np.allclose(betaincc_from(sp, 2.5, 40.0, x), sp.betaincc(2.5, 40.0, x), 1e-13, 0))
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff._core.backends import first_foreign, special_module

__all__ = ["betaincc_from", "on_device"]


def betaincc_from(s: Any, a: Any, b: Any, x: Any) -> Any:
    """``betaincc(a, b, x)`` from the special-function module ``s``'s ``betainc``."""
    lower = s.betainc(a, b, x)
    with np.errstate(all="ignore"):
        y = 1.0 - x
        # 1 - x rounds where x < 1/2; its rounding error (exact in floating point) moves
        # the upper tail by the density times it: that first-order term restores the digits
        error = (1.0 - y) - x
        density = np.exp(s.xlogy(b - 1.0, y) + s.xlogy(a - 1.0, x) - s.betaln(a, b))
        upper = s.betainc(b, a, y) - np.where(error == 0.0, 0.0, density * error)
        return np.where(lower <= 0.999, 1.0 - lower, upper)


def on_device(ufunc: Any, from_betainc: Callable) -> Callable:
    """The forward of ``ufunc``'s rule: SciPy's ufunc, and on a backend array the
    backend's own function of that name or else ``from_betainc`` on its module."""

    def forward(*args: Any) -> Any:
        try:
            return ufunc(*args)
        except TypeError:
            device = first_foreign(args)
            if device is None or any(hasattr(type(a), "grad_fn") for a in args):
                raise
            s = special_module(device)
            own = getattr(s, ufunc.__name__, None)
            if own is not None:
                return own(*args)
            if getattr(s, "betainc", None) is None:
                raise
            return from_betainc(s, *args)

    forward.__name__ = forward.__qualname__ = ufunc.__name__
    forward.__doc__ = f"``scipy.special.{ufunc.__name__}``, also on backend arrays."
    return forward
