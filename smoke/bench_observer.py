#!/usr/bin/env python3
"""What the observer hook costs per tool call in safe and autonomous modes (issue 27).

Run from the repository root with the project's venv::

    .venv/bin/python smoke/bench_observer.py            # 30 runs per row
    .venv/bin/python smoke/bench_observer.py --runs 5

Ungated agy runs the bridge's PreToolUse hook as an observer before every tool call:
it keeps the before-state of the file an edit targets and allows. Without the hook
agy runs nothing there, so the whole hook run is the overhead. Each row is the wall
clock of one hook run the way agy starts it (``sh -c "<hooks.json command>"``, the
payload on stdin) against a real session gate in the observer role, whose note of the
before-state reads a real file into a real mutation log:

* ``view_file``     a read: the observer only allows;
* ``write_to_file`` an edit of a 4 KiB file: the observer reads and keeps its bytes;
* ``sh -c true``    the shell alone, for scale (what any hook costs at least).

Reports go to ``smoke/reports/bench-observer-<UTC>.json`` and ``.md``; the Markdown
is printed. Exit 1 if a run did not print ``allow`` or an edit's before-state was not noted.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from pathlib import Path
from time import perf_counter
from typing import Any

import trio
from smokekit import facts_markdown, fmt, run_and_report, summarize

from agybridge.permissions import helper_command
from agybridge.session.gate import Gate
from agybridge.workspace.mutations import MutationLog

RUN_LIMIT_S = 30.0
EDITED_BYTES = 4096
ALLOWED = ("view_file", "write_to_file")


def payload(tool: str, args: dict[str, Any], step: int, workspace: str) -> bytes:
    return json.dumps(
        {
            "toolCall": {"name": tool, "args": args},
            "stepIdx": step,
            "conversationId": "bench",
            "workspacePaths": [workspace],
        }
    ).encode()


async def time_once(command: str, stdin: bytes, env: dict[str, str]) -> tuple[float, str]:
    start = perf_counter()
    with trio.fail_after(RUN_LIMIT_S):
        done = await trio.run_process(
            ["sh", "-c", command], stdin=stdin, capture_stdout=True, env=env
        )
    return perf_counter() - start, done.stdout.decode(errors="replace").strip()


async def bench(runs: int, warmup: int) -> dict[str, Any]:
    workspace = Path(tempfile.mkdtemp(prefix="agyb-bench-observer-"))
    target = workspace / "edited.txt"
    target.write_bytes(b"x" * EDITED_BYTES)
    log = MutationLog(None, "bench", (str(workspace),), lambda: 0)
    noted: list[int] = []

    async def note_write(step: int, path: str) -> None:
        noted.append(step)
        await log.note_before(step, path)

    async def unused(*_: Any) -> Any:
        raise AssertionError("an observer never asks nor sends")

    gate = Gate(
        session_id="bench",
        roots=(str(workspace),),
        mode="safe",
        ask_client=unused,
        send_update=unused,
        in_turn=unused,
        note_write=note_write,
    )
    ms: dict[str, list[float]] = {"view_file": [], "write_to_file": [], "sh -c true": []}
    outputs: dict[str, str] = {}
    try:
        async with trio.open_nursery() as nursery:
            await gate.start(nursery)
            gate.observing = True
            env = gate.agy_env(None, observer=True)
            command = shlex.join(helper_command())
            rows: dict[str, tuple[str, dict[str, Any]]] = {
                "view_file": (command, {"AbsolutePath": str(target)}),
                "write_to_file": (
                    command,
                    {"TargetFile": str(target), "CodeContent": "new", "Overwrite": True},
                ),
                "sh -c true": ("true", {}),
            }
            step = 0
            for i in range(warmup + runs):
                for name, (cmd, args) in rows.items():
                    step += 1  # agy numbers every step: each edit is a new before-state
                    stdin = payload(name, args, step, str(workspace))
                    elapsed, out = await time_once(cmd, stdin, env)
                    outputs[name] = out
                    if i >= warmup:
                        ms[name].append(elapsed * 1000)
            nursery.cancel_scope.cancel()
    finally:
        gate.close()
        shutil.rmtree(workspace, ignore_errors=True)
    kept = len(noted)
    return {
        "runs": runs,
        "warmup": warmup,
        "ms": {name: summarize(values) for name, values in ms.items()},
        "outputs": outputs,
        "before_states_noted": kept,
        "ok": kept == warmup + runs
        and all(json.loads(outputs[n]) == {"decision": "allow"} for n in ALLOWED),
    }


def markdown(data: dict[str, Any], facts: dict[str, Any]) -> str:
    lines = [
        "# Observer hook overhead per tool call (safe and autonomous modes)",
        "",
        facts_markdown(facts),
        "",
        f"{data['runs']} runs per row after {data['warmup']} warm-up runs; wall clock of "
        "`sh -c <command>` with the payload on stdin, in ms.",
        "",
        "| tool call | median | p90 | min | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, stats in data["ms"].items():
        lines.append(
            f"| {name} | {fmt(stats['median'])} | {fmt(stats['p90'])} | "
            f"{fmt(stats['min'])} | {fmt(stats['max'])} |"
        )
    lines += ["", f"Before-states noted: {data['before_states_noted']}; ok: {data['ok']}"]
    return "\n".join(lines)


def main() -> int:
    description = (__doc__ or "").split("\n")[0]
    data = run_and_report("bench-observer", description, bench, markdown, runs=30, warmup=3)
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
