"""The bridge's stdin need not be a pipe: redirected from a file (a recorded
session, ``agybridge < requests.jsonl``) or from /dev/null, it is read to its
end, every request is answered once, and the bridge exits 0 leaving nothing
behind. (epoll refuses regular files and /dev/null: such a stdin is read
without waiting for readiness.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import trio

from tests.acp_wire import BRIDGE_CMD, Harness

pytestmark = pytest.mark.trio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


async def _run_with_stdin(harness: Harness, stdin_path: Path) -> subprocess.CompletedProcess[bytes]:
    with stdin_path.open("rb") as stdin, trio.fail_after(60):
        return await trio.run_process(
            list(BRIDGE_CMD), stdin=stdin, capture_stdout=True, env=harness.env(), check=False
        )


async def test_requests_from_a_regular_file_are_answered(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(INITIALIZE) + "\n")
    try:
        done = await _run_with_stdin(harness, requests)
    finally:
        harness.kill_leftovers()
    assert done.returncode == 0
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    # Answered once: its result, or cancelled by the shutdown its stdin's end began.
    assert [answer.get("id") for answer in answers] == [1], answers
    await harness.assert_no_leftovers()


async def test_stdin_from_dev_null_is_an_orderly_end(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    try:
        done = await _run_with_stdin(harness, Path("/dev/null"))
    finally:
        harness.kill_leftovers()
    assert (done.returncode, done.stdout) == (0, b"")
    await harness.assert_no_leftovers()
