"""The session loop's work queue: one ordered queue for everything the loop
does, so the order in which things happen is the order they were posted.

Control events and posted steps never block the poster (they are few and
must get through, e.g. a cancel while the client is slow); agy's messages
wait for room, so a slow client pushes back on agy's readers instead of
buffering without bound. Room is counted in agy events (a read's batch
weighs as many as it holds), so batching does not multiply the bound.
Reads of one child that queue up behind each other become one batch.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable

import attrs
import trio

from ..agy import ChildEvent, ChildEvents, ChildExited, ChildMessage, ChildStderr
from .turn_events import Event


@attrs.frozen
class Step:
    """Work another task hands to the loop, run in order with everything else."""

    run: Callable[[], Awaitable[None]]


#: What the loop takes: a core event, a step, or one of agy's messages.
InboxItem = Event | Step | ChildMessage
#: What `Inbox.send` takes (a posted item is never one of them).
_SINGLE_MESSAGES = frozenset({ChildEvent, ChildStderr, ChildExited})


class Inbox:
    def __init__(self, child_limit: int) -> None:
        self._items: collections.deque[InboxItem] = collections.deque()
        self._child_limit = child_limit
        self._children_queued = 0
        #: The loop, parked in `get` on an empty queue (trio's low-level
        #: park and wake: a fresh Event per wait cost more than the wait).
        self._getter: trio.lowlevel.Task | None = None
        #: Set when room is made; only while a sender waits for it.
        self._room: trio.Event | None = None

    def post(self, item: Event | Step | ChildMessage) -> None:
        """A core event or a :data:`Step`; never blocks."""
        self._items.append(item)
        getter = self._getter
        if getter is not None:
            self._getter = None
            trio.lowlevel.reschedule(getter)

    def post_quietly(self, item: Event | Step) -> None:
        """`post` without waking the loop: it is taken, in order, with whatever
        is posted next (for an item that needs no action of its own)."""
        self._items.append(item)

    async def send(self, message: ChildMessage) -> None:
        """One of agy's messages (the inbox is its children's MessageSink)."""
        weight = len(message.events) if type(message) is ChildEvents else 1
        # A batch heavier than the limit still gets in once the queue is empty.
        while self._children_queued and self._children_queued + weight > self._child_limit:
            if self._room is None:
                self._room = trio.Event()
            await self._room.wait()
        self._children_queued += weight
        items = self._items
        last = items[-1] if items else None
        if (
            type(last) is ChildEvents
            and type(message) is ChildEvents
            and last.incarnation == message.incarnation
        ):
            # Reads queued back to back, the loop not at them yet: one batch
            # (mapped in one go, one write to the client), in the same order.
            items[-1] = ChildEvents(last.incarnation, last.events + message.events)
            return
        self.post(message)

    async def get(self) -> InboxItem:
        """The next item; waits while there is none (one getter at a time)."""
        while not self._items:
            assert self._getter is None, "one task gets from an inbox"
            self._getter = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort_get)
        item = self._items.popleft()
        if isinstance(item, ChildEvents):  # agy's: its room is made
            self._release(len(item.events))
        elif type(item) in _SINGLE_MESSAGES:
            self._release(1)
        return item

    def _release(self, weight: int) -> None:
        self._children_queued -= weight
        room = self._room
        if room is not None:  # senders wait: each looks again
            self._room = None
            room.set()

    def _abort_get(self, _: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        self._getter = None
        return trio.lowlevel.Abort.SUCCEEDED
