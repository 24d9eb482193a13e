"""``_agybridge/session/retry`` and ``_agybridge/session/logs`` over the wire,
every message schema-validated: a failed turn's prompt is sent again and
answered like a prompt; nothing to retry, or a turn running, is a -32600 that
names its cause; the logs are the session's lines of the log file, bounded."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from ..acp_wire import Harness, RawClient, WireValidator
from ..extension_schema import call

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
RETRY = "_agybridge/session/retry"
LOGS = "_agybridge/session/logs"


def cause(response: dict[str, Any]) -> str:
    return str(response["error"]["data"]["_meta"]["agybridge"]["cause"])


def stdin_texts(harness: Harness) -> list[str]:
    """What agy read on stdin, line by line (the launch log)."""
    return [str(e["stdin"]) for e in harness.launches() if "stdin" in e]


async def failing_turn(client: RawClient, session_id: str) -> None:
    """A turn agy ends with an error (its quota): answered, the cause in _meta."""
    failed = await client.response(await client.start_prompt(session_id, "count the files"))
    assert failed["result"]["_meta"]["agybridge"]["cause"] == "quota", failed


async def test_retry_sends_the_failed_prompt_again(harness: Harness) -> None:
    workspace = harness.tmp_path / "ws"
    workspace.mkdir()
    release = harness.tmp_path / "release"
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            "quota,echo",
            validator=validator,
            FAKE_AGY_QUOTA_CONTINUE="1",
            FAKE_AGY_RELEASE_FILE=str(release),
            FAKE_AGY_SPAWN_CHILDREN="0",
        ) as client:
            await client.initialize()
            session_id = await client.new_session(workspace)
            params = {"sessionId": session_id}
            before_any = await call(client, RETRY, params)
            await failing_turn(client, session_id)
            retried = await call(client, RETRY, params)
            again = await call(client, RETRY, params)  # the last turn did not fail
            mark = client.mark()
            running = await client.start_prompt(session_id, "[fake-agy:slow] go")
            await client.wait_update(session_id, "agent_message_chunk", since=mark)
            during = await call(client, RETRY, params)
            release.touch()
            assert (await client.response(running))["result"]["stopReason"] == "end_turn"
            other = await client.request(RETRY, {"sessionId": "nope"})
            logs = await call(client, LOGS, {**params, "limit": 3})
            whole = await call(client, LOGS, params)
            bad_limit = await client.request(LOGS, {**params, "limit": 0})
            await client.request("session/close", params)
            stored = await call(client, LOGS, {**params, "limit": 1})
        await harness.assert_no_leftovers()
    assert before_any["error"]["code"] == -32600 and cause(before_any) == "nothing_to_retry"
    assert "nothing to retry" in before_any["error"]["message"]
    assert retried["result"]["stopReason"] == "end_turn", retried
    assert sum("count the files" in line for line in stdin_texts(harness)) == 2
    assert again["error"]["code"] == -32600 and cause(again) == "nothing_to_retry"
    assert during["error"]["code"] == -32600 and cause(during) == "retry_while_running"
    assert "a turn is running" in during["error"]["message"]
    assert other["error"]["code"] == -32002
    log_file = str(harness.tmp_path / "agybridge.log")
    assert logs["result"]["logFile"] == log_file
    assert len(logs["result"]["lines"]) == 3 and logs["result"]["truncated"] is True
    assert all(session_id in line for line in whole["result"]["lines"])
    assert logs["result"]["lines"] == whole["result"]["lines"][-3:]  # the newest, in order
    assert any("quota" in line for line in whole["result"]["lines"])  # the failed turn's
    assert bad_limit["error"]["code"] == -32602 and "limit" in bad_limit["error"]["message"]
    assert stored["result"]["lines"] and session_id in stored["result"]["lines"][0]  # closed
    assert validator.problems == []
