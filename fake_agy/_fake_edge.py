"""Edge behaviours of agy for the session-core regression tests (issue 9).

* ``total-usage``: an echo turn whose step and result ``usage`` carry only
  ``total_tokens`` (contract.md §3.5: PTAH's 1.2.7 capture shows such results).
* ``late-event``: an ERROR ``result`` with no ``AGY_ERROR`` line yet, then one more
  ``step_update`` of the finished turn. The contract says nothing follows a result
  (§3.5); the bridge must survive a peer that breaks it, so this is the robustness
  probe for "an internal error inside a session".
* ``interrupted``: a fragment, then agy's answer to a SIGINT nobody in the bridge sent
  (a terminal's Ctrl-C reaching the process group, say): ``error: interrupted`` on
  stderr, an ERROR result ``"interrupted"``, exit 1 (contract.md §5).
* ``quota-words``: an agy before 1.2.6 failing on its quota with words only: the text on
  stderr as ``error: ...``, no ``AGY_ERROR`` line and no result, exit 1 (contract.md §4
  "TZ 1.1.14 quota → exit 1", §5).
* ``killed``: a fragment, then the process dies of ``FAKE_AGY_CRASH_SIGNAL`` (default
  SIGSEGV) with no result: an agy the kernel killed (OOM, a segfault in cgo).
* `hang_at_startup`: ``FAKE_AGY_STARTUP_HANG=silent|garbage`` makes a stream-json
  session print nothing (or one non-JSON line) and then wait for a signal, like an agy
  stuck in its start-up fetch; ``FAKE_AGY_HANG_WHILE=PATH`` limits it to launches that
  start while PATH exists, so a test can let the next launch succeed.
* `wait_discovery_gate`: ``FAKE_AGY_DISCOVERY_GATE=PATH`` holds ``models``/``agents``
  until PATH exists (agy's remote fetch, finishing when the test says), so a test can
  place the bridge's background discovery after a chosen wire event.
"""

from __future__ import annotations

import os
import signal
import time

from ._fake_io import Interrupted, Interrupts, Output, stderr_line
from ._fake_protocol import Usage
from ._fake_runtime import Turn
from ._fake_scenarios import (
    CHECKPOINT_USAGE,
    QUOTA_ERROR,
    Scenario,
    reply_usage,
    split_fragments,
)

#: The non-JSON line ``garbage`` prints (a crash banner from a wrapper script, say).
GARBAGE_LINE = "fake-agy: warming up the model cache..."


def total_usage(turn: Turn) -> int | None:
    """Echo, with every ``usage`` reduced to ``{"total_tokens": N}``."""
    turn.user_input()
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step("checkpoint", timed=True, usage=_TotalOnly.of(CHECKPOINT_USAGE))
    usage = _TotalOnly.of(reply_usage(turn, turn.prompt))
    turn.say(split_fragments(turn.prompt), usage=usage, gap=1)
    turn.finish(extra={"usage": {"total_tokens": turn.session.usage.total_tokens}})
    return None


def late_event(turn: Turn) -> int | None:
    """A fragment, an ERROR result, then a step_update of the same turn."""
    turn.user_input()
    response = turn.response(gap=1)
    response.fragment("Partial")
    turn.pause(turn.knobs.fragment_delay_s)
    turn.finish("ERROR", error="fake-agy: step failed")
    response.done("\n")
    return None


def interrupted(turn: Turn) -> int | None:
    """A fragment, then agy's reaction to a SIGINT (contract.md §5), unasked by the bridge."""
    turn.user_input()
    turn.response(gap=1).fragment("Partial")
    turn.pause(turn.knobs.fragment_delay_s)
    stderr_line("error: interrupted")
    turn.finish("ERROR", error="interrupted")
    return 1


def quota_words(turn: Turn) -> int | None:
    """A quota failure an old agy reports in words only, then exit 1 (no result)."""
    turn.user_input()
    stderr_line(f"error: {QUOTA_ERROR}")
    return 1


def killed(turn: Turn) -> int | None:
    """A fragment, then death by a signal (no result, no exit code)."""
    turn.user_input()
    turn.response(gap=1).fragment("Partial")
    turn.pause(turn.knobs.fragment_delay_s)
    name = os.environ.get("FAKE_AGY_CRASH_SIGNAL", "SIGSEGV")
    number = signal.Signals[name]
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)
    return 1  # not reached: the signal ends the process


class _TotalOnly(Usage):
    @classmethod
    def of(cls, usage: Usage) -> _TotalOnly:
        return cls(
            usage.input_tokens, usage.output_tokens, usage.thinking_tokens, usage.cache_read_tokens
        )

    def to_json(self) -> dict[str, int]:
        return {"total_tokens": self.total_tokens}


EDGE_SCENARIOS: dict[str, Scenario] = {
    "total-usage": total_usage,
    "late-event": late_event,
    "interrupted": interrupted,
    "quota-words": quota_words,
    "killed": killed,
}


def hang_at_startup(mode: str, out: Output, interrupts: Interrupts) -> int | None:
    """Hang as ``FAKE_AGY_STARTUP_HANG`` says (None: not this launch); the exit code."""
    gate = os.environ.get("FAKE_AGY_HANG_WHILE")
    if not mode or (gate and not os.path.exists(gate)):
        return None
    if mode == "garbage":
        out.raw(GARBAGE_LINE)
    try:
        while True:
            interrupts.wait(None, None)
    except Interrupted:
        return 1  # killed while stuck: agy prints nothing more


def wait_discovery_gate() -> None:
    """Block until ``FAKE_AGY_DISCOVERY_GATE`` exists (no-op when unset)."""
    gate = os.environ.get("FAKE_AGY_DISCOVERY_GATE")
    # A file appearing is not an event a stdlib-only program can wait on: poll.
    while gate and not os.path.exists(gate):
        time.sleep(0.02)
