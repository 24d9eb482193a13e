"""Clients that stop reading: detached from their sessions after a bound.

A frozen editor (a link that hangs without closing) must stall no turn
(issue 28). `ReadWatch.watch` follows one connection's `ClientOutput`: once
it has taken nothing of what it was sent for the read timeout — from a stop
on, for the shutdown grace — its sessions let it go (their turns go on, their
updates are kept as for a client that left) and it is told why, behind what
it has not read. It is watched again if it reads again.

It also sets each client's end at shutdown (the host's `ClientEnds`): from a
stop on, a client that does not read gets the shutdown grace, no more.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import trio

from ..acp import models
from ..host import RESPONSE_FLUSH_S
from ..session import SessionManager
from ..session.outlet import detached_notice

if TYPE_CHECKING:
    from ..host import Connection
    from .output import ClientOutput

logger = logging.getLogger(__name__)


class ReadWatch:
    def __init__(self, manager: SessionManager, bound_s: float, grace_s: float) -> None:
        self._manager = manager
        #: The read timeout (0: never).
        self._bound_s = bound_s
        self._grace_s = grace_s
        #: From a stop on, a client that does not read is given up at this time.
        self._deadline = math.inf
        #: The outputs followed, by connection number.
        self._outputs: dict[int, ClientOutput] = {}
        #: Since when each client given up for not reading has not read.
        self._not_reading: dict[int, float] = {}

    def stuck_since(self, connection: Connection) -> float | None:
        """Since when the client has taken nothing of what it was sent (None:
        it takes it, or it is not watched)."""
        output = self._outputs.get(connection.number)
        return output.stuck_since if output is not None else None

    def not_reading_since(self, connection: Connection) -> float | None:
        """When the client was given up for not reading (None: it reads)."""
        return self._not_reading.get(connection.number)

    def stopping(self, connections: Iterable[Connection]) -> None:
        """From now on a client that does not read gets the shutdown grace, no more."""
        self._deadline = trio.current_time() + self._grace_s
        for connection in connections:
            output = self._outputs.get(connection.number)
            if output is not None:
                output.poke()  # its watcher looks at the new deadline

    def end(self, connection: Connection, closed_at: float) -> float:
        """A client that reads gets `RESPONSE_FLUSH_S` at least, one that does
        not the shutdown grace from the stop on; one given up for not reading
        may be reading again, slowly: the rest of the grace, not nothing."""
        if connection.number in self._not_reading:
            return self._deadline
        return max(self._deadline, closed_at + RESPONSE_FLUSH_S)

    async def watch(
        self, connection: Connection, output: ClientOutput, nursery: trio.Nursery
    ) -> None:
        """Follow ``connection``'s ``output`` until cancelled (notices go to ``nursery``)."""
        self._outputs[connection.number] = output
        try:
            await self._follow(connection, output, nursery)
        finally:
            del self._outputs[connection.number]
            self._not_reading.pop(connection.number, None)

    async def _follow(
        self, connection: Connection, output: ClientOutput, nursery: trio.Nursery
    ) -> None:
        number = connection.number
        while True:
            since = output.stuck_since
            if since is None:
                self._not_reading.pop(number, None)
                await output.wait_changed()
                continue
            bound = since + self._bound_s if self._bound_s > 0 else math.inf
            deadline = min(bound, self._deadline)
            if trio.current_time() < deadline:
                with trio.move_on_at(deadline):
                    await output.wait_changed()
                continue
            if number not in self._not_reading:
                self._not_reading[number] = since
                self._give_up(connection, nursery, trio.current_time() - since)
            await output.wait_changed()

    def _give_up(self, connection: Connection, nursery: trio.Nursery, waited_s: float) -> None:
        reason = f"the client did not read what it was sent for {waited_s:.1f} s"
        logger.warning("client %d: %s: detached from its sessions", connection.number, reason)
        for session in self._manager.live():
            if session.outlet.client is connection.sink:
                # let_go: a hand-over stuck on this client is given up too.
                session.outlet.let_go(self._nobody)
                # Queued behind what it has not read: it learns why nothing follows.
                notice = (detached_notice(reason),)
                nursery.start_soon(connection.sink, session.session_id, notice)

    async def _nobody(self, session_id: str, updates: Sequence[models.SessionUpdate]) -> None:
        """Never attached: the closer `let_go` is given when the daemon lets a client go."""
        raise AssertionError("the daemon's own sink is never attached")  # pragma: no cover
