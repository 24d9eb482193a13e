"""The package's shape: no module over 450 lines, no import cycles (architecture.md).

Checked on the source, as tests/test_layering.py checks the layers: every
``import`` statement of every module counts, module-level, function-local (it
only delays the cycle to the first call) and under ``if TYPE_CHECKING:`` (two
modules that need each other's types cannot be read, tested or moved apart
either; moving an import there hides a cycle from the interpreter, not from
the reader). A lazy face (agybridge/lazy.py) names the modules it loads in its
TYPE_CHECKING block (tests/test_lazy_faces.py), so its arrows count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agybridge"
MAX_LINES = 450

#: Known offenders, to be emptied by the work on their packages (issue 25).
#: Each module here is over the limit today; the test fails once it is not
#: (then remove it), and for any other module over the limit.
TOO_LONG_FOR_NOW: set[str] = set()
#: Known import cycles (each a set of modules that import each other, directly
#: or through the others), to be broken by the work on their packages
#: (issue 25). A cycle found must lie within one of these; an entry that no
#: longer holds a cycle fails the test (then remove it).
CYCLES_FOR_NOW: list[set[str]] = []


def _module_name(path: Path) -> str:
    """``acp.models`` for agybridge/acp/models.py, ``acp`` for its __init__."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {
    _module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts
}


def _package_of(name: str, path: Path) -> list[str]:
    """The dotted package a module's relative imports start from."""
    parts = name.split(".") if name else []
    return parts if path.name == "__init__.py" else parts[:-1]


def _resolve(base: list[str], level: int, module: str | None) -> list[str] | None:
    """The dotted name (below agybridge) a relative import names; None outside."""
    if level > len(base) + 1:
        return None
    anchor = base[: len(base) - (level - 1)] if level else []
    return anchor + (module.split(".") if module else [])


def _targets(dotted: list[str], names: list[str]) -> set[str]:
    """The modules ``from <dotted> import <names>`` takes something from: a
    name that is a submodule is that module, any other name comes from
    ``<dotted>`` itself (``import <dotted>``: no names). As import-linter
    counts: the parent packages every import also runs are not arrows."""
    base = ".".join(dotted)
    found: set[str] = set()
    for name in names:
        sub = f"{base}.{name}" if base else name
        if sub in MODULES:
            found.add(sub)
        elif base in MODULES:
            found.add(base)
    if not names and base in MODULES:
        found.add(base)
    return found


def imports_of(name: str) -> set[str]:
    """The agybridge modules ``name`` imports when it runs (see the docstring)."""
    path = MODULES[name]
    base = _package_of(name, path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "agybridge":
                    found |= _targets(parts[1:], [])
        elif isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] == "agybridge":
                    found |= _targets(parts[1:], names)
            else:
                dotted = _resolve(base, node.level, node.module)
                if dotted is not None:
                    found |= _targets(dotted, names)
    return found - {name}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def test_no_import_cycles_but_the_known_ones() -> None:
    found = cycles(GRAPH)
    unknown = [
        sorted(cycle) for cycle in found if not any(cycle <= allowed for allowed in CYCLES_FOR_NOW)
    ]
    assert not unknown, f"import cycles: {unknown}"
    stale = [
        sorted(allowed)
        for allowed in CYCLES_FOR_NOW
        if not any(cycle <= allowed for cycle in found)
    ]
    assert not stale, f"no longer cycles: remove them from CYCLES_FOR_NOW: {stale}"


@pytest.mark.parametrize("name", sorted(MODULES), ids=str)
def test_module_size(name: str) -> None:
    path = MODULES[name]
    rel = path.relative_to(PACKAGE).as_posix()
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if rel in TOO_LONG_FOR_NOW:
        assert lines > MAX_LINES, f"{rel} has {lines} lines: remove it from TOO_LONG_FOR_NOW"
    else:
        assert lines <= MAX_LINES, f"{rel} has {lines} lines (at most {MAX_LINES})"


def test_the_cycle_finder_finds_cycles() -> None:
    """The check above can fail: a cycle through three modules is found, a
    module that only imports into one is not part of it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_are_resolved() -> None:
    """Relative, absolute, package and TYPE_CHECKING imports land on modules."""
    assert "acp.meta" in GRAPH["acp.models"]  # from .meta import Meta
    assert "acp.session_models" in GRAPH["acp.models"]  # the lazy face, under TYPE_CHECKING
    assert "acp.models" in GRAPH["acp.chunks"]  # from . import models
    assert "lines" in GRAPH["jsonrpc.peer"]  # from ..lines import ...
