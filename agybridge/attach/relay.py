"""``agybridge attach``: relay ACP bytes between stdio and the daemon.

What an editor launches instead of ``agybridge``. It connects to the daemon's
socket (starting the daemon, detached, if none answers; the directory and the
listener's uid are checked first, attach/trust.py) and copies bytes both ways
as they are: the daemon speaks ACP, framing included. It reads only the ids of
the requests and answers going by, so that a daemon that goes away leaves no
request of the editor's unanswered. One thread, one ``poll`` loop,
non-blocking fds with a bounded buffer per direction, so neither side can
stall the other's traffic.

Ends when the editor closes stdin (what is read is delivered first, and the
answers the daemon sends back are relayed until it closes the connection, for
``EOF_DRAIN_S`` at most; a running prompt's answer is not waited for: the
daemon detaches this client's sessions, their turns go on), when the daemon
closes the connection (stop, or its death: exit status 1 and a line on
stderr), or when the editor stops reading.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import time

from .paths import STDERR_NAME, socket_path
from .start import RECONNECTS, AttachError, connect_or_start

TYPE_CHECKING = False  # not `typing`'s: attach does not import it (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CHUNK_BYTES = 2**16
#: Per direction; reading pauses while this much waits to be written.
BUFFER_LIMIT_BYTES = 2**20
#: After the editor closed stdin, how long the answers still on their way are
#: relayed (the daemon closes the connection sooner once each is answered).
EOF_DRAIN_S = 5.0
#: JSON-RPC internal error: what an unanswered request gets when the daemon goes away.
INTERNAL_ERROR = -32603


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
    path = socket_path()
    try:
        sock = connect_or_start(path)
    except AttachError as exc:
        print(f"agybridge attach: {exc}", file=sys.stderr)
        return 1
    relay = Relay(sock, sys.stdin.fileno(), sys.stdout.fileno(), lambda: connect_or_start(path))
    try:
        relay.run()
    except KeyboardInterrupt:
        return 130
    finally:
        relay.close()
    if relay.unanswered_at_close or relay.daemon_closed_first:
        print(f"agybridge attach: {relay.ending(path)}", file=sys.stderr)
        return 1
    return 0


class _DaemonGone(Exception):
    """The connection to the daemon broke while attach wrote to it."""


class _Requests:
    """The editor's requests the daemon has not answered yet, found by reading
    the lines both ways (ids only: the bytes themselves are relayed as they are).

    Lines are only cut here; they are parsed in batches, when enough are
    waiting or the answer is needed (``json`` costs attach's start-up a
    quarter of its imports: it is not loaded before the first batch)."""

    #: Parse once this much waits (bounds the memory the raw lines take).
    BATCH_BYTES = 2**20

    def __init__(self) -> None:
        self._pending: dict[str, tuple[Any, str]] = {}  # id as JSON -> (id, method)
        self._partial = {"up": bytearray(), "down": bytearray()}
        self._lines: dict[str, list[bytes]] = {"up": [], "down": []}
        self._waiting_bytes = 0

    def feed(self, direction: str, data: bytes) -> None:
        partial = self._partial[direction]
        partial += data
        if b"\n" not in data:
            return
        *lines, rest = partial.split(b"\n")
        self._partial[direction] = bytearray(rest)
        self._lines[direction] += map(bytes, lines)
        self._waiting_bytes += len(partial) - len(rest)
        if self._waiting_bytes > self.BATCH_BYTES:
            self._parse()

    def _parse(self) -> None:
        """Every line waiting: requests sent (up) first, then answers (down):
        an answer always comes after its request."""
        import json  # noqa: PLC0415  # see the class docstring

        for direction in ("up", "down"):
            lines, self._lines[direction] = self._lines[direction], []
            for line in lines:
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # the daemon answers a line it cannot parse itself
                if not isinstance(message, dict) or "id" not in message:
                    continue
                key = json.dumps(message["id"])
                if direction == "up" and isinstance(message.get("method"), str):
                    self._pending[key] = (message["id"], message["method"])
                elif direction == "down" and "method" not in message:
                    self._pending.pop(key, None)
        self._waiting_bytes = 0

    @property
    def pending(self) -> list[tuple[Any, str]]:
        """(id, method) of each request sent and not answered."""
        self._parse()
        return list(self._pending.values())

    def cut_line(self, direction: str) -> bool:
        """A line of ``direction`` is incomplete (forgotten: it never ends)."""
        cut = bool(self._partial[direction])
        self._partial[direction] = bytearray()
        return cut

    def only_prompts(self) -> bool:
        """Every unanswered request is a prompt (its answer is not waited for
        once the editor is gone: the turn goes on in the daemon)."""
        return all(method == "session/prompt" for _, method in self.pending)

    def errors(self, message: str) -> bytes:
        """An error answer to each unanswered request (then none is pending)."""
        import json  # noqa: PLC0415  # see the class docstring

        error = {"code": INTERNAL_ERROR, "message": message}
        answers = [
            {"jsonrpc": "2.0", "id": request_id, "error": error} for request_id, _ in self.pending
        ]
        self._pending.clear()
        return b"".join(json.dumps(answer).encode() + b"\n" for answer in answers)


class Relay:
    """Copy ``in_fd`` → the daemon and the daemon → ``out_fd`` until one side ends.

    A connection the daemon closes before its first byte (an idle daemon
    exiting as it accepted it) is made again (``reconnect``) and what was sent
    on it sent again. A daemon that goes away later leaves every request it
    was sent and did not answer answered with an error (``unanswered_at_close``).
    """

    def __init__(
        self,
        sock: socket.socket,
        in_fd: int,
        out_fd: int,
        reconnect: Callable[[], socket.socket],
    ) -> None:
        self._sock = sock
        self._in_fd = in_fd
        self._out_fd = out_fd
        self._reconnect = reconnect
        self._reconnects_left = RECONNECTS
        self._up = bytearray()  # editor -> daemon
        self._down = bytearray()  # daemon -> editor
        #: What this connection was sent before the daemon's first byte (None:
        #: answered, or too much to keep).
        self._sent: bytearray | None = bytearray()
        self._requests = _Requests()
        self._editor_open = True
        self._daemon_open = True
        self._drain_until: float | None = None
        #: Requests answered with an error because the daemon went away.
        self.unanswered_at_close = 0
        #: The daemon closed the connection while the editor was still there.
        self.daemon_closed_first = False
        #: Why connecting again failed, if it did.
        self.reconnect_error: str | None = None

    def close(self) -> None:
        self._sock.close()

    def ending(self, path: str) -> str:
        """The line for stderr when the daemon went away first."""
        where = os.path.join(os.path.dirname(path), STDERR_NAME)
        unanswered = (
            f"; {self.unanswered_at_close} request(s) it had not answered were answered "
            "with an error"
            if self.unanswered_at_close
            else ""
        )
        again = f"; connecting again failed: {self.reconnect_error}" if self.reconnect_error else ""
        return (
            f"the daemon on {path} closed the connection (stopped, or died: see "
            f"`agybridge logs` and {where}){unanswered}{again}"
        )

    def run(self) -> None:
        os.set_blocking(self._in_fd, False)
        os.set_blocking(self._out_fd, False)
        self._sock.setblocking(False)
        # poll(), not epoll: stdio may be a regular file, which epoll refuses.
        poller = select.poll()
        interest: dict[int, int] = {}
        while True:
            if not self._editor_open and not self._up and self._drain_until is None:
                # The editor is done (its sessions stay with the daemon): the
                # daemon sees EOF and answers what it has read; relay that.
                try:
                    self._sock.shutdown(socket.SHUT_WR)
                except OSError:
                    self._daemon_gone()
                self._drain_until = time.monotonic() + EOF_DRAIN_S
            if not self._daemon_open and not self._down:
                return
            timeout_ms = None
            if self._drain_until is not None and self._daemon_open:
                if self._requests.only_prompts() and not self._down:
                    return  # everything else is answered; a prompt's answer is not waited for
                timeout_ms = max(0, int((self._drain_until - time.monotonic()) * 1000))
                if not timeout_ms:
                    return
            sock_fd = self._sock.fileno()
            wanted: dict[int, int] = {self._in_fd: 0, self._out_fd: 0, sock_fd: 0}
            if self._editor_open and len(self._up) < BUFFER_LIMIT_BYTES:
                wanted[self._in_fd] |= select.POLLIN
            if self._down:
                wanted[self._out_fd] |= select.POLLOUT
            if self._daemon_open and len(self._down) < BUFFER_LIMIT_BYTES:
                wanted[sock_fd] |= select.POLLIN
            if self._up and self._daemon_open:
                wanted[sock_fd] |= select.POLLOUT
            for fd in [fd for fd in interest if fd not in wanted]:  # a reconnect's old socket
                del interest[fd]
                poller.unregister(fd)
            for fd, mask in wanted.items():
                if interest.get(fd, 0) != mask:
                    if mask:
                        poller.register(fd, mask)  # registering again modifies
                    elif fd in interest:
                        poller.unregister(fd)
                    interest[fd] = mask
            try:
                for fd, events in poller.poll(timeout_ms):
                    if fd == sock_fd:
                        self._on_daemon(events, interest[fd])
                    else:
                        self._on_editor(fd, events, interest[fd])
            except BrokenPipeError:
                return  # the editor stopped reading

    def _on_daemon(self, events: int, interest: int) -> None:
        # POLLHUP/POLLERR: read to learn EOF or the error.
        readable = events & (select.POLLIN | select.POLLHUP | select.POLLERR)
        if readable and interest & select.POLLIN:
            data = _recv(self._sock)
            if data == b"":
                self._daemon_gone()
                return
            if data is not None:
                self._sent = None
                self._requests.feed("down", data)
                self._down += data
        if events & select.POLLOUT and self._up:
            try:
                sent = _send(self._sock, self._up)
            except _DaemonGone:
                self._daemon_gone()
                return
            if self._sent is not None:
                self._sent += self._up[:sent]
                if len(self._sent) > BUFFER_LIMIT_BYTES:
                    self._sent = None  # too much to send again
            del self._up[:sent]
        if events & (select.POLLHUP | select.POLLERR) and not interest & select.POLLIN:
            self._daemon_gone()  # it went away while we only wrote

    def _on_editor(self, fd: int, events: int, interest: int) -> None:
        readable = events & (select.POLLIN | select.POLLHUP | select.POLLERR)
        if fd == self._in_fd and readable and interest & select.POLLIN:
            data = _read(self._in_fd)
            if data is not None:
                self._editor_open = bool(data)
                self._requests.feed("up", data)
                self._up += data
        if fd == self._out_fd and events & (select.POLLERR | select.POLLHUP) and not self._down:
            return
        if fd == self._out_fd and self._down:
            del self._down[: _write(self._out_fd, self._down)]

    def _daemon_gone(self) -> None:
        """The connection ended: made again if it ended before the daemon's
        first byte, else every request still unanswered gets an error."""
        cause = "it was stopped, or died: see `agybridge logs`"
        if self._sent is not None and self._reconnects_left:
            self._reconnects_left -= 1
            self._sock.close()
            try:
                self._sock = self._reconnect()
            except AttachError as exc:
                self.reconnect_error = str(exc)
                cause = f"and no new daemon answers: {exc}"
            else:
                self._sock.setblocking(False)
                self._up[:0] = self._sent
                self._sent = bytearray()
                self._requests.cut_line("down")
                self._drain_until = None  # shut the new connection's sending side too
                return
        if not self._daemon_open:
            return
        self._daemon_open = False
        self.daemon_closed_first = self._editor_open
        unanswered = self._requests.pending
        if unanswered:
            if self._requests.cut_line("down"):
                self._down += b"\n"  # what follows is a line of its own
            self.unanswered_at_close = len(unanswered)
            self._down += self._requests.errors(
                f"the agybridge daemon closed the connection before answering ({cause})"
            )


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
    except (ConnectionResetError, BrokenPipeError) as exc:
        raise _DaemonGone from exc


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
