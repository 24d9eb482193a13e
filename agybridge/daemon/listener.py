"""The daemon's socket: one daemon per socket, private, peer uid checked.

* A lock file beside the socket (``flock``, held for the daemon's life)
  decides which daemon owns the socket path: a second daemon refuses to
  start, naming the first one's pid; a socket file left by a dead daemon
  (its lock is free) is replaced.
* The directory must be the user's alone (``attach.trust``: not a symlink,
  0700 or stricter, nothing above it writable by others), the lock file is
  opened without following a symlink, and a symlink at the socket path is
  refused, not replaced: the daemon never follows a link it did not make.
* The socket is 0600 (made under a umask, so there is no moment it is open
  to others), and every connection's peer uid is checked (``SO_PEERCRED``
  where the platform has it).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from ..attach.paths import lock_path
from ..attach.trust import make_socket_dir, open_lock_file, peer_uid

logger = logging.getLogger(__name__)

#: Pending connections the kernel queues before accept.
BACKLOG = 128


class DaemonRunningError(Exception):
    """Another daemon owns the socket."""


class SocketPathError(Exception):
    """The daemon cannot listen at the socket path (the message says why)."""


@contextlib.asynccontextmanager
async def own_socket_path(path: Path) -> AsyncIterator[trio.socket.SocketType]:
    """Lock ``path`` for this process and listen on it; the socket file and
    the lock are removed when the block ends.

    Raises:
        DaemonRunningError: another daemon holds the lock.
        SocketPathError: something other than a socket is at ``path``, or
            nothing can listen there (e.g. a path too long for a socket).
        UntrustedError: the directory or the lock file is one another user
            could control (attach/trust.py).
    """
    lock_fd = _take_lock(path)
    try:
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            await sock.bind(str(path))
        except OSError as exc:
            sock.close()
            raise SocketPathError(
                f"cannot listen on {path}: {exc.strerror or exc} (a Unix socket path has at "
                "most 107 bytes); set AGYBRIDGE_SOCKET to a short path in a directory of your own"
            ) from None
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        sock.listen(BACKLOG)
        try:
            yield sock
        finally:
            sock.close()
            _remove(path)
    finally:
        _remove(_lock_path(path))
        os.close(lock_fd)


def _lock_path(path: Path) -> Path:
    return Path(lock_path(str(path)))


def _take_lock(path: Path) -> int:
    """The lock file's fd, locked and naming this pid; a stale socket file
    is removed (holding the lock, nobody else can be listening there)."""
    make_socket_dir(str(path.parent))
    lock_fd = open_lock_file(str(_lock_path(path)))
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(lock_fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(lock_fd)
        raise DaemonRunningError(
            f"an agybridge daemon (pid {owner}) is already running on {path}; "
            "use `agybridge status` or `agybridge stop`, or set AGYBRIDGE_SOCKET "
            "to run another one elsewhere"
        ) from None
    try:
        found = path.lstat()
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISSOCK(found.st_mode):
        # Only a socket (a dead daemon's) is ours to replace: a mistyped
        # AGYBRIDGE_SOCKET must not delete somebody's file, nor a link be followed.
        os.close(lock_fd)
        _remove(_lock_path(path))
        what = "a symlink" if stat.S_ISLNK(found.st_mode) else "not a socket"
        raise SocketPathError(
            f"{path} exists and is {what}: remove it, or set AGYBRIDGE_SOCKET to another path"
        )
    os.ftruncate(lock_fd, 0)
    os.pwrite(lock_fd, f"{os.getpid()}\n".encode(), 0)
    if found is not None:
        logger.info("replacing the stale socket %s", path)
        path.unlink()
    return lock_fd


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def peer_allowed(sock: socket.socket | trio.socket.SocketType, expected_uid: int) -> bool:
    """Only the daemon's own user may connect."""
    uid = peer_uid(sock)  # macOS: LOCAL_PEERCRED (attach/trust.py)
    if uid is not None and uid != expected_uid:
        logger.warning(
            "refused a connection from uid %d (the daemon runs as %d)", uid, expected_uid
        )
        return False
    return True


def take_queued(listener: trio.socket.SocketType) -> list[trio.socket.SocketType]:
    """The connections waiting in the listen queue, taken without waiting."""
    taken: list[trio.socket.SocketType] = []
    with socket.socket(fileno=os.dup(listener.fileno())) as dup:
        dup.setblocking(False)
        while True:
            try:
                sock, _ = dup.accept()
            except BlockingIOError:
                return taken
            taken.append(trio.socket.from_stdlib_socket(sock))
