"""Answering ``initialize`` loads nothing it does not need (issue 15, lazy start-up).

The bridge runs with ``-X importtime`` and its stdout and stderr on one pipe, so
the import lines and the protocol bytes arrive in the order they were written:
every module listed before the ``initialize`` response was imported before it
was answered. A structural test (which modules), not a timed one; the time is
measured by smoke/bench_floor.py ``--only cold``.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest
import trio

from tests.acp_wire import BRIDGE_CMD, Harness, iter_lines

pytestmark = pytest.mark.trio

#: What only sessions, other commands or start-up housekeeping need: none may be
#: imported before initialize is answered. A name denies the module and its children.
DENIED = (
    "agybridge.session.session",
    "agybridge.session.turns",
    "agybridge.session.turn_events",
    "agybridge.translate.mapper",
    "agybridge.translate.plan",
    "agybridge.translate.outcome",
    "agybridge.translate.tool_calls",
    "agybridge.translate.tools",
    "agybridge.session.gate",
    "agybridge.workspace.mutations",
    "agybridge.workspace.changes",
    "agybridge.workspace.rollback",
    "agybridge.session.actions",
    "agybridge.agent.session_methods",
    "agybridge.agent.extensions",
    "agybridge.agent.prompting",
    "agybridge.agy.events",
    "agybridge.agy.process",
    "agybridge.agy.ownership",
    "agybridge.permissions.broker",
    "agybridge.permissions.policy",
    "agybridge.permissions.hook_root",
    "agybridge.store.legacy",
    "agybridge.doctor",
    "agybridge.daemon",
    "agybridge.demo",
    "agybridge.login",
    "agybridge.cli_sessions",
    "agybridge.cli_logs",
    "agybridge.smoke",
    "agybridge.attach",
    "fake_agy",
    "argparse",
    "sqlite3",
    "agybridge.acp.session_models",
    "agybridge.session.outlet",
    "agybridge.acp.content",
    "agybridge.acp.attachments",
    "agybridge.acp.prompt_error",
    "agybridge.workspace.mcp",
    "agybridge.store.db",
    "agybridge.store.connection",
    "agybridge.store.models",
    "agybridge.store._opening",
    # agy's process tree, discovery, sign-in probe and stderr classifier; the
    # staging area; the quota notices (datetime); a session's spec: each loads
    # with its first use.
    "agybridge.agy.tree",
    "agybridge.agy.argv",
    "agybridge.agy.discovery",
    "agybridge.agy.signin",
    "agybridge.agy.stderr",
    "agybridge.procfs",
    "agybridge.workspace.staging",
    "agybridge.translate.notices",
    "agybridge.session.spec",
    "datetime",
)
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


async def _imported_before_initialize(env: dict[str, str]) -> tuple[list[str], dict[str, object]]:
    """(modules imported before the answer, the answer)."""
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            process: trio.Process = await nursery.start(
                functools.partial(
                    trio.run_process,
                    [BRIDGE_CMD[0], "-X", "importtime", *BRIDGE_CMD[1:]],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=env,
                    check=False,
                )
            )
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send_all(json.dumps(INITIALIZE).encode() + b"\n")
            modules: list[str] = []
            answer: dict[str, object] | None = None
            async for line in iter_lines(process.stdout):
                if line.startswith(b"import time:"):
                    modules.append(line.decode().rsplit("|", 1)[-1].strip())
                elif line.startswith(b"{"):
                    answer = json.loads(line)
                    break
            await process.stdin.aclose()  # EOF: the bridge shuts down
            async for _ in iter_lines(process.stdout):
                pass
    assert process.returncode == 0
    assert answer is not None
    return modules, answer


async def test_initialize_is_answered_before_the_session_machinery_loads(
    tmp_path: Path,
) -> None:
    """Sessions, agy's events and process, the permission gate, the other
    commands and the start-up housekeeping load after initialize is answered."""
    harness = Harness(tmp_path)
    try:
        modules, answer = await _imported_before_initialize(harness.env())
        assert "agybridge.agent.handlers" in modules  # the measurement works
        assert answer.get("id") == 1 and "result" in answer
        denied = [m for m in modules if any(m == d or m.startswith(d + ".") for d in DENIED)]
        assert denied == []
    finally:
        harness.kill_leftovers()
    await harness.assert_no_leftovers()
