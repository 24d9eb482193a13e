"""Conformance with the official Python SDK client (PyPI ``agent-client-protocol``).

tests/clients/sdk_client.py (asyncio, so it runs in its own process) drives the bridge
and the fake agy through initialize -> session/new -> an echo prompt -> a ``slow``
prompt cancelled 1 s in -> session/close, recording every wire message in both
directions with the SDK's stream observer. Here the log is validated against the
official ACP schema (zero problems, nothing unanswered) and the SDK's view and the
wire's view of the turns are checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import trio

from tests.acp_wire import (
    BRIDGE_CMD,
    TESTS_DIR,
    Harness,
    load_schema,
    stop_reason,
    tail,
    validate_log,
)

pytestmark = pytest.mark.integration

SDK_CLIENT = TESTS_DIR / "clients" / "sdk_client.py"
ECHO_TEXT = "hello from the ACP Python SDK"
SLOW_TEXT = "[fake-agy:slow] stream ticks until cancelled"
#: Acceptance: a cancelled ``slow`` turn answers within 1 s of the cancel.
SLOW_CANCEL_BOUND_S = 1.0


def turn_updates(wire: list[dict[str, Any]], prompt_text: str) -> tuple[list[Any], Any]:
    """The session/update params between the session/prompt carrying ``prompt_text`` and
    its response, and that response."""
    start = next(
        i
        for i, entry in enumerate(wire)
        if entry["dir"] == "c2a"
        and entry["msg"].get("method") == "session/prompt"
        and entry["msg"]["params"]["prompt"][0]["text"] == prompt_text
    )
    request_id = wire[start]["msg"]["id"]
    updates = []
    for entry in wire[start + 1 :]:
        message = entry["msg"]
        if entry["dir"] == "a2c" and message.get("method") == "session/update":
            updates.append(message["params"]["update"])
        elif entry["dir"] == "a2c" and "method" not in message and message["id"] == request_id:
            return updates, message
    raise AssertionError(f"no response to the prompt {prompt_text!r}")


async def test_python_sdk_client_full_session(harness: Harness) -> None:
    """The SDK client completes a session; every wire message is schema-valid; the echo
    arrives exactly once with end_turn; the cancel answers cancelled within 1 s; the
    bridge exits 0 on stdin EOF and leaves no process behind."""
    load_schema()  # fail early, with the npm hint, if tests/node_modules is missing
    wire_log = harness.tmp_path / "sdk-wire.ndjson"
    stderr_path = harness.tmp_path / "sdk-client-stderr.log"
    command = [
        sys.executable,
        str(SDK_CLIENT),
        "--wire-log",
        str(wire_log),
        "--cwd",
        str(harness.tmp_path),
        "--echo-text",
        ECHO_TEXT,
        "--slow-text",
        SLOW_TEXT,
        "--cancel-after",
        "1.0",
        "--timeout",
        "25",
        "--",
        *BRIDGE_CMD,
    ]
    with trio.fail_after(30), stderr_path.open("wb") as stderr:
        done = await trio.run_process(
            command,
            env=harness.env("echo"),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            stderr=stderr,
            check=False,
        )
    diagnostics = (
        f"--- sdk client stderr (with the bridge's) ---\n{tail(stderr_path)}\n"
        f"--- bridge log ---\n{tail(harness.tmp_path / 'agybridge.log')}"
    )
    assert done.returncode == 0, diagnostics
    summary = json.loads(done.stdout)

    lines = wire_log.read_text().splitlines()
    validator = validate_log(lines)
    assert not validator.problems, validator.report()
    assert not validator.unanswered(), validator.unanswered()
    wire = [json.loads(line) for line in lines]
    methods = [e["msg"]["method"] for e in wire if e["dir"] == "c2a" and "method" in e["msg"]]
    assert methods == [
        "initialize",
        "session/new",
        "session/prompt",
        "session/prompt",
        "session/cancel",
        "session/close",
    ], methods

    # The echo turn: the SDK's view and the wire agree, the text arrives exactly once.
    echo = summary["prompts"][0]
    assert echo["stopReason"] == "end_turn"
    assert echo["text"].count(ECHO_TEXT) == 1, echo["text"]
    updates, response = turn_updates(wire, ECHO_TEXT)
    assert response["result"]["stopReason"] == "end_turn"
    wire_text = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert wire_text.count(ECHO_TEXT) == 1, wire_text
    assert wire_text.strip() == ECHO_TEXT

    # The cancelled turn.
    slow = summary["prompts"][1]
    assert slow["stopReason"] == "cancelled"
    assert slow["cancelToResponseS"] < SLOW_CANCEL_BOUND_S, slow
    updates, response = turn_updates(wire, SLOW_TEXT)
    assert stop_reason(response) == "cancelled"
    assert any(u["sessionUpdate"] == "agent_message_chunk" for u in updates)

    # session/close answered {}; stdin EOF then made the bridge exit 0.
    assert summary["close"] is True
    close = next(e["msg"] for e in wire if e["msg"].get("method") == "session/close")
    close_response = next(
        e["msg"]
        for e in wire
        if e["dir"] == "a2c" and "method" not in e["msg"] and e["msg"]["id"] == close["id"]
    )
    assert close_response["result"] == {}
    assert summary["exitCode"] == 0, diagnostics
    await harness.assert_no_leftovers()
