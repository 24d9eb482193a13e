"""The store's errors: one base class, attributes for what a caller may branch on.

Low-level ``sqlite3`` errors never leave the package: `Store` translates them once,
at its edge, into `StoreError` with the operation and the database path in the
message and the original error as ``__cause__``.
"""

from __future__ import annotations

from pathlib import Path


class StoreError(Exception):
    """A store operation failed; the message names the operation and the database."""


class StoreClosedError(StoreError):
    """The store was used after `Store.close`."""


class StoreVersionError(StoreError):
    """The database was written by a newer agybridge; it is left untouched.

    Attributes:
        path: the database file.
        found: its schema version.
        supported: the newest version this agybridge knows.
    """

    def __init__(self, path: Path, found: int, supported: int) -> None:
        super().__init__(
            f"the session database {str(path)!r} has schema version {found}, but this "
            f"agybridge only knows versions up to {supported}: upgrade agybridge, or point "
            f"AGYBRIDGE_DB at another file (the database was not modified)"
        )
        self.path = path
        self.found = found
        self.supported = supported


class StoreUnavailableError(StoreError):
    """No usable database can be opened or created at this location.

    Raised when the directory cannot be created or written, when a bad file cannot
    be moved aside, or when another process keeps the database locked. The caller
    decides what to do (the bridge falls back to `Store.open_memory`).

    Attributes:
        path: the database file.
    """

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot use the session database {str(path)!r}: {reason}")
        self.path = path


class StorePathError(StoreError):
    """The database path names something that is not a regular file (a directory,
    a FIFO, a device, a symlink to one, a dangling symlink). Never moved aside or
    touched: it may be the user's; the bridge refuses to start.

    Attributes:
        path: the database path.
    """

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(
            f"the session database path {str(path)!r} is {what}, not a database file; "
            f"it was left untouched: point AGYBRIDGE_DB at a file"
        )
        self.path = path


class InvalidCursorError(StoreError, ValueError):
    """A `Store.list_sessions` cursor is not one this database handed out.

    ACP ``session/list`` says an invalid cursor SHOULD be an error: the ACP layer
    answers it with ``-32602`` (it is also a `ValueError`).

    Attributes:
        cursor: the cursor as received.
    """

    def __init__(self, cursor: str, reason: str) -> None:
        shown = cursor if len(cursor) <= 80 else cursor[:77] + "..."
        super().__init__(
            f"invalid session/list cursor {shown!r} ({reason}); "
            f"cursors come from a previous nextCursor: list again without one"
        )
        self.cursor = cursor


class StoreBadFileError(StoreError):
    """A file that is not a healthy agybridge database (corrupt, or another
    program's), found by a read-only look (`Store.inspect`); opening it for use
    would move it aside and start a fresh database.

    Attributes:
        path: the database file.
        reason: what is wrong with it.
    """

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"the session database {str(path)!r} is not usable ({reason}): the bridge will "
            f"move it aside to {path.name}.corrupt-<time> and start a fresh one"
        )
        self.path = path
        self.reason = reason
