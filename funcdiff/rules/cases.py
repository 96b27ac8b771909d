"""Test points of the rules: :class:`Arg` says how to draw one argument, :class:`Case`
one call. Every rule carries its cases (``Rule(cases=..., complex_cases=...)``), and the
test suite checks each registered rule at each of them against finite differences
(:func:`funcdiff.testing.check_rule_case`).

Examples
--------
>>> import numpy as np
>>> from funcdiff.rules.cases import Arg, Case
>>> Arg((2, 2), kind="spd").sample(np.random.default_rng(0)).shape
(2, 2)
>>> Case((Arg((3,)), 2.0)).order
2
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Arg", "Case"]


@dataclass(frozen=True)
class Arg:
    """How the tests draw one array argument of a rule.

    Parameters
    ----------
    shape : tuple of int
        Shape of the array.
    low, high : float
        Interval the values are drawn from (``kind="uniform"``); keep it inside the
        function's domain and away from kinks.
    kind : str
        ``"uniform"``; ``"spd"`` (symmetric positive definite, last two axes);
        ``"wellcond"`` (a well-conditioned square matrix); ``"int"`` (integers in
        ``[low, high)``, never differentiated); ``"bool"``; ``"distinct"`` (values
        that are well separated, for sorting and max/min); and complex128 values:
        ``"complex"`` (real part in ``[low, high]``, imaginary part within
        ``min(1, (high - low) / 2)`` of 0, off the real axis's branch cuts),
        ``"hpd"`` (Hermitian positive definite), ``"cwellcond"`` (a well-conditioned
        complex square matrix); ``"real"`` is ``"uniform"`` for an argument that stays
        real in the complex tests (the input of ``rfft``).
    diff : bool
        Whether the tests differentiate with respect to this argument.
    """

    shape: tuple[int, ...]
    low: float = -2.0
    high: float = 2.0
    kind: str = "uniform"
    diff: bool = True

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        shape = tuple(self.shape)
        if self.kind in ("uniform", "real"):
            return np.asarray(rng.uniform(self.low, self.high, size=shape))
        if self.kind == "int":
            return rng.integers(int(self.low), int(self.high), size=shape)
        if self.kind == "bool":
            return rng.uniform(size=shape) < 0.5
        if self.kind == "distinct":
            n = int(np.prod(shape))
            values = self.low + (self.high - self.low) * (np.arange(n) + 0.5) / max(n, 1)
            return rng.permutation(values).reshape(shape)
        if self.kind in ("spd", "wellcond"):
            n = shape[-1]
            a = rng.uniform(-1.0, 1.0, size=shape)
            if self.kind == "spd":
                return a @ np.swapaxes(a, -1, -2) / n + np.eye(n)
            return a / n + 2.0 * np.eye(n)
        if self.kind == "complex":
            width = min(1.0, (self.high - self.low) / 2.0)
            real = rng.uniform(self.low, self.high, size=shape)
            return real + 1j * rng.uniform(-width, width, size=shape)
        if self.kind in ("hpd", "cwellcond"):
            n = shape[-1]
            a = rng.uniform(-1.0, 1.0, size=shape) + 1j * rng.uniform(-1.0, 1.0, size=shape)
            if self.kind == "hpd":
                return a @ np.conj(np.swapaxes(a, -1, -2)) / n + np.eye(n)
            return a / n + 2.0 * np.eye(n)
        raise ValueError(f"unknown Arg kind {self.kind!r}")

    def complexified(self) -> Arg:
        """The complex counterpart of a real kind (``"uniform"`` -> ``"complex"``,
        ``"spd"`` -> ``"hpd"``, ``"wellcond"`` -> ``"cwellcond"``); others as they are."""
        kind = _COMPLEX_KINDS.get(self.kind) if self.diff else None
        if kind is None:
            return self
        return Arg(self.shape, self.low, self.high, kind, self.diff)


_COMPLEX_KINDS = {"uniform": "complex", "spd": "hpd", "wellcond": "cwellcond"}


@dataclass(frozen=True)
class Case:
    """One test point of a rule: the arguments and keyword arguments of a call.

    ``args`` holds :class:`Arg` entries (drawn by the tests), lists of them (for
    ``concatenate``-like functions) and plain constants, passed through as they are.
    ``output`` maps the forward result to the array or tuple of arrays that the
    tests differentiate (for example to remove the sign ambiguity of eigenvectors).
    ``writes`` makes it the case of an in-place operation (``put_along_axis``), which
    writes into its positional argument ``writes`` and returns None: the tests pass a
    copy there (a recorded copy of a Tensor, so the written Tensor is never a leaf)
    and differentiate that argument's value after the call.

    Examples
    --------
    >>> Case((Arg((2, 3)), np.array([[0], [2]]), Arg((2, 1)), 1), writes=0).writes
    0
    """

    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    output: Callable | None = None
    order: int = 2
    atol: float = 1e-6
    rtol: float = 1e-5
    note: str = ""
    writes: int | None = None
