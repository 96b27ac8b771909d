"""The op-level interpreter hook (``funcdiff._core.tracing``): tracers that observe
every operation, interpreters that run something else instead of an operation, on
every path an operation takes (operators, ufunc calls, NumPy functions through
``__array_function__``, ufunc methods, composite rules, functions without a rule), and
one installer that refuses to nest."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import funcdiff as fd
import funcdiff.replay as replay
import funcdiff.sparse as fs
from funcdiff._core.registry import FUNCTION_RULES, UFUNC_RULES, Rule
from funcdiff.ops import dispatch

# The tracing module the operations report to (a module-level import of
# ``funcdiff._core.tracing`` could be a second copy when pytest collects that file's
# doctests before ``funcdiff`` is imported).
tracing = dispatch.tracing


class Doubling(tracing.BaseTracer):
    """Runs the chosen functions itself, returning twice their result; counts what
    it replaced and what ran as usual."""

    def __init__(self, targets: Sequence[Callable[..., Any]]) -> None:
        self.targets = {FUNCTION_RULES.get(f) or UFUNC_RULES[f]: f for f in targets}
        self.inside = False
        self.replaced: list[str] = []
        self.reported: list[str] = []

    def process(self, rule: Rule, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        if self.inside or rule not in self.targets:
            return NotImplemented
        self.replaced.append(rule.name)
        # The operations run here come back to process(): let them through.
        self.inside = True
        try:
            return 2.0 * self.targets[rule](*args, **kwargs)
        finally:
            self.inside = False

    def op(
        self,
        rule: Rule,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        paths: list,
        tensors: list,
        outputs: list,
    ) -> None:
        self.reported.append(rule.name)


X = np.array([0.3, -1.2, 2.0, 0.7])


def leaf() -> fd.Tensor:
    return fd.tensor(X, requires_grad=True)


ONE_HOT_MAX = (np.arange(4) == X.argmax()).astype(float)
ONE_HOT_MIN = (np.arange(4) == X.argmin()).astype(float)


@pytest.mark.parametrize(
    ("target", "f", "value", "gradient"),
    [
        # An exact Tensor in a ufunc call: the fast positional path.
        (np.sin, lambda x: np.sum(np.sin(x)), 2 * np.sin(X).sum(), 2 * np.cos(X)),
        # An operator from the Tensor's method table.
        (np.absolute, lambda x: np.sum(abs(x)), 2 * np.abs(X).sum(), 2 * np.sign(X)),
        # A NumPy function through __array_function__.
        (np.sum, lambda x: np.sum(np.exp(x)), 2 * np.exp(X).sum(), 2 * np.exp(X)),
        # A ufunc method, routed to the matching function's rule.
        (np.sum, lambda x: np.add.reduce(np.exp(x)), 2 * np.exp(X).sum(), 2 * np.exp(X)),
        # A composite rule, replaced as a whole before its constituent operations run.
        (np.ptp, lambda x: np.ptp(x), 2 * np.ptp(X), 2 * ONE_HOT_MAX - 2 * ONE_HOT_MIN),
    ],
    ids=["ufunc", "operator", "function", "ufunc-method", "composite"],
)
def test_an_interpreter_runs_instead_of_the_operation(
    target: Callable, f: Callable, value: float, gradient: np.ndarray
) -> None:
    interpreter = Doubling([target])
    x = leaf()
    with tracing.installed(interpreter):
        y = f(x)
    np.testing.assert_allclose(y.data, value, rtol=1e-14)
    # The replacement is recorded like any other computation: its gradient flows.
    y.backward()
    np.testing.assert_allclose(x.grad.data, gradient, rtol=1e-14)
    name = interpreter.replaced[0]
    assert interpreter.replaced == [name]
    # The operations the interpreter let through ran and were reported as usual: the
    # replaced call was not, the same function run inside the replacement was once
    # (a composite decomposes into its constituent operations).
    expected = 0 if target is np.ptp else 1
    assert interpreter.reported.count(name) == expected
    assert "multiply" in interpreter.reported  # the doubling


def test_an_interpreter_replaces_an_operator_and_sees_every_call() -> None:
    class AddForMultiply(tracing.BaseTracer):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def process(self, rule: Rule, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
            self.seen.append(rule.name)
            if rule.fn is np.multiply:
                return np.add(*args)
            return NotImplemented

    x, y = leaf(), fd.tensor(np.arange(4.0), requires_grad=True)
    interpreter = AddForMultiply()
    with tracing.installed(interpreter):
        z = x * y  # the operator's fast path
        w = np.multiply(x, 3.0)  # a ufunc call with a constant
    np.testing.assert_allclose(z.data, X + np.arange(4.0))
    np.testing.assert_allclose(w.data, X + 3.0)
    (z.sum() + w.sum()).backward()
    np.testing.assert_allclose(x.grad.data, np.full(4, 2.0))
    np.testing.assert_allclose(y.grad.data, np.ones(4))
    assert interpreter.seen == ["multiply", "add", "multiply", "add"]
    # Nothing installed: the operator multiplies again.
    np.testing.assert_allclose((x * y).data, X * np.arange(4.0))
    assert tracing.TRACING[0] == 0


def test_an_interpreter_handles_functions_without_a_rule() -> None:
    assert np.histogram not in FUNCTION_RULES

    class Foreign(tracing.BaseTracer):
        def __init__(self) -> None:
            self.seen: list[Any] = []

        def process_foreign(self, func: Any, args: Sequence[Any], kwargs: dict) -> Any:
            self.seen.append(func)
            return "handled"

    x = leaf()
    with pytest.raises(TypeError, match="no derivative rule for numpy.histogram"):
        np.histogram(x)
    interpreter = Foreign()
    with tracing.installed(interpreter):
        assert np.histogram(x, bins=3) == "handled"
        assert np.add.outer(x, x) == "handled"  # a ufunc method with no matching function
        np.testing.assert_allclose(np.sin(x).data, np.sin(X))  # a rule: not asked
    assert interpreter.seen == [np.histogram, np.add.outer]


def test_a_tracer_sees_every_operation_and_conversion_and_leaves_nothing_behind() -> None:
    class Watch(tracing.BaseTracer):
        def __init__(self) -> None:
            self.ops: list[str] = []
            self.conversions: list[tuple[str, Any]] = []

        def op(self, rule: Rule, args: Any, kwargs: Any, paths: Any, tensors: Any, out: Any):
            self.ops.append(rule.name)

        def concretize(self, tensor: fd.Tensor, kind: str, value: Any) -> None:
            self.conversions.append((kind, value))

    watch = Watch()
    x = leaf()
    with tracing.installed(watch):
        assert tracing.current_tracer() is watch and tracing.current_observer() is watch
        y = np.sum(np.sin(x) * x)
        y.item()
    assert watch.ops == ["sin", "multiply", "sum"]
    assert watch.conversions == [("item", pytest.approx(float(np.sum(np.sin(X) * X))))]
    assert tracing.current_tracer() is None and tracing.current_observer() is None
    assert tracing.TRACING[0] == 0
    # Removed also when the block raises.
    with pytest.raises(ZeroDivisionError), tracing.installed(Watch()):
        _ = 1 / 0
    assert tracing.current_tracer() is None and tracing.TRACING[0] == 0


def test_an_observer_alone_sees_conversions_and_costs_operations_nothing() -> None:
    seen: list[str] = []

    class Observer:
        def concretize(self, tensor: fd.Tensor, kind: str, value: Any) -> None:
            seen.append(kind)

    x = fd.tensor(X)
    with tracing.installed(observer=Observer()):
        assert tracing.TRACING[0] == 0 and tracing.current_tracer() is None
        if np.sum(x) > 0:
            float(np.sum(x))
    assert seen == ["bool", "item"]  # float() converts through item()


def test_installing_refuses_to_nest_with_one_message() -> None:
    outer = tracing.BaseTracer()
    with tracing.installed(outer):
        for inner in (
            lambda: tracing.installed(tracing.BaseTracer()),
            lambda: tracing.installed(observer=tracing.BaseTracer()),
        ):
            with pytest.raises(RuntimeError, match="already traced in this thread"):
                with inner():
                    pass
        assert tracing.current_tracer() is outer
    with pytest.raises(TypeError, match="a tracer or an observer"):
        with tracing.installed():
            pass

    # The transforms: replay inside sparsity detection, detection inside a replay.
    def detects_inside(x: Any) -> Any:
        fs.jacobian_sparsity(lambda y: y * 2, np.ones(2))
        return np.sum(x**2)

    with pytest.raises(RuntimeError, match="already traced in this thread"):
        replay.grad(detects_inside)(np.ones(3))

    def replays_inside(x: Any) -> Any:
        replay.grad(lambda y: np.sum(y**2))(np.ones(2))
        return x * 2

    with pytest.raises(RuntimeError, match="already traced in this thread"):
        fs.jacobian_sparsity(replays_inside, np.ones(3))
    assert tracing.current_tracer() is None and tracing.TRACING[0] == 0


def test_a_tracer_sees_only_its_own_thread() -> None:
    class Count(tracing.BaseTracer):
        def __init__(self) -> None:
            self.names: list[str] = []

        def op(self, rule: Rule, args: Any, kwargs: Any, paths: Any, tensors: Any, out: Any):
            self.names.append(rule.name)

    count = Count()
    started, release = threading.Event(), threading.Event()
    other: dict[str, Any] = {}

    def work() -> None:
        with tracing.installed(count):
            started.set()
            release.wait(10)
            np.cos(leaf())

    thread = threading.Thread(target=work)
    thread.start()
    started.wait(10)
    try:
        # This thread runs down the general path while the other traces, unseen.
        assert tracing.TRACING[0] == 1 and tracing.current_tracer() is None
        x = leaf()
        other["y"] = np.sin(x) * x
    finally:
        release.set()
        thread.join(10)
    assert count.names == ["cos"]
    other["y"].sum().backward()
    np.testing.assert_allclose(x.grad.data, np.sin(X) + X * np.cos(X))
    assert tracing.TRACING[0] == 0
