"""The session's deadlines: each is a task that posts a
:class:`~.turns.DeadlinePassed` to the loop; the core ignores stale ones.
Every deadline of a turn attempt lives in that attempt's cancel scope."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from . import output, turns

if TYPE_CHECKING:
    from .session import Session

#: After an ERROR result, how long the turn may wait for the AGY_ERROR line
#: from the other pipe when agy neither prints it nor exits.
ERROR_DETAILS_GRACE_S = 0.5


async def arm(session: Session, action: turns.ArmDeadline) -> None:
    """Wait out one deadline (run in the attempt's scope: gone with it)."""
    if action.kind is turns.Deadline.STALL_NOTICE:
        await _watch_stall(session, action)
        return
    if action.kind is turns.Deadline.DETAILS:
        await trio.sleep(ERROR_DETAILS_GRACE_S)
        error = session.result_error(action.seq)
        session.post(turns.DeadlinePassed(action.kind, action.seq, action.incarnation, error))
        return
    seconds = session.deps.timeouts.startup_s
    await trio.sleep(seconds)
    error = output.silence_error("startup", seconds, session.notes.get(action.incarnation))
    session.post(turns.DeadlinePassed(action.kind, action.seq, action.incarnation, error))


async def _watch_stall(session: Session, action: turns.ArmDeadline) -> None:
    """Tell the user once when agy has printed nothing for the notice time;
    fail the turn after the stall timeout (if set). The deadline moves with
    every line agy prints."""
    timeouts = session.deps.timeouts
    notice_s, timeout_s = timeouts.stall_notice_s, timeouts.stall_timeout_s
    noticed = notice_s <= 0
    while True:
        limits = ([] if noticed else [notice_s]) + ([timeout_s] if timeout_s > 0 else [])
        if not limits:
            return
        await trio.sleep_until(session.last_output + min(limits))
        silent_for = trio.current_time() - session.last_output
        if timeout_s > 0 and silent_for >= timeout_s:
            error = output.silence_error("stall", timeout_s, session.notes.get(action.incarnation))
            kind = turns.Deadline.STALL_TIMEOUT
            session.post(turns.DeadlinePassed(kind, action.seq, action.incarnation, error))
            return
        if not noticed and silent_for >= notice_s:
            noticed = True
            kind = turns.Deadline.STALL_NOTICE
            session.post(turns.DeadlinePassed(kind, action.seq, action.incarnation))
