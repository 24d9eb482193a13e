"""Bridge-wide ownership: what a dead bridge left is ended, now or by the watchdog.

Two lines of defence behind the per-invocation sweep (`tree.ProcessTree`),
both keyed by the ownership marker and owner files (`agybridge.procfs`):

* :func:`end_orphans` (start-up): SIGKILL every process whose marker names a
  bridge that no longer runs, and remove runtime dirs such a bridge owned.
* :func:`watched` (the bridge's life): a watchdog process that does the same
  for this bridge the moment it is gone — within a fraction of a second of a
  SIGKILL, not at the next start, which may never come.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import trio

from .. import procfs, watchdog
from .tree import bridge_identity

logger = logging.getLogger(__name__)

#: How long a clean exit waits for the watchdog (it only scans /proc once).
WATCHDOG_EXIT_S = 5.0


async def end_orphans(remove_dirs: Callable[[], list[str]]) -> int:
    """Kill what bridges that died left running, and remove their runtime dirs
    (``remove_dirs``); returns how many processes were killed. Never raises."""

    def work() -> tuple[int, int]:
        fds = procfs.kill_refs(procfs.orphaned_marks())
        for fd in fds:
            os.close(fd)
        return len(fds), len(remove_dirs())

    try:
        killed, removed = await trio.to_thread.run_sync(work)
    except OSError as exc:
        logger.warning("could not clean up after earlier bridges: %s", exc)
        return 0
    if killed or removed:
        logger.warning(
            "ended %d process(es) and removed %d runtime dir(s) left by a bridge that died",
            killed,
            removed,
        )
    return killed


@asynccontextmanager
async def watched(bases: Sequence[str], name_prefix: str) -> AsyncIterator[None]:
    """Run the body with a watchdog that ends this bridge's leftovers if it dies.

    On a normal exit the body has already reaped everything; the watchdog's last
    scan then finds nothing, and it is waited for (bounded, shielded). Without
    ``/proc`` (macOS) no watchdog is started: it could not find anything.
    """
    if not procfs.HAVE_PROC:
        yield
        return
    argv = watchdog.command(bridge_identity(), list(bases), name_prefix)
    env = {k: v for k, v in os.environ.items() if k != procfs.OWNER_VAR}
    try:
        proc = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=env,
            # Its own session: a signal to the editor's process group spares it.
            start_new_session=True,
        )
    except OSError as exc:
        logger.warning("could not start the watchdog (%s); a crash may leave processes", exc)
        yield
        return
    assert proc.stdin is not None
    try:
        yield
    finally:
        with trio.CancelScope(shield=True):
            await proc.stdin.aclose()
            with trio.move_on_after(WATCHDOG_EXIT_S):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


__all__ = ["end_orphans", "watched"]
