"""ACP v2 (the pinned draft, tests/data/acp_v2/) behind negotiation, on the wire.

A client that asks for protocol 2 of a bridge run with ``AGYBRIDGE_ACP_V2=1``
gets the draft's handshake and a whole prompt turn in its shapes, every message
validated against the draft schema; without the variable (or asking for 1) it
gets v1, the same answer as any v1 client.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from ..acp_wire import TESTS_DIR, Harness, RawClient, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
V2_SCHEMA = TESTS_DIR / "data/acp_v2/schema.json"
V2_INIT = {
    "protocolVersion": 2,
    "info": {"name": "agybridge-v2-test-client", "version": "0"},
    "capabilities": {},
}


def v2_validator() -> WireValidator:
    return WireValidator(json.loads(V2_SCHEMA.read_text(encoding="utf-8")))


def kinds(client: RawClient, session_id: str, *, since: int = 0) -> list[str]:
    return [u["sessionUpdate"] for u in client.updates(session_id, since=since)]


async def idle(client: RawClient, session_id: str, since: int) -> dict[str, Any]:
    found = await client.wait_for(
        lambda: [
            u
            for u in client.updates(session_id, "state_update", since=since)
            if u["state"] == "idle"
        ],
        "an idle state_update",
    )
    return found[0]


async def test_v2_handshake_and_a_prompt_turn(harness: Harness) -> None:
    """initialize, session/new, a prompt turn with a permission question and a
    file write, a replaying session/resume, a cancelled turn, session/list and
    session/close, all in the draft's shapes."""
    validator = v2_validator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator,
            AGYBRIDGE_ACP_V2="1",
            AGYBRIDGE_MODE="ask",
            FAKE_AGY_SLOW_SECONDS="60",
        ) as client:
            init = (await client.request("initialize", V2_INIT))["result"]
            assert init["protocolVersion"] == 2 and init["info"]["name"] == "agybridge"
            session_caps = init["capabilities"]["session"]
            assert session_caps["prompt"] == {"image": {}, "embeddedContext": {}}
            # No authMethods: v2 would then require auth/logout, which agy cannot do.
            assert "authMethods" not in init and "agentCapabilities" not in init
            new = await client.request("session/new", {"cwd": str(harness.tmp_path)})
            session_id = new["result"]["sessionId"]
            assert "modes" not in new["result"]
            assert all("configId" in o for o in new["result"].get("configOptions", []))

            mark = client.mark()
            prompt_id = await client.start_prompt(session_id, "[fake-agy:permission-tool]")
            end = await idle(client, session_id, mark)
            assert end["stopReason"] == "end_turn"
            answer = client.response_nowait(prompt_id)
            assert answer is not None and answer["result"] == {}
            # The answer comes first, then the user message and running: the turn.
            # (An update sent before the prompt arrived, such as the session's
            # commands after session/new, may come ahead of them.)
            turn = client.position(answer) + 1
            seen = kinds(client, session_id, since=turn)
            assert seen[:2] == ["user_message", "state_update"], seen
            assert "user_message" not in kinds(client, session_id, since=mark)[: -len(seen)]
            assert "tool_call" not in seen and "tool_call_update" in seen
            states = [u["state"] for u in client.updates(session_id, "state_update", since=mark)]
            assert states[0] == "running" and "requires_action" in states, states
            assert states[-1] == "idle"
            [asked, *_] = client.permission_requests
            assert asked["params"]["title"] and asked["params"]["subject"]["type"] == "tool_call"
            diffs = [
                c
                for u in client.updates(session_id, "tool_call_update", since=mark)
                for c in u.get("content") or []
                if c["type"] == "diff"
            ]
            assert diffs and diffs[0]["patch"]["text"].startswith("diff --git ")
            chunks = client.updates(session_id, "agent_message_chunk", since=mark)
            assert chunks and all(c["messageId"] for c in chunks)

            # A v1 method the draft removed (not in its schema: sent as invalid).
            load = {"sessionId": session_id, "cwd": str(harness.tmp_path)}
            refused = await client.response(
                await client.start_request("session/load", load, expect_invalid=True)
            )
            assert refused["error"]["code"] == -32601
            assert "session/resume with replayFrom" in refused["error"]["message"]
            mark = client.mark()
            resumed = await client.request(
                "session/resume",
                {
                    "sessionId": session_id,
                    "cwd": str(harness.tmp_path),
                    "replayFrom": {"type": "start"},
                },
            )
            assert "result" in resumed, resumed
            assert "user_message_chunk" in kinds(client, session_id, since=mark)

            # Cancelling: the prompt was answered {} already; the turn ends idle, cancelled.
            mark = client.mark()
            slow = await client.start_prompt(session_id, "[fake-agy:slow] until cancelled")
            await client.wait_update(session_id, "agent_message_chunk", since=mark)
            assert client.response_nowait(slow) == {"jsonrpc": "2.0", "id": slow, "result": {}}
            await client.notify("session/cancel", {"sessionId": session_id})
            assert (await idle(client, session_id, mark))["stopReason"] == "cancelled"

            listed = (await client.request("session/list", {}))["result"]["sessions"]
            assert [s["sessionId"] for s in listed] == [session_id]
            assert "result" in await client.request("session/close", {"sessionId": session_id})
        await harness.assert_no_leftovers()
    assert validator.problems == [], validator.report()
    assert validator.unanswered() == []


async def test_v2_needs_the_flag_and_v1_clients_see_no_difference(harness: Harness) -> None:
    """Asking for 2 without AGYBRIDGE_ACP_V2=1 is answered with protocol 1 (ACP's
    negotiation); with the flag, a v1 client's answer is the one it always got."""
    v1_init = {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
        "clientInfo": {"name": "agybridge-v1-test-client", "version": "0"},
    }
    answers = []
    with trio.fail_after(TIMEOUT_S):
        for flag, version in (("0", 2), ("1", 1)):
            async with harness.open_bridge(AGYBRIDGE_ACP_V2=flag) as client:
                result = (
                    await client.request("initialize", {**v1_init, "protocolVersion": version})
                )["result"]
                assert result["protocolVersion"] == 1 and "agentCapabilities" in result
                # What agy offers depends on whether an earlier bridge warmed the
                # discovery cache, not on the protocol: left out of the comparison.
                offered = result["_meta"]["bridgeCapabilities"]
                offered.pop("availableModels"), offered.pop("availableAgents")
                answers.append(result)
        await harness.assert_no_leftovers()
    # v1 answers initialize the same whatever version is asked (every v1 test asks 1
    # without the flag): so both are the answer a v1 client always got.
    assert answers[0] == answers[1]
