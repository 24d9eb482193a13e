"""The fake agy's ``paced`` directive: the load of ``smoke/bench_latency.py``."""

from __future__ import annotations

import re
import time

import pytest

from fake_agy._fake_scenarios import (
    PACED_DEFAULT_COUNT,
    PACED_DEFAULT_INTERVAL_MS,
    PACED_USAGE,
    paced_args,
)

from .test_fake_agy import STREAM, Harness, check_turn, fake, split_turns, user

__all__ = ["fake"]  # the fixture, re-used

DELTA = re.compile(r"(\d+)@(\d+) ")


def stamps(deltas: list[str]) -> list[tuple[int, int]]:
    """(index, monotonic ns) of each ACTIVE delta; every delta must have the shape."""
    parsed = []
    for delta in deltas:
        match = DELTA.fullmatch(delta)
        assert match is not None, f"not a paced delta: {delta!r}"
        parsed.append((int(match.group(1)), int(match.group(2))))
    return parsed


def test_paced_deltas_carry_their_index_and_emission_time(fake: Harness) -> None:
    """N deltas in order, stamped between the prompt and the result, then DONE + result."""
    before = time.monotonic_ns()
    done = fake.run(STREAM, [user("[fake-agy:paced] 40 0"), user("after")])
    after = time.monotonic_ns()
    assert done.code == 0, done.stderr
    (steps, result), (_, second) = split_turns(done.events)
    check_turn(steps, result)
    active = [s["text_delta"] for s in steps if s.get("state") == "ACTIVE"]
    parsed = stamps(active)
    assert [index for index, _ in parsed] == list(range(40))
    times = [ns for _, ns in parsed]
    assert times == sorted(times)
    assert before <= times[0] and times[-1] <= after
    # One agent_response step for all of them, and the process serves the next turn.
    assert len({s["step_index"] for s in steps if s["step_type"] == "agent_response"}) == 1
    assert second["status"] == "SUCCESS"


def test_paced_waits_the_interval_between_deltas(fake: Harness) -> None:
    """Delta i is written no earlier than i intervals after the turn started (a lower
    bound only: a slow machine may write later, never earlier)."""
    sent = time.monotonic_ns()
    done = fake.run(STREAM, [user("[fake-agy:paced] 6 20")])
    assert done.code == 0, done.stderr
    ((steps, result),) = split_turns(done.events)
    check_turn(steps, result)
    parsed = stamps([s["text_delta"] for s in steps if s.get("state") == "ACTIVE"])
    assert len(parsed) == 6
    for index, ns in parsed:
        assert ns - sent >= index * 20_000_000


@pytest.mark.parametrize("args", ["x", "0", "-3", "5 -1", "5 nan", "5 inf", "5 1ms", "1 2 3"])
def test_bad_paced_arguments_end_the_turn_with_a_clear_error(fake: Harness, args: str) -> None:
    done = fake.run(STREAM, [user(f"[fake-agy:paced] {args}"), user("after")])
    assert done.code == 0, done.stderr
    (steps, result), (_, second) = split_turns(done.events)
    assert [s["step_type"] for s in steps] == ["user_input"]
    assert result["status"] == "ERROR"
    assert "bad paced arguments" in result["error"] and PACED_USAGE in result["error"]
    assert second["status"] == "SUCCESS"


def test_paced_arguments_default_and_convert() -> None:
    default = (PACED_DEFAULT_COUNT, PACED_DEFAULT_INTERVAL_MS / 1000)
    assert paced_args([]) == default
    assert paced_args(["7"]) == (7, PACED_DEFAULT_INTERVAL_MS / 1000)
    assert paced_args(["7", "2.5"]) == (7, 0.0025)
    assert paced_args(["7", "0"]) == (7, 0.0)
