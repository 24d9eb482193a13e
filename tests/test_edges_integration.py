"""Edges that lose data or mislead, through the real bridge process.

The database path that is not a file, a session whose cwd vanished, the log's
privacy. Each test ends with the environment-marker scan ("nothing left").
"""

from __future__ import annotations

import stat

import pytest
import trio

from tests.acp_wire import BRIDGE_CMD, Harness

pytestmark = pytest.mark.integration

TEST_TIMEOUT_S = 20


async def test_a_directory_as_the_database_stops_the_bridge_untouched(harness: Harness) -> None:
    """AGYBRIDGE_DB naming a user's directory: exit 2 with a message naming the
    path; the directory and its contents stay where they were."""
    projects = harness.tmp_path / "projects"
    projects.mkdir()
    (projects / "notes.txt").write_text("mine")
    with trio.fail_after(TEST_TIMEOUT_S):
        done = await trio.run_process(
            list(BRIDGE_CMD),
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            env=harness.env(AGYBRIDGE_DB=str(projects)),
            check=False,
        )
    assert done.returncode == 2, done.stderr
    message = done.stderr.decode()
    assert str(projects) in message and "is a directory" in message, message
    assert done.stdout == b""
    assert sorted(p.name for p in harness.tmp_path.iterdir() if p.name.startswith("projects")) == [
        "projects"
    ]
    assert (projects / "notes.txt").read_text() == "mine"
    await harness.assert_no_leftovers()


async def test_a_vanished_cwd_is_named_as_such(harness: Harness) -> None:
    """A session whose cwd is deleted before agy (re)starts: the prompt's error says
    the working directory is gone, not that agy is missing."""
    cwd = harness.tmp_path / "project"
    cwd.mkdir()
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await client.new_session(cwd)
            # A crash makes the next prompt spawn agy again, now without its cwd.
            crashed = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "[fake-agy:crash]"}]},
            )
            assert "error" in crashed
            cwd.rmdir()
            response = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "again"}]},
            )
            message = response["error"]["message"]
            assert "working directory" in message and "no longer exists" in message, response
            assert "AGY_BIN" not in message
    await harness.assert_no_leftovers()


async def test_the_log_file_is_private(harness: Harness) -> None:
    """The log file is created 0600 in a 0700 directory, like the database."""
    log_dir = harness.tmp_path / "logs"
    log_file = log_dir / "agybridge.log"
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(AGYBRIDGE_LOG_FILE=str(log_file)) as client:
            await client.initialize()
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    await harness.assert_no_leftovers()
