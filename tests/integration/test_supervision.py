"""No process outlives its owner: agy killed, the bridge SIGKILLed, wrapper scripts.

Through the real bridge process and the fake agy (whose ``slow`` turns start two
``sleep`` children, one in a session of its own, as agy's ``run_command`` does).
"Nothing left" is the environment-marker scan (`acp_wire.leftover_processes`):
every process the test started, at any depth, carries its marker. Waits are on wire
events or on the scan, bounded; nothing sleeps to synchronise.
"""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest
import trio

from agybridge.permissions import DIR_PREFIX, runtime_bases
from agybridge.procfs import read_owner
from tests.acp_wire import FAKE_AGY, Harness, RawClient, leftover_processes

pytestmark = pytest.mark.integration

TEST_TIMEOUT_S = 30
SLOW = "[fake-agy:slow] stream ticks until cancelled"
#: Acceptance: nothing of a SIGKILLed bridge's sessions alive 5 s after its death.
AFTER_BRIDGE_DEATH_S = 5.0


async def streaming_session(client: RawClient) -> tuple[str, int]:
    await client.initialize()
    session_id = await client.new_session()
    mark = client.mark()
    prompt_id = await client.start_prompt(session_id, SLOW)
    await client.wait_update(session_id, "agent_message_chunk", since=mark)
    return session_id, prompt_id


def tool_children(harness: Harness) -> set[int]:
    """pids of the ``sleep`` children the fake agy started (launch log)."""
    return {entry["child"]["pid"] for entry in harness.launches() if "child" in entry}


def live(marker: str, pids: set[int]) -> list[str]:
    return [line for line in leftover_processes(marker) if int(line.split()[0]) in pids]


def watchdog_pids(marker: str) -> list[int]:
    return [
        int(line.split()[0]) for line in leftover_processes(marker) if "agybridge.watchdog" in line
    ]


def hook_dirs_of(pid: int) -> list[str]:
    """Runtime dirs whose owner file names the bridge process ``pid``."""
    found = []
    for base in runtime_bases():
        for entry in Path(base).glob(f"{DIR_PREFIX}*"):
            owner = read_owner(str(entry))
            if owner is not None and owner.split(".")[0] == str(pid):
                found.append(str(entry))
    return found


async def test_agy_sigkilled_mid_turn_leaves_no_tool_child(harness: Harness) -> None:
    """SIGKILL agy mid-turn: the prompt fails naming the signal, and neither of its
    tool children (one in its own session, started before any tool line) survives."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            _session_id, prompt_id = await streaming_session(client)
            children = tool_children(harness)
            assert len(children) == 2, harness.launches()
            agy_pid = next(
                e["pid"] for e in harness.launches() if "--input-format" in e.get("argv", ())
            )
            os.kill(agy_pid, signal.SIGKILL)
            response = await client.response(prompt_id)
            assert "killed by SIGKILL" in response["error"]["message"], response
            assert response["error"]["data"]["_meta"]["agybridge"]["signal"] == "SIGKILL"
            # The sweep precedes the error: nothing of that agy may run now.
            assert live(harness.marker, children | {agy_pid}) == []
    await harness.assert_no_leftovers()


async def test_sigkilled_bridge_leaves_nothing_within_5_s(harness: Harness) -> None:
    """SIGKILL the bridge mid-turn: its watchdog ends agy and the tool children and
    removes the hook runtime dir, within 5 s."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await streaming_session(client)
            assert len(tool_children(harness)) == 2
            dirs = hook_dirs_of(client.process.pid)
            assert dirs, "the session in ask mode should have a hook runtime dir"
            assert watchdog_pids(harness.marker)
            client.process.kill()
            await client.process.wait()
            await harness.assert_no_leftovers(AFTER_BRIDGE_DEATH_S)
            assert not any(map(os.path.lexists, dirs))


async def test_next_start_ends_what_a_dead_bridge_and_watchdog_left(harness: Harness) -> None:
    """Bridge and watchdog both SIGKILLed: the next bridge's start ends the tool
    children and removes the dead bridge's hook runtime dir, before its first
    session starts (the sweep runs once initialize is answered, issue 15)."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await streaming_session(client)
            children = tool_children(harness)
            dirs = hook_dirs_of(client.process.pid)
            assert dirs and len(children) == 2
            for pid in watchdog_pids(harness.marker):
                os.kill(pid, signal.SIGKILL)
            client.process.kill()
            await client.process.wait()
        assert live(harness.marker, children), "the children should outlive both"
        async with harness.open_bridge() as client:
            await client.initialize()
            await client.new_session()  # waits for the catalog, started after the sweep
            assert live(harness.marker, children) == []
            assert not any(map(os.path.lexists, dirs))
    await harness.assert_no_leftovers()


def hanging_wrapper(tmp_path: Path) -> Path:
    """An AGY_BIN wrapper script (like a version manager's) that runs the fake agy
    but hangs on ``--version`` and ``-p /hooks`` in a grandchild of its own session."""
    script = tmp_path / "agy-wrapper"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in --version|-p) setsid sleep 300; exit 1;; esac\n'
        f'exec {FAKE_AGY} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


async def test_wrapper_script_hanging_leaks_nothing_at_shutdown(harness: Harness) -> None:
    """A wrapper AGY_BIN hanging on ``--version`` and ``-p /hooks``: at shutdown the
    wrappers and their own-session grandchildren are all ended."""
    wrapper = hanging_wrapper(harness.tmp_path)
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(AGY_BIN=str(wrapper)) as client:
            await client.initialize()
            await client.start_request(
                "session/new", {"cwd": str(harness.tmp_path), "mcpServers": []}
            )

            # Nothing to wait on but /proc: a process appearing is not an event.
            while sum("sleep 300" in p for p in leftover_processes(harness.marker)) < 2:  # noqa: ASYNC110
                await trio.sleep(0.05)
            await client.close_stdin()
            await client.process.wait()
            assert client.process.returncode == 0, client.diagnostics()
    await harness.assert_no_leftovers()
