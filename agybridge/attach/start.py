"""How ``attach`` (and ``status``, ``stop``) reach the daemon: connect to its
socket after checking the directory and the listener (attach/trust.py), and
start a daemon, detached, when none answers — one at a time, under the
socket's start lock. Standard library only, like the rest of attach.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
import sys

from .paths import STDERR_NAME, lock_path, start_path
from .trust import UntrustedError, check_peer, check_socket_dir, make_socket_dir, open_lock_file

#: How long a freshly started daemon may take to listen.
START_TIMEOUT_S = 60.0
#: How long a daemon that holds the socket's lock but does not answer (it is
#: exiting: idle exit, stop) may take to let go of it.
LOCK_RELEASE_S = 15.0
#: Connections closed before their first answer (a daemon exiting as it
#: accepted them) are made again this many times.
RECONNECTS = 3
#: The longest path a Unix socket can have (sun_path, with its NUL).
MAX_SOCKET_PATH_BYTES = 107
#: ``agybridge daemon``'s exit status when another daemon has the socket.
EXIT_DAEMON_RUNNING = 3


class AttachError(Exception):
    """attach cannot reach a daemon (the message says why and what to do)."""


def connect(path: str) -> socket.socket:
    """A connection to the daemon at ``path``, checked before a byte is sent:
    the directory is the user's alone and the listener runs as the user.

    Raises:
        UntrustedError: the directory or the listener is another user's.
        OSError: nothing listens there (FileNotFoundError, ConnectionRefusedError).
    """
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise UntrustedError(
            f"{path} is too long for a Unix socket (at most {MAX_SOCKET_PATH_BYTES} bytes); "
            "set AGYBRIDGE_SOCKET to a shorter path in a directory of your own (mode 0700)"
        )
    check_socket_dir(os.path.dirname(path) or ".")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        check_peer(sock, path)
    except BaseException:
        sock.close()
        raise
    return sock


def connect_or_start(path: str) -> socket.socket:
    """Connect, starting the daemon first if nothing listens at ``path``.

    Raises:
        AttachError: the path is not trusted, or no daemon could be started.
    """
    try:
        return connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    except OSError as exc:  # UntrustedError included: its message is the sentence
        raise AttachError(
            str(exc) if isinstance(exc, UntrustedError) else f"cannot connect to {path}: {exc}"
        ) from None
    try:
        make_socket_dir(os.path.dirname(path))
        starting = open_lock_file(start_path(path))
    except OSError as exc:
        raise AttachError(str(exc)) from None
    try:
        # Editors start several agents at once: one attach starts the daemon,
        # the others wait for it here, then connect.
        fcntl.flock(starting, fcntl.LOCK_EX)
        sock = _connect_or_start_locked(path)
        # Answering now: later attaches connect without it (removed while
        # held, so one waiting for it connects too; nothing is left after stop).
        with contextlib.suppress(OSError):
            os.unlink(start_path(path))
        return sock
    finally:
        os.close(starting)


def _connect_or_start_locked(path: str) -> socket.socket:
    for _ in range(RECONNECTS):
        try:
            return connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        except OSError as exc:
            raise AttachError(str(exc)) from None
        # A daemon that holds the lock and does not answer is exiting (idle
        # exit, stop): it lets go of the lock last, then a new one may start.
        if not wait_lock_free(lock_path(path), LOCK_RELEASE_S):
            raise AttachError(
                f"a daemon holds {lock_path(path)} but does not answer on {path} "
                f"after {LOCK_RELEASE_S:.0f} s; see `agybridge status` and its log"
            )
        start_daemon(path)
    try:
        return connect(path)
    except OSError as exc:
        raise AttachError(
            f"the daemon was started but {path} does not answer ({exc}); see "
            f"{os.path.join(os.path.dirname(path), STDERR_NAME)} and the log file"
        ) from None


def wait_lock_free(path: str, timeout_s: float) -> bool:
    """Wait until nobody holds ``path``'s flock (or it is gone); False after ``timeout_s``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return True  # removed: its daemon is releasing it
    except OSError as exc:
        raise AttachError(f"cannot open {path}: {exc}") from None
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits for the daemon's exclusive lock itself
    except TimeoutError:
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.close(fd)
    return True


def _raise_timeout(signum: int, frame: object) -> None:
    raise TimeoutError


def start_daemon(path: str) -> None:
    """Start ``agybridge daemon`` detached (own session, no stdio of ours) and
    wait until it listens: it writes one byte to a pipe once it does, and
    closing the pipe without it means it exited (when another daemon took
    the socket first, that one answers: not an error)."""
    import subprocess  # noqa: PLC0415  # only when starting: keeps the common path light

    ready_r, ready_w = os.pipe()
    stderr_path = os.path.join(os.path.dirname(path), STDERR_NAME)
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        stderr = os.open(stderr_path, flags, 0o600)
    except OSError as exc:
        os.close(ready_r)
        os.close(ready_w)
        raise AttachError(f"cannot write {stderr_path}: {exc}") from None
    try:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "agybridge", "daemon", "--ready-fd", str(ready_w)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            pass_fds=(ready_w,),
            start_new_session=True,
            env={**os.environ, "AGYBRIDGE_SOCKET": path, **started_daemon_defaults()},
        )
    except OSError as exc:
        os.close(ready_r)
        raise AttachError(f"could not start the daemon: {exc}") from None
    finally:
        os.close(ready_w)
        os.close(stderr)
    try:
        ready, _, _ = select.select([ready_r], [], [], START_TIMEOUT_S)
        if not ready:
            raise AttachError(
                f"the daemon did not start listening on {path} within {START_TIMEOUT_S:.0f} s; "
                f"see {stderr_path}"
            )
        if os.read(ready_r, 1) != b"R":
            if daemon.wait(START_TIMEOUT_S) == EXIT_DAEMON_RUNNING:
                return  # another one took the socket first: connect to it
            raise AttachError(
                f"the daemon exited during start-up; its last words:\n{_tail(stderr_path)}"
            )
    finally:
        os.close(ready_r)


#: A daemon started on demand keeps no idle agy for ever: a detached
#: session's agy is stopped after this long unless the user set otherwise.
STARTED_IDLE_TIMEOUT_S = "1800"


def started_daemon_defaults() -> dict[str, str]:
    if "AGYBRIDGE_IDLE_TIMEOUT_S" in os.environ:
        return {}
    return {"AGYBRIDGE_IDLE_TIMEOUT_S": STARTED_IDLE_TIMEOUT_S}


def _tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return f"({path} unreadable)"
    return "\n".join(text.splitlines()[-lines:])
