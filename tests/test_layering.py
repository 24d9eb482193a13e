"""The architecture's layering is what the code does (architecture.md):
``cli → server → agent → session → {workspace → translate} → {agy, permissions, store}``, with
``jsonrpc``, ``acp``, ``lines``, ``locks``, ``media``, ``procfs``, ``watchdog`` and ``causes``
as leaves every layer may use.
A lower layer never imports a higher one; the three lower packages do not
import each other; the leaves import only leaves. Checked on the source's
import statements (including function-local and TYPE_CHECKING ones)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agybridge"
#: ``procfs`` (process ownership primitives), ``watchdog`` (run without
#: site-packages) are stdlib-only leaves: agy and permissions share them.
LEAVES = {
    "jsonrpc",
    "acp",
    "lines",
    "locks",
    "pipes",
    "media",
    "procfs",
    "watchdog",
    "lazy",
    "causes",
    "logs",  # logging set-up and the session tag: standard library only
}
LOWER = {"agy", "permissions", "store"}
#: The two hosts: each is the host (host/) with its own clients, never built
#: on the other.
HOSTS = {"server", "daemon"}
#: Layer rank; a module may import its own rank or lower (leaves: rank 0).
RANK = {
    **dict.fromkeys(LEAVES, 0),
    **dict.fromkeys(LOWER, 1),
    #: Pure agy stream-json -> ACP translation: reads agy's event models and the
    #: store's journal entries, nothing with I/O.
    "translate": 2,
    #: The session's files on disk (staging, MCP config, skills, snapshots,
    #: mutations, root-checked reads): may use translate's tool catalogue.
    "workspace": 3,
    "session": 4,
    "agent": 5,
    #: A bridge process's host: its clients, housekeeping and shutdown, the
    #: same for the stdio bridge and the daemon (both built on it).
    "host": 6,
    "server": 7,  # the stdio bridge: the host with one client
    "config": 6,  # the settings server and cli read (session defaults inside)
    "daemon": 7,  # the workstation supervisor: the host with a client per connection
    # attach/status/stop: standard library only (tests/test_daemon_light.py),
    # so it imports no other unit, and the daemon may share its socket paths.
    "attach": 0,
    "doctor": 6,  # setup checks: the cli runs them, the server answers /doctor with them
}
#: The entry points and their helpers sit on top.
TOP = 7
#: The fake agy is a separate program: it may use only the leaves.
SEPARATE = {"testing": 0}
#: Clients of the bridge (on top, beside cli): they speak ACP to a bridge process, so
#: they may use the leaves, agy's stderr classifier and the demo's fake-agy finder only.
CLIENTS = {"smoke": LEAVES | {"agy", "demo"}}


def _unit(module: Path) -> str:
    """The layer unit of a module: its top-level package or module name."""
    rel = module.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _rank(unit: str) -> int:
    return RANK.get(unit, SEPARATE.get(unit, TOP))


def _imported_units(module: Path) -> set[str]:
    tree = ast.parse(module.read_text(), str(module))
    depth = len(module.relative_to(PACKAGE).parts) - 1  # packages above the module
    units: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "agybridge" and len(parts) > 1:
                    units.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] == "agybridge":
                    if len(parts) > 1:
                        units.add(parts[1])
                    else:
                        units.update(alias.name for alias in node.names)
            elif node.level > depth:  # reaches the package root: another unit
                if node.module:
                    units.add(node.module.split(".")[0])
                else:
                    units.update(alias.name for alias in node.names)
    return units


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layers(module: Path) -> None:
    own = _unit(module)
    if own == "__init__":
        return  # the package's own version only
    problems = []
    for unit in sorted(_imported_units(module) - {own, "__version__"}):
        if own in CLIENTS and unit not in CLIENTS[own]:
            problems.append(f"{own} is a client of the bridge: it must not import {unit}")
        elif unit in SEPARATE or (own in SEPARATE and unit not in LEAVES):
            problems.append(f"{own} and {unit} must not import each other")
        elif own in HOSTS and unit in HOSTS:
            problems.append(f"{own} and {unit} are both built on host/, not on each other")
        elif own in LOWER and unit in LOWER:
            problems.append(f"{own} imports its sibling {unit}")
        elif _rank(unit) > _rank(own):
            problems.append(f"{own} (rank {_rank(own)}) imports {unit} (rank {_rank(unit)})")
    assert not problems, problems


def test_the_layer_table_knows_every_package() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    known = set(RANK) | set(SEPARATE) | set(CLIENTS)
    assert packages <= known, packages - known
