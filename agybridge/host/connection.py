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
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import trio

from .. import agent as agent_layer
from ..acp import models
from ..agent import AcpAgent
from ..agent.wire_v2 import V2Edge, wanted
from ..config import setting_rows
from ..jsonrpc import ErrorCode, MessageContext, Peer, RequestContext, RpcError

if TYPE_CHECKING:
    from ..agent.auth import SignInState
    from ..config import Settings
    from ..session import SessionManager
    from ..session.outlet import ClientSink
    from .catalog import CatalogService

logger = logging.getLogger(__name__)

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
        self._acp_v2 = settings.acp_v2
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
        self._handler = _Handler(self.agent, control, self._speak_v2)
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
        v2 = self._handler.v2
        if v2 is None:
            # Through the layer's face: the encoder is loaded by the first update.
            await agent_layer.send_updates_via(
                self.peer.send_encoded, session_id, updates, extensions=self.agent.notifications
            )
            return

        async def send_v2(lines: bytes) -> None:
            await self.peer.send_encoded(v2.updates(session_id, lines))

        await agent_layer.send_updates_via(
            send_v2, session_id, updates, extensions=self.agent.notifications
        )

    def _speak_v2(self, params: Any) -> V2Edge | None:
        """The ACP v2 edge, if this ``initialize`` asks for it and it is allowed
        (agent/wire_v2.py); None: the connection speaks v1."""
        return V2Edge(self.peer.send_encoded) if wanted(params, self._acp_v2) else None

    async def request(self, method: str, params: Any) -> Any:
        """Ask this client something (a session's question), in its protocol."""
        v2 = self._handler.v2
        if v2 is None:
            return await self.peer.request(method, params)
        return await v2.ask(method, params, self.peer.request)


class _Handler:
    """The host's control methods, then ACP (jsonrpc ``Handler``); each
    prompt is noted while it is served (the daemon's interrupted.py)."""

    def __init__(
        self,
        agent: AcpAgent,
        control: Control | None,
        speak_v2: Callable[[Any], V2Edge | None],
    ) -> None:
        self._agent = agent
        self._control = control
        self._speak_v2 = speak_v2
        self.acp = False
        #: Set by an ``initialize`` that negotiates ACP v2 (agent/wire_v2.py).
        self.v2: V2Edge | None = None

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        if self._control is None or method not in CONTROL_METHODS:
            self.acp = True
            if method == "initialize" and self.v2 is None:
                self.v2 = self._speak_v2(params)
                if self.v2 is not None:
                    # The agent's own log line says it answers 1: the edge answers 2.
                    logger.info("the client speaks ACP v2 (the draft, AGYBRIDGE_ACP_V2=1)")
            if self.v2 is not None:
                translated = self.v2.request_received(method, params, ctx)
                if translated is None:
                    return  # refused by v2 (answered by its serve)
                method, params = translated
            self._agent.request_received(method, params, ctx)

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        v2 = self.v2
        if v2 is not None and (self._control is None or method not in CONTROL_METHODS):
            return await v2.serve(ctx, lambda m, p: self._serve(m, p, ctx))
        return await self._serve(method, params, ctx)

    async def _serve(self, method: str, params: Any, ctx: RequestContext) -> Any:
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
