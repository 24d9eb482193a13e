"""The mutation log without agy: snapshots, provenance, rollback plans, diffs
and history pages (real files in tmp_path; a store where its persistence is tested)."""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from agybridge.agent import extensions
from agybridge.agent.history_pages import page
from agybridge.jsonrpc import RpcError
from agybridge.store import (
    BLOB_KEY,
    MUTATION_LOG_KEY,
    AsyncStore,
    JournalEntry,
    SessionRecord,
    Store,
)
from agybridge.translate.diffs import Side, Unknown, unified
from agybridge.workspace.changes import Mutation
from agybridge.workspace.mutations import MutationLog
from agybridge.workspace.rollback import RollbackRefused, _put
from agybridge.workspace.snapshots import MAX_SNAPSHOT_FILE_BYTES, Snapshot, read_snapshot


class Turns:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def make_log(root: Path) -> tuple[MutationLog, Turns]:
    turns = Turns()
    return MutationLog(None, "s", (str(root),), turns), turns


def _write(path: Path, data: bytes | None) -> None:
    if data is None:
        path.unlink()
    else:
        path.write_bytes(data)


async def agy_writes(log: MutationLog, step: int, path: Path, data: bytes | None) -> None:
    """What the session sees for one edit step: the hook (before), the write, DONE."""
    await log.note_before(step, str(path))
    _write(path, data)
    await log.step_done(step, str(path), "write_to_file", f"call-{step}")


def test_snapshots_are_content_addressed_and_bounded(tmp_path: Path) -> None:
    small = tmp_path / "a"
    small.write_bytes(b"x")
    snap, data = read_snapshot(str(small)) or (None, None)
    assert snap == Snapshot.of_bytes(b"x") and data == b"x"
    big = tmp_path / "big"
    big.write_bytes(b"y" * (MAX_SNAPSHOT_FILE_BYTES + 1))
    snap, data = read_snapshot(str(big)) or (None, None)
    assert snap is not None and snap.size == MAX_SNAPSHOT_FILE_BYTES + 1 and data is None
    assert read_snapshot(str(tmp_path / "none")) == (Snapshot.absent(), None)
    assert read_snapshot(str(tmp_path)) is None  # a directory is not a file


async def test_rollback_restores_bytes_and_is_itself_undoable(tmp_path: Path) -> None:
    log, turns = make_log(tmp_path)
    target = tmp_path / "f.bin"
    target.write_bytes(b"\x00original\xff")
    await agy_writes(log, 1, target, b"turn0")
    turns.now = 1
    await agy_writes(log, 2, target, b"turn1")
    created = tmp_path / "new.txt"
    await agy_writes(log, 3, created, b"made in turn 1")
    assert [m.kind for m in log.entries] == ["modified", "modified", "created"]

    plan = await log.rollback(1, force=False, dry_run=False)
    assert {r.path: r.action for r in plan} == {str(target): "restore", str(created): "delete"}
    assert target.read_bytes() == b"turn0" and not created.exists()
    assert log.take_agy_note() is not None and log.take_agy_note() is None

    turns.now = 2
    await log.rollback(0, force=False, dry_run=False)
    assert target.read_bytes() == b"\x00original\xff"
    assert log.undo_target() is None  # everything agy did is undone


async def test_provenance_and_refusal(tmp_path: Path) -> None:
    log, _ = make_log(tmp_path)
    target = tmp_path / "f.txt"
    await agy_writes(log, 1, target, b"agy\n")
    target.write_bytes(b"user\n")  # someone else, after agy
    listed = await log.with_provenance()
    assert [changed for _, changed in listed] == [True]
    with pytest.raises(RollbackRefused) as refused:
        await log.rollback(0, force=False, dry_run=False)
    assert [r.conflict for r in refused.value.plan] == [True]
    assert target.read_bytes() == b"user\n"
    dry = await log.rollback(0, force=True, dry_run=True)
    assert [r.action for r in dry] == ["delete"] and target.exists()
    await log.rollback(0, force=True, dry_run=False)
    assert not target.exists()


async def test_a_write_whose_before_was_never_seen_cannot_be_rolled_back(tmp_path: Path) -> None:
    log, _ = make_log(tmp_path)
    target = tmp_path / "f.txt"
    target.write_bytes(b"agy wrote this before we looked")
    await log.step_done(7, str(target), "write_to_file", None)
    assert [m.kind for m in log.entries] == ["written"]
    with pytest.raises(RollbackRefused, match="was not kept"):
        await log.rollback(0, force=True, dry_run=False)


async def test_files_outside_the_roots_are_not_recorded(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    log, _ = make_log(root)
    outside = tmp_path / "outside.txt"
    await agy_writes(log, 1, outside, b"x")
    assert log.entries == []


async def test_undo_walks_back_one_turn_at_a_time(tmp_path: Path) -> None:
    log, turns = make_log(tmp_path)
    target = tmp_path / "f.txt"
    for turn in range(3):
        turns.now = turn
        await agy_writes(log, turn, target, f"v{turn}".encode())
    turns.now = 3
    assert log.undo_target() == 2
    await log.rollback(2, force=False, dry_run=False)
    assert target.read_bytes() == b"v1"
    assert log.undo_target() == 1
    await log.rollback(1, force=False, dry_run=False)
    assert target.read_bytes() == b"v0"
    # agy edits again after the undo: /undo takes that turn back first.
    turns.now = 4
    await agy_writes(log, 9, target, b"v4")
    assert log.undo_target() == 4
    await log.rollback(4, force=False, dry_run=False)
    assert target.read_bytes() == b"v0"


@given(
    before=st.lists(st.sampled_from(["a", "b", "c", ""]), max_size=6),
    after=st.lists(st.sampled_from(["a", "b", "d", ""]), max_size=6),
)
def test_hunks_rebuild_the_new_text(before: list[str], after: list[str]) -> None:
    """Applying the structured hunks to the old lines gives the new lines."""
    old = "".join(line + "\n" for line in before)
    new = "".join(line + "\n" for line in after)
    diff = unified("/f", old, new)
    lines = old.splitlines()
    result: list[str] = []
    cursor = 0
    for hunk in diff["hunks"]:
        start = hunk["oldStart"] - 1 if hunk["oldLines"] else hunk["oldStart"]
        result += lines[cursor:start]
        cursor = start
        for line in hunk["lines"]:
            if line["type"] in ("context", "add"):
                result.append(line["text"])
            if line["type"] in ("context", "remove"):
                cursor += 1
    result += lines[cursor:]
    assert result == new.splitlines()
    assert (diff["diff"] == "") == (old == new)


@given(
    before=st.lists(st.sampled_from(["a", "b\x0cb", "c\u2028", "\r"]), min_size=1, max_size=6),
    after=st.lists(st.sampled_from(["a", "b\x0cb", "d\x85d", "\r"]), min_size=1, max_size=6),
)
def test_lines_are_split_at_newlines_only(before: list[str], after: list[str]) -> None:
    """A file's lines are what ``\n`` ends, as for diff(1) and git: a form
    feed, a carriage return or a Unicode line separator inside a line is
    text. (str.splitlines split there: the diff said "No newline at end of
    file" in the middle of the file, and its hunks did not match the file.)"""
    old = "".join(line + "\n" for line in before)
    new = "".join(line + "\n" for line in after)
    diff = unified("/f", old, new)
    assert "No newline at end of file" not in diff["diff"]
    for hunk in diff["hunks"]:
        assert hunk["oldLines"] == sum(x["type"] != "add" for x in hunk["lines"])
        assert hunk["newLines"] == sum(x["type"] != "remove" for x in hunk["lines"])
        for line in hunk["lines"]:
            source = after if line["type"] == "add" else before
            assert line["text"] in source


def test_binary_sides_have_no_diff() -> None:
    binary = unified("/f", Unknown.BINARY, "x")
    assert binary == {"path": "/f", "binary": True, "diff": "", "hunks": []}


async def test_diffs_are_computed_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/diff`` and ``_agybridge/session/diff`` run difflib in a worker thread:
    on two 1 MiB files of repeated lines it takes a minute, which on the event
    loop stalled every session of the bridge."""
    log, _ = make_log(tmp_path)
    target = tmp_path / "f.txt"
    target.write_bytes(b"one\n")
    await agy_writes(log, 1, target, b"two\n")
    threads: list[int] = []

    def recording(path: str, before: Side, after: Side, **flags: bool) -> dict[str, Any]:
        threads.append(threading.get_ident())
        return unified(path, before, after, **flags)

    monkeypatch.setattr(extensions, "unified", recording)
    result = await extensions.diff_of(log, turn=None, since=None, path=None)
    assert "-one\n+two\n" in result["diff"]
    assert len(threads) == 1 and threads[0] != threading.get_ident()


def test_history_cursor_pages_and_rejects_foreign_cursors() -> None:
    first = page([], [], None, 1)
    assert first == {"entries": [], "nextCursor": None}
    for bad in ("zzz", "aDE6LTE=", ""):
        with pytest.raises(RpcError):
            page([], [], bad, None)
    with pytest.raises(RpcError):
        page([], [], None, 0)


def test_history_pages_stay_whole_when_a_turn_is_journalled_between_pages() -> None:
    """A turn's mutations are listed while it runs; its journal lines arrive
    when it ends and sort before them. A client paging meanwhile still gets
    every entry exactly once (an offset cursor skipped one line and repeated
    the mutation)."""
    snapshot = Snapshot.of_bytes(b"x")
    mutations = [
        (Mutation(seq, 1, f"/ws/{seq}", Snapshot.absent(), snapshot, "agy"), False)
        for seq in (0, 1)
    ]

    def line(turn: int, index: int) -> JournalEntry:
        return JournalEntry(
            "s", turn, index, "user" if index == 0 else "agent", text=f"{turn}.{index}"
        )

    earlier = [line(0, 0), line(0, 1)]
    first = page(earlier, mutations, None, 3)
    later = [*earlier, line(1, 0), line(1, 1)]
    rest = page(later, mutations, first["nextCursor"], 10)
    seen = [e.get("text") or e["mutation"]["path"] for e in (*first["entries"], *rest["entries"])]
    assert sorted(seen) == ["/ws/0", "/ws/1", "0.0", "0.1", "1.0", "1.1"], seen


@pytest.mark.parametrize("earlier", [b"before\n", None])
async def test_forced_rollback_of_a_file_replaced_by_a_directory(
    tmp_path: Path, earlier: bytes | None
) -> None:
    """A file agy wrote that is now a directory cannot be restored: the rollback
    refuses (force or not) naming it, and changes nothing, not even the other
    files, and leaves no temporary file behind."""
    log, _ = make_log(tmp_path)
    other = tmp_path / "a.txt"
    other.write_bytes(b"a before\n")
    await agy_writes(log, 1, other, b"a by agy\n")
    target = tmp_path / "z.txt"
    if earlier is not None:
        target.write_bytes(earlier)
    await agy_writes(log, 2, target, b"z by agy\n")
    target.unlink()
    target.mkdir()  # someone replaced the file by a directory
    (target / "inside").write_bytes(b"keep")
    with pytest.raises(RollbackRefused) as refused:
        await log.rollback(0, force=True, dry_run=False)
    assert str(target) in str(refused.value)
    assert other.read_bytes() == b"a by agy\n"
    assert (target / "inside").read_bytes() == b"keep"
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "z.txt"]


def test_a_failed_restore_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The file could not be replaced (here: a directory appeared since the
    plan was made): the error is raised and the temporary file is removed."""
    target = tmp_path / "z.txt"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        _put(str(target), b"restored")
    assert [p.name for p in tmp_path.iterdir()] == ["z.txt"]


async def test_two_rollbacks_at_once_restore_each_file_once(tmp_path: Path) -> None:
    """A client sending the same rollback twice without waiting: the second sees
    the files already restored; the log holds one rollback per file and no
    change made by nobody (changedAfter stays false)."""
    log, turns = make_log(tmp_path)
    files = [tmp_path / name for name in ("a.txt", "b.txt")]
    for step, path in enumerate(files):
        path.write_bytes(b"before\n")
        await agy_writes(log, step, path, b"agy\n")
    turns.now = 1
    async with trio.open_nursery() as nursery:
        for _ in range(2):
            nursery.start_soon(functools.partial(log.rollback, 0, force=False, dry_run=False))
    assert [p.read_bytes() for p in files] == [b"before\n", b"before\n"]
    assert [m.source for m in log.entries] == ["agy", "agy", "rollback", "rollback"]
    assert [changed for _, changed in await log.with_provenance()] == [False] * 4


def _stored_meta(db: Path) -> dict[str, Any]:
    with Store.open(db) as store, contextlib.closing(sqlite3.connect(db)) as conn:
        return {key: store.meta_get(key) for (key,) in conn.execute("SELECT key FROM meta")}


async def test_a_log_deleted_by_another_process_is_not_written_back(tmp_path: Path) -> None:
    """A live session whose row another process deleted (``agybridge sessions
    delete``) keeps recording in memory, but its later saves write neither its
    log nor its snapshots back: the delete removed them and it wins."""
    db, root = tmp_path / "agybridge.db", tmp_path / "ws"
    root.mkdir()
    with Store.open(db) as other:
        other.upsert_session(SessionRecord(session_id="s", cwd=str(root)))
        with Store.open(db) as live:
            log = MutationLog(AsyncStore(live), "s", (str(root),), Turns())
            await agy_writes(log, 1, root / "f.txt", b"first")
            assert MUTATION_LOG_KEY + "s" in _stored_meta(db)
            assert other.delete_session("s")
            await agy_writes(log, 2, root / "f.txt", b"second")
            assert len(log.entries) == 2
    assert not any(k.startswith((MUTATION_LOG_KEY, BLOB_KEY)) for k in _stored_meta(db))


async def test_every_stored_snapshot_is_one_its_stored_log_refers_to(tmp_path: Path) -> None:
    """A snapshot kept before agy wrote (its step not done yet) is stored only
    with the log entry that refers to it: stored earlier, unreferenced, a
    delete of another session would drop it and the step's rollback would
    find it missing after a restart."""
    db, root = tmp_path / "agybridge.db", tmp_path / "ws"
    root.mkdir()
    slow, quick = root / "slow.txt", root / "quick.txt"
    slow.write_bytes(b"slow before")
    with Store.open(db) as other:
        for session_id in ("s", "gone"):
            other.upsert_session(SessionRecord(session_id=session_id, cwd=str(root)))
        with Store.open(db) as live:
            log = MutationLog(AsyncStore(live), "s", (str(root),), Turns())
            await log.note_before(1, str(slow))  # agy asked to write it; not done yet
            await agy_writes(log, 2, quick, b"quick")
            assert other.delete_session("gone")
            slow.write_bytes(b"slow after")
            await log.step_done(1, str(slow), "write_to_file", "call-1")
        with Store.open(db) as reopened:
            restarted = MutationLog(AsyncStore(reopened), "s", (str(root),), Turns())
            plan = await restarted.rollback(0, force=False, dry_run=False)
    assert {Path(r.path).name: r.action for r in plan} == {
        "slow.txt": "restore",
        "quick.txt": "delete",
    }
    assert slow.read_bytes() == b"slow before" and not quick.exists()
