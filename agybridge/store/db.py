"""`Store`: the synchronous SQLite store (session index, display journal, cache, flags).

Every method is one short transaction of its `StoreConnection` (connection.py: the
lock, ``BEGIN IMMEDIATE`` writes, a database file replaced while the bridge runs),
so a `Store` is safe from any thread and beside other processes.

``session/list`` is keyset-paginated (ACP brief §2: newest first, opaque cursor,
no ``nextCursor`` at the end): rows are ordered by ``(updated_at DESC, session_id)``,
both served by an index, and the cursor is the last row's key, signed with a
per-database key so that a tampered or foreign cursor is refused.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from . import _opening, columns, edits
from .connection import StoreConnection
from .models import JournalEntry, SessionRecord, canonical_timestamp

DEFAULT_LIST_LIMIT = 50
SCHEMA_VERSION = _opening.SCHEMA_VERSION
MAX_LIST_LIMIT = 1000


@attrs.frozen
class StoreStatistics:
    schema_version: int
    sessions: int
    journal_lines: int


class Store:
    """The agybridge database; every method is one short transaction, safe from any thread.

    Open it with `Store.open` (a file) or `Store.open_memory`; ``__init__`` only
    adopts a ready connection.
    """

    def __init__(
        self, conn: sqlite3.Connection, path: Path | None, *, clock: Callable[[], float]
    ) -> None:
        self._db = StoreConnection(conn, path)
        self._clock = clock

    @classmethod
    def open(cls, path: Path, *, clock: Callable[[], float] = time.time) -> Store:
        """Open (creating or migrating) the database at ``path``.

        A bad file is moved aside to ``<name>.corrupt-<UTC>`` with a logged warning and
        a fresh database is created. ``clock`` (seconds) times cache entries.

        Raises:
            StoreVersionError: the file was written by a newer agybridge (untouched).
            StoreUnavailableError: no database can be used at this location.
        """
        return cls(_opening.open_file(path), path, clock=clock)

    @staticmethod
    def inspect(path: Path) -> tuple[int, int]:
        """(schema version, sessions) of the database at ``path``, without
        changing anything (`_opening.inspect_file`, which lists what it raises)."""
        return _opening.inspect_file(path)

    @classmethod
    def open_memory(cls, *, clock: Callable[[], float] = time.time) -> Store:
        """A private in-memory store (for tests, or when no file can be used)."""
        return cls(_opening.open_memory(), None, clock=clock)

    @property
    def path(self) -> Path | None:
        """The database file, or None for an in-memory store."""
        return self._db.path

    @property
    def reopened(self) -> int:
        """How often the file was found deleted or replaced and reopened."""
        return self._db.reopened

    def close(self) -> None:
        """Close the connection; idempotent. Later calls raise `StoreClosedError`."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions

    def upsert_session(self, record: SessionRecord) -> None:
        """Insert ``record``, or replace the stored row with the same session id."""
        with self._db.writing(f"saving session {record.session_id!r}") as conn:
            columns.upsert_session(conn, record)

    def update_session(self, record: SessionRecord) -> bool:
        """Replace the stored row with ``record``'s session id, if there is one.

        A live session's later saves use this: a row deleted meanwhile (``agybridge
        sessions delete``, another bridge) stays deleted.

        Returns:
            False (nothing written) when no such session is stored.
        """
        with self._db.writing(f"saving session {record.session_id!r}") as conn:
            return columns.update_session(conn, record)

    def create_session(self, record: SessionRecord, journal: Iterable[JournalEntry] = ()) -> bool:
        """Insert ``record`` and its ``journal`` in one transaction, unless the id exists.

        Returns:
            True when inserted; False (and nothing written) when the id was taken.
        """
        entries = list(journal)
        with self._db.writing(f"creating session {record.session_id!r}") as conn:
            cursor = conn.execute(
                f"INSERT OR IGNORE INTO sessions ({columns.SESSION_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                columns.session_params(record),
            )
            if cursor.rowcount != 1:
                return False
            columns.insert_journal(conn, entries)
            return True

    def get_session(self, session_id: str) -> SessionRecord | None:
        """The stored record, or None."""
        with self._db.reading(f"reading session {session_id!r}") as conn:
            row = conn.execute(
                "SELECT * FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if row is None else SessionRecord.from_row(row)

    def list_sessions(
        self,
        *,
        cwd: str | None = None,
        additional_dirs: Sequence[str] | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> tuple[list[SessionRecord], str | None]:
        """One page of sessions, newest ``updated_at`` first (ties by session id).

        Args:
            cwd: only sessions of this cwd (exact string match).
            additional_dirs: only sessions with exactly these additional directories
                (order and duplicates ignored; ``()`` means "none").
            cursor: a ``next_cursor`` from an earlier call, or None for the first page.
            limit: page size, 1 to `MAX_LIST_LIMIT`.

        Returns:
            ``(records, next_cursor)``; ``next_cursor`` is None on the last page.

        Raises:
            InvalidCursorError: ``cursor`` was not handed out by this database.
            ValueError: ``limit`` is out of range.
        """
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_LIST_LIMIT}, not {limit!r}")
        if isinstance(additional_dirs, str):
            raise TypeError(f"additional_dirs must be a sequence of paths, not {additional_dirs!r}")
        clauses: list[str] = []
        params: list[object] = []
        if cwd is not None:
            clauses.append("cwd = ?")
            params.append(cwd)
        if additional_dirs is not None:
            clauses.append("dirs_key = ?")
            params.append(columns.dirs_key(additional_dirs))
        if cursor is not None:
            updated_at, session_id = self._db.cursors.decode(cursor)
            # "after (u, s)" in (updated_at DESC, session_id ASC) order; the first term
            # lets SQLite seek the index instead of scanning from the newest row.
            clauses.append("updated_at <= ? AND (updated_at < ? OR session_id > ?)")
            params += [updated_at, updated_at, session_id]
        where = " AND ".join(clauses) or "1"
        sql = f"SELECT * FROM sessions WHERE {where} ORDER BY updated_at DESC, session_id LIMIT ?"
        with self._db.reading("listing sessions") as conn:
            rows = conn.execute(sql, [*params, limit + 1]).fetchall()
        records = [SessionRecord.from_row(row) for row in rows[:limit]]
        next_cursor = self._db.cursors.encode(records[-1]) if len(rows) > limit else None
        return records, next_cursor

    def touch(
        self,
        session_id: str,
        *,
        updated_at: str,
        title: str | None = None,
        conversation_id: str | None = None,
    ) -> bool:
        """Set ``updated_at`` (and ``title``/``conversation_id`` when given).

        Returns:
            False when no such session is stored.
        """
        stamp = canonical_timestamp(updated_at)
        with self._db.writing(f"touching session {session_id!r}") as conn:
            cursor = conn.execute(
                "UPDATE sessions SET updated_at = ?, title = coalesce(?, title), "
                "conversation_id = coalesce(?, conversation_id) WHERE session_id = ?",
                (stamp, title, conversation_id, session_id),
            )
            return cursor.rowcount == 1

    def delete_session(self, session_id: str) -> bool:
        """Delete the session, its journal and its edit log, with every file
        snapshot that no remaining session's log refers to (`edits`); one
        transaction, idempotent.

        Returns:
            True when something of the session was deleted.
        """
        with self._db.writing(f"deleting session {session_id!r}") as conn:
            # Overwrite what is deleted (free pages would keep the files' and
            # prompts' text on disk), for this transaction only.
            was = conn.execute("PRAGMA secure_delete").fetchone()[0]
            conn.execute("PRAGMA secure_delete = ON")
            try:
                rows = conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
                lines = conn.execute("DELETE FROM journal WHERE session_id = ?", (session_id,))
                log = conn.execute(
                    "DELETE FROM meta WHERE key = ?", (edits.MUTATION_LOG_KEY + session_id,)
                )
                edits.drop_unreferenced_blobs(conn)
            finally:
                conn.execute(f"PRAGMA secure_delete = {int(was)}")
            deleted = rows.rowcount > 0 or lines.rowcount > 0 or log.rowcount > 0
        if deleted:
            self._db.truncate_wal()
        return deleted

    def statistics(self) -> StoreStatistics:
        """Schema version and row counts (``agybridge doctor``)."""
        with self._db.reading("counting sessions") as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
            lines = conn.execute("SELECT count(*) FROM journal").fetchone()[0]
        return StoreStatistics(
            schema_version=int(version), sessions=int(sessions), journal_lines=int(lines)
        )

    # ------------------------------------------------------------------ journal

    def append_journal(self, entries: Sequence[JournalEntry]) -> None:
        """Store ``entries`` in one transaction; an existing (session, turn, index) is replaced."""
        if not entries:
            return
        with self._db.writing(f"appending {len(entries)} journal lines") as conn:
            columns.insert_journal(conn, entries)

    def record_turn(
        self, entries: Sequence[JournalEntry], record: SessionRecord, *, create: bool = True
    ) -> bool:
        """A finished turn: its journal lines and the session's row, in one
        transaction (one commit per turn).

        Args:
            create: False to write only while the row exists (`update_session`).

        Returns:
            False (nothing written) when ``create`` is False and no such session is stored.
        """
        with self._db.writing(f"saving a turn of session {record.session_id!r}") as conn:
            if create:
                columns.upsert_session(conn, record)
            elif not columns.update_session(conn, record):
                return False
            columns.insert_journal(conn, entries)
            return True

    def journal(self, session_id: str) -> list[JournalEntry]:
        """The session's journal in (turn, index) order; empty when there is none."""
        with self._db.reading(f"reading the journal of {session_id!r}") as conn:
            rows = conn.execute(
                f"SELECT {columns.JOURNAL_COLUMNS} FROM journal "
                "WHERE session_id = ? ORDER BY turn, idx",
                (session_id,),
            ).fetchall()
        return [JournalEntry.from_row(row) for row in rows]

    def next_turn(self, session_id: str) -> int:
        """The index the session's next journalled turn takes: one past its last
        (0 when it has none), without reading the lines."""
        with self._db.reading(f"reading the journal of {session_id!r}") as conn:
            (last,) = conn.execute(
                "SELECT max(turn) FROM journal WHERE session_id = ?", (session_id,)
            ).fetchone()
        return 0 if last is None else int(last) + 1

    # ------------------------------------------------------------------ cache and flags

    def cache_get(self, key: str) -> Any | None:
        """The cached JSON value, or None when absent or expired."""
        with self._db.reading(f"reading cache entry {key!r}") as conn:
            row = conn.execute(
                "SELECT value, expires_at FROM cache WHERE key = ?", (key,)
            ).fetchone()
        if row is None or row["expires_at"] <= self._clock():
            return None
        return json.loads(row["value"])

    def cache_put(self, key: str, value: Any, ttl_s: float) -> None:
        """Cache a JSON value for ``ttl_s`` seconds; expired entries are purged here.

        Raises:
            ValueError: ``ttl_s`` is not a positive finite number.
            TypeError: ``value`` is not JSON-serialisable.
        """
        if not (isinstance(ttl_s, int | float) and math.isfinite(ttl_s) and ttl_s > 0):
            raise ValueError(f"ttl_s must be a positive number of seconds, not {ttl_s!r}")
        text = columns.json_text(value, f"cache entry {key!r}")
        now = self._clock()
        with self._db.writing(f"caching {key!r}") as conn:
            conn.execute("DELETE FROM cache WHERE expires_at <= ?", (now,))
            conn.execute(
                "INSERT OR REPLACE INTO cache (key, value, expires_at) VALUES (?, ?, ?)",
                (key, text, now + ttl_s),
            )

    def meta_get(self, key: str) -> Any | None:
        """A one-off flag's JSON value, or None."""
        with self._db.reading(f"reading flag {key!r}") as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row["value"])

    def meta_put(self, key: str, value: Any) -> None:
        """Set a one-off flag to a JSON value."""
        text = columns.json_text(value, f"flag {key!r}")
        with self._db.writing(f"setting flag {key!r}") as conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, text))

    def save_edit_log(self, session_id: str, log: Sequence[Any], blobs: Mapping[str, str]) -> bool:
        """Write a session's mutation log and the snapshot ``blobs`` (sha256 ->
        base64 text) it newly refers to, in one transaction, while the session's
        row exists (`edits`): a session deleted meanwhile (``agybridge sessions
        delete``, another bridge) does not get its log back.

        Returns:
            False (nothing written) when no such session is stored.
        """
        texts = {
            edits.BLOB_KEY + d: columns.json_text(t, f"snapshot {d!r}") for d, t in blobs.items()
        }
        texts[edits.MUTATION_LOG_KEY + session_id] = columns.json_text(
            list(log), f"the edit log of {session_id!r}"
        )
        with self._db.writing(f"saving the edit log of session {session_id!r}") as conn:
            if (
                conn.execute(
                    "SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)
                ).fetchone()
                is None
            ):
                return False
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", texts.items()
            )
            return True
