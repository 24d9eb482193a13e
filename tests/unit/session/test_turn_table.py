"""The turn core's transition table: what ``turns.py``'s docstring says is
what ``_TRANSITIONS`` does, every event is handled in every state (or named
stale), and an event the core does not know is refused, not ignored. And only
the core decides: the driver and the ports never write the core's state nor
look at a turn's state (h11's rule 1)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

import attrs
import pytest

from agybridge.session import turn_events as ev
from agybridge.session import turns
from agybridge.session.config import LaunchSettings
from agybridge.session.core_state import CoreError

PACKAGE = Path(turns.__file__).resolve().parents[1]
#: The core's own modules: the only ones that may decide on a turn's state.
CORE = {
    "turns.py",
    "outcomes.py",
    "supervision.py",
    "core_state.py",
    "turn_events.py",
}


def _docstring_table() -> dict[tuple[ev.TurnState | None, str], str]:
    doc = turns.__doc__ or ""
    block = doc.split("The table, row by row", 1)[1].split("::", 1)[1]
    rows = block.strip("\n").split("\n\n", 1)[0].splitlines()
    table: dict[tuple[ev.TurnState | None, str], str] = {}
    for row in rows:
        event, rest = row.split(maxsplit=1)
        # "A B: handler" groups, the last one "otherwise: handler".
        for states, handler in re.findall(r"([A-Z_ ]+?|otherwise):\s+(\w+)", rest):
            names = states.split()
            targets: list[ev.TurnState | None]
            if names == ["otherwise"]:
                named = {s for (s, e) in table if e == event}
                targets = [s for s in turns.STATES if s not in named]
            else:
                targets = [ev.TurnState[name] for name in names]
            for state in targets:
                table[(state, event)] = handler
    return table


def _code_table() -> dict[tuple[ev.TurnState | None, str], str]:
    return {
        (state, kind.__name__): handler.__name__.removeprefix("_")
        for (state, kind), handler in turns.STATE_DEPENDENT.items()
    }


def test_the_docstrings_table_is_the_code_table() -> None:
    assert _docstring_table() == _code_table()


def test_every_event_is_handled_in_every_state() -> None:
    for kind in get_args(ev.Event):
        for state in turns.STATES:
            assert (state, kind) in turns._TRANSITIONS, (state, kind.__name__)


def test_an_event_that_does_not_depend_on_the_state_has_one_handler() -> None:
    dependent = {kind for (_, kind) in turns.STATE_DEPENDENT}
    for kind in get_args(ev.Event):
        if kind not in dependent:
            handlers = {turns._TRANSITIONS[(state, kind)] for state in turns.STATES}
            assert len(handlers) == 1, kind.__name__


def test_an_unknown_event_is_refused_with_the_state_named() -> None:
    @attrs.frozen
    class Unheard:
        pass

    core = turns.TurnCore(LaunchSettings())
    core.start()
    with pytest.raises(CoreError, match="can't handle event Unheard when the turn is idle"):
        core.handle(Unheard())  # type: ignore[arg-type]


def _driver_modules() -> list[Path]:
    session = [p for p in (PACKAGE / "session").glob("*.py") if p.name not in CORE]
    return sorted(
        session + list((PACKAGE / "agent").glob("*.py")) + list((PACKAGE / "daemon").glob("*.py"))
    )


def _decisions_outside_the_core(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and _names_core(target.value):
                found.append(f"{path.name}:{getattr(node, 'lineno', 0)}: writes core.{target.attr}")
        if isinstance(node, ast.Attribute):
            if _names_core(node.value) and node.attr.startswith("_"):
                found.append(f"{path.name}:{getattr(node, 'lineno', 0)}: reads core.{node.attr}")
            if node.attr == "TurnState":
                found.append(f"{path.name}:{getattr(node, 'lineno', 0)}: looks at a turn's state")
        if isinstance(node, ast.Name) and node.id == "TurnState":
            found.append(f"{path.name}:{getattr(node, 'lineno', 0)}: looks at a turn's state")
        left = node.left if isinstance(node, ast.Compare) else None
        if isinstance(left, ast.Attribute) and left.attr == "state" and _is_turn(left.value):
            found.append(f"{path.name}:{getattr(node, 'lineno', 0)}: compares a turn's state")
    return found


def _names_core(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "core") or (
        isinstance(node, ast.Attribute) and node.attr == "core"
    )


def _is_turn(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and "turn" in node.id) or (
        isinstance(node, ast.Attribute) and "turn" in node.attr
    )


@pytest.mark.parametrize("module", _driver_modules(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_only_the_core_decides(module: Path) -> None:
    assert _decisions_outside_the_core(module) == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The check above can fail: each kind of crossing is found."""
    sample = tmp_path / "driver.py"
    sample.write_text(
        "session.core.gate = 1\n"
        "core.queue += [1]\n"
        "x = session.core._current\n"
        "if turn.state is TurnState.RUNNING: pass\n"
        "if work.turn.state == 'asking': pass\n"
    )
    assert len(_decisions_outside_the_core(sample)) == 6
