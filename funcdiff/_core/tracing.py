"""The op-level interpreter hook: a tracer that sees every operation, an observer
that sees every conversion, and a tracer that may run something else instead of an op.

A transform that must follow a program operation by operation (``funcdiff.sparse``
detects Jacobian patterns this way, ``funcdiff.replay`` records programs) installs an
object for the current thread with :func:`installed`:

* a **tracer** (:class:`Tracer`) is told about every operation after it ran: a rule
  (``op``), a NumPy function without a rule (``foreign``), a ``detach`` (``derived``),
  in-place writes (``alias``, ``inplace``, ``setitem``), a custom Function
  (``opaque``), and a hook that it may refuse (``refuse``);
* an **observer** (:class:`Observer`, ``concretize``) is told about every conversion
  of a Tensor to a Python value or an ndarray (``bool``, ``int``, ``item``, ``tolist``,
  ``__array__``, ``numpy``, ``values_read``): the branches a program takes. A tracer
  is its own observer;
* a tracer that defines ``process(rule, args, kwargs)`` (:class:`Interpreter`) is
  asked *before* a rule runs, and its result replaces the operation's; returning
  ``NotImplemented`` lets the operation run (and be reported) as usual.
  ``process_foreign(func, args, kwargs)`` does the same for a NumPy function or
  ufunc that has no rule. A batching transform intercepts the operations on its
  batched values this way and lets every other operation through.

One object per thread at a time: :func:`installed` refuses to nest. With nothing
installed an operation pays one test of the plain global :data:`TRACING`.

A tracer that counts the operations it sees (``tests/test_tracing.py`` has tracers
that replace operations)::

    class Count(BaseTracer):
        def __init__(self):
            self.names = []

        def op(self, rule, args, kwargs, paths, tensors, outputs):
            self.names.append(rule.name)

    counter = Count()
    with installed(counter):
        y = np.sum(np.sin(x) * x)
    counter.names  # ['sin', 'multiply', 'sum']
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from funcdiff._core.registry import Rule
    from funcdiff._core.tensor import Tensor

__all__ = [
    "TRACING",
    "Tracer",
    "Observer",
    "Interpreter",
    "BaseTracer",
    "installed",
    "current_tracer",
    "current_observer",
    "is_watched",
    "run_instead",
    "run_instead_foreign",
]


class Observer(Protocol):
    """Told about every conversion of a Tensor to a Python value or an ndarray."""

    def concretize(self, tensor: Tensor, kind: str, value: Any) -> None:
        """``tensor`` was converted: ``kind`` is ``"bool"``, ``"int"`` (an index),
        ``"item"`` (a Python number) or ``"array"``, and ``value`` the result."""


class Tracer(Observer, Protocol):
    """Told about every operation on Tensors of this thread, after it ran."""

    #: Whether the engine may run a backward pass without recording a graph of it
    #: although ``create_graph`` asks for its NumPy calls on Tensors (a recorded
    #: first-order derivative: nothing differentiates the result again).
    graph_free: bool

    def op(
        self,
        rule: Rule,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        paths: list[tuple[Any, int | None]],
        tensors: list[Tensor],
        outputs: list[Tensor],
    ) -> None:
        """``rule`` ran on ``args``/``kwargs``; the Tensors among them are ``tensors``,
        found at ``paths`` (``(position or keyword, index in a list or None)``), and
        its results are ``outputs``."""

    def foreign(
        self, func: Any, args: Sequence[Any], kwargs: dict[str, Any], outputs: Sequence[Tensor]
    ) -> None:
        """A function without a rule ran on the Tensors' data (none required grad)."""

    def derived(self, out: Tensor, sources: Sequence[Any]) -> None:
        """``out`` was computed from ``sources`` with no derivative (``detach``)."""

    def alias(self, new: Tensor, source: Tensor) -> None:
        """``new`` stands for the value of ``source`` (an in-place history rebase)."""

    def inplace(self, ufunc: Any, t: Tensor, other: Any) -> None:
        """``t op= other`` ran without recording (nothing required grad, or no_grad)."""

    def setitem(self, t: Tensor, index: Any, value: Any) -> None:
        """``t[index] = value`` is about to run (reported before the write)."""

    def opaque(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """A custom Function ran: its derivative is code the tracer cannot read."""

    def refuse(self, what: str) -> None:
        """``what`` (``"register_hook"``, ``"retain_grad"``) is about to change the
        gradients: raise if the transform cannot honour it."""


class Interpreter(Tracer, Protocol):
    """A tracer that may run something else in place of an operation."""

    def process(self, rule: Rule, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """The result of ``rule`` on ``args``/``kwargs``, or ``NotImplemented`` to let
        it run as usual. ``kwargs`` may be shared: never modify it. Operations run
        inside ``process`` reach it again (return ``NotImplemented`` for them)."""

    def process_foreign(self, func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """As :meth:`process`, for a NumPy function or ufunc with no rule."""


class BaseTracer:
    """A tracer that ignores every event: subclass it and override what matters."""

    graph_free = False

    def op(
        self,
        rule: Rule,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        paths: list[tuple[Any, int | None]],
        tensors: list[Tensor],
        outputs: list[Tensor],
    ) -> None:
        """See :meth:`Tracer.op`."""

    def foreign(
        self, func: Any, args: Sequence[Any], kwargs: dict[str, Any], outputs: Sequence[Tensor]
    ) -> None:
        """See :meth:`Tracer.foreign`."""

    def derived(self, out: Tensor, sources: Sequence[Any]) -> None:
        """See :meth:`Tracer.derived`."""

    def alias(self, new: Tensor, source: Tensor) -> None:
        """See :meth:`Tracer.alias`."""

    def inplace(self, ufunc: Any, t: Tensor, other: Any) -> None:
        """See :meth:`Tracer.inplace`."""

    def setitem(self, t: Tensor, index: Any, value: Any) -> None:
        """See :meth:`Tracer.setitem`."""

    def opaque(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """See :meth:`Tracer.opaque`."""

    def refuse(self, what: str) -> None:
        """See :meth:`Tracer.refuse`."""

    def concretize(self, tensor: Tensor, kind: str, value: Any) -> None:
        """See :meth:`Observer.concretize`."""


class _Slots(threading.local):
    # Class attributes are the per-thread defaults: a new thread watches nothing.
    tracer: Tracer | None = None
    observer: Observer | None = None
    process: Callable[..., Any] | None = None
    process_foreign: Callable[..., Any] | None = None


_slots = _Slots()

#: How many threads have a tracer installed. The hot paths test this plain global
#: inline (``if TRACING[0]:``), never the thread-local slots, so that nobody tracing
#: costs them next to nothing; a thread that traces sends every thread's operations
#: down the general path, which reads its own thread's slots.
TRACING = [0]
_counter_lock = threading.Lock()

_NESTED = (
    "funcdiff cannot trace a function that is already traced in this thread: the "
    "function given to funcdiff.sparse or funcdiff.replay calls funcdiff.sparse or "
    "funcdiff.replay itself. Call them one after the other, or differentiate the inner "
    "function eagerly (funcdiff.grad, funcdiff.functional)."
)


@contextlib.contextmanager
def installed(tracer: Tracer | None = None, *, observer: Observer | None = None) -> Iterator[None]:
    """Install ``tracer`` (its own observer too), or only ``observer``, for this thread.

    Raises RuntimeError when this thread already has a tracer or an observer: a
    transform cannot run inside another one's trace. Everything is removed on exit,
    also when the block raises.

    Examples
    --------
    >>> from funcdiff._core.tracing import BaseTracer, current_observer, current_tracer
    >>> with installed(observer=BaseTracer()):
    ...     current_observer() is not None, current_tracer() is None
    (True, True)
    >>> with installed(BaseTracer()):
    ...     with installed(BaseTracer()):
    ...         pass
    Traceback (most recent call last):
    RuntimeError: funcdiff cannot trace a function that is already traced in this thread...
    """
    if (tracer is None) == (observer is None):
        raise TypeError("installed() takes a tracer or an observer=, one of them")
    if _slots.tracer is not None or _slots.observer is not None:
        raise RuntimeError(_NESTED)
    if tracer is None:
        _slots.observer = observer
        try:
            yield
        finally:
            _slots.observer = None
        return
    with _counter_lock:
        TRACING[0] += 1
    _slots.tracer = _slots.observer = tracer
    _slots.process = getattr(tracer, "process", None)
    _slots.process_foreign = getattr(tracer, "process_foreign", None)
    try:
        yield
    finally:
        _slots.tracer = _slots.observer = None
        _slots.process = _slots.process_foreign = None
        with _counter_lock:
            TRACING[0] -= 1


def current_tracer() -> Tracer | None:
    """This thread's tracer, or None."""
    return _slots.tracer


def current_observer() -> Observer | None:
    """This thread's observer (its tracer, while one is installed), or None."""
    return _slots.observer


def is_watched() -> bool:
    """Whether this thread has a tracer or an observer installed."""
    return _slots.observer is not None


def run_instead(rule: Rule, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """What the installed tracer's ``process`` makes of ``rule`` on ``args``, or
    ``NotImplemented`` (no such tracer, or it lets the operation run)."""
    process = _slots.process
    return NotImplemented if process is None else process(rule, args, kwargs)


def run_instead_foreign(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """:func:`run_instead` for a function or ufunc without a rule (``process_foreign``)."""
    process = _slots.process_foreign
    return NotImplemented if process is None else process(func, args, kwargs)
