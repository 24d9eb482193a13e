"""Content-addressed, size-bounded file snapshots for the mutation log.

A :class:`Snapshot` says what a file was at one moment: absent, or present
with its size and SHA-256. Its bytes are kept in a :class:`BlobStore` (keyed
by the hash, so a file written twice with the same content is kept once)
when the file is at most ``MAX_SNAPSHOT_FILE_BYTES`` and the session's store
has room; otherwise the snapshot still carries the hash (provenance works)
but the file cannot be restored from it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import stat
from collections.abc import Iterable
from typing import Any

import attrs

from ..store import BLOB_KEY, AsyncStore, StoreError

logger = logging.getLogger(__name__)

MAX_SNAPSHOT_FILE_BYTES = 1 * 2**20  # 1 MiB: a bigger file is hashed, not kept
MAX_SESSION_BLOB_BYTES = 64 * 2**20  # 64 MiB of kept bytes per session


@attrs.frozen
class Snapshot:
    """A file at one moment (``exists=False``: there was no file)."""

    exists: bool
    size: int | None = None
    sha256: str | None = None

    @classmethod
    def absent(cls) -> Snapshot:
        return cls(False)

    @classmethod
    def of_bytes(cls, data: bytes) -> Snapshot:
        return cls(True, len(data), hashlib.sha256(data).hexdigest())

    def same_as(self, other: Snapshot) -> bool:
        return self.exists == other.exists and self.sha256 == other.sha256

    def to_wire(self) -> dict[str, Any]:
        if not self.exists:
            return {"exists": False}
        return {"exists": True, "size": self.size, "sha256": self.sha256}

    @classmethod
    def from_wire(cls, value: dict[str, Any]) -> Snapshot:
        if not value.get("exists"):
            return cls.absent()
        return cls(True, int(value["size"]), str(value["sha256"]))


def read_snapshot(path: str) -> tuple[Snapshot, bytes | None] | None:
    """The file at ``path`` now, with its bytes when small enough (blocking).

    None: it is not a regular file we can read (a directory, no permission).
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None  # never open a FIFO or a device: it could block
        with open(path, "rb") as file:
            digest = hashlib.sha256()
            kept = bytearray()
            size = 0
            while chunk := file.read(1 << 16):
                digest.update(chunk)
                size += len(chunk)
                if size <= MAX_SNAPSHOT_FILE_BYTES:
                    kept += chunk
    except FileNotFoundError:
        return Snapshot.absent(), None
    except OSError:
        return None
    data = bytes(kept) if size <= MAX_SNAPSHOT_FILE_BYTES else None
    return Snapshot(True, size, digest.hexdigest()), data


class BlobStore:
    """The bytes of a session's snapshots, by hash; persisted with the session's
    log (`MutationLog.save`) when there is a store."""

    def __init__(self, store: AsyncStore | None) -> None:
        self._store = store
        self._blobs: dict[str, bytes] = {}
        self._unsaved: set[str] = set()
        self.kept_bytes = 0

    def keep(self, snapshot: Snapshot, data: bytes | None) -> None:
        """Keep ``data`` for ``snapshot`` if the session's budget allows."""
        digest = snapshot.sha256
        if digest is None or data is None or digest in self._blobs:
            return
        if self.kept_bytes + len(data) > MAX_SESSION_BLOB_BYTES:
            logger.info("snapshot budget spent: %s is recorded but cannot be restored", digest)
            return
        self._blobs[digest] = data
        self._unsaved.add(digest)
        self.kept_bytes += len(data)

    def has(self, snapshot: Snapshot) -> bool:
        return not snapshot.exists or snapshot.sha256 in self._blobs

    def get(self, snapshot: Snapshot) -> bytes | None:
        return self._blobs.get(snapshot.sha256 or "")

    def unsaved(self, referenced: set[str]) -> dict[str, str]:
        """The kept blobs of ``referenced`` not stored yet (sha256 -> base64 text),
        to be stored with the log that refers to them (`AsyncStore.save_edit_log`):
        a stored blob is always one a stored log refers to, which deleting
        another session keeps (``store/edits.py``)."""
        return {
            digest: base64.b64encode(self._blobs[digest]).decode("ascii")
            for digest in sorted(self._unsaved & referenced)
        }

    def saved(self, digests: Iterable[str]) -> None:
        """``digests`` were stored."""
        self._unsaved.difference_update(digests)

    async def load(self, digests: set[str]) -> None:
        """Read the blobs of ``digests`` back from the store."""
        if self._store is None:
            return
        for digest in sorted(digests - set(self._blobs)):
            try:
                text = await self._store.meta_get(BLOB_KEY + digest)
            except StoreError as exc:
                logger.warning("could not read snapshot %s: %s", digest, exc)
                continue
            if isinstance(text, str):
                data = base64.b64decode(text)
                self._blobs[digest] = data
                self.kept_bytes += len(data)
