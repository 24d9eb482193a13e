"""Who owns which process: ``/proc`` look-ups and the ownership marker (stdlib only).

Theory of operation. Every process the bridge starts (each agy invocation, and
through inheritance everything agy starts in turn, whatever its session or
process group) carries ``AGYBRIDGE_OWNER=<bridge>/<n>`` in its environment,
where ``<bridge>`` is the bridge's pid and start time. The marker is the crash
record: it travels with every descendant (a record file would be stale the
moment agy forks), and it survives the bridge's death. So:

* ending one invocation kills its process group, every descendant seen, and
  every process whose marker is ``<bridge>/<n>``;
* a bridge's watchdog (`agybridge.watchdog`) kills every ``<bridge>/*``
  process once the bridge is gone, however it died;
* a starting bridge kills what carries the marker of a bridge that no longer
  runs (both lines of defence failed, e.g. the watchdog was SIGKILLed too).

A pid alone is never signalled: targets are :class:`ProcRef` (pid + start
time), checked again through a pidfd just before the signal, so a recycled pid
is never touched. Runtime directories name their owner in an ``owner`` file
with the same identity.

Linux only: elsewhere (macOS) there is no ``/proc``; every scan returns
nothing, and only process groups are signalled (see README "Supervision").

This module imports nothing but the standard library: the watchdog runs it
without site-packages.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

OWNER_VAR = "AGYBRIDGE_OWNER"
#: The file in a runtime directory naming the bridge that made it.
OWNER_FILE = "owner"
HAVE_PROC = os.path.isdir("/proc/self/task")


@dataclass(frozen=True)
class ProcRef:
    """A pid plus its start time (clock ticks since boot), so a recycled pid is
    never mistaken for the process we saw."""

    pid: int
    start_ticks: int

    @classmethod
    def from_pid(cls, pid: int) -> ProcRef | None:
        ticks = start_ticks(pid)
        return None if ticks is None else cls(pid, ticks)

    def alive(self) -> bool:
        """This very process still runs (its pid was not handed out again)."""
        return start_ticks(self.pid) == self.start_ticks

    def leads_group(self) -> bool:
        """It leads its own process group (and so still holds that group's id)."""
        fields = _stat_fields(self.pid)
        try:
            return fields is not None and int(fields[2]) == self.pid and self.alive()
        except (IndexError, ValueError):
            return False

    def open_pidfd(self) -> int | None:
        """A pidfd for this very process, or None if it is gone (or recycled)."""
        try:
            fd = os.pidfd_open(self.pid)
        except (OSError, AttributeError):
            return None
        if start_ticks(self.pid) != self.start_ticks:
            os.close(fd)
            return None
        return fd


def _stat_fields(pid: int | str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses.
    return text.rsplit(")", 1)[-1].split()


def start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (None: gone, or no /proc)."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def bridge_identity(pid: int | None = None) -> str:
    """``<pid>.<start ticks>`` of this process (or ``pid``): unique across reboots'
    pid reuse as long as /proc exists; ``<pid>.0`` without it."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{start_ticks(pid) or 0}"


def identity_alive(identity: str) -> bool:
    """Whether the process named by a `bridge_identity` string still runs."""
    pid_text, _, ticks_text = identity.partition(".")
    try:
        pid, ticks = int(pid_text), int(ticks_text)
    except ValueError:
        return False
    if not HAVE_PROC:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return start_ticks(pid) == ticks


def _live_entries() -> Iterator[tuple[int, list[str]]]:
    """(pid, stat fields) of every live (non-zombie) process we can see."""
    if not HAVE_PROC:
        return
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields and fields[0] not in ("Z", "X"):
            yield int(entry.name), fields


def group_members(pgids: set[int]) -> list[ProcRef]:
    """Live processes whose process group is one of ``pgids``."""
    found = []
    for pid, fields in _live_entries():
        try:
            if int(fields[2]) in pgids:
                found.append(ProcRef(pid, int(fields[19])))
        except (IndexError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[ProcRef]:
    """Every live descendant of ``pid`` (``/proc/<pid>/task/*/children``)."""
    found: list[ProcRef] = []
    queue = [pid]
    seen = {pid}
    while queue:
        parent = queue.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                children = Path(f"/proc/{parent}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child in seen:
                    continue
                seen.add(child)
                ref = ProcRef.from_pid(child)
                if ref is not None:
                    found.append(ref)
                    queue.append(child)
    return found


def owner_marks() -> dict[ProcRef, str]:
    """Every live process of ours carrying an ``AGYBRIDGE_OWNER`` marker -> its value."""
    return env_marks(OWNER_VAR)


def env_marks(variable: str) -> dict[ProcRef, str]:
    """Every live process of ours (not this one) whose environment sets ``variable``
    -> its value (empty without /proc)."""
    needle = f"{variable}=".encode()
    uid = os.geteuid()
    found: dict[ProcRef, str] = {}
    me = os.getpid()
    for pid, fields in _live_entries():
        if pid == me:
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue  # not ours: cannot be one of our children, cannot be read
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            ref = ProcRef(pid, int(fields[19]))
        except (OSError, IndexError, ValueError):
            continue
        for item in environ.split(b"\0"):
            if item.startswith(needle):
                found[ref] = item[len(needle) :].decode("utf-8", "replace")
                break
    return found


def cmdline(pid: int) -> str:
    """The command line of ``pid`` as one string ("" if gone or unknown)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def marked(prefix: str) -> list[ProcRef]:
    """Live processes whose marker is ``prefix`` or starts with ``prefix + "/"``."""
    return [
        ref
        for ref, value in owner_marks().items()
        if value == prefix or value.startswith(prefix + "/")
    ]


def orphaned_marks() -> list[ProcRef]:
    """Processes whose marker names a bridge that no longer runs."""
    alive: dict[str, bool] = {}
    found = []
    for ref, value in owner_marks().items():
        owner = value.split("/", 1)[0]
        if owner not in alive:
            alive[owner] = identity_alive(owner)
        if not alive[owner]:
            found.append(ref)
    return found


def kill_refs(refs: Iterable[ProcRef]) -> list[int]:
    """SIGKILL each process (through a pidfd checked against its start time).

    Returns the open pidfds of the processes signalled, for the caller to wait
    on (readable once the process has exited) and close.
    """
    fds = []
    for ref in refs:
        fd = ref.open_pidfd()
        if fd is None:
            continue  # already gone
        with contextlib.suppress(ProcessLookupError, PermissionError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        fds.append(fd)
    return fds


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


# --- runtime directories ------------------------------------------------------------


def write_owner(directory: str) -> None:
    """Record this process as the owner of ``directory`` (a private dir of ours)."""
    path = os.path.join(directory, OWNER_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
    with os.fdopen(fd, "w") as out:
        out.write(bridge_identity() + "\n")


def read_owner(directory: str) -> str | None:
    try:
        fd = os.open(os.path.join(directory, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as src:
        return src.read(64).strip() or None


def remove_owned_dirs(bases: Iterable[str], name_prefix: str, owner: str | None) -> list[str]:
    """Remove ``<base>/<name_prefix>*`` directories of ours whose owner file names
    ``owner`` (None: any bridge that no longer runs). Returns the removed paths.

    Directories without an owner file, of another user, or symlinks are left alone.
    """
    removed = []
    uid = os.geteuid()
    for base in dict.fromkeys(bases):
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.startswith(name_prefix):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
                continue
            found = read_owner(entry.path)
            if found is None:
                continue
            if owner is not None and found != owner:
                continue
            if owner is None and identity_alive(found):
                continue
            rmtree_private(entry.path)
            if not os.path.lexists(entry.path):
                removed.append(entry.path)
    return removed


def rmtree_private(path: str) -> None:
    """Remove ``path`` recursively, restoring write bits on our read-only dirs first."""
    if not os.path.lexists(path):
        return
    for parent, dirs, _files in os.walk(path):
        for name in dirs:
            sub = os.path.join(parent, name)
            if not os.path.islink(sub):
                with contextlib.suppress(OSError):
                    os.chmod(sub, 0o700)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    shutil.rmtree(path, ignore_errors=True)
