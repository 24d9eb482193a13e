"""Where a session's edit log lives in the ``meta`` table: the store's knowledge of it.

The workspace layer (``workspace/mutations.py``, ``workspace/snapshots.py``) keeps

* a session's mutation log under ``MUTATION_LOG_KEY + session_id``: a JSON list
  of entries, each with ``before`` (null when unknown) and ``after`` snapshots,
  ``{"exists": ..., "size": ..., "sha256": ...}``;
* the kept bytes of a snapshot under ``BLOB_KEY + sha256`` (base64 text). They
  are content-addressed, so SHARED by every session that saw that content.

`Store.save_edit_log` writes a log with the blobs it newly refers to, in one
transaction, so a stored blob is always referred to by the stored log of the
session that wrote it; `Store.delete_session` removes the session's log and
every blob that no remaining log refers to.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from typing import Any

MUTATION_LOG_KEY = "agybridge.mutations/"
BLOB_KEY = "agybridge.blob/"


def referenced_blobs(log: Any) -> set[str]:
    """The SHA-256 digests a stored mutation log refers to (anything malformed: none)."""
    digests: set[str] = set()
    if not isinstance(log, list):
        return digests
    for entry in log:
        if not isinstance(entry, dict):
            continue
        for side in (entry.get("before"), entry.get("after")):
            if isinstance(side, dict) and isinstance(side.get("sha256"), str):
                digests.add(side["sha256"])
    return digests


def _prefixed(prefix: str) -> tuple[str, str, str]:
    """A WHERE clause and its bounds selecting the meta keys that start with
    ``prefix`` (a range of the primary key, not a scan)."""
    return "key >= ? AND key < ?", prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def drop_unreferenced_blobs(conn: sqlite3.Connection) -> None:
    """Delete every stored snapshot that no stored mutation log refers to."""
    where, low, high = _prefixed(MUTATION_LOG_KEY)
    referenced: set[str] = set()
    for row in conn.execute(f"SELECT value FROM meta WHERE {where}", (low, high)):
        with contextlib.suppress(ValueError):
            referenced |= referenced_blobs(json.loads(row["value"]))
    where, low, high = _prefixed(BLOB_KEY)
    keys = [row["key"] for row in conn.execute(f"SELECT key FROM meta WHERE {where}", (low, high))]
    unreferenced = [(k,) for k in keys if k[len(BLOB_KEY) :] not in referenced]
    conn.executemany("DELETE FROM meta WHERE key = ?", unreferenced)
