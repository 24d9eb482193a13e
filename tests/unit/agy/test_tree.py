"""Ownership of agy invocations (agy/tree.py), the /proc primitives and the watchdog.

Real processes, found by an environment marker of the test's own ("nothing left");
deadlines come from what the test waits for, never from sleeps.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import trio

from agybridge import procfs, watchdog
from agybridge.agy import EscalationPolicy, run_owned
from tests.acp_wire import leftover_processes, wait_no_leftovers

MARKER_VAR = "AGYBRIDGE_TEST_MARKER"
FAST = EscalationPolicy(sigint_grace_s=0.5, sigterm_grace_s=0.5)


def marked_env(marker: str) -> dict[str, str]:
    return {**os.environ, MARKER_VAR: marker}


def live(marker: str) -> list[int]:
    return [int(line.split()[0]) for line in leftover_processes(marker)]


def wrapper(tmp_path: Path, body: str) -> str:
    """A shell script standing in for AGY_BIN (a version manager's shim)."""
    path = tmp_path / "agy"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def test_cancelled_invocation_ends_a_wrappers_own_session_grandchild(
    tmp_path: Path,
) -> None:
    """A wrapper hanging in a grandchild of its own session: cancelling run_owned (a
    timeout, a shutdown) ends the wrapper and the grandchild."""
    marker = uuid.uuid4().hex
    agy = wrapper(tmp_path, "setsid sleep 300")
    with trio.fail_after(20):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def invoke() -> None:
                    await run_owned([agy, "--version"], label="agy", env=marked_env(marker))

                nursery.start_soon(invoke)
                # Nothing to wait on but /proc: a process appearing is not an event.
                while len(live(marker)) < 2:  # noqa: ASYNC110
                    await trio.sleep(0.02)
                scope.cancel(reason="the test's timeout")
        assert scope.cancelled_caught
    assert await wait_no_leftovers_of(marker) == []


async def test_a_grandchild_holding_the_pipe_does_not_hang_the_result(tmp_path: Path) -> None:
    """The wrapper prints and exits, leaving a setsid'd grandchild holding stdout:
    run_owned returns the output (the sweep ends the grandchild, so EOF comes)."""
    marker = uuid.uuid4().hex
    agy = wrapper(tmp_path, "setsid sleep 300 &\necho 1.2.3")
    with trio.fail_after(20):
        done = await run_owned([agy, "--version"], label="agy", env=marked_env(marker))
    assert (done.returncode, done.stdout) == (0, b"1.2.3\n")
    assert live(marker) == []


async def test_missing_binary_raises_oserror(tmp_path: Path) -> None:
    """An AGY_BIN that does not exist is an OSError for the caller to word."""
    with pytest.raises(FileNotFoundError):
        await run_owned([str(tmp_path / "nope")], label="agy")


async def wait_no_leftovers_of(marker: str) -> list[int]:
    """`acp_wire.wait_no_leftovers` for this module's marker variable (same name)."""
    return [int(line.split()[0]) for line in await wait_no_leftovers(marker)]


# --------------------------------------------------------------------------- procfs


def test_identity_names_a_live_process_and_not_a_dead_one() -> None:
    """A bridge identity is alive while its process runs, dead after, and a recycled
    pid (same pid, other start time) is not mistaken for it."""
    me = procfs.bridge_identity()
    assert procfs.identity_alive(me)
    pid, ticks = me.split(".")
    assert not procfs.identity_alive(f"{pid}.{int(ticks) + 1}")
    child = subprocess.Popen(["true"])
    child.wait()
    assert not procfs.identity_alive(procfs.bridge_identity(child.pid))
    assert not procfs.identity_alive("garbage")


def test_orphaned_marks_are_only_those_of_dead_owners() -> None:
    """A process marked by a dead bridge is an orphan; one marked by a live one is not."""
    dead = f"{os.getpid()}.1"  # our pid with a start time that is not ours: a dead bridge
    alive = procfs.bridge_identity()
    procs = [
        subprocess.Popen(["sleep", "300"], env={**os.environ, procfs.OWNER_VAR: f"{owner}/1"})
        for owner in (dead, alive)
    ]
    try:
        orphans = {ref.pid for ref in procfs.orphaned_marks()}
        assert procs[0].pid in orphans and procs[1].pid not in orphans
        marked = {ref.pid for ref in procfs.marked(alive)}
        assert procs[1].pid in marked and procs[0].pid not in marked
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_remove_owned_dirs_touches_only_dead_owners_dirs(tmp_path: Path) -> None:
    """Runtime dirs of a dead owner go; a live owner's, one without an owner file, a
    file and a symlink with the prefix stay."""
    dead_dir = tmp_path / "agyb-dead"
    live_dir = tmp_path / "agyb-live"
    for directory in (dead_dir, live_dir, tmp_path / "agyb-unowned"):
        directory.mkdir(mode=0o700)
    (dead_dir / procfs.OWNER_FILE).write_text(f"{os.getpid()}.1\n")
    (dead_dir / "hook").mkdir(mode=0o500)  # read-only, as hook roots are
    procfs.write_owner(str(live_dir))
    (tmp_path / "agyb-file").write_text("x")
    (tmp_path / "agyb-link").symlink_to(dead_dir)
    removed = procfs.remove_owned_dirs([str(tmp_path)], "agyb-", None)
    assert removed == [str(dead_dir)]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["agyb-file", "agyb-link", "agyb-live", "agyb-unowned"]


def _wait_environ(pid: int) -> None:
    """execve makes a process's environment readable a moment after its parent's
    Popen returns (the exec pipe closes first): wait for /proc to show it."""
    deadline = time.monotonic() + 5
    # /proc is not an event; bounded.
    while procfs.OWNER_VAR.encode() not in Path(f"/proc/{pid}/environ").read_bytes():
        assert time.monotonic() < deadline, f"pid {pid}'s environment never appeared"
        time.sleep(0.01)


def test_watchdog_cleanup_ends_its_bridges_processes_and_dirs(tmp_path: Path) -> None:
    """The watchdog's work, run directly: the bridge's marked processes and owned
    dirs go, another bridge's stay."""
    # The "gone" bridge is a live stand-in: a process marked as a dead bridge's
    # would be ended by any bridge starting meanwhile (its orphan sweep), which
    # under -n 2 made this test count 0 killed.
    stand_in = subprocess.Popen(["sleep", "300"])
    bridge, other = procfs.bridge_identity(stand_in.pid), procfs.bridge_identity()
    mine = subprocess.Popen(["sleep", "300"], env={**os.environ, procfs.OWNER_VAR: f"{bridge}/3"})
    theirs = subprocess.Popen(["sleep", "300"], env={**os.environ, procfs.OWNER_VAR: f"{other}/3"})
    try:
        owned = tmp_path / "agyb-x"
        owned.mkdir(mode=0o700)
        (owned / procfs.OWNER_FILE).write_text(bridge + "\n")
        for proc in (mine, theirs):
            _wait_environ(proc.pid)
        killed, removed = watchdog.cleanup(bridge, [str(tmp_path)], "agyb-")
        assert (killed, removed) == (1, 1)
        assert mine.wait(timeout=5) == -9
        assert theirs.poll() is None
        assert not owned.exists()
    finally:
        for proc in (mine, theirs, stand_in):
            proc.kill()
            proc.wait()


def test_watchdog_runs_without_site_packages(tmp_path: Path) -> None:
    """The watchdog's command starts with -I -S and exits on EOF, doing its work."""
    owned = tmp_path / "agyb-y"
    owned.mkdir(mode=0o700)
    (owned / procfs.OWNER_FILE).write_text("999999998.1\n")
    argv = watchdog.command("999999998.1", [str(tmp_path)], "agyb-")
    assert argv[:3] == [sys.executable, "-I", "-S"]
    done = subprocess.run(argv, input=b"", capture_output=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert not owned.exists()
    assert b"removed 1 runtime dir" in done.stderr
