"""Sign-in through the editor: auth methods, ``authenticate``, and a signed-out
agy answered with -32000 before anything else (issue 14)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agybridge.agent.auth import AGENT_METHOD_ID, TERMINAL_METHOD_ID

from ..acp_wire import Harness, RawClient, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60


async def initialize(client: RawClient, *, terminal_auth: bool) -> dict[str, Any]:
    response = await client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"auth": {"terminal": terminal_auth}},
            "clientInfo": {"name": "auth-test", "version": "1"},
        },
    )
    result: dict[str, Any] = response["result"]
    return result


async def new_session(client: RawClient) -> dict[str, Any]:
    return await client.request("session/new", {"cwd": str(client.tmp_path), "mcpServers": []})


@pytest.mark.parametrize("terminal_auth", [True, False])
async def test_initialize_lists_the_auth_methods(harness: Harness, terminal_auth: bool) -> None:
    """The terminal method (running `agybridge login`) only when the client
    supports terminal auth; the agent method always; every message is valid."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            methods = (await initialize(client, terminal_auth=terminal_auth))["authMethods"]
        await harness.assert_no_leftovers()
    ids = [m["id"] for m in methods]
    if terminal_auth:
        assert ids == [TERMINAL_METHOD_ID, AGENT_METHOD_ID]
        assert methods[0]["type"] == "terminal" and methods[0]["args"] == ["login"]
    else:
        assert ids == [AGENT_METHOD_ID]
    assert "type" not in methods[-1]  # agent methods are untagged (schema AuthMethod)
    assert validator.problems == []


async def test_authenticate_succeeds_when_signed_in(harness: Harness) -> None:
    """authenticate with the advertised agent method answers {} (ACP conformance)."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await initialize(client, terminal_auth=True)
            ok = await client.request("authenticate", {"methodId": AGENT_METHOD_ID})
            terminal = await client.request("authenticate", {"methodId": TERMINAL_METHOD_ID})
            unknown = await client.request("authenticate", {"methodId": "nope"})
        await harness.assert_no_leftovers()
    assert ok == {"jsonrpc": "2.0", "id": ok["id"], "result": {}}
    assert terminal["error"]["code"] == -32602
    assert "must not send it to authenticate" in terminal["error"]["message"]
    assert unknown["error"]["code"] == -32602 and AGENT_METHOD_ID in unknown["error"]["message"]
    assert validator.problems == []


async def test_signed_out_answers_auth_required_first(harness: Harness) -> None:
    """A signed-out agy: the first prompt fails with -32000 and no gate notice
    came before it; authenticate and the next session/new say -32000 too."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_SIGNED_OUT="1") as client:
            await initialize(client, terminal_auth=False)
            created = await new_session(client)
            if "result" in created:  # the bridge did not know yet
                session_id = created["result"]["sessionId"]
                answer = await client.response(await client.start_prompt(session_id, "hi"))
                assert answer["error"]["code"] == -32000, answer
                assert "agybridge login" in answer["error"]["message"]
                assert "permission gate" not in client.message_text(session_id)
            else:
                assert created["error"]["code"] == -32000
            auth = await client.request("authenticate", {"methodId": AGENT_METHOD_ID})
            again = await new_session(client)
        await harness.assert_no_leftovers()
    assert auth["error"]["code"] == -32000
    assert "not signed in" in auth["error"]["message"]
    assert again["error"]["code"] == -32000
    assert validator.problems == []


async def doctor_text(client: RawClient, session_id: str) -> str:
    since = client.mark()
    answer = await client.response(await client.start_prompt(session_id, "/doctor"))
    assert answer["result"]["stopReason"] == "end_turn", answer
    return client.message_text(session_id, since=since)


async def test_in_session_doctor_shows_the_checks(harness: Harness) -> None:
    """/doctor lists the same checks as `agybridge doctor`; after a turn the
    gate and sign-in are known (the gate's /hooks run shows both)."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await initialize(client, terminal_auth=False)
            session_id = (await new_session(client))["result"]["sessionId"]
            answer = await client.response(await client.start_prompt(session_id, "hi"))
            assert answer["result"]["stopReason"] == "end_turn"
            text = await doctor_text(client, session_id)
        await harness.assert_no_leftovers()
    for line in ("✓ agy:", "✓ signed in: agy is signed in", "✓ permission gate:", "✓ OS:"):
        assert line in text, text


async def test_in_session_doctor_says_what_is_pending(harness: Harness) -> None:
    """While discovery and the gate check still run, /doctor says "checking…"."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(FAKE_AGY_STARTUP_DELAY="30") as client:
            await initialize(client, terminal_auth=False)
            session_id = (await new_session(client))["result"]["sessionId"]
            text = await doctor_text(client, session_id)
        await harness.assert_no_leftovers()
    assert "… models and agents: checking…" in text, text
    assert "… permission gate: checking…" in text
    assert "… version: checking…" in text


async def test_logout_is_not_offered_and_says_why(harness: Harness) -> None:
    """agy has no sign-out a program can run (agy contract §1.1, §6), and the
    bridge never touches agy's credentials: auth.logout is not advertised and
    logout answers -32601 saying so, leaving agy signed in."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            init = await initialize(client, terminal_auth=True)
            answer = await client.request("logout", {})
            created = await new_session(client)
        await harness.assert_no_leftovers()
    assert "auth" not in init["agentCapabilities"]
    assert answer["error"]["code"] == -32601
    assert "agy has no sign-out command" in answer["error"]["message"]
    assert answer["error"]["data"]["_meta"]["agybridge"]["cause"] == "logout_unsupported"
    assert "result" in created  # still signed in
    assert validator.problems == []
