"""Issue 28, through a daemon served in-process on a real Unix socket (the
real fake agy as its children): the idle exit drops no client, and a client
that stops reading stalls no turn and no stop for longer than its bound."""

from __future__ import annotations

import json
import random
import shutil
import socket
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agybridge.attach.control import format_status
from agybridge.daemon.listener import own_socket_path
from agybridge.daemon.supervisor import Daemon
from agybridge.store import AsyncStore, Store

from ..acp_wire import wait_no_leftovers
from .test_internal_error import LineClient, echo_bridge

pytestmark = pytest.mark.integration

TIMEOUT_S = 120
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


@attrs.define
class Run:
    """One daemon's life: stopped once ``done`` is set."""

    daemon: Daemon
    done: trio.Event = attrs.Factory(trio.Event)


async def _serve(daemon: Daemon, started: trio.Event, run: Run) -> None:
    try:
        async with own_socket_path(daemon.socket_path) as listener:
            ready = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(daemon.run, listener, ready)
                await ready.wait()
                started.set()
    finally:
        run.done.set()


@asynccontextmanager
async def _daemons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **changes: Any
) -> AsyncIterator[tuple[Any, Path, trio.Nursery]]:
    """``start()`` starts a daemon in-process (after the last one ended)."""
    settings, marker = echo_bridge(tmp_path, monkeypatch)
    settings = attrs.evolve(settings, **changes)
    socket_dir = Path(tempfile.mkdtemp(prefix="agyr-"))
    path = socket_dir / "agybridge.sock"
    store = AsyncStore(Store.open(tmp_path / "sessions.db"))
    runs: list[Run] = []
    try:
        with trio.fail_after(TIMEOUT_S):
            async with trio.open_nursery() as nursery:

                async def start() -> Run:
                    if runs:
                        await runs[-1].done.wait()
                    run = Run(Daemon(settings, path, store))
                    runs.append(run)
                    started = trio.Event()
                    nursery.start_soon(_serve, run.daemon, started, run)
                    await started.wait()
                    return run

                try:
                    yield start, path, nursery
                finally:
                    if runs:
                        runs[-1].daemon.stop(2.0)
    finally:
        await store.aclose()
        shutil.rmtree(socket_dir, ignore_errors=True)
    assert await wait_no_leftovers(marker) == []


def _ask(path: Path) -> str:
    """As ``attach`` does (in a thread, with blocking sockets, so it races the
    daemon for real): ``initialize``'s answer; "refused" when nothing listens
    (attach starts a new daemon); "closed" when the connection ended before
    the first byte of an answer (attach connects again)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            return "refused"
        try:
            sock.sendall(json.dumps(INITIALIZE).encode() + b"\n")
            data = sock.makefile("rb").readline()
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        if not data:
            return "closed"
        answer = json.loads(data)
        assert answer.get("id") == 1 and "result" in answer, answer
        return "answered"


async def test_a_client_connecting_as_the_idle_daemon_exits_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 connections, each made around the idle exit's deadline (a client
    came and went, then the next one waits about the idle time): every one
    is answered, by the old daemon or, once it has gone, a new one, as
    ``attach`` makes it (a connection closed before its first answer is made
    again, at most 3 times, as attach does). None is dropped unanswered."""
    idle_s = 0.05
    rng = random.Random(28)
    outcomes: Counter[str] = Counter()
    async with _daemons(tmp_path, monkeypatch, daemon_idle_exit_s=idle_s) as (start, path, _):
        await start()

        async def attach() -> None:
            for _ in range(4):
                outcome = await trio.to_thread.run_sync(_ask, path)
                outcomes[outcome] += 1
                if outcome == "answered":
                    return
                if outcome == "refused":
                    await start()
            raise AssertionError(f"not answered after 3 new connections: {outcomes}")

        for _ in range(100):
            await attach()  # a client comes and goes: idle from now
            await trio.sleep(idle_s * rng.uniform(0.7, 1.3))  # the race is the point
            await attach()
    assert outcomes["answered"] == 200, outcomes
    assert outcomes["refused"] >= 10, outcomes  # the deadline was hit, often
    # The daemon serves what it accepted: only a connection made in the few
    # microseconds between its last look at the queue and closing the socket
    # can end unanswered (then attach connects again). Before issue 28 one in
    # four connections near the deadline did.
    assert outcomes["closed"] <= 2, outcomes
    print(f"idle-exit race: {dict(outcomes)}")  # for the closing note


async def _status(path: Path) -> dict[str, Any]:
    stream = await trio.open_unix_socket(str(path))
    async with stream:
        client = LineClient(stream)
        answer = await client.request("_agybridge/status", {})
    status: dict[str, Any] = answer["result"]
    return status


async def _until(path: Path, check: Any) -> dict[str, Any]:
    """The daemon's status once ``check`` holds (it is only observable by asking)."""
    while not check(status := await _status(path)):  # noqa: ASYNC110
        await trio.sleep(0.05)
    return status


async def _flood_unread(path: Path, cwd: Path, lines: int) -> trio.SocketStream:
    """A client that opens a session, prompts a flood of ``lines`` and, from
    then on, reads nothing (its connection, to close)."""
    stream = await trio.open_unix_socket(str(path))
    client = LineClient(stream)
    session_id = await client.new_session(cwd)
    text = f"[fake-agy:flood] {lines}"
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    await client.send({"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": prompt})
    return stream


async def test_a_client_that_stops_reading_does_not_stall_its_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client floods its session with a turn and reads nothing (its socket
    stays open): after the read timeout it is detached, the turn runs to its
    end without it, and ``status`` shows it."""
    bound_s, grace_s = 1.0, 1.0
    async with _daemons(
        tmp_path, monkeypatch, client_read_timeout_s=bound_s, shutdown_grace_s=grace_s
    ) as (start, path, _):
        await start()
        stream = await _flood_unread(path, tmp_path, 20000)
        started = trio.current_time()
        # From here on it reads nothing.
        status = await _until(path, lambda s: s["clientsNotReading"] == 1)
        detached_after = trio.current_time() - started
        status = await _until(path, lambda s: s["sessions"][0]["state"] == "idle")
        turn_ended_after = trio.current_time() - started
        assert status["clients"] == 1 and status["clientsNotReading"] == 1, status
        assert status["sessions"][0]["attached"] is False, status
        await stream.aclose()
    print(  # for the closing note
        f"frozen client: detached {detached_after:.2f} s after its prompt (bound {bound_s} s), "
        f"its turn ended {turn_ended_after:.2f} s after it"
    )


async def test_stop_gives_a_client_that_stopped_reading_mid_turn_the_grace_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No read timeout: the session is stuck handing the turn to a client that
    reads nothing when ``stop`` comes with a budget of 30 s. The client is
    given the shutdown grace, then let go: the daemon ends long before the
    budget (issue 28: it took the whole budget plus ~4 s)."""
    grace_s = 1.0
    async with _daemons(
        tmp_path, monkeypatch, client_read_timeout_s=0.0, shutdown_grace_s=grace_s
    ) as (start, path, _):
        run = await start()
        stream = await _flood_unread(path, tmp_path, 400000)
        (connection,) = run.daemon.connections.values()
        while run.daemon.read_watch.stuck_since(connection) is None:  # noqa: ASYNC110  # the daemon's writes are not events
            await trio.sleep(0.02)
        stopping = trio.current_time()
        run.daemon.stop(30.0)
        await run.done.wait()
        stopped_after = trio.current_time() - stopping
        await stream.aclose()
    assert stopped_after < 30.0  # the budget was not what ended it
    print(f"stop with a client not reading mid-turn: {stopped_after:.2f} s (grace {grace_s} s)")


async def test_status_names_the_cause_of_the_last_turn_that_did_not_end_well(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: ``status`` uses the catalogue: a print-timed-out turn is
    ``lastFailure.cause = print_timeout`` on its session."""
    async with _daemons(tmp_path, monkeypatch) as (start, path, _):
        await start()
        stream = await trio.open_unix_socket(str(path))
        async with stream:
            client = LineClient(stream)
            session_id = await client.new_session(tmp_path)
            answer = await client.prompt(session_id, "[fake-agy:print-timeout] hi")
            assert answer["result"]["_meta"]["agybridge"]["cause"] == "print_timeout"
            status = await _status(path)
            (session,) = status["sessions"]
            assert session["lastFailure"]["cause"] == "print_timeout", session
            assert "idle, last turn: print_timeout" in format_status(status)
