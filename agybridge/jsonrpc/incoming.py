"""The other side's requests in flight on a `Peer`, each in a task of its own.

A request is announced to the handler (``request_received``, in wire order, in
the reader) and then served in its own task inside its own `trio.CancelScope`,
so ``$/cancel_request`` can end it (answered -32800), unless its handler took
that over (``on_cancel``) first. Every request is answered exactly once, through
the connection's `LineWriter`: its result, its `RpcError`, or -32603 for any
other exception. A duplicate id of a request in flight is refused instead of
served, because the other side could not tell the two answers apart.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import trio

from .errors import RpcError
from .handler import Handler, RequestContext
from .messages import Request, RequestId, encode_message, error_message, result_message
from .writer import LineWriter

#: The peer's logger: a log reader knows these requests as the connection's.
logger = logging.getLogger("agybridge.jsonrpc.peer")

#: What a request that needs no cancel scope of its own runs in.
_NO_SCOPE = contextlib.nullcontext()


class IncomingRequests:
    """The requests a `Peer` received and has not answered yet."""

    def __init__(self, handler: Handler, writer: LineWriter) -> None:
        self._handler = handler
        self._writer = writer
        #: By id, for ``$/cancel_request`` (a request with a null id cannot be targeted).
        self._by_id: dict[RequestId, RequestContext] = {}
        self._running = 0
        #: Set when the last request in flight is done; made by a waiter (shutdown).
        self._idle: trio.Event | None = None

    @property
    def running(self) -> int:
        """Requests whose response has not been handed to the writer yet."""
        return self._running

    def start(self, message: Request, seq: int, nursery: trio.Nursery) -> bytes | None:
        """Announce the request and start its task in ``nursery``; the line
        refusing it instead, if its id is already in use."""
        ctx = RequestContext(message.id, message.method, seq, message.no_escapes)
        if message.id is not None:
            if message.id in self._by_id:
                error = RpcError.invalid_request(f"request id {message.id!r} is already in use")
                return encode_message(error_message(message.id, error))
            self._by_id[message.id] = ctx
        try:
            self._handler.request_received(message.method, message.params, ctx)
        except Exception:
            logger.exception("request_received for %r failed", message.method)
        self._running += 1
        nursery.start_soon(self._serve, ctx, message.params, name=message.method)
        return None

    def cancel(self, request_id: RequestId) -> None:
        """``$/cancel_request`` for ``request_id``: nothing if it is not in flight
        (already answered, or it never existed)."""
        ctx = self._by_id.get(request_id)
        if ctx is None:
            return
        try:
            ctx.cancel()
        except Exception:
            logger.exception("on_cancel of request %r (id %r) failed", ctx.method, request_id)

    def cancel_all(self) -> int:
        """Cancel every request in flight as ``$/cancel_request`` would; how many there were."""
        in_flight = list(self._by_id.values())
        for ctx in in_flight:
            try:
                ctx.cancel()
            except Exception:
                logger.exception("cancelling request %r (id %r) failed", ctx.method, ctx.request_id)
        return len(in_flight)

    async def wait_done(self) -> None:
        """Return once every request has handed its response to the writer."""
        while self._running:
            if self._idle is None:
                self._idle = trio.Event()
            await self._idle.wait()

    async def _serve(self, ctx: RequestContext, params: Any) -> None:
        try:
            result: Any = None
            error: RpcError | None = None
            scope = ctx.task_scope()
            with scope if scope is not None else _NO_SCOPE:
                try:
                    result = await self._handler.handle_request(ctx.method, params, ctx)
                except RpcError as exc:
                    error = exc
                except Exception as exc:
                    logger.exception("request %r (id %r) failed", ctx.method, ctx.request_id)
                    error = _internal_error(exc)
            # Only the request's own scope's cancellation ($/cancel_request) lands here;
            # when the whole peer is cancelled, Cancelled propagates and nobody answers.
            if scope is not None and scope.cancelled_caught:
                error = RpcError.request_cancelled()
            # Forget the id before answering: a late $/cancel_request must not reach a
            # handler that has already finished.
            self._forget(ctx)
            if ctx.answered:
                if error is not None:  # nobody to tell: the answer went out already
                    logger.warning("request %r (id %r) failed after its answer: %s",
                                   ctx.method, ctx.request_id, error.message)  # fmt: skip
            else:
                await self._writer.send(_encode_response(ctx, result, error))
        except BaseException:
            self._forget(ctx)
            raise
        finally:
            self._running -= 1
            if self._running == 0 and self._idle is not None:
                self._idle.set()
                self._idle = None

    def _forget(self, ctx: RequestContext) -> None:
        if self._by_id.get(ctx.request_id) is ctx:
            del self._by_id[ctx.request_id]


def _encode_response(ctx: RequestContext, result: Any, error: RpcError | None) -> bytes:
    if error is None:
        message = result_message(ctx.request_id, result)
    else:
        message = error_message(ctx.request_id, error)
    try:
        return encode_message(message)
    except (TypeError, ValueError) as exc:
        logger.exception("response to %r (id %r) is not JSON", ctx.method, ctx.request_id)
        return encode_message(error_message(ctx.request_id, _internal_error(exc)))


def _internal_error(exc: BaseException) -> RpcError:
    """-32603 naming the exception a handler raised."""
    return RpcError.internal_error(data={"details": f"{type(exc).__name__}: {exc}"})
