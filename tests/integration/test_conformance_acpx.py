"""Conformance with acpx 0.19.1, an independent headless ACP client (npm, pinned in
tests/package.json; ``npm ci --prefix tests`` installs it).

``acpx --format json`` prints every JSON-RPC message it exchanges with the agent, in
both directions, one per line (without a direction tag: `acp_wire.validate_log` infers
it from the schema's ``x-side`` annotations). Each run uses a throw-away HOME.

What acpx 0.19.1 does with a one-shot ``exec`` (read in its dist/ sources and seen on
the wire here):

* it never sends ``session/close``: when the turn is over it ends the agent's stdin,
  waits, then SIGTERMs the agent and its descendants. So the close path is covered by
  the SDK test and test_acp_errors.py, and here the bridge must exit on stdin EOF.
* it can cancel: SIGINT to acpx makes it send ``session/cancel`` and wait (up to
  2.5 s) for the prompt's answer before shutting the agent down. The ``acpx cancel``
  subcommand only reaches prompts of queue-owner sessions (``acpx prompt``), not an
  ``exec``; ``--timeout`` sends no ``session/cancel`` (it just closes the agent's stdin;
  the bridge then answers the prompt ``cancelled`` while shutting down) and prints a
  synthetic ``{"id": null, "error": {"code": -32070, ...}}`` line that is not a wire message.
* it advertises ``fs`` read/write and ``terminal`` (the bridge calls none of them yet), and
  its package.json asks for Node >= 22.13; it works on Node 20 for everything used here.
"""

from __future__ import annotations

import functools
import json
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.acp_wire import (
    BRIDGE_CMD,
    NODE_BIN_DIR,
    Harness,
    iter_lines,
    load_schema,
    require_node_file,
    stop_reason,
    tail,
    validate_log,
)

pytestmark = pytest.mark.integration

ECHO_TEXT = "hello from acpx"
SLOW_TEXT = "[fake-agy:slow] stream ticks until cancelled"


def acpx_command(harness: Harness, prompt: str) -> list[str]:
    acpx = require_node_file(NODE_BIN_DIR / "acpx")
    load_schema()  # fail early, with the npm hint, if the schema is missing
    return [
        str(acpx),
        "--format",
        "json",
        "--approve-all",
        "--cwd",
        str(harness.tmp_path),
        "--agent",
        shlex.join(BRIDGE_CMD),
        "exec",
        prompt,
    ]


def parse_output(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.strip()]


def prompt_exchange(
    messages: list[dict[str, Any]], prompt_text: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The session/update params of the prompt carrying ``prompt_text`` and its response."""
    start = next(
        i
        for i, m in enumerate(messages)
        if m.get("method") == "session/prompt" and m["params"]["prompt"][0]["text"] == prompt_text
    )
    request_id = messages[start]["id"]
    updates = []
    for message in messages[start + 1 :]:
        if message.get("method") == "session/update":
            updates.append(message["params"]["update"])
        elif "method" not in message and message.get("id") == request_id:
            return updates, message
    raise AssertionError(f"no response to the prompt {prompt_text!r}: {messages}")


def diagnostics(harness: Harness, stderr_path: Path, lines: list[str]) -> str:
    return "\n".join(
        [
            "--- acpx stdout ---",
            *lines[-40:],
            "--- acpx stderr ---",
            tail(stderr_path),
            "--- bridge log ---",
            tail(harness.tmp_path / "agybridge.log"),
        ]
    )


async def test_acpx_exec_echo(harness: Harness) -> None:
    """acpx exec: initialize -> session/new -> prompt; every message schema-valid, the
    echo arrives exactly once, end_turn, acpx exits 0, nothing left running."""
    command = acpx_command(harness, ECHO_TEXT)
    stderr_path = harness.tmp_path / "acpx-stderr.log"
    with trio.fail_after(30), stderr_path.open("wb") as stderr:
        done = await trio.run_process(
            command,
            env=harness.env("echo"),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            stderr=stderr,
            check=False,
        )
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0, diagnostics(harness, stderr_path, lines)
    validator = validate_log(lines)
    assert not validator.problems, validator.report()
    assert not validator.unanswered(), validator.unanswered()
    messages = parse_output(lines)
    methods = [m["method"] for m in messages if "method" in m and "id" in m]
    # acpx 0.19.1 sends no session/close for exec (see the module docstring).
    assert methods == ["initialize", "session/new", "session/prompt"], methods
    updates, response = prompt_exchange(messages, ECHO_TEXT)
    assert response["result"]["stopReason"] == "end_turn"
    text = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert text.count(ECHO_TEXT) == 1, text
    assert text.strip() == ECHO_TEXT
    await harness.assert_no_leftovers()


async def test_acpx_exec_cancel_on_sigint(harness: Harness) -> None:
    """SIGINT to acpx exec once the slow turn streams: acpx sends session/cancel, the
    prompt answers cancelled, every message is schema-valid and nothing is left."""
    command = acpx_command(harness, SLOW_TEXT)
    stderr_path = harness.tmp_path / "acpx-stderr.log"
    lines: list[str] = []
    with trio.fail_after(30), stderr_path.open("wb") as stderr:
        async with trio.open_nursery() as nursery:
            process: trio.Process = await nursery.start(
                functools.partial(
                    trio.run_process,
                    command,
                    env=harness.env("echo"),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    check=False,
                )
            )
            assert process.stdout is not None
            interrupted = False
            async for line in iter_lines(process.stdout):
                lines.append(line.decode())
                if not interrupted and '"agent_message_chunk"' in lines[-1]:
                    process.send_signal(signal.SIGINT)
                    interrupted = True
    assert interrupted, diagnostics(harness, stderr_path, lines)
    # acpx reports the interrupted run with its own exit status; we only need it to end.
    assert process.returncode is not None
    validator = validate_log(lines)
    assert not validator.problems, validator.report()
    assert not validator.unanswered(), validator.unanswered()
    messages = parse_output(lines)
    notifications = [m["method"] for m in messages if "method" in m and "id" not in m]
    assert "session/cancel" in notifications, diagnostics(harness, stderr_path, lines)
    updates, response = prompt_exchange(messages, SLOW_TEXT)
    assert stop_reason(response) == "cancelled", response
    assert any(u["sessionUpdate"] == "agent_message_chunk" for u in updates)
    await harness.assert_no_leftovers()
