"""A ``result`` without ``usage`` (contract.md §3.5 shows abbreviated ones) must
not make the next turn count the earlier turns' tokens again: agy's result
usage is cumulative per process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
CONVERSATION = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


def _usage(tokens_in: int, tokens_out: int) -> dict[str, int]:
    return {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "thinking_tokens": 0,
        "cache_read_tokens": 0,
        "total_tokens": tokens_in + tokens_out,
    }


def _capture(path: Path) -> Path:
    def step(index: int, state: str, kind: str, **more: Any) -> str:
        body = {"conversation_id": CONVERSATION, "step_index": index, "state": state}
        return json.dumps(
            {"event": "step_update", "step_update": {**body, "step_type": kind, **more}}
        )

    def result(response: str, turns: int, usage: dict[str, int] | None) -> str:
        body: dict[str, Any] = {
            "conversation_id": CONVERSATION,
            "status": "SUCCESS",
            "response": response,
            "duration_seconds": 1.0,
            "num_turns": turns,
        }
        if usage is not None:
            body["usage"] = usage
        return json.dumps({"event": "result", "result": body})

    lines = [
        json.dumps(
            {
                "event": "init",
                "conversation_id": CONVERSATION,
                "init": {"cwd": str(path.parent), "tools": []},
            }
        ),
        step(0, "DONE", "user_input"),
        step(1, "DONE", "agent_response", text_delta="one\n", usage=_usage(1000, 10)),
        result("one\n", 1, None),
        step(2, "DONE", "user_input"),
        step(3, "DONE", "agent_response", text_delta="two\n", usage=_usage(2000, 20)),
        result("two\n", 2, _usage(3000, 30)),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_turn_after_a_result_without_usage_is_not_double_counted(harness: Harness) -> None:
    capture = _capture(harness.tmp_path / "usage.ndjson")
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_REPLAY=str(capture)) as client:
            await client.initialize()
            session_id = await client.new_session()
            first = await client.response(await client.start_prompt(session_id, "one"))
            assert first["result"]["_meta"]["usage"]["totalTokens"] == 1010, first
            second = await client.response(await client.start_prompt(session_id, "two"))
            assert second["result"]["_meta"]["usage"]["totalTokens"] == 2020, second
        await harness.assert_no_leftovers()
    assert validator.problems == []
