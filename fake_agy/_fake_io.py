"""Process I/O of the fake agy: stdout/stderr lines, stdin lines, signals (stdlib only).

Single-threaded by design. agy reads the next stdin line only after the current turn's
``result`` (contract.md §2.3), so the fake is one loop: read a line, run the whole turn,
read the next. Signals must still cut a running turn short (§5), so SIGINT/SIGTERM are
caught by handlers that only *record* the signal; ``signal.set_wakeup_fd`` makes every
wait (``select`` on stdin, or on the wakeup pipe alone for scenario pauses) return at
once, and ``Interrupts.check`` turns the recorded signal into an ``Interrupted`` exception
at a well-defined point, never in the middle of writing a line. Every stdout line is
written with one ``os.write`` loop, unbuffered, so bridges see each event as it happens
(§3, §9).
"""

from __future__ import annotations

import json
import os
import select
import signal
import types
from collections.abc import Callable, Sequence
from typing import Any

JsonObject = dict[str, Any]


def dumps(obj: Any) -> str:
    """Compact JSON like Go's encoder: no spaces, UTF-8 kept as is."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write_all(fd: int, data: bytes) -> None:
    """Write every byte to ``fd`` (pipes may accept a write partially)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def stderr_line(text: str) -> None:
    """Write one human line to stderr (contract.md §4)."""
    write_all(2, (text + "\n").encode())


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; raised only from ``Interrupts.check``/``wait``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Interrupts:
    """SIGINT/SIGTERM recorded by handlers and raised at waiting points.

    The handlers are Python-level (not ``SIG_IGN``) even when SIGINT is ignored, so that
    children exec'd by the fake start with the default disposition like agy's children.
    """

    def __init__(self, on_ignored: Callable[[int], None]) -> None:
        self.ignore_sigint = False
        self._on_ignored = on_ignored
        self._pending: list[int] = []
        self._ignored: list[int] = []
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: types.FrameType | None) -> None:
        if signum == signal.SIGINT and self.ignore_sigint:
            self._ignored.append(signum)
        else:
            self._pending.append(signum)

    def check(self) -> None:
        """Raise ``Interrupted`` if a signal is pending; report ignored ones."""
        while self._ignored:
            self._on_ignored(self._ignored.pop(0))
        if self._pending:
            raise Interrupted(self._pending[0])

    def wait(self, fd: int | None, timeout: float | None) -> bool:
        """Wait until ``fd`` is readable (True), ``timeout`` passes or a signal arrives.

        Raises:
            Interrupted: a SIGINT/SIGTERM is pending.
        """
        self.check()
        fds = [self._wake_r] if fd is None else [self._wake_r, fd]
        ready, _, _ = select.select(fds, [], [], timeout)
        if self._wake_r in ready:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        self.check()
        return fd is not None and fd in ready

    def readable(self, fds: Sequence[int], timeout: float | None) -> list[int]:
        """Like ``wait`` for several fds: the readable ones (maybe none after ``timeout``).

        Raises:
            Interrupted: a SIGINT/SIGTERM is pending.
        """
        self.check()
        ready, _, _ = select.select([self._wake_r, *fds], [], [], timeout)
        if self._wake_r in ready:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        self.check()
        return [fd for fd in ready if fd != self._wake_r]


class LineReader:
    """Reads stdin one line at a time without blocking signal delivery."""

    def __init__(self, interrupts: Interrupts, fd: int = 0) -> None:
        self._interrupts = interrupts
        self._fd = fd
        self._buffer = bytearray()
        self._scanned = 0  # no newline before this offset: huge lines stay linear
        self._eof = False

    def read_line(self) -> bytes | None:
        """The next line without its newline, or None at EOF (a last unterminated line
        is still returned)."""
        while True:
            cut = self._buffer.find(b"\n", self._scanned)
            if cut >= 0:
                line = bytes(self._buffer[:cut])
                del self._buffer[: cut + 1]
                self._scanned = 0
                return line.removesuffix(b"\r")
            self._scanned = len(self._buffer)
            if self._eof:
                line = bytes(self._buffer)
                self._buffer.clear()
                self._scanned = 0
                return line or None
            if self._interrupts.wait(self._fd, None):
                chunk = os.read(self._fd, 1 << 20)
                self._eof = not chunk
                self._buffer += chunk


class Output:
    """stdout in one of agy's three ``--output-format`` shapes (contract.md §1.1, §3.7).

    ``stream-json`` writes every event as one flushed line. ``json`` prints only the final
    result's fields as one envelope (no ``event`` wrapper). ``text`` prints the reply text.
    """

    def __init__(self, output_format: str, fd: int = 1, tee: str | None = None) -> None:
        self.format = output_format
        self._fd = fd
        self._envelope: JsonObject | None = None
        #: ``FAKE_AGY_STDOUT_LOG``: every stdout line is also appended there as
        #: ``{"pid": …, "stdout": line}`` (``"partial": true`` for a cut line), so tests
        #: can compare what a bridge rendered with the raw agy lines it was given.
        self._tee = LaunchLog(tee) if tee else None

    def event(self, name: str, payload: JsonObject) -> None:
        """Emit ``{"event": name, name: payload}`` in the current output format."""
        if self.format == "stream-json":
            self.raw(dumps({"event": name, name: payload}))
        elif name == "result":
            self._envelope = payload
        elif self.format == "text" and name == "step_update":
            delta = payload.get("text_delta")
            if isinstance(delta, str):
                write_all(self._fd, delta.encode())

    def raw(self, line: str) -> None:
        """A verbatim stdout line (captures, noise); dropped unless streaming."""
        if self.format == "stream-json":
            write_all(self._fd, (line + "\n").encode())
            if self._tee is not None:
                self._tee.record({"stdout": line})

    def raw_lines(self, lines: Sequence[str]) -> None:
        """Several verbatim stdout lines in one write (a benchmark load: agy itself
        flushes every event, but a flood must not be bound by the fake's syscalls)."""
        if self.format == "stream-json" and lines:
            write_all(self._fd, ("\n".join(lines) + "\n").encode())
            if self._tee is not None:
                for line in lines:
                    self._tee.record({"stdout": line})

    def partial(self, text: str) -> None:
        """Bytes without a newline: a line cut short by a crash."""
        if self.format == "stream-json":
            write_all(self._fd, text.encode())
            if self._tee is not None:
                self._tee.record({"stdout": text, "partial": True})

    def close(self) -> None:
        if self.format == "json" and self._envelope is not None:
            write_all(self._fd, (dumps(self._envelope) + "\n").encode())
            self._envelope = None


class LaunchLog:
    """``FAKE_AGY_LAUNCH_LOG``: JSON lines tests read to see what reached agy."""

    def __init__(self, path: str | None) -> None:
        self._path = path or None

    def record(self, entry: JsonObject) -> None:
        if self._path is None:
            return
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            write_all(fd, (dumps({"pid": os.getpid(), **entry}) + "\n").encode())
        finally:
            os.close(fd)
