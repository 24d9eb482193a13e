"""The bridge's watchdog: ends what the bridge started once the bridge is gone.

The bridge starts one watchdog at start-up (:func:`command`), in a session of
its own (a SIGKILL to the editor's process group must not take it along), with
stdin the read end of a pipe whose write end only the bridge holds. The
watchdog blocks reading it; EOF means the bridge has exited, however it died
(a clean exit closes the pipe too, after reaping everything). Then it kills
every process carrying the bridge's ownership marker (`agybridge.procfs`),
removes the runtime directories that name the bridge as owner, and exits.

It imports the standard library only and runs without site-packages
(``-I -S``): it costs one small interpreter per bridge, not per session.
"""

from __future__ import annotations

import os
import select
import sys

from . import procfs

#: How long the watchdog waits for killed processes to be gone before it exits.
WAIT_S = 2.0


def command(identity: str, bases: list[str], name_prefix: str) -> list[str]:
    """argv of the watchdog for the bridge ``identity``."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from agybridge.watchdog import main; main(sys.argv[2:])"
    )
    return [sys.executable, "-I", "-S", "-c", code, package_parent, identity, name_prefix, *bases]


def cleanup(identity: str, bases: list[str], name_prefix: str) -> tuple[int, int]:
    """Kill every process marked as ``identity``'s and remove its runtime dirs.

    Returns (processes killed, directories removed).
    """
    fds = procfs.kill_refs(procfs.marked(identity))
    try:
        if fds:
            # A pidfd is readable once its process has exited.
            select.select(fds, [], [], WAIT_S)
    finally:
        for fd in fds:
            os.close(fd)
    removed = procfs.remove_owned_dirs(bases, name_prefix, identity)
    return len(fds), len(removed)


def main(argv: list[str]) -> None:
    identity, name_prefix, *bases = argv
    # Only the bridge's death (EOF) wakes us; anything it writes is ignored.
    while os.read(0, 4096):
        pass
    killed, removed = cleanup(identity, bases, name_prefix)
    if killed or removed:
        print(
            f"agybridge watchdog: bridge {identity} is gone; killed {killed} process(es) "
            f"and removed {removed} runtime dir(s) it left",
            file=sys.stderr,
        )
