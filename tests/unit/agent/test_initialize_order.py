"""``initialize`` first, in wire order (acp/brief.md §1: -32600 "the first ACP
request must be initialize"), whatever order the request tasks run in."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from agybridge.agent.auth import SignInState
from agybridge.agent.handlers import AcpAgent
from agybridge.jsonrpc import RequestContext, RpcError
from agybridge.session.config import Catalog


def agent() -> AcpAgent:
    manager: Any = SimpleNamespace(deps=SimpleNamespace(catalog=Catalog))

    async def client(*_: Any) -> None:
        raise AssertionError("nothing is sent to the client")

    return AcpAgent(manager, client, sign_in=SignInState("agy-not-run"))


async def test_a_request_sent_before_initialize_is_refused_when_it_runs_after() -> None:
    """session/new, then initialize, in one write: the reader sees both before
    session/new's task runs, which must not then wait for initialize and succeed."""
    bridge = agent()
    early = RequestContext(request_id=1, method="session/new", seq=0)
    init = RequestContext(request_id=2, method="initialize", seq=1)
    new_params = {"cwd": "/", "mcpServers": []}
    bridge.request_received("session/new", new_params, early)
    bridge.request_received("initialize", {"protocolVersion": 1}, init)
    outcome: list[BaseException] = []

    async def run_early() -> None:
        try:
            await bridge.handle_request("session/new", new_params, early)
        except Exception as exc:  # the test looks at it
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_early)
        await trio.testing.wait_all_tasks_blocked()
        answer = await bridge.handle_request("initialize", {"protocolVersion": 1}, init)
    assert answer["protocolVersion"] == 1
    [error] = outcome
    assert isinstance(error, RpcError), repr(error)
    assert error.code == -32600 and "initialize" in error.message
    assert "failed" not in error.message  # it did not


@pytest.mark.parametrize("method", ["authenticate", "session/list"])
async def test_requests_after_initialize_still_wait_for_it(method: str) -> None:
    """Sent after initialize (not waiting for its answer): served once it is done."""
    bridge = agent()
    init = RequestContext(request_id=1, method="initialize", seq=0)
    later = RequestContext(request_id=2, method=method, seq=1)
    bridge.request_received("initialize", {"protocolVersion": 1}, init)
    bridge.request_received(method, {"methodId": "nope"}, later)
    outcome: list[BaseException] = []

    async def run_later() -> None:
        try:
            await bridge.handle_request(method, {"methodId": "nope"}, later)
        except Exception as exc:  # the test looks at it
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_later)
        await trio.testing.wait_all_tasks_blocked()
        await bridge.handle_request("initialize", {"protocolVersion": 1}, init)
    [error] = outcome
    # Past the initialize check: refused for its own params, not as too early.
    assert not (isinstance(error, RpcError) and error.code == -32600), repr(error)
