"""Clients that stop reading: detached from their sessions after a bound.

A frozen editor (a link that hangs without closing) must stall no turn
(issue 28). `ReadWatch.watch` follows one connection's `ClientOutput`: once
it has taken nothing of what it was sent for the read timeout — from a stop
on, for the shutdown grace — its sessions let it go (their turns go on, their
updates are kept as for a client that left) and it is told why, behind what
it has not read. It is watched again if it reads again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import trio

from ..acp import models
from ..session import SessionManager
from ..session.outlet import detached_notice

if TYPE_CHECKING:
    from .connection import Connection

logger = logging.getLogger(__name__)


class ReadWatch:
    def __init__(self, manager: SessionManager, bound_s: float) -> None:
        self._manager = manager
        #: The read timeout (0: never).
        self._bound_s = bound_s
        #: From a stop on, a client that does not read is given up at this time.
        self.deadline = math.inf

    def shutting_down(self, grace_s: float, connections: Iterable[Connection]) -> None:
        """From now on a client that does not read gets ``grace_s``, no more."""
        self.deadline = trio.current_time() + grace_s
        for connection in connections:
            connection.output.poke()  # their watchers look at the new deadline

    async def watch(self, connection: Connection, nursery: trio.Nursery) -> None:
        """Follow ``connection`` until cancelled (notices go to ``nursery``)."""
        output = connection.output
        while True:
            since = output.stuck_since
            if since is None:
                connection.not_reading_since = None
                await output.wait_changed()
                continue
            bound = since + self._bound_s if self._bound_s > 0 else math.inf
            deadline = min(bound, self.deadline)
            if trio.current_time() < deadline:
                with trio.move_on_at(deadline):
                    await output.wait_changed()
                continue
            if connection.not_reading_since is None:
                connection.not_reading_since = since
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
