"""The bridge processes the runner starts: own process group, ended by a ladder.

Every bridge runs in its own session (process group), so a Ctrl-C at the terminal
reaches only the runner, which then ends each bridge itself: stdin EOF (what an editor
going away looks like: the bridge cancels its turns and reaps agy), then SIGINT, SIGTERM
and SIGKILL to the group, each after a bounded wait. Before the SIGKILL the bridge's
descendants are collected (agy runs in a group of its own), and after it the group is
swept, so nothing a cell started outlives it. Process look-ups are the project's
`agybridge.procfs` (pid + start time, so a recycled pid is never signalled); without
``/proc`` (macOS) they find nothing and only the process groups are signalled.
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

from .. import procfs

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
            procfs.signal_group(pgid, sig)
        with trio.move_on_after(wait_s):
            await process.wait()
    survivors = procfs.descendants(process.pid) if process.returncode is None else []
    if process.returncode is None:
        how = "SIGKILL"
        procfs.signal_group(pgid, signal.SIGKILL)
        _close_all(procfs.kill_refs(survivors))
        with trio.move_on_after(KILL_WAIT_S):
            await process.wait()
    # A grandchild left in the group (the bridge exited first) must not hold on.
    procfs.signal_group(pgid, signal.SIGKILL)
    return how


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def marked(variable: str, value: str) -> list[str]:
    """Live processes whose environment holds ``variable=value``, "pid cmdline" each.

    Children inherit the bridge's environment, so agy and its tools carry the mark too.
    """
    return [f"{ref.pid} {procfs.cmdline(ref.pid)}" for ref in _marked_refs(variable, value)]


def _marked_refs(variable: str, value: str) -> list[procfs.ProcRef]:
    return [ref for ref, found in procfs.env_marks(variable).items() if found == value]


async def reap_marked(variable: str, value: str, grace_s: float = 1.0) -> list[str]:
    """Wait up to ``grace_s`` for marked processes to go; SIGKILL the rest and name them
    ("pid cmdline" each)."""
    with trio.move_on_after(grace_s):
        # A process's death elsewhere is not an event we can await: poll.
        while _marked_refs(variable, value):  # noqa: ASYNC110
            await trio.sleep(0.05)
    survivors = _marked_refs(variable, value)
    named = [f"{ref.pid} {procfs.cmdline(ref.pid)}" for ref in survivors]
    _close_all(procfs.kill_refs(survivors))
    return named
