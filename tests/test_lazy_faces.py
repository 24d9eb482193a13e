"""The lazy package faces (agybridge/lazy.py) name the same things twice: under
``TYPE_CHECKING`` for mypy and readers, and in the table ``exports`` loads from.
Both lists must agree, and every name must load."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agybridge"
#: Every module that is a lazy face, as a dotted name below agybridge.
FACES = sorted(
    ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
    for p in PACKAGE.rglob("*.py")
    if "__getattr__ = exports(" in p.read_text(encoding="utf-8")
)


def _source(face: str) -> str:
    path = PACKAGE.joinpath(*face.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return path.read_text(encoding="utf-8")


def _declared(tree: ast.Module) -> set[tuple[str, str]]:
    """(".module", name) for every ``from .module import name as name`` under TYPE_CHECKING."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.level == 1, ast.unparse(stmt)
                for alias in stmt.names:
                    assert alias.asname == alias.name, ast.unparse(stmt)  # a re-export
                    found.add((f".{stmt.module}", alias.name))
    return found


def _table(tree: ast.Module) -> set[tuple[str, str]]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__getattr__":
            assert isinstance(node.value, ast.Call)
            table = ast.literal_eval(node.value.args[1])
            return {(module, name) for module, names in table.items() for name in names}
    raise AssertionError("no `__getattr__ = exports(...)`")


def test_the_lazy_faces_are_found() -> None:
    assert {"acp.models", "agy", "permissions", "session", "store"} <= set(FACES)


@pytest.mark.parametrize("package", FACES)
def test_declared_names_are_the_loaded_names(package: str) -> None:
    """What mypy sees is exactly what the package loads on first use."""
    tree = ast.parse(_source(package))
    declared, table = _declared(tree), _table(tree)
    assert declared == table
    module = importlib.import_module(f"agybridge.{package}")
    for _, name in sorted(table):
        assert getattr(module, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    session = importlib.import_module("agybridge.session")
    with pytest.raises(AttributeError, match=r"'agybridge\.session' has no attribute 'Nope'"):
        _ = session.Nope
