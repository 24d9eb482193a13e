"""AsyncStore under trio: calls run in worker threads; cancellation never breaks the store."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from agybridge.store import AsyncStore, JournalEntry, SessionRecord, Store, StoreClosedError

WAIT_S = 10.0


def record(session_id: str, minute: int = 0) -> SessionRecord:
    stamp = f"2026-05-01T10:{minute:02d}:00Z"
    return SessionRecord(session_id, "/w", created_at=stamp, updated_at=stamp)


class GatedStore(Store):
    """A Store whose list and upsert calls wait for a gate, to hold a worker thread mid-call."""

    entered: threading.Event
    gate: threading.Event
    threads: list[int]

    def _arm(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.threads = []

    def _hold(self) -> None:
        self.threads.append(threading.get_ident())
        self.entered.set()
        assert self.gate.wait(WAIT_S), "the test never opened the gate"

    def list_sessions(self, **kwargs: Any) -> tuple[list[SessionRecord], str | None]:
        self._hold()
        return super().list_sessions(**kwargs)

    def upsert_session(self, rec: SessionRecord) -> None:
        self._hold()
        super().upsert_session(rec)


@pytest.fixture
async def gated(tmp_path: Path) -> AsyncIterator[tuple[AsyncStore, GatedStore]]:
    store = GatedStore.open(tmp_path / "a.db")
    assert isinstance(store, GatedStore)
    store._arm()
    wrapped = AsyncStore(store)
    try:
        yield wrapped, store
    finally:
        store.gate.set()
        await wrapped.aclose()


async def wait_entered(store: GatedStore) -> None:
    """Block (in another thread) until the gated call is running in its worker."""
    assert await trio.to_thread.run_sync(store.entered.wait, WAIT_S)


async def test_round_trip_through_worker_threads(tmp_path: Path) -> None:
    """Every operation works awaited, and none runs on the trio thread."""
    astore = await AsyncStore.open(tmp_path / "a.db")
    trio_thread = threading.get_ident()
    seen: set[int] = set()
    original = astore.store.get_session

    def spy(session_id: str) -> SessionRecord | None:
        seen.add(threading.get_ident())
        return original(session_id)

    astore.store.get_session = spy  # type: ignore[method-assign]
    with trio.fail_after(WAIT_S):
        assert await astore.create_session(record("a"), [JournalEntry.user("a", 0, 0, "hi")])
        await astore.upsert_session(record("b", 1))
        assert await astore.touch("a", updated_at="2026-05-01T11:00:00Z", title="T")
        page, cursor = await astore.list_sessions(limit=1)
        assert [r.session_id for r in page] == ["a"] and cursor is not None
        page, cursor = await astore.list_sessions(cursor=cursor)
        assert [r.session_id for r in page] == ["b"] and cursor is None
        got = await astore.get_session("a")
        assert got is not None and got.title == "T"
        await astore.append_journal([JournalEntry.agent("a", 0, 1, "hello")])
        assert [e.text for e in await astore.journal("a")] == ["hi", "hello"]
        assert (await astore.next_turn("a"), await astore.next_turn("b")) == (1, 0)
        await astore.cache_put("k", {"v": 1}, 60)
        assert await astore.cache_get("k") == {"v": 1}
        await astore.meta_put("flag", True)
        assert await astore.meta_get("flag") is True
        assert await astore.run_sync(lambda store: store.path) == tmp_path / "a.db"
        assert await astore.delete_session("a")
        assert not await astore.delete_session("a")
        await astore.aclose()
        await astore.aclose()
    assert seen and trio_thread not in seen
    with pytest.raises(StoreClosedError):
        await astore.get_session("b")


async def test_cancelled_read_returns_at_once_and_the_next_call_works(
    gated: tuple[AsyncStore, GatedStore],
) -> None:
    """A read cancelled mid-statement is abandoned; the next call waits for it, then runs."""
    astore, store = gated
    with trio.fail_after(WAIT_S):
        read_scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_run_in, read_scope, astore.list_sessions)
            await wait_entered(store)
            read_scope.cancel()
        # Back here while the abandoned thread is still inside list_sessions.
        assert read_scope.cancelled_caught
        assert not store.gate.is_set()
        # It still holds the limiter: a write queues behind it rather than racing it.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(astore.meta_put, "after", 1)
            await trio.testing.wait_all_tasks_blocked()
            assert store.meta_get("after") is None
            store.gate.set()
        assert await astore.meta_get("after") == 1
        assert await astore.list_sessions() == ([], None)


async def _run_in(scope: trio.CancelScope, fn: Any) -> None:
    with scope:
        await fn()


async def test_cancelled_write_is_applied_completely(gated: tuple[AsyncStore, GatedStore]) -> None:
    """A write cancelled after it started still commits; the caller sees Cancelled afterwards."""
    astore, store = gated
    finished_call = False

    async def write(scope: trio.CancelScope) -> None:
        nonlocal finished_call
        with scope:
            await astore.upsert_session(record("w"))
            finished_call = True
            await trio.lowlevel.checkpoint()
            raise AssertionError("the cancellation was lost")

    with trio.fail_after(WAIT_S):
        scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write, scope)
            await wait_entered(store)
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert store.get_session("w") is None  # still waiting for its thread
            store.gate.set()
        assert scope.cancelled_caught
        assert finished_call
        assert await astore.get_session("w") == record("w")


async def test_write_cancelled_before_its_thread_starts_writes_nothing(tmp_path: Path) -> None:
    """Cancelled while queued behind another call, a write never runs."""
    astore = await AsyncStore.open(tmp_path / "a.db")
    with trio.CancelScope() as scope:
        scope.cancel()
        await astore.upsert_session(record("never"))
    assert scope.cancelled_caught
    assert await astore.get_session("never") is None
    await astore.aclose()


async def test_calls_queued_behind_a_busy_thread_run_in_arrival_order(
    gated: tuple[AsyncStore, GatedStore],
) -> None:
    """One thread at a time, first come first served; one cancelled while it waits
    for the thread writes nothing and holds nobody up."""
    astore, store = gated
    done: list[str] = []

    async def put(key: str) -> None:
        await astore.meta_put(key, 1)
        done.append(key)

    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(astore.upsert_session, record("first"))
            await wait_entered(store)
            waiting = trio.CancelScope()
            nursery.start_soon(put, "a")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(_run_in, waiting, lambda: put("cancelled"))
            await trio.testing.wait_all_tasks_blocked()
            for key in ("b", "c"):
                nursery.start_soon(put, key)
                await trio.testing.wait_all_tasks_blocked()
            waiting.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert done == [] and store.meta_get("a") is None
            store.gate.set()
    assert done == ["a", "b", "c"]
    assert waiting.cancelled_caught
    assert await astore.meta_get("cancelled") is None


async def test_a_call_on_a_free_store_passes_the_scheduler_once(tmp_path: Path) -> None:
    """A free store starts the call's thread at once: the caller is resumed only
    when the thread is done (a journal write per turn, issue 15)."""
    astore = await AsyncStore.open(tmp_path / "a.db")
    caller: list[trio.lowlevel.Task] = []
    resumed = 0

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            nonlocal resumed
            resumed += task in caller  # known from its first step on: later steps count

    async def call() -> None:
        caller.append(trio.lowlevel.current_task())
        await astore.meta_put("k", 1)

    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            trio.lowlevel.add_instrument(Steps())
            nursery.start_soon(call)
    assert resumed == 1  # after its first step: once, with the thread's result
    assert await astore.meta_get("k") == 1
    await astore.aclose()


async def test_open_cancelled_while_running_closes_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled AsyncStore.open finishes opening, then closes the store and raises Cancelled."""
    entered, gate = threading.Event(), threading.Event()
    opened: list[Store] = []
    real_open = Store.open

    def slow_open(path: Path, **kwargs: Any) -> Store:
        entered.set()
        assert gate.wait(WAIT_S)
        opened.append(real_open(path, **kwargs))
        return opened[-1]

    monkeypatch.setattr(Store, "open", slow_open)
    with trio.fail_after(WAIT_S):
        scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_run_in, scope, lambda: AsyncStore.open(tmp_path / "a.db"))
            assert await trio.to_thread.run_sync(entered.wait, WAIT_S)
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
    assert scope.cancelled_caught
    [store] = opened
    with pytest.raises(StoreClosedError):
        store.get_session("x")


async def test_a_deferred_store_opens_once_at_its_first_calls(tmp_path: Path) -> None:
    """Nothing is opened (no file) until the first call; calls racing to be
    first share one open."""
    path = tmp_path / "d.db"
    opens: list[Store] = []

    def opener() -> Store:
        opens.append(Store.open(path))
        return opens[-1]

    astore = AsyncStore.deferred(opener)
    assert not path.exists() and opens == []
    async with trio.open_nursery() as nursery:
        for n in range(4):
            nursery.start_soon(astore.upsert_session, record(f"s{n}"))
    assert len(opens) == 1 and path.exists()
    assert await astore.get_session("s3") == record("s3")
    await astore.aclose()


async def test_a_deferred_store_closed_unopened_never_opens(tmp_path: Path) -> None:
    """Closing a store nobody used opens nothing; a call after the close says so."""
    astore = AsyncStore.deferred(lambda: Store.open(tmp_path / "d.db"))
    await astore.aclose()
    await astore.aclose()  # idempotent
    with pytest.raises(StoreClosedError, match="closed"):
        await astore.get_session("x")
    assert not (tmp_path / "d.db").exists()


async def test_a_failed_open_reaches_the_call_and_is_tried_again(tmp_path: Path) -> None:
    """The opener's error is the first call's; the next call opens afresh."""
    attempts: list[int] = []

    def opener() -> Store:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("disk on fire")
        return Store.open_memory()

    astore = AsyncStore.deferred(opener)
    with pytest.raises(OSError, match="disk on fire"):
        await astore.wait_open()
    assert await astore.get_session("x") is None
    assert len(attempts) == 2
    await astore.aclose()


def test_a_store_or_an_opener_not_both() -> None:
    with pytest.raises(TypeError, match="not both or neither"):
        AsyncStore()
