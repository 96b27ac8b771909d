"""Every rule of the table under ``vmap``, against a loop over examples.

Each rule is called through the function it is registered for (``np.sin``,
``np.linalg.solve``, ``x[i]``), at each of its test cases, with the batch axis of each
array argument at 0, at -1 and absent (``in_dims=None``): the batched call must give
each example's result, computed one by one. A rule without a batching rule (its own
``batch`` entry or its structure's default) still gives the right answer through the
loop, which warns; the test counts on neither.
"""

from __future__ import annotations

import operator
import warnings
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import funcdiff  # noqa: F401  (registers the rules)
from funcdiff._core.registry import FUNCTION_RULES, NAMED_RULES, UFUNC_RULES, Rule, all_rules
from funcdiff.func import tree_flatten, vmap
from funcdiff.func._batching import BatchedConversionError, VmapFallbackWarning, run_rule
from funcdiff.rules.cases import Arg, Case

BATCH = 2

_NAMED: dict[str, Callable] = {
    "getitem": operator.getitem,
    "astype": lambda x, dtype: x.astype(dtype),
}


def _entry_points() -> dict[int, Callable]:
    found: dict[int, Callable] = {}
    for table in (UFUNC_RULES, FUNCTION_RULES):
        for key, rule in table.items():
            found.setdefault(id(rule), key)
    for name, rule in NAMED_RULES.items():
        if name in _NAMED:
            found.setdefault(id(rule), _NAMED[name])
    return found


def _dispatches(key: Any) -> bool:
    """Whether a batched value reaches ``key``'s rule through NumPy's protocols."""
    module = getattr(key, "__module__", None) or ""
    if module.startswith(("scipy", "funcdiff._core")):
        return False  # SciPy does not dispatch
    return (
        isinstance(key, np.ufunc)
        or module.startswith("numpy")
        or hasattr(key, "__wrapped__")
        or key in _NAMED.values()
    )


def _entry(rule: Rule) -> Callable:
    """How the test calls ``rule``: through the function it is registered for; a SciPy
    function that does not dispatch through the rule itself (``run_rule``)."""
    key = _ENTRY[id(rule)]
    if not _dispatches(key):
        return lambda *args, **kwargs: run_rule(rule, key, args, kwargs)

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return key(*args, **kwargs)
        except BatchedConversionError:
            # NumPy dispatches on some arguments only (np.pad's constant_values): with
            # only those batched, the function converts them; the rule batches them.
            return run_rule(rule, key, args, kwargs)

    return call


_ENTRY = _entry_points()
_RULES = [r for r in all_rules() if id(r) in _ENTRY and r.cases]


def _slots(case: Case) -> list[tuple[Any, Any, Arg]]:
    """``(position or keyword, index in a list or None, Arg)`` of each drawn argument."""
    slots: list[tuple[Any, Any, Arg]] = []
    for i, spec in enumerate(case.args):
        if isinstance(spec, Arg):
            slots.append((i, None, spec))
        elif isinstance(spec, list):
            slots += [(i, j, s) for j, s in enumerate(spec) if isinstance(s, Arg)]
    slots += [(k, None, s) for k, s in case.kwargs.items() if isinstance(s, Arg)]
    return slots


def _caller(fn: Callable, case: Case, slots: list) -> Callable:
    def call(*values: Any) -> Any:
        args = [list(a) if isinstance(a, list) else a for a in case.args]
        kwargs = dict(case.kwargs)
        for (i, j, _), v in zip(slots, values):
            if isinstance(i, str):
                kwargs[i] = v
            elif j is None:
                args[i] = v
            else:
                args[i][j] = v
        out = fn(*args, **kwargs)
        return case.output(out) if case.output is not None else out

    return call


def _dims_choices(n: int, seed: int) -> list[tuple]:
    """All at 0, all at -1, and each argument unbatched in turn (the others at 0 or -1)."""
    rng = np.random.default_rng(seed)
    choices = [(0,) * n, (-1,) * n]
    for k in range(n):
        others = tuple(int(rng.choice([0, -1])) for _ in range(n))
        choices.append(others[:k] + (None,) + others[k + 1 :])
    return [c for c in dict.fromkeys(choices) if any(d is not None for d in c)]


def _stacked(spec: Arg, d: Any, rng: np.random.Generator) -> tuple[Any, list]:
    if d is None:
        value = spec.sample(rng)
        return value, [value] * BATCH
    examples = [spec.sample(rng) for _ in range(BATCH)]
    axis = d if d >= 0 else np.ndim(examples[0]) + 1 + d
    return np.stack(examples, axis=axis), examples


def _leaves(x: Any) -> list:
    return [np.asarray(v) for v in tree_flatten(x)[0]]


@pytest.mark.parametrize("rule", _RULES, ids=lambda r: r.name)
def test_rule_under_vmap_matches_the_loop(rule: Rule) -> None:
    fn = _entry(rule)
    for index, case in enumerate(rule.cases):
        slots = _slots(case)
        if not slots:
            continue
        seed = zlib.crc32(f"{rule.name}/{index}".encode())
        call = _caller(fn, case, slots)
        for dims in _dims_choices(len(slots), seed):
            rng = np.random.default_rng(seed)
            drawn = [_stacked(spec, d, rng) for (_, _, spec), d in zip(slots, dims)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", VmapFallbackWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
                try:
                    expected = [call(*[ex[b] for _, ex in drawn]) for b in range(BATCH)]
                except Exception:  # noqa: BLE001  (a case that only works on Tensors)
                    continue
                got = vmap(call, in_dims=dims)(*[v for v, _ in drawn])
            want = [_leaves(e) for e in expected]
            have = _leaves(got)
            assert len(have) == len(want[0]), (rule.name, index, dims)
            for k, h in enumerate(have):
                ref = np.stack([w[k] for w in want])
                assert h.shape == ref.shape, (rule.name, index, dims, k, h.shape, ref.shape)
                assert np.allclose(h, ref, rtol=1e-10, atol=1e-12, equal_nan=True), (
                    rule.name,
                    index,
                    dims,
                    k,
                )


def _derived(rule: Rule) -> bool:
    """Whether the rule's batching comes from its structure (no entry, not a composite)."""
    from funcdiff.rules import batching

    return (
        rule.batch is None
        and rule.impl is None
        and batching.default_batch(rule)
        not in (
            None,
            batching.loop,
        )
    )


@pytest.mark.parametrize("rule", [r for r in _RULES if _derived(r)], ids=lambda r: r.name)
def test_a_structure_default_batches_without_the_loop(rule: Rule) -> None:
    """Every rule whose batching comes from its structure runs its cases with every
    positional array batched on axis 0 as one batched call: no loop, no warning."""
    fn = _entry(rule)
    for index, case in enumerate(rule.cases):
        slots = _slots(case)
        if not slots or any(isinstance(i, str) for i, _, _ in slots):
            continue  # a batched keyword argument loops by design
        rng = np.random.default_rng(zlib.crc32(f"{rule.name}/{index}".encode()))
        drawn = [_stacked(spec, 0, rng) for _, _, spec in slots]
        with warnings.catch_warnings():
            warnings.simplefilter("error", VmapFallbackWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            vmap(_caller(fn, case, slots), in_dims=0)(*[v for v, _ in drawn])
