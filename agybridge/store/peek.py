"""One cache entry read straight from the database file, without opening the store.

``initialize`` is answered before the store is opened (issue 15: the store's
modules cost ~100 ms to import), yet it should advertise the models a warm
discovery cache already knows. This reads that one row read-only with nothing
but ``sqlite3`` (~3 ms to import, and only when the file exists): no file is
created, migrated or moved aside, and anything unusable is simply no entry.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

#: A write in progress does not block a WAL reader; anything slower is no entry.
_PEEK_TIMEOUT_S = 0.1


def peek_cache(path: Path, key: str, now: float | None = None) -> Any | None:
    """The cached JSON value for ``key`` (as ``Store.cache_get`` would answer
    it), or None: absent, expired, no database yet, or one this cannot read."""
    try:
        if not path.is_file():
            return None  # mode=ro never creates it, but says so only with an error
    except OSError:  # e.g. a directory on the way that cannot be searched
        return None
    import sqlite3  # noqa: PLC0415 - only when there is a database to read

    try:
        conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=_PEEK_TIMEOUT_S,
            isolation_level=None, check_same_thread=False,
        )  # fmt: skip
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT value, expires_at FROM cache WHERE key = ?", (key,)).fetchone()
    except sqlite3.Error:
        return None  # an older schema without the cache, a lock, not our file
    finally:
        conn.close()
    if row is None or row[1] <= (time.time() if now is None else now):
        return None
    try:
        return json.loads(row[0])
    except ValueError:
        return None
