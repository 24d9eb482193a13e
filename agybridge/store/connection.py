"""`StoreConnection`: the store's one SQLite connection, its lock and its transactions.

Threads: one connection (``check_same_thread=False``) guarded by a `threading.Lock`.
`AsyncStore` serialises calls anyway, one connection keeps every read a plain WAL
snapshot, and a connection per thread would leak one connection per trio worker
thread (they come and go) where `close` cannot reach them.

Processes: WAL lets readers run beside one writer; every write is one
``BEGIN IMMEDIATE`` transaction (the write lock is taken up front, so a transaction
never has to upgrade a read lock and fail with "database is locked"), and
``busy_timeout`` makes a second process wait for the lock instead of failing.

A database file deleted or replaced while the bridge runs is reopened before the
next write (writes into an unlinked file would be lost without a word).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from . import _opening
from .cursors import Cursors
from .errors import StoreClosedError, StoreError

logger = logging.getLogger(__name__)


class StoreConnection:
    """A ready connection to the database at ``path`` (None: in memory)."""

    def __init__(self, conn: sqlite3.Connection, path: Path | None) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._path = path
        self._lock = threading.Lock()
        self._cursors = Cursors(_opening.cursor_key(conn))
        self._identity = None if path is None else _opening.file_identity(path)
        #: How often the file was found deleted or replaced and reopened.
        self.reopened = 0

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def cursors(self) -> Cursors:
        """The ``session/list`` cursors of the database open now (its own key)."""
        return self._cursors

    def where(self) -> str:
        """The database, as messages name it."""
        return ":memory:" if self._path is None else str(self._path)

    def close(self) -> None:
        """Close the connection; idempotent. Later transactions raise `StoreClosedError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosedError(f"the store {self.where()} is closed")
        return self._conn

    @contextlib.contextmanager
    def reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, for reads; an SQLite error is a
        `StoreError` naming ``what`` and the database."""
        with self._lock:
            conn = self._live()
            try:
                yield conn
            except sqlite3.Error as exc:
                raise StoreError(f"{what} failed in {self.where()}: {exc}") from exc

    def _follow_file(self) -> None:
        """Reopen the database if its file was deleted or replaced since it was
        opened: writes into an unlinked file would be lost without a word."""
        if self._path is None or self._conn is None:
            return
        now = _opening.file_identity(self._path)
        if now == self._identity:
            return
        what = "deleted" if now is None else "replaced"
        # Close first: the old connection checkpoints into the file it has open.
        self._conn.close()
        self._conn = None
        if now is None:
            # A WAL left beside a deleted database belongs to it: never replay it
            # into the fresh file.
            _opening.move_sidecars_aside(self._path)
        conn = _opening.open_file(self._path)
        self._conn = conn
        self._cursors = Cursors(_opening.cursor_key(conn))
        self._identity = _opening.file_identity(self._path)
        self.reopened += 1
        logger.warning(
            "the session database %s was %s while the bridge ran; reopened it: sessions "
            "written before are no longer listed there, unless the %s file has them (sessions "
            "still running keep saving only if it does; new sessions are saved there)",
            self._path,
            what,
            "new" if now is None else "replacing",
        )

    def truncate_wal(self) -> None:
        """Checkpoint and empty the WAL, whose frames still hold what was just
        deleted; best effort, never waiting: a connection reading an older
        snapshot keeps it as it is (waiting for it, up to the busy timeout,
        would hold every other write of this bridge)."""
        with self._lock:
            conn = self._conn
            if conn is None:  # closed meanwhile (by another thread)
                return
            try:
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {int(_opening.BUSY_TIMEOUT_S * 1000)}")
            except sqlite3.Error as exc:
                logger.info("could not empty the WAL of %s: %s", self.where(), exc)
                return
            if busy:
                logger.info(
                    "could not empty the WAL of %s: another connection reads it", self.where()
                )

    @contextlib.contextmanager
    def writing(self, what: str) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, in one ``BEGIN IMMEDIATE`` transaction
        (committed when the block ends, rolled back when it raises), after
        following the file; an SQLite error is a `StoreError` naming ``what``."""
        with self._lock:
            try:
                self._follow_file()
            except StoreError as exc:
                raise StoreError(f"{what} failed: {exc}") from exc
            conn = self._live()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"{what} failed in {self.where()}: {exc}") from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"{what} failed in {self.where()}: {exc}") from exc
                raise
