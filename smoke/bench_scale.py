#!/usr/bin/env python3
"""The daemon at scale: N idle sessions and K streaming at once in one daemon.

Run from the repository root with the project's venv (no real agy needed)::

    .venv/bin/python smoke/bench_scale.py                       # 256 idle + 32 streaming
    .venv/bin/python smoke/bench_scale.py --idle 16 --streaming 4 --seconds 1

One ``agybridge daemon`` (fake agy, ``safe`` mode like the bench matrix) and one
client connected to its socket. ``--idle`` sessions are created (each with its
warm fake agy) and left alone; then ``--streaming`` sessions each run a ``slow``
turn (a fragment every 20 ms for ``--seconds``) at the same time. Reported:

* the daemon's RSS: peak (VmHWM) and the highest VmRSS sampled while streaming;
  target ≤ 150 MB (the fake agy children are separate processes, not counted);
* fairness: the slowest streaming turn's duration over the fastest's; target ≤ 2;
* time to create the sessions, and each turn's duration (median / max).

Targets are printed and stored, not turned into the exit status (which is 1
only when something failed: a turn not ``end_turn``, a process left behind).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from time import perf_counter
from typing import Any

import trio
from smokekit import (
    DEFAULT_REPORT_DIR,
    FAKE_AGY,
    SmokeClient,
    TurnLog,
    base_env,
    describe_error,
    facts_markdown,
    fmt,
    kill_processes,
    machine_facts,
    marked_processes,
    proc_memory_kib,
    start_daemon,
    stop_daemon,
    summarize,
    utc_stamp,
    write_reports,
)

from agybridge.jsonrpc import Peer

RSS_TARGET_MB = 150.0
FAIRNESS_TARGET = 2.0
#: Sessions created at once (session/new returns once agy is spawned).
CREATE_CONCURRENCY = 8


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.failures: list[str] = []
        self.turns: list[TurnLog] = []
        self.create_s = 0.0
        self.rss_samples_kib: list[int] = []
        self.memory_kib: dict[str, int] = {}

    async def drive(self, path: Path, daemon_pid: int, cwd: str) -> None:
        client = SmokeClient()
        stream = await trio.open_unix_socket(str(path))
        async with stream, trio.open_nursery() as nursery:
            peer = Peer(stream, stream, client)
            nursery.start_soon(peer.run)
            await peer.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            started = perf_counter()
            limiter = trio.CapacityLimiter(CREATE_CONCURRENCY)
            streaming: list[str] = []

            async def create(into: list[str] | None) -> None:
                async with limiter:
                    result = await peer.request("session/new", {"cwd": cwd, "mcpServers": []})
                if into is not None:
                    into.append(str(result["sessionId"]))

            async with trio.open_nursery() as creating:
                for _ in range(self.args.idle):
                    creating.start_soon(create, None)
                for _ in range(self.args.streaming):
                    creating.start_soon(create, streaming)
            self.create_s = perf_counter() - started

            async def stream_one(session_id: str) -> None:
                turn = TurnLog(sent_at=perf_counter())
                client.turns[session_id] = turn
                result = await peer.request(
                    "session/prompt",
                    {
                        "sessionId": session_id,
                        "prompt": [{"type": "text", "text": "[fake-agy:slow] stream"}],
                    },
                )
                turn.ended_at = perf_counter()
                turn.stop_reason = str(result.get("stopReason"))
                self.turns.append(turn)

            async def sample() -> None:
                while True:
                    self.rss_samples_kib.append(proc_memory_kib(daemon_pid).get("VmRSS", 0))
                    await trio.sleep(0.2)

            async with trio.open_nursery() as turns:
                sampler = trio.CancelScope()

                async def sample_until_done() -> None:
                    with sampler:
                        await sample()

                turns.start_soon(sample_until_done)
                async with trio.open_nursery() as running:
                    for session_id in streaming:
                        running.start_soon(stream_one, session_id)
                sampler.cancel()
            self.memory_kib = proc_memory_kib(daemon_pid)
            for turn in self.turns:
                if turn.stop_reason != "end_turn":
                    self.failures.append(f"a streaming turn ended {turn.stop_reason!r}")
            nursery.cancel_scope.cancel()


def run(args: argparse.Namespace) -> int:
    marker = f"bench-scale-{uuid.uuid4().hex[:8]}"
    scratch = Path(tempfile.mkdtemp(prefix="agyb-scale-"))
    path = scratch / "run" / "agybridge.sock"
    env = base_env(
        marker,
        AGY_BIN=str(FAKE_AGY),
        AGYBRIDGE_SOCKET=str(path),
        FAKE_AGY_SLOW_INTERVAL="0.02",
        FAKE_AGY_SLOW_SECONDS=str(args.seconds),
        FAKE_AGY_SPAWN_CHILDREN="0",
        FAKE_AGY_FRAGMENT_DELAY="0",
    )
    result = Run(args)
    daemon: subprocess.Popen[bytes] | None = None
    try:
        daemon = start_daemon(env)
        trio.run(_bounded, result, path, daemon.pid, str(scratch), args.timeout)
    except Exception as exc:
        result.failures.append(describe_error(exc))
    finally:
        if daemon is not None:
            result.failures += stop_daemon(env, daemon, 120)
        shutil.rmtree(scratch, ignore_errors=True)
    leftovers = marked_processes(marker)
    if leftovers:
        kill_processes(leftovers)
        result.failures.append(f"{len(leftovers)} process(es) left running")
    return _report(result, [str(p) for p in leftovers])


async def _bounded(result: Run, path: Path, pid: int, cwd: str, timeout_s: float) -> None:
    with trio.fail_after(timeout_s):
        await result.drive(path, pid, cwd)


def _report(result: Run, leftovers: list[str]) -> int:
    args = result.args
    durations = [t.total_s for t in result.turns if t.total_s is not None]
    fairness = max(durations) / min(durations) if durations else None
    peak_mb = result.memory_kib.get("VmHWM", 0) / 1024
    streaming_mb = max(result.rss_samples_kib, default=0) / 1024
    turn_stats = summarize(durations)
    rows = [
        ("sessions created (idle + streaming)", f"{args.idle + args.streaming}", "count"),
        ("time to create them", fmt(result.create_s, 2), "s"),
        ("daemon RSS, peak (VmHWM)", fmt(peak_mb), "MB"),
        ("daemon RSS, highest while streaming", fmt(streaming_mb), "MB"),
        ("streaming turn, median", fmt(turn_stats["median"], 2), "s"),
        ("streaming turn, max", fmt(turn_stats["max"], 2), "s"),
        ("fairness (slowest / fastest turn)", fmt(fairness, 2), "ratio"),
    ]
    rss_met = bool(peak_mb) and peak_mb <= RSS_TARGET_MB
    fair_met = fairness is not None and fairness <= FAIRNESS_TARGET
    lines = [
        f"# agybridge daemon at scale: {args.idle} idle + {args.streaming} streaming sessions",
        "",
        facts_markdown(facts := machine_facts()),
        "",
        "| row | value | unit |",
        "|---|---|---|",
        *(f"| {title} | {value} | {unit} |" for title, value, unit in rows),
        "",
        f"Targets: RSS ≤ {RSS_TARGET_MB:g} MB — {'met' if rss_met else 'NOT met'}; "
        f"fairness ≤ {FAIRNESS_TARGET:g} — {'met' if fair_met else 'NOT met'}.",
        *(f"- FAILED: {failure}" for failure in result.failures),
    ]
    data: dict[str, Any] = {
        "ok": not result.failures,
        "idle": args.idle,
        "streaming": args.streaming,
        "turn_seconds": args.seconds,
        "create_s": result.create_s,
        "rss_peak_mb": peak_mb,
        "rss_streaming_mb": streaming_mb,
        "fairness": fairness,
        "turn_s": turn_stats,
        "targets": {"rss_mb": RSS_TARGET_MB, "fairness": FAIRNESS_TARGET},
        "targets_met": {"rss": rss_met, "fairness": fair_met},
        "failures": result.failures,
        "leftovers": leftovers,
        "machine": facts,
    }
    markdown = "\n".join(lines)
    write_reports(args.report_dir, "bench-scale", utc_stamp(), data, markdown)
    print(markdown)
    return 0 if not result.failures else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--idle", type=int, default=256)
    parser.add_argument("--streaming", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of a streaming turn")
    parser.add_argument("--timeout", type=float, default=600.0, help="bound on the whole run")
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    args = parser.parse_args()
    os.environ.pop("AGYBRIDGE_SOCKET", None)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
