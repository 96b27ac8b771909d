"""The type declarations of the Tensor match what ``funcdiff._methods`` installs.

The operators and methods are installed on the class at import (``setattr``), which a
type checker cannot follow; ``funcdiff/_core/tensor.py`` declares them for it in an
``if TYPE_CHECKING:`` block of the class. A row added to the operator table without
its declaration would be invisible to mypy (``x.new_method()`` an error for users), and
a declaration without an installed method would promise one that does not exist.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import FunctionType

import funcdiff
from funcdiff import Tensor

TENSOR_SOURCE = Path(funcdiff.__file__).parent / "_core" / "tensor.py"


def _declared_for_type_checkers() -> set[str]:
    """Names declared (annotated or defined) in the ``if TYPE_CHECKING:`` blocks of
    the Tensor class body."""
    tree = ast.parse(TENSOR_SOURCE.read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor"]
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.FunctionDef):
                    names.add(item.name)
    return names


def _installed() -> set[str]:
    """The Tensor attributes that ``funcdiff._methods`` installed."""
    return {
        name
        for name, value in vars(Tensor).items()
        if isinstance(value, FunctionType) and value.__module__ == "funcdiff._methods"
    }


def test_every_installed_method_is_declared_for_type_checkers() -> None:
    installed = _installed()
    assert {"__add__", "__radd__", "__iadd__", "__eq__", "backward", "exp"} <= installed
    assert installed - _declared_for_type_checkers() == set()


def test_every_declaration_is_installed() -> None:
    assert _declared_for_type_checkers() - _installed() == set()
