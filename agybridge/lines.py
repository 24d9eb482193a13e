"""A sans-I/O newline framer with a line-length cap.

Bytes go in with `LineBuffer.feed`, complete lines come out of `LineBuffer.next_line`
(h11's ``receive_data`` / ``next_event`` shape). No I/O and no trio here: the JSON-RPC
reader, agy's stdout reader and the permission hook all share this one framer.

Theory of operation: the buffer holds at most one partial line (plus whatever the last
``feed`` brought). ``_scan_from`` remembers how far the newline search got, so a line of
tens of MiB arriving in 64 KiB chunks costs one pass over its bytes, not one per chunk.
A line longer than the cap is reported once with `LineTooLongError` and then *skipped*:
its remaining bytes are dropped as they arrive until its newline, so memory stays
O(limit + chunk) however long the line is, and the lines after it are served normally
(architecture.md, "Rules that came from measurements": reject beyond the limit with a
clear error, never crash).
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_MAX_LINE_BYTES = 64 * 2**20  # 64 MiB: base64 images make lines of tens of MiB

_CR = 0x0D


class LineTooLongError(Exception):
    """A line grew beyond the limit; it is skipped up to its newline.

    Attributes:
      limit: the maximum line length in bytes (the line's newline not counted).
      size: how many bytes of the line had been seen when the limit tripped.
    """

    def __init__(self, limit: int, size: int) -> None:
        super().__init__(
            f"line too long: {size} bytes without a newline exceed the limit of "
            f"{limit / 2**20:.6g} MiB ({limit} bytes); the rest of this line is skipped"
        )
        self.limit = limit
        self.size = size


class LineBuffer:
    """Split a byte stream into lines of at most ``max_line_bytes`` bytes.

    A line is everything up to a b"\\n"; the b"\\n" and one b"\\r" before it are
    stripped. The limit counts the bytes before the b"\\n" (a b"\\r" included).
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, not {max_line_bytes!r}")
        self._limit = max_line_bytes
        self._buf = bytearray()
        self._scan_from = 0  # no b"\n" in self._buf[:self._scan_from]
        self._skipping = False  # inside an oversized line: drop bytes up to its b"\n"
        self._eof = False

    @property
    def max_line_bytes(self) -> int:
        return self._limit

    @property
    def at_eof(self) -> bool:
        """True once `feed_eof` was called: a None from `next_line` is then final."""
        return self._eof

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Store ``data``; no processing happens until `next_line`."""
        if self._eof and data:
            raise RuntimeError("feed() called after feed_eof()")
        self._buf += data

    def feed_eof(self) -> None:
        """Mark the end of the stream: a final unterminated line becomes a line."""
        self._eof = True

    def next_line(self) -> bytes | None:
        """Return the next complete line, or None if more data (or EOF) is needed.

        Raises:
          LineTooLongError: once per line longer than the limit; call again to go on
            with the lines after it.
        """
        buf = self._buf
        if self._skipping and not self._skip():
            return None
        end = buf.find(b"\n", self._scan_from)
        if end < 0:
            size = len(buf)
            if size > self._limit:
                buf.clear()
                self._scan_from = 0
                self._skipping = not self._eof
                raise LineTooLongError(self._limit, size)
            if self._eof and size:
                return self._take(size, size)
            self._scan_from = size
            return None
        if end > self._limit:
            del buf[: end + 1]
            self._scan_from = 0
            raise LineTooLongError(self._limit, end)
        return self._take(end, end + 1)

    def feed_and_drain(self, data: bytes | bytearray) -> Sequence[bytes | LineTooLongError]:
        """`feed` then `drain`. A line reader's usual read, whole short lines
        arriving with nothing buffered before them, is split as it is: not
        copied into the buffer and out again."""
        if (
            type(data) is bytes  # a bytearray's lines would be bytearrays
            and not self._buf
            and data[-1:] == b"\n"
            and b"\r" not in data
            and not (self._skipping or self._eof)
            and len(data) <= self._limit  # then no line in it is too long
        ):
            return data[:-1].split(b"\n")
        self.feed(data)
        return self.drain()

    def drain(self) -> list[bytes | LineTooLongError]:
        """Every complete line there is, in order (an over-long one as its
        `LineTooLongError`): what calling `next_line` until None gives, split
        in one pass over the buffer."""
        out: list[bytes | LineTooLongError] = []
        buf = self._buf
        if self._skipping and not self._skip():
            return out
        # From `_scan_from`, as `next_line` does: a line of tens of MiB
        # arriving in 64 KiB chunks is searched once, not once per chunk.
        last = buf.rfind(b"\n", self._scan_from)
        if last >= 0:
            with memoryview(buf) as view:
                block = view[:last].tobytes()
            del buf[: last + 1]
            lines = block.split(b"\n")
            limit = self._limit
            if last <= limit and b"\r" not in block:
                out += lines  # no line can be too long or end in CR
            else:
                for line in lines:
                    if len(line) > limit:
                        out.append(LineTooLongError(limit, len(line)))
                    elif line[-1:] == b"\r":
                        out.append(line[:-1])
                    else:
                        out.append(line)
        self._scan_from = len(buf)  # no b"\n" is left in it
        if len(buf) > self._limit or (self._eof and buf):
            # The unterminated rest: too long already, or the last line at EOF
            # (one line at most: the buffer holds no newline).
            try:
                rest = self.next_line()
            except LineTooLongError as exc:
                out.append(exc)
            else:
                if rest is not None:
                    out.append(rest)
        return out

    def _skip(self) -> bool:
        """Drop the rest of an over-long line; False while its b"\n" has not come."""
        buf = self._buf
        end = buf.find(b"\n")
        if end < 0:
            buf.clear()  # still inside the oversized line: drop what arrived
            if self._eof:
                self._skipping = False
            return False
        del buf[: end + 1]
        self._skipping = False
        self._scan_from = 0
        return True

    def _take(self, end: int, consumed: int) -> bytes:
        """Remove ``consumed`` bytes and return the first ``end`` without a final CR."""
        buf = self._buf
        stop = end - 1 if end and buf[end - 1] == _CR else end
        # One copy through a memoryview (a bytearray slice would copy twice); the view
        # must be released before the bytearray is resized.
        with memoryview(buf) as view:
            line = view[:stop].tobytes()
        del buf[:consumed]  # O(1) at the front of a bytearray in CPython
        self._scan_from = 0
        return line
