"""Opening a database file safely: pragmas, health checks, migrations, moving bad files aside.

Theory. Opening must never fail because of a bad *file* (issue 4: "the bridge still
starts"), must never lose data, and must be safe while another bridge process opens
or writes the same file:

* Only a regular file is ever moved aside: a path naming a directory, a FIFO, a
  device, or a symlink to one (or to nothing) is the user's mistake, refused with
  `StorePathError` and left untouched.
* A file SQLite cannot read as ours (not a database, corrupt, ``PRAGMA quick_check``
  not ``ok``, another application's database, a schema step that cannot run) is
  renamed to ``<name>.corrupt-<UTC>`` together with its ``-wal``/``-shm`` sidecars (a
  stale WAL must never be replayed into the fresh file) and a fresh database is made.
* "Busy"/"locked" is another process at work, never corruption; a full disk or no
  memory is the machine's problem, and a fresh file would not help. Those are
  retried or reported (`StoreUnavailableError`), the file is never moved.
* A file with a newer schema version is refused (`StoreVersionError`), untouched.
* Migrations run inside ``BEGIN IMMEDIATE`` and re-read the version there, so two
  processes opening an old or new file at once apply each step exactly once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import sqlite3
import time
from pathlib import Path

from .errors import StoreBadFileError, StoreUnavailableError, StoreVersionError
from .paths import check_path

logger = logging.getLogger(__name__)

#: How long SQLite waits for another connection's lock before giving up
#: (``PRAGMA busy_timeout``); writes are milliseconds, so this covers any real burst.
BUSY_TIMEOUT_S = 10.0
#: ``PRAGMA application_id``: "AGBB", marks the file as an agybridge database.
APPLICATION_ID = 0x41474242

_CURSOR_KEY_VALUES = (
    "INTO meta (key, value) VALUES ('store.cursor_key', json_quote(hex(randomblob(16))))"
)

#: The schema, as ordered steps: step ``n`` takes user_version ``n`` to ``n + 1``.
#: Never edit a released step; append a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # v1: the session index and the display journal.
    (
        """CREATE TABLE sessions (
            session_id      TEXT PRIMARY KEY,
            cwd             TEXT NOT NULL,
            additional_dirs TEXT NOT NULL,  -- JSON array, as given
            dirs_key        TEXT NOT NULL,  -- JSON array, sorted and unique: the filter key
            conversation_id TEXT,
            title           TEXT,
            launch          TEXT NOT NULL,  -- JSON object of strings
            created_at      TEXT NOT NULL,  -- canonical UTC timestamps: text order = time
            updated_at      TEXT NOT NULL,
            meta            TEXT NOT NULL   -- JSON object
        ) WITHOUT ROWID""",
        # session/list: newest first, ties by id, with and without a cwd filter.
        "CREATE INDEX sessions_recent ON sessions (updated_at DESC, session_id)",
        "CREATE INDEX sessions_cwd_recent ON sessions (cwd, updated_at DESC, session_id)",
        """CREATE TABLE journal (
            session_id   TEXT NOT NULL,
            turn         INTEGER NOT NULL,
            idx          INTEGER NOT NULL,
            kind         TEXT NOT NULL CHECK (kind IN ('user', 'agent', 'tool')),
            message_id   TEXT,
            text         TEXT,
            tool_call_id TEXT,
            tool_kind    TEXT,
            tool_title   TEXT,
            tool_status  TEXT,
            created_at   TEXT NOT NULL,
            PRIMARY KEY (session_id, turn, idx)
        ) WITHOUT ROWID""",
    ),
    # v2: one-off flags, the discovery cache, and the key that signs list cursors.
    (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        """CREATE TABLE cache (
            key        TEXT PRIMARY KEY,
            value      TEXT NOT NULL,   -- JSON
            expires_at REAL NOT NULL    -- seconds, on the store's clock
        ) WITHOUT ROWID""",
        f"INSERT {_CURSOR_KEY_VALUES}",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

# Primary result codes (https://sqlite.org/rescode.html) that say nothing about the file.
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_MACHINE_CODES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_INTERRUPT})


class _BadFileError(Exception):
    """The file is not a healthy agybridge database (the message says why)."""


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def open_file(path: Path) -> sqlite3.Connection:
    """A ready connection to the database at ``path``, replacing a bad file.

    Raises:
        StorePathError: ``path`` is not a regular file (left untouched).
        StoreVersionError: the file has a newer schema (left untouched).
        StoreUnavailableError: no database can be used at this location.
    """
    check_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StoreUnavailableError(path, f"cannot create its directory: {exc}") from exc
    for attempt in (1, 2):
        try:
            return _open_with_retries(path)
        except _BadFileError as exc:
            if attempt == 2:
                raise StoreUnavailableError(
                    path, f"a fresh database is unusable too: {exc}"
                ) from exc
            _move_aside(path, str(exc))
    raise AssertionError("unreachable: the second attempt returns or raises")


def inspect_file(path: Path) -> tuple[int, int]:
    """(schema version, sessions) of the existing database at ``path``, read
    only: nothing is created, migrated or moved aside (``agybridge doctor``).

    Raises:
        StorePathError: ``path`` is not a regular file.
        StoreVersionError: the file has a newer schema.
        StoreBadFileError: not a healthy agybridge database (opening it for use
            would move it aside).
        StoreUnavailableError: it cannot be read now (permissions, a lock, the machine).
    """
    check_path(path)
    try:
        conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
            isolation_level=None, check_same_thread=False,
        )  # fmt: skip
    except sqlite3.Error as exc:
        raise StoreUnavailableError(path, f"cannot be read: {exc}") from exc
    try:
        _check(conn, path)
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0] if version else 0
    except _BadFileError as exc:
        raise StoreBadFileError(path, str(exc)) from exc
    except sqlite3.Error as exc:
        code = _primary_code(exc)
        if code in _BUSY_CODES or code in _MACHINE_CODES or code == sqlite3.SQLITE_CANTOPEN:
            raise StoreUnavailableError(path, f"cannot be read: {exc}") from exc
        raise StoreBadFileError(path, f"{type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()
    return version, int(sessions)


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path`` now, or None if there is none."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def open_memory() -> sqlite3.Connection:
    """A ready in-memory database (nothing survives `close`)."""
    conn = _connect(":memory:")
    _migrate(conn, Path(":memory:"))
    return conn


def cursor_key(conn: sqlite3.Connection) -> bytes:
    """The database's key for signing list cursors (recreated if someone deleted it)."""
    select = "SELECT value FROM meta WHERE key = 'store.cursor_key'"
    row = conn.execute(select).fetchone()
    if row is None:
        conn.execute(f"INSERT OR IGNORE {_CURSOR_KEY_VALUES}")
        row = conn.execute(select).fetchone()
    return bytes.fromhex(json.loads(row[0]))


def _connect(target: str) -> sqlite3.Connection:
    # isolation_level=None: no implicit BEGIN; writes use BEGIN IMMEDIATE (db.py).
    # check_same_thread=False: one connection, guarded by the Store's lock.
    conn = sqlite3.connect(
        target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    return conn


def _open_with_retries(path: Path) -> sqlite3.Connection:
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return _open_once(path)
        except sqlite3.Error as exc:
            code = _primary_code(exc)
            if code in _BUSY_CODES and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            if code in _BUSY_CODES:
                reason = f"another process keeps it locked ({exc})"
                raise StoreUnavailableError(path, reason) from exc
            if code in _MACHINE_CODES:
                raise StoreUnavailableError(path, str(exc)) from exc
            raise _BadFileError(f"{type(exc).__name__}: {exc}") from exc


def _open_once(path: Path) -> sqlite3.Connection:
    try:
        # Created here (0600) rather than by SQLite (0644): prompts are private.
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreUnavailableError(path, f"cannot create it: {exc}") from exc
    conn = _connect(str(path))
    try:
        _check(conn, path)
        # Migrate before switching to WAL: a file that turns out not to be ours is then
        # moved aside exactly as it was (a failed step rolls back).
        _migrate(conn, path)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            logger.warning("the session database %s cannot use WAL (journal mode %s)", path, mode)
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable across crashes, not power loss
    except BaseException:
        conn.close()
        raise
    return conn


def _check(conn: sqlite3.Connection, path: Path) -> None:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and version != 0):
        raise _BadFileError(
            f"not an agybridge database (application_id {app_id}, version {version})"
        )
    if version > SCHEMA_VERSION:
        raise StoreVersionError(path, version, SCHEMA_VERSION)
    problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise _BadFileError(f"quick_check failed: {'; '.join(map(str, problems[:3]))}")


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:  # another process upgraded it since _check
            raise StoreVersionError(path, version, SCHEMA_VERSION)
        for step in MIGRATIONS[version:]:
            for statement in step:
                conn.execute(statement)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    if version < SCHEMA_VERSION:
        logger.info(
            "session database %s migrated from version %d to %d", path, version, SCHEMA_VERSION
        )


def move_sidecars_aside(path: Path) -> None:
    """Move the ``-wal``/``-shm``/``-journal`` of a database that is gone aside.

    Raises:
        StoreUnavailableError: one cannot be moved.
    """
    _move_sidecars(path, _aside_name(path))


def _move_sidecars(path: Path, aside: Path) -> None:
    for suffix in ("-wal", "-shm", "-journal"):
        sidecar = path.with_name(path.name + suffix)
        try:
            os.replace(sidecar, aside.with_name(aside.name + suffix))
        except FileNotFoundError:
            pass
        except OSError as exc:  # a stale WAL left behind would be replayed into the new file
            raise StoreUnavailableError(path, f"cannot move {sidecar} aside: {exc}") from exc


def _aside_name(path: Path) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    serial = 1
    while aside.exists() or aside.is_symlink():
        serial += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{serial}")
    return aside


def _move_aside(path: Path, reason: str) -> Path:
    check_path(path)  # never a user's directory, even if it appeared meanwhile
    aside = _aside_name(path)
    try:
        os.replace(path, aside)
    except OSError as exc:
        raise StoreUnavailableError(path, f"{reason}, and it cannot be moved aside: {exc}") from exc
    _move_sidecars(path, aside)
    logger.warning(
        "the session database %s is unusable (%s): moved it aside to %s and started a fresh one",
        path,
        reason,
        aside,
    )
    return aside
