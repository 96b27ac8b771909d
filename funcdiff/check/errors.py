"""The exception every derivative checker raises when AD and finite differences disagree."""

from __future__ import annotations

__all__ = ["GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised when analytical derivatives disagree with finite differences.

    The message opens with ``Jacobian mismatch for output i with respect to input j``
    (as torch's) and continues with a table of the worst elements.
    """
