"""``agybridge demo``, the newcomer's first run: short, readable, harmless."""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio

from agybridge.demo import SCENARIO_NAMES

from ..acp_wire import Harness

pytestmark = pytest.mark.integration

TIMEOUT_S = 120


async def demo(harness: Harness, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    cwd = harness.tmp_path / "somewhere"
    cwd.mkdir(exist_ok=True)
    with trio.fail_after(TIMEOUT_S):
        done = await trio.run_process(
            [sys.executable, "-m", "agybridge", "demo", *args],
            env=harness.env(**env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    await harness.assert_no_leftovers()
    assert list(cwd.iterdir()) == []  # nothing written where the demo was started
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


async def test_edit_scenario_shows_tool_cards_by_title(harness: Harness) -> None:
    """Tool cards by title and status, no empty lines, the edit in a temp workspace."""
    done = await demo(harness, "--scenario", "edit", "--prompt", "[fake-agy:edit] notes.txt")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "" not in lines
    assert "  [tool] Edit notes.txt: completed" in lines
    assert not any("toolu_" in line or "call_" in line for line in lines)
    assert "  (turn ended: end_turn)" in lines


async def test_a_failed_turn_is_one_line(harness: Harness) -> None:
    """A signed-out agy: one error line naming sign-in, no traceback."""
    done = await demo(harness, FAKE_AGY_SIGNED_OUT="1")
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert errors == [errors[0]] and errors[0].startswith("error -32000: agy is not signed in")
    assert "Traceback" not in done.stderr and "ExceptionGroup" not in done.stderr


async def test_unknown_scenario_lists_the_known_ones(harness: Harness) -> None:
    done = await demo(harness, "--scenario", "nope")
    assert done.returncode == 2
    assert "invalid choice: 'nope'" in done.stderr and "'edit'" in done.stderr
    helped = await demo(harness, "--help")
    flat = "".join(helped.stdout.split())  # argparse wraps lines, even at hyphens
    assert all(name in flat for name in SCENARIO_NAMES)
