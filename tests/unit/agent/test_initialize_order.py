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


@pytest.mark.parametrize("method", ["authenticate", "session/list", "session/new"])
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


async def initialize(params: Any) -> dict[str, Any]:
    bridge = agent()
    ctx = RequestContext(request_id=0, method="initialize", seq=0)
    bridge.request_received("initialize", params, ctx)
    answer: dict[str, Any] = await bridge.handle_request("initialize", params, ctx)
    return answer | {"caps": bridge.client_capabilities}


@pytest.mark.parametrize("version", [-1, 65536, 1.5, "1", True, None])
async def test_a_protocol_version_that_is_no_uint16_is_invalid_params(version: Any) -> None:
    """The schema's ProtocolVersion is an integer from 0 to 65535; the TS SDK's
    router answers anything else -32602 (an unsupported one in range gets 1)."""
    params = {"protocolVersion": version} if version is not None else {}
    with pytest.raises(RpcError) as caught:
        await initialize(params)
    assert caught.value.code == -32602
    assert "protocolVersion" in caught.value.message
    assert "$.protocolVersion" in str(caught.value.data)


@pytest.mark.parametrize("version", [0, 2, 999, 65535])
async def test_any_uint16_version_is_answered_with_1(version: int) -> None:
    assert (await initialize({"protocolVersion": version}))["protocolVersion"] == 1


@pytest.mark.parametrize(
    "odd",
    [
        {"clientInfo": "zed"},
        {"clientInfo": {"name": 5}},
        {"clientInfo": {"name": "zed"}},
        {"clientCapabilities": None},
        {"clientCapabilities": "all"},
        {"clientCapabilities": {"fs": None, "terminal": "yes", "auth": []}},
        {"_meta": 5},
    ],
)
async def test_malformed_optional_initialize_fields_are_defaulted(odd: dict[str, Any]) -> None:
    """The schema marks clientInfo, clientCapabilities (each of its fields) and
    _meta x-deserialize-default-on-error, and both SDKs default them: a client
    is not locked out over what it says about itself."""
    answer = await initialize({"protocolVersion": 1, **odd})
    assert answer["protocolVersion"] == 1
    caps = answer["caps"]
    assert (caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal) == (False,) * 3
    assert [m["id"] for m in answer["authMethods"]] == ["agy-signed-in"]


async def test_each_capability_field_is_defaulted_on_its_own() -> None:
    answer = await initialize(
        {
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": {"readTextFile": True, "writeTextFile": "no"},
                "terminal": 1,
                "auth": {"terminal": True},
                "_meta": [],
            },
        }
    )
    caps = answer["caps"]
    assert (caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal) == (True, False, False)
    assert [m["id"] for m in answer["authMethods"]] == ["agy-login", "agy-signed-in"]


async def test_a_request_after_an_initialize_with_unusable_text_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """initialize whose params hold a NUL is answered -32602 before it reaches
    its handler; a request sent right behind it must then be refused as after
    a failed initialize (-32600), not wait for an answer already given."""
    bridge = agent()
    init = RequestContext(request_id=1, method="initialize", seq=0)
    later = RequestContext(request_id=2, method="session/list", seq=1)
    bad = {"protocolVersion": 1, "clientInfo": {"name": "z\x00ed", "version": "1"}}
    bridge.request_received("initialize", bad, init)
    bridge.request_received("session/list", {}, later)
    with pytest.raises(RpcError) as refused:
        await bridge.handle_request("initialize", bad, init)
    assert refused.value.code == -32602 and "$.clientInfo.name" in refused.value.message
    with trio.fail_after(5), pytest.raises(RpcError) as caught:
        await bridge.handle_request("session/list", {}, later)
    assert caught.value.code == -32600
    assert caught.value.message == "the first ACP request must be initialize (and it failed)"
