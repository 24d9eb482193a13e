"""``agybridge attach``: relay ACP bytes between stdio and the daemon.

What an editor launches instead of ``agybridge``. It connects to the daemon's
socket (starting the daemon, detached, if none answers) and copies bytes both
ways without looking at them: the daemon speaks ACP, framing included. One
thread, one ``poll`` loop, non-blocking fds with a bounded buffer per
direction, so neither side can stall the other's traffic.

Ends when the editor closes stdin (what is read is delivered first, and the
answers the daemon sends back are relayed until it closes the connection, for
``EOF_DRAIN_S`` at most: a running prompt is not waited for; the daemon
detaches this client's sessions, their turns go on), when the daemon closes
the connection (stop), or when the editor stops reading.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import socket
import sys
import time

from .paths import STDERR_NAME, ensure_private_dir, socket_path

CHUNK_BYTES = 2**16
#: Per direction; reading pauses while this much waits to be written.
BUFFER_LIMIT_BYTES = 2**20
#: How long a freshly started daemon may take to listen.
START_TIMEOUT_S = 60.0
#: After the editor closed stdin, how long the answers still on their way are
#: relayed (the daemon closes the connection sooner once each is answered).
EOF_DRAIN_S = 5.0


class AttachError(Exception):
    """attach cannot reach a daemon (the message says why and what to do)."""


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(
            "usage: agybridge attach\n\nSpeak ACP on stdin/stdout through the agybridge daemon "
            "(started if none runs); sessions survive the editor."
        )
        return 0
    if argv:
        print(f"agybridge attach: unexpected arguments {argv!r}", file=sys.stderr)
        return 2
    try:
        sock = connect_or_start(socket_path())
    except AttachError as exc:
        print(f"agybridge attach: {exc}", file=sys.stderr)
        return 1
    try:
        relay(sock, sys.stdin.fileno(), sys.stdout.fileno())
    except KeyboardInterrupt:
        return 130
    finally:
        sock.close()
    return 0


def connect(path: str) -> socket.socket:
    """A connection to the daemon at ``path``.

    Raises:
        OSError: nothing listens there (FileNotFoundError, ConnectionRefusedError).
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def connect_or_start(path: str) -> socket.socket:
    """Connect, starting the daemon first if nothing listens at ``path``."""
    try:
        return connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    except OSError as exc:
        raise AttachError(f"cannot connect to {path}: {exc}") from None
    try:
        ensure_private_dir(os.path.dirname(path))
        starting = os.open(path + ".start", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise AttachError(str(exc)) from None
    try:
        # Editors start several agents at once: one attach starts the daemon,
        # the others wait for it here, then connect.
        fcntl.flock(starting, fcntl.LOCK_EX)
        try:
            return connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            start_daemon(path)
    finally:
        os.close(starting)
    try:
        return connect(path)
    except OSError as exc:
        raise AttachError(
            f"the daemon was started but {path} does not answer ({exc}); see "
            f"{os.path.join(os.path.dirname(path), STDERR_NAME)} and the log file"
        ) from None


def start_daemon(path: str) -> None:
    """Start ``agybridge daemon`` detached (own session, no stdio of ours) and
    wait until it listens: it writes one byte to a pipe once it does, and
    closing the pipe without it means it exited."""
    import subprocess  # noqa: PLC0415  # only when starting: keeps the common path light

    ready_r, ready_w = os.pipe()
    stderr_path = os.path.join(os.path.dirname(path), STDERR_NAME)
    try:
        with open(stderr_path, "ab") as stderr:
            subprocess.Popen(
                [sys.executable, "-m", "agybridge", "daemon", "--ready-fd", str(ready_w)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                pass_fds=(ready_w,),
                start_new_session=True,
                env={**os.environ, "AGYBRIDGE_SOCKET": path},
            )
    except OSError as exc:
        os.close(ready_r)
        raise AttachError(f"could not start the daemon: {exc}") from None
    finally:
        os.close(ready_w)
    try:
        ready, _, _ = select.select([ready_r], [], [], START_TIMEOUT_S)
        if not ready:
            raise AttachError(
                f"the daemon did not start listening on {path} within {START_TIMEOUT_S:.0f} s; "
                f"see {stderr_path}"
            )
        if os.read(ready_r, 1) != b"R":
            raise AttachError(
                f"the daemon exited during start-up; its last words:\n{_tail(stderr_path)}"
            )
    finally:
        os.close(ready_r)


def _tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return f"({path} unreadable)"
    return "\n".join(text.splitlines()[-lines:])


def relay(sock: socket.socket, in_fd: int, out_fd: int) -> None:
    """Copy ``in_fd`` → ``sock`` and ``sock`` → ``out_fd`` until one side ends."""
    sock.setblocking(False)
    os.set_blocking(in_fd, False)
    os.set_blocking(out_fd, False)
    sock_fd = sock.fileno()
    up = bytearray()  # editor -> daemon
    down = bytearray()  # daemon -> editor
    editor_open = daemon_open = True
    # poll(), not epoll: stdio may be a regular file, which epoll refuses.
    poller = select.poll()
    interest: dict[int, int] = {}
    drain_until: float | None = None
    while True:
        if not editor_open and not up and drain_until is None:
            # The editor is done (its sessions stay with the daemon): the
            # daemon sees EOF and answers what it has read; relay that.
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                daemon_open = False  # it is gone already
            drain_until = time.monotonic() + EOF_DRAIN_S
        if not daemon_open and not down:
            return
        timeout_ms = None
        if drain_until is not None:
            timeout_ms = max(0, int((drain_until - time.monotonic()) * 1000))
            if not timeout_ms:
                return
        wanted: dict[int, int] = {in_fd: 0, out_fd: 0, sock_fd: 0}
        if editor_open and len(up) < BUFFER_LIMIT_BYTES:
            wanted[in_fd] |= select.POLLIN
        if down:
            wanted[out_fd] |= select.POLLOUT
        if daemon_open and len(down) < BUFFER_LIMIT_BYTES:
            wanted[sock_fd] |= select.POLLIN
        if up:
            wanted[sock_fd] |= select.POLLOUT
        for fd, mask in wanted.items():
            if interest.get(fd, 0) != mask:
                if mask:
                    poller.register(fd, mask)  # registering again modifies
                elif fd in interest:
                    poller.unregister(fd)
                interest[fd] = mask
        try:
            for fd, events in poller.poll(timeout_ms):
                # POLLHUP/POLLERR: read to learn EOF or the error.
                readable = events & (select.POLLIN | select.POLLHUP | select.POLLERR)
                if fd == sock_fd:
                    if readable and interest[fd] & select.POLLIN:
                        data = _recv(sock)
                        if data is not None:
                            daemon_open = bool(data)
                            down += data
                    if events & select.POLLOUT and up:
                        del up[: _send(sock, up)]
                    if (
                        events & (select.POLLHUP | select.POLLERR)
                        and not interest[fd] & select.POLLIN
                    ):
                        return  # the daemon went away while we only wrote
                    continue
                if fd == in_fd and readable and interest[fd] & select.POLLIN:
                    data = _read(in_fd)
                    if data is not None:
                        editor_open = bool(data)
                        up += data
                if fd == out_fd and events & (select.POLLERR | select.POLLHUP) and not down:
                    continue
                if fd == out_fd and down:
                    del down[: _write(out_fd, down)]
        except BrokenPipeError:
            return  # the editor stopped reading, or the daemon went away


def _recv(sock: socket.socket) -> bytes | None:
    """Bytes, b"" at EOF, None when nothing is there after all."""
    try:
        return sock.recv(CHUNK_BYTES)
    except BlockingIOError:
        return None
    except ConnectionResetError:
        return b""


def _send(sock: socket.socket, data: bytearray) -> int:
    try:
        return sock.send(data)
    except BlockingIOError:
        return 0
    except ConnectionResetError as exc:
        raise BrokenPipeError(errno.EPIPE, "the daemon went away") from exc


def _read(fd: int) -> bytes | None:
    try:
        return os.read(fd, CHUNK_BYTES)
    except BlockingIOError:
        return None


def _write(fd: int, data: bytearray) -> int:
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
