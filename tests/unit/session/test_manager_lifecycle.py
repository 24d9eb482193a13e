"""`SessionManager.lifecycle`: one load/resume/close/delete of a session id at
a time across every client of the manager (the daemon's connections)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agybridge.agy import EscalationPolicy
from agybridge.session import SessionDeps, SessionManager


def _manager() -> SessionManager:
    return SessionManager(
        SessionDeps(agy_bin="agy", policy=EscalationPolicy(), max_line_bytes=1024)
    )


async def test_one_holder_per_session_id_in_arrival_order() -> None:
    """A second holder of the same id waits, in FIFO order; another id does not wait."""
    manager = _manager()
    order: list[str] = []
    release = trio.Event()

    async def hold(name: str, session_id: str) -> None:
        async with manager.lifecycle(session_id):
            order.append(name)
            if name == "first":
                await release.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, "first", "s1")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(hold, "second", "s1")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(hold, "third", "s1")
        nursery.start_soon(hold, "other", "s2")
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["first", "other"]
        release.set()
    assert order == ["first", "other", "second", "third"]


async def test_the_lock_is_dropped_when_nobody_holds_or_waits() -> None:
    """Held, and a wait for it cancelled: the table is empty after."""
    manager = _manager()
    async with manager.lifecycle("s1"):
        with trio.CancelScope() as waiting:
            waiting.cancel()
            async with manager.lifecycle("s1"):
                pytest.fail("the lock is held: this wait must be cancelled")
    assert manager._lifecycle == {}  # the table must not grow


async def test_holding_the_same_id_twice_in_one_task_raises_instead_of_deadlocking() -> None:
    manager = _manager()
    async with manager.lifecycle("s1"):
        with pytest.raises(RuntimeError):
            async with manager.lifecycle("s1"):
                pass  # pragma: no cover
    assert manager._lifecycle == {}
