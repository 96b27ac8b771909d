"""No RuntimeWarning from funcdiff's derivative code reaches the user.

Every registered rule's derivatives (first order, batched, second order, forward mode)
run at the rule's own test cases with RuntimeWarning turned into an error; then a table
of edge points where the function is finite but its derivative is not (``sqrt`` at 0)
checks the same, and that the derivative keeps its mathematical value (``inf``).
A warning from the forward function itself (``log(0)``) is NumPy's: the forward call
runs with warnings ignored, and only the derivative code is checked.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest
import scipy.special as sp

import funcdiff as fd
from funcdiff.autograd.forward import push_forward
from funcdiff.rules import all_rules
from funcdiff.testing import _build_function, _seed, materialize_case

DIFFERENTIABLE = [r for r in all_rules() if r.differentiable]
CASES = [
    pytest.param(rule, i, case, id=f"{rule.name}-{i}")
    for rule in DIFFERENTIABLE
    for i, case in enumerate(rule.cases)
]


def _quiet(call: Callable):
    """Run the user's forward function: its warnings are NumPy's, not ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return call()


def _all_derivatives(
    f: Callable, x0: list[np.ndarray], rng: np.random.Generator, second: bool = True
) -> None:
    """First order, batched, second order and forward mode of ``f`` at ``x0``.

    Only the forward call of ``f`` may warn; run inside ``simplefilter("error")``.
    """
    inputs = [fd.tensor(x, requires_grad=True) for x in x0]
    outs = [o for o in _quiet(lambda: f(*inputs)) if o.requires_grad]
    if not outs:
        return
    weights = [rng.standard_normal(o.shape) for o in outs]
    batch = [rng.standard_normal((2, *o.shape)) for o in outs]
    kw = {"allow_unused": True, "materialize_grads": True}
    seeds = {t._gradient_edge(): rng.standard_normal(t.shape) for t in inputs}
    push_forward(outs, seeds, create_graph=False)
    fd.grad(outs, inputs, batch, is_grads_batched=True, retain_graph=True, **kw)
    gs = fd.grad(outs, inputs, weights, create_graph=True, **kw)
    live = [g for g in gs if g.requires_grad]
    if live and second:
        dirs = [rng.standard_normal(g.shape) for g in live]
        fd.grad(live, inputs, dirs, retain_graph=True, **kw)
        fd.grad(live, inputs, [np.stack([d, -d]) for d in dirs], is_grads_batched=True, **kw)


@pytest.mark.parametrize("rule, index, case", CASES)
def test_rule_derivatives_do_not_warn_at_test_cases(rule, index, case) -> None:
    rng = np.random.default_rng(_seed(rule.name, index))
    args, slots, kwargs = materialize_case(case, rng)
    if not slots:
        pytest.skip("the case differentiates no argument")
    f = _build_function(rule, case, args, slots, kwargs)
    x0 = [np.asarray(s[2], dtype=float) for s in slots]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _all_derivatives(f, x0, rng)


# Edge points: (name, function of Tensors, point, expected first derivative or None).
# The function is finite there; the derivative may be infinite (its right value).
INF = np.inf
EDGES: list[tuple[str, Callable, list[np.ndarray], np.ndarray | None]] = [
    ("x**0.5 at 0", lambda x: x**0.5, [np.array([0.0, 1.0])], np.array([INF, 0.5])),
    ("x**0.3 at 0", lambda x: x**0.3, [np.array([0.0])], np.array([INF])),
    ("x**1.5 at 0", lambda x: x**1.5, [np.array([0.0, 1.0])], np.array([0.0, 1.5])),
    ("x**2.5 at 0", lambda x: x**2.5, [np.array([0.0])], np.array([0.0])),
    ("x**3 at 0", lambda x: x**3, [np.array([0.0, -1.0])], np.array([0.0, 3.0])),
    ("x**2 at 0", lambda x: x**2, [np.array([0.0])], np.array([0.0])),
    ("x**0 at 0", lambda x: x**0, [np.array([0.0])], np.array([0.0])),
    (
        "x**y at x=0, y array",
        lambda x: x ** np.array([0.5, 1.5, 2.0]),
        [np.zeros(3)],
        np.array([INF, 0.0, 0.0]),
    ),
    (
        "x**y at x=0 wrt y",
        lambda y: np.zeros(3) ** y,
        [np.array([0.5, 1.5, 2.0])],
        np.zeros(3),
    ),
    ("sqrt at 0", np.sqrt, [np.array([0.0, 4.0])], np.array([INF, 0.25])),
    ("cbrt at 0", np.cbrt, [np.array([0.0, 8.0])], np.array([INF, 1.0 / 12.0])),
    ("abs at 0", np.abs, [np.array([0.0, -2.0])], np.array([0.0, -1.0])),
    ("fabs at 0", np.fabs, [np.array([0.0])], np.array([0.0])),
    ("hypot at the origin", lambda x: np.hypot(x, 0.0), [np.array([0.0])], np.array([0.0])),
    ("arctan2 at the origin", lambda x: np.arctan2(x, 0.0), [np.array([0.0])], np.array([0.0])),
    ("maximum at a tie", lambda x: np.maximum(x, 0.0), [np.array([0.0])], np.array([0.5])),
    ("arcsin at 1", np.arcsin, [np.array([1.0])], np.array([INF])),
    ("arccos at -1", np.arccos, [np.array([-1.0])], np.array([-INF])),
    ("arccosh at 1", np.arccosh, [np.array([1.0])], np.array([INF])),
    ("sinc at 0", np.sinc, [np.array([0.0])], np.array([0.0])),
    ("xlogy at x=0", lambda x: sp.xlogy(x, 2.0), [np.array([0.0])], np.array([np.log(2.0)])),
    ("entr at 1", sp.entr, [np.array([1.0])], np.array([-1.0])),
    ("log1p at 0", np.log1p, [np.array([0.0])], np.array([1.0])),
    ("arctanh at 1", np.arctanh, [np.array([1.0])], None),
    ("x / y at y = 0 (wrt x)", lambda x: x / np.zeros(1), [np.array([1.0])], np.array([INF])),
]


# Second order through an infinite first derivative: the vjps of sqrt and cbrt divide
# by ans, 0 there, and their derivative runs divide's vjp at y = 0 (and multiply's on
# inf * 0). A guard in those two hottest rules would slow every program down; a
# backward pass run under one np.errstate would quieten them at no cost per node.
SECOND_ORDER_GAPS = {
    "cbrt at 0",
    "sqrt at 0",
    "arcsin at 1",
    "arccos at -1",
    "arccosh at 1",
    "arctanh at 1",
}
# divide's own vjp g / y at y = 0 (where NumPy's forward x / 0 has warned already).
FIRST_ORDER_GAPS = {"x / y at y = 0 (wrt x)"}


@pytest.mark.parametrize(
    "f, x0, expected, second",
    [
        pytest.param(f, x, e, True, id=name)
        for name, f, x, e in EDGES
        if name not in SECOND_ORDER_GAPS | FIRST_ORDER_GAPS
    ]
    + [
        pytest.param(f, x, e, False, id=f"{name}-first-order")
        for name, f, x, e in EDGES
        if name in SECOND_ORDER_GAPS
    ]
    + [
        pytest.param(
            f,
            x,
            e,
            True,
            id=name,
            marks=pytest.mark.xfail(raises=RuntimeWarning, strict=True, reason="divide's vjp"),
        )
        for name, f, x, e in EDGES
        if name in SECOND_ORDER_GAPS | FIRST_ORDER_GAPS
    ],
)
def test_derivatives_at_edge_points_do_not_warn(f, x0, expected, second: bool) -> None:
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _all_derivatives(lambda *xs: (f(*xs),), x0, rng, second)
        x = fd.tensor(x0[0], requires_grad=True)
        (g,) = fd.grad(_quiet(lambda: f(x)), x, np.ones_like(x0[0]), allow_unused=True)
    if expected is not None:
        np.testing.assert_array_equal(g.numpy(), expected)
