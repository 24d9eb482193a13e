#!/usr/bin/env python3
"""``agybridge status`` with 64 busy sessions: target ≤ 200 ms (issue 28).

Run from the repository root with the project's venv (no real agy needed)::

    .venv/bin/python smoke/bench_status.py              # 64 sessions, 20 repetitions
    .venv/bin/python smoke/bench_status.py --sessions 16 --reps 5

One daemon (``agybridge daemon`` with the bundled fake agy, in a private temp
socket directory) gets one client with N sessions, each running a turn that
streams a fragment every 50 ms until the run ends (N fake agy children, all
busy: the daemon relays ~20·N updates a second, which the client reads).
Then, while they run, each repetition measures (median / p90 / max, ms,
real clock ``time.perf_counter``):

* ``_agybridge/status over the socket`` the target row: the daemon's answer
  (connect to the last byte), what a busy daemon adds;
* ``agybridge status --json: spawn → exit`` what a user waits for: the same
  plus the interpreter's start-up and printing, beside
* ``python -c print()`` the interpreter's own start-up (the floor: on a
  machine this busy it is most of the command's time).

The verdict is printed and stored; the exit status is 1 only when something
failed (an answer missing, a session not running, a process left behind),
never for speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from time import perf_counter
from typing import Any

from smokekit import (
    DEFAULT_REPORT_DIR,
    FAKE_AGY,
    base_env,
    kill_processes,
    marked_processes,
    start_daemon,
    stop_daemon,
    timing_report,
)

TARGET_MS = 200.0
#: Bounds every wait of the script (a hang is a failure, not a slow row).
WAIT_S = 120.0


class BusyClient:
    """One connection that opens the sessions, starts their turns and reads
    everything the daemon sends (in a thread: the updates must not pile up)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT_S)
        self.sock.connect(str(path))
        self._answers: dict[int, dict[str, Any]] = {}
        self._changed = threading.Condition()
        self.updates = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next = 0

    def _read(self) -> None:
        with self.sock.makefile("rb") as lines:
            for line in lines:
                message = json.loads(line)
                with self._changed:
                    if "method" not in message:
                        self._answers[message["id"]] = message
                    else:
                        self.updates += 1
                    self._changed.notify_all()

    def send(self, method: str, params: Any) -> int:
        self._next += 1
        message = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        self.sock.sendall(json.dumps(message).encode() + b"\n")
        return self._next

    def answer(self, request_id: int) -> dict[str, Any]:
        with self._changed:
            if not self._changed.wait_for(lambda: request_id in self._answers, WAIT_S):
                raise RuntimeError(f"request {request_id} was not answered in {WAIT_S:g} s")
            return self._answers[request_id]

    def close(self) -> None:
        self.sock.close()


def _status_round_trip(path: Path) -> tuple[float, dict[str, Any]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(WAIT_S)
        sock.connect(str(path))
        started = perf_counter()
        request = {"jsonrpc": "2.0", "id": 1, "method": "_agybridge/status", "params": {}}
        sock.sendall(json.dumps(request).encode() + b"\n")
        line = sock.makefile("rb").readline()
        elapsed = perf_counter() - started
    answer = json.loads(line)
    return elapsed, answer["result"]


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, timeout=WAIT_S, check=False)
    elapsed = perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed: {done.stderr.decode(errors='replace')}")
    return elapsed


def run(args: argparse.Namespace) -> int:
    marker = f"bench-status-{uuid.uuid4().hex[:8]}"
    socket_dir = Path(tempfile.mkdtemp(prefix="agyb-bench-"))
    path = socket_dir / "run" / "agybridge.sock"
    workspace = socket_dir / "ws"
    workspace.mkdir()
    env = base_env(
        marker,
        AGY_BIN=str(FAKE_AGY),
        AGYBRIDGE_SOCKET=str(path),
        FAKE_AGY_SCENARIO="slow",
        FAKE_AGY_SLOW_INTERVAL="0.05",
        FAKE_AGY_SLOW_SECONDS="3600",
        FAKE_AGY_SPAWN_CHILDREN="0",
    )
    failures: list[str] = []
    rows: dict[str, list[float]] = {"status": [], "socket": [], "python": []}
    daemon: subprocess.Popen[bytes] | None = None
    client: BusyClient | None = None
    running = 0
    try:
        daemon = start_daemon(env)
        client = BusyClient(path)
        client.answer(client.send("initialize", {"protocolVersion": 1}))
        sessions = []
        for _ in range(args.sessions):
            new = client.answer(
                client.send("session/new", {"cwd": str(workspace), "mcpServers": []})
            )
            sessions.append(new["result"]["sessionId"])
        for session_id in sessions:
            client.send(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "count"}]},
            )
        status_command = [sys.executable, "-m", "agybridge", "status", "--json"]
        for _ in range(args.warmup):
            _timed(status_command, env)
        for _ in range(args.reps):
            rows["status"].append(_timed(status_command, env) * 1000)
            elapsed, status = _status_round_trip(path)
            rows["socket"].append(elapsed * 1000)
            rows["python"].append(_timed([sys.executable, "-c", "print()"], env) * 1000)
        running = sum(s["state"] == "running" for s in status["sessions"])
        if running != args.sessions:
            failures.append(f"only {running} of {args.sessions} sessions were running")
    except (OSError, RuntimeError, KeyError, subprocess.SubprocessError) as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        if daemon is not None:
            failures += stop_daemon(env, daemon, WAIT_S)
        if client is not None:
            client.close()
        shutil.rmtree(socket_dir, ignore_errors=True)
    leftovers = marked_processes(marker)
    if leftovers:
        kill_processes(leftovers)
        failures.append(f"processes left running: {[str(p) for p in leftovers]}")
    return _report(args, rows, running, failures, [str(p) for p in leftovers])


def _report(
    args: argparse.Namespace,
    rows: dict[str, list[float]],
    running: int,
    failures: list[str],
    leftovers: list[str],
) -> int:
    titles = {
        "socket": "_agybridge/status over the socket (the daemon's answer)",
        "status": "agybridge status --json: spawn → exit",
        "python": "python -c print() (interpreter floor)",
    }

    def verdict(stats: dict[str, dict[str, float | int | None]]) -> tuple[bool, str]:
        worst = stats["socket"]["max"]
        met = worst is not None and worst <= TARGET_MS
        line = f"Target: every answer of the daemon ≤ {TARGET_MS:g} ms — "
        return met, line + ("met." if met else "NOT met.")

    return timing_report(
        args.report_dir,
        "bench-status",
        heading=f"# agybridge status with {args.sessions} busy sessions ({running} running)",
        rows={key: (title, rows[key]) for key, title in titles.items()},
        verdict=verdict,
        failures=failures,
        extra={
            "target_ms": TARGET_MS,
            "sessions": args.sessions,
            "running": running,
            "leftovers": leftovers,
        },
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    args = parser.parse_args()
    os.environ.pop("AGYBRIDGE_SOCKET", None)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
