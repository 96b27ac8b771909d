"""The package's structure: layers that import only downward, no import cycle, small
modules, no private names reached across packages; and old pickles still load.

The import graph is read from the source with ``ast``: every import counts, at module
level or inside a function, except those under ``if TYPE_CHECKING:``. ``from P import
name`` depends on the module ``P.name`` when that is a module, else on ``P`` itself.
The layers are those of ``docs/architecture.md``.
"""

from __future__ import annotations

import ast
import base64
import functools
import pickle
from pathlib import Path

import numpy as np
import pytest

import funcdiff as fd

PACKAGE = Path(fd.__file__).resolve().parent
MAX_LINES = 800

# The compatibility alias may hand out the pickle entry point it exists for.
ALLOWED_PRIVATE_IMPORTS = {("funcdiff._tensor", "funcdiff._core.tensor", "_rebuild")}

# The Tensor's former home, kept importable for old pickles; nothing in the package uses it.
COMPATIBILITY_ALIASES = {"funcdiff._tensor"}
KNOWN_ALIAS_USERS: set[str] = set()

#: Bottom first; a module may import its own layer and the layers below it only.
LAYERS = (
    ("funcdiff._core", "funcdiff._tensor"),
    ("funcdiff.ops", "funcdiff.autograd"),
    ("funcdiff._methods", "funcdiff.rules"),
    ("funcdiff._jacobian", "funcdiff._functional_args"),
    (
        "funcdiff.functional",
        "funcdiff.backends",
        "funcdiff.linalg",
        "funcdiff.special",
        "funcdiff.signal",
        "funcdiff.numpy",
        "funcdiff.stats",
        "funcdiff.sparse",
        "funcdiff.replay",
        "funcdiff.integrate",
        "funcdiff.func",
    ),
    ("funcdiff.check", "funcdiff.optimize", "funcdiff.testing"),
    ("funcdiff.cli", "funcdiff.__main__", "funcdiff"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _sources() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, module: str, modules: set[str]) -> list[tuple[str, str]]:
    """``(imported module, imported name or "")`` for each import outside TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((sub, "") if sub in modules else (base, alias.name))
    return [(m, name) for m, name in found if m in modules]


@functools.cache  # parsed once for all the tests (they only read it)
def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, str]]]]:
    sources = _sources()
    names = set(sources)
    imports = {m: _imports(p, m, names) for m, p in sources.items()}
    return {m: {t for t, _ in found if t != m} for m, found in imports.items()}, imports


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _layer(module: str) -> int:
    best, level = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), i
    assert level >= 0, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return level


def _subpackage(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _package_of(module: str) -> str:
    path = _sources()[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def test_the_checker_sees_a_cycle_and_a_type_checking_import_is_none() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    # graph.py names the Tensor only for annotations: no edge.
    edges, _ = _graph()
    assert "funcdiff._core.tensor" not in edges["funcdiff._core.graph"]
    # A function-local import counts (cli imports funcdiff inside its commands).
    assert "funcdiff" in edges["funcdiff.cli"]


def test_no_import_cycle() -> None:
    edges, _ = _graph()
    assert _cycles(edges) == []


def test_layers_import_only_downward() -> None:
    edges, _ = _graph()
    upward = [
        (m, t)
        for m, targets in edges.items()
        for t in targets
        if _layer(t) > _layer(m) and t not in COMPATIBILITY_ALIASES
    ]
    assert upward == []
    # ops and autograd are independent of each other.
    across = [
        (m, t)
        for m, targets in edges.items()
        for t in targets
        if {_subpackage(m), _subpackage(t)} == {"ops", "autograd"}
    ]
    assert across == []


def test_the_core_imports_only_the_core() -> None:
    edges, _ = _graph()
    for m, targets in edges.items():
        if m.startswith("funcdiff._core"):
            assert {t for t in targets if not t.startswith("funcdiff._core")} == set(), m


def test_compatibility_aliases_serve_only_known_users() -> None:
    edges, _ = _graph()
    users = {
        m for m, targets in edges.items() if targets & COMPATIBILITY_ALIASES
    } - COMPATIBILITY_ALIASES
    assert users <= KNOWN_ALIAS_USERS


def test_no_module_over_the_line_limit() -> None:
    long = {
        str(p.relative_to(PACKAGE.parent))
        for p in PACKAGE.rglob("*.py")
        if p.read_text().count("\n") > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {sorted(long)}"


def test_no_private_name_imported_across_packages() -> None:
    _, imports = _graph()
    reached = {
        (m, target, name)
        for m, found in imports.items()
        for target, name in found
        if name.startswith("_")
        and not name.startswith("__")
        and _package_of(target) != _package_of(m)
    }
    assert reached - ALLOWED_PRIVATE_IMPORTS == set()


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_module_imported_across_packages() -> None:
    # ``funcdiff.replay._tracer`` is replay's own: another package (sparse) uses what
    # replay makes public (``funcdiff.replay.program``). A private module of the top
    # package (``funcdiff._jacobian``) serves the whole package.
    _, imports = _graph()
    reached = set()
    for m, found in imports.items():
        for target, _name in found:
            owner = target.rpartition(".")[0]
            if _is_private(target.rpartition(".")[2]) and not (
                m == owner or m.startswith(owner + ".")
            ):
                reached.add((m, target))
    assert reached == set()


def _module_attributes(
    source: str, module: str, package: str, modules: set[str]
) -> list[tuple[str, str, int]]:
    """``(module, attribute, line)`` for every ``name.attribute`` read where ``name`` is
    bound to a funcdiff module (``from funcdiff._core import grad_mode``,
    ``import funcdiff.ops.dispatch as dispatch``, ``funcdiff.replay._tracer``)."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    bound[alias.asname] = alias.name
                elif not alias.asname and alias.name.split(".")[0] == "funcdiff":
                    bound["funcdiff"] = "funcdiff"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"

    def resolve(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return bound.get(expr.id)
        if isinstance(expr, ast.Attribute):
            outer = resolve(expr.value)
            if outer is not None and f"{outer}.{expr.attr}" in modules:
                return f"{outer}.{expr.attr}"
        return None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            target = resolve(node.value)
            if target is not None:
                found.append((target, node.attr, node.lineno))
    return found


def test_no_private_module_attribute_reached_across_packages() -> None:
    # ``grad_mode._state`` from ops was such a reach: what another package needs is
    # public in its module (``grad_mode.thread_state``, ``tracing.current_tracer``).
    sources = _sources()
    modules = set(sources)
    reached = {
        (m, f"{target}.{attr}", line)
        for m, path in sources.items()
        for target, attr, line in _module_attributes(path.read_text(), m, _package_of(m), modules)
        if _is_private(attr) and _package_of(target) != _package_of(m)
    }
    assert reached == set()


#: The packages that own the Tensor's private state: the core defines it, the
#: operations and the engine build and rebase graphs with it, ``_methods`` installs the
#: operators. Everything else uses the public API (``requires_grad``, ``gradient_edge``).
TENSOR_STATE_OWNERS = ("funcdiff._core", "funcdiff.ops", "funcdiff.autograd", "funcdiff._methods")


def test_the_tensors_private_state_stays_with_its_owners() -> None:
    private = {n for n in fd.Tensor.__slots__ if _is_private(n)} | {
        n for n in vars(fd.Tensor) if _is_private(n)
    }
    reached = set()
    for m, path in _sources().items():
        if any(m == o or m.startswith(o + ".") for o in TENSOR_STATE_OWNERS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in private:
                reached.add((m, node.attr, node.lineno))
    assert reached == set()


def test_the_checks_see_a_private_reach() -> None:
    modules = set(_sources())
    # The same reading, on a module that reaches in (as sparse once did).
    source = (
        "from funcdiff._core import grad_mode\n"
        "import funcdiff.replay._tracer as tracer_module\n"
        "x = grad_mode._state.tracer\n"
        "y = grad_mode.thread_state\n"
        "z = tracer_module.CALL\n"
    )
    found = _module_attributes(source, "funcdiff.sparse._probe", "funcdiff.sparse", modules)
    assert ("funcdiff._core.grad_mode", "_state", 3) in found
    assert ("funcdiff.replay._tracer", "CALL", 5) in found
    assert not any(attr == "thread_state" and _is_private(attr) for _, attr, _ in found)


def test_tensor_has_its_operators_from_the_method_table() -> None:
    from funcdiff import _methods

    for name in ("__add__", "__radd__", "__iadd__", "__eq__", "__getitem__", "backward"):
        method = getattr(fd.Tensor, name)
        assert method.__module__ == "funcdiff._methods", name
        assert method.__qualname__ == f"Tensor.{name}"
    x = fd.tensor([1.0, 2.0], requires_grad=True)
    y = 3.0 - x * x / 2.0
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, -x.data)
    assert y.grad_fn.name() == "SubtractBackward"
    # Installing again changes nothing.
    add = fd.Tensor.__add__
    _methods.install()
    assert (fd.tensor([1.0]) + 1.0).data.tolist() == [2.0]
    assert fd.Tensor.__add__.__qualname__ == add.__qualname__


# pickle.dumps((a, b), protocol=4) by funcdiff before the core moved (commit d4f627b), for
# a = fd.tensor([[1.5, -2.0], [0.25, 3.0]], requires_grad=True) and
# b = fd.tensor(np.arange(3, dtype=np.int32)); it names funcdiff._tensor._rebuild.
OLD_PICKLE = base64.b64decode(
    "gASVJQEAAAAAAACMEGZ1bmNkaWZmLl90ZW5zb3KUjAhfcmVidWlsZJSTlIwWbnVtcHkuX2NvcmUubXVsdGlh"
    "cnJheZSMDF9yZWNvbnN0cnVjdJSTlIwFbnVtcHmUjAduZGFycmF5lJOUSwCFlEMBYpSHlFKUKEsBSwJLAoaU"
    "aAaMBWR0eXBllJOUjAJmOJSJiIeUUpQoSwOMATyUTk5OSv////9K/////0sAdJRiiUMgAAAAAAAA+D8AAAAA"
    "AAAAwAAAAAAAANA/AAAAAAAACECUdJRiiIaUUpRoAmgFaAhLAIWUaAqHlFKUKEsBSwOFlGgPjAJpNJSJiIeU"
    "UpQoSwNoE05OTkr/////Sv////9LAHSUYolDDAAAAAABAAAAAgAAAJR0lGKJhpRSlIaULg=="
)


def test_a_pickle_written_before_the_move_loads() -> None:
    assert b"funcdiff._tensor" in OLD_PICKLE and b"_rebuild" in OLD_PICKLE
    a, b = pickle.loads(OLD_PICKLE)
    assert type(a) is fd.Tensor and type(b) is fd.Tensor
    np.testing.assert_array_equal(a.data, [[1.5, -2.0], [0.25, 3.0]])
    assert a.requires_grad and a.dtype == np.float64 and a.is_leaf
    np.testing.assert_array_equal(b.data, [0, 1, 2])
    assert not b.requires_grad and b.dtype == np.int32
    # The loaded leaf differentiates: d/da sum(a**2) = 2a.
    (a * a).sum().backward()
    np.testing.assert_array_equal(a.grad.data, 2 * a.data)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_pickle_round_trips(requires_grad: bool) -> None:
    t = fd.tensor([0.5, -1.0], requires_grad=requires_grad)
    u = pickle.loads(pickle.dumps(t))
    np.testing.assert_array_equal(u.data, t.data)
    assert u.requires_grad is requires_grad and u.data is not t.data
