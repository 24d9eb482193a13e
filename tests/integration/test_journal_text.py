"""The display journal keeps what agy said even when its JSON splits a
surrogate pair over two text deltas (session/load shows the reply again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from ..acp_wire import Harness, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
CONVERSATION = "0b9c7a52-3f43-4b55-9d8e-1c2a3b4c5d6e"


def _surrogate_split_turn(path: Path) -> Path:
    """agy's reply "ok 😀" with the emoji's surrogate pair split over two deltas
    (as JSON \\u escapes), the result restating it whole."""

    def step(index: int, state: str, delta: str) -> str:
        body = {
            "conversation_id": CONVERSATION,
            "step_index": index,
            "state": state,
            "step_type": "agent_response",
            "text_delta": delta,
        }
        return json.dumps({"event": "step_update", "step_update": body})

    lines = [
        json.dumps(
            {
                "event": "init",
                "conversation_id": CONVERSATION,
                "init": {"cwd": str(path.parent), "tools": []},
            }
        ),
        json.dumps(
            {
                "event": "step_update",
                "step_update": {
                    "conversation_id": CONVERSATION,
                    "step_index": 0,
                    "state": "DONE",
                    "step_type": "user_input",
                },
            }
        ),
        step(1, "ACTIVE", "ok \ud83d"),
        step(1, "DONE", "\ude00"),
        json.dumps(
            {
                "event": "result",
                "result": {
                    "conversation_id": CONVERSATION,
                    "status": "SUCCESS",
                    "response": "ok 😀",
                    "duration_seconds": 1.0,
                    "num_turns": 1,
                },
            }
        ),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_reply_split_inside_a_surrogate_pair_reaches_the_journal(harness: Harness) -> None:
    """A reply whose deltas split a surrogate pair is answered end_turn and
    session/load shows it again (the journal write must not fail on it)."""
    capture = _surrogate_split_turn(harness.tmp_path / "split.ndjson")
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_REPLAY=str(capture)) as client:
            await client.initialize()
            session_id = await client.new_session()
            response = await client.response(await client.start_prompt(session_id, "hi"))
            assert response["result"]["stopReason"] == "end_turn", response
            shown = client.message_text(session_id)
            assert shown.encode("utf-16", "surrogatepass").decode("utf-16") == "ok 😀"
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            loaded = await client.request(
                "session/load",
                {"sessionId": session_id, "cwd": str(client.tmp_path), "mcpServers": []},
            )
            assert "result" in loaded, loaded
            replayed = client.message_text(session_id)
            assert replayed.encode("utf-16", "surrogatepass").decode("utf-16") == "ok 😀", (
                client.diagnostics()
            )
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
            await client.initialize()
            session_id = await client.new_session()
            prompt = "[fake-agy:soft-deny] rm it"
            response = await client.response(await client.start_prompt(session_id, prompt))
            assert response["result"]["stopReason"] == "end_turn", response
            assert len(client.permission_requests) == 1
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            loaded = await client.request(
                "session/load",
                {"sessionId": session_id, "cwd": str(client.tmp_path), "mcpServers": []},
            )
            assert "result" in loaded, loaded
            users = client.updates(session_id, "user_message_chunk")
            assert [u["content"]["text"] for u in users] == [prompt], client.diagnostics()
            replayed = client.message_text(session_id)
            assert "auto-denied" in replayed and "hello_headless_demo" in replayed
        await harness.assert_no_leftovers()
    assert validator.problems == []
