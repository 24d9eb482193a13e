"""The session loop's inbox: control never blocks, agy's messages are bounded
in events (a batch weighs what it holds), order is kept."""

from __future__ import annotations

import trio
import trio.testing

from agybridge.agy import ChildEvent, ChildEvents, MalformedLine
from agybridge.session.inbox import Inbox


def _event(n: int) -> ChildEvent:
    return ChildEvent(1, MalformedLine(line=str(n), reason="test"))


def _batch(first: int, count: int) -> ChildEvents:
    return ChildEvents(1, tuple(_event(n) for n in range(first, first + count)))


async def test_batches_count_by_events_and_order_is_kept() -> None:
    inbox = Inbox(child_limit=10)
    taken: list[object] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:

            async def producer() -> None:
                await inbox.send(_batch(0, 6))
                await inbox.send(_batch(6, 6))  # 12 > 10: waits for room
                await inbox.send(_batch(12, 30))  # heavier than the limit: alone
                taken.append("all put")

            nursery.start_soon(producer)
            await trio.testing.wait_all_tasks_blocked()
            inbox.post("control")  # never blocks, even with the children's queue full
            assert taken == []
            got = [await inbox.get() for _ in range(4)]
            await trio.testing.wait_all_tasks_blocked()
            assert taken == ["all put"]
    assert got[1] == "control"
    events = [e for item in got if isinstance(item, ChildEvents) for e in item.events]
    assert [e.event.line for e in events] == [str(n) for n in range(42)]  # type: ignore[union-attr]


async def test_a_parked_get_wakes_on_post_and_a_cancelled_one_leaves_no_trace() -> None:
    inbox = Inbox(child_limit=10)
    got: list[object] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def abandoned_get() -> None:
                with scope:
                    got.append(await inbox.get())

            nursery.start_soon(abandoned_get)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
        assert got == []
        async with trio.open_nursery() as nursery:

            async def getter() -> None:
                got.append(await inbox.get())
                got.append(await inbox.get())

            nursery.start_soon(getter)
            await trio.testing.wait_all_tasks_blocked()
            inbox.post("first")  # wakes the parked getter
            inbox.post("second")  # queued: taken without waiting
    assert got == ["first", "second"]
