"""The session loop's inbox: control never blocks, agy's messages are bounded
in events (a batch weighs what it holds), order is kept."""

from __future__ import annotations

import trio
import trio.testing

from agybridge.agy import ChildEvent, ChildEvents, MalformedLine
from agybridge.session.loop import Inbox


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


async def test_reads_queued_back_to_back_are_taken_as_one_batch() -> None:
    """A child's batches that queue up behind each other are handed over as
    one, in order, weighing what they hold; anything between them, or another
    child's batch, keeps them apart."""
    inbox = Inbox(child_limit=10)
    other = ChildEvents(2, (ChildEvent(2, MalformedLine(line="other", reason="test")),))
    with trio.fail_after(10):
        await inbox.send(_batch(0, 2))
        await inbox.send(_batch(2, 3))
        inbox.post("control")
        await inbox.send(_batch(5, 1))
        await inbox.send(other)

        async def sender() -> None:
            await inbox.send(_batch(6, 4))  # 7 queued + 4 > 10: waits for room

        got: list[object] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            got.append(await inbox.get())
            await trio.testing.wait_all_tasks_blocked()  # room: the sender's batch is queued
            for _ in range(4):
                got.append(await inbox.get())
    lines = [
        [e.event.line for e in item.events] if isinstance(item, ChildEvents) else item  # type: ignore[union-attr]
        for item in got
    ]
    assert lines == [
        ["0", "1", "2", "3", "4"],
        "control",
        ["5"],
        ["other"],
        ["6", "7", "8", "9"],
    ]
