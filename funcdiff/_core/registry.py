"""The rule registry: derivative rules as data.

A :class:`Rule` says how to run an operation forward on ndarrays and, for each
differentiable argument, how a cotangent ``g`` maps back to that argument::

    Rule("sin", np.sin, vjps={0: lambda g, ans, x: g * np.cos(x)})

Rules are written with NumPy calls. On the fast first-order path they run on
ndarrays; under ``create_graph=True`` the same code runs on Tensors and records
itself, which gives every higher order from one rule.

Conventions every vjp follows
-----------------------------
* Signature ``vjp(g, ans, *args, **kwargs)``: ``ans`` is the forward result and the
  arguments are those of the forward call.
* ``g`` has shape ``batch + ans.shape``, where ``batch`` is empty or one leading
  axis (``is_grads_batched``); ``batch_ndim(g, ans)`` tells which. Count axes from
  the end, or shift them by the batch rank.
* A vjp may return anything that broadcasts to ``batch + arg.shape``: the engine sums
  it back to the argument's shape and casts it to the argument's dtype, so rules
  never unbroadcast by hand.
* For a positional argument that is a sequence of arrays (``concatenate``), the vjp
  returns a sequence of cotangents, one per element.
* Multi-output rules receive ``g`` and ``ans`` as tuples; a missing output cotangent
  arrives as zeros.

Complex values
--------------
A rule is run on complex values only when it says so (``complex=True``); any other
rule refuses them at record time. Inside a backward pass the cotangent of a complex
value ``z = x + iy`` is ``dL/dx - i dL/dy`` (twice the Wirtinger derivative
``dL/dz``), the conjugate of the public ``z.grad``; the engine conjugates where
cotangents enter and leave. In that form:

* the vjp of a holomorphic function is the plain transpose of its derivative,
  ``g * f'(z)``, ``g @ B.T``: the formulas written for real values hold unchanged;
* a function of ``z`` and ``conj(z)`` (``w = f(z, z̄)``) has the vjp
  ``g * dw/dz + conj(g) * conj(dw/dz̄)``: ``conj(g)`` for ``conj``, ``-1j * g`` for
  ``imag``; such rules give their own complex vjps (``complex_vjps``);
* the cotangent of a real argument is the real part of the complex one (the engine
  takes it), so real inputs of complex computations get real gradients.

Each rule carries test cases (:class:`Case`): the test suite checks every registered
rule against finite differences at first and second order, batched and unbatched, so
adding an op means adding one entry and nothing else.
"""

from __future__ import annotations

import dis
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

if TYPE_CHECKING:
    from funcdiff.rules.cases import Case

__all__ = [
    "Rule",
    "Structure",
    "UFUNC_RULES",
    "FUNCTION_RULES",
    "NAMED_RULES",
    "register",
    "all_rules",
    "batch_ndim",
    "dispatching",
    "ALL",
]


@dataclass(frozen=True)
class Structure:
    """The structure of a rule's Jacobian and Hessian, for sparsity detection and
    forward mode (the kinds are described in :mod:`funcdiff.rules.structure`).

    ``pattern`` names the kind (``"elementwise"``, ``"select"``, ``"reduce"``, ...),
    ``curvature`` what the rule adds to a Hessian's pattern, and ``axes`` reads the
    axes of a ``reduce``/``scan``/``fibre`` rule from the call's arguments
    (``axes(args, kwargs, ndim)``; None: the defaults).
    """

    pattern: str
    curvature: str = "nonlinear"
    axes: Callable[[tuple, dict, int], tuple[int, ...] | None] | None = None


def _params_read(func: Callable) -> frozenset[str]:
    """Names of ``func``'s parameters that its code may read.

    Conservative: a name counts as read when any instruction mentions it or a closure
    captures it. It lets the recorder skip version checks for values a rule never
    looks at, so that ``y = x * 2; y += 1`` stays legal while ``y = np.exp(x); y += 1``
    (whose rule reads ``ans``) is refused.
    """
    code = getattr(func, "__code__", None)
    if code is None:  # a builtin or callable object: assume it reads everything
        return frozenset({"*"})
    nparams = code.co_argcount + code.co_kwonlyargcount
    nparams += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    params = set(code.co_varnames[:nparams])
    read = set(params & set(code.co_cellvars))
    for ins in dis.get_instructions(code):
        arg = ins.argval
        names = arg if isinstance(arg, tuple) else (arg,)
        for name in names:
            if isinstance(name, str) and name in params:
                read.add(name)
    if code.co_flags & 0x04 or code.co_flags & 0x08:
        # *args / **kwargs forwarded to a helper may read anything.
        read.add("*")
    return frozenset(read)


#: Marks "every argument and the output" in ``Rule.reads``.
ALL = "*"


def _arguments_read(vjp: Callable) -> frozenset:
    """Which forward arguments (positions, keyword names) and ``"ans"`` a vjp reads."""
    names = _params_read(vjp)
    code = getattr(vjp, "__code__", None)
    if code is None or ALL in names:
        return frozenset({ALL})
    params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    read: set = set()
    if "ans" in names:
        read.add("ans")
    for position, name in enumerate(params[2 : code.co_argcount]):
        if name in names:
            read.add(position)
            read.add(name)  # the same argument may arrive by keyword
    for name in params[code.co_argcount :]:
        if name in names:
            read.add(name)
    return frozenset(read)


@dataclass(frozen=True, eq=False)
class Rule:
    """A derivative rule: one entry per operation.

    Parameters
    ----------
    name : str
        Name shown in ``grad_fn`` (``"sin"`` gives ``SinBackward``) and in the docs.
    fn : callable
        The forward on ndarrays (usually the NumPy function itself).
    vjps : mapping
        ``{argument: vjp}`` for each differentiable argument, keyed by position, or by
        name for keyword arguments.
    jvps : mapping, optional
        ``{position: jvp(t, ans, *args, **kwargs)}``: forward mode's tangent maps, the
        change of the output along a tangent ``t`` of that argument. ``t`` has shape
        ``batch + arg.shape`` (``batch_ndim(t, arg)`` tells); the result may broadcast
        to ``batch + ans.shape``. A jvp may return NotImplemented for cases it does not
        handle. Optional: forward mode transposes the vjp wherever there is no jvp.
        Rules with ``diagonal=True`` need none: each of their vjps is also the
        argument's tangent map. A jvp must read no argument that the vjp of the
        same argument does not read (version checks follow the vjps).
    vjp_all : callable, optional
        Instead of ``vjps``: ``vjp_all(needs, g, ans, *args, **kwargs)`` returning one
        cotangent (or None) per positional argument, for rules whose arguments share
        work (``solve``). ``needs`` is a tuple of bools, one per positional argument.
    nondiff_args : frozenset
        Arguments whose gradient is zero by definition (indices, conditions).
        A Tensor that requires grad anywhere else, without a vjp, is an error: a
        gradient is never dropped silently.
    differentiable : bool
        False for operations whose result is piecewise constant (``floor``,
        comparisons, ``argmax``): the result is a constant.
    cases : tuple of Case
        Test points; every differentiable rule needs at least one.
    convention : str
        The documented choice at kinks and degeneracies.
    impl : callable, optional
        A composite: run ``impl`` on the Tensors themselves (it calls other rules),
        instead of recording one node.
    uses_values : bool
        False when the vjps look at the arguments and the output only for their
        shapes and dtypes (reshape, indexing, sum): nothing is version-checked then,
        so in-place changes after the operation stay legal.
    uses_layout : bool
        True when, beyond shapes, the vjps look at the memory layout of the arguments
        (``reshape(order="A")``). A rule that uses neither values nor layout keeps
        stand-ins of large arguments, not the arrays (``shapes_only``).
    complex : bool
        True when the rule accepts complex values, with the conventions of this
        module's docstring: its vjps (and jvps) hold for complex arguments and
        outputs as written, except those replaced by ``complex_vjps``. False: a
        complex value that would be recorded is refused with a TypeError.
    complex_vjps : mapping
        ``{argument: vjp}`` used instead of ``vjps`` when an argument or the output
        is complex (functions of ``conj(z)``, like ``abs`` or ``eigh``); the key
        ``ALL`` replaces ``vjp_all``. Forward mode transposes these vjps.
    complex_cases : tuple of Case
        Test points with complex arguments (``Arg(kind="complex")``), on top of the
        complex versions of ``cases`` that the tests derive.
    arg_names : tuple of str
        The names of the positional arguments, for error messages: a Tensor that
        requires grad where there is no derivative is refused by name ("gammainc is
        differentiable in x, not in a").
    diagonal : bool
        True when the Jacobian with respect to each argument is diagonal after
        broadcasting (elementwise functions, ``scipy.special`` ufuncs): each vjp is then
        also the argument's tangent map, and forward mode applies it directly instead
        of transposing the vjp. A wrong True gives wrong forward-mode derivatives.
    structure : Structure, optional
        The structure of the Jacobian and Hessian (:mod:`funcdiff.rules.structure`):
        sparsity detection propagates patterns by it, and forward mode gathers the
        tangents of a ``"select"`` rule instead of transposing its vjp. Every
        differentiable rule that records a node declares one (the tests enforce it);
        the factories of the rule modules give their kind's (``unary``: elementwise).
    batch : callable, optional
        How ``funcdiff.func.vmap`` runs the rule on a batch of examples at once:
        ``batch(rule, args, kwargs, flags, size)``, where the batched arguments arrive
        as physical arrays with the batch on axis 0 (``flags`` holds, per positional
        argument, whether it is batched, or a tuple of flags for a list of arrays) and
        the result has the batch on axis 0; ``NotImplemented`` asks for the loop over
        examples. None: the default of the rule's structure
        (:func:`funcdiff.rules.batching.default_batch`); the factories in
        :mod:`funcdiff.rules.batching` build the usual ones.
    """

    name: str
    fn: Callable
    vjps: Mapping[int | str, Callable] = field(default_factory=dict)
    jvps: Mapping[int, Callable] = field(default_factory=dict)
    vjp_all: Callable | None = None
    nondiff_args: frozenset = frozenset()
    differentiable: bool = True
    cases: tuple[Case, ...] = ()
    convention: str = ""
    impl: Callable | None = None
    uses_values: bool = True
    uses_layout: bool = False
    family: str = ""
    diagonal: bool = False
    arg_names: tuple[str, ...] = ()
    complex: bool = False
    complex_vjps: Mapping[int | str, Callable] = field(default_factory=dict)
    complex_cases: tuple[Case, ...] = ()
    structure: Structure | None = None
    batch: Callable | None = None
    # Caches filled on first use, per tuple of differentiated arguments (mutated, never
    # rebound: the rule stays frozen).
    _checked_cache: dict[tuple, tuple[frozenset, bool]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _mentions_cache: dict[tuple, tuple[frozenset, bool]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _tangent_cache: dict[tuple, tuple[tuple | None, bool]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # {arity and differentiated-position mask: funcdiff.ops.dispatch's recording plan}
    _positional_plans: dict[int, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    # Derived once from the fields above, in __post_init__, and read on every recorded
    # call: whether the derivatives need only the shapes and dtypes of the differentiated
    # arguments and of the output (sum, mean), and the name of the rule's nodes
    # (``grad_fn``: ``"sin"`` gives ``SinBackward``).
    shapes_only: bool = field(init=False, repr=False, compare=False)
    node_name: str = field(init=False, repr=False, compare=False)
    # Values computed on first use (``reads``, ``complex_rule``): filled in place.
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Stored the way the frozen class's generated __init__ stores its fields: the
        # attributes stay in the instance's inline values, which keeps every attribute
        # read on the per-call path specialised by the interpreter (going through
        # vars(self) or functools.cached_property costs ~2% per recorded op).
        parts = self.name.replace(".", "_").split("_")
        object.__setattr__(self, "shapes_only", not self.uses_values and not self.uses_layout)
        object.__setattr__(self, "node_name", "".join(p.capitalize() for p in parts) + "Backward")

    @property
    def reads(self) -> dict:
        """``{argument key: the argument keys (and "ans") its vjp reads}``.

        Found by reading the vjps' bytecode, on first use: doing it for every rule at
        import time was a tenth of ``import funcdiff``.
        """
        found = self._derived.get("reads")
        if found is None:
            found = {}
            if self.vjp_all is not None:
                found[ALL] = frozenset({ALL})
            for key, f in self.vjps.items():
                found[key] = _arguments_read(f)
            if not self.uses_values:
                # Shapes only, except for the non-differentiable arguments (indices,
                # conditions), whose values the vjps do use.
                found = {key: frozenset(self.nondiff_args) for key in found}
            self._derived["reads"] = found
        return found

    def checked(self, keys: tuple) -> tuple[frozenset, bool]:
        """For the differentiated argument ``keys``: which argument keys the vjps read
        (``{ALL}`` for all), and whether they read the output."""
        cached = self._checked_cache.get(keys)
        if cached is None:
            read: set = set()
            for key in keys:
                read |= self.reads.get(key, self.reads.get(ALL, frozenset()))
            if self.vjp_all is not None:
                read |= self.reads[ALL]
            cached = (frozenset(read), ALL in read or "ans" in read)
            self._checked_cache[keys] = cached
        return cached

    def mentions(self, keys: tuple) -> tuple[frozenset, bool]:
        """For the differentiated argument ``keys``: the arguments that their vjps and
        jvps use at all, for values or only for shapes (``{ALL}`` for all), and whether
        they use the output. A node keeps these and lets the rest go."""
        cached = self._mentions_cache.get(keys)
        if cached is None:
            used: set = set()
            if self.vjp_all is not None:
                used.add(ALL)
            for key in keys:
                for maps in (self.vjps, self.jvps):
                    if key in maps:
                        used |= _arguments_read(maps[key])
            read, reads_ans = self.checked(keys)  # what is version-checked is kept too
            used |= read
            cached = (frozenset(used), reads_ans or ALL in used or "ans" in used)
            self._mentions_cache[keys] = cached
        return cached

    def tangent_maps(self, keys: tuple) -> tuple[tuple | None, bool]:
        """For the differentiated argument ``keys``: their tangent maps (None when one is
        missing: forward mode transposes the vjps then), and whether a batch of tangents
        must be aligned with the output's axes first (``pad``).

        A diagonal Jacobian (after broadcasting, ``diagonal=True``) makes the vjps also the
        tangent maps, once a batch is aligned as broadcasting aligns the arguments.
        """
        cached = self._tangent_cache.get(keys)
        if cached is None:
            pad = self.diagonal
            maps = self.vjps if pad else self.jvps
            found = tuple(maps[k] for k in keys) if all(k in maps for k in keys) else None
            cached = self._tangent_cache[keys] = (found, pad)
        return cached

    @property
    def complex_rule(self) -> Rule | None:
        """The rule to record where a value is complex: None when the rule refuses
        complex values, itself when its vjps hold as written, else a copy with
        ``complex_vjps`` in place of the vjps they replace (made on first use)."""
        if not self.complex:
            return None
        if not self.complex_vjps:
            return self
        twin = self._derived.get("complex_rule")
        if twin is None:
            vjps = {**self.vjps, **{k: v for k, v in self.complex_vjps.items() if k != ALL}}
            jvps = {k: v for k, v in self.jvps.items() if k not in self.complex_vjps}
            twin = self._derived["complex_rule"] = Rule(
                self.name,
                self.fn,
                vjps=vjps,
                jvps=jvps,
                vjp_all=self.complex_vjps.get(ALL, self.vjp_all),
                nondiff_args=self.nondiff_args,
                differentiable=self.differentiable,
                convention=self.convention,
                uses_values=self.uses_values,
                uses_layout=self.uses_layout,
                family=self.family,
                # A replaced vjp may not be a tangent map (abs: the tangent is the real
                # part of g * conj(sign z)): forward mode transposes it instead.
                diagonal=self.diagonal and not self.complex_vjps,
                arg_names=self.arg_names,
                complex=True,
                structure=self.structure,
                batch=self.batch,
            )
        return twin

    def reads_argument(self, key: Any) -> bool:
        """Whether any vjp may read the value of argument ``key``."""
        return any(key in r or ALL in r for r in self.reads.values())


# NumPy ufunc -> Rule, NumPy/SciPy function -> Rule, and Tensor-only operations by name.
UFUNC_RULES: dict[Any, Rule] = {}
FUNCTION_RULES: dict[Any, Rule] = {}
NAMED_RULES: dict[str, Rule] = {}


def register(rule: Rule, *keys: Any) -> Rule:
    """Register ``rule`` under ``keys``, or under ``rule.fn`` when no key is given.

    A string key registers a Tensor-only operation (``"getitem"``); a ufunc goes to the
    ufunc table; any other callable to the function table.
    """
    for key in keys or (rule.fn,):
        if isinstance(key, str):
            NAMED_RULES[key] = rule
        elif isinstance(key, np.ufunc):
            UFUNC_RULES[key] = rule
        else:
            FUNCTION_RULES[key] = rule
    return rule


def all_rules() -> list[Rule]:
    """Every registered rule once, in registration order."""
    seen: dict[int, Rule] = {}
    for table in (UFUNC_RULES, FUNCTION_RULES, NAMED_RULES):
        for rule in table.values():
            seen.setdefault(id(rule), rule)
    return list(seen.values())


class _Dispatching(Protocol):
    """What :func:`dispatching` returns: the helper, with the plain one as ``__wrapped__``."""

    __wrapped__: Callable

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


def dispatching(fn: Callable) -> _Dispatching:
    """Make a NumPy-level helper dispatch like a NumPy function (NEP 18).

    On ndarrays it runs ``fn``; when an argument (or an item of a list or tuple
    argument, or a keyword argument) is a Tensor, the Tensor's
    ``__array_function__`` receives the call and runs the rule registered for the
    returned wrapper. Helpers that rules need (``index_add``) become differentiable
    primitives this way, with no import of the layers above.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for a in (*args, *kwargs.values()):
            for item in a if type(a) in (list, tuple) else (a,):
                t = type(item)
                if (
                    t is not np.ndarray
                    and hasattr(t, "__array_function__")
                    and not isinstance(item, np.generic)
                ):
                    done = item.__array_function__(wrapper, (t,), args, kwargs)
                    if done is not NotImplemented:
                        return done
                    # an array of another backend (CuPy) does not know this helper:
                    # the helper runs on it directly, as on ndarrays
        return fn(*args, **kwargs)

    return cast(_Dispatching, wrapper)  # functools.wraps set __wrapped__


def batch_ndim(g: Any, ans: Any) -> int:
    """Number of leading batch axes of cotangent ``g`` for output ``ans`` (0 or 1)."""
    return np.ndim(g) - np.ndim(ans)
