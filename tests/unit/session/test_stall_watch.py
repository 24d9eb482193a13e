"""The session's stall watch: one task for the session's life keeps the running
attempt's stall deadline, which moves with agy's output (trio's mock clock)."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing

from agybridge.session import turn_events as ev
from agybridge.session.deps import Timeouts
from agybridge.session.timers import StallWatch

NOTICE, TIMEOUT = ev.Deadline.STALL_NOTICE, ev.Deadline.STALL_TIMEOUT


@attrs.define
class _Deps:
    timeouts: Timeouts


@attrs.define
class _Session:
    """What the watch reads and posts to."""

    deps: _Deps
    last_output: float = 0.0
    notes: dict[int, Any] = attrs.Factory(dict)
    posted: list[tuple[float, ev.Deadline, float]] = attrs.Factory(list)
    watch: StallWatch | None = None
    #: Every deadline armed, as the attempt's scopes keep them (all disarmed
    #: when it ends: ``actions.arm_deadline``).
    armed: list[ev.ArmDeadline] = attrs.Factory(list)

    def end_attempt(self, seq: float) -> None:
        assert self.watch is not None
        for action in self.armed:
            if action.seq == seq:
                self.watch.disarm(action)

    def post(self, event: ev.DeadlinePassed) -> None:
        self.posted.append((trio.current_time(), event.kind, event.seq))
        if event.kind is NOTICE and self.watch is not None:
            # As the core does: after the notice, the watch keeps the timeout.
            timeout = ev.ArmDeadline(TIMEOUT, event.seq, event.incarnation)
            self.armed.append(timeout)
            self.watch.arm(timeout)


def _session(notice_s: float, timeout_s: float = 0.0) -> _Session:
    return _Session(_Deps(Timeouts(stall_notice_s=notice_s, stall_timeout_s=timeout_s)))


def _arm(session: _Session, watch: StallWatch, seq: float) -> ev.ArmDeadline:
    session.last_output = trio.current_time()  # the prompt was just sent
    action = ev.ArmDeadline(NOTICE, seq, 1)
    session.armed.append(action)
    watch.arm(action)
    return action


def test_notice_once_after_silence_and_the_deadline_moves_with_output() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    session = _session(notice_s=10.0)

    async def main() -> None:
        watch = session.watch = StallWatch(session)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            _arm(session, watch, seq=1)
            await trio.sleep(6)
            session.last_output = trio.current_time()  # agy printed at t=6
            await trio.sleep(100)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=clock)
    assert session.posted == [(16.0, NOTICE, 1)]  # 10 s after the last output, once


def test_a_disarmed_attempt_posts_nothing_and_a_new_one_is_watched_afresh() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    session = _session(notice_s=10.0, timeout_s=30.0)

    async def main() -> None:
        watch = session.watch = StallWatch(session)  # type: ignore[arg-type]
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
        watch = session.watch = StallWatch(session)  # type: ignore[arg-type]
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
        watch = session.watch = StallWatch(session)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            watch.disarm(_arm(session, watch, seq=1))  # its deadline (t=10) stays set
            await trio.sleep(4)
            _arm(session, watch, seq=2)
            await trio.sleep(100)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert session.posted == [(14.0, NOTICE, 2), (34.0, TIMEOUT, 2)]
