"""The fake agy's edge knobs and scenarios for the session-core tests (``_fake_edge``)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from agybridge.testing._fake_edge import GARBAGE_LINE

from .test_fake_agy import DEADLINE_S, STREAM, Harness, fake, user

__all__ = ["fake"]  # the fixture, re-used


def test_total_usage_reports_only_total_tokens(fake: Harness) -> None:
    """Every usage object of a total-usage turn is ``{"total_tokens": N}`` with N > 0."""
    done = fake.run(STREAM, [user("[fake-agy:total-usage] hi")])
    assert done.code == 0, done.stderr
    usages = [(e.get("step_update") or e.get("result") or {}).get("usage") for e in done.events]
    usages = [u for u in usages if u is not None]
    assert usages and all(list(u) == ["total_tokens"] and u["total_tokens"] > 0 for u in usages)


def test_late_event_follows_an_error_result(fake: Harness) -> None:
    """late-event: an ERROR result, then a step of the same turn, and the process serves on."""
    done = fake.run(STREAM, [user("[fake-agy:late-event] x"), user("after")])
    assert done.code == 0, done.stderr
    kinds = [e["event"] for e in done.events]
    first_result = kinds.index("result")
    assert done.events[first_result]["result"]["status"] == "ERROR"
    assert kinds[first_result + 1] == "step_update"
    assert done.events[-1]["result"]["status"] == "SUCCESS"


def test_startup_hang_garbage_prints_one_line_then_waits_for_a_signal(fake: Harness) -> None:
    """FAKE_AGY_STARTUP_HANG=garbage: one non-JSON line, no init, no turn; SIGTERM ends it."""
    live = fake.start(STREAM, FAKE_AGY_STARTUP_HANG="garbage")
    live.send(user("hello"))
    assert live._line(time.monotonic() + DEADLINE_S) == GARBAGE_LINE
    live.proc.send_signal(signal.SIGTERM)
    done = live.finish()
    assert (done.code, done.stdout) == (1, "")
    assert not [e for e in fake.log_entries() if "stdin" in e]  # stdin never read


def test_startup_hang_silent_prints_nothing(fake: Harness) -> None:
    """FAKE_AGY_STARTUP_HANG=silent: nothing on stdout, stdin unread, until killed."""
    live = fake.start(STREAM, FAKE_AGY_STARTUP_HANG="silent")
    live.send(user("hello"))
    fake.wait_for_log(lambda e: "argv" in e)
    with pytest.raises(subprocess.TimeoutExpired):
        live.proc.wait(timeout=0.5)  # a hang can only be observed as not ending
    live.proc.send_signal(signal.SIGTERM)
    done = live.finish()
    assert done.stdout == "" and done.code in (1, -signal.SIGTERM)


def test_hang_while_spares_launches_after_the_flag_is_gone(fake: Harness) -> None:
    """FAKE_AGY_HANG_WHILE: a launch that starts without the file runs normally."""
    flag = fake.tmp / "absent"
    done = fake.run(
        STREAM, [user("hi")], FAKE_AGY_STARTUP_HANG="silent", FAKE_AGY_HANG_WHILE=str(flag)
    )
    assert done.code == 0 and done.events[0]["event"] == "init"


def test_bad_hang_value_is_misuse(fake: Harness) -> None:
    done = fake.run(STREAM, [], FAKE_AGY_STARTUP_HANG="forever")
    assert done.code == 64 and "FAKE_AGY_STARTUP_HANG" in done.stderr


def test_discovery_gate_holds_models_until_the_file_exists(fake: Harness) -> None:
    """FAKE_AGY_DISCOVERY_GATE: ``models`` answers only once the file exists."""
    gate = fake.tmp / "gate"
    live = fake.start(["models"], FAKE_AGY_DISCOVERY_GATE=str(gate))
    fake.wait_for_log(lambda e: "argv" in e)
    with pytest.raises(subprocess.TimeoutExpired):
        live.proc.wait(timeout=0.5)  # held: it can only be observed as not ending
    gate.touch()
    done = live.finish()
    assert done.code == 0 and done.stdout.strip()
