#!/usr/bin/env python3
"""The ``agybridge attach`` start-up benchmark: target ≤ 60 ms to the first relayed byte.

Run from the repository root with the project's venv (no real agy needed)::

    .venv/bin/python smoke/bench_attach.py            # 30 repetitions
    .venv/bin/python smoke/bench_attach.py --reps 5

One daemon (``agybridge daemon`` with the bundled fake agy, in a private temp
socket directory) is started first and kept running, as on a workstation. Then
each repetition spawns ``attach`` the way an editor does (the venv's
``agybridge`` console script, pipes for stdio), writes an ``initialize``
request and waits for the first byte of the answer on its stdout. Rows
(median / p90 / max, ms, real clock ``time.perf_counter``):

* ``attach: spawn → first relayed byte`` the target row: interpreter start-up,
  imports, connect, relay both ways, and the daemon answering ``initialize``;
* ``python -c print()`` the interpreter's own start-up on this machine (the floor);
* ``initialize over the socket`` the daemon's part alone (a connected client).

The verdict against the target is printed and stored; the exit status is 1 only
when something failed (an answer missing, a process left behind), never for speed,
so ``tests/test_smoke_scripts.py`` can run it on a loaded machine.
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
import uuid
from pathlib import Path
from time import perf_counter

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

TARGET_MS = 60.0
INITIALIZE = (
    json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    ).encode()
    + b"\n"
)
#: Bounds every wait of the script (a hang is a failure, not a slow row).
WAIT_S = 30.0


def _attach_command() -> list[str]:
    script = Path(sys.executable).with_name("agybridge")
    if script.exists():
        return [str(script), "attach"]  # what an editor runs
    return [sys.executable, "-m", "agybridge", "attach"]


def _first_byte(command: list[str], env: dict[str, str], payload: bytes | None) -> float:
    """Seconds from spawn to the first byte on the child's stdout."""
    started = perf_counter()
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        if payload is not None:
            child.stdin.write(payload)
            child.stdin.flush()
        first = child.stdout.read(1)
        elapsed = perf_counter() - started
        child.stdin.close()
        child.stdout.read()
        child.wait(WAIT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if payload is not None and not first:
        raise RuntimeError(f"{command} printed nothing (exit {child.returncode})")
    return elapsed


def _socket_round_trip(path: Path) -> float:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(WAIT_S)
        sock.connect(str(path))
        started = perf_counter()
        sock.sendall(INITIALIZE)
        if not sock.recv(1):
            raise RuntimeError("the daemon closed the connection without answering")
        return perf_counter() - started


def run(args: argparse.Namespace) -> int:
    marker = f"bench-attach-{uuid.uuid4().hex[:8]}"
    socket_dir = Path(tempfile.mkdtemp(prefix="agyb-bench-"))
    path = socket_dir / "run" / "agybridge.sock"
    env = base_env(marker, AGY_BIN=str(FAKE_AGY), AGYBRIDGE_SOCKET=str(path))
    failures: list[str] = []
    rows: dict[str, list[float]] = {"attach": [], "python": [], "socket": []}
    daemon: subprocess.Popen[bytes] | None = None
    try:
        daemon = start_daemon(env)
        attach = _attach_command()
        for _ in range(args.warmup):
            _first_byte(attach, env, INITIALIZE)  # page cache, .pyc files
        for _ in range(args.reps):
            rows["attach"].append(_first_byte(attach, env, INITIALIZE) * 1000)
            rows["python"].append(_first_byte([sys.executable, "-c", "print()"], env, None) * 1000)
            rows["socket"].append(_socket_round_trip(path) * 1000)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        if daemon is not None:
            failures += stop_daemon(env, daemon, WAIT_S)
        shutil.rmtree(socket_dir, ignore_errors=True)
    leftovers = marked_processes(marker)
    if leftovers:
        kill_processes(leftovers)
        failures.append(f"processes left running: {[str(p) for p in leftovers]}")
    return _report(args, rows, failures, [str(p) for p in leftovers])


def _report(
    args: argparse.Namespace,
    rows: dict[str, list[float]],
    failures: list[str],
    leftovers: list[str],
) -> int:
    titles = {
        "attach": "attach: spawn → first relayed byte",
        "python": "python -c print() (interpreter floor)",
        "socket": "initialize over the socket (daemon only)",
    }

    def verdict(stats: dict[str, dict[str, float | int | None]]) -> tuple[bool, str]:
        median = stats["attach"]["median"]
        met = median is not None and median <= TARGET_MS
        return met, f"Target: median ≤ {TARGET_MS:g} ms — {'met' if met else 'NOT met'}."

    return timing_report(
        args.report_dir,
        "bench-attach",
        heading="# agybridge attach start-up",
        rows={key: (title, rows[key]) for key, title in titles.items()},
        verdict=verdict,
        failures=failures,
        extra={"target_ms": TARGET_MS, "leftovers": leftovers},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    args = parser.parse_args()
    os.environ.pop("AGYBRIDGE_SOCKET", None)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
