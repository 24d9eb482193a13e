"""Requests sent right behind a ``session/load`` of their session wait for it
(ordering.py) in their `Request`; a ``session/cancel`` cancels the prompts
sent before it among them, and no later one."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing

from agybridge.agent.auth import SignInState
from agybridge.agent.handlers import AcpAgent
from agybridge.jsonrpc import MessageContext, RequestContext, RpcError
from agybridge.session.config import Catalog

SESSION = "sess_gone"


class NoSessions:
    """A manager with no live or stored session (load answers -32603: no store)."""

    deps = SimpleNamespace(catalog=Catalog)
    store = None

    def __init__(self) -> None:
        self.spoke: list[str] = []

    def get(self, session_id: str) -> None:
        return None

    def client_spoke(self, session_id: str) -> None:
        self.spoke.append(session_id)

    @contextlib.asynccontextmanager
    async def lifecycle(self, session_id: str) -> AsyncIterator[None]:
        yield


async def _client(*_: Any) -> None:
    raise AssertionError("nothing is sent to the client")


def prompt(seq: int) -> tuple[str, dict[str, Any], RequestContext]:
    params = {"sessionId": SESSION, "prompt": [{"type": "text", "text": f"p{seq}"}]}
    return (
        "session/prompt",
        params,
        RequestContext(request_id=seq, method="session/prompt", seq=seq),
    )


LOAD = {"sessionId": SESSION, "cwd": "/", "mcpServers": []}


async def loading(manager: NoSessions) -> tuple[AcpAgent, RequestContext]:
    """An initialized agent that has read a session/load (seq 1) of SESSION."""
    bridge = AcpAgent(cast(Any, manager), _client, sign_in=SignInState("agy-not-run"))
    init = RequestContext(request_id=0, method="initialize", seq=0)
    bridge.request_received("initialize", {"protocolVersion": 1}, init)
    await bridge.handle_request("initialize", {"protocolVersion": 1}, init)
    load = RequestContext(request_id=1, method="session/load", seq=1)
    bridge.request_received("session/load", LOAD, load)
    return bridge, load


async def test_a_cancel_reaches_the_prompts_waiting_behind_a_load_sent_before_it() -> None:
    manager = NoSessions()
    bridge, load = await loading(manager)
    early, late = prompt(2), prompt(4)
    bridge.request_received(*early)
    await bridge.handle_notification(
        "session/cancel", {"sessionId": SESSION}, MessageContext(seq=3)
    )
    bridge.request_received(*late)
    answers: dict[int, Any] = {}

    async def run(method: str, params: dict[str, Any], ctx: RequestContext) -> None:
        try:
            answers[ctx.seq] = await bridge.handle_request(method, params, ctx)
        except RpcError as exc:
            answers[ctx.seq] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, *early)
        nursery.start_soon(run, *late)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == {}  # both wait for the load
        await run("session/load", LOAD, load)
    assert isinstance(answers[1], RpcError) and answers[1].code == -32603  # no store
    assert answers[2] == {"stopReason": "cancelled"}
    late_error = answers[4]
    assert isinstance(late_error, RpcError) and late_error.code == -32002, late_error
    assert f"no live session {SESSION!r}" in late_error.message
    # The load, then each prompt as it was read: the session is not live.
    assert manager.spoke == [SESSION] * 3


@pytest.mark.parametrize("cancel", ["request", "session"])
async def test_a_prompt_cancelled_while_behind_is_answered_cancelled(cancel: str) -> None:
    """``$/cancel_request`` for a prompt waiting behind a load: the cancelled
    result (as any prompt), not -32800."""
    bridge, load = await loading(NoSessions())
    waiting = prompt(2)
    bridge.request_received(*waiting)
    if cancel == "request":
        waiting[2].cancel()
    else:
        await bridge.handle_notification(
            "session/cancel", {"sessionId": SESSION}, MessageContext(seq=3)
        )
    answer: list[Any] = []

    async def run_prompt() -> None:
        answer.append(await bridge.handle_request(*waiting))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_prompt)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RpcError):
            await bridge.handle_request("session/load", LOAD, load)
    assert answer == [{"stopReason": "cancelled"}]
