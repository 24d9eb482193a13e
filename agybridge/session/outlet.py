"""Where a session's updates go: the client attached to it, if any.

A session never knows its client. It is given an :class:`Outlet`, and the
layer that owns connections attaches a client's sink to it (and may detach
it, or attach another one later), so a session can outlive the connection
that created it: the workstation supervisor keeps sessions running while
editors come and go.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ..acp import models

logger = logging.getLogger(__name__)

#: Sends one ``session/update`` to a client: (session id, update).
ClientSink = Callable[[str, models.SessionUpdate], Awaitable[None]]


class Outlet:
    """One session's way out; updates sent while detached are dropped
    (the display journal keeps what a later client is shown)."""

    def __init__(self, session_id: str, client: ClientSink | None = None) -> None:
        self.session_id = session_id
        self._client = client
        self.dropped = 0

    @property
    def attached(self) -> bool:
        return self._client is not None

    def attach(self, client: ClientSink) -> None:
        self._client = client

    def detach(self) -> None:
        self._client = None

    async def send(self, update: models.SessionUpdate) -> None:
        client = self._client
        if client is None:
            self.dropped += 1
            return
        await client(self.session_id, update)
