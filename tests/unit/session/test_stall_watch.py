"""The session's stall watch: one task for the session's life keeps the running
attempt's stall deadline, which moves with agy's output (trio's mock clock)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from agybridge.session import turn_events as ev
from agybridge.session.deps import Timeouts
from agybridge.session.prompts import AttemptScopes
from agybridge.session.timers import Deadlines, StallWatch

NOTICE, TIMEOUT = ev.Deadline.STALL_NOTICE, ev.Deadline.STALL_TIMEOUT


class _Session:
    """The session's deadlines with a loop that reacts to a notice as the core
    does (it arms the stall timeout next); what was posted, with its time."""

    def __init__(self, notice_s: float, timeout_s: float) -> None:
        self.posted: list[tuple[float, ev.Deadline, float]] = []
        self.deadlines = Deadlines(
            timeouts=Timeouts(stall_notice_s=notice_s, stall_timeout_s=timeout_s),
            post=self.post,
            start_soon=self.start_soon,
            notes=lambda incarnation: None,
            result_error=lambda seq: None,
        )
        #: Each attempt's scopes (the deadlines it armed end with it).
        self.attempts: dict[float, AttemptScopes] = {}

    def start_soon(self, fn: Any, scopes: AttemptScopes | None) -> None:
        raise AssertionError("the stall deadlines need no task of their own")

    def arm(self, kind: ev.Deadline, seq: float) -> ev.ArmDeadline:
        action = ev.ArmDeadline(kind, seq, 1)
        self.deadlines.arm(action, self.attempts.setdefault(seq, AttemptScopes()))
        return action

    def end_attempt(self, seq: float) -> None:
        self.attempts.pop(seq).cancel()

    def post(self, event: ev.Event) -> None:
        assert isinstance(event, ev.DeadlinePassed)
        self.posted.append((trio.current_time(), event.kind, event.seq))
        if event.kind is NOTICE:
            self.arm(TIMEOUT, event.seq)  # as the core does

    @property
    def watch(self) -> StallWatch:
        return self.deadlines.stall_watch

    def heard(self) -> None:
        self.deadlines.heard(trio.current_time())


def _session(notice_s: float, timeout_s: float = 0.0) -> _Session:
    return _Session(notice_s, timeout_s)


def _arm(session: _Session, watch: StallWatch, seq: float) -> ev.ArmDeadline:
    session.heard()  # the prompt was just sent
    return session.arm(NOTICE, seq)


def test_notice_once_after_silence_and_the_deadline_moves_with_output() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    session = _session(notice_s=10.0)

    async def main() -> None:
        watch = session.watch
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            _arm(session, watch, seq=1)
            await trio.sleep(6)
            session.heard()  # agy printed at t=6
            await trio.sleep(100)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=clock)
    assert session.posted == [(16.0, NOTICE, 1)]  # 10 s after the last output, once


def test_a_disarmed_attempt_posts_nothing_and_a_new_one_is_watched_afresh() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    session = _session(notice_s=10.0, timeout_s=30.0)

    async def main() -> None:
        watch = session.watch
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            _arm(session, watch, seq=1)
            await trio.sleep(12)  # noticed at t=10
            session.end_attempt(1)
            await trio.sleep(50)  # no timeout for the ended attempt
            _arm(session, watch, seq=2)  # t=62
            await trio.sleep(100)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=clock)
    assert session.posted == [(10.0, NOTICE, 1), (72.0, NOTICE, 2), (92.0, TIMEOUT, 2)]


def test_disarming_another_attempt_leaves_the_current_one_armed() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    session = _session(notice_s=0.0, timeout_s=5.0)  # no notice: only the timeout

    async def main() -> None:
        watch = session.watch
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            old = _arm(session, watch, seq=1)
            _arm(session, watch, seq=2)
            watch.disarm(old)
            await trio.sleep(60)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=clock)
    assert session.posted == [(5.0, TIMEOUT, 2)]


def test_an_attempt_armed_before_the_last_ones_deadline_is_noticed_on_time() -> None:
    """Arming never moves the deadline later (the last attempt's wakes the
    task early): the new attempt is noticed at its own time, once."""
    session = _session(notice_s=10.0, timeout_s=30.0)

    async def main() -> None:
        watch = session.watch
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            watch.disarm(_arm(session, watch, seq=1))  # its deadline (t=10) stays set
            await trio.sleep(4)
            _arm(session, watch, seq=2)
            await trio.sleep(100)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert session.posted == [(14.0, NOTICE, 2), (34.0, TIMEOUT, 2)]
