"""The bridge processes the runner starts: own process group, ended by a ladder.

Every bridge runs in its own session (process group), so a Ctrl-C at the terminal
reaches only the runner, which then ends each bridge itself: stdin EOF (what an editor
going away looks like: the bridge cancels its turns and reaps agy), then SIGINT, SIGTERM
and SIGKILL to the group, each after a bounded wait. Before the SIGKILL the bridge's
descendants are collected from ``/proc/<pid>/task/*/children`` (agy runs in a group of
its own), and after it the group is swept, so nothing a cell started outlives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import IO

import trio

#: Seconds the bridge gets after stdin EOF (its own shutdown waits up to ~6 s for
#: agy's SIGINT -> SIGTERM escalation), then after SIGINT, then after SIGTERM.
LADDER_S = (8.0, 3.0, 3.0)
#: A SIGKILLed process needs a moment to be reaped.
KILL_WAIT_S = 5.0


async def spawn(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, stderr: IO[bytes]
) -> trio.Process:
    """Start the bridge with pipes on stdin/stdout, in a new session."""
    return await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=dict(env),
        cwd=str(cwd),
        start_new_session=True,
    )


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first found, depth first)."""
    found: list[int] = []
    stack = [pid]
    while stack:
        parent = stack.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    stack.append(child)
    return found


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def stop(process: trio.Process) -> str:
    """End ``process`` and everything under it; returns how (for the transcript).

    Never raises; call it shielded. Each step waits only while the process lives.
    """
    pgid = process.pid  # start_new_session: the leader's pid is the group id
    how = "exited"
    if process.returncode is None and process.stdin is not None:
        with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await process.stdin.aclose()
    steps: list[tuple[signal.Signals | None, float]] = [
        (None, LADDER_S[0]),
        (signal.SIGINT, LADDER_S[1]),
        (signal.SIGTERM, LADDER_S[2]),
    ]
    for sig, wait_s in steps:
        if process.returncode is not None:
            break
        if sig is not None:
            how = sig.name
            _signal_group(pgid, sig)
        with trio.move_on_after(wait_s):
            await process.wait()
    survivors = descendants(process.pid) if process.returncode is None else []
    if process.returncode is None:
        how = "SIGKILL"
        _signal_group(pgid, signal.SIGKILL)
        for pid in survivors:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with trio.move_on_after(KILL_WAIT_S):
            await process.wait()
    # A grandchild left in the group (the bridge exited first) must not hold on.
    _signal_group(pgid, signal.SIGKILL)
    return how


def marked(variable: str, value: str) -> list[str]:
    """Live processes whose environment holds ``variable=value`` ("pid cmdline" each).

    Children inherit the bridge's environment, so agy and its tools carry the mark too.
    """
    needle = f"{variable}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if state not in ("Z", "X"):
            found.append(f"{entry.name} {cmdline.strip()}")
    return found


async def reap_marked(variable: str, value: str, grace_s: float = 1.0) -> list[str]:
    """Wait up to ``grace_s`` for marked processes to go; SIGKILL and return the rest."""
    with trio.move_on_after(grace_s):
        # A process's death elsewhere is not an event we can await: poll /proc.
        while marked(variable, value):  # noqa: ASYNC110
            await trio.sleep(0.05)
    survivors = marked(variable, value)
    for survivor in survivors:
        with suppress(ProcessLookupError, PermissionError, ValueError):
            os.kill(int(survivor.split()[0]), signal.SIGKILL)
    return survivors
