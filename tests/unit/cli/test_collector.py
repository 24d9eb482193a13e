"""The garbage collector around start-up: ``__main__`` turns it off while serving's
modules load (issue 15); it is on again before serving starts and for every other
command, and the cycles start-up left are freed once initialize is answered."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator

import pytest

from agybridge import __main__ as entry
from agybridge import cli, server
from agybridge.config import Settings


@pytest.fixture
def collector_restored() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


def test_serving_starts_with_the_collector_on_and_start_up_frozen(
    monkeypatch: pytest.MonkeyPatch, collector_restored: None
) -> None:
    seen: dict[str, object] = {}

    def run(settings: Settings) -> int:
        seen.update(enabled=gc.isenabled(), frozen=gc.get_freeze_count())
        return 0

    monkeypatch.setattr(server, "run", run)
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)
    monkeypatch.setenv("AGYBRIDGE_LOG_FILE", "")
    gc.disable()  # as __main__ does
    with pytest.raises(SystemExit) as exited:
        cli.main([])
    assert exited.value.code == 0
    assert seen["enabled"] is True
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 0


def test_other_commands_run_with_the_collector_on(
    collector_restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    gc.disable()  # as __main__ does
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert gc.isenabled()
    assert "agybridge" in capsys.readouterr().out


def test_start_up_garbage_is_freed_after_initialize(collector_restored: None) -> None:
    """Cycles made with the collector off and frozen with the rest of start-up."""
    gc.disable()

    class Node:
        other: object = None

    node = Node()
    node.other = node  # a cycle: only the collector frees it
    gone = weakref.ref(node)
    del node
    gc.freeze()
    gc.collect()
    assert gone() is not None  # frozen: a plain collection leaves it
    server.collect_start_up_garbage()
    assert gone() is None
    assert gc.get_freeze_count() > 0  # the rest of start-up stays frozen


def test_the_entry_point_turns_the_collector_off_for_cli(
    monkeypatch: pytest.MonkeyPatch, collector_restored: None
) -> None:
    seen: list[bool] = []
    monkeypatch.setattr(cli, "main", lambda argv=None: seen.append(gc.isenabled()))
    monkeypatch.setattr(sys, "argv", ["agybridge"])
    entry.main()
    assert seen == [False]
