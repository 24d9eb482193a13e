"""One client of the daemon: its JSON-RPC peer, its ACP agent, its sink.

ACP requests go to the connection's own :class:`~agybridge.agent.AcpAgent`
(so ``initialize`` and client capabilities are per client); the daemon's own
``_agybridge/...`` methods are answered here without ``initialize``, so
``agybridge status`` and ``stop`` are one request each.
"""

from __future__ import annotations

import logging
import select
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..acp import models
from ..agent import AcpAgent, send_updates_via
from ..jsonrpc import ErrorCode, MessageContext, Peer, RequestContext, RpcError
from ..session.outlet import ClientSink
from .output import ClientOutput

if TYPE_CHECKING:
    from ..agent.auth import SignInState
    from ..config import Settings
    from ..session import SessionManager
    from ..session.catalog import CatalogService
    from .interrupted import PromptNotes


class Daemon(Protocol):
    """What a connection uses of the daemon that accepted it (``supervisor.py``'s
    ``Daemon``): what every client shares, and the daemon's control methods."""

    settings: Settings
    manager: SessionManager
    catalog: CatalogService
    sign_in: SignInState
    prompt_notes: PromptNotes | None

    def status(self) -> dict[str, Any]: ...

    def stop(self, budget_s: float | None) -> dict[str, Any]: ...

logger = logging.getLogger(__name__)

#: The daemon's own methods; every other ``_agybridge/...`` name is one of the
#: ACP extensions the agent serves (docs/extensions.md).
CONTROL_METHODS = frozenset({"_agybridge/status", "_agybridge/stop"})


class Connection:
    """A connected client (see the module docstring)."""

    def __init__(
        self,
        number: int,
        stream: trio.SocketStream,
        daemon: Daemon,
        *,
        doctor: Callable[[], list[str]],
        seqs: Iterator[int],
    ) -> None:
        self.number = number
        self._daemon = daemon
        # Stored once: outlets are matched to their client by identity, and
        # each access to a bound method makes a new object.
        self.sink: ClientSink = self._send_updates
        settings = daemon.settings
        self.agent = AcpAgent(
            daemon.manager,
            self.sink,
            default_settings=settings.launch,
            limits=settings.prompt_limits,
            doctor=doctor,
            catalog_ready=daemon.catalog.loaded.wait,
            sign_in=daemon.sign_in,
            client_gone=self.gone,
        )
        self._socket = stream.socket
        #: Knows since when the client has not read what it was sent.
        self.output = ClientOutput(stream.socket)
        #: When the daemon detached it for not reading (None: it reads).
        self.not_reading_since: float | None = None
        self._handler = _Handler(self.agent, daemon, daemon.prompt_notes)
        self.peer = Peer(
            stream,
            self.output,
            self._handler,
            max_line_bytes=settings.max_line_bytes,
            seqs=seqs,
        )

    @property
    def acp_client(self) -> bool:
        """It sent ACP (not only ``status`` or ``stop``): a client ``status`` counts."""
        return self._handler.acp

    def gone(self) -> bool:
        """The client has left for good: writing to it failed, or it closed
        the connection both ways (a client that only closed its sending side,
        as ``attach`` does at stdin EOF, still reads its answers)."""
        return self.peer.send_broken or (self.peer.receive_closed and _hung_up(self._socket))

    async def _send_updates(self, session_id: str, updates: Sequence[models.SessionUpdate]) -> None:
        """This client's ``session/update`` sink (what outlets attach)."""
        await send_updates_via(self.peer.send_encoded, session_id, updates)


class _Handler:
    """The daemon's control methods, then ACP (jsonrpc ``Handler``); each
    prompt is noted while it is served (interrupted.py)."""

    def __init__(self, agent: AcpAgent, daemon: Daemon, notes: PromptNotes | None) -> None:
        self._agent = agent
        self._daemon = daemon
        self._notes = notes
        self.acp = False

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        if method not in CONTROL_METHODS:
            self.acp = True
            self._agent.request_received(method, params, ctx)

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        if method == "_agybridge/status":
            return self._daemon.status()
        if method == "_agybridge/stop":
            return self._daemon.stop(_stop_budget(params))
        if method != "session/prompt" or self._notes is None:
            return await self._agent.handle_request(method, params, ctx)
        note = self._notes.started(params)
        try:
            return await self._agent.handle_request(method, params, ctx)
        finally:
            self._notes.ended(note)

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        self.acp = True
        await self._agent.handle_notification(method, params, ctx)


def _hung_up(sock: socket.socket | trio.socket.SocketType) -> bool:
    """The other end closed both directions (Linux reports POLLHUP for a Unix
    socket only then, not for a half-close; elsewhere: never said)."""
    if not sys.platform.startswith("linux"):
        return False
    poller = select.poll()
    try:
        poller.register(sock.fileno(), select.POLLIN)
        events = poller.poll(0)
    except (OSError, ValueError):  # closed meanwhile: gone
        return True
    return any(mask & select.POLLHUP for _fd, mask in events)


def _stop_budget(params: Any) -> float | None:
    value = params.get("timeoutS") if isinstance(params, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"timeoutS must be a number of seconds, at least 0, not {value!r}",
            {"timeoutS": value},
        )
    return float(value)
