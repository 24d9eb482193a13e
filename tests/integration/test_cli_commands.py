"""``agybridge sessions``, ``logs``, ``login`` and the TTY hint, from a terminal's view."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from agybridge import cli, server
from agybridge.cli_logs import tail_lines
from agybridge.logs import PrivateRotatingFileHandler, make_private_dir

from ..acp_wire import Harness

pytestmark = pytest.mark.integration

TIMEOUT_S = 60


async def agybridge(harness: Harness, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    with trio.fail_after(TIMEOUT_S):
        done = await trio.run_process(
            [sys.executable, "-m", "agybridge", *args],
            env=harness.env(**env),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


async def test_sessions_list_show_export_delete(harness: Harness) -> None:
    """A session created through the bridge is listed, shown, exported, deleted."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await client.new_session()
            answer = await client.response(await client.start_prompt(session_id, "hello there"))
            assert answer["result"]["stopReason"] == "end_turn"
    listed = await agybridge(harness, "sessions", "list")
    assert listed.returncode == 0 and session_id in listed.stdout
    assert listed.stdout.splitlines()[0].split() == ["SESSION", "UPDATED", "TITLE", "CWD"]
    shown = await agybridge(harness, "sessions", "show", session_id)
    assert "you: hello there" in shown.stdout and "agent: " in shown.stdout
    exported = await agybridge(harness, "sessions", "export", session_id)
    assert exported.stdout.startswith("# ") and "## You (turn 1)" in exported.stdout
    as_json = await agybridge(harness, "sessions", "list", "--json")
    assert '"sessionId": "' + session_id in as_json.stdout
    deleted = await agybridge(harness, "sessions", "delete", session_id)
    assert deleted.returncode == 0 and deleted.stdout == f"deleted {session_id}\n"
    after = await agybridge(harness, "sessions", "list")
    assert session_id not in after.stdout
    again = await agybridge(harness, "sessions", "show", session_id)
    assert again.returncode == 1 and "no session" in again.stderr
    await harness.assert_no_leftovers()


async def test_logs_prints_the_tail(harness: Harness) -> None:
    """``logs -n 5`` prints the log's last five lines (the bridge wrote them);
    ``--session`` only the lines tagged with that session."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await client.new_session()
    log = harness.tmp_path / "agybridge.log"
    done = await agybridge(harness, "logs", "-n", "5")
    assert done.returncode == 0
    assert done.stdout.splitlines() == log.read_text().splitlines()[-5:]
    tagged = [line for line in log.read_text().splitlines() if f"[{session_id}]" in line]
    assert len(tagged) > 2  # its agy's start and end at least
    only = await agybridge(harness, "logs", "-n", "2", "--session", session_id)
    assert only.stdout.splitlines() == tagged[-2:]
    text = log.read_text()
    assert "agybridge 0.1.0 starting" in text
    assert "initialize from agybridge-raw-test-client" in text
    await harness.assert_no_leftovers()


async def test_login_when_signed_in_and_signed_out(harness: Harness) -> None:
    """Signed in: exit 0 at once. Signed out without a terminal: exit 1, saying why."""
    ok = await agybridge(harness, "login")
    assert (ok.returncode, ok.stdout) == (0, "agy is signed in.\n")
    out = await agybridge(harness, "login", FAKE_AGY_SIGNED_OUT="1")
    assert out.returncode == 1 and "needs a terminal" in out.stderr
    await harness.assert_no_leftovers()


@pytest.mark.parametrize("launch", [["attach"], ["serve"]])
async def test_terminal_auth_appends_login_to_the_editors_command(
    harness: Harness, launch: list[str]
) -> None:
    """The terminal auth method's ``args: ["login"]`` are appended to the command
    line the editor launches the agent with (acp/brief.md §4, Zed's
    terminal_auth_task): with the README's daemon set-up (``args: ["attach"]``)
    that is ``agybridge attach login``, which must sign in, not start a relay."""
    ok = await agybridge(harness, *launch, "login")
    assert (ok.returncode, ok.stdout) == (0, "agy is signed in.\n"), ok.stderr
    out = await agybridge(harness, *launch, "login", FAKE_AGY_SIGNED_OUT="1")
    assert out.returncode == 1 and "needs a terminal" in out.stderr
    await harness.assert_no_leftovers()


def test_tail_lines(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("".join(f"{i}\n" for i in range(100)))
    assert tail_lines(path, 3) == ["97\n", "98\n", "99\n"]
    assert tail_lines(path, 0) == []


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_serve_on_a_terminal_prints_one_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Started by a person, the bridge says what it is waiting for, on stderr."""
    monkeypatch.setattr(sys, "stdin", _Terminal())
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(server, "run", lambda settings: 0)  # cli imports it when serving
    monkeypatch.setattr(cli, "configure_logging", lambda *a: None)
    with pytest.raises(SystemExit):
        cli.main([])
    assert err.getvalue() == cli.TTY_HINT + "\n"


def test_log_file_is_private(tmp_path: Path) -> None:
    """The log is 0600 in a 0700 directory, and stays so after a rollover."""
    log = tmp_path / "logs" / "agybridge.log"
    make_private_dir(log.parent)
    handler = PrivateRotatingFileHandler(log, maxBytes=10, backupCount=2, encoding="utf-8")
    try:
        record = logging.LogRecord("t", logging.INFO, __file__, 1, "one two three", None, None)
        handler.emit(record)
        handler.emit(record)  # past maxBytes: rolls over
    finally:
        handler.close()
    assert (log.parent.stat().st_mode & 0o777) == 0o700
    for path in (log, log.with_name("agybridge.log.1")):
        assert (path.stat().st_mode & 0o777) == 0o600
