"""Where a session's updates go: the client attached to it, if any.

A session never knows its client. It is given an :class:`Outlet`, and the
layer that owns connections attaches a client's sink to it (and may detach
it, or attach another one later), so a session can outlive the connection
that created it: the workstation supervisor keeps sessions running while
editors come and go.

While the session loop maps a batch of agy events it *holds* the outlet: the
updates collect here and go to the client as one write when the batch is done
(or ``HOLD_LIMIT`` accumulate, or the loop is about to act on the turn, e.g.
answer the prompt), so a burst of text deltas costs one hand-over, in order.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

from ..acp import models

logger = logging.getLogger(__name__)

#: Sends ``session/update``s to a client, in order: (session id, updates).
ClientSink = Callable[[str, Sequence[models.SessionUpdate]], Awaitable[None]]

#: Held updates are handed over at the latest when this many are waiting.
HOLD_LIMIT = 256


class Outlet:
    """One session's way out; updates sent while detached are dropped
    (the display journal keeps what a later client is shown)."""

    def __init__(self, session_id: str, client: ClientSink | None = None) -> None:
        self.session_id = session_id
        self._client = client
        self.dropped = 0
        self._held: list[models.SessionUpdate] | None = None

    @property
    def attached(self) -> bool:
        return self._client is not None

    def attach(self, client: ClientSink) -> None:
        self._client = client

    def detach(self) -> None:
        self._client = None

    async def send(self, update: models.SessionUpdate) -> None:
        held = self._held
        if held is None:
            await self._deliver([update])
            return
        held.append(update)
        if len(held) >= HOLD_LIMIT:
            await self.flush()

    async def flush(self) -> None:
        """Hand over what is held (and go on holding)."""
        held = self._held
        if held:
            self._held = []
            await self._deliver(held)

    @asynccontextmanager
    async def holding(self) -> AsyncIterator[None]:
        """Hold updates inside the block; they are handed over when it ends."""
        self._held = []
        try:
            yield
        finally:
            try:
                await self.flush()
            finally:
                self._held = None

    @asynccontextmanager
    async def unheld(self) -> AsyncIterator[None]:
        """Hand over what is held, then send straight through inside the block
        (whatever happens in it is ordered after the updates before it)."""
        held = self._held
        if held is None:
            yield
            return
        await self.flush()
        self._held = None
        try:
            yield
        finally:
            self._held = []

    async def _deliver(self, updates: list[models.SessionUpdate]) -> None:
        client = self._client
        if client is None:
            self.dropped += len(updates)
            return
        await client(self.session_id, updates)
