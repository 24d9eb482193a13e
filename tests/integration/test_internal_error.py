"""A bug inside the bridge while it serves a turn (issue 9 item 5): the prompt
is answered -32603 naming it — never ``cancelled`` — and the session goes on
with a fresh agy. The bug is made real by breaking the mapper in-process, so
this test runs the bridge in-process (``server.serve``) over memory streams,
with the real fake agy as its child."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from agybridge.agy import StepUpdateEvent
from agybridge.config import Settings
from agybridge.server import serve
from agybridge.session import actions
from agybridge.session import turn_events as ev
from agybridge.session.session import Session
from agybridge.translate.mapper import TurnMapper

from ..acp_wire import bridge_env, new_marker, wait_no_leftovers

TIMEOUT_S = 60


class LineClient:
    def __init__(self, stream: trio.testing.StapledStream[Any, Any]) -> None:
        self.stream = stream
        self.buffer = b""
        self.received: list[dict[str, Any]] = []
        self.next_id = 0

    async def send(self, message: dict[str, Any]) -> None:
        await self.stream.send_all(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        request_id = self.next_id
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = await self.receive()
            if message.get("id") == request_id and "method" not in message:
                return message

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        """Send a text prompt; its answer."""
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.request("session/prompt", params)

    async def new_session(self, cwd: Path) -> str:
        await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = await self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id: str = new["result"]["sessionId"]
        return session_id

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some()
            assert chunk, "the bridge closed the stream"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        self.received.append(message)
        return message


def echo_bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, str]:
    """Settings (from this test's environment only) for an in-process bridge
    over the fake agy's echo scenario, and the run's marker."""
    marker = new_marker()
    for key in [k for k in os.environ if k.startswith(("AGYBRIDGE_", "FAKE_AGY_", "AGY_"))]:
        monkeypatch.delenv(key)
    for key, value in bridge_env(tmp_path, marker, "echo").items():
        monkeypatch.setenv(key, value)
    return Settings.from_env(), marker


@asynccontextmanager
async def _bridge(settings: Settings) -> AsyncIterator[LineClient]:
    """A client of a bridge served in-process; the block ends with the bridge."""
    client_side, bridge_side = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve, bridge_side, bridge_side, settings)
        yield LineClient(client_side)


async def test_an_internal_error_fails_the_turn_and_the_session_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, marker = echo_bridge(tmp_path, monkeypatch)

    original = TurnMapper.feed

    def feed(self: TurnMapper, event: Any, *args: Any, **kwargs: Any) -> Any:
        step = event.step_update if isinstance(event, StepUpdateEvent) else None
        if step is not None and "explode" in (step.text_delta or ""):
            raise RuntimeError("the mapper broke")
        return original(self, event, *args, **kwargs)

    monkeypatch.setattr(TurnMapper, "feed", feed)
    with trio.fail_after(TIMEOUT_S):
        async with _bridge(settings) as client:
            session_id = await client.new_session(tmp_path)

            broken = await client.prompt(session_id, "please explode")
            assert broken["error"]["code"] == -32603, broken
            assert broken["error"]["data"]["_meta"]["agybridge"]["cause"] == "bridge_bug"
            assert "the mapper broke" in broken["error"]["message"]
            assert "RuntimeError" in broken["error"]["message"]
            healthy = await client.prompt(session_id, "hello again")
            assert healthy["result"]["stopReason"] == "end_turn", healthy
            closed = await client.request("session/close", {"sessionId": session_id})
            assert closed["result"] == {}
            await client.stream.send_eof()
            # the bridge returns on EOF: every child reaped
    assert await wait_no_leftovers(marker) == []


@pytest.mark.parametrize(
    ("broken", "before_the_answer"), [("RecordTurn", True), ("ArmIdle", False)]
)
async def test_a_bug_in_an_action_before_the_answer_still_answers_the_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str, before_the_answer: bool
) -> None:
    """An action the core decided with a prompt's answer raises (the journal
    write before it, the idle timer after it): the prompt is still answered
    (with the bug, if it came first), never left waiting; the session goes on."""
    settings, marker = echo_bridge(tmp_path, monkeypatch)
    kind = getattr(ev, broken)
    original = actions.PERFORM[kind]
    armed = [True]

    async def explode(session: Session, action: Any) -> None:
        if armed[0] and "explode" in (session.title or ""):
            armed[0] = False
            raise RuntimeError(f"{broken} broke")
        await original(session, action)

    monkeypatch.setitem(actions.PERFORM, kind, explode)
    with trio.fail_after(TIMEOUT_S):
        async with _bridge(settings) as client:
            session_id = await client.new_session(tmp_path)

            answered = await client.prompt(session_id, "please explode")
            if before_the_answer:
                assert answered["error"]["code"] == -32603, answered
                assert f"{broken} broke" in answered["error"]["message"]
            else:
                assert answered["result"]["stopReason"] == "end_turn", answered
            assert not armed[0], "the broken action never ran"
            healthy = await client.prompt(session_id, "hello again")
            assert healthy["result"]["stopReason"] == "end_turn", healthy
            await client.stream.send_eof()
    assert await wait_no_leftovers(marker) == []


async def test_a_closed_session_has_ended_and_is_never_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a session's loop is over it counts as ended (what the manager's `get`
    and `open` look at), and waiting on its loop returns at once, not forever."""
    settings, marker = echo_bridge(tmp_path, monkeypatch)
    sessions: list[Session] = []
    original_run = Session.run

    async def run(self: Session, **kwargs: Any) -> None:
        sessions.append(self)
        await original_run(self, **kwargs)

    monkeypatch.setattr(Session, "run", run)
    with trio.fail_after(TIMEOUT_S):
        async with _bridge(settings) as client:
            session_id = await client.new_session(tmp_path)
            [session] = sessions
            assert not session.ended
            closed = await client.request("session/close", {"sessionId": session_id})
            assert closed["result"] == {}
            assert session.closed.is_set()
            assert session.ended
            assert session.closing
            await session.barrier()  # returns: the loop it would wait for is gone
            await client.stream.send_eof()
    assert await wait_no_leftovers(marker) == []
