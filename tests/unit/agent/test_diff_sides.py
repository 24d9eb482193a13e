"""Diffs say what they know (issue 26): a file whose earlier content the bridge
never saw is ``"before": "unknown"`` with the change shown from the first
content it did see, never "binary"; only bytes that are not UTF-8 are binary."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from agybridge.agent import commands, extensions
from agybridge.translate.diffs import Unknown, unified
from agybridge.workspace.mutations import MutationLog


def _log(root: Path) -> MutationLog:
    return MutationLog(None, "s", (str(root),), lambda: 1)


async def _diff(log: MutationLog) -> dict[str, Any]:
    return await extensions.diff_of(log, turn=None, since=None, path=None)


async def test_an_unseen_before_is_unknown_and_the_diff_starts_where_the_bridge_looked(
    tmp_path: Path,
) -> None:
    log = _log(tmp_path)
    target = tmp_path / "notes.txt"
    target.write_text("one\n")  # agy wrote it before the bridge could look
    await log.step_done(1, str(target), "write_to_file", "call-1")
    await log.note_before(2, str(target))
    target.write_text("two\n")
    await log.step_done(2, str(target), "write_to_file", "call-2")
    (found,) = (await _diff(log))["files"]
    assert found["before"] == "unknown" and found["binary"] is False
    assert "-one\n+two\n" in found["diff"]
    # What /diff shows a person.
    shown = await commands._diff(cast(Any, SimpleNamespace(mutations=log)), "")
    assert f"`{target}`: its content before agy's first change is unknown" in shown
    assert "-one\n+two" in shown and "binary" not in shown


async def test_a_single_unseen_change_is_unknown_not_binary(tmp_path: Path) -> None:
    log = _log(tmp_path)
    target = tmp_path / "notes.txt"
    target.write_text("text\n")
    await log.step_done(1, str(target), "write_to_file", "call-1")
    (found,) = (await _diff(log))["files"]
    assert (found["before"], found["binary"], found["diff"]) == ("unknown", False, "")


async def test_bytes_that_are_not_text_are_binary(tmp_path: Path) -> None:
    log = _log(tmp_path)
    target = tmp_path / "blob.bin"
    target.write_bytes(b"\x00\xff")
    await log.note_before(1, str(target))
    target.write_bytes(b"\xfe\x00")
    await log.step_done(1, str(target), "write_to_file", "call-1")
    (found,) = (await _diff(log))["files"]
    assert found["binary"] is True and "before" not in found and found["diff"] == ""


def test_sides_say_what_is_unknown() -> None:
    assert unified("/f", Unknown.UNSEEN, "x")["before"] == "unknown"
    assert unified("/f", "x", Unknown.UNSEEN)["after"] == "unknown"
    seen = unified("/f", "a\n", "b\n", before_unseen=True)
    assert seen["before"] == "unknown" and "-a\n+b\n" in seen["diff"]
    assert "before" not in unified("/f", "a\n", "b\n")
