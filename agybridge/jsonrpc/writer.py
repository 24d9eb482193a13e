"""The single writer of a JSON-RPC connection's send stream.

Everyone hands it complete lines; it is the only one that writes, because a
cancelled ``send_all`` can leave half a line on the wire (architecture.md,
"Rules that came from measurements"). Theory of operation:

* Hand-over goes through a zero-buffer channel: a sender resumes once the
  writer holds its line, so a client that stops reading slows the producers
  down instead of growing a queue; blocked senders are served FIFO, which
  keeps each task's lines in order. When the writer is idle the hand-over
  does not yield (one task switch less).
* The writer task takes whatever senders are waiting (up to
  ``WRITE_BATCH_BYTES``) and writes it with one ``send_all``.
* Writing now: when the stream can write without waiting
  (:class:`NowaitSendStream`, e.g. the stdio pipe) and the writer is idle
  with nothing queued, the sender writes itself, synchronously: no task
  switch at all, which is most of what a short turn costs. If the pipe
  takes only part of it, the rest goes to the writer ahead of anything sent
  later, and counts as the line being written.
* ``close_output`` lets the line being written finish and drops every later
  one. A broken stream is reported once (``on_broken``); later lines are
  discarded, never raised, and senders never block on a dead client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import attrs
import trio

from ..pipes import next_for_writer, write_nowait

logger = logging.getLogger(__name__)

#: One write carries at most this much (plus the item that crossed it): a burst of small
#: lines costs one system call, and a batch never holds more than a few items in memory.
WRITE_BATCH_BYTES = 2**18


@runtime_checkable
class NowaitSendStream(Protocol):
    """A send stream that can also write without waiting."""

    def send_nowait(self, data: bytes) -> int:
        """Write what can be written at once; how many bytes that was (0 if
        none). Raises trio.BrokenResourceError / ClosedResourceError."""
        ...


class PipeSendStream(trio.abc.SendStream):
    """The write end of a pipe (trio's ``FdStream``, which owns the fd) that
    can also write without waiting (a :class:`NowaitSendStream`)."""

    def __init__(self, fd: int) -> None:
        self._stream = trio.lowlevel.FdStream(fd)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()

    def send_nowait(self, data: bytes) -> int:
        return write_nowait(self._stream, data)


@attrs.frozen
class _Rest:
    """The unwritten end of a line written now: the writer finishes it first."""

    data: bytes
    lines: int


class LineWriter:
    def __init__(self, stream: trio.abc.SendStream, on_broken: Callable[[str], None]) -> None:
        self._stream = stream
        self._send_nowait = stream.send_nowait if isinstance(stream, NowaitSendStream) else None
        self._on_broken = on_broken
        self._send, self._receive = trio.open_memory_channel[bytes | _Rest | trio.Event](0)
        self.finished = trio.Event()
        self.broken = False
        self._broken_event = trio.Event()
        self._closed = False
        self._writing = False
        self._line_done = trio.Event()
        #: The writer waits in receive with nothing queued (set by the writer
        #: as it parks, cleared by every hand-over through the channel).
        self._parked = False
        #: Lines written whole.
        self.lines_sent = 0

    @property
    def writing(self) -> bool:
        """A line is being written right now (its reader may be slow)."""
        return self._writing

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        async with self._receive:
            task_status.started()
            try:
                await self._write_lines()
            finally:
                self.finished.set()

    def close(self) -> None:
        """No more lines will be handed over: the writer drains and stops."""
        # The writer is woken (EndOfChannel) but has not run yet: not idle any more.
        self._parked = False
        self._send.close()

    async def wait_broken(self) -> None:
        await self._broken_event.wait()

    # --- handing over ------------------------------------------------------------

    async def send(self, lines: bytes) -> None:
        """Hand complete line(s) to the writer, in order with every other sender."""
        if self.broken:
            await trio.lowlevel.checkpoint()
            return
        if self._idle():
            if self._send_nowait is not None:
                self._write_now(lines)
                return
            # Nobody queued: the writer takes it without this task yielding.
            try:
                self._hand_over_nowait(lines)
                return
            except trio.WouldBlock:
                pass  # the writer was cancelled while parked: the plain way
        try:
            await self._send.send(lines)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            logger.debug("dropped a message: the JSON-RPC writer has stopped")

    def send_nowait(self, lines: bytes) -> bool:
        """Hand over without blocking (a cancelled task); False if the writer is busy."""
        if self.broken:
            return True
        try:
            if self._idle() and self._send_nowait is not None:
                self._write_now(lines)
            else:
                self._hand_over_nowait(lines)
        except trio.WouldBlock:
            return False
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        return True

    async def flush(self) -> None:
        """Return once everything handed over before this call has been written.

        The marker reaches the writer after every line handed over before it
        (the channel is FIFO); the writer sets it once the write holding those
        lines is done. Once the channel is closed (after EOF) the writer is
        draining its last lines: then this waits for the writer to finish.
        """
        if self.broken:
            await trio.lowlevel.checkpoint()
            return
        marker = trio.Event()
        self._parked = False  # from here on the marker is queued ahead of later lines
        try:
            await self._send.send(marker)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            await self.finished.wait()
            return
        await marker.wait()

    async def close_output(self) -> None:
        """Stop at a line boundary: the line being written is finished, every later
        one is dropped. Returns once the writer is between lines."""
        self._closed = True
        while self._writing:
            await self._line_done.wait()
        await trio.lowlevel.checkpoint()

    def _idle(self) -> bool:
        # The writer waits in receive: nothing is queued or being written.
        return self._parked and not self._closed

    def _park(self, parked: bool) -> None:
        self._parked = parked

    def _hand_over_nowait(self, item: bytes | _Rest) -> None:
        try:
            self._send.send_nowait(item)
        finally:
            self._parked = False

    def _write_now(self, lines: bytes) -> None:
        assert self._send_nowait is not None
        try:
            written = self._send_nowait(lines)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._broke(exc)
            return
        if written == len(lines):
            self.lines_sent += lines.count(b"\n")
            return
        # The pipe is full: the writer finishes the line(s), before anything else.
        try:
            self._hand_over_nowait(_Rest(lines[written:], lines.count(b"\n")))
        except trio.WouldBlock:
            # The writer was cancelled while parked (it has not run yet):
            # cancelling it may cut the line being written (peer.py).
            return
        self._line_done = trio.Event()
        self._writing = True

    # --- the writer task ---------------------------------------------------------

    async def _write_lines(self) -> None:
        while True:
            try:
                first = await next_for_writer(self._receive, self._park)
            except trio.EndOfChannel:
                return
            if isinstance(first, _Rest):
                # Started by a sender: finished whatever happens (close_output waits).
                await self._write(first.data, first.lines, started=True)
                continue
            batch, markers = self._take_batch(first)
            # Keep draining when broken or closed, so that no sender ever blocks on a
            # dead client.
            if batch and not (self.broken or self._closed):
                await self._write(b"".join(batch), sum(item.count(b"\n") for item in batch))
            for marker in markers:
                marker.set()  # everything handed over before it is written

    def _take_batch(self, first: bytes | trio.Event) -> tuple[list[bytes], list[trio.Event]]:
        """``first`` plus whatever senders are waiting, in order, up to the bound."""
        batch: list[bytes] = []
        markers: list[trio.Event] = []
        size = 0
        item: bytes | _Rest | trio.Event = first
        while True:
            if isinstance(item, trio.Event):
                markers.append(item)
            else:
                # A _Rest is only handed over to an idle writer: never mid-batch.
                assert isinstance(item, bytes)
                batch.append(item)
                size += len(item)
            if size >= WRITE_BATCH_BYTES:
                break
            try:
                item = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        return batch, markers

    async def _write(self, data: bytes, lines: int, *, started: bool = False) -> None:
        """Write ``data`` (``lines`` complete lines); `close_output` waits for it whole."""
        if not started:
            self._line_done = trio.Event()
            self._writing = True
        try:
            if not self.broken:
                await self._stream.send_all(data)
                self.lines_sent += lines
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._broke(exc)
        finally:
            self._writing = False
            self._line_done.set()

    def _broke(self, exc: Exception) -> None:
        logger.warning("JSON-RPC output stream broke (%s); discarding output", exc)
        self.broken = True
        self._broken_event.set()
        self._on_broken("the stream to the peer broke")
