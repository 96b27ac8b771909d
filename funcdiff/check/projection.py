"""Fast mode: a derivative block checked along random directions before element by element.

For input ``x`` and an output ``f`` of a target with AD Jacobian ``J``, fast mode
compares ``a = v^T J d`` (one backward pass) with a finite difference of
``tau -> v^T f(x + tau d)``, for a random direction ``d`` and random output weights
``v`` (just 1 for a scalar output). Each element of ``d`` and ``v`` is a random sign
times a random magnitude in [1, 2] (times a scale for ``d``): no element is weighted
near zero, and errors in two elements cannot cancel exactly.

A passing projection is trusted only with a certificate:

* The directional difference is Richardson-extrapolated from central differences at
  ``+-t, +-2t, +-4t``. Its error estimate comes from the projected series itself (the
  extrapolation's last correction and its change against the next larger step, plus
  rounding), not from a bound summed element by element: the rows' truncation errors
  add up exactly as the rows do, and partly cancel.
* ``x + o t d`` is rounded to the input's dtype. The part of the change of ``f`` due to
  that rounding, a first-order term of size ``eps |x| / t`` that would swamp the
  difference for elements far from 0, is removed with the AD projection.
* An element ``(i, k)`` whose AD value is off by more than its tolerance
  ``atol + rtol |J_ik|`` moves the projection by more than ``|v_i d_k|`` times that
  tolerance. The projection certifies the block only where even the least sensitive
  element would have moved it by twice the bound ``T`` (three times the error
  estimate, plus AD round-off) that the mismatch is held to: any element that the
  element-wise check would fail shows as a mismatch. The default ``atol`` is
  ``sqrt(eps)`` times the largest AD element, taken from one AD row of the block.
* The step is halved from ``eps**(1/5)`` until the estimate stops improving, for the
  direction scaled by ``max(|x|, 1)``, then by 1, then by ``|x|``, until one
  certifies (within an evaluation budget). A second, independent direction must then
  agree and certify at the same step.

A block whose projection disagrees (at two successive steps), crosses a kink (the
one-sided differences along ``d`` disagree by more than the bound) or cannot be
certified is re-run element-wise: fast mode itself never fails a block, and passes one
only with the certificate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from funcdiff.check._common import FD_TRUST_FACTOR, default_rtol, lowest_precision, machine_eps
from funcdiff.check.analytical import Analytical
from funcdiff.check.finite_differences import evaluate_input, power_of_two, typical_magnitude
from funcdiff.check.targets import Target

__all__ = ["MIN_SIZE", "ProjectionOutcome", "project_blocks"]

# Inputs with fewer elements are checked element-wise at once (4 evaluations each).
MIN_SIZE = 8
# Function evaluations fast mode may spend per input before it gives up (element-wise
# needs at least 4 per element), and the most halvings of the step per scaling.
_BUDGET = 200
_MAX_LEVELS = 24
# Halvings without a better bound after which a scaling's ladder stops.
_STALL = 4
# Bisection of a mismatch stops at this many elements, which are checked element-wise.
_LEAF = 4
# How much larger than the bound the smallest element shift must be to certify.
_CERTIFY_MARGIN = 2.0
# The element-wise check fails an element only beyond FD_TRUST_FACTOR times an error
# estimate that holds 2 (central) or 4 (Richardson) times the rounding term eps |f| / h.
_FLOOR_FACTOR = {"central": 2.0 * FD_TRUST_FACTOR, "richardson": 4.0 * FD_TRUST_FACTOR}


@dataclass
class ProjectionOutcome:
    """Fast mode's word on one block: certified, or why it must be re-run element-wise."""

    certified: bool
    note: str
    suspects: list[int] | None = None  # elements a bisection of the mismatch led to


@dataclass
class _Level:
    """The projected difference quotients at one step, for every output."""

    t: float
    value: np.ndarray  # Richardson-extrapolated directional derivative
    ra: np.ndarray  # the once-extrapolated quotient at t
    kink: np.ndarray  # |2 (F - B)(t) - (F - B)(2t)| of the one-sided quotients
    kink_floor: np.ndarray
    noise: np.ndarray
    trusted: np.ndarray  # finite values, in the asymptotic range of the step


def _weights(rng: np.random.Generator, size: int) -> np.ndarray:
    """Random signs times magnitudes in [1, 2]."""
    return rng.choice([-1.0, 1.0], size=size) * rng.uniform(1.0, 2.0, size=size)


class _Probe:
    """Random weights ``w`` (for the direction) and ``v`` (for the outputs), with ``v^T J``."""

    def __init__(self, fm: _FastMode, rng: np.random.Generator) -> None:
        self.w = _weights(rng, fm.n)
        self.v: list[np.ndarray | None] = []
        self.vj: list[np.ndarray] = []
        for q, m in enumerate(fm.sizes):
            v = None if m == 1 else _weights(rng, m)
            cot = np.ones(fm.out_shapes[q]) if v is None else v.reshape(fm.out_shapes[q])
            g = fm.analytical.vjp(q, fm.j, cot)
            self.v.append(v)
            self.vj.append(np.asarray(g, dtype=np.float64).ravel())


class _Along:
    """One probe with one scaling: ``d = w * s``, the AD side, and cached evaluations."""

    def __init__(self, fm: _FastMode, probe: _Probe, scaling: np.ndarray) -> None:
        self.fm = fm
        self.probe = probe
        self.d = probe.w * scaling
        self.a = np.array([_dot(vj, self.d) for vj in probe.vj])
        self.scale = np.array([float(np.sum(np.abs(vj * self.d))) for vj in probe.vj])
        self.points: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.p0 = np.array([fm.project(probe, q, fm.f0) for q in range(fm.nq)])
        self.n0 = np.array([fm.noise_of(probe, q, fm.f0) for q in range(fm.nq)])
        self.sens = np.zeros(fm.nq)
        self.strict = np.zeros(fm.nq)
        self._sens_ready = False

    def sensitivity(self) -> np.ndarray:
        """Per output: the least shift of the projection by an element off by its tolerance.

        An element's tolerance here is at least the rounding floor of the element-wise
        check (:meth:`_FastMode.floor_of`); :attr:`strict` holds the shifts without it.
        """
        if not self._sens_ready:
            fm = self.fm
            ad = np.abs(self.d)
            self.strict = np.zeros(fm.nq)
            for q in range(fm.nq):
                if fm.sizes[q] == 0:
                    continue
                at = fm.atol_of(q)
                floor = fm.floor_of(q)
                v = self.probe.v[q]
                if v is None:
                    rel = fm.rt[q] * np.abs(self.probe.vj[q])
                    self.strict[q] = float(np.min(ad * (at + rel)))
                    self.sens[q] = float(np.min(ad * (np.maximum(at, floor[0] / fm.steps) + rel)))
                else:
                    # Each row's floor at the longest default step: never above the true one.
                    row_at = np.maximum(at, floor / float(np.max(fm.steps)))
                    self.strict[q] = float(np.min(np.abs(v)) * np.min(ad) * at)
                    self.sens[q] = float(np.min(np.abs(v) * row_at) * np.min(ad))
            self._sens_ready = True
        return self.sens

    def point(self, sign: int, e: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Projected outputs, their rounding and finiteness at ``x + sign * t0 * 2**e * d``."""
        key = (sign, e)
        if key not in self.points:
            fm = self.fm
            tau = sign * fm.t0 * 2.0**e
            xj = (fm.xf + tau * self.d).astype(fm.x.dtype)
            fm.spent += 1
            try:
                rows = evaluate_input(fm.target, fm.j, xj.reshape(fm.x.shape))
            except (ValueError, ArithmeticError):
                # A long step may leave the function's domain (or change its output's
                # shape); such a point only makes its levels unusable. The element-wise
                # re-run reports whatever happens at its own, short steps.
                rows = np.full(fm.f0.shape, np.nan)
            # Remove the first-order effect of rounding x + tau d to the input's dtype.
            moved = xj.astype(np.float64) - fm.xf - tau * self.d
            vals, noise, finite = [], [], []
            for q in range(fm.nq):
                part = rows[fm.slices[q]]
                vals.append(fm.project(self.probe, q, rows) - _dot(self.probe.vj[q], moved))
                noise.append(fm.noise_of(self.probe, q, rows))
                finite.append(bool(np.all(np.isfinite(part))))
            if fm.first_rows is None and np.all(np.isfinite(rows)):
                fm.first_rows = rows
            self.points[key] = (np.array(vals), np.array(noise), np.array(finite))
        return self.points[key]

    def level(self, k: int) -> _Level:
        """Quotients at step ``t0 * 2**-k`` (points at 1, 2 and 4 times it, both sides)."""
        t = self.fm.t0 * 2.0**-k
        pts = {o * s: self.point(s, -k + i) for i, o in enumerate((1, 2, 4)) for s in (1, -1)}
        val = {o: pts[o][0] for o in pts}
        with np.errstate(all="ignore"):
            c1 = (val[1] - val[-1]) / (2 * t)
            c2 = (val[2] - val[-2]) / (4 * t)
            c4 = (val[4] - val[-4]) / (8 * t)
            ra = (4.0 * c1 - c2) / 3.0
            rb = (4.0 * c2 - c4) / 3.0
            value = (16.0 * ra - rb) / 15.0
            gap1 = (val[1] - 2.0 * self.p0 + val[-1]) / t
            gap2 = (val[2] - 2.0 * self.p0 + val[-2]) / (2 * t)
            noise = np.maximum.reduce([self.n0] + [pts[o][1] for o in pts]) / t
            kink = np.abs(2.0 * gap1 - gap2)
            kink_floor = np.maximum(
                10.0 * noise + FD_TRUST_FACTOR * np.abs(c1 - c2),
                0.25 * np.maximum(np.abs(gap1), np.abs(gap2)),
            )
            # In the asymptotic range the central quotients' errors follow an even power
            # of the step (c2 - c1)/(c4 - c2) = 4**-p, p = 1, 2, 3; or rounding dominates.
            # A larger step gives estimates that may agree by accident.
            ratio = (c2 - c1) / (c4 - c2)
            asymptotic = (np.abs(c4 - c2) <= 4.0 * noise) | ((ratio >= 1 / 80) & (ratio <= 0.5))
        finite = np.logical_and.reduce([pts[o][2] for o in pts]) & np.isfinite(value)
        return _Level(t, value, ra, kink, kink_floor, noise, finite & asymptotic)

    def judge(self, lv: _Level, prev: _Level) -> dict[str, np.ndarray]:
        """Mismatch, bound and verdict flags of every output at level ``lv``."""
        fm = self.fm
        with np.errstate(all="ignore"):
            est = (
                np.maximum(np.abs(lv.value - lv.ra), np.abs(lv.value - prev.value)) + 4.0 * lv.noise
            )
            bound = FD_TRUST_FACTOR * est + 10.0 * fm.eps * self.scale
            mismatch = np.abs(lv.value - self.a)
            valid = lv.trusted & np.isfinite(prev.value) & np.isfinite(self.a) & np.isfinite(bound)
            # At a kink the one-sided signature stays put as the step shrinks; for a smooth
            # function it falls like t**3 (a step too large for either shows at most once).
            kink = (
                valid
                & (lv.kink > np.maximum(lv.kink_floor, _CERTIFY_MARGIN * bound))
                & (lv.kink >= 0.25 * prev.kink)
            )
            off = valid & ~kink & ~(mismatch <= bound)
            certified = valid & ~kink & ~off & (_CERTIFY_MARGIN * bound <= self.sensitivity())
        return {
            "est": est,
            "bound": bound,
            "mismatch": mismatch,
            "valid": valid,
            "kink": kink,
            "off": off,
            "certified": certified,
        }

    def describe(self, q: int, lv: _Level, verdict: dict[str, np.ndarray]) -> str:
        return (
            f"v^T J d: AD {self.a[q]:.9g}, FD {lv.value[q]:.9g}, "
            f"mismatch {verdict['mismatch'][q]:.2g}, FD err est {verdict['est'][q]:.2g}, "
            f"bound {verdict['bound'][q]:.2g}; an element off by its tolerance would move it "
            f"by >= {self.sensitivity()[q]:.2g} (step {lv.t:.3g})"
        )


class _FastMode:
    """Fast mode for one input ``j`` of a target: every output's block at once."""

    def __init__(
        self,
        target: Target,
        analytical: Analytical,
        j: int,
        row_eps: np.ndarray,
        f0: list[np.ndarray],
        rtol: float | None,
        atol: float | None,
        base: float,
        fd_method: str,
        fd_base: float,
    ) -> None:
        self.target = target
        self.analytical = analytical
        self.j = j
        self.x = target.problem.x0[j]
        self.xf = self.x.ravel().astype(np.float64)
        self.n = self.x.size
        self.out_shapes = list(target.out_shapes)
        self.nq = len(self.out_shapes)
        offsets = target.row_offsets()
        self.slices = [slice(offsets[q], offsets[q + 1]) for q in range(self.nq)]
        self.sizes = [offsets[q + 1] - offsets[q] for q in range(self.nq)]
        self.row_eps = row_eps
        self.f0 = np.concatenate([np.ravel(v) for v in f0]) if f0 else np.zeros(0)
        dts = [lowest_precision([d, self.x.dtype]) for d in target.out_dtypes]
        self.eps = np.array([machine_eps(d) for d in dts])
        self.rt = np.array([default_rtol(rtol, d) for d in dts])
        self.atol = atol
        self._at: dict[int, float] = {}
        self.t0 = power_of_two(base)
        self.spent = 0
        self.first_rows: np.ndarray | None = None
        # The element-wise check's default step for each element, and the multiple of
        # the rounding term ``eps |f| / h`` below which it cannot fail an element there.
        self.steps = _default_steps(self.xf, fd_base)
        self.floor_factor = _FLOOR_FACTOR.get(fd_method, 0.0)

    def floor_of(self, q: int) -> np.ndarray:
        """``c eps_i |f_i|`` per row of output ``q``; divided by a step: the rounding floor.

        The element-wise check fails an element only where ``|AD - FD|`` exceeds
        ``FD_TRUST_FACTOR`` times its error estimate, which holds the rounding term
        ``2 eps |f| / h`` (central) or ``4 eps |f| / h`` (Richardson): a smaller error
        cannot fail there at its default step ``h``. ``|f|`` is the row at the check
        point, so the floor never exceeds the element-wise one. The complex step has no
        such floor (it does not subtract values of ``f``).
        """
        part = np.abs(self.f0[self.slices[q]]) * self.row_eps[self.slices[q]]
        with np.errstate(all="ignore"):
            return np.nan_to_num(self.floor_factor * part, nan=0.0, posinf=0.0)

    def floor_note(self, q: int) -> str:
        """How the rounding floor entered the tolerance of output ``q``'s elements."""
        floor = float(np.max(self.floor_of(q), initial=0.0)) / float(np.max(self.steps))
        return (
            f"tolerance raised to the rounding floor {self.floor_factor:g}*eps*|f|/h = "
            f"{floor:.2g} where larger than atol (h the element-wise step, |f| = "
            f"{float(np.max(np.abs(self.f0[self.slices[q]]), initial=0.0)):.3g}): below it "
            "finite differences of f at that step see rounding only"
        )

    def project(self, probe: _Probe, q: int, rows: np.ndarray) -> float:
        part = rows[self.slices[q]]
        v = probe.v[q]
        return float(part[0]) if v is None else _dot(v, part)

    def noise_of(self, probe: _Probe, q: int, rows: np.ndarray) -> float:
        """Rounding of the projected value: the rows' rounding errors add like random ones."""
        part = np.abs(rows[self.slices[q]]) * self.row_eps[self.slices[q]]
        v = probe.v[q]
        with np.errstate(all="ignore"):
            return float(part[0]) if v is None else float(np.linalg.norm(v * part))

    def atol_of(self, q: int) -> float:
        """``atol``, or ``sqrt(eps)`` times the largest element of one AD row of the block."""
        if self.atol is not None:
            return float(self.atol)
        if q not in self._at:
            shape = self.out_shapes[q]
            if self.sizes[q] == 1:
                cot = np.ones(shape)
            else:
                # The row whose directional difference is largest: likely a large row.
                rows = self.first_rows if self.first_rows is not None else self.f0
                part = np.nan_to_num(np.abs(rows[self.slices[q]] - self.f0[self.slices[q]]))
                cot = np.zeros(self.sizes[q])
                cot[int(np.argmax(part))] = 1.0
                cot = cot.reshape(shape)
            g = self.analytical.vjp(q, self.j, cot)
            g = np.abs(np.asarray(g, dtype=np.float64))
            big = float(np.max(g[np.isfinite(g)], initial=0.0))
            self._at[q] = math.sqrt(self.eps[q]) * big
        return self._at[q]

    def scalings(self) -> list[tuple[str, np.ndarray]]:
        """Scales of the direction's elements, skipping any proportional to an earlier one."""
        mag = np.abs(self.xf)
        typ = typical_magnitude(self.xf)
        cands = [
            ("max(|x|, 1)", np.maximum(mag, 1.0)),
            ("uniform", np.ones(self.n)),
            ("|x|", np.where(mag > 0, mag, typ if typ > 0 else 1.0)),
        ]
        kept: list[tuple[str, np.ndarray]] = []
        for name, s in cands:
            if not np.all(np.isfinite(s)):
                continue
            if any(float(np.max(s / k) / np.min(s / k)) < 1.5 for _, k in kept):
                continue
            kept.append((name, s))
        return kept


def project_blocks(
    target: Target,
    analytical: Analytical,
    j: int,
    row_eps: np.ndarray,
    f0: list[np.ndarray],
    rng: np.random.Generator,
    rtol: float | None,
    atol: float | None,
    base: float,
    fd_method: str,
    fd_base: float,
) -> list[ProjectionOutcome]:
    """Fast mode for input ``j``: per output, a certified pass or why to re-run element-wise.

    ``base`` is the relative step at which the ladder of steps starts; ``fd_method`` and
    ``fd_base`` are the element-wise check's method and relative step, which set the
    rounding floor of the element tolerances.
    """
    fm = _FastMode(target, analytical, j, row_eps, f0, rtol, atol, base, fd_method, fd_base)
    # Projections of values at far steps may overflow; every figure is tested for
    # finiteness, so NumPy's warnings about it are the checker's and stay here.
    with np.errstate(all="ignore"):
        return _project(fm, rng)


def _project(fm: _FastMode, rng: np.random.Generator) -> list[ProjectionOutcome]:
    """The ladder of steps along the first direction, then the second direction."""
    nq = fm.nq
    budget = min(_BUDGET, 2 * fm.n)
    status: list[str | None] = [None] * nq  # None: undecided; "pass", "off", "kink"
    notes = ["no step along a random direction gave a difference quotient to trust"] * nq
    first = _Probe(fm, rng)
    second: _Probe | None = None
    flagged: dict[int, tuple[np.ndarray, int, _Probe]] = {}
    for name, scaling in fm.scalings():
        if all(s is not None for s in status) or fm.spent >= budget:
            break
        along = _Along(fm, first, scaling)
        certified_at: dict[int, list[int]] = {}
        streak = np.zeros(nq, dtype=int)
        kinks = np.zeros(nq, dtype=int)
        best = np.full(nq, np.inf)
        best_k = np.zeros(nq, dtype=int)
        levels: dict[int, _Level] = {}
        firsts: dict[int, tuple[float, float, float, bool]] = {}  # ..., floored
        for k in range(_MAX_LEVELS):
            open_q = [q for q in range(nq) if status[q] is None and q not in _flat(certified_at)]
            if not open_q or fm.spent + (6 if k == 0 else 2) > budget:
                break
            levels[k] = along.level(k)
            if k == 0:
                continue
            verdict = along.judge(levels[k], levels[k - 1])
            for q in open_q:
                if not verdict["valid"][q]:
                    continue
                info = along.describe(q, levels[k], verdict)
                seen = "kink" if verdict["kink"][q] else "off" if verdict["off"][q] else None
                if seen is not None:
                    # A kink or a mismatch counts once it shows at two successive steps:
                    # one step too large for the error estimate cannot decide alone.
                    count, other = (kinks, streak) if seen == "kink" else (streak, kinks)
                    count[q] += 1
                    other[q] = 0
                    what = "kink along the direction" if seen == "kink" else "mismatch"
                    notes[q] = f"{what} ({name} scaling): {info}"
                    if count[q] >= 2:
                        status[q] = seen
                        if seen == "off":
                            flagged[q] = (scaling, k, first)
                elif verdict["certified"][q]:
                    certified_at.setdefault(k, []).append(q)
                    floored = _CERTIFY_MARGIN * verdict["bound"][q] > along.strict[q]
                    firsts[q] = (
                        verdict["mismatch"][q],
                        verdict["bound"][q],
                        along.sens[q],
                        floored,
                    )
                else:
                    streak[q] = kinks[q] = 0
                    if "mismatch" not in notes[q] and verdict["bound"][q] < best[q]:
                        notes[q] = f"FD not accurate enough to certify ({name} scaling): {info}"
                if verdict["bound"][q] < best[q]:
                    best[q], best_k[q] = verdict["bound"][q], k
            if all(k - best_k[q] >= _STALL and np.isfinite(best[q]) for q in open_q):
                break
        # A second direction, at the step where the first one certified, must agree too.
        for k, qs in sorted(certified_at.items()):
            if second is None:
                second = _Probe(fm, rng)
            again = _Along(fm, second, scaling)
            lv = again.level(k)
            verdict = again.judge(lv, again.level(k - 1))
            for q in qs:
                info = again.describe(q, lv, verdict)
                if verdict["certified"][q]:
                    status[q] = "pass"
                    m1, b1, s1, floored = firsts[q]
                    m2, b2, s2 = verdict["mismatch"][q], verdict["bound"][q], again.sens[q]
                    floored = floored or _CERTIFY_MARGIN * b2 > again.strict[q]
                    notes[q] = (
                        f"fast mode: certified along 2 random directions ({name} scaling, "
                        f"step {lv.t:.3g}): |v^T J d - FD| = {m1:.2g}, {m2:.2g} within bounds "
                        f"{b1:.2g}, {b2:.2g}; an element off by its tolerance would move "
                        f"v^T J d by >= {min(s1, s2):.2g}"
                    )
                    if floored:
                        notes[q] += "; " + fm.floor_note(q)
                elif verdict["off"][q]:
                    status[q] = "off"
                    flagged[q] = (scaling, k, second)
                    notes[q] = f"mismatch along a second direction ({name} scaling): {info}"
                elif verdict["kink"][q]:
                    status[q] = "kink"
                    notes[q] = f"kink along a second direction ({name} scaling): {info}"
                else:
                    notes[q] = f"second direction could not certify ({name} scaling): {info}"
    outcomes = [ProjectionOutcome(status[q] == "pass", notes[q]) for q in range(nq)]
    for q, (scaling, k, probe) in flagged.items():
        outcomes[q].suspects = _bisect(fm, q, scaling, k, probe)
    return outcomes


def _bisect(fm: _FastMode, q: int, scaling: np.ndarray, k: int, probe: _Probe) -> list[int] | None:
    """Halve the support of the direction that showed a mismatch, down to a few elements.

    ``v^T J d`` is linear in ``d``: if the half of the direction on one half of the
    elements still shows a mismatch, a wrong element is there; if it does not, the
    other half holds one. Each halving costs 8 evaluations at the step that showed the
    mismatch. None if a half gives no trustworthy quotient, or past the budget; the
    element-wise check of the suspects decides (others may be wrong too).
    """
    idx = np.arange(fm.n)
    limit = fm.spent + 8 * (int(np.ceil(np.log2(max(fm.n, 2)))) + 1)
    while idx.size > _LEAF:
        half = idx[: idx.size // 2]
        mask = np.zeros(fm.n)
        mask[half] = 1.0
        along = _Along(fm, probe, scaling * mask)
        verdict = along.judge(along.level(k), along.level(k - 1))
        if not verdict["valid"][q] or verdict["kink"][q] or fm.spent > limit:
            return None
        idx = half if verdict["off"][q] else idx[idx.size // 2 :]
    return [int(i) for i in idx]


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a . b`` by a pairwise sum of the products: a BLAS dot of long vectors may run a
    generic kernel tens of times slower than the product and sum (and is no more exact)."""
    return float(np.sum(a * b))


def _default_steps(xf: np.ndarray, fd_base: float) -> np.ndarray:
    """``power_of_two(fd_base * max(|x|, 1))`` for every element, vectorised."""
    h = fd_base * np.maximum(np.abs(xf), 1.0)
    with np.errstate(all="ignore"):
        return np.where(np.isfinite(h) & (h > 0), 2.0 ** np.round(np.log2(h)), fd_base)


def _flat(groups: Mapping[int, Sequence[int]]) -> set[int]:
    return {q for qs in groups.values() for q in qs}
