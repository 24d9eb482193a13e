"""How the store's models are written as rows: the column lists, the JSON
columns' encoding and the statements that write a session or journal lines
(each takes the connection of a transaction the caller holds)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from .models import JournalEntry, SessionRecord

SESSION_COLUMNS = (
    "session_id, cwd, additional_dirs, dirs_key, conversation_id, title, launch, "
    "created_at, updated_at, meta"
)
JOURNAL_COLUMNS = (
    "session_id, turn, idx, kind, message_id, text, tool_call_id, tool_kind, tool_title, "
    "tool_status, created_at"
)

# What json.dumps(value, ensure_ascii=False[, sort_keys=True]) does, without
# building an encoder per call (four per turn's write of the session row).
_to_json = json.JSONEncoder(ensure_ascii=False).encode
_to_sorted_json = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


def dirs_key(dirs: Iterable[str]) -> str:
    return _to_json(sorted(set(dirs)))


def json_text(value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable ({exc}), not {value!r}") from None


def session_params(record: SessionRecord) -> tuple[object, ...]:
    return (
        record.session_id,
        record.cwd,
        _to_json(list(record.additional_dirs)),
        dirs_key(record.additional_dirs),
        record.conversation_id,
        record.title,
        _to_sorted_json(dict(record.launch)),
        record.created_at,
        record.updated_at,
        _to_sorted_json(dict(record.meta)),
    )


def upsert_session(conn: sqlite3.Connection, record: SessionRecord) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO sessions ({SESSION_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        session_params(record),
    )


_UPDATE_SESSION = "UPDATE sessions SET {} WHERE session_id = ?".format(
    ", ".join(f"{column.strip()} = ?" for column in SESSION_COLUMNS.split(",")[1:])
)


def update_session(conn: sqlite3.Connection, record: SessionRecord) -> bool:
    session_id, *values = session_params(record)
    return conn.execute(_UPDATE_SESSION, (*values, session_id)).rowcount == 1


_INSERT_JOURNAL = (
    f"INSERT OR REPLACE INTO journal ({JOURNAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def insert_journal(conn: sqlite3.Connection, entries: Iterable[JournalEntry]) -> None:
    conn.executemany(
        _INSERT_JOURNAL,
        [
            (
                e.session_id,
                e.turn,
                e.index,
                e.kind,
                e.message_id,
                e.text,
                e.tool_call_id,
                e.tool_kind,
                e.tool_title,
                e.tool_status,
                e.created_at,
            )
            for e in entries
        ],
    )
