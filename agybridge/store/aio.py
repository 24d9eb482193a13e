"""`AsyncStore`: the `Store` for trio code, every call in a worker thread.

SQLite work is serialised by one `trio.CapacityLimiter` (one thread at a time; the
store's own lock would serialise it anyway, this keeps threads from piling up on
it), and the trio loop never blocks on disk or on another process's lock.

Cancellation: reads are abandoned when cancelled (``abandon_on_cancel=True``): the
caller gets `trio.Cancelled` at once, the thread finishes its statement in the
background and the limiter stays held until it has, so the next call waits for it.
Writes are never abandoned (``abandon_on_cancel=False``): cancelled before their
thread starts, nothing is written; once started, the call waits for the commit and
returns, and the cancellation is delivered at the caller's next checkpoint. A write
is therefore never half-applied from the caller's point of view.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from .db import DEFAULT_LIST_LIMIT, Store
from .models import JournalEntry, SessionRecord

_T = TypeVar("_T")


class AsyncStore:
    """A `Store` whose methods are awaited; see the module docstring for cancellation."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._limiter = trio.CapacityLimiter(1)

    @classmethod
    async def open(cls, path: Path, *, clock: Callable[[], float] = time.time) -> AsyncStore:
        """`Store.open` in a worker thread (moving a bad file aside, migrating).

        Cancellation: not abandoned; a cancelled open still finishes, then the
        cancellation is delivered and the store is closed again.

        Raises:
            StoreVersionError: the file was written by a newer agybridge.
            StoreUnavailableError: no database can be used at this location.
        """
        store = await trio.to_thread.run_sync(functools.partial(Store.open, path, clock=clock))
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            store.close()
            raise
        return cls(store)

    @property
    def store(self) -> Store:
        """The wrapped synchronous store (for code already in a worker thread)."""
        return self._store

    async def aclose(self) -> None:
        """Close the store once every running call has finished; idempotent.

        Cancellation: runs to completion (the connection is always closed).
        """
        with trio.CancelScope(shield=True):
            await self._write(self._store.close)

    async def run_sync(self, fn: Callable[[Store], _T]) -> _T:
        """Run ``fn(store)`` in the store's worker thread (e.g. the legacy import).

        Cancellation: like a write; once started, ``fn`` runs to completion.
        """
        return await self._write(functools.partial(fn, self._store))

    async def _read(self, fn: Callable[[], _T]) -> _T:
        return await trio.to_thread.run_sync(fn, limiter=self._limiter, abandon_on_cancel=True)

    async def _write(self, fn: Callable[[], _T]) -> _T:
        return await trio.to_thread.run_sync(fn, limiter=self._limiter, abandon_on_cancel=False)

    # ------------------------------------------------------------------ sessions

    async def upsert_session(self, record: SessionRecord) -> None:
        """`Store.upsert_session`. Cancellation: a started write completes."""
        await self._write(functools.partial(self._store.upsert_session, record))

    async def create_session(
        self, record: SessionRecord, journal: Iterable[JournalEntry] = ()
    ) -> bool:
        """`Store.create_session`. Cancellation: a started write completes."""
        entries = list(journal)
        return await self._write(functools.partial(self._store.create_session, record, entries))

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """`Store.get_session`. Cancellation: abandoned at once."""
        return await self._read(functools.partial(self._store.get_session, session_id))

    async def list_sessions(
        self,
        *,
        cwd: str | None = None,
        additional_dirs: Sequence[str] | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> tuple[list[SessionRecord], str | None]:
        """`Store.list_sessions`. Cancellation: abandoned at once.

        Raises:
            InvalidCursorError: ``cursor`` was not handed out by this database.
        """
        call = functools.partial(
            self._store.list_sessions,
            cwd=cwd,
            additional_dirs=additional_dirs,
            cursor=cursor,
            limit=limit,
        )
        return await self._read(call)

    async def touch(
        self,
        session_id: str,
        *,
        updated_at: str,
        title: str | None = None,
        conversation_id: str | None = None,
    ) -> bool:
        """`Store.touch`. Cancellation: a started write completes."""
        call = functools.partial(
            self._store.touch,
            session_id,
            updated_at=updated_at,
            title=title,
            conversation_id=conversation_id,
        )
        return await self._write(call)

    async def delete_session(self, session_id: str) -> bool:
        """`Store.delete_session`. Cancellation: a started write completes."""
        return await self._write(functools.partial(self._store.delete_session, session_id))

    # ------------------------------------------------------------------ journal

    async def append_journal(self, entries: Sequence[JournalEntry]) -> None:
        """`Store.append_journal`. Cancellation: a started write completes."""
        await self._write(functools.partial(self._store.append_journal, list(entries)))

    async def record_turn(self, entries: Sequence[JournalEntry], record: SessionRecord) -> None:
        """`Store.record_turn`. Cancellation: a started write completes."""
        await self._write(functools.partial(self._store.record_turn, list(entries), record))

    async def journal(self, session_id: str) -> list[JournalEntry]:
        """`Store.journal`. Cancellation: abandoned at once."""
        return await self._read(functools.partial(self._store.journal, session_id))

    # ------------------------------------------------------------------ cache and flags

    async def cache_get(self, key: str) -> Any | None:
        """`Store.cache_get`. Cancellation: abandoned at once."""
        return await self._read(functools.partial(self._store.cache_get, key))

    async def cache_put(self, key: str, value: Any, ttl_s: float) -> None:
        """`Store.cache_put`. Cancellation: a started write completes."""
        await self._write(functools.partial(self._store.cache_put, key, value, ttl_s))

    async def meta_get(self, key: str) -> Any | None:
        """`Store.meta_get`. Cancellation: abandoned at once."""
        return await self._read(functools.partial(self._store.meta_get, key))

    async def meta_put(self, key: str, value: Any) -> None:
        """`Store.meta_put`. Cancellation: a started write completes."""
        await self._write(functools.partial(self._store.meta_put, key, value))
