"""The session's deadlines post a :class:`~.ev.DeadlinePassed` to the loop;
the core ignores stale ones. Every deadline of a turn attempt ends with the
attempt (its `AttemptScopes`).

The rare ones (agy's start-up, an error's details) are a task each, in the
attempt's cancel scope. The stall deadline, which every turn arms, is kept by
one `StallWatch` task for the session's life: arming and disarming it are
assignments, where a task per turn cost a spawn, a cancellation and two task
steps of every turn (issue 15).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from . import output
from . import turn_events as ev

if TYPE_CHECKING:
    from .session import Session

#: After an ERROR result, how long the turn may wait for the AGY_ERROR line
#: from the other pipe when agy neither prints it nor exits.
ERROR_DETAILS_GRACE_S = 0.5


async def arm(session: Session, action: ev.ArmDeadline) -> None:
    """Wait out a start-up or details deadline (run in the attempt's scope:
    gone with it)."""
    assert action.kind not in STALL_KINDS, "the StallWatch keeps it"
    if action.kind is ev.Deadline.DETAILS:
        await trio.sleep(ERROR_DETAILS_GRACE_S)
        error = session.result_error(action.seq)
        session.post(ev.DeadlinePassed(action.kind, action.seq, action.incarnation, error))
        return
    seconds = session.deps.timeouts.startup_s
    await trio.sleep(seconds)
    error = output.silence_error("startup", seconds, session.notes.get(action.incarnation))
    session.post(ev.DeadlinePassed(action.kind, action.seq, action.incarnation, error))


#: The deadlines the one `StallWatch` keeps (the others are a task each).
STALL_KINDS = frozenset({ev.Deadline.STALL_NOTICE, ev.Deadline.STALL_TIMEOUT})


class StallWatch:
    """Watches the stall deadline the core armed last: the notice (then the
    core arms the timeout) or the timeout, whichever is due first. The deadline
    moves with every line agy prints (``session.last_output``): it is checked
    when it passes, and set again from the newest output. Whether the notice
    was given is the core's to know: the watch only reports what passed."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._armed: ev.ArmDeadline | None = None
        #: The scope `run` sleeps in; its deadline is the watch's.
        self._scope = trio.CancelScope()

    def arm(self, action: ev.ArmDeadline) -> None:
        """Watch ``action``'s deadline (replacing any other)."""
        self._armed = action
        deadline = self._deadline()
        # Only ever brought forward: a deadline set before wakes the task
        # early, and it sleeps again until this one, as when output moved it.
        if deadline < self._scope.deadline:  # noqa: PLR1730
            self._scope.deadline = deadline

    def disarm(self, action: ev.ArmDeadline) -> None:
        """Its attempt ended. (The sleeping task is not woken: if the deadline
        passes first it finds nothing armed, and sleeps on.)"""
        if self._armed is action:
            self._armed = None

    def _limits(self) -> list[float]:
        armed = self._armed
        if armed is None:
            return []
        timeouts = self._session.deps.timeouts
        notice_s, timeout_s = timeouts.stall_notice_s, timeouts.stall_timeout_s
        notice = [notice_s] if armed.kind is ev.Deadline.STALL_NOTICE and notice_s > 0 else []
        return notice + ([timeout_s] if timeout_s > 0 else [])

    def _deadline(self) -> float:
        limits = self._limits()
        return self._session.last_output + min(limits) if limits else math.inf

    async def run(self) -> None:
        """For the session's life (its nursery)."""
        while True:
            with trio.CancelScope(deadline=self._deadline()) as self._scope:
                await trio.sleep_forever()
            self._check()

    def _check(self) -> None:
        action = self._armed
        if action is None:
            return
        session = self._session
        timeouts = session.deps.timeouts
        now = trio.current_time()
        # The same sums as the deadline: a deadline that passed is seen to have.
        if timeouts.stall_timeout_s > 0 and now >= session.last_output + timeouts.stall_timeout_s:
            self._armed = None
            error = output.silence_error(
                "stall", timeouts.stall_timeout_s, session.notes.get(action.incarnation)
            )
            kind = ev.Deadline.STALL_TIMEOUT
            session.post(ev.DeadlinePassed(kind, action.seq, action.incarnation, error))
            return
        notice_s = timeouts.stall_notice_s
        noticing = action.kind is ev.Deadline.STALL_NOTICE and notice_s > 0
        if noticing and now >= session.last_output + notice_s:
            self._armed = None  # the core arms the timeout next
            kind = ev.Deadline.STALL_NOTICE
            session.post(ev.DeadlinePassed(kind, action.seq, action.incarnation))
