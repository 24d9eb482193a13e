"""Who may be trusted at the daemon's socket: the checks ``attach``,
``status``, ``stop`` and the daemon itself make before a byte is sent or a
file written (README "Long-running sessions").

* The socket's directory must be a real directory (not a symlink) of the
  user's, mode 0700 or stricter, and no directory above it may let another
  user rename or replace it: each is owned by root or the user and writable by
  nobody else, unless it is sticky (``/tmp``: others cannot rename what is
  ours in it), as ssh-agent and tmux require.
* The process listening on the socket must run as the same uid
  (``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` on macOS).
* Lock files are opened without following a symlink (``O_NOFOLLOW``) and
  must be regular files of the user's.

Standard library only (``attach`` starts for every agent session).
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys

TYPE_CHECKING = False  # not `typing`'s: attach does not import it (start-up)
if TYPE_CHECKING:
    from typing import Protocol

    class _Socket(Protocol):
        def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...


class UntrustedError(PermissionError):
    """A path or a peer another user could control (the message names it and its owner)."""


def _owner(uid: int) -> str:
    import pwd  # noqa: PLC0415  # only for a refusal's message

    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _hint(what: str) -> str:
    return f"{what}; set AGYBRIDGE_SOCKET to a path in a directory of your own (mode 0700)"


def check_socket_dir(directory: str) -> None:
    """Refuse a socket directory another user could control (module docstring).

    Raises:
        UntrustedError: the rules are not met (the message says which and how to fix it).
        FileNotFoundError: it does not exist.
    """
    uid = os.getuid()
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise UntrustedError(
            _hint(f"{directory} is a symlink (to {os.readlink(directory)}), not a directory")
        )
    if not stat.S_ISDIR(info.st_mode):
        raise UntrustedError(_hint(f"{directory} is not a directory"))
    if info.st_uid != uid:
        raise UntrustedError(
            _hint(f"{directory} belongs to {_owner(info.st_uid)}, not to you ({_owner(uid)})")
        )
    if info.st_mode & 0o077:
        raise UntrustedError(
            f"{directory} is mode {stat.S_IMODE(info.st_mode):04o}: other users may reach it; "
            f"`chmod 700 {directory}`, or set AGYBRIDGE_SOCKET to a path in a directory of "
            "your own (mode 0700)"
        )
    absolute = os.path.abspath(directory)
    for above in sorted(_ancestors(absolute) | _ancestors(os.path.realpath(absolute))):
        found = os.stat(above)  # a symlinked ancestor: its target (its own dir is checked too)
        if found.st_uid not in (0, uid):
            raise UntrustedError(
                _hint(f"{above} (above {directory}) belongs to {_owner(found.st_uid)}")
            )
        if found.st_mode & 0o022 and not found.st_mode & stat.S_ISVTX:
            raise UntrustedError(
                _hint(
                    f"{above} (above {directory}) is mode {stat.S_IMODE(found.st_mode):04o}: "
                    "others could replace what is in it"
                )
            )


def _ancestors(path: str) -> set[str]:
    found: set[str] = set()
    parent = os.path.dirname(path)
    while parent and parent not in found:
        found.add(parent)
        parent = os.path.dirname(parent)
    return found


def make_socket_dir(directory: str) -> None:
    """Create the socket directory (0700) if it is missing, then check it: an
    existing one is never changed (another user's must not be chmodded, the
    user's own is theirs to fix)."""
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(directory, 0o700, exist_ok=True)
    check_socket_dir(directory)


def peer_uid(sock: _Socket) -> int | None:
    """The uid the process at the other end of ``sock`` runs as (None: the
    platform cannot tell; the 0700 directory is then the only check)."""
    if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[1])
    if sys.platform == "darwin":  # struct xucred {u_int version; uid_t uid; ...}
        sol_local, local_peercred = 0, 1
        creds = sock.getsockopt(sol_local, local_peercred, 76)
        return int(struct.unpack_from("=I", creds, 4)[0])
    return None


def check_peer(sock: _Socket, path: str) -> None:
    """Refuse a listener at ``path`` that runs as another user, before any byte is sent.

    Raises:
        UntrustedError: it does (the message names the path and the owner).
    """
    uid = peer_uid(sock)
    if uid is not None and uid != os.getuid():
        raise UntrustedError(
            f"the process listening on {path} runs as {_owner(uid)}, not as you "
            f"({_owner(os.getuid())}): nothing was sent to it; remove it, or set "
            "AGYBRIDGE_SOCKET to a path in a directory of your own (mode 0700)"
        )


def open_lock_file(path: str) -> int:
    """``path`` opened read-write (created 0600 if missing) without following
    a symlink; it must be a regular file of the user's.

    Raises:
        UntrustedError: a symlink or anything else another user could have planted.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise UntrustedError(
                f"{path} is a symlink (to {os.readlink(path)}): not followed; remove it"
            ) from None
        raise exc from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_nlink != 1:
        os.close(fd)
        raise UntrustedError(
            f"{path} is not a plain file of yours (owner {_owner(info.st_uid)}, "
            f"{info.st_nlink} link(s)): not written; remove it"
        )
    os.set_blocking(fd, True)
    return fd
