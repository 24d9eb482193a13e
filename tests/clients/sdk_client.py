#!/usr/bin/env python3
"""Drive an ACP agent with the official Python SDK client (``agent-client-protocol``).

Run by tests/integration/test_conformance_sdk.py in its own process, because the SDK is asyncio and
the tests are trio. One session goes through::

    initialize -> session/new -> session/prompt ECHO_TEXT (runs to its end)
    -> session/prompt SLOW_TEXT, session/cancel --cancel-after s after sending it
       (never before its first agent_message_chunk) -> session/close

Every JSON-RPC message in both directions is appended to ``--wire-log`` as
``{"dir": "c2a"|"a2c", "msg": {...}}`` by an SDK stream observer (called synchronously
in wire order). A JSON summary of what the SDK saw goes to stdout; the test validates
the wire log and asserts on both.

Usage: sdk_client.py --wire-log PATH --cwd DIR [options] -- AGENT_CMD [ARGS...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation


class WireLog:
    """The observer: every message, in wire order, to an NDJSON file."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the run
        self.chunk_seen = asyncio.Event()

    def observe(self, event: StreamEvent) -> None:
        direction = "a2c" if event.direction == StreamDirection.INCOMING else "c2a"
        self._file.write(json.dumps({"dir": direction, "msg": event.message}) + "\n")
        self._file.flush()
        message = event.message
        if (
            direction == "a2c"
            and message.get("method") == "session/update"
            and message.get("params", {}).get("update", {}).get("sessionUpdate")
            == "agent_message_chunk"
        ):
            self.chunk_seen.set()

    def close(self) -> None:
        self._file.close()


class Client:
    """The SDK client object: records updates; we advertise no fs/terminal, so the
    agent must never call those methods (they would fail loudly here)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.updates: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", type(update).__name__)
        self.updates.append(str(kind))
        if kind == "agent_message_chunk":
            self.text.append(getattr(update.content, "text", ""))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission (unexpected in test)")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found("_" + method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    log = WireLog(args.wire_log)
    client = Client()
    summary: dict[str, Any] = {"prompts": []}
    cmd, *cmd_args = args.agent
    try:
        async with spawn_agent_process(
            client,
            cmd,
            *cmd_args,
            env=dict(os.environ),
            cwd=args.cwd,
            transport_kwargs={"limit": 50 * 2**20, "stderr": None},
            observers=[log.observe],
        ) as (conn, process):
            init = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                    terminal=False,
                ),
                client_info=Implementation(
                    name="agybridge-sdk-conformance", title="agybridge SDK test", version="0"
                ),
            )
            summary["protocolVersion"] = init.protocol_version
            session_id = (await conn.new_session(cwd=args.cwd, mcp_servers=[])).session_id
            summary["sessionId"] = session_id

            start = len(client.text)
            response = await conn.prompt(session_id=session_id, prompt=[text_block(args.echo_text)])
            summary["prompts"].append(
                {"stopReason": response.stop_reason, "text": "".join(client.text[start:])}
            )

            log.chunk_seen.clear()
            sent_at = time.monotonic()
            slow = asyncio.ensure_future(
                conn.prompt(session_id=session_id, prompt=[text_block(args.slow_text)])
            )
            await log.chunk_seen.wait()
            first_chunk_s = time.monotonic() - sent_at
            # The acceptance test is "cancel 1 s into the turn": a fixed delay on purpose.
            await asyncio.sleep(max(0.0, sent_at + args.cancel_after - time.monotonic()))
            cancelled_at = time.monotonic()
            await conn.cancel(session_id=session_id)
            response = await slow
            summary["prompts"].append(
                {
                    "stopReason": response.stop_reason,
                    "firstChunkS": first_chunk_s,
                    "cancelToResponseS": time.monotonic() - cancelled_at,
                }
            )
            summary["close"] = (await conn.close_session(session_id=session_id)) is not None
            summary["updateKinds"] = sorted(set(client.updates))
        # Leaving the context closed the bridge's stdin and waited for it to exit.
        summary["exitCode"] = process.returncode
    finally:
        log.close()
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--wire-log", required=True)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--echo-text", default="hello from the ACP Python SDK")
    parser.add_argument("--slow-text", default="take your time")
    parser.add_argument("--cancel-after", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("agent", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.agent[:1] == ["--"]:
        args.agent = args.agent[1:]
    if not args.agent:
        parser.error("missing agent command after --")
    summary = asyncio.run(asyncio.wait_for(run(args), args.timeout))
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
