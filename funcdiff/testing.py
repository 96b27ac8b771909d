"""Check derivative rules against central finite differences.

:func:`check_rule_case` runs one registered rule on one of its test cases and
compares, with independent truth from finite differences:

* first order: the vector-Jacobian product with a random cotangent;
* forward mode, twice: the derivative of that vjp with respect to its cotangent (the
  double-backward trick) and the tangents pushed through the recorded graph (what
  ``jvp`` uses: the rule's tangent maps, or its transposed vjp), against differences
  of the outputs;
* second order: the Hessian-vector product of that scalarised output (through
  ``create_graph=True``) against finite differences of the gradient;
* batched first and second order and forward mode: one pass against a loop;
* structured cotangents (the scaled identity rows of a vectorized Jacobian) against
  their dense arrays.

The test suite runs it over every registered rule, so adding a rule adds its tests.
:func:`check_complex_rule_case` does the same on complex values (:func:`complex_cases`
derives them from a rule's real cases), against finite differences along the real and
the imaginary axis of every input, to second order.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

from funcdiff._core.registry import Rule
from funcdiff._core.structured import BasisBatch
from funcdiff._core.tensor import Tensor, gradient_edge, tensor
from funcdiff._jacobian import double_backward_jvp, jvp, vjp
from funcdiff.autograd.engine import grad
from funcdiff.autograd.forward import push_forward
from funcdiff.ops import dispatch as _ops
from funcdiff.rules.cases import Arg, Case

__all__ = [
    "RuleCheck",
    "call_case",
    "check_complex_rule_case",
    "check_rule_case",
    "complex_cases",
    "flat_case",
    "materialize_case",
]


@dataclass
class RuleCheck:
    """The outcome of checking one rule on one case: empty ``failures`` means it passed."""

    rule: str
    case: int
    failures: list[str]

    @property
    def ok(self) -> bool:
        return not self.failures


def _seed(name: str, index: int) -> int:
    return zlib.crc32(f"{name}/{index}".encode())


def materialize_case(case: Case, rng: np.random.Generator) -> tuple[list, list, dict]:
    """Draw a case's arrays. Returns ``(args, diff_slots, kwargs)``.

    ``diff_slots`` lists ``(arg_index, list_index_or_None, array)`` for the arguments
    that are differentiated.
    """
    args: list = []
    slots: list = []
    for i, spec in enumerate(case.args):
        if isinstance(spec, Arg):
            value = spec.sample(rng)
            args.append(value)
            if spec.diff and spec.kind not in ("int", "bool"):
                slots.append((i, None, value))
        elif isinstance(spec, list) and any(isinstance(s, Arg) for s in spec):
            items = []
            for j, s in enumerate(spec):
                if isinstance(s, Arg):
                    value = s.sample(rng)
                    items.append(value)
                    if s.diff and s.kind not in ("int", "bool"):
                        slots.append((i, j, value))
                else:
                    items.append(s)
            args.append(items)
        else:
            args.append(spec)
    kwargs = {}
    for k, spec in case.kwargs.items():
        if isinstance(spec, Arg):
            value = spec.sample(rng)
            kwargs[k] = value
            if spec.diff and spec.kind not in ("int", "bool"):
                slots.append((k, None, value))
        else:
            kwargs[k] = spec
    return args, slots, kwargs


def _outputs(result: Any, case: Case, kinds: str = "f") -> tuple:
    if case.output is not None:
        result = case.output(result)
    items = result if isinstance(result, (tuple, list)) else (result,)
    return tuple(
        o
        for o in items
        if isinstance(o, (Tensor, np.ndarray, np.generic))
        and np.asarray(o.data if isinstance(o, Tensor) else o).dtype.kind in kinds
    )


def call_case(
    rule: Rule,
    args: list,
    slots: list,
    kwargs: dict,
    values: Sequence[Any],
    writes: int | None = None,
) -> Any:
    """Run ``rule`` through funcdiff on a materialised case with ``values`` in its slots.

    ``args``, ``slots`` and ``kwargs`` come from :func:`materialize_case`; ``values``
    holds one entry per slot (arrays or Tensors). Returns the rule's raw result, or,
    for an in-place operation (``writes``, from :attr:`Case.writes`), the argument it
    wrote into: a copy of the one given (recorded for a Tensor, so never a leaf).
    """
    call_args = [list(a) if isinstance(a, list) else a for a in args]
    call_kwargs = dict(kwargs)
    for (i, j, _), v in zip(slots, values, strict=True):
        if isinstance(i, str):
            call_kwargs[i] = v
        elif j is None:
            call_args[i] = v
        else:
            call_args[i][j] = v
    if writes is None:
        return _ops.call(rule, tuple(call_args), call_kwargs)
    target = call_args[writes]
    call_args[writes] = np.copy(target) if isinstance(target, Tensor) else np.array(target)
    _ops.call(rule, tuple(call_args), call_kwargs)
    return call_args[writes]


def flat_case(rule: Rule, case: Case, seed: int, points: int = 3) -> tuple[Callable, list]:
    """A rule's case as ``f(x)`` of one flat vector, and ``points`` values of ``x``.

    ``x`` is the case's differentiable arguments, each flattened in C order and
    concatenated; ``f(x)`` runs the rule through funcdiff and returns its float outputs,
    flattened and concatenated (a complex output as its real and imaginary parts). The
    other arguments (indices, integers) are drawn once, from ``seed``; each point
    redraws the differentiable ones from their domains.
    """
    args, slots, kwargs = materialize_case(case, np.random.default_rng(seed))
    shapes = [np.shape(v) for _, _, v in slots]
    sizes = [int(np.prod(s)) for s in shapes]

    def f(x: Any) -> Any:
        values, start = [], 0
        for shape, size in zip(shapes, sizes):
            values.append(x[start : start + size].reshape(shape))
            start += size
        outs = _outputs(call_case(rule, args, slots, kwargs, values, case.writes), case, "fc")
        parts = [
            p for o in outs for p in ((np.real(o), np.imag(o)) if o.dtype.kind == "c" else (o,))
        ]
        return np.concatenate([np.reshape(p, -1) for p in parts])

    drawn = []
    for k in range(points):
        _, other, _ = materialize_case(case, np.random.default_rng(seed + 1000 * k))
        drawn.append(np.concatenate([np.ravel(v) for _, _, v in other]) if other else np.zeros(0))
    return f, drawn


def _build_function(
    rule: Rule, case: Case, args: list, slots: list, kwargs: dict, kinds: str = "f"
) -> Callable:
    """f(*diff_values) -> tuple of float outputs (of ``kinds``), running the rule."""

    def f(*values: Any) -> tuple:
        return _outputs(call_case(rule, args, slots, kwargs, values, case.writes), case, kinds)

    return f


def _as_arrays(outs: tuple) -> list[np.ndarray]:
    return [np.asarray(o.data if isinstance(o, Tensor) else o, dtype=float) for o in outs]


def _close(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=False))


def _describe(a: np.ndarray, b: np.ndarray) -> str:
    if a.shape != b.shape:
        return f"shape {a.shape} != {b.shape}"
    err = np.abs(a - b)
    k = int(np.argmax(err)) if err.size else 0
    idx = np.unravel_index(k, err.shape) if err.size else ()
    got = a.ravel()[k] if a.size else None
    expected = b.ravel()[k] if b.size else None
    worst = err.max() if err.size else 0.0
    return f"max abs error {worst:.3g} at {idx}: got {got!r}, expected {expected!r}"


def _grads(outputs: Any, inputs: Any, **kwargs: Any) -> tuple[Tensor, ...]:
    """``grad`` with zeros, not None, for inputs an output does not depend on."""
    grads = grad(outputs, inputs, allow_unused=True, materialize_grads=True, **kwargs)
    return cast("tuple[Tensor, ...]", grads)  # materialize_grads: no None


def _pushed(
    f: Callable, x0: Sequence[np.ndarray], dirs: Sequence[np.ndarray], batched: bool
) -> list[np.ndarray]:
    """Forward mode over the recorded graph of ``f``: one tangent per output."""
    inputs = [tensor(x, requires_grad=True) for x in x0]
    return jvp(f(*inputs), inputs, dirs, batched)


def _batch_mismatches(
    what: str, outs: Sequence[Any], inputs: Sequence[Tensor], cotangents: list, atol: float
) -> list[str]:
    """One backward pass with a batch of cotangents against a loop of single passes."""
    batched = vjp(outs, inputs, cotangents, batched=True, force_batched=True)
    failures = []
    for b in range(len(cotangents[0])):
        looped = vjp(outs, inputs, [c[b] for c in cotangents])
        for k, (gb, gl) in enumerate(zip(batched, looped)):
            if not _close(gb[b], gl, atol, 10 * atol):
                failures.append(f"batched {what}, input {k}, batch {b}: {_describe(gb[b], gl)}")
    return failures


def check_rule_case(
    rule: Rule, case: Case, index: int = 0, batch: int = 3, eps: float = 1e-6
) -> RuleCheck:
    """Check ``rule`` on ``case`` at first and second order, batched and unbatched."""
    rng = np.random.default_rng(_seed(rule.name, index))
    args, slots, kwargs = materialize_case(case, rng)
    failures: list[str] = []
    f = _build_function(rule, case, args, slots, kwargs)
    x0 = [np.asarray(s[2], dtype=float) for s in slots]
    if not x0:
        return RuleCheck(rule.name, index, ["the case differentiates no argument"])

    def values(tensors: bool, xs: Sequence[np.ndarray]) -> list:
        return [tensor(x, requires_grad=True) if tensors else x for x in xs]

    if any(
        np.iscomplexobj(o)
        for o in _as_values(
            _outputs(call_case(rule, args, slots, kwargs, x0, case.writes), case, "c")
        )
    ):
        # Complex results (rfft of a real input): checked in torch's convention.
        return check_complex_rule_case(rule, case, index)
    ref = _as_arrays(f(*x0))
    if not ref:
        return RuleCheck(rule.name, index, ["the rule returned no floating-point output"])
    weights = [rng.standard_normal(r.shape) for r in ref]

    def scalar(xs: Sequence[np.ndarray]) -> float:
        return float(sum(np.sum(w * o) for w, o in zip(weights, _as_arrays(f(*xs)))))

    # First order: one VJP against central differences of the scalarised output.
    inputs = values(True, x0)
    outs = f(*inputs)
    diff_outs = [o for o in outs if isinstance(o, Tensor) and o.requires_grad]
    if len(diff_outs) != len(outs):
        return RuleCheck(rule.name, index, ["an output does not require grad"])
    grads = _grads(outs, inputs, grad_outputs=weights)
    for k, (x, g) in enumerate(zip(x0, grads)):
        fd = np.zeros_like(x)
        for m in range(x.size):
            step = eps * max(1.0, abs(float(x.flat[m])))
            xp = [y.copy() for y in x0]
            xm = [y.copy() for y in x0]
            xp[k].flat[m] += step
            xm[k].flat[m] -= step
            fd.flat[m] = (scalar(xp) - scalar(xm)) / (2 * step)
        if not _close(g.data, fd, case.atol, case.rtol):
            failures.append(f"first order, input {k}: {_describe(g.data, fd)}")

    # Batched first order: one pass with a batch of cotangents equals a loop.
    batch_weights = [rng.standard_normal((batch,) + r.shape) for r in ref]
    inputs = values(True, x0)
    outs = f(*inputs)
    failures += _batch_mismatches("first order", outs, inputs, batch_weights, 1e-10)
    # Structured cotangents (scaled identity rows, as a vectorized Jacobian passes
    # them): the rule's answer, structured or not, equals the dense one.
    sizes = [r.size for r in ref]
    rows = sum(sizes)
    if rows:
        offsets = np.cumsum([0, *sizes[:-1]])
        structured = [
            BasisBatch(rng.standard_normal(r.shape), int(o), rows) for r, o in zip(ref, offsets)
        ]
        inputs = values(True, x0)
        outs = f(*inputs)
        got = _grads(
            outs,
            inputs,
            grad_outputs=structured,
            is_grads_batched=True,
            retain_graph=True,
        )
        want = _grads(
            outs,
            inputs,
            grad_outputs=[s.dense() for s in structured],
            is_grads_batched=True,
        )
        for k, (g_s, g_d) in enumerate(zip(got, want)):
            if not _close(g_s.data, g_d.data, 1e-12, 1e-11):
                failures.append(
                    f"structured cotangents, input {k}: {_describe(g_s.data, g_d.data)}"
                )
    if failures:
        return RuleCheck(rule.name, index, failures)

    # Forward mode by double backward: d/du <J^T u, v> = J v, against differences of f
    # along v. It differentiates each vjp with respect to its cotangent, which the
    # second-order check below cannot see for rules that are linear in x.
    direction = [rng.standard_normal(x.shape) for x in x0]
    inputs = values(True, x0)
    jv = double_backward_jvp(f(*inputs), inputs, direction)
    h = 1e-6 * max(1.0, max(float(np.max(np.abs(x))) if x.size else 0.0 for x in x0))
    tangents = _pushed(f, x0, direction, batched=False)
    plus = _as_arrays(f(*[x + h * v for x, v in zip(x0, direction)]))
    minus = _as_arrays(f(*[x - h * v for x, v in zip(x0, direction)]))
    for k, (jv_k, p, m_k) in enumerate(zip(jv, plus, minus)):
        finite = np.isfinite(p) & np.isfinite(m_k)  # e.g. -inf outputs of logsumexp
        with np.errstate(invalid="ignore"):
            expected = np.where(finite, (p - m_k) / (2 * h), 0.0)
        jv_k = np.where(finite, jv_k, 0.0)
        if not _close(jv_k, expected, case.atol, case.rtol):
            failures.append(
                f"forward mode (double backward), output {k}: {_describe(jv_k, expected)}"
            )
        if not _close(np.where(finite, tangents[k], 0.0), expected, case.atol, case.rtol):
            failures.append(
                f"forward mode (tangent rules), output {k}: {_describe(tangents[k], expected)}"
            )

    # Batched forward mode: a batch of tangents in one pass equals a loop.
    batch_dirs = [rng.standard_normal((batch,) + x.shape) for x in x0]
    pushed = _pushed(f, x0, batch_dirs, batched=True)
    for b in range(batch):
        looped = _pushed(f, x0, [d[b] for d in batch_dirs], batched=False)
        for k, (tb, tl) in enumerate(zip(pushed, looped)):
            if not _close(tb[b], tl, 1e-10, 1e-9):
                failures.append(
                    f"batched forward mode, output {k}, batch {b}: {_describe(tb[b], tl)}"
                )
    if case.order < 2 or failures:
        return RuleCheck(rule.name, index, failures)

    # Second order: d/dt grad(x + t v) at t=0, against the recorded backward pass.

    def first_grad(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        ins = values(True, xs)
        gs = _grads(f(*ins), ins, grad_outputs=weights)
        return [g.data for g in gs]

    inputs = values(True, x0)
    gs = _grads(
        f(*inputs),
        inputs,
        grad_outputs=weights,
        create_graph=True,
    )
    live = [(g, v) for g, v in zip(gs, direction) if g.requires_grad]
    if not live:
        hv = [np.zeros_like(x) for x in x0]
    else:
        hv_t = _grads(
            [g for g, _ in live],
            inputs,
            grad_outputs=[v for _, v in live],
            retain_graph=True,
        )
        hv = [h.data for h in hv_t]
    scale = max(1.0, max(float(np.max(np.abs(x))) if x.size else 0.0 for x in x0))
    step = 1e-5 * scale
    plus = first_grad([x + step * v for x, v in zip(x0, direction)])
    minus = first_grad([x - step * v for x, v in zip(x0, direction)])
    for k in range(len(x0)):
        fd = (plus[k] - minus[k]) / (2 * step)
        if not _close(hv[k], fd, max(case.atol, 1e-5), max(case.rtol, 1e-4)):
            failures.append(f"second order, input {k}: {_describe(hv[k], fd)}")

    # Reverse over forward: the tangents pushed with create_graph from a direction that
    # is itself a Tensor, then differentiated. d/dx <J(x) v, w> is H_w v as above and
    # d/dv <J(x) v, w> is J^T w: every tangent map must record differentiable operations
    # (forward over reverse of a composite pushes Tensor tangents through them).
    inputs = values(True, x0)
    seeds_v: list[Tensor] = [tensor(v, requires_grad=True) for v in direction]
    pushed = push_forward(
        f(*inputs), {gradient_edge(t): d for t, d in zip(inputs, seeds_v)}, create_graph=True
    )
    tangent_roots = [
        (t, w) for t, w in zip(pushed, weights) if isinstance(t, Tensor) and t.requires_grad
    ]
    rof_expected = [*hv, *(np.asarray(g.data) for g in grads)]
    if not tangent_roots:
        if any(np.any(e != 0) for e in rof_expected):
            failures.append("reverse over forward: the tangents do not depend on the direction")
    else:
        rof_grads = _grads(
            [t for t, _ in tangent_roots],
            [*inputs, *seeds_v],
            grad_outputs=[w for _, w in tangent_roots],
        )
        for k, (r, e) in enumerate(zip(rof_grads, rof_expected)):
            rof_value = np.asarray(r.data)
            if not _close(rof_value, e, max(case.atol, 1e-9), max(case.rtol, 1e-8)):
                failures.append(f"reverse over forward, input {k}: {_describe(rof_value, e)}")

    # Batched second order: a batch of directions through the recorded backward pass.
    if live:
        batch_dirs = [rng.standard_normal((batch,) + tuple(g.shape)) for g, _ in live]
        roots = [g for g, _ in live]
        failures += _batch_mismatches("second order", roots, inputs, batch_dirs, 1e-9)
    return RuleCheck(rule.name, index, failures)


# --------------------------------------------------------------------------- complex values
def _complexify(spec: Any, only_first: list | None) -> Any:
    """``spec`` with its real Args complexified (only the first one, if ``only_first``
    is a list that is still empty; it records that one was)."""
    if isinstance(spec, Arg):
        changed = spec.complexified()
        if changed is spec or (only_first is not None and only_first):
            return spec
        if only_first is not None:
            only_first.append(True)
        return changed
    if isinstance(spec, list):
        return [_complexify(s, only_first) for s in spec]
    return spec


def _complexified(case: Case, first_only: bool) -> Case | None:
    mark: list | None = [] if first_only else None
    args = tuple(_complexify(a, mark) for a in case.args)
    kwargs = {k: _complexify(v, mark) for k, v in case.kwargs.items()}
    if args == case.args and kwargs == dict(case.kwargs):
        return None
    return replace(case, args=args, kwargs=kwargs)


def _count_args(case: Case) -> int:
    specs = [*case.args, *case.kwargs.values()]
    flat = [s for spec in specs for s in (spec if isinstance(spec, list) else [spec])]
    return sum(isinstance(s, Arg) and s.complexified() is not s for s in flat)


def complex_cases(rule: Rule) -> tuple[Case, ...]:
    """The complex test points of a rule that accepts complex values.

    Each real case with a real argument to differentiate gives one case with every such
    argument complex, and, with two or more of them, one with only the first complex
    (real and complex values mixed); cases that map their output (``Case.output``)
    are left to ``rule.complex_cases``, which come last.
    """
    if not rule.complex or not rule.differentiable:
        return ()
    found: list[Case] = []
    for case in rule.cases:
        if case.output is not None:
            continue
        full = _complexified(case, first_only=False)
        if full is None:
            continue
        found.append(full)
        if _count_args(case) > 1:
            found.append(cast(Case, _complexified(case, first_only=True)))  # as full: not None
    return (*found, *rule.complex_cases)


def _wirtinger_fd(scalar: Callable, xs: list[np.ndarray], eps: float) -> list[np.ndarray]:
    """``dL/dx + i dL/dy`` of a real ``scalar`` by central differences along the real
    axis of every entry, and the imaginary axis of every complex one."""
    result = []
    for k, x in enumerate(xs):
        complex_input = x.dtype.kind == "c"
        out = np.zeros(x.shape, dtype=x.dtype)
        for m in range(x.size):
            for unit in (1.0, 1j) if complex_input else (1.0,):
                step = eps * max(1.0, abs(complex(x.flat[m])))
                xp = [y.copy() for y in xs]
                xm = [y.copy() for y in xs]
                xp[k].flat[m] += unit * step
                xm[k].flat[m] -= unit * step
                out.flat[m] += unit * (scalar(xp) - scalar(xm)) / (2 * step)
        result.append(out)
    return result


def _random_like(rng: np.random.Generator, shape: tuple, kind: str) -> np.ndarray:
    real = rng.standard_normal(shape)
    return real + 1j * rng.standard_normal(shape) if kind == "c" else real


def _as_values(outs: tuple) -> list[np.ndarray]:
    return [np.asarray(o.data if isinstance(o, Tensor) else o) for o in outs]


def check_complex_rule_case(
    rule: Rule, case: Case, index: int = 0, batch: int = 2, eps: float = 1e-6
) -> RuleCheck:
    """Check ``rule`` on a case with complex values, in torch's convention.

    With ``L = sum(Re(conj(w) * out))`` for random (complex) weights ``w``,
    ``grad(out, z, w)`` must be ``dL/dx + i dL/dy`` for every input ``z = x + iy``
    (differences along both axes, so both Wirtinger derivatives are tested); forward
    mode, pushed and by double backward, must give the derivative along a complex
    direction; and the gradient of ``Re(conj(v) * grad)`` through ``create_graph``
    must match differences of the first-order gradient, again along both axes.
    """
    name = f"{rule.name}[complex]"
    rng = np.random.default_rng(_seed(name, index))
    args, slots, kwargs = materialize_case(case, rng)
    f = _build_function(rule, case, args, slots, kwargs, kinds="fc")
    x0 = [np.array(s[2]) for s in slots]
    if not x0:
        return RuleCheck(name, index, ["the case differentiates no argument"])
    ref = _as_values(f(*x0))
    if not ref:
        return RuleCheck(name, index, ["the rule returned no floating-point output"])
    weights = [_random_like(rng, r.shape, r.dtype.kind) for r in ref]

    def scalar(xs: Sequence[np.ndarray]) -> float:
        outs = _as_values(f(*xs))
        return float(sum(np.sum(np.real(np.conj(w) * o)) for w, o in zip(weights, outs)))

    def leaves(xs: Sequence[np.ndarray]) -> list[Tensor]:
        return [tensor(x, requires_grad=True) for x in xs]

    def first_grad(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        ins = leaves(xs)
        return [g.data for g in _grads(f(*ins), ins, grad_outputs=weights)]

    failures: list[str] = []
    got = first_grad(x0)
    for k, (g, want) in enumerate(zip(got, _wirtinger_fd(scalar, x0, eps))):
        if g.dtype.kind != want.dtype.kind:
            failures.append(f"first order, input {k}: dtype {g.dtype}, expected {want.dtype}")
        elif not _close(g, want, case.atol, case.rtol):
            failures.append(f"first order, input {k}: {_describe(g, want)}")
    # A batch of cotangents in one pass equals a loop.
    batch_weights = [_random_like(rng, (batch,) + r.shape, r.dtype.kind) for r in ref]
    inputs = leaves(x0)
    failures += _batch_mismatches("first order", f(*inputs), inputs, batch_weights, 1e-10)
    if failures:
        return RuleCheck(name, index, failures)

    # Forward mode along a complex direction (real for real inputs).
    direction = [_random_like(rng, x.shape, x.dtype.kind) for x in x0]
    h = 1e-6 * max(1.0, max(float(np.max(np.abs(x))) if x.size else 0.0 for x in x0))
    plus = _as_values(f(*[x + h * v for x, v in zip(x0, direction)]))
    minus = _as_values(f(*[x - h * v for x, v in zip(x0, direction)]))
    inputs = leaves(x0)
    pushed = jvp(f(*inputs), inputs, direction)
    inputs = leaves(x0)
    tricked = double_backward_jvp(f(*inputs), inputs, direction)
    for k, (p, m) in enumerate(zip(plus, minus)):
        want = (p - m) / (2 * h)
        for what, got_k in (("tangent rules", pushed[k]), ("double backward", tricked[k])):
            if not _close(got_k, want, case.atol, case.rtol):
                failures.append(f"forward mode ({what}), output {k}: {_describe(got_k, want)}")
    if case.order < 2 or failures:
        return RuleCheck(name, index, failures)

    # Second order: the gradient of Re(conj(v) * grad) through the recorded backward.
    inputs = leaves(x0)
    gs = _grads(f(*inputs), inputs, grad_outputs=weights, create_graph=True)
    vs = [_random_like(rng, x.shape, x.dtype.kind) for x in x0]
    live = [(g, v) for g, v in zip(gs, vs) if g.requires_grad]
    if live:
        hv_t = _grads([g for g, _ in live], inputs, grad_outputs=[v for _, v in live])
        hv = [t.data for t in hv_t]
    else:
        hv = [np.zeros_like(x) for x in x0]

    def second(xs: Sequence[np.ndarray]) -> float:
        return float(sum(np.sum(np.real(np.conj(v) * g)) for v, g in zip(vs, first_grad(xs))))

    for k, (got_k, want) in enumerate(zip(hv, _wirtinger_fd(second, x0, 1e-5))):
        if not _close(got_k, want, max(case.atol, 1e-5), max(case.rtol, 1e-4)):
            failures.append(f"second order, input {k}: {_describe(got_k, want)}")
    return RuleCheck(name, index, failures)
