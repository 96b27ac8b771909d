"""Record once, replay: derivatives at many points without re-recording the graph.

``funcdiff.replay.value_and_grad(f)`` returns a function with ``f``'s signature that
gives ``f``'s value and gradient as plain ndarrays. Its first call for given shapes and
dtypes runs eagerly and records every NumPy call it makes, the backward pass included
(run with ``create_graph=True``, so each vjp is itself recorded NumPy calls); later
calls replay that flat list of calls on the new arrays, with no Tensors and no graph.

>>> import numpy as np
>>> import funcdiff.replay as replay
>>> @replay.value_and_grad
... def loss(x):
...     return np.sum(np.sin(x) * x)
>>> value, g = loss(np.array([0.5, 1.0]))
>>> value, g = loss(np.array([1.0, 2.0]))     # replayed
>>> round(value, 6), np.round(g, 6)
(2.660066, array([1.381773, 0.077004]))
>>> loss.trace_count
1

Python control flow on values computed from the inputs (``if``, ``while``, ``item()``)
is recorded as guards, checked during the replay: a call that takes another branch
records a new program for that path (up to ``max_traces``, then runs eagerly). A replay
never follows another path's program.
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from funcdiff import functional
from funcdiff._core.backends import as_array, copy_array, is_foreign
from funcdiff._core.exits import refuse_recorded_arguments
from funcdiff._core.tensor import Tensor, tensor
from funcdiff._functional_args import (
    argnum_positions,
    check_argnums,
    check_callable,
    check_choice,
    check_positive_int,
)
from funcdiff._jacobian import jacobian_forward
from funcdiff.autograd import enable_grad
from funcdiff.autograd.engine import grad as _grad
from funcdiff.replay import jit
from funcdiff.replay.program import (
    GuardFailure,
    Program,
    ReplayTracer,
    TraceError,
    build,
    recording,
)

__all__ = [
    "value_and_grad",
    "grad",
    "jacobian",
    "hessian",
    "hvp",
    "vjp",
    "jvp",
    "Replayed",
    "ReplayError",
    "ReplayGuardError",
    "TraceError",
]


class ReplayError(RuntimeError):
    """A replayed result differs from eager at a nearby point: the function computes
    with values funcdiff cannot see (``Tensor.data``, NumPy on detached data, random
    numbers, a global changed while tracing)."""


class ReplayGuardError(RuntimeError):
    """A call takes a branch no recorded program covers (``on_guard_failure="raise"``)."""


_SCALARS = (bool, int, float, complex, str, type(None))


def _static_key(value: Any) -> Any:
    if isinstance(value, _SCALARS):
        return ("s", type(value).__name__, value)
    if isinstance(value, tuple) and all(isinstance(v, _SCALARS) for v in value):
        return ("s", "tuple", value)
    return ("o", id(value))


class Replayed:
    """A derivative of ``f`` that records once per signature and replays after.

    Calling it takes ``f``'s arguments (and the extra vector of :func:`hvp`,
    :func:`vjp`, :func:`jvp`) and returns ndarrays. The arguments at ``argnums`` are
    differentiated; other ndarray arguments are inputs of the recorded program too
    (their values may change between calls); any other argument (a Python number, a
    string) is fixed into the program, so a new value records a new one.

    Attributes
    ----------
    trace_count : int
        How many programs were recorded (all signatures and paths).
    """

    def __init__(
        self,
        f: Callable[..., Any],
        argnums: int | tuple[int, ...],
        kind: str,
        *,
        max_traces: int = 8,
        on_guard_failure: str = "retrace",
        validate: bool = True,
        compile: bool | str = "auto",
    ) -> None:
        check_callable(f, "f")
        check_argnums(argnums)
        check_choice(on_guard_failure, "on_guard_failure", ("retrace", "raise"))
        check_positive_int(max_traces, "max_traces")
        self.f = f
        self.argnums = argnums
        self.kind = kind
        self.max_traces = max_traces
        self.on_guard_failure = on_guard_failure
        self.validate = validate
        self.compile = jit.resolve(compile)
        self.trace_count = 0
        self._cache: OrderedDict[tuple, list[Program]] = OrderedDict()
        self._stats = {"calls": 0, "replays": 0, "guard_failures": 0, "eager_calls": 0}
        self._warned = False
        self._positions: dict[int, set[int]] = {}  # argnums resolved per argument count
        functools.update_wrapper(self, f)

    # ------------------------------------------------------------------ public
    def cache_info(self) -> dict:
        """Signatures, programs per signature, replays, guard failures, eager calls."""
        return {
            "signatures": len(self._cache),
            "programs": sum(len(p) for p in self._cache.values()),
            "trace_count": self.trace_count,
            **self._stats,
        }

    def reset(self) -> None:
        """Forget every recorded program."""
        self._cache.clear()

    def __call__(self, *args: Any) -> Any:
        refuse_recorded_arguments("funcdiff.replay", (), self.f, positional=args)
        self._stats["calls"] += 1
        positions, arrays, key = self._split(args)
        programs = self._cache.get(key)
        if programs is not None:
            self._cache.move_to_end(key)
            for program in programs:
                try:
                    result = program.run(arrays)
                except GuardFailure:
                    self._stats["guard_failures"] += 1
                    continue
                self._stats["replays"] += 1
                return self._finish(result)
        else:
            programs = self._cache[key] = []
            if len(self._cache) > 32:
                self._cache.popitem(last=False)
        if len(programs) >= self.max_traces:
            if self.on_guard_failure == "raise":
                raise ReplayGuardError(
                    f"this call takes a branch none of the {len(programs)} recorded programs "
                    "of its signature covers (an if, while or item() on a value computed "
                    "from the inputs came out differently)"
                )
            if not self._warned:
                warnings.warn(
                    f"funcdiff.replay: {len(programs)} programs recorded for one signature "
                    "and the branches keep changing; running eagerly from now on",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self._warned = True
            self._stats["eager_calls"] += 1
            return self._finish(self._eager(args, positions))
        if programs and self.on_guard_failure == "raise":
            raise ReplayGuardError(
                "this call takes a branch the recorded program does not cover (an if, "
                "while or item() on a value computed from the inputs came out differently)"
            )
        program, result = self._trace(args, positions)
        programs.append(program)
        if self.validate:
            self._validate(program, args, positions)
        return self._finish(result)

    def __reduce__(self) -> Any:
        """Pickle ``f`` and the options, never the recorded programs.

        A program holds compiled code and objects of this process; a loaded copy records
        again on its first call (``trace_count`` starts at 0) and gives the same results.
        A Replayed that its module names (``@replay.grad`` on a module-level function)
        pickles by that name, as functions do.
        """
        name = _module_level_name(self)
        if name is not None:
            return name
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for param in list(inspect.signature(type(self).__init__).parameters.values())[1:]:
            value = getattr(self, param.name)
            if param.kind is inspect.Parameter.KEYWORD_ONLY:
                keywords[param.name] = value
            else:
                positional.append(value)
        return (functools.partial(type(self), **keywords), tuple(positional))

    # ------------------------------------------------------------------ internals
    def _diff(self) -> tuple[int, ...]:
        return self.argnums if isinstance(self.argnums, tuple) else (self.argnums,)

    def _split(self, args: tuple) -> tuple[list[int], list[np.ndarray], tuple]:
        """Which arguments are program inputs, their arrays, and the cache key."""
        diff = self._positions.get(len(args))
        if diff is None:
            diff = self._positions[len(args)] = argnum_positions(self.argnums, len(args))
        if self.kind in ("hvp", "vjp", "jvp"):
            if len(args) < 2:
                raise TypeError(
                    f"a replayed {self.kind} is called with f's arguments and then the vector"
                )
            vector = len(args) - 1
            vec = as_array(args[-1])
            args = (*args[:-1], vec if vec.dtype.kind in "fc" else vec.astype(float))
        else:
            vector = -1
        if all(type(a) is np.ndarray and a.dtype.kind in "fc" for a in args):
            # The common call, every argument a float array (the loop below, faster).
            signature = tuple([("a", i in diff, a.shape, a.dtype) for i, a in enumerate(args)])
            return list(range(len(args))), list(args), signature
        positions, arrays, key = [], [], []
        for i, a in enumerate(args):
            if i in diff or i == vector or isinstance(a, (np.ndarray, Tensor)) or is_foreign(a):
                arr = a.detach().data if isinstance(a, Tensor) else a
                if i in diff:
                    if type(arr) is not np.ndarray:
                        arr = as_array(arr)
                    if arr.dtype.kind not in "fc":  # complex inputs keep their dtype
                        arr = arr.astype(float)
                positions.append(i)
                arrays.append(arr)
                # one program per array type: a CuPy input records its own
                kind = arr.dtype if type(arr) is np.ndarray else (arr.dtype, type(arr))
                key.append(("a", i in diff, arr.shape, kind))
            else:
                key.append(_static_key(a))
        return positions, arrays, tuple(key)

    def _tensors(self, args: tuple, positions: list[int], arrays: list[np.ndarray]) -> list:
        diff = {i % len(args) for i in self._diff()}
        call = list(args)
        for i, arr in zip(positions, arrays):
            call[i] = tensor(arr, requires_grad=i in diff)
        return call

    def _compute(self, call: list, create_graph: bool = True) -> Any:
        """The derivative on Tensors, eagerly. With a tracer installed it runs with
        ``create_graph=True``, so that the backward pass is NumPy calls on Tensors too."""
        diff = [call[i % len(call)] for i in self._diff()]
        kind = self.kind
        if kind in ("value_and_grad", "grad"):
            out = self.f(*call)
            if not isinstance(out, Tensor) or out.data.size != 1:
                got = f"shape {out.shape}" if isinstance(out, Tensor) else type(out).__name__
                raise ValueError(
                    f"funcdiff.replay.{kind} needs a function returning one number, got {got}"
                )
            grads = _grad(out, diff, create_graph=create_graph, allow_unused=True)
            # An input the value does not depend on has a zero gradient (as jax.grad).
            return out, tuple(np.zeros_like(x) if g is None else g for g, x in zip(grads, diff))
        extra = call[-1]
        if kind in ("hvp", "vjp", "jvp"):
            call = call[:-1]
        single = not isinstance(self.argnums, tuple)

        def of(*xs: Any) -> Any:
            full = list(call)
            for i, x in zip(self._diff(), xs):
                full[i % len(full)] = x
            return self.f(*full)

        xs = diff[0] if single else tuple(diff)
        if kind == "jacobian":
            out = of(*diff)
            outs = out if isinstance(out, tuple) else (out,)
            real = all(x.data.dtype.kind == "f" for x in diff)
            if real and sum(x.data.size for x in diff) < sum(np.size(o) for o in outs):
                # Fewer inputs than outputs: one tangent per input element, forward.
                return _forward_jacobian(out, diff, single, create_graph)
            return functional.jacobian(of, xs, create_graph=create_graph, vectorize=True)
        if kind == "hessian":
            return functional.hessian(of, xs, create_graph=True, vectorize=True)
        if kind == "hvp":
            return functional.hvp(of, xs, extra, create_graph=create_graph)
        if kind == "vjp":
            return functional.vjp(of, xs, extra, create_graph=create_graph)
        return functional.jvp(of, xs, extra, create_graph=create_graph)

    def _trace(self, args: tuple, positions: list[int]) -> tuple[Program, Any]:
        _, arrays, _ = self._split(args)
        with recording(graph_free=self.kind in ("value_and_grad", "grad")) as tracer:
            call = self._tensors(args, positions, arrays)
            for i in positions:
                tracer.input(call[i])
            result = self._compute(call)
        structure = _slots(result, tracer)
        self.trace_count += 1
        return build(tracer, structure, self.compile), _arrays(result)

    def _eager(self, args: tuple, positions: list[int]) -> Any:
        _, arrays, _ = self._split(args)
        with enable_grad():
            return _arrays(self._compute(self._tensors(args, positions, arrays), False))

    def _validate(self, program: Program, args: tuple, positions: list[int]) -> None:
        """Replay at a nearby point and compare with eager there."""
        diff = {i % len(args) for i in self._diff()}
        rng = np.random.default_rng(12345)
        shifted = list(args)
        for i in positions:
            if i in diff:
                a = as_array(args[i])
                a = a if a.dtype.kind in "fc" else a.astype(float)
                signs = rng.choice([-1.0, 1.0], size=a.shape)
                if is_foreign(a):
                    signs = np.asarray(signs, like=a)  # the same device as the input
                step = 1e-3 * (np.abs(a) + 1.0) * signs
                shifted[i] = (a + step).astype(a.dtype, copy=False)
        moved = tuple(shifted)
        _, arrays, _ = self._split(moved)
        try:
            replayed = program.run(arrays)
        except GuardFailure:
            return  # another path there: nothing to compare
        eager = self._eager(moved, positions)
        if not _close(replayed, eager):
            raise ReplayError(
                "the replayed result differs from eager at a nearby point: the function "
                "computes with values funcdiff cannot see (Tensor.data, NumPy on detached "
                "data, random numbers, or a global changed during tracing). Replay needs "
                "every computation on the inputs to go through Tensors."
            )

    def _finish(self, result: Any) -> Any:
        if self.kind in ("value_and_grad", "grad"):
            value, grads = result
            grads = grads if isinstance(self.argnums, tuple) else grads[0]
            if self.kind == "grad":
                return grads
            return _scalar(value), grads
        if self.kind == "hvp":  # the value of a scalar function: a float, as above
            return _scalar(result[0]), result[1]
        return result


def _module_level_name(obj: Any) -> str | None:
    """``obj``'s qualified name when its module holds it under that name (so that pickle
    can store a reference), else None: ``__main__`` (another process has another one) and
    modules cloudpickle is told to pickle by value."""
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module_name, str) or not isinstance(qualname, str):
        return None
    if module_name == "__main__" or "<locals>" in qualname:
        return None
    cloudpickle = sys.modules.get("cloudpickle")
    by_value = getattr(cloudpickle, "list_registry_pickle_by_value", None)
    if by_value is not None and module_name in by_value():
        return None
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return qualname if found is obj else None


def _forward_jacobian(out: Any, inputs: list, single: bool, create_graph: bool) -> Any:
    """The Jacobian as tangents of the identity basis pushed forward in one batched
    pass, in :func:`funcdiff.functional.jacobian`'s layout (outputs, then inputs)."""
    outputs = out if isinstance(out, tuple) else (out,)
    jac = jacobian_forward(outputs, inputs, True, None, create_graph=create_graph)
    result = [blocks[0] if single else blocks for blocks in jac]
    return result[0] if not isinstance(out, tuple) else tuple(result)


def _slots(result: Any, tracer: ReplayTracer) -> Any:
    if result is None:
        return None
    if isinstance(result, Tensor):
        return tracer.slot_of(result)
    if isinstance(result, (tuple, list)):
        return tuple(_slots(r, tracer) for r in result)
    raise TypeError(f"a replayed computation returned {type(result).__name__}")


def _arrays(result: Any) -> Any:
    if result is None:
        return None
    if isinstance(result, Tensor):
        return copy_array(result.data)
    if isinstance(result, (np.ndarray, np.generic)) or is_foreign(result):
        return copy_array(result)
    return tuple(_arrays(r) for r in result)


def _scalar(value: Any) -> Any:
    """A scalar function's value: a float, or a 0-d array of a device array's type
    (reading it would copy it to the host)."""
    if type(value) is np.ndarray:
        return float(value.reshape(-1)[0])
    first = np.reshape(value, -1)[0]
    return first if is_foreign(value) else float(first)


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    a, b = as_array(a), as_array(b)
    scale = 1e-300 + 1e-12 * np.maximum(np.abs(b).max(initial=0.0), 1e-300)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-10, atol=scale, equal_nan=True)


def _maker(kind: str, summary: str, example: str) -> Callable:
    def make(
        f: Callable[..., Any] | None = None,
        argnums: int | tuple[int, ...] = 0,
        *,
        max_traces: int = 8,
        on_guard_failure: str = "retrace",
        validate: bool = True,
        compile: bool | str = "auto",
    ) -> Any:
        def wrap(fn: Callable[..., Any]) -> Replayed:
            return Replayed(
                fn,
                argnums,
                kind,
                max_traces=max_traces,
                on_guard_failure=on_guard_failure,
                validate=validate,
                compile=compile,
            )

        return wrap if f is None else wrap(f)

    make.__name__ = make.__qualname__ = kind
    make.__doc__ = (
        f"{summary}\n{_COMMON}\n    Examples\n    --------\n"
        "    >>> import numpy as np\n    >>> import funcdiff.replay as replay\n"
        + "".join(f"    {line}\n" for line in example.strip().splitlines())
    )
    return make


_COMMON = """
    Parameters
    ----------
    f : callable
        NumPy code. Usable as a decorator, with or without arguments.
    argnums : int or tuple of int
        The differentiated positional arguments; with a tuple the derivatives come as
        a tuple.
    max_traces : int
        Programs recorded per signature (one per path through the branches) before
        calls that take yet another path run eagerly.
    on_guard_failure : {"retrace", "raise"}
        What a call off every recorded path does: record its path, or raise
        :class:`ReplayGuardError`.
    validate : bool
        Replay each new program once at a nearby point and compare with eager there,
        which catches computation funcdiff cannot see (:class:`ReplayError`).
    compile : {False, True, "auto"}, default "auto"
        Lower each recorded program to XLA kernels through JAX
        (:mod:`funcdiff.replay.jit`): ``True`` needs the extra ``funcdiff[jit]``
        (ImportError without it), ``"auto"`` compiles when it is installed and the
        program is large enough to repay compiling, ``False`` replays NumPy calls.
        Instructions JAX cannot run stay NumPy calls; results are within 1e-12 of
        NumPy's.

    Returns
    -------
    Replayed
"""

value_and_grad = _maker(
    "value_and_grad",
    """A function returning ``(f(*args), gradient)``: the value as a Python float, the
    gradient as an ndarray (a tuple of them for a tuple ``argnums``).""",
    """>>> vg = replay.value_and_grad(lambda x, y: np.sum(x * y), argnums=(0, 1))
>>> vg(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
(11.0, (array([3., 4.]), array([1., 2.])))""",
)
grad = _maker(
    "grad",
    "A function returning the gradient of a scalar ``f`` (see :func:`value_and_grad`).",
    """>>> replay.grad(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
array([ 3., 12.])""",
)
jacobian = _maker(
    "jacobian",
    """A function returning the Jacobian of ``f``, shaped as
    :func:`funcdiff.functional.jacobian`'s (output shape + input shape).""",
    """>>> replay.jacobian(lambda x: x ** 2)(np.array([1.0, 3.0]))
array([[2., 0.],
       [0., 6.]])""",
)
hessian = _maker(
    "hessian",
    """A function returning the Hessian of a scalar ``f``, shaped as
    :func:`funcdiff.functional.hessian`'s.""",
    """>>> replay.hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
array([[ 6.,  0.],
       [ 0., 12.]])""",
)
hvp = _maker(
    "hvp",
    """A function ``(*args, v) -> (f(*args), H v)``: a Hessian-vector product, called with
    the vector after ``f``'s arguments; the value is a Python float, as
    :func:`value_and_grad`'s.""",
    """>>> replay.hvp(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
(9.0, array([6., 0.]))""",
)
vjp = _maker(
    "vjp",
    "A function ``(*args, v) -> (f(*args), v^T J)``.",
    """>>> replay.vjp(lambda x: x ** 2)(np.array([1.0, 3.0]), np.array([1.0, 1.0]))
(array([1., 9.]), array([2., 6.]))""",
)
jvp = _maker(
    "jvp",
    "A function ``(*args, t) -> (f(*args), J t)``.",
    """>>> replay.jvp(lambda x: x ** 2)(np.array([1.0, 3.0]), np.array([1.0, 0.0]))
(array([1., 9.]), array([2., 0.]))""",
)
