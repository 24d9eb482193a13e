"""A client that stops reading slows agy down instead of growing the bridge.

A flood turn runs while the client reads nothing: the bridge's output pipe
fills, its writer waits, the session loop waits, its bounded inbox fills, the
reader of agy's stdout stops, and agy ends up blocked writing to the bridge.
Meanwhile the bridge's memory stays near where it was. Once the client reads
again, every delta arrives, in order, before the prompt's answer.

There is nothing to await from outside the processes: the test polls /proc
(agy's wait channel, the bridge's CPU time and RSS) under a deadline.
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, iter_lines, leftover_processes

pytestmark = pytest.mark.integration

DELTAS = 100_000
#: Relayed unread, the turn would be ~20 MB of ACP lines and far more in objects.
STALLED_GROWTH_LIMIT_KIB = 12 * 1024
TIMEOUT_S = 120
#: Consecutive looks, 50 ms apart, that must find agy blocked and the bridge idle.
STILL_LOOKS = 4


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _agy_blocked_writing(marker: str) -> bool:
    """The fake agy waits in a pipe write (its stdout: the bridge stopped reading)."""
    for line in leftover_processes(marker):
        pid, _, cmdline = line.partition(" ")
        if "fake_agy" not in cmdline:
            continue
        with suppress(OSError):
            if "pipe_write" in Path(f"/proc/{pid}/wchan").read_text():
                return True
    return False


async def test_a_client_that_stops_reading_stops_agy_and_loses_nothing(
    harness: Harness,
) -> None:
    process = await harness.spawn_bridge()
    assert process.stdin is not None and process.stdout is not None
    lines = iter_lines(process.stdout)

    async def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        await process.stdin.send_all(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def response(request_id: int, texts: list[str] | None = None) -> dict[str, Any]:
        async for line in lines:
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                assert "result" in message, message
                result: dict[str, Any] = message["result"]
                return result
            update = (message.get("params") or {}).get("update") or {}
            if texts is not None and update.get("sessionUpdate") == "agent_message_chunk":
                texts.append(update["content"]["text"])
        raise AssertionError("the bridge closed its stdout")

    try:
        with trio.fail_after(TIMEOUT_S):
            await send(
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 1, "clientCapabilities": {}},
                }
            )
            await response(1)
            cwd = str(harness.tmp_path)
            await send({"id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})
            session_id = (await response(2))["sessionId"]
            before = _rss_kib(process.pid)
            prompt = [{"type": "text", "text": f"[fake-agy:flood] {DELTAS}"}]
            await send(
                {
                    "id": 3,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": prompt},
                }
            )
            # The client reads nothing now: agy must end up waiting on a bridge that
            # waits too (agy blocked in a write and the bridge's CPU time standing
            # still, over consecutive looks; a bridge that buffered would keep
            # reading until agy had written the whole turn).
            still = 0
            cpu = _cpu_ticks(process.pid)
            while still < STILL_LOOKS:
                await trio.sleep(0.05)
                now = _cpu_ticks(process.pid)
                blocked = _agy_blocked_writing(harness.marker)
                still = still + 1 if blocked and now == cpu else 0
                cpu = now
            stalled = _rss_kib(process.pid)
            assert stalled - before < STALLED_GROWTH_LIMIT_KIB, (before, stalled)

            texts: list[str] = []
            answer = await response(3, texts)
            assert answer["stopReason"] == "end_turn"
            assert "".join(texts) == "".join(f"w{n} " for n in range(DELTAS)) + "\n"
    finally:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await process.stdin.aclose()
        with trio.move_on_after(10):
            async for _ in lines:
                pass
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0
    await harness.assert_no_leftovers()
