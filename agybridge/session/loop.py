"""The session's loop, and what agy's messages mean to it.

The loop is the only task that feeds the core, maps agy output and sends the
session's updates: it takes one work item at a time (a core event, a read's
worth of agy events, another child message, or a step posted by another
task) and performs the actions the core returns, in order. A read's events
are mapped in one step and their updates handed to the client as one batch.
A prompt's answer is one of those actions, so every update of a turn is
written before its answer and nothing of it after.

agy's output of the running turn goes through its mapper and out as updates;
events outside a turn update the session (conversation id, model, usage);
every fact that matters to the turn's fate (agy spoke, its result, an exit)
is fed to the core, which decides.

The inbox (:class:`Inbox`) is the loop's work queue: one ordered queue for
everything the loop does, so the order in which things happen is the order
they were posted. Control events and posted steps never block the poster
(they are few and must get through, e.g. a cancel while the client is slow);
agy's messages wait for room, so a slow client pushes back on agy's readers
instead of buffering without bound. Room is counted in agy events (a read's
batch weighs as many as it holds), so batching does not multiply the bound.
Reads of one child that queue up behind each other become one batch.
"""

from __future__ import annotations

import collections
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs
import trio

from ..agy import (
    ChildEvent,
    ChildEvents,
    ChildExited,
    ChildMessage,
    ChildStderr,
    InitEvent,
    MalformedLine,
    ResultEvent,
    StderrKind,
    StepUpdateEvent,
)
from ..agy.state import brain_root, conversation_folder
from ..translate.observation import NO_OBSERVATION
from ..translate.outcome import OutcomeKind
from ..workspace.mutations import observe_step
from ..workspace.reads import ImageScope, observe_for
from . import errors
from . import turn_events as ev
from .actions import PERFORM, agy_init
from .errors import internal_error

if TYPE_CHECKING:
    from .actions import SessionHost as Session
    from .core_state import Turn
    from .prompts import PromptWork

    #: The unanswered turn running on a child, and its work (`Session.turn_work_on`).
    OnTurn = tuple[Turn, PromptWork] | None

logger = logging.getLogger(__name__)


@attrs.frozen
class Step:
    """Work another task hands to the loop, run in order with everything else."""

    run: Callable[[], Awaitable[None]]


#: What the loop takes: a core event, a step, or one of agy's messages.
InboxItem = ev.Event | Step | ChildMessage
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

    def post(self, item: ev.Event | Step | ChildMessage) -> None:
        """A core event or a :data:`Step`; never blocks."""
        self._items.append(item)
        getter = self._getter
        if getter is not None:
            self._getter = None
            trio.lowlevel.reschedule(getter)

    def post_quietly(self, item: ev.Event | Step) -> None:
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


def _image_scope(session: Session) -> ImageScope:
    """The session's roots and its own agy conversation's folder: images agy
    generates land there (contract.md §7), another conversation's never show."""
    folder = conversation_folder(session.conversation.id)
    return ImageScope(session.roots(), conversation=folder, brain=brain_root())


async def on_child_message(session: Session, message: ChildStderr | ChildExited) -> None:
    """A message other than stdout events (those come batched: :func:`on_child_event`)."""
    inc = message.incarnation
    if isinstance(message, ChildExited):
        session.slot.forget(inc)
        on_turn = session.turn_work_on(inc)
        details_error = None
        if on_turn is not None and on_turn[1].mapper is not None:
            details_error = errors.result_error(
                on_turn[1].mapper, auth_failed=on_turn[1].auth_failed
            )
        await session.feed(
            ev.ChildExited(
                inc,
                errors.exit_error(message),
                clean=message.returncode == 0,
                result_error=details_error,
            )
        )
        return
    session.heard_from(inc)
    line = message.line
    notes = session.slot.notes(inc)
    if notes is not None:
        notes.stderr.append(errors.quote(line.text))
    on_turn = session.turn_work_on(inc)
    if on_turn is None:
        return
    work = on_turn[1]
    if line.kind is StderrKind.AUTH:
        logger.warning("session %s: agy reports an auth problem: %s", session.session_id, line.text)
        work.auth_failed = True
    assert work.mapper is not None
    for update in work.mapper.feed_stderr(line):
        await session.outlet.send(update)
    if line.kind is StderrKind.AGY_ERROR:
        error = errors.result_error(work.mapper, auth_failed=work.auth_failed)
        await session.feed(ev.AgyErrorLine(inc, error))


async def on_child_event(session: Session, message: ChildEvent, on_turn: OnTurn) -> OnTurn:
    """One stdout event (the loop unpacks a read's :class:`~..agy.ChildEvents`;
    the hot path: most are text deltas of a turn already under way).

    ``on_turn`` is ``session.turn_work_on(message.incarnation)``; what it is
    after the event is returned. Only feeding the core changes it, so a read's
    events look it up once, not once each.
    """
    inc = message.incarnation
    event = message.event
    kind = type(event)
    step = kind is StepUpdateEvent  # the hot path: no other kind to test for
    if not step and isinstance(event, MalformedLine):
        notes = session.slot.notes(inc)
        if notes is not None and notes.garbage is None and event.line:
            notes.garbage = errors.quote(event.line)
    else:
        if not step and isinstance(event, InitEvent | ResultEvent):
            session.learned(event, inc)
            if isinstance(event, InitEvent):
                await agy_init(session, event, inc, on_turn[1].mapper if on_turn else None)
        heard = on_turn is not None and (step or kind is ResultEvent)
        # A turn heard already is not heard again: then only the child's first
        # line is news (the core need not look the turn up a second time).
        first_heard = heard and on_turn is not None and not on_turn[0].heard
        if session.core.output_is_news(inc, first_heard):
            await session.feed(ev.ChildOutput(inc, heard=heard))
            on_turn = session.turn_work_on(inc)
    mapper = on_turn[1].mapper if on_turn is not None else None
    if on_turn is None or mapper is None or mapper.outcome is not None:
        if isinstance(event, ResultEvent) and on_turn is None:
            # A result no turn is mapping: agy failed outside a turn (or stale).
            success = event.result.status == "SUCCESS"
            error = None if success else errors.failure_before_turn(event)
            await session.feed(ev.ChildResult(inc, success, error=error))
            return session.turn_work_on(inc)
        logger.debug(
            "session %s: event outside a turn from agy[%s]: %r", session.session_id, inc, event
        )
        return on_turn
    work = on_turn[1]
    files, images = mapper.needs.paths_to_read(event)
    seen = NO_OBSERVATION
    if files or images or message.attachment:  # not a text delta: something to read
        seen = await observe_for(files, images, message.attachment, lambda: _image_scope(session))
    updates = mapper.feed(event, seen)
    if updates:
        await session.outlet.send_all(updates)
    if type(event) is StepUpdateEvent and event.step_update.step_type == "tool":
        await observe_step(session.mutations, event, message.attachment, mapper.tools.call_prefix)
    outcome = mapper.outcome
    if outcome is None:
        return on_turn
    await session.feed(
        ev.ChildResult(
            inc,
            success=outcome.status == "SUCCESS",
            outcome=_OUTCOMES[outcome.kind],
            details_pending=outcome.kind is OutcomeKind.AGY_ERROR
            and mapper.agy_error_details is None,
            denied=frozenset(p for p in mapper.denied if p),
            error=errors.result_error(mapper, auth_failed=work.auth_failed),
        )
    )
    return session.turn_work_on(inc)


#: The mapper's reading of a result, as the core's fact.
_OUTCOMES = {
    OutcomeKind.END_TURN: ev.Outcome.END_TURN,
    OutcomeKind.AGY_ERROR: ev.Outcome.AGY_ERROR,
    OutcomeKind.CANCELLED: ev.Outcome.CANCELLED,
}


class SessionLoop:
    """The session's loop: the one task that feeds the core, maps agy's
    output and sends the session's updates; see the module docstring."""

    def __init__(self, host: Session, buffer: int) -> None:
        self._host = host
        #: What the loop takes next, in the order it was posted.
        self.inbox = Inbox(buffer)
        #: The core's actions not yet performed, while some are being performed.
        self._performing: deque[ev.Action] | None = None
        #: Callers waiting for the loop (released if it ends first).
        self._waiting: set[trio.Event] = set()
        #: The loop is over: nothing posted from now on would ever be done.
        self.ended = False

    def post(self, item: ev.Event | Step) -> None:
        self.inbox.post(item)

    def post_quietly(self, item: ev.Event) -> None:
        """`post` without waking the loop (an item that needs no action of its own)."""
        self.inbox.post_quietly(item)

    async def run(self) -> None:
        """Take one item at a time until the core says the session is closed."""
        host = self._host
        core = host.core
        while not core.closed:
            item = await self.inbox.get()
            if isinstance(item, ChildEvents):
                # One read of agy's stdout: mapped in one go, written as one.
                inc = item.incarnation
                host.heard_from(inc)
                try:
                    async with host.outlet.holding():
                        on_turn = host.turn_work_on(inc)
                        for message in item.events:
                            try:
                                on_turn = await on_child_event(host, message, on_turn)
                            except Exception as exc:
                                await self._on_bug(exc)
                                on_turn = host.turn_work_on(inc)
                            if core.closed:
                                break
                except Exception as exc:  # handing the batch over failed
                    await self._on_bug(exc)
                continue
            try:
                if isinstance(item, Step):
                    await item.run()
                elif isinstance(item, ChildEvent):
                    host.heard_from(item.incarnation)
                    await on_child_event(host, item, host.turn_work_on(item.incarnation))
                elif isinstance(item, ChildStderr | ChildExited):
                    await on_child_message(host, item)
                else:
                    await self.feed(item)
            except Exception as exc:
                await self._on_bug(exc)

    def end(self) -> None:
        """The loop is over (sync: called as the session ends, before any await)."""
        self.ended = True
        for waiter in self._waiting:
            waiter.set()

    async def _on_bug(self, exc: Exception) -> None:
        # A bug while serving: the running turn fails with it (never
        # "cancelled"), its agy is replaced, the session goes on.
        logger.exception("session %s: internal error", self._host.session_id)
        await self.feed(ev.InternalError(internal_error(exc)))

    async def feed(self, event: ev.Event) -> None:
        """Apply a core event and perform its actions (in the loop only)."""
        # The updates held so far were mapped for the turn running now.
        held_for = self._host.core.running_seq(mapped=True)
        actions = self._host.core.handle(event)
        if not actions:
            return
        if self._performing is not None:
            # Fed by an action (a child spawned): the core decided these after
            # the actions still being performed, so they are performed after them.
            self._performing.extend(actions)
            return
        # Updates held for the batch go first: an action may answer the prompt.
        async with self._host.outlet.unheld() as failed:
            if failed is not None:
                # Those updates were that turn's: the bug is its to report.
                logger.error("session %s: internal error", self._host.session_id, exc_info=failed)
                bug = ev.InternalError(internal_error(failed), held_for)
                actions = self._host.core.handle(bug) + actions
            await self.perform(actions)

    async def perform(self, todo: list[ev.Action]) -> None:
        """Perform the core's actions, in order. One that fails is a fact for
        the core (h11's ``send_failed``); its reaction is performed before the
        rest, which the core counts as done (a dropped spawn, retire or answer
        would leave a prompt waiting forever)."""
        queue = self._performing = deque(todo)
        try:
            while queue:
                action = queue.popleft()
                try:
                    await PERFORM[type(action)](self._host, action)
                except Exception as exc:
                    logger.exception("session %s: internal error", self._host.session_id)
                    failed = ev.ActionFailed(action, internal_error(exc))
                    queue.extendleft(reversed(self._host.core.handle(failed)))
        finally:
            self._performing = None

    async def run_in_loop(self, step: Callable[[], Awaitable[None]]) -> None:
        """Post ``step`` and wait until the loop has run it (or has ended)."""
        if self.ended:
            return
        done = trio.Event()
        self._waiting.add(done)

        async def run_then_release() -> None:
            try:
                await step()
            finally:
                done.set()

        self.inbox.post(Step(run_then_release))
        try:
            await done.wait()
        finally:
            self._waiting.discard(done)
