"""What a `Peer` hands its handler: the `Handler` protocol and the message contexts.

The peer knows no method names: a higher layer (acp/) implements `Handler`. ``seq``
numbers every incoming message in wire order, so that layer can tell "this cancel
arrived after that prompt" even when the prompt's task has not started yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs
import trio

from .messages import RequestId


@attrs.frozen
class MessageContext:
    """Where an incoming notification sits in the stream."""

    seq: int
    """Wire-order index among all incoming messages (requests, notifications, responses)."""


@attrs.define
class RequestContext:
    """An incoming request in flight; handlers may set ``on_cancel``."""

    request_id: RequestId
    method: str
    seq: int
    """Wire-order index, comparable with `MessageContext.seq`."""
    no_escapes: bool = False
    """No string in the params can hold a NUL or a lone surrogate (`Request.no_escapes`)."""
    answered: bool = attrs.field(default=False, init=False)
    """The handler wrote the answer itself, before its task ended (ACP v2 answers a
    prompt once its turn is under way): the peer then writes none."""
    _on_cancel: Callable[[], None] | None = attrs.field(default=None, init=False)
    #: The request's own cancel scope: made when its task starts without an
    #: ``on_cancel``, or by a cancel that comes before then.
    _scope: trio.CancelScope | None = attrs.field(default=None, init=False, repr=False)

    @property
    def on_cancel(self) -> Callable[[], None] | None:
        """Set by a handler to take over ``$/cancel_request`` (and answer normally).

        Once set, it stays set: set in ``request_received``, the request's task
        runs without a cancel scope of its own (`task_scope`), as nothing could
        cancel it.
        """
        return self._on_cancel

    @on_cancel.setter
    def on_cancel(self, on_cancel: Callable[[], None] | None) -> None:
        if on_cancel is None:
            raise ValueError("on_cancel cannot be unset once set")
        self._on_cancel = on_cancel

    def cancel(self) -> None:
        """Handle ``$/cancel_request``: call ``on_cancel`` if set, else cancel the request.

        Cancelling the request's scope makes the peer answer -32800. This works before the
        request's task has started: the scope is entered already cancelled.
        """
        if self._on_cancel is not None:
            self._on_cancel()
        else:
            self._own_scope().cancel(reason=f"$/cancel_request for request {self.request_id!r}")

    def task_scope(self) -> trio.CancelScope | None:
        """The cancel scope the request's task runs in, asked once as the task starts.

        None when a handler took over ``$/cancel_request`` before then
        (``on_cancel`` cannot be unset, so nothing could ever cancel that scope:
        the task runs without one). Otherwise the request's own scope, already
        cancelled if a ``$/cancel_request`` came first.
        """
        if self._on_cancel is not None:
            return self._scope
        return self._own_scope()

    def _own_scope(self) -> trio.CancelScope:
        if self._scope is None:
            self._scope = trio.CancelScope()
        return self._scope


class Handler(Protocol):
    """What a `Peer` dispatches incoming messages to (the peer knows no method names).

    Tasks start in no guaranteed order: ``request_received`` is where a handler sees
    requests in the order they arrived (and queues those that must be served so).
    """

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        """Synchronous, in the reader, in wire order, before the request's task starts."""
        ...

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        """Return the (JSON-serialisable) result, or raise `RpcError` to answer an error.

        Runs in its own task. Any other exception is answered with -32603. On
        ``$/cancel_request`` the task is cancelled (answered -32800) unless the handler
        set ``ctx.on_cancel``.
        """
        ...

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        """Runs inline in the reader task: return quickly, never await the peer's replies."""
        ...
