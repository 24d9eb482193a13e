"""A turn that ends without agy's ``result`` (cancel, agy exiting) leaves no
tool card running in the editor: every call it announced gets a final status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
CONVERSATION = "0b9c7a52-3f43-4b55-9d8e-1c2a3b4c5d6e"


def _open_tool_turn(path: Path) -> Path:
    """A capture whose only turn starts a command and never finishes it (no result)."""

    def step(index: int, state: str, kind: str, **more: Any) -> str:
        body = {"conversation_id": CONVERSATION, "step_index": index, "state": state}
        return json.dumps(
            {"event": "step_update", "step_update": {**body, "step_type": kind, **more}}
        )

    lines = [
        json.dumps(
            {
                "event": "init",
                "conversation_id": CONVERSATION,
                "init": {
                    "cwd": str(path.parent),
                    "tools": ["run_command"],
                    "permission_mode": "always-proceed",
                },
            }
        ),
        step(0, "DONE", "user_input"),
        step(1, "ACTIVE", "agent_response", text_delta="Running it"),
        step(
            2,
            "ACTIVE",
            "tool",
            tool_name="run_command",
            tool_info={"name": "run_command", "parameters": {"CommandLine": "sleep 1000"}},
        ),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _last_status(updates: list[dict[str, Any]], call_id: str) -> str | None:
    status = None
    for update in updates:
        if update.get("toolCallId") == call_id and "status" in update:
            status = update["status"]
    return status


async def test_cancelled_turn_without_result_fails_its_running_tool(harness: Harness) -> None:
    """session/cancel while a tool runs and agy dies without a result: the card the
    client was shown as in_progress ends failed, not running forever."""
    capture = _open_tool_turn(harness.tmp_path / "open-tool.ndjson")
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
