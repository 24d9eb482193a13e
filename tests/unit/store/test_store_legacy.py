"""The one-time import of an agy-acp-map installation (tests/data/agy_acp_map, hand-written)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agybridge.store import (
    IMPORT_FLAG,
    ImportReport,
    JournalEntry,
    SessionRecord,
    Store,
    import_agy_acp_map,
)

from ...conftest import DATA_DIR

FIXTURE = DATA_DIR / "agy_acp_map"
#: The sessions file's mtime in these tests: the fallback for missing timestamps.
MTIME = 1_773_000_000  # 2026-03-08T20:00:00Z
MTIME_STAMP = "2026-03-08T20:00:00.000000Z"

FULL = "3f2a1c9e-8d4b-4e1a-9c2f-0b1d2e3f4a5b"
UNTITLED = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
V2 = "e1f2a3b4-0000-4000-8000-000000000002"
WINDOWS = "d4c3b2a1-1111-4111-8111-111111111111"


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    root = tmp_path / "agy-acp-map"
    shutil.copytree(FIXTURE, root)
    os.utime(root / "sessions.json", (MTIME, MTIME))
    return root


@pytest.fixture
def store() -> Iterator[Store]:
    with Store.open_memory() as opened:
        yield opened


def run(store: Store, root: Path) -> ImportReport:
    return import_agy_acp_map(
        store, sessions_file=root / "sessions.json", history_dir=root / "history"
    )


def test_import_creates_sessions_and_journals(store: Store, legacy: Path) -> None:
    """Usable records become sessions with their histories; the rest are reported."""
    report = run(store, legacy)
    assert report.skipped is None
    assert (report.sessions_imported, report.sessions_present, report.sessions_rejected) == (
        6,
        0,
        3,
    )
    assert report.journal_entries == 4 + 5 + 1 + 2 + 1
    [(old_id, new_id)] = report.renamed.items()
    assert old_id == "bad\nid"
    listed = store.list_sessions()[0]
    assert [r.session_id for r in listed] == [V2, UNTITLED, FULL, WINDOWS, "weird id/1", new_id]


def test_a_full_record_keeps_every_field(store: Store, legacy: Path) -> None:
    """Ids, conversation, cwd, directories, title, times and launch settings carry over."""
    run(store, legacy)
    assert store.get_session(FULL) == SessionRecord(
        session_id=FULL,
        cwd="/home/dev/project",
        additional_dirs=("/home/dev/lib", "/home/dev/docs"),
        conversation_id="c0ffee00-1111-4222-8333-444455556666",
        title="Refactor the parser",
        launch={
            "model": "gemini-3-pro",
            "effort": "high",
            "mode": "plan",
            "agent": "default",
            "safety": "autonomous",
            "sandbox": "true",
            "json_schema": '{"type":"object"}',
            "print_timeout": "30m",
            "disable_slash_commands": "false",
        },
        created_at="2026-03-14T09:26:53.589Z",
        updated_at="2026-03-14T10:02:11.004Z",
        meta={"importedFrom": "agy-acp-map", "legacyProtocolVersion": 1},
    )
    assert [(e.turn, e.index, e.kind, e.message_id) for e in store.journal(FULL)] == [
        (0, 0, "user", "history_user_0d7e1f52-3c51-4b8e-9a0a-1c2d3e4f5a6b"),
        (0, 1, "agent", "history_agent_5b6c7d8e-9f00-4112-8334-455667788990"),
        (1, 0, "user", "history_user_7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"),
        (1, 1, "agent", "history_agent_1b2c3d4e-5f60-4718-892a-3b4c5d6e7f80"),
    ]


def test_history_turns_titles_and_torn_lines(store: Store, legacy: Path) -> None:
    """A user line opens a turn; bad lines are skipped; the first prompt becomes the title."""
    report = run(store, legacy)
    rec = store.get_session(UNTITLED)
    assert rec is not None
    assert rec.title == "What does this repository do?"
    assert rec.cwd == "/home/dev/project"  # the newer of two duplicate records
    assert rec.launch == {"model": "gemini-3-flash", "safety": "safe"}
    lines = [
        # turn, index, kind, message id suffix, text, created at
        (0, 0, "user", "user_11111111-aaaa-4bbb-8ccc-000000000001",
         "  What does\n  this repository do?  ", "2026-03-15T08:00:05Z"),
        (0, 1, "agent", "agent_11111111-aaaa-4bbb-8ccc-000000000002",
         "It is a small web service.", "2026-03-15T08:00:30Z"),
        (1, 0, "user", "user_11111111-aaaa-4bbb-8ccc-000000000003",
         "Run the whole test suite", "2026-03-15T08:10:00Z"),
        (2, 0, "user", "user_11111111-aaaa-4bbb-8ccc-000000000004",
         "Try again, please", "2026-03-15T08:40:00Z"),
        (2, 1, "agent", "agent_11111111-aaaa-4bbb-8ccc-000000000005",
         "Running the tests now; 3 of", "2026-03-15T08:45:30Z"),
    ]  # fmt: skip
    expected = [
        JournalEntry(
            UNTITLED, turn, index, kind, message_id=f"history_{mid}", text=text, created_at=at
        )
        for turn, index, kind, mid, text, at in lines
    ]
    assert store.journal(UNTITLED) == expected
    assert any("appears twice" in w for w in report.warnings)
    assert any("skipped 3 unreadable line(s)" in w and UNTITLED in w for w in report.warnings)


def test_odd_but_usable_records(store: Store, legacy: Path) -> None:
    """Unusual ids are kept, unusable ones renamed; agent-only turns and bad values survive."""
    report = run(store, legacy)
    weird = store.get_session("weird id/1")
    assert weird is not None and weird.title == "Session with an unusual id"
    assert [e.text for e in store.journal("weird id/1")] == ["hello from a strange id"]

    new_id = report.renamed["bad\nid"]
    renamed = store.get_session(new_id)
    assert renamed is not None and renamed.meta["legacySessionId"] == "bad\nid"
    assert [e.text for e in store.journal(new_id)] == ["prompt of the renamed session"]

    v2 = store.get_session(V2)
    assert v2 is not None and v2.meta["legacyProtocolVersion"] == 2
    assert v2.launch == {"agent": "researcher", "skip_permissions": "true"}
    assert v2.title is None
    lines = store.journal(V2)
    assert [(e.turn, e.index, e.kind) for e in lines] == [(0, 0, "agent"), (1, 0, "agent")]
    assert lines[1].created_at == v2.updated_at  # "not a time" falls back to the session's

    win = store.get_session(WINDOWS)
    assert win is not None
    assert win.cwd == "C:\\Users\\dev\\win-project"
    assert win.additional_dirs == ("D:\\data",)
    assert win.launch == {"model": "5"}
    assert (win.created_at, win.updated_at) == (MTIME_STAMP, MTIME_STAMP)
    assert store.journal("orphan-session") == []
    assert store.get_session("orphan-session") is None


def test_second_import_is_a_no_op(tmp_path: Path, legacy: Path) -> None:
    """The flag makes a second run return at once; without it, stored ids are left alone."""
    with Store.open(tmp_path / "a.db") as store:
        second_import_is_a_no_op(store, legacy)


def second_import_is_a_no_op(store: Store, legacy: Path) -> None:
    first = run(store, legacy)
    flag = store.meta_get(IMPORT_FLAG)
    assert flag["imported"] == first.sessions_imported == 6
    store.touch(FULL, updated_at="2026-06-01T00:00:00Z", title="renamed by the user")
    again = run(store, legacy)
    assert again.skipped is not None and "already imported" in again.skipped
    assert again.sessions_imported == 0
    assert store.path is not None
    with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (IMPORT_FLAG,))
    racing = run(store, legacy)
    assert (racing.sessions_imported, racing.sessions_present) == (0, 6)
    rec = store.get_session(FULL)
    assert rec is not None and rec.title == "renamed by the user"
    assert len(store.journal(FULL)) == 4


def test_missing_sessions_file_imports_nothing_and_sets_no_flag(
    store: Store, tmp_path: Path
) -> None:
    """Without agy-acp-map files there is nothing to do, and a later run may still import."""
    report = run(store, tmp_path / "absent")
    assert report.skipped is not None and "no agy-acp-map sessions file" in report.skipped
    assert store.meta_get(IMPORT_FLAG) is None


def _bare_array(root: Path) -> None:
    data = json.loads((root / "sessions.json").read_text())
    (root / "sessions.json").write_text(json.dumps(data["sessions"][:2]))


GARBLED: list[tuple[bytes, str, int]] = [
    # sessions.json content, expected warning, sessions imported
    (b"{not json", "is not JSON", 0),
    (b"", "is empty", 0),
    (b"   \n", "is empty", 0),
    (b"\xff\xfe\x00garbage\x80", "is not JSON", 0),
    (b'{"version": 1}', "holds no session list", 0),
    (b'"just a string"', "holds no session list", 0),
    (b'{"version": 1, "sessions": [null, [], "x"]}', "is not an object", 0),
    (
        b'{"version": 7, "sessions": [{"sessionId": "s", "cwd": "/w",'
        b' "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"}]}',
        "has version 7",
        1,
    ),
]


@pytest.mark.parametrize("case", GARBLED)
def test_garbled_sessions_files_give_warnings_not_exceptions(
    store: Store, legacy: Path, caplog: pytest.LogCaptureFixture, case: tuple[bytes, str, int]
) -> None:
    """Whatever the sessions file holds, the import warns (and logs) instead of raising."""
    content, warning, imported = case
    (legacy / "sessions.json").write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="agybridge.store"):
        report = run(store, legacy)
    assert report.sessions_imported == imported
    assert any(warning in w for w in report.warnings), report.warnings
    assert any(warning in r.getMessage() for r in caplog.records)
    assert store.meta_get(IMPORT_FLAG) is not None


def test_bare_array_files_are_read_too(store: Store, legacy: Path) -> None:
    """agy-acp-map's oldest format, a bare array of records, imports the same way."""
    _bare_array(legacy)
    report = run(store, legacy)
    assert report.sessions_imported == 2
    assert [w for w in report.warnings if "sessions.json" in w] == []
    assert store.get_session(FULL) is not None


def test_unreadable_files_are_warnings(store: Store, legacy: Path) -> None:
    """A history that cannot be read, or a sessions path that is a directory, only warns."""
    history = legacy / "history" / f"{FULL}.jsonl"
    history.unlink()
    history.mkdir()
    report = run(store, legacy)
    assert report.sessions_imported == 6
    assert store.journal(FULL) == []
    assert any("cannot read the history" in w for w in report.warnings)

    other = Store.open_memory()
    (legacy / "as-dir.json").mkdir()
    report = import_agy_acp_map(
        other, sessions_file=legacy / "as-dir.json", history_dir=legacy / "history"
    )
    assert report.skipped is not None and "cannot read" in report.skipped
    assert other.meta_get(IMPORT_FLAG) is None


_KEYS = st.sampled_from(
    ["sessionId", "cwd", "createdAt", "updatedAt", "title", "conversationId",
     "additionalDirectories", "model", "sandbox", "protocolVersion", "version", "sessions",
     "role", "text", "messageId"]
)  # fmt: skip
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.sampled_from(["/w", "2026-01-01T00:00:00Z", "s1", "user", "assistant"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=6),
    max_leaves=20,
)  # fmt: skip


@given(sessions=_JSONISH, history=st.lists(_JSONISH | st.text(max_size=20), max_size=6))
@settings(max_examples=150, deadline=None)
def test_any_json_imports_without_raising(sessions: Any, history: list[Any]) -> None:
    """Whatever JSON the files hold, the import returns a report and never raises."""
    with tempfile.TemporaryDirectory() as tmp, Store.open_memory() as store:
        root = Path(tmp)
        (root / "history").mkdir()
        (root / "sessions.json").write_text(json.dumps(sessions))
        lines = [h if isinstance(h, str) else json.dumps(h) for h in history]
        (root / "history" / "s1.jsonl").write_text("\n".join(lines))
        report = run(store, root)
        assert report.sessions_imported == len(store.list_sessions(limit=1000)[0])
