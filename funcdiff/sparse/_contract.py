"""Exact patterns of contractions (``matmul``, ``dot``, ``tensordot``, ``einsum`` ...).

Every contraction rule is first written as an einsum over explicit index letters
(:func:`lower`); the pattern then follows from the letters alone, plus the zeros of a
constant operand: output element ``o`` depends on element ``e`` of a variable operand
when some term of the sum that computes ``o`` contains ``e`` and no structural zero of
a constant operand. For two operands the selectors are built directly from the index
classes (batch, free, contracted, summed-alone), in memory proportional to their
nonzeros; more operands are enumerated over the iteration space when it is small.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from funcdiff.sparse._patterns import Pattern, positions, product, selector, union

__all__ = ["Operand", "lower", "contract"]

#: Above this many selector entries a contraction's pattern is taken as dense.
MAX_ENTRIES = 50_000_000
#: Iteration spaces up to this size are enumerated for three or more operands.
MAX_ITERATIONS = 2_000_000


class NotLowered(Exception):
    """The call has a form the einsum lowering does not cover (the caller goes dense)."""


@dataclass
class Operand:
    """One operand: its letters, shape and either a pattern (variable) or a constant."""

    letters: str
    shape: tuple[int, ...]
    pattern: Pattern | None  # None: a constant
    nonzero: np.ndarray | None  # a constant's structural nonzeros (None: all nonzero)
    slot: int  # operands with the same slot are the same value (x @ x)


def _batch_letters(n: int) -> str:
    return string.ascii_uppercase[:n]


def lower(name: str, shapes: Sequence[tuple[int, ...]], args: tuple, kwargs: dict) -> tuple:
    """``(operand letters, output letters)`` of contraction ``name`` on operands of
    ``shapes`` (in argument order)."""
    if name == "einsum":
        return _parse_einsum(args[0], shapes)
    a, b = shapes[0], shapes[1]
    na, nb = len(a), len(b)
    if name in ("matmul", "linalg.matmul"):
        if na == 0 or nb == 0:
            raise NotLowered
        batch = _batch_letters(max(na, nb) - 2) if max(na, nb) > 2 else ""
        la = "k" if na == 1 else batch[len(batch) - (na - 2) :] + "mk"
        lb = "k" if nb == 1 else batch[len(batch) - (nb - 2) :] + "kn"
        return [la, lb], batch + ("m" if na > 1 else "") + ("n" if nb > 1 else "")
    if name == "dot":
        if na == 0 or nb == 0:
            return _scalar_product(na, nb)
        if nb == 1:
            free = "abcdefgh"[: na - 1]
            return [free + "z", "z"], free
        fa, fb = "abcdefgh"[: na - 1], "pqrstuvw"[: nb - 2]
        return [fa + "z", fb + "zy"], fa + fb + "y"
    if name == "inner":
        if na == 0 or nb == 0:
            return _scalar_product(na, nb)
        fa, fb = "abcdefgh"[: na - 1], "pqrstuvw"[: nb - 1]
        return [fa + "z", fb + "z"], fa + fb
    if name == "vdot":
        return ["z", "z"], ""
    if name in ("tensordot", "linalg.tensordot"):
        axes = kwargs.get("axes", args[2] if len(args) > 2 else 2)
        if isinstance(axes, (int, np.integer)):
            axes_a, axes_b = list(range(na - int(axes), na)), list(range(int(axes)))
        else:
            axes_a, axes_b = (list(np.atleast_1d(x)) for x in axes)
        axes_a = [int(x) % na for x in axes_a]
        axes_b = [int(x) % nb for x in axes_b]
        chars_a, chars_b = list("abcdefghijkl"[:na]), list("mnopqrstuvwx"[:nb])
        for x, y in zip(axes_a, axes_b):
            chars_b[y] = chars_a[x]
        out = [c for i, c in enumerate(chars_a) if i not in axes_a]
        out += [c for i, c in enumerate(chars_b) if i not in axes_b]
        return ["".join(chars_a), "".join(chars_b)], "".join(out)
    if name in ("vecdot", "linalg.vecdot"):
        axis = kwargs.get("axis", -1)
        if "axes" in kwargs or na == 0 or nb == 0:
            raise NotLowered
        letters = []
        batch = _batch_letters(max(na, nb) - 1)
        for n in (na, nb):
            ax = int(axis) % n
            rest = list(batch[len(batch) - (n - 1) :])
            rest.insert(ax, "z")
            letters.append("".join(rest))
        return letters, batch
    if name == "matvec":
        if "axes" in kwargs or "axis" in kwargs or na < 2 or nb < 1:
            raise NotLowered
        batch = _batch_letters(max(na - 2, nb - 1))
        return [batch[len(batch) - (na - 2) :] + "mz", batch[len(batch) - (nb - 1) :] + "z"], (
            batch + "m"
        )
    if name == "vecmat":
        if "axes" in kwargs or "axis" in kwargs or na < 1 or nb < 2:
            raise NotLowered
        batch = _batch_letters(max(na - 1, nb - 2))
        return [batch[len(batch) - (na - 1) :] + "z", batch[len(batch) - (nb - 2) :] + "zm"], (
            batch + "m"
        )
    raise NotLowered


def _scalar_product(na: int, nb: int) -> tuple:
    free = "abcdefgh"[: max(na, nb)]
    return [free if na else "", free if nb else ""], free


def _parse_einsum(subscripts: Any, shapes: Sequence[tuple[int, ...]]) -> tuple:
    if not isinstance(subscripts, str):
        raise NotLowered  # the sublist form
    spec = subscripts.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise NotLowered
    used = set(c for c in spec if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    n_ellipsis = 0
    for term, shape in zip(terms, shapes):
        if "..." in term:
            n_ellipsis = max(n_ellipsis, len(shape) - (len(term) - 3))
    ell = "".join(spare[:n_ellipsis])
    letters = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            k = len(shape) - (len(term) - 3)
            term = term.replace("...", ell[n_ellipsis - k :])
        if len(term) != len(shape):
            raise NotLowered
        letters.append(term)
    if arrow:
        out = output.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for term in letters:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return letters, out


def _sizes(operands: Sequence[Operand]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for op in operands:
        for c, n in zip(op.letters, op.shape):
            if n != 1 or c not in sizes:
                sizes[c] = max(sizes.get(c, 1), n) if n != 1 else sizes.get(c, 1)
    return sizes


def _normalise(op: Operand, sizes: dict[str, int]) -> tuple[str, tuple, Pattern | None, Any]:
    """Remove repeated letters (diagonals) and broadcast size-1 axes: the operand's
    letters become unique and its shape the letters' sizes."""
    pos = positions(op.shape)
    letters = op.letters
    unique = "".join(dict.fromkeys(letters))
    if unique != letters:
        pos = np.einsum(f"{letters}->{unique}", pos)
    full = tuple(sizes[c] for c in unique)
    pos = np.broadcast_to(pos, full)
    flat = pos.ravel()
    pattern = op.pattern.take(flat) if op.pattern is not None else None
    nonzero = None
    if op.nonzero is not None:
        nonzero = np.asarray(op.nonzero).ravel()[flat].reshape(full)
    return unique, full, pattern, nonzero


def contract(
    operands: Sequence[Operand], out_letters: str, out_size: int, acc: Any
) -> Pattern | None:
    """The pattern of the contraction's output; the Hessian contributions go to ``acc``."""
    sizes = _sizes(operands)
    norm = [_normalise(op, sizes) for op in operands]
    variable = [i for i, op in enumerate(operands) if op.pattern is not None]
    if not variable:
        return None
    if len(operands) == 1:
        letters, full, pattern, _ = norm[0]
        # The one operand is variable, so it has a pattern.
        return product(_reduction(letters, full, out_letters), cast(Pattern, pattern))
    if len(operands) == 2:
        return _two(operands, norm, out_letters, sizes, acc)
    return _many(operands, norm, out_letters, sizes, acc)


def _reduction(letters: str, full: tuple, out_letters: str) -> sp.csr_array:
    summed = [i for i, c in enumerate(letters) if c not in out_letters]
    kept = [letters.index(c) for c in out_letters]
    pos = positions(full).transpose(kept + summed)
    nout = int(np.prod([full[i] for i in kept]))
    rows = np.repeat(np.arange(nout), pos.size // max(nout, 1))
    return selector(rows, pos.ravel(), (nout, pos.size))


def _two(operands, norm, out_letters, sizes, acc):
    (la, fa, pa, za), (lb, fb, pb, zb) = norm
    batch = [c for c in la if c in lb and c in out_letters]
    ctr = [c for c in la if c in lb and c not in out_letters]
    af = [c for c in la if c not in lb and c in out_letters]
    bf = [c for c in lb if c not in la and c in out_letters]
    ao = [c for c in la if c not in lb and c not in out_letters]
    bo = [c for c in lb if c not in la and c not in out_letters]
    n = {
        k: int(np.prod([sizes[c] for c in v]))
        for k, v in dict(b=batch, c=ctr, af=af, bf=bf, ao=ao, bo=bo).items()
    }

    def canon(letters: str, full: tuple, order: list[str], shape: tuple) -> np.ndarray:
        pos = positions(full).transpose([letters.index(c) for c in order])
        return pos.reshape(shape)

    out_full = tuple(sizes[c] for c in out_letters)
    pos_a = canon(la, fa, batch + af + ctr + ao, (n["b"], n["af"], n["c"], n["ao"]))
    pos_b = canon(lb, fb, batch + ctr + bo + bf, (n["b"], n["c"], n["bo"], n["bf"]))
    pos_o = canon(out_letters, out_full, batch + af + bf, (n["b"], n["af"], n["bf"]))
    out_size = pos_o.size
    parts = []
    if pb is not None:
        abar = (
            np.ones((n["b"], n["af"], n["c"]), bool)
            if za is None
            else (za.ravel()[pos_a].any(axis=3))
        )
        parts.append(_operand(pos_b.transpose(0, 3, 1, 2), abar, pos_o, pb, out_size))
    if pa is not None:
        bbar = (
            np.ones((n["b"], n["c"], n["bf"]), bool)
            if zb is None
            else (zb.ravel()[pos_b].any(axis=2))
        )
        parts.append(
            _operand(pos_a, bbar.transpose(0, 2, 1), pos_o.transpose(0, 2, 1), pa, out_size)
        )
    if acc is not None and pa is not None and pb is not None:
        # Every term multiplies one element of each operand with the same batch and
        # contracted indices: group them, and each group pairs all of A's with all of B's.
        groups = n["b"] * n["c"]
        ga = np.repeat(np.arange(groups), n["af"] * n["ao"])
        ea = pos_a.transpose(0, 2, 1, 3).ravel()
        gb = np.repeat(np.arange(groups), n["bo"] * n["bf"])
        eb = pos_b.ravel()
        ua = product(selector(ga, ea, (groups, pa.size)), pa)
        ub = product(selector(gb, eb, (groups, pb.size)), pb)
        acc.cross(ua, ub)
    return union(parts)


def _operand(
    pos_v: np.ndarray, bar_w: np.ndarray, pos_o: np.ndarray, pattern: Pattern, out_size: int
) -> Pattern:
    """What the output reads of one operand of a two-operand contraction.

    In canonical layouts: the variable operand's positions ``pos_v`` (batch, its free,
    contracted, its own summed), where the other operand is structurally nonzero
    ``bar_w`` (batch, its free, contracted), and the output's positions ``pos_o``
    (batch, the other's free, this one's free). Output ``(b, w, v)`` reads element
    ``(b, v, c, o)`` for every ``c`` with ``bar_w[b, w, c]`` and every ``o``.
    """
    b_, w_, c_ = np.nonzero(bar_w)
    nv, no = pos_v.shape[1], pos_v.shape[3]
    if b_.size * nv * no > MAX_ENTRIES:
        return _dense_block(pattern, out_size)
    rows = np.broadcast_to(pos_o[b_, w_, :][:, :, None], (b_.size, nv, no))
    cols = pos_v[b_, :, c_, :]
    return product(selector(rows.ravel(), cols.ravel(), (out_size, pattern.size)), pattern)


def _dense_block(pattern: Pattern, size: int) -> Pattern:
    return Pattern(pattern.union_row(), np.zeros(size, np.int64))


def _many(operands, norm, out_letters, sizes, acc):
    letters_all = "".join(dict.fromkeys("".join(x[0] for x in norm) + out_letters))
    space = tuple(sizes[c] for c in letters_all)
    if int(np.prod(space)) > MAX_ITERATIONS:
        live = [x[2] for x in norm if x[2] is not None]
        out_size = int(np.prod([sizes[c] for c in out_letters]))
        rows = union([_dense_block(p, 1) for p in live]).union_row() if live else None
        dense = Pattern(rows, np.zeros(out_size, np.int64))
        if acc is not None:
            acc.square(dense)
        return dense

    def spread(letters: str, full: tuple) -> np.ndarray:
        pos = positions(full)
        shape = [sizes[c] if c in letters else 1 for c in letters_all]
        order = sorted(range(len(letters)), key=lambda i: letters_all.index(letters[i]))
        return np.broadcast_to(pos.transpose(order).reshape(shape), space).ravel()

    out_full = tuple(sizes[c] for c in out_letters)
    out_pos = spread(out_letters, out_full)
    live = np.ones(out_pos.size, bool)
    for letters, full, pattern, nonzero in norm:
        if pattern is None and nonzero is not None:
            live &= nonzero.ravel()[spread(letters, full)]
    parts, groups = [], []
    out_size = int(np.prod(out_full))
    for letters, full, pattern, _ in norm:
        if pattern is None:
            continue
        at = spread(letters, full)[live]
        parts.append(product(selector(out_pos[live], at, (out_size, pattern.size)), pattern))
        groups.append((at, pattern))
    if acc is not None:
        terms = np.arange(int(live.sum()))
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                (ai, pi), (aj, pj) = groups[i], groups[j]
                ui = product(selector(terms, ai, (terms.size, pi.size)), pi)
                uj = product(selector(terms, aj, (terms.size, pj.size)), pj)
                acc.cross(ui, uj)
    return union(parts)
