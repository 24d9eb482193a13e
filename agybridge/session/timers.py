"""The session's deadlines (a port of the session loop): each posts a
:class:`~.turn_events.DeadlinePassed` or :class:`~.turn_events.IdlePassed`
to the loop when it passes; the core ignores stale ones. Every deadline of a
turn attempt ends with the attempt (its `AttemptScopes`).

The rare ones (agy's start-up, an error's details) are a task each, in the
attempt's cancel scope. The stall deadline, which every turn arms, is kept by
one `StallWatch` task for the session's life, so arming it needs no task of
its own; it moves with agy's output (:meth:`Deadlines.heard`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable

import trio

from . import errors
from . import turn_events as ev
from .deps import Timeouts
from .prompts import AttemptScopes

#: After an ERROR result, how long the turn may wait for the AGY_ERROR line
#: from the other pipe when agy neither prints it nor exits.
ERROR_DETAILS_GRACE_S = 0.5
#: The deadlines the one `StallWatch` keeps (the others are a task each).
STALL_KINDS = frozenset({ev.Deadline.STALL_NOTICE, ev.Deadline.STALL_TIMEOUT})

Post = Callable[[ev.Event], None]
StartSoon = Callable[[Callable[[], Awaitable[None]], AttemptScopes | None], None]


class Deadlines:
    """The session's timers; see the module docstring."""

    def __init__(
        self,
        *,
        timeouts: Timeouts,
        post: Post,
        start_soon: StartSoon,
        notes: Callable[[int], errors.ChildNotes | None],
        result_error: Callable[[float], errors.SessionError | None],
    ) -> None:
        self._timeouts = timeouts
        self._post = post
        self._start_soon = start_soon
        self._notes = notes
        self._result_error = result_error
        #: When agy last printed (the stall deadline moves with it).
        self.last_output = 0.0
        self.stall_watch = StallWatch(self)
        #: The idle timeout's wait, replaced when re-armed.
        self._idle = AttemptScopes()

    def heard(self, now: float) -> None:
        """agy printed (or was just sent a prompt): the stall deadline moves."""
        self.last_output = now

    def arm(self, action: ev.ArmDeadline, attempt: AttemptScopes) -> None:
        """Watch ``action``'s deadline until its turn attempt ends."""
        if action.kind in STALL_KINDS:
            self.stall_watch.arm(action)
            attempt.on_cancel(functools.partial(self.stall_watch.disarm, action))
        else:
            self._start_soon(functools.partial(self._wait, action), attempt)

    def arm_idle(self, action: ev.ArmIdle) -> None:
        """The session is idle: stop agy after the idle timeout (if one is set)."""
        idle_s = self._timeouts.idle_s
        if idle_s <= 0:
            return
        self._idle.cancel()  # a newer idle period replaces the older one
        self._idle = AttemptScopes()

        async def wait_idle() -> None:
            await trio.sleep(idle_s)
            self._post(ev.IdlePassed(action.token))

        self._start_soon(wait_idle, self._idle)

    async def _wait(self, action: ev.ArmDeadline) -> None:
        """Wait out a start-up or details deadline (in the attempt's scope:
        gone with it)."""
        if action.kind is ev.Deadline.DETAILS:
            await trio.sleep(ERROR_DETAILS_GRACE_S)
            error = self._result_error(action.seq)
        else:
            seconds = self._timeouts.startup_s
            await trio.sleep(seconds)
            error = errors.silence_error("startup", seconds, self._notes(action.incarnation))
        self._post(ev.DeadlinePassed(action.kind, action.seq, action.incarnation, error))

    # For the StallWatch.

    @property
    def timeouts(self) -> Timeouts:
        return self._timeouts

    def post(self, event: ev.DeadlinePassed) -> None:
        self._post(event)

    def notes(self, incarnation: int) -> errors.ChildNotes | None:
        return self._notes(incarnation)


class StallWatch:
    """Watches the stall deadline the core armed last: the notice (then the
    core arms the timeout) or the timeout, whichever is due first. The deadline
    moves with every line agy prints (``last_output``): it is checked when it
    passes, and set again from the newest output. Whether the notice was given
    is the core's to know: the watch only reports what passed."""

    def __init__(self, owner: Deadlines) -> None:
        self._owner = owner
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
        timeouts = self._owner.timeouts
        notice_s, timeout_s = timeouts.stall_notice_s, timeouts.stall_timeout_s
        notice = [notice_s] if armed.kind is ev.Deadline.STALL_NOTICE and notice_s > 0 else []
        return notice + ([timeout_s] if timeout_s > 0 else [])

    def _deadline(self) -> float:
        limits = self._limits()
        return self._owner.last_output + min(limits) if limits else math.inf

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
        owner = self._owner
        timeouts = owner.timeouts
        now = trio.current_time()
        # The same sums as the deadline: a deadline that passed is seen to have.
        if timeouts.stall_timeout_s > 0 and now >= owner.last_output + timeouts.stall_timeout_s:
            self._armed = None
            error = errors.silence_error(
                "stall", timeouts.stall_timeout_s, owner.notes(action.incarnation)
            )
            kind = ev.Deadline.STALL_TIMEOUT
            owner.post(ev.DeadlinePassed(kind, action.seq, action.incarnation, error))
            return
        notice_s = timeouts.stall_notice_s
        noticing = action.kind is ev.Deadline.STALL_NOTICE and notice_s > 0
        if noticing and now >= owner.last_output + notice_s:
            self._armed = None  # the core arms the timeout next
            kind = ev.Deadline.STALL_NOTICE
            owner.post(ev.DeadlinePassed(kind, action.seq, action.incarnation))
