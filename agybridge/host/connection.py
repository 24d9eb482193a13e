"""One client of a bridge process: its JSON-RPC peer, its ACP agent, its sink.

The stdio bridge has one (over stdin/stdout), the daemon one per socket
client. ACP requests go to the connection's own
:class:`~agybridge.agent.AcpAgent` (so ``initialize`` and client capabilities
are per client); a host's own methods (the daemon's ``_agybridge/status`` and
``stop``, :class:`Control`) are answered here without ``initialize``, so
``agybridge status`` and ``stop`` are one request each.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import trio

from .. import agent as agent_layer
from ..acp import models
from ..agent import AcpAgent
from ..config import setting_rows
from ..jsonrpc import ErrorCode, MessageContext, Peer, RequestContext, RpcError

if TYPE_CHECKING:
    from ..agent.auth import SignInState
    from ..config import Settings
    from ..session import SessionManager
    from ..session.outlet import ClientSink
    from .catalog import CatalogService

#: A host's own methods; every other ``_agybridge/...`` name is one of the
#: ACP extensions the agent serves (docs/extensions.md).
CONTROL_METHODS = frozenset({"_agybridge/status", "_agybridge/stop"})


class Shared(Protocol):
    """What a connection uses of its host (host.py's ``Host``): what every
    client of the bridge process shares."""

    settings: Settings
    manager: SessionManager
    catalog: CatalogService
    sign_in: SignInState

    def doctor(self) -> list[str]: ...


class Control(Protocol):
    """A host's own methods (the daemon's) and its note of each prompt served."""

    def status(self) -> dict[str, Any]: ...

    def stop(self, budget_s: float | None) -> dict[str, Any]: ...

    def prompt_started(self, params: Any) -> str | None: ...

    def prompt_ended(self, note: str | None) -> None: ...


class Connection:
    """A connected client (see the module docstring)."""

    def __init__(
        self,
        number: int,
        receive_stream: trio.abc.ReceiveStream,
        send_stream: trio.abc.SendStream,
        host: Shared,
        *,
        seqs: Iterator[int],
        name: str,
        control: Control | None = None,
        hung_up: Callable[[], bool] | None = None,
        on_sessions_loaded: Callable[[], None] | None = None,
    ) -> None:
        """``hung_up``: whether the client closed both directions (a client
        that only closed its sending side still reads its answers);
        ``on_sessions_loaded``: see :class:`~agybridge.agent.AcpAgent`."""
        self.number = number
        #: How the log names it ("client 3").
        self.name = name
        self._hung_up = hung_up
        # Stored once: outlets are matched to their client by identity, and
        # each access to a bound method makes a new object.
        self.sink: ClientSink = self._send_updates
        settings = host.settings
        self.agent = AcpAgent(
            host.manager,
            self.sink,
            default_settings=settings.launch,
            limits=settings.prompt_limits,
            doctor=host.doctor,
            catalog_ready=host.catalog.loaded.wait,
            offered=host.catalog.offered,
            sign_in=host.sign_in,
            client_gone=self.gone,
            on_sessions_loaded=on_sessions_loaded,
            settings_rows=functools.partial(setting_rows, settings),
        )
        self._handler = _Handler(self.agent, control)
        self.peer = Peer(
            receive_stream,
            send_stream,
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
        if self.peer.send_broken:
            return True
        return self.peer.receive_closed and self._hung_up is not None and self._hung_up()

    async def _send_updates(self, session_id: str, updates: Sequence[models.SessionUpdate]) -> None:
        """This client's ``session/update`` sink (what outlets attach)."""
        # Through the layer's face: the encoder is loaded by the first update.
        await agent_layer.send_updates_via(
            self.peer.send_encoded, session_id, updates, extensions=self.agent.notifications
        )


class _Handler:
    """The host's control methods, then ACP (jsonrpc ``Handler``); each
    prompt is noted while it is served (the daemon's interrupted.py)."""

    def __init__(self, agent: AcpAgent, control: Control | None) -> None:
        self._agent = agent
        self._control = control
        self.acp = False

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        if self._control is None or method not in CONTROL_METHODS:
            self.acp = True
            self._agent.request_received(method, params, ctx)

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        control = self._control
        if control is None:
            return await self._agent.handle_request(method, params, ctx)
        if method == "_agybridge/status":
            return control.status()
        if method == "_agybridge/stop":
            return control.stop(_stop_budget(params))
        if method != "session/prompt":
            return await self._agent.handle_request(method, params, ctx)
        note = control.prompt_started(params)
        try:
            return await self._agent.handle_request(method, params, ctx)
        finally:
            control.prompt_ended(note)

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        self.acp = True
        await self._agent.handle_notification(method, params, ctx)


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
