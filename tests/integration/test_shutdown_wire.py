"""Shutdown keeps the wire whole: a slow reader gets whole lines, a gone one ends us.

Through the real bridge process with a hand-driven client (the tests need to stop
reading, and to close the bridge's stdout while its stdin stays open). "Nothing left"
is the environment-marker scan.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.acp_wire import Harness

pytestmark = pytest.mark.integration

TEST_TIMEOUT_S = 40
#: Generous: the test reads as soon as the bridge says it is finishing the line.
SHUTDOWN_GRACE_S = "30"
STARTED_BIG_LINE = 16 * 2**10


class Client:
    """Just enough NDJSON to drive the bridge by hand."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.buffer = b""
        self.next_id = 0

    async def send(self, method: str, params: Any) -> int:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        await self.stdin.send_all(json.dumps(message).encode() + b"\n")
        return self.next_id

    async def read_until(self, predicate: Any) -> dict[str, Any]:
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                if predicate(message):
                    return message  # type: ignore[no-any-return]
            chunk = await self.stdout.receive_some()
            assert chunk, "the bridge closed stdout"
            self.buffer += chunk

    async def response(self, request_id: int) -> dict[str, Any]:
        return await self.read_until(lambda m: m.get("id") == request_id and "method" not in m)

    async def open_session(self, cwd: Path) -> str:
        await self.response(await self.send("initialize", {"protocolVersion": 1}))
        new = await self.response(
            await self.send("session/new", {"cwd": str(cwd), "mcpServers": []})
        )
        return str(new["result"]["sessionId"])


@asynccontextmanager
async def bridge(harness: Harness, **extra: str) -> AsyncIterator[Client]:
    process = await harness.spawn_bridge(**extra)
    try:
        yield Client(process)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()


def logged(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def assert_whole_lines_with_the_big_one(data: bytes) -> None:
    """``data`` ends on a line boundary, every line is JSON, and the 1 MiB line
    came through whole."""
    assert data.endswith(b"\n"), data[-200:]
    lines = data.splitlines()
    for line in lines:
        json.loads(line)
    assert max(map(len, lines)) > 2**20


def unread_bytes(fd: int) -> int:
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")


async def test_sigterm_with_a_blocked_reader_ends_on_a_line_boundary(harness: Harness) -> None:
    """SIGTERM while the bridge is stuck mid-way through a 1 MiB line (the client is
    not reading): the line is finished once the client reads, stdout ends with a
    newline, every line is JSON, exit 0."""
    gate = harness.tmp_path / "never"
    log = harness.tmp_path / "agybridge.log"
    with trio.fail_after(TEST_TIMEOUT_S):
        async with bridge(
            harness, AGYBRIDGE_SHUTDOWN_GRACE_S=SHUTDOWN_GRACE_S, AGYBRIDGE_MODE="autonomous"
        ) as client:
            session_id = await client.open_session(harness.tmp_path)
            await client.send(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": [{"type": "text", "text": f"[fake-agy:big-output] gate={gate}"}],
                },
            )
            fd = client.stdout.fileno()
            # The lines before the big one are a few KiB and it is 1 MiB, more than the
            # pipe holds: past 16 KiB unread, the writer is stuck inside it. Nothing
            # but polling can tell: "bytes waiting in a pipe" is not an event.
            while unread_bytes(fd) + len(client.buffer) < STARTED_BIG_LINE:  # noqa: ASYNC110
                await trio.sleep(0.02)
            client.process.send_signal(signal.SIGTERM)
            while not logged(log, "finishing the line being written"):  # noqa: ASYNC110
                await trio.sleep(0.02)
            data = client.buffer
            async for chunk in client.stdout:
                data += chunk
            await client.process.wait()
            assert client.process.returncode == 0
    assert_whole_lines_with_the_big_one(data)
    await harness.assert_no_leftovers()


async def test_closed_stdout_shuts_down_like_stdin_eof(harness: Harness) -> None:
    """The client closes the bridge's stdout mid-turn (stdin stays open): the bridge
    notices at its next write, cancels the turn, reaps agy and its children, exits 0."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with bridge(harness) as client:
            session_id = await client.open_session(harness.tmp_path)
            await client.send(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "[fake-agy:slow]"}]},
            )
            await client.read_until(
                lambda m: (
                    m.get("params", {}).get("update", {}).get("sessionUpdate")
                    == "agent_message_chunk"
                )
            )
            assert any("child" in e for e in harness.launches())
            await client.stdout.aclose()
            await client.process.wait()
            assert client.process.returncode == 0
    assert logged(harness.tmp_path / "agybridge.log", "stdout closed: shutting down")
    await harness.assert_no_leftovers()


def test_unread_bytes_counts_a_pipe() -> None:
    """FIONREAD on a pipe's read end reports what is waiting (the blocked-reader test's probe)."""
    read, write = os.pipe()
    try:
        os.write(write, b"x" * 100)
        assert unread_bytes(read) == 100
    finally:
        os.close(read)
        os.close(write)
