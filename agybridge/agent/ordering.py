"""Requests that change a session's life (new is its own; load, resume,
close, delete) take effect in the order they were sent.

Each runs in its own task and awaits I/O (the store, agy starting), so a
``session/close`` sent after a ``session/load`` could otherwise finish first
and leave open a session the client closed. A ticket taken in wire order
(``request_received``) and a wait for every earlier ticket of the same
session id restore the order; requests for other sessions never wait.

This order is per client (one `AcpAgent`). Across clients (the daemon's
connections share one `SessionManager` and store) each of these requests holds
the manager's per-session lock (``SessionManager.lifecycle``) for its whole
handling, after its turn here: two clients' requests take effect one at a
time, each as a whole.

A session's other requests (a prompt...) sent right behind its load, resume,
close or delete wait the same way (also when the session is live), then arrive
at the session at once: they hold their place only until the requests before
them are done. After a close or delete there is no session to arrive at: they
get the unknown-session error. A ``session/cancel`` sent behind them cancels
the prompts among them when they arrive, and takes its own place: it is
applied once the requests before it are done (`LifecycleOrder.then`), so one
sent right behind a load or resume of a session another client drives
cancels as the client that now drives it.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Protocol

import attrs
import trio

logger = logging.getLogger(__name__)


class Place(Protocol):
    """A place in a session's order: a request (its task waits for its turn)."""

    @property
    def seq(self) -> int: ...


@attrs.frozen(eq=False)
class Deferred:
    """A place that is no waiting task: ``action`` is called when it reaches the front."""

    seq: int
    action: Callable[[], None]


class LifecycleOrder:
    def __init__(self) -> None:
        #: session id -> its places, in wire order (the front one's turn is now).
        self._pending: dict[str, list[Place]] = {}
        self._changed = trio.Event()

    def ticket(self, session_id: str, place: Place) -> None:
        """Take a place (call in wire order)."""
        bisect.insort(self._pending.setdefault(session_id, []), place, key=_wire_position)

    def then(self, session_id: str, seq: int, action: Callable[[], None]) -> None:
        """Take a place (in wire order, while `pending`) that calls ``action``
        once every earlier request for ``session_id`` is done."""
        self.ticket(session_id, Deferred(seq, action))

    def pending(self, session_id: str) -> bool:
        """Whether a request for ``session_id`` holds a place (in wire order:
        one sent before the caller's)."""
        return session_id in self._pending

    def places(self, session_id: str) -> Iterator[Place]:
        """The places ``session_id``'s requests hold, in wire order."""
        return iter(self._pending.get(session_id, ()))

    @asynccontextmanager
    async def turn(self, session_id: str, place: Place) -> AsyncIterator[None]:
        """Wait until every earlier request for ``session_id`` is done."""
        queue = self._pending.get(session_id)
        if queue is None or place not in queue:
            yield  # no ticket (e.g. an unparsable id): nothing to order against
            return
        try:
            while queue[0] is not place:
                await self._changed.wait()
            yield
        finally:
            queue.remove(place)
            while queue and isinstance(deferred := queue[0], Deferred):
                del queue[0]
                try:
                    deferred.action()
                except Exception:
                    logger.exception("a request waiting for %s failed", session_id)
            if not queue:
                del self._pending[session_id]
            self._changed.set()
            self._changed = trio.Event()


def _wire_position(place: Place) -> int:
    return place.seq
