"""A JSON-RPC 2.0 peer over a pair of trio byte streams, one message per line.

Theory of operation. `Peer.run` owns a nursery with two tasks:

* the reader: ``receive_some`` -> `LineBuffer` -> `parse_message` -> dispatch. Each
  incoming request runs in its own task (in a nursery the reader owns), where
  ``$/cancel_request`` can end it (`IncomingRequests`, incoming.py). Notifications
  are awaited inline, so their effects are ordered with respect to every later
  message (handlers must be quick). Responses complete our pending outgoing requests.
* the writer (`LineWriter`, writer.py): the only writer of ``send_stream``. Everyone
  else hands it complete lines, because a cancelled ``send_all`` can leave half a line
  on the wire (architecture.md, "Rules that came from measurements"). It writes a
  burst of lines with one system call, in the order sent, and an idle writer's line
  is written at once by its sender when the stream can write without waiting.

Shutdown on EOF: mark the receive side closed, fail every pending outgoing request with
`PeerClosedError`, wait for the in-flight incoming requests (the caller decides how they
end, e.g. by cancelling its sessions), let the writer drain, return. A client that stops
reading (broken send stream) is logged once; later output is discarded, never raised,
and `wait_send_broken` wakes the owner, which treats it like EOF.

The wire stays whole when the owner stops the peer in order: `close_output` (under
the owner's deadline) lets the line being written finish and drops every later one;
only then does the owner cancel. Cancelling before that (or after the deadline, when
the reader has stopped reading for good) may cut the line being written.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator
from typing import Any

import attrs
import trio

from ..lines import DEFAULT_MAX_LINE_BYTES, LineBuffer, LineTooLongError
from ..pipes import receive_ready
from .errors import PeerClosedError, RpcError
from .handler import Handler, MessageContext
from .incoming import IncomingRequests
from .messages import (
    Invalid,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    encode_message,
    error_message,
    notification_message,
    parse_message,
    request_message,
)
from .writer import LineWriter

logger = logging.getLogger(__name__)

# One Linux pipe buffer: a single read empties a full pipe.
_RECEIVE_CHUNK_BYTES = 2**16
# The protocol-level cancellation notification (ACP cancellation.mdx); other "$/..."
# notifications may be ignored (acp/brief.md §1).
_CANCEL_REQUEST = "$/cancel_request"


@attrs.frozen
class PeerStatistics:
    pending_outgoing: int
    """Our requests still waiting for their response."""
    requests_in_flight: int
    """Incoming requests whose response has not been handed to the writer yet."""
    messages_received: int
    """Incoming lines that parsed as messages."""
    messages_sent: int
    """Lines written to the send stream."""
    parse_errors: int
    """Incoming lines answered with -32700 or -32600 (including oversized lines)."""


@attrs.define
class _Pending:
    done: trio.Event = attrs.Factory(trio.Event)
    result: Any = None
    error: BaseException | None = None

    def finish(self, result: Any, error: BaseException | None) -> None:
        self.result, self.error = result, error
        self.done.set()


class Peer:
    """One end of a JSON-RPC 2.0 connection over NDJSON byte streams.

    Args:
      receive_stream, send_stream: the transport; the caller owns (and closes) them.
      handler: receives incoming requests and notifications.
      max_line_bytes: longer incoming lines are answered with -32600 and skipped.
      first_seq: ``seq`` of the first incoming message.
      seqs: where the seqs come from instead (``first_seq`` is then unused): a
        server with several connections shares one counter among them, so seqs
        compare across connections in the order the messages arrived.
    """

    def __init__(
        self,
        receive_stream: trio.abc.ReceiveStream,
        send_stream: trio.abc.SendStream,
        handler: Handler,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        first_seq: int = 0,
        seqs: Iterator[int] | None = None,
    ) -> None:
        self._receive_stream = receive_stream
        self._send_stream = send_stream
        self._handler = handler
        self._max_line_bytes = max_line_bytes
        self._writer = LineWriter(send_stream, self._fail_pending)
        self._pending: dict[RequestId, _Pending] = {}
        self._requests = IncomingRequests(handler, self._writer)
        self._next_id = 0
        self._seqs = itertools.count(first_seq) if seqs is None else seqs
        self._receive_closed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._started = False
        self._messages_received = 0
        self._parse_errors = 0

    # ---- public API

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the connection until the receive stream ends; then drain and return.

        Reports ``started`` once the reader and the writer run. After EOF it waits for the
        in-flight incoming requests (it does not cancel them) and for queued output.
        Cancellation stops everything at once: in-flight requests get no response and
        the line being written may be cut short.
        """
        if self._started:
            raise RuntimeError("Peer.run() can only be called once")
        self._started = True
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._writer.run)
            await nursery.start(self._reader_task)
            task_status.started()

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and return the peer's result (None for ``"result": null``).

        Raises:
          RpcError: the peer answered with an error.
          PeerClosedError: the peer is gone, before or while we wait.
          TypeError, ValueError: ``params`` are not JSON-serialisable.

        If cancelled after the request went out, a ``$/cancel_request`` is queued without
        waiting for the writer, and `trio.Cancelled` propagates.
        """
        if self._receive_closed.is_set() or self._writer.broken:
            raise PeerClosedError(f"cannot send {method!r}: the peer is gone")
        request_id = self._next_id
        self._next_id += 1
        line = encode_message(request_message(request_id, method, params))
        pending = self._pending[request_id] = _Pending()
        sent = False
        try:
            await self._writer.send(line)
            sent = True
            await pending.done.wait()
        except trio.Cancelled:
            if sent and not pending.done.is_set():
                self._send_cancel_request(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification; returns once the writer has taken it (or it was
        written).

        Never raises because the peer is gone: the line is then dropped. If cancelled
        while waiting for the writer, the notification was not sent. Raises
        TypeError/ValueError for unserialisable ``params``.
        """
        await self._writer.send(encode_message(notification_message(method, params)))

    async def wait_receive_closed(self) -> None:
        """Return once the receive stream has ended or broken, or run() stopped.

        A plain wait: cancelling it has no effect on the peer.
        """
        await self._receive_closed.wait()

    async def send_encoded(self, lines: bytes) -> None:
        """Hand complete, already encoded notification lines to the writer as
        one item (one channel hop, one write); the same guarantees as `notify`.

        ``lines`` must be whole lines, each ``b"\\n"``-terminated.
        """
        if lines:
            await self._writer.send(lines)

    async def flush(self) -> None:
        """Return once everything queued before this call has been written."""
        await self._writer.flush()

    def cancel_requests(self) -> int:
        """Cancel every incoming request in flight, as ``$/cancel_request`` would
        (its handler's ``on_cancel``, else -32800), so each still gets its answer
        (shutdown). Returns how many there were."""
        return self._requests.cancel_all()

    async def wait_requests_done(self) -> None:
        """Return once no incoming request is in flight (each has handed its
        response to the writer); returns at once if none is."""
        await self._requests.wait_done()

    async def wait_send_broken(self) -> None:
        """Return once writing to the peer failed (EPIPE: nobody reads our output)."""
        await self._writer.wait_broken()

    async def close_output(self) -> None:
        """Stop at a line boundary: the line being written is finished, every later
        one is dropped. Returns once the writer is between lines.

        Cancelling the wait leaves the line in progress; cancelling `run` cuts it.
        """
        await self._writer.close_output()

    @property
    def writing(self) -> bool:
        """A line is being written right now (its reader may be slow)."""
        return self._writer.writing

    @property
    def send_broken(self) -> bool:
        """Writing to the peer failed (nobody reads our output any more)."""
        return self._writer.broken

    @property
    def receive_closed(self) -> bool:
        return self._receive_closed.is_set()

    def statistics(self) -> PeerStatistics:
        return PeerStatistics(
            pending_outgoing=len(self._pending),
            requests_in_flight=self._requests.running,
            messages_received=self._messages_received,
            messages_sent=self._writer.lines_sent,
            parse_errors=self._parse_errors,
        )

    # ---- writing

    def _send_cancel_request(self, request_id: RequestId) -> None:
        """Queue ``$/cancel_request`` without blocking (we are in a cancelled task)."""
        line = encode_message(notification_message(_CANCEL_REQUEST, {"requestId": request_id}))
        if not self._writer.send_nowait(line) and self._nursery is not None:
            # The writer is busy: a task of the peer's waits for it instead of the caller.
            # RuntimeError: the nursery is closed, the peer has stopped anyway.
            with contextlib.suppress(RuntimeError):
                self._nursery.start_soon(self._writer.send, line)

    # ---- reader

    async def _reader_task(self, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            async with trio.open_nursery() as requests:
                task_status.started()
                try:
                    await self._read_until_eof(requests)
                finally:
                    self._close_receive()
            # Leaving the nursery waited for every in-flight request: they have all
            # handed their responses to the writer, which drains them and stops.
        finally:
            self._writer.close()

    async def _read_until_eof(self, requests: trio.Nursery) -> None:
        lines = LineBuffer(self._max_line_bytes)
        while True:
            try:
                data = await receive_ready(self._receive_stream, _RECEIVE_CHUNK_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                logger.warning("JSON-RPC input stream broke: %s", exc)
                return
            if data:
                lines.feed(data)
            else:
                lines.feed_eof()
            # Every complete line of the read, split in one pass.
            for line in lines.drain():
                if isinstance(line, LineTooLongError):
                    self._parse_errors += 1
                    logger.warning("incoming JSON-RPC message skipped: %s", line)
                    error = RpcError.invalid_request(str(line), {"limitBytes": line.limit})
                    await self._writer.send(encode_message(error_message(None, error)))
                    continue
                message = parse_message(line)
                if isinstance(message, Request):
                    self._messages_received += 1
                    refusal = self._requests.start(message, next(self._seqs), requests)
                    if refusal is not None:
                        await self._writer.send(refusal)
                else:
                    await self._dispatch(message)
            if not data:
                return

    def _close_receive(self) -> None:
        self._receive_closed.set()
        self._fail_pending("the peer closed the connection")

    def _fail_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            entry.finish(None, PeerClosedError(reason))

    async def _dispatch(self, message: Message | None) -> None:
        """Any message but a request (`IncomingRequests.start`)."""
        if message is None:
            return
        if isinstance(message, Invalid):
            self._parse_errors += 1
            logger.warning("invalid incoming JSON-RPC message: %s", message.error)
            await self._writer.send(encode_message(error_message(message.id, message.error)))
            return
        seq = next(self._seqs)
        self._messages_received += 1
        if isinstance(message, Notification):
            await self._handle_notification(message, seq)
        elif isinstance(message, Response):
            self._handle_response(message)

    async def _handle_notification(self, message: Notification, seq: int) -> None:
        if message.method == _CANCEL_REQUEST:
            self._cancel_incoming(message.params)
        elif message.method.startswith("$/"):
            logger.debug("ignoring protocol notification %r", message.method)
        else:
            try:
                await self._handler.handle_notification(
                    message.method, message.params, MessageContext(seq)
                )
            except RpcError as exc:  # nobody to tell but the log
                logger.warning("notification %r rejected: %s", message.method, exc)
            except Exception:
                logger.exception("notification %r failed", message.method)

    def _cancel_incoming(self, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            logger.debug("ignoring %s with params %r", _CANCEL_REQUEST, params)
            return
        self._requests.cancel(request_id)

    def _handle_response(self, message: Response) -> None:
        pending = self._pending.pop(message.id, None)
        if pending is not None:
            pending.finish(message.result, message.error)
        elif message.id is None and message.error is not None:
            logger.warning("the peer could not read one of our messages: %s", message.error)
        else:
            logger.warning("ignoring a response with unknown id %r", message.id)
