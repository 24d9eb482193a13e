"""A raw NDJSON client for benchmarks that must cost far less than what they measure.

`LineClient` only splits a child's stdout into lines (one list per read, so a reader can
stamp a whole read with one clock reading); `Rpc` adds request ids and keeps every
response however reads split them; `spawned` owns the child for a block and
stops it (EOF, SIGTERM, SIGKILL) however the block ends; `timed_initialize`
times a start-up. Shared by ``bench_floor.py``, ``bench_latency.py`` and
``bench_load.py``; stdlib and trio only.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
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

    async def response(
        self, request_id: int, counting: bytes = b'"agent_message_chunk"'
    ) -> tuple[dict[str, Any], int]:
        """Wait for the response to ``request_id``; also count the lines before
        it that hold ``counting`` (text chunks unless told otherwise)."""
        chunks = 0
        async for batch in self.lines():
            for line in batch:
                if counting in line:
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


class Rpc:
    """Requests over a `LineClient`; a read is stamped once, and no line is dropped."""

    def __init__(self, client: LineClient) -> None:
        self.client = client
        self.next_id = 1
        self.responses: dict[int, dict[str, Any]] = {}
        #: id -> monotonic ns of the read that brought its response
        self.answered_at: dict[int, int] = {}

    async def send(self, message: dict[str, Any]) -> int:
        request_id = self.next_id
        self.next_id += 1
        await self.client.send({**message, "id": request_id})
        return request_id

    async def until(
        self, ids: Iterable[int], on_chunk: Callable[[dict[str, Any], int], None] | None = None
    ) -> list[dict[str, Any]]:
        """Read until every id in ``ids`` is answered; their results, in order.

        ``on_chunk(update params, receive ns)`` sees every agent_message_chunk.
        """
        wanted = list(ids)
        async for batch in self.client.lines():
            now = time.monotonic_ns()
            for line in batch:
                if b'"agent_message_chunk"' in line:
                    if on_chunk is not None:
                        on_chunk(json.loads(line)["params"], now)
                    continue
                message = json.loads(line)
                if "method" in message and "id" in message:
                    raise RuntimeError(f"unexpected request from the bridge: {line[:200]!r}")
                if "method" not in message and isinstance(message.get("id"), int):
                    self.responses[message["id"]] = message
                    self.answered_at[message["id"]] = now
            if all(i in self.responses for i in wanted):
                break
        results = []
        for request_id in wanted:
            message = self.responses.pop(request_id)
            if "error" in message:
                raise RuntimeError(f"request {request_id} failed: {message['error']}")
            results.append(message.get("result") or {})
        return results

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = await self.send(request(0, method, params))
        return (await self.until([request_id]))[0]

    async def new_session(self, cwd: str) -> str:
        return str((await self.call("session/new", {"cwd": cwd, "mcpServers": []}))["sessionId"])


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


async def timed_initialize(
    argv: Sequence[str], env: dict[str, str], stderr: Path, step_s: float, cwd: Path | None = None
) -> tuple[float, int | None]:
    """Seconds from spawning ``argv`` to its ``initialize`` answer, and its exit
    status once its stdin is closed (each step bounded by ``step_s``)."""
    started = time.perf_counter()
    async with spawned(argv, env, stderr, cwd=cwd) as process:
        client = LineClient(process)
        with trio.fail_after(step_s):
            await client.send(INITIALIZE)
            await client.response(1)
        elapsed = time.perf_counter() - started
        await client.close()
        with trio.fail_after(step_s):
            await process.wait()
    return elapsed, process.returncode


def request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def prompt(request_id: int, session_id: str, text: str) -> dict[str, Any]:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return request(request_id, "session/prompt", params)
