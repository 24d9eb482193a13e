"""The workstation supervisor through real processes: ``agybridge daemon``
(started by the first ``attach``), ``attach`` clients, ``status``, ``stop``
and the fake agy. Turns are ended by the test (``FAKE_AGY_RELEASE_FILE``),
never by the clock."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agybridge.daemon.listener import peer_allowed
from tests.acp_wire import BRIDGE_CMD, Harness, RawClient, open_bridge, stop_reason, tail
from tests.integration.test_daemon_fuzz import Conn
from tests.integration.test_shutdown_wire import (
    STARTED_BIG_LINE,
    assert_whole_lines_with_the_big_one,
    logged,
    unread_bytes,
)

pytestmark = pytest.mark.integration

ATTACH_CMD = (*BRIDGE_CMD, "attach")
#: Generous bound for a daemon under a loaded CI machine; never reached when all is well.
WAIT_S = 30.0


@attrs.define
class Supervisor:
    """One test's daemon: its socket, its environment, its control commands."""

    harness: Harness
    socket_dir: Path
    release: Path

    @property
    def socket(self) -> Path:
        return self.socket_dir / "agybridge.sock"

    def env(self, **extra: str) -> dict[str, str]:
        return self.harness.env(
            "slow",
            AGYBRIDGE_SOCKET=str(self.socket),
            FAKE_AGY_RELEASE_FILE=str(self.release),
            FAKE_AGY_SLOW_INTERVAL="0.05",
            FAKE_AGY_SPAWN_CHILDREN="0",
            **extra,
        )

    def attach(self, **extra: str) -> Any:
        """An ``attach`` client (starts the daemon if none runs)."""
        return open_bridge(self.harness.tmp_path, self.env(**extra), command=ATTACH_CMD)

    async def command(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        with trio.fail_after(WAIT_S):
            return await trio.run_process(
                [*BRIDGE_CMD, *args],
                env=self.env(),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )

    async def status(self) -> dict[str, Any]:
        done = await self.command("status", "--json")
        assert done.returncode == 0, done.stderr.decode()
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    async def session_status(self, session_id: str) -> dict[str, Any]:
        status = await self.status()
        return next(s for s in status["sessions"] if s["sessionId"] == session_id)

    async def wait_session_state(self, session_id: str, state: str) -> dict[str, Any]:
        return await self.wait_session(session_id, lambda s: s["state"] == state, state)

    async def wait_session(
        self, session_id: str, ready: Callable[[dict[str, Any]], bool], what: str
    ) -> dict[str, Any]:
        """The session's status once ``ready`` holds for it (failing after WAIT_S,
        with the last status seen)."""
        found: dict[str, Any] = {}
        try:
            with trio.fail_after(WAIT_S):
                # The daemon's state is only observable by asking it.
                while not ready(found := await self.session_status(session_id)):  # noqa: ASYNC110
                    await trio.sleep(0.05)
        except trio.TooSlowError:
            pytest.fail(f"session never {what}; last status: {found}{self.diagnostics()}")
        return found

    async def stop(self) -> None:
        done = await self.command("stop", "--timeout", "5")
        assert done.returncode == 0, done.stderr.decode() + self.diagnostics()
        assert b"stopped" in done.stdout

    def diagnostics(self) -> str:
        return (
            f"\n--- daemon stderr ---\n{tail(self.socket_dir / 'daemon-stderr.log')}"
            f"\n--- log ---\n{tail(self.harness.tmp_path / 'agybridge.log')}"
        )


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # A Unix socket path must fit in 108 bytes: pytest's tmp_path may not.
    path = Path(tempfile.mkdtemp(prefix="agyb-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def supervisor(harness: Harness, short_dir: Path) -> AsyncIterator[Supervisor]:
    sup = Supervisor(harness, short_dir / "run", harness.tmp_path / "release")
    try:
        yield sup
    finally:
        if sup.socket.exists():
            with trio.CancelScope(shield=True):
                await sup.command("stop", "--timeout", "2")


def _idle_with_another_agy(status: dict[str, Any], before: dict[str, Any]) -> bool:
    return (
        status["state"] == "idle"
        and status["agyPid"] is not None
        and status["agyPid"] != before["agyPid"]
    )


def _turn_states(client: RawClient, session_id: str, since: int = 0) -> list[dict[str, Any]]:
    return [
        u["_meta"]["agybridge"]["turn"]
        for u in client.updates(session_id, "session_info_update", since=since)
        if "turn" in (u.get("_meta") or {}).get("agybridge", {})
    ]


def _assert_ticks_once(text: str) -> None:
    """The turn's text is ``tick 1 tick 2 ... tick N`` exactly: nothing lost, nothing twice."""
    ticks = text.split()
    count = len(ticks) // 2
    assert count >= 1, text
    assert text.strip() == " ".join(f"tick {n}" for n in range(1, count + 1)), text


async def _second_takes_over(first: RawClient, second: RawClient, cwd: Path) -> str:
    """``first`` opens a session, then ``second`` loads it (and drives it)."""
    await first.initialize()
    session_id = await first.new_session(cwd)
    await second.initialize()
    loaded = await second.request(
        "session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
    )
    assert "result" in loaded, loaded
    return session_id


async def _start_slow_turn(client: RawClient, tmp_path: Path) -> tuple[str, int]:
    await client.initialize()
    session_id = await client.new_session(tmp_path)
    prompt = await client.start_prompt(session_id, "count for me")
    await client.wait_for(lambda: "tick 2" in client.message_text(session_id), "two ticks")
    return session_id, prompt


async def _queue_then_take_over(
    first: RawClient, second: RawClient, cwd: Path
) -> tuple[str, int, int]:
    """``first`` runs a slow turn with an echo prompt queued behind it, then
    ``second`` loads the session: (session id, running prompt, queued prompt)."""
    session_id, running = await _start_slow_turn(first, cwd)
    queued = await first.start_prompt(session_id, "[fake-agy:echo] queued")
    await second.initialize()
    loaded = await second.request(
        "session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
    )
    assert "result" in loaded, loaded
    return session_id, running, queued


async def _own_turn_after(client: RawClient, session_id: str) -> None:
    """A prompt of ``client``'s own, run to its end: its turn comes after the
    turns before it (one session loop), so their outcomes have reached it."""
    own = await client.request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": "[fake-agy:echo] own"}]},
    )
    assert stop_reason(own) == "end_turn", own


async def test_turn_survives_its_client_and_a_new_client_sees_all_of_it(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A running turn keeps its agy (same pid) after its client is SIGKILLed; a
    client that loads the session gets the history, the turn so far, the rest
    live, then the outcome; status shows it running, then idle."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first:
        session_id, _ = await _start_slow_turn(first, tmp)
        before = await supervisor.session_status(session_id)
        assert before["state"] == "running" and before["attached"]
        first.process.kill()
        await first.process.wait()
    detached = await supervisor.session_status(session_id)
    assert detached["agyPid"] == before["agyPid"]
    async with supervisor.attach() as second:
        await second.initialize()
        loaded = await second.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        users = second.updates(session_id, "user_message_chunk")
        assert [u["content"]["text"] for u in users] == ["count for me"]
        assert _turn_states(second, session_id) == [{"state": "running"}]
        during = await supervisor.session_status(session_id)
        assert during["state"] == "running" and during["attached"]
        assert during["agyPid"] == before["agyPid"]
        harness.tmp_path.joinpath("release").touch()
        await second.wait_for(lambda: len(_turn_states(second, session_id)) == 2, "the outcome")
        assert _turn_states(second, session_id)[1] == {"state": "ended", "stopReason": "end_turn"}
        _assert_ticks_once(second.message_text(session_id))
        after = await supervisor.wait_session_state(session_id, "idle")
        assert after["agyPid"] == before["agyPid"]
        assert second.validator.problems == [], second.validator.report()
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_turn_that_ended_while_detached_is_shown_on_load(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A turn that finished with nobody attached: its whole text, then its outcome."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first:
        session_id, _ = await _start_slow_turn(first, tmp)
        first.process.kill()
        await first.process.wait()
    harness.tmp_path.joinpath("release").touch()
    await supervisor.wait_session_state(session_id, "idle")
    async with supervisor.attach() as second:
        await second.initialize()
        loaded = await second.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        _assert_ticks_once(second.message_text(session_id))
        assert _turn_states(second, session_id) == [{"state": "ended", "stopReason": "end_turn"}]
        # Told once: a second load has the history, not the outcome again.
        mark = second.mark()
        again = await second.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp), "mcpServers": []}
        )
        assert "result" in again
        assert _turn_states(second, session_id, since=mark) == []
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_stop_answers_every_prompt_and_leaves_nothing(
    supervisor: Supervisor, harness: Harness
) -> None:
    """``agybridge stop``: the running prompt is answered cancelled, the client's
    connection ends, no agy or daemon process is left."""
    async with supervisor.attach() as client:
        _, prompt = await _start_slow_turn(client, harness.tmp_path)
        await supervisor.stop()
        answer = await client.response(prompt)
        assert stop_reason(answer) == "cancelled", answer
        with trio.fail_after(WAIT_S):
            await client.wait_for(lambda: client.eof, "the daemon closing the connection")
    assert not supervisor.socket.exists()
    await harness.assert_no_leftovers()


async def test_the_newer_client_drives_and_the_older_is_told(
    supervisor: Supervisor, harness: Harness
) -> None:
    """Two clients on one session: the one that loaded it last drives; the
    other is told it was detached and its prompts are refused."""
    tmp = harness.tmp_path
    harness.tmp_path.joinpath("release").touch()  # every turn: one tick
    async with supervisor.attach() as first, supervisor.attach() as second:
        session_id = await _second_takes_over(first, second, tmp)
        notice = await first.wait_update(session_id, "session_info_update")
        assert notice["_meta"]["agybridge"]["attached"] is False
        refused = await first.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        )
        assert refused["error"]["code"] == -32600
        message = refused["error"]["message"]
        assert "session/load" in message and "session/close and session/delete" in message
        for method, params in (
            ("session/set_config_option", {"configId": "mode", "value": "plan"}),
            ("session/set_mode", {"modeId": "plan"}),
        ):
            changed = await first.request(method, {"sessionId": session_id, **params})
            assert changed["error"]["code"] == -32600, changed
        done = await second.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        )
        assert stop_reason(done) == "end_turn", done
        assert "tick 1" in second.message_text(session_id)
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_a_queued_turn_of_the_older_client_ends_with_its_outcome_for_the_newer(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A prompt the older client queued before the newer one took the session
    runs after the takeover: the newer client (which did not send it, so gets
    no answer) is told how that turn ended too, as for the turn it took over
    mid-way (README "Re-attaching"); before, only the running turn's outcome
    came, and the queued turn's content arrived with no end."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first, supervisor.attach() as second:
        session_id, running, queued = await _queue_then_take_over(first, second, tmp)
        harness.tmp_path.joinpath("release").touch()
        assert stop_reason(await first.response(running)) == "end_turn"
        assert stop_reason(await first.response(queued)) == "end_turn"
        await _own_turn_after(second, session_id)
        assert "queued" in second.message_text(session_id)
        ended = {"state": "ended", "stopReason": "end_turn"}
        assert _turn_states(second, session_id) == [{"state": "running"}, ended, ended]
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_a_queued_prompt_cancelled_does_not_end_the_running_turn_for_the_newer_client(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A prompt still queued behind the running turn is cancelled: the client
    that took the session over is not told the running turn ended (it has
    not: its content goes on), and is told its real outcome when it ends;
    before, the queued prompt's answer ended the outlet's record of the
    running turn (outcome "cancelled", the rest of the turn's content after
    it, and no outcome when it really ended)."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first, supervisor.attach() as second:
        session_id, running, queued = await _queue_then_take_over(first, second, tmp)
        await first.notify("$/cancel_request", {"requestId": queued})
        assert stop_reason(await first.response(queued)) == "cancelled"
        harness.tmp_path.joinpath("release").touch()
        assert stop_reason(await first.response(running)) == "end_turn"
        await _own_turn_after(second, session_id)
        ended = {"state": "ended", "stopReason": "end_turn"}
        assert _turn_states(second, session_id) == [{"state": "running"}, ended]
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_a_cancel_from_a_newer_client_does_not_cancel_later_prompts_of_an_older_one(
    supervisor: Supervisor, harness: Harness
) -> None:
    """session/cancel cancels what was sent before it, whichever client sends
    it: a prompt an older connection sends afterwards runs (before, every prompt
    of a client that connected earlier was answered cancelled at once)."""
    tmp = harness.tmp_path
    harness.tmp_path.joinpath("release").touch()  # every turn: one tick
    async with supervisor.attach() as older:
        await older.initialize()  # connected first
        async with supervisor.attach() as newer:
            await newer.initialize()
            session_id = await newer.new_session(tmp)
            await newer.notify("session/cancel", {"sessionId": session_id})
            done = await newer.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]},
            )
            assert stop_reason(done) == "end_turn", done
        loaded = await older.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        done = await older.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        )
        assert stop_reason(done) == "end_turn", done
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_a_client_the_session_was_taken_from_cannot_cancel_its_turns(
    supervisor: Supervisor, harness: Harness
) -> None:
    """The newer client drives: a session/cancel from the client it took the
    session from is ignored (as that client's prompts are refused)."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first, supervisor.attach() as second:
        session_id = await _second_takes_over(first, second, tmp)
        prompt = await second.start_prompt(session_id, "count for me")
        await second.wait_for(lambda: "tick 2" in second.message_text(session_id), "two ticks")
        await first.notify("session/cancel", {"sessionId": session_id})
        # Answered after the cancel was handled (one connection's messages in order).
        listed = await first.request("session/list", {})
        assert "result" in listed, listed
        harness.tmp_path.joinpath("release").touch()
        assert stop_reason(await second.response(prompt)) == "end_turn"
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_a_cancel_sent_right_behind_taking_the_session_back_cancels_the_turn(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A client the session was taken from resumes it and cancels its turn in
    one write (not waiting for the resume's answer): the cancel is for the
    session it is taking back, so it takes effect once the resume is done (as
    a prompt sent behind a resume does); before, it arrived while the client
    was not attached yet and was ignored, and the turn ran on to end_turn."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first, supervisor.attach() as second:
        session_id, prompt = await _start_slow_turn(first, tmp)
        await second.initialize()
        loaded = await second.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        resume_id = first.new_id()
        messages: list[dict[str, Any]] = [
            {
                "jsonrpc": "2.0",
                "id": resume_id,
                "method": "session/resume",
                "params": {"sessionId": session_id, "cwd": str(tmp)},
            },
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}},
        ]
        for message in messages:
            first.validator.feed("c2a", message)
        await first.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        resumed = await first.response(resume_id)
        assert "result" in resumed, resumed
        harness.tmp_path.joinpath("release").touch()  # a turn not cancelled ends now
        assert stop_reason(await first.response(prompt)) == "cancelled"
        assert first.validator.problems == [], first.validator.report()
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_the_advertised_extensions_work_through_the_daemon(
    supervisor: Supervisor, harness: Harness
) -> None:
    """Every ``_agybridge/...`` extension initialize advertises is served through
    the daemon too (only status and stop are the daemon's own)."""
    async with supervisor.attach() as client:
        init = await client.initialize()
        advertised = init["result"]["agentCapabilities"]["_meta"]["agybridge"]["extensions"]
        assert "_agybridge/session/runtime" in advertised
        session_id = await client.new_session(harness.tmp_path)
        runtime = await client.request("_agybridge/session/runtime", {"sessionId": session_id})
        assert runtime.get("result", {}).get("sessionId") == session_id, runtime
        unknown = await client.request("_agybridge/no/such", {})
        assert unknown["error"]["code"] == -32601, unknown
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_status_shows_agys_own_permission_mode(
    supervisor: Supervisor, harness: Harness
) -> None:
    """Issue 27: a safe-mode session whose agy reports ``always-proceed`` from
    its own settings (nothing is denied) is marked in ``status``, JSON and table."""
    async with supervisor.attach(
        AGYBRIDGE_MODE="safe", FAKE_AGY_TOOL_PERMISSION="always-proceed"
    ) as client:
        await client.initialize()
        session_id = await client.new_session(harness.tmp_path)
        # A turn's answer comes after the init its agy printed first.
        answer = await client.response(await client.start_prompt(session_id, "[fake-agy:echo] hi"))
        assert answer["result"]["stopReason"] == "end_turn", answer
        found = await supervisor.session_status(session_id)
        assert found["mode"] == "safe"
        assert found["agyPermissionMode"] == "always-proceed"
        assert found["agyPermissionOverride"] is True
        table = await supervisor.command("status")
        assert b"safe (agy: always-proceed!)" in table.stdout, table.stdout
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_second_daemon_refuses_and_socket_is_private(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A second daemon on the same socket exits 1 naming the first; the socket
    is 0600 in a 0700 directory."""
    async with supervisor.attach() as client:
        await client.initialize()
        pid = (await supervisor.status())["pid"]
        second = await supervisor.command("daemon")
        assert second.returncode == 3  # EXIT_DAEMON_RUNNING: attach connects to the first
        message = second.stderr.decode()
        assert "already running" in message and f"pid {pid}" in message, message
        assert stat.S_IMODE(supervisor.socket.stat().st_mode) == 0o600
        assert stat.S_IMODE(supervisor.socket_dir.stat().st_mode) == 0o700
        status = await supervisor.status()
        assert status["pid"] == pid  # the first one is untouched
        # Editors only: not status's own connection, nor the second daemon's try.
        assert (status["clients"], status["clientsNotReading"]) == (1, 0), status
    await supervisor.stop()
    # Nothing left beside the start-up log: no socket, no lock, no .start.
    assert os.listdir(supervisor.socket_dir) == ["daemon-stderr.log"]
    await harness.assert_no_leftovers()


async def test_stop_finishes_the_line_a_client_that_is_not_reading_was_sent(
    supervisor: Supervisor, harness: Harness
) -> None:
    """The daemon is stopped while stuck mid-way through a 1 MiB line to a client
    that is not reading: the line is finished once the client reads (it is not
    cut by the daemon's exit); the connection ends with a newline, every line JSON."""
    gate = harness.tmp_path / "never"
    log = harness.tmp_path / "agybridge.log"
    daemon_env = {"AGYBRIDGE_MODE": "autonomous", "AGYBRIDGE_SHUTDOWN_GRACE_S": "30"}
    with trio.fail_after(WAIT_S * 2):
        async with supervisor.attach(**daemon_env) as starter:
            await starter.initialize()  # the daemon is up
        stream = await trio.open_unix_socket(str(supervisor.socket))
        async with stream:
            data = b""

            async def request(request_id: int, method: str, params: Any) -> dict[str, Any]:
                nonlocal data
                line = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                await stream.send_all(json.dumps(line).encode() + b"\n")
                while True:
                    while b"\n" in data:
                        first, data = data.split(b"\n", 1)
                        message: dict[str, Any] = json.loads(first)
                        if message.get("id") == request_id and "method" not in message:
                            return message
                    chunk = await stream.receive_some()
                    assert chunk, "the daemon closed the connection"
                    data += chunk

            await request(1, "initialize", {"protocolVersion": 1})
            new = await request(2, "session/new", {"cwd": str(harness.tmp_path), "mcpServers": []})
            text = f"[fake-agy:big-output] gate={gate}"
            prompt = {
                "sessionId": new["result"]["sessionId"],
                "prompt": [{"type": "text", "text": text}],
            }
            await stream.send_all(
                json.dumps(
                    {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}
                ).encode()
                + b"\n"
            )
            fd = stream.socket.fileno()
            # Past 16 KiB unread the daemon is inside the 1 MiB line, more than a
            # socket holds; "bytes waiting" is not an event, so this polls.
            while unread_bytes(fd) + len(data) < STARTED_BIG_LINE:  # noqa: ASYNC110
                await trio.sleep(0.02)
            async with trio.open_nursery() as nursery:
                # A short budget: a session whose loop is handing updates to this
                # client may not close before it runs out (the client is not reading).
                nursery.start_soon(supervisor.command, "stop", "--timeout", "2")
                while not logged(log, "finishing the line being written"):  # noqa: ASYNC110
                    await trio.sleep(0.02)
                async for chunk in stream:
                    data += chunk
    assert_whole_lines_with_the_big_one(data)
    await harness.assert_no_leftovers()


async def test_stale_socket_of_a_dead_daemon_is_replaced(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A socket file nobody listens on (a daemon that was SIGKILLed) does not
    stop a new daemon from starting."""
    supervisor.socket_dir.mkdir(mode=0o700, parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(supervisor.socket))
    stale.close()  # the file stays, nothing listens
    async with supervisor.attach() as client:
        await client.initialize()
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_without_a_daemon_status_and_stop_say_so(supervisor: Supervisor) -> None:
    """status and stop with no daemon: exit 1 and a sentence, no traceback."""
    for command in ("status", "stop"):
        done = await supervisor.command(command)
        assert done.returncode == 1
        assert b"no agybridge daemon is running" in done.stderr, done.stderr


async def test_attach_reports_a_daemon_that_cannot_start(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A daemon that exits at start-up (bad setting): attach exits 1 with its words."""
    done = await trio.run_process(
        list(ATTACH_CMD),
        env=supervisor.env(AGYBRIDGE_LOG_LEVEL="LOUD"),
        stdin=b"",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 1
    assert b"AGYBRIDGE_LOG_LEVEL" in done.stderr, done.stderr
    assert done.stdout == b""
    await harness.assert_no_leftovers()


async def test_attach_relays_the_answers_to_what_it_read_before_stdin_ended(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A client that writes its requests and closes stdin still gets their
    answers (as from the in-process bridge), then attach exits 0."""
    requests = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}},
    ]
    with trio.fail_after(WAIT_S):
        done = await trio.run_process(
            list(ATTACH_CMD),
            env=supervisor.env(),
            stdin=b"".join(json.dumps(r).encode() + b"\n" for r in requests),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a.get("id") for a in answers if "id" in a] == [0, 1], answers
    assert all("result" in a for a in answers if "id" in a), answers
    await supervisor.stop()
    await harness.assert_no_leftovers()


def test_peer_of_another_uid_is_refused() -> None:
    """SO_PEERCRED: a peer whose uid is not the daemon's is refused (the other
    uid is simulated: tests cannot run as another user)."""
    if not hasattr(socket, "SO_PEERCRED"):
        pytest.skip("no SO_PEERCRED on this platform (the 0700 directory is the check)")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        assert peer_allowed(ours, os.getuid())
        assert not peer_allowed(ours, os.getuid() + 1)


async def test_a_permission_question_waits_for_the_next_client(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A question open when its client dies is asked again of the client that
    loads the session next; until then status lists it."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first:
        first.permission_choice = "hold"
        await first.initialize()
        session_id = await first.new_session(tmp)
        await first.start_prompt(session_id, "[fake-agy:permission-tool]")
        await first.wait_for(lambda: first.permission_requests or None, "a question")
        first.process.kill()
        await first.process.wait()
    waiting = await supervisor.wait_session_state(session_id, "waiting_for_permission")
    assert waiting["permissionQuestions"] == 1 and not waiting["attached"]
    async with supervisor.attach() as second:
        second.permission_choice = "allow_once"
        await second.initialize()
        loaded = await second.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        await second.wait_for(lambda: _turn_states(second, session_id)[1:], "the outcome")
        assert _turn_states(second, session_id)[-1] == {"state": "ended", "stopReason": "end_turn"}
        assert second.permission_requests, "the question was not asked again"
        asked = second.permission_requests[0]["params"]
        assert asked == first.permission_requests[0]["params"]
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_a_permission_question_follows_the_client_that_takes_the_session(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A question open with a client when another client opens the session is
    withdrawn from the first ($/cancel_request) and asked of the second, which
    now drives the session (README "Two clients on one session")."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first, supervisor.attach() as second:
        first.permission_choice = "hold"
        await first.initialize()
        session_id = await first.new_session(tmp)
        await first.start_prompt(session_id, "[fake-agy:permission-tool]")
        await first.wait_for(lambda: first.permission_requests or None, "a question")
        second.permission_choice = "allow_once"
        await second.initialize()
        loaded = await second.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        with trio.fail_after(WAIT_S):
            await second.wait_for(lambda: second.permission_requests or None, "the question")
        asked = first.permission_requests[0]
        assert second.permission_requests[0]["params"] == asked["params"]

        def withdrawn() -> list[dict[str, Any]]:
            return [
                m
                for m in first.received
                if m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked["id"]
            ]

        # Two connections: the withdrawal queued for the first client may reach
        # it after the second has its question (no order across connections).
        with trio.fail_after(WAIT_S):
            await first.wait_for(withdrawn, "the question withdrawn from the first client")
        await second.wait_for(lambda: _turn_states(second, session_id)[1:], "the outcome")
        assert _turn_states(second, session_id)[-1] == {"state": "ended", "stopReason": "end_turn"}
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_agys_question_is_phrased_for_the_client_that_takes_the_session(
    supervisor: Supervisor, harness: Harness
) -> None:
    """agy's question, open as a permission question with a client without form
    elicitation, is asked again of the client that takes the session in that client's
    terms: an elicitation/create form; its answer reaches agy."""
    tmp = harness.tmp_path
    async with supervisor.attach() as first, supervisor.attach() as second:
        first.permission_choice = "hold"
        await first.initialize()
        session_id = await first.new_session(tmp)
        await first.start_prompt(session_id, "[fake-agy:ask-question]")
        await first.wait_for(lambda: first.permission_requests or None, "a question")
        second.elicitation_result = {"action": "accept", "content": {"answer1": "red"}}
        await second.initialize(elicitation={"form": {}})
        loaded = await second.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        with trio.fail_after(WAIT_S):
            await second.wait_for(lambda: second.elicitation_requests or None, "the form")
        assert second.permission_requests == []
        await second.wait_for(lambda: _turn_states(second, session_id)[1:], "the outcome")
        assert _turn_states(second, session_id)[-1] == {"state": "ended", "stopReason": "end_turn"}
    await supervisor.stop()
    reasons = [e["hook"].get("reason") for e in harness.launches() if "hook" in e]
    assert reasons == [
        "answered by the user in the editor (this is the answer, not a refusal): "
        '"Which colour do you prefer?" -> red'
    ]
    await harness.assert_no_leftovers()


async def test_on_disconnect_cancel_cancels_the_turn(
    supervisor: Supervisor, harness: Harness
) -> None:
    """AGYBRIDGE_ON_DISCONNECT=cancel: a client's disconnect cancels its
    sessions' turns (the session stays, idle, with the same agy)."""
    async with supervisor.attach(AGYBRIDGE_ON_DISCONNECT="cancel") as first:
        session_id, _ = await _start_slow_turn(first, harness.tmp_path)
        before = await supervisor.session_status(session_id)
        first.process.kill()
        await first.process.wait()
    # The cancelled turn's agy was stopped and a warm one took its place: the
    # session is idle at once, its new agy's pid shows once that agy started.
    after = await supervisor.wait_session(
        session_id, lambda s: _idle_with_another_agy(s, before), "idle with a new agy"
    )
    assert not after["attached"]
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_a_session_can_ask_for_cancel_on_disconnect(
    supervisor: Supervisor, harness: Harness
) -> None:
    """``_meta.onDisconnect: cancel`` on session/new overrides the daemon's default
    (keep) for that session only; a bad value is -32602 naming the field."""
    async with supervisor.attach() as first:
        await first.initialize()
        bad = await first.request(
            "session/new",
            {"cwd": str(harness.tmp_path), "mcpServers": [], "_meta": {"onDisconnect": "x"}},
        )
        assert bad["error"]["code"] == -32602
        assert bad["error"]["data"]["path"] == "$._meta.onDisconnect"
        new = await first.request(
            "session/new",
            {"cwd": str(harness.tmp_path), "mcpServers": [], "_meta": {"onDisconnect": "cancel"}},
        )
        session_id = new["result"]["sessionId"]
        await first.start_prompt(session_id, "count for me")
        await first.wait_for(lambda: "tick 2" in first.message_text(session_id), "two ticks")
        before = await supervisor.session_status(session_id)
        first.process.kill()
        await first.process.wait()
    await supervisor.wait_session(
        session_id, lambda s: _idle_with_another_agy(s, before), "idle with a new agy"
    )
    await supervisor.stop()
    await harness.assert_no_leftovers()


async def test_idle_daemon_exits_when_configured(supervisor: Supervisor, harness: Harness) -> None:
    """AGYBRIDGE_DAEMON_IDLE_EXIT_S: with no client and no session left for that
    long, the daemon stops by itself and removes its socket."""
    async with supervisor.attach(AGYBRIDGE_DAEMON_IDLE_EXIT_S="0.2") as client:
        await client.initialize()
        session_id = await client.new_session(harness.tmp_path)
        closed = await client.request("session/close", {"sessionId": session_id})
        assert "result" in closed, closed
    await harness.assert_no_leftovers(timeout_s=WAIT_S)
    assert not supervisor.socket.exists()


async def test_a_load_of_a_client_gone_while_it_waited_does_not_take_the_session(
    supervisor: Supervisor, harness: Harness
) -> None:
    """A client sends session/load, then closes its socket while the load waits
    behind another client's load of the session (the manager's lifecycle lock):
    the departed client does not take the session from the live one, which
    keeps driving it (its prompt runs, its permission question reaches it, it
    is not told ``attached: false``). Before, the load finished for nobody,
    the live client was told it was detached and nobody was attached: the
    turn's question waited for agy's hook timeout, the prompts behind it hung."""
    tmp = harness.tmp_path
    clock = itertools.count()
    open_params = {"cwd": str(tmp), "mcpServers": []}
    init = {"protocolVersion": 1, "clientCapabilities": {}}
    async with supervisor.attach() as keeper, trio.open_nursery() as nursery:
        await keeper.initialize()  # the daemon runs from here on

        async def connect(name: str) -> Conn:
            conn = Conn(name, await trio.open_unix_socket(str(supervisor.socket)), clock)
            nursery.start_soon(conn.read)
            assert "result" in (await conn.call("initialize", init) or {})
            return conn

        with trio.fail_after(WAIT_S):
            live = await connect("live")
            created = await live.call("session/new", open_params) or {}
            session_id = created["result"]["sessionId"]
            big = "[fake-agy:echo] " + "x" * 2**20  # a replay no socket buffer holds
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": big}]}
            assert stop_reason(await live.call("session/prompt", prompt) or {}) == "end_turn"
            # The live client's own load replays the history; it stops reading
            # once that began, so its load holds the session's lifecycle lock.
            replaying = len(live.received)
            load = live.request("session/load", {"sessionId": session_id, **open_params})
            await live.send([load])
            await live.wait_for(lambda: len(live.received) > replaying)
            live.reading = trio.Event()
            gone = await connect("gone")
            taking = gone.request("session/load", {"sessionId": session_id, **open_params})
            await gone.send([taking])
            await gone.stream.aclose()  # fully closed: it reads nothing more
            gone.reading.set()
            live.reading.set()
            assert "result" in (await live.wait_for(lambda: live.answer(load["id"])) or {})
            # The departed client's load is done once its connection is (the
            # clients left: keeper, live, and the status command's own).
            while (await supervisor.status())["clients"] > 3:  # noqa: ASYNC110
                await trio.sleep(0.05)
            question = {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": "[fake-agy:permission-tool]"}],
            }
            done = await live.call("session/prompt", question) or {}
            assert stop_reason(done) == "end_turn", done
        asked = [m for m in live.received if m.get("method") == "session/request_permission"]
        assert asked, "the permission question did not reach the live client"
        told = [m for m in live.received if (_update_meta(m).get("attached") is False)]
        assert told == [], told
        await live.stream.aclose()
        live.reading.set()
        nursery.cancel_scope.cancel()
    await supervisor.stop()
    await harness.assert_no_leftovers()


def _update_meta(message: dict[str, Any]) -> dict[str, Any]:
    update = (message.get("params") or {}).get("update") or {}
    meta: dict[str, Any] = (update.get("_meta") or {}).get("agybridge") or {}
    return meta


async def test_a_second_daemon_or_a_bridge_on_the_same_database_refuses_and_no_turn_is_lost(
    supervisor: Supervisor, harness: Harness, short_dir: Path
) -> None:
    """Issue 28: a daemon on another socket (one environment with
    XDG_RUNTIME_DIR, one without) and a stdio bridge refuse the database a
    daemon has, naming it; every turn of the first is in the history after."""
    prompt = {"prompt": [{"type": "text", "text": "[fake-agy:echo] one"}]}
    async with supervisor.attach() as client:
        await client.initialize()
        session_id = await client.new_session(harness.tmp_path)
        first = await client.request("session/prompt", {"sessionId": session_id, **prompt})
        assert stop_reason(first) == "end_turn", first
        pid = (await supervisor.status())["pid"]
        other = short_dir / "other" / "agybridge.sock"
        with trio.fail_after(WAIT_S):
            second = await trio.run_process(
                [*BRIDGE_CMD, "daemon"],
                env={**supervisor.env(), "AGYBRIDGE_SOCKET": str(other)},
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            bridge = await trio.run_process(
                list(BRIDGE_CMD),
                env=supervisor.env(),
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        message = second.stderr.decode()
        assert second.returncode == 1, message
        assert f"pid {pid}, socket {supervisor.socket}" in message, message
        assert not other.exists()
        told = bridge.stderr.decode()
        assert bridge.returncode == 2 and "agybridge attach" in told, told
        assert f"pid {pid}" in told and bridge.stdout == b"", told
        prompt["prompt"][0]["text"] = "[fake-agy:echo] two"
        again = await client.request("session/prompt", {"sessionId": session_id, **prompt})
        assert stop_reason(again) == "end_turn", again
    await supervisor.stop()
    async with harness.open_bridge() as after:  # the daemon is gone: the database is free
        await after.initialize()
        loaded = await after.request(
            "session/load",
            {"sessionId": session_id, "cwd": str(harness.tmp_path), "mcpServers": []},
        )
        assert "result" in loaded, loaded
        said = [u["content"]["text"] for u in after.updates(session_id, "user_message_chunk")]
        assert said == ["[fake-agy:echo] one", "[fake-agy:echo] two"], said
    await harness.assert_no_leftovers()


async def test_a_daemon_killed_mid_turn_is_reported_and_the_turn_is_in_the_history(
    supervisor: Supervisor, harness: Harness
) -> None:
    """SIGKILL of the daemon while a prompt runs: attach answers the prompt
    (and every other request it relayed) with an error naming the cause,
    says so on stderr and exits 1; the next daemon journals the interrupted
    turn, so the next session/load shows it. No agy is left running."""
    async with supervisor.attach() as client:
        session_id, prompt = await _start_slow_turn(client, harness.tmp_path)
        other = await client.start_request("session/list", {})
        pid = (await supervisor.status())["pid"]
        os.kill(pid, signal.SIGKILL)
        answer = await client.response(prompt)
        assert answer["error"]["code"] == -32603, answer
        assert "daemon closed the connection before answering" in answer["error"]["message"]
        listed = await client.response(other)
        assert "result" in listed or listed["error"]["code"] == -32603, listed
        with trio.fail_after(WAIT_S):
            assert await client.process.wait() == 1
    said = (harness.tmp_path / "bridge-stderr.log").read_text()
    assert "closed the connection" in said and "answered with an error" in said, said
    await harness.assert_no_leftovers(timeout_s=WAIT_S)  # the watchdog ended its agy
    async with supervisor.attach() as again:  # a new daemon
        await again.initialize()
        loaded = await again.request(
            "session/load",
            {"sessionId": session_id, "cwd": str(harness.tmp_path), "mcpServers": []},
        )
        assert "result" in loaded, loaded
        said = [u["content"]["text"] for u in again.updates(session_id, "user_message_chunk")]
        assert said == ["count for me"], said
        answered = again.message_text(session_id)
        assert f"the agybridge daemon, pid {pid}, stopped before it ended" in answered, answered
    await supervisor.stop()
    await harness.assert_no_leftovers()
