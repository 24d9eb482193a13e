"""Turns at the edges of what agy may print, replayed by the fake agy through
the real bridge: a turn that ends without its ``result``, a reply split inside
a surrogate pair, a ``result`` without usage, a prompt retried after "allow".
What the client is shown and what ``session/load`` replays must agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, RawClient, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
CONVERSATION = "0b9c7a52-3f43-4b55-9d8e-1c2a3b4c5d6e"


def _step(index: int, state: str, kind: str, **more: Any) -> dict[str, Any]:
    body = {"conversation_id": CONVERSATION, "step_index": index, "state": state}
    return {"event": "step_update", "step_update": {**body, "step_type": kind, **more}}


def _result(response: str, turns: int, **more: Any) -> dict[str, Any]:
    body = {"conversation_id": CONVERSATION, "status": "SUCCESS", "response": response}
    return {
        "event": "result",
        "result": {**body, "duration_seconds": 1.0, "num_turns": turns, **more},
    }


def _capture(path: Path, events: list[dict[str, Any]]) -> Path:
    """A capture for FAKE_AGY_REPLAY: an init line, then ``events``."""
    init = {
        "event": "init",
        "conversation_id": CONVERSATION,
        "init": {"cwd": str(path.parent), "tools": [], "permission_mode": "always-proceed"},
    }
    path.write_text("\n".join(json.dumps(line) for line in [init, *events]) + "\n")
    return path


def _usage(tokens_in: int, tokens_out: int) -> dict[str, int]:
    return {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "thinking_tokens": 0,
        "cache_read_tokens": 0,
        "total_tokens": tokens_in + tokens_out,
    }


def _paired(text: str) -> str:
    """``text`` with split surrogate halves joined (as a JavaScript client would)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


def _last_status(updates: list[dict[str, Any]], call_id: str) -> str | None:
    status = None
    for update in updates:
        if update.get("toolCallId") == call_id and "status" in update:
            status = update["status"]
    return status


async def _first_prompt(client: RawClient, text: str) -> tuple[str, dict[str, Any]]:
    """A new session and the response to its first prompt ``text``."""
    await client.initialize()
    session_id = await client.new_session()
    return session_id, await client.response(await client.start_prompt(session_id, text))


async def _load_into(client: RawClient, session_id: str) -> None:
    await client.initialize()
    loaded = await client.request(
        "session/load", {"sessionId": session_id, "cwd": str(client.tmp_path), "mcpServers": []}
    )
    assert "result" in loaded, loaded


async def test_cancelled_turn_without_result_fails_its_running_tool(harness: Harness) -> None:
    """session/cancel while a tool runs and agy dies without a result: the card the
    client was shown as in_progress ends failed, not running forever."""
    tool_info = {"name": "run_command", "parameters": {"CommandLine": "sleep 1000"}}
    capture = _capture(
        harness.tmp_path / "open-tool.ndjson",
        [
            _step(0, "DONE", "user_input"),
            _step(1, "ACTIVE", "agent_response", text_delta="Running it"),
            _step(2, "ACTIVE", "tool", tool_name="run_command", tool_info=tool_info),
        ],
    )
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator, FAKE_AGY_REPLAY=str(capture), AGYBRIDGE_SAFETY="autonomous"
        ) as client:
            await client.initialize()
            session_id = await client.new_session()
            prompt = await client.start_prompt(session_id, "go")
            call = await client.wait_update(session_id, "tool_call")
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.response(prompt)
            assert response["result"]["stopReason"] == "cancelled", response
            updates = client.updates(session_id)
            assert _last_status(updates, call["toolCallId"]) == "failed", client.diagnostics()
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_reply_split_inside_a_surrogate_pair_reaches_the_journal(harness: Harness) -> None:
    """A reply whose deltas split a surrogate pair (JSON \\u escapes) is answered
    end_turn and session/load shows it again (the journal write failed on it,
    leaving the prompt unanswered)."""
    capture = _capture(
        harness.tmp_path / "split.ndjson",
        [
            _step(0, "DONE", "user_input"),
            _step(1, "ACTIVE", "agent_response", text_delta="ok \ud83d"),
            _step(1, "DONE", "agent_response", text_delta="\ude00"),
            _result("ok 😀", 1),
        ],
    )
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_REPLAY=str(capture)) as client:
            session_id, response = await _first_prompt(client, "hi")
            assert response["result"]["stopReason"] == "end_turn", response
            assert _paired(client.message_text(session_id)) == "ok 😀"
        async with harness.open_bridge(validator=validator) as client:
            await _load_into(client, session_id)
            assert _paired(client.message_text(session_id)) == "ok 😀", client.diagnostics()
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_turn_after_a_result_without_usage_is_not_double_counted(harness: Harness) -> None:
    """A ``result`` without ``usage`` must not make the next turn of the same agy
    count the earlier turns' tokens again (result usage is cumulative)."""
    capture = _capture(
        harness.tmp_path / "usage.ndjson",
        [
            _step(0, "DONE", "user_input"),
            _step(1, "DONE", "agent_response", text_delta="one\n", usage=_usage(1000, 10)),
            _result("one\n", 1),
            _step(2, "DONE", "user_input"),
            _step(3, "DONE", "agent_response", text_delta="two\n", usage=_usage(2000, 20)),
            _result("two\n", 2, usage=_usage(3000, 30)),
        ],
    )
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_REPLAY=str(capture)) as client:
            session_id, first = await _first_prompt(client, "one")
            assert first["result"]["_meta"]["usage"]["totalTokens"] == 1010, first
            second = await client.response(await client.start_prompt(session_id, "two"))
            assert second["result"]["_meta"]["usage"]["totalTokens"] == 2020, second
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_allow_and_retry_journals_the_prompt_once(harness: Harness) -> None:
    """Safe mode, agy auto-denies, the user allows and the prompt runs again:
    the client showed its prompt once, so session/load replays it once (both
    attempts' replies are kept)."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, AGYBRIDGE_MODE="safe") as client:
            client.permission_choice = "allow"
            prompt = "[fake-agy:soft-deny] rm it"
            session_id, response = await _first_prompt(client, prompt)
            assert response["result"]["stopReason"] == "end_turn", response
            assert len(client.permission_requests) == 1
        async with harness.open_bridge(validator=validator) as client:
            await _load_into(client, session_id)
            users = client.updates(session_id, "user_message_chunk")
            assert [u["content"]["text"] for u in users] == [prompt], client.diagnostics()
            replayed = client.message_text(session_id)
            assert "auto-denied" in replayed and "hello_headless_demo" in replayed
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_a_lone_surrogate_in_a_plan_entry_does_not_stop_the_turn(harness: Harness) -> None:
    """A task name holding a lone surrogate (a bad JSON escape from agy) becomes a
    plan entry; saving the session's plan with the turn must not fail (it left
    the prompt unanswered) and session/load shows the plan again."""
    params = {"TaskName": "fix \ud800 parser", "TaskStatus": "started"}
    capture = _capture(
        harness.tmp_path / "plan.ndjson",
        [
            _step(0, "DONE", "user_input"),
            _step(1, "DONE", "tool", tool_name="task_boundary",
                  tool_info={"name": "task_boundary", "parameters": params}),
            _result("", 1),
        ],
    )  # fmt: skip
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_REPLAY=str(capture)) as client:
            session_id, response = await _first_prompt(client, "plan")
            assert response["result"]["stopReason"] == "end_turn", response
        async with harness.open_bridge(validator=validator) as client:
            await _load_into(client, session_id)
            [plan] = client.updates(session_id, "plan")
            assert plan["entries"][0]["content"].startswith("fix "), plan
        await harness.assert_no_leftovers()
    assert validator.problems == []
