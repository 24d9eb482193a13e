"""A clean exit reaps everything itself (issue 26 item 4).

stdin closes (or SIGTERM, SIGHUP comes) while the bridge is busy starting
things: agy's model discovery, the session's first agy, the permission gate's
``agy -p /hooks`` check, straight after ``session/new`` is written, or before
anything is answered. Every time the bridge must stop and
wait for every agy it started before it exits 0: its watchdog (the safety net
for a SIGKILLed bridge) then finds nothing and says nothing, no process of the
test is left the moment the bridge has exited, and the next bridge finds
nothing a dead bridge left.

Waits are on wire events, the fake agy's launch log or the marker scan,
bounded; nothing sleeps to synchronise.
"""

from __future__ import annotations

import signal
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from tests.acp_wire import FAKE_AGY, Harness, RawClient, leftover_processes

pytestmark = pytest.mark.integration

TEST_TIMEOUT_S = 30
#: What the watchdog writes when it had to end something (watchdog.py).
WATCHDOG_WORDS = "agybridge watchdog"
#: What a starting bridge logs when it ends what a dead one left (agy/ownership.py).
ORPHAN_WORDS = "left by a bridge that died"
INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
}


def _hooks_check_hangs(tmp_path: Path) -> Path:
    """An AGY_BIN that is the fake agy except that ``agy -p /hooks`` (the
    gate's check, and the sign-in probe) never answers."""
    script = tmp_path / "agy-hooks-hang"
    script.write_text(f'#!/bin/sh\ncase "$1" in -p) exec sleep 300;; esac\nexec {FAKE_AGY} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


async def _until(found: Callable[[], bool]) -> None:
    # A launch log line or a process appearing is not an event: poll, bounded
    # by the test's timeout.
    while not found():  # noqa: ASYNC110
        await trio.sleep(0.02)


def _launched(harness: Harness, word: str) -> Callable[[], bool]:
    return lambda: any(word in entry.get("argv", ()) for entry in harness.launches())


async def _discovery(harness: Harness, client: RawClient) -> None:
    await client.initialize()
    await client.start_request("session/new", {"cwd": str(harness.tmp_path), "mcpServers": []})
    await _until(_launched(harness, "models"))


async def _first_spawn(harness: Harness, client: RawClient) -> None:
    await client.initialize()
    await client.start_request("session/new", {"cwd": str(harness.tmp_path), "mcpServers": []})
    await _until(_launched(harness, "--input-format"))


async def _gate_check(harness: Harness, client: RawClient) -> None:
    await client.initialize()
    await client.start_request("session/new", {"cwd": str(harness.tmp_path), "mcpServers": []})
    await _until(lambda: any("sleep 300" in p for p in leftover_processes(harness.marker)))


async def _right_after_new(harness: Harness, client: RawClient) -> None:
    await client.initialize()
    await client.start_request("session/new", {"cwd": str(harness.tmp_path), "mcpServers": []})


async def _unanswered(harness: Harness, client: RawClient) -> None:
    """``initialize`` and ``session/new`` written at once, stdin closed before
    either is answered (an editor that gives up at once)."""
    await client.start_request("initialize", INITIALIZE)
    await client.start_request("session/new", {"cwd": str(harness.tmp_path), "mcpServers": []})


MOMENTS = {
    "during-discovery": (_discovery, lambda tmp: {"FAKE_AGY_DISCOVERY_GATE": str(tmp / "never")}),
    "during-first-spawn": (_first_spawn, lambda tmp: {"FAKE_AGY_STARTUP_HANG": "silent"}),
    "during-gate-check": (_gate_check, lambda tmp: {"AGY_BIN": str(_hooks_check_hangs(tmp))}),
    "right-after-session-new": (_right_after_new, lambda tmp: {}),
    "before-any-answer": (_unanswered, lambda tmp: {}),
}


#: How the bridge is told to stop: its stdin closed, or a signal.
ENDINGS: dict[str, Callable[[RawClient], Awaitable[None]]] = {
    "stdin-eof": lambda client: client.close_stdin(),
    "sigterm": lambda client: _signal(client, signal.SIGTERM),
    "sighup": lambda client: _signal(client, signal.SIGHUP),
}


async def _signal(client: RawClient, signum: signal.Signals) -> None:
    client.process.send_signal(signum)
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize(
    ("moment", "ending"),
    [(moment, "stdin-eof") for moment in sorted(MOMENTS)]
    + [("during-first-spawn", "sigterm"), ("during-gate-check", "sighup")],
)
async def test_a_clean_exit_reaps_every_agy_itself(
    harness: Harness, moment: str, ending: str
) -> None:
    reach, env_of = MOMENTS[moment]
    env = env_of(harness.tmp_path)
    stderr_log = harness.tmp_path / "bridge-stderr.log"
    bridge_log = harness.tmp_path / "agybridge.log"
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(**env) as client:
            await reach(harness, client)
            await ENDINGS[ending](client)
            await client.process.wait()
            # The moment the bridge is gone: nothing of it may still run.
            left = leftover_processes(harness.marker)
            assert client.process.returncode == 0, client.diagnostics()
        assert left == [], f"still running when the bridge exited: {left}"
        stderr = stderr_log.read_text() if stderr_log.exists() else ""
        assert WATCHDOG_WORDS not in stderr, stderr

        # The next bridge finds nothing to clean (its sweep runs before the
        # catalog that session/new waits for).
        async with harness.open_bridge() as client:
            await client.initialize()
            await client.new_session()
        assert ORPHAN_WORDS not in bridge_log.read_text()
    await harness.assert_no_leftovers()
