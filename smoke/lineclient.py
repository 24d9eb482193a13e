"""A raw NDJSON client for benchmarks that must cost far less than what they measure.

`LineClient` only splits a child's stdout into lines (one list per read, so a reader can
stamp a whole read with one clock reading); `spawned` owns the child for a block and
stops it (EOF, SIGTERM, SIGKILL) however the block ends. Shared by ``bench_floor.py``
and ``bench_latency.py``; stdlib and trio only.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import trio
from smokekit import stop_process

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


class LineClient:
    """NDJSON over a child's pipes, as cheap as possible: lines are only split."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = b""

    async def send(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        await self._stdin.send_all(data + b"\n")

    async def lines(self) -> AsyncIterator[list[bytes]]:
        """Every read's complete lines, as one list."""
        while True:
            chunk = await self._stdout.receive_some(2**16)
            if not chunk:
                raise EOFError("the process closed its stdout")
            parts = (self._buffer + chunk).split(b"\n")
            self._buffer = parts.pop()
            if parts:
                yield parts

    async def response(self, request_id: int) -> tuple[dict[str, Any], int]:
        """Wait for the response to ``request_id``; also count the text chunks before it."""
        chunks = 0
        async for batch in self.lines():
            for line in batch:
                if b'"agent_message_chunk"' in line:
                    chunks += 1
                    continue
                message = json.loads(line)
                if message.get("id") == request_id and "method" not in message:
                    if "error" in message:
                        raise RuntimeError(f"request {request_id} failed: {message['error']}")
                    return message.get("result") or {}, chunks
        raise AssertionError("unreachable")

    async def close(self) -> None:
        with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await self._stdin.aclose()


@asynccontextmanager
async def spawned(
    argv: Sequence[str], env: dict[str, str], stderr: Path, cwd: Path | None = None
) -> AsyncIterator[Any]:
    """The child ``argv`` for the block (stderr to a file), stopped on leaving."""
    with stderr.open("wb") as err:
        process = await trio.lowlevel.open_process(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd
        )
    try:
        yield process
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(process)


def request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def prompt(request_id: int, session_id: str, text: str) -> dict[str, Any]:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return request(request_id, "session/prompt", params)
