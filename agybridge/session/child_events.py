"""agy's messages, as the session loop handles them.

Output of the running turn goes through its mapper and out as updates;
events outside a turn update the session (conversation id, model, usage) or
record a failure for the next prompt; every fact that matters to the turn's
fate (agy spoke, its result, an exit) is fed to the core.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..agy import (
    ChildEvent,
    ChildExited,
    ChildStderr,
    InitEvent,
    MalformedLine,
    ResultEvent,
    StderrKind,
    StepUpdateEvent,
)
from ..translate.outcome import OutcomeKind
from ..translate.tool_calls import NO_OBSERVATION
from ..workspace.mutations import observe_step
from . import output
from . import turn_events as ev

if TYPE_CHECKING:
    from .prompts import PromptWork
    from .session import Session

    #: The unanswered turn running on a child, and its work (`Session.turn_work_on`).
    OnTurn = tuple[ev.Turn, PromptWork] | None

logger = logging.getLogger(__name__)


async def on_child_message(session: Session, message: ChildStderr | ChildExited) -> None:
    """A message other than stdout events (those come batched: :func:`on_child_event`)."""
    inc = message.incarnation
    if isinstance(message, ChildExited):
        session.forget_child(inc)
        on_turn = session.turn_work_on(inc)
        details_error = None
        if on_turn is not None and on_turn[1].mapper is not None:
            details_error = output.result_error(
                on_turn[1].mapper, auth_failed=on_turn[1].auth_failed
            )
        await session.feed(
            ev.ChildExited(
                inc,
                output.exit_error(message),
                clean=message.returncode == 0,
                result_error=details_error,
            )
        )
        return
    session.heard_from(inc)
    line = message.line
    notes = session.notes.get(inc)
    if notes is not None:
        notes.stderr.append(output.quote(line.text))
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
        error = output.result_error(work.mapper, auth_failed=work.auth_failed)
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
        notes = session.notes.get(inc)
        if notes is not None and notes.garbage is None and event.line:
            notes.garbage = output.quote(event.line)
    else:
        if not step and isinstance(event, InitEvent | ResultEvent):
            session.learned(event, inc)
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
            error = None if success else output.failure_before_turn(event)
            await session.feed(ev.ChildResult(inc, success, error=error))
            return session.turn_work_on(inc)
        logger.debug(
            "session %s: event outside a turn from agy[%s]: %r", session.session_id, inc, event
        )
        return on_turn
    work = on_turn[1]
    files, images = mapper.paths_to_read(event)
    seen = NO_OBSERVATION
    if files or images or message.attachment:  # not a text delta: something to read
        seen = await output.observe_for(files, images, message.attachment, session.roots)
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
            denied=any(mapper.denied),
            error=output.result_error(mapper, auth_failed=work.auth_failed),
        )
    )
    return session.turn_work_on(inc)


#: The mapper's reading of a result, as the core's fact.
_OUTCOMES = {
    OutcomeKind.END_TURN: ev.Outcome.END_TURN,
    OutcomeKind.AGY_ERROR: ev.Outcome.AGY_ERROR,
    OutcomeKind.CANCELLED: ev.Outcome.CANCELLED,
}
