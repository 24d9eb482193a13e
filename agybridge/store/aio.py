"""`AsyncStore`: the `Store` for trio code, every call in a worker thread.

SQLite work is serialised by one limiter (one thread at a time, first come first
served; the store's own lock would serialise it anyway, this keeps threads from
piling up on it), and the trio loop never blocks on disk or on another process's lock.

Cancellation: reads are abandoned when cancelled (``abandon_on_cancel=True``): the
caller gets `trio.Cancelled` at once, the thread finishes its statement in the
background and the limiter stays held until it has, so the next call waits for it.
Writes are never abandoned (``abandon_on_cancel=False``): cancelled before their
thread starts, nothing is written; once started, the call waits for the commit and
returns, and the cancellation is delivered at the caller's next checkpoint. A write
is therefore never half-applied from the caller's point of view.

`AsyncStore.deferred` opens the database at the first call, in the worker thread
(like a write: a started open completes): a bridge answers ``initialize`` without
importing sqlite3 or touching the file (issue 15).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import trio

from ..locks import EagerLock
from .errors import StoreClosedError

if TYPE_CHECKING:  # the database module (sqlite3) is imported by the opener
    from .db import Store
    from .models import JournalEntry, SessionRecord

_T = TypeVar("_T")


class AsyncStore:
    """A `Store` whose methods are awaited; see the module docstring for cancellation."""

    def __init__(
        self, store: Store | None = None, *, opener: Callable[[], Store] | None = None
    ) -> None:
        if (store is None) == (opener is None):
            raise TypeError("AsyncStore takes an open store or an opener, not both or neither")
        self._store = store
        #: Opens the store at the first call (`deferred`); None once opened or closed.
        self._opener = opener
        self._opening = trio.Lock()
        # Not a CapacityLimiter: one that yields when free cost every journal write
        # a pass through the scheduler (issue 15).
        self._limiter = cast(trio.CapacityLimiter, EagerLock())

    @classmethod
    def deferred(cls, opener: Callable[[], Store]) -> AsyncStore:
        """A store that runs ``opener`` in the worker thread at its first call
        (or `wait_open`); the opener's errors reach that call."""
        return cls(opener=opener)

    @classmethod
    async def open(cls, path: Path, *, clock: Callable[[], float] = time.time) -> AsyncStore:
        """`Store.open` in a worker thread (moving a bad file aside, migrating).

        Cancellation: not abandoned; a cancelled open still finishes, then the
        cancellation is delivered and the store is closed again.

        Raises:
            StoreVersionError: the file was written by a newer agybridge.
            StoreUnavailableError: no database can be used at this location.
        """
        from .db import Store  # noqa: PLC0415 - sqlite3 only when a store opens

        store = await trio.to_thread.run_sync(functools.partial(Store.open, path, clock=clock))
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            store.close()
            raise
        return cls(store)

    @property
    def store(self) -> Store:
        """The wrapped synchronous store (for code already in a worker thread);
        a deferred store must have been opened (`wait_open`)."""
        if self._store is None:
            raise StoreClosedError("the store is not open (yet, or any more)")
        return self._store

    async def wait_open(self) -> None:
        """Open a deferred store now (no-op once open).

        Cancellation: like a write; a started open completes.

        Raises:
            StoreClosedError: the store was closed.
            Whatever the opener raises (StoreError...): the next call tries again.
        """
        await self._opened()

    async def _opened(self) -> Store:
        if self._store is None:
            async with self._opening:
                if self._store is None:
                    if self._opener is None:
                        raise StoreClosedError("the store was closed")
                    self._store = await trio.to_thread.run_sync(
                        self._opener, limiter=self._limiter, abandon_on_cancel=False
                    )
                    self._opener = None
        return self._store

    async def aclose(self) -> None:
        """Close the store once every running call has finished; idempotent.
        A deferred store that never opened stays unopened.

        Cancellation: runs to completion (the connection is always closed).
        """
        with trio.CancelScope(shield=True):
            async with self._opening:
                self._opener = None
            if self._store is not None:
                await self._write(lambda store: store.close())

    async def run_sync(self, fn: Callable[[Store], _T]) -> _T:
        """Run ``fn(store)`` in the store's worker thread (e.g. the legacy import).

        Cancellation: like a write; once started, ``fn`` runs to completion.
        """
        return await self._write(fn)

    async def _read(self, fn: Callable[[Store], _T]) -> _T:
        # Open already (every call but the first): no _opened coroutine.
        store = self._store if self._store is not None else await self._opened()
        return await trio.to_thread.run_sync(
            fn, store, limiter=self._limiter, abandon_on_cancel=True
        )

    async def _write(self, fn: Callable[[Store], _T]) -> _T:
        store = self._store if self._store is not None else await self._opened()
        return await trio.to_thread.run_sync(
            fn, store, limiter=self._limiter, abandon_on_cancel=False
        )

    # ------------------------------------------------------------------ sessions

    async def upsert_session(self, record: SessionRecord) -> None:
        """`Store.upsert_session`. Cancellation: a started write completes."""
        await self._write(lambda store: store.upsert_session(record))

    async def update_session(self, record: SessionRecord) -> bool:
        """`Store.update_session`. Cancellation: a started write completes."""
        return await self._write(lambda store: store.update_session(record))

    async def create_session(
        self, record: SessionRecord, journal: Iterable[JournalEntry] = ()
    ) -> bool:
        """`Store.create_session`. Cancellation: a started write completes."""
        entries = list(journal)
        return await self._write(lambda store: store.create_session(record, entries))

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """`Store.get_session`. Cancellation: abandoned at once."""
        return await self._read(lambda store: store.get_session(session_id))

    async def list_sessions(
        self,
        *,
        cwd: str | None = None,
        additional_dirs: Sequence[str] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> tuple[list[SessionRecord], str | None]:
        """`Store.list_sessions` (``limit`` None: its default page). Cancellation:
        abandoned at once.

        Raises:
            InvalidCursorError: ``cursor`` was not handed out by this database.
        """
        return await self._read(
            lambda store: store.list_sessions(
                cwd=cwd,
                additional_dirs=additional_dirs,
                cursor=cursor,
                **({} if limit is None else {"limit": limit}),
            )
        )

    async def touch(
        self,
        session_id: str,
        *,
        updated_at: str,
        title: str | None = None,
        conversation_id: str | None = None,
    ) -> bool:
        """`Store.touch`. Cancellation: a started write completes."""
        return await self._write(
            lambda store: store.touch(
                session_id, updated_at=updated_at, title=title, conversation_id=conversation_id
            )
        )

    async def delete_session(self, session_id: str) -> bool:
        """`Store.delete_session`. Cancellation: a started write completes."""
        return await self._write(lambda store: store.delete_session(session_id))

    # ------------------------------------------------------------------ journal

    async def append_journal(self, entries: Sequence[JournalEntry]) -> None:
        """`Store.append_journal`. Cancellation: a started write completes."""
        batch = list(entries)
        await self._write(lambda store: store.append_journal(batch))

    async def record_turn(
        self, entries: Sequence[JournalEntry], record: SessionRecord, *, create: bool = True
    ) -> bool:
        """`Store.record_turn`. Cancellation: a started write completes."""
        batch = list(entries)
        return await self._write(lambda store: store.record_turn(batch, record, create=create))

    async def journal(self, session_id: str) -> list[JournalEntry]:
        """`Store.journal`. Cancellation: abandoned at once."""
        return await self._read(lambda store: store.journal(session_id))

    async def next_turn(self, session_id: str) -> int:
        """`Store.next_turn`. Cancellation: abandoned at once."""
        return await self._read(lambda store: store.next_turn(session_id))

    # ------------------------------------------------------------------ cache and flags

    async def cache_get(self, key: str) -> Any | None:
        """`Store.cache_get`. Cancellation: abandoned at once."""
        return await self._read(lambda store: store.cache_get(key))

    async def cache_put(self, key: str, value: Any, ttl_s: float) -> None:
        """`Store.cache_put`. Cancellation: a started write completes."""
        await self._write(lambda store: store.cache_put(key, value, ttl_s))

    async def meta_get(self, key: str) -> Any | None:
        """`Store.meta_get`. Cancellation: abandoned at once."""
        return await self._read(lambda store: store.meta_get(key))

    async def meta_put(self, key: str, value: Any) -> None:
        """`Store.meta_put`. Cancellation: a started write completes."""
        await self._write(lambda store: store.meta_put(key, value))

    async def save_edit_log(
        self, session_id: str, log: Sequence[Any], blobs: Mapping[str, str]
    ) -> bool:
        """`Store.save_edit_log`. Cancellation: a started write completes."""
        entries, texts = list(log), dict(blobs)
        return await self._write(lambda store: store.save_edit_log(session_id, entries, texts))
