"""A flood turn through a real bridge: thousands of text deltas arrive in order,
exactly once, all before the prompt's answer, and the history keeps the final
text once (from agy's restatement, not from a copy of every fragment)."""

from __future__ import annotations

import pytest
import trio

from ..acp_wire import Harness, WireValidator, stop_reason

pytestmark = pytest.mark.integration

TIMEOUT_S = 90
DELTAS = 2_000


async def test_flood_in_order_once_before_the_answer_and_journalled_once(
    harness: Harness,
) -> None:
    validator = WireValidator()
    cwd = str(harness.tmp_path)
    expected = "".join(f"w{n} " for n in range(DELTAS)) + "\n"
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as first:
            await first.initialize()
            session_id = await first.new_session(cwd)
            mark = first.mark()
            prompt_id = await first.start_prompt(session_id, f"[fake-agy:flood] {DELTAS}")
            response = await first.response(prompt_id)
            assert stop_reason(response) == "end_turn"
            chunks = first.updates(session_id, "agent_message_chunk", since=mark)
            assert "".join(c["content"]["text"] for c in chunks) == expected
            # Batching never reorders: every update of the turn precedes its answer.
            answered_at = first.position(response)
            assert all(
                first.position(m) < answered_at
                for m in first.received[mark:]
                if m.get("method") == "session/update"
            )
            await first.request("session/close", {"sessionId": session_id})

        async with harness.open_bridge(validator=validator) as second:
            await second.initialize()
            mark = second.mark()
            loaded = await second.request(
                "session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
            )
            assert "result" in loaded, loaded
            assert second.message_text(session_id, since=mark) == expected
    await harness.assert_no_leftovers()
    assert validator.problems == []
