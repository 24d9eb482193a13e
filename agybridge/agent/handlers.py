"""The ACP agent: JSON-RPC methods -> sessions, and errors -> JSON-RPC codes.

This is the top of the session stack: the JSON-RPC handler. Each request is
routed by the route table (routes.py: method → params model → handler) and
followed by one `Request` (request.py), made in wire order
(``request_received``): its params' text is checked there (unusable text
anywhere is ``-32602`` naming the field), and a session's requests are made
known to it in the order sent (prompts queue FIFO; a request after a cancel
ends the silence that follows a ``cancelled`` answer). Its task picks the
`Request` up once (``handle_request``) and checks the params against their
model once. Session errors are translated once, here (style.md §7).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from .. import __version__, causes
from ..acp import codec, models
from ..acp.limits import PromptLimits
from ..jsonrpc import ErrorCode, MessageContext, RequestContext, RpcError
from ..session.config import LaunchSettings
from ..session.errors import internal_error
from . import compat
from .advertised import extension_capabilities, wants_notifications
from .auth import SignInState, auth_methods, check_method
from .ordering import LifecycleOrder
from .params import check_text, name_cause, session_rpc_error, translate_session_errors
from .request import Kind, Request
from .routes import NOT_OFFERED, ROUTES
from .wirelog import log_initialize

if TYPE_CHECKING:
    from ..session import Session, SessionManager
    from ..session.outlet import ClientSink
    from .session_methods import SessionMethods

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
#: The context of a request that waits for no lifecycle request (stateless: one for all).
_UNORDERED = contextlib.nullcontext()


def not_offered(method: str) -> RpcError:
    """-32601 for a method the bridge does not serve, saying why when the
    catalogue has a cause for it (``NOT_OFFERED``)."""
    cause_id = NOT_OFFERED.get(method)
    if cause_id is None:
        return RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method!r}")
    why = causes.cause(cause_id).render()
    return RpcError(
        ErrorCode.METHOD_NOT_FOUND,
        f"Method not found: {method!r} ({why})",
        {"_meta": causes.meta(cause_id)},
    )


class AcpAgent:
    """Serves ACP v1 requests (implements the jsonrpc ``Handler`` protocol)."""

    def __init__(
        self,
        manager: SessionManager,
        client: ClientSink,
        *,
        default_settings: LaunchSettings | None = None,
        limits: PromptLimits | None = None,
        doctor: Callable[[], list[str]] | None = None,
        catalog_ready: Callable[[], Awaitable[None]] | None = None,
        offered: Callable[[], Awaitable[tuple[list[str], list[str]]]] | None = None,
        sign_in: SignInState,
        on_sessions_loaded: Callable[[], None] | None = None,
        client_gone: Callable[[], bool] | None = None,
        settings_rows: Callable[[], list[dict[str, object]]] | None = None,
    ) -> None:
        """``on_sessions_loaded`` is called once the session machinery has been
        imported, by the first request that needs it (the bridge freezes the
        heap then, as it did at start-up: cli.py). ``client_gone``: whether the
        client has left for good (the daemon: a load or resume of a departed
        client takes no session from another client)."""
        self._client_gone = client_gone
        self._on_sessions_loaded = on_sessions_loaded
        self._manager = manager
        self._client = client
        self._sign_in = sign_in
        self._limits = limits or PromptLimits()
        self._doctor = doctor or (lambda: ["no diagnostics available"])
        #: The bridge's settings (config.setting_rows); none without a host (tests).
        self._settings_rows = settings_rows or list
        self._catalog_ready = catalog_ready
        self._offered = offered or self._catalog_offers
        self._default_settings = default_settings or LaunchSettings()
        #: An initialize request has arrived (wire order), and has succeeded.
        self._initialize_seen = False
        self._initialize_done = trio.Event()
        self._initialized = False
        #: Requests read (wire order) whose task has not picked them up yet.
        self._arrived: dict[int, Request] = {}
        self._lifecycle = LifecycleOrder()
        self.client_capabilities = models.ClientCapabilities()
        #: The client asked for the ``_agybridge/*`` notifications (``initialize``
        #: ``_meta.agybridge.notifications: true``; docs/extensions.md).
        self.notifications = False
        #: Built by the first request that needs sessions (issue 15: initialize
        #: is answered without importing the session machinery).
        self._sessions: SessionMethods | None = None

    # --- the Handler protocol ------------------------------------------------

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        """In wire order, before the request's task starts."""
        problem = None
        try:
            params = compat.legacy_session_id(method, params)
        except RpcError as exc:
            problem = exc
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        request = Request(
            ctx, ROUTES.get(method), params, session_id if isinstance(session_id, str) else None
        )
        self._arrived[ctx.seq] = request
        if method == "initialize":
            self._initialize_seen = True
        elif not self._initialize_seen:
            # Refused even if its task runs once a later initialize is done.
            request.too_early = True
        if problem is not None:
            request.problem = problem
            return
        if not ctx.no_escapes:  # else nothing to find (every prompt of a plain chat)
            try:
                check_text(params)
            except RpcError as exc:
                request.problem = exc
                return
        if not self._initialize_seen or request.kind is None or request.session_id is None:
            return  # no session to make it known to
        session_id = request.session_id
        if request.kind is Kind.LIFECYCLE:
            self._lifecycle.ticket(session_id, request)
        elif self._lifecycle.pending(session_id):
            # Sent right behind a load, resume, close or delete of the session (a
            # client that does not wait for its answer): it arrives once that is
            # done, also when the session is live now (after a close: -32002).
            self._lifecycle.ticket(session_id, request)
            request.behind = True
            if request.kind.is_turn:
                # Answered cancelled, as any prompt (else: -32800).
                ctx.on_cancel = request.cancel_behind
            if self._manager.get(session_id) is None:
                self._manager.client_spoke(session_id)
            return
        session = self._manager.get(session_id)
        if session is None:
            self._manager.client_spoke(session_id)
            return
        self._arrive(session, request)

    def _arrive(self, session: Session, request: Request) -> None:
        """Make a request known to its session, in wire order."""
        seq = request.seq
        if request.kind is Kind.STEER:
            session.steer_arrived(seq)  # ahead of the prompts waiting
        elif request.kind is Kind.PROMPT:
            session.prompt_arrived(seq)  # its place in the FIFO queue
        else:
            session.client_request(seq)
            if request.kind is Kind.ROLLBACK:
                session.mutations.rollback_arrived()
                request.rollback = session.mutations
            return
        # $/cancel_request for a prompt cancels its turn and is answered with
        # the cancelled result, also before the prompt's task has started.
        request.ctx.on_cancel = functools.partial(session.cancel_prompt, seq)

    async def _arrive_behind(self, request: Request, session_id: str) -> bool:
        """Wait for the lifecycle requests sent before this one, then make it
        known to the session (if it is live now); whether it was cancelled meanwhile."""
        try:
            async with self._lifecycle.turn(session_id, request):
                pass  # its place is only for waiting: later requests need not wait for it
        finally:
            request.behind = False
        session = self._manager.get(session_id)
        if session is None:
            return request.cancelled  # not loaded (its load said why): the request's own error
        self._arrive(session, request)
        if request.cancelled:
            session.cancel_prompt(request.seq)  # answered cancelled, by its session
        return False

    @contextlib.asynccontextmanager
    async def _lifecycle_turn(self, request: Request, session_id: str) -> AsyncIterator[None]:
        """A load, resume, close or delete runs after this client's earlier
        ones (wire order), then as a whole against other clients' (the shared
        manager's lock: the daemon serves many clients)."""
        async with self._lifecycle.turn(session_id, request), self._manager.lifecycle(session_id):
            yield

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        # Made by request_received, which the peer calls for every request first.
        request = self._arrived.pop(ctx.seq)
        route = request.route
        session_id = request.session_id
        try:
            async with (
                self._lifecycle_turn(request, session_id)
                if session_id is not None and request.kind is Kind.LIFECYCLE
                else _UNORDERED
            ):
                # First, so that its place is given up whatever happens next.
                if (
                    session_id is not None
                    and request.behind
                    and await self._arrive_behind(request, session_id)
                ):
                    cancelled = models.PromptResponse(stop_reason=models.STOP_CANCELLED)
                    return codec.unstructure_prompt_response(cancelled)
                if route is None:
                    raise not_offered(method)
                if method != "initialize" and (request.too_early or not self._initialized):
                    await self._wait_initialized(method, too_early=request.too_early)
                try:
                    if request.problem is not None:
                        raise request.problem
                    # request.params: as sent, with the legacy session_id read (compat.py).
                    return await route.serve(self)(route.params(request.params), request)
                finally:
                    if method == "initialize":
                        # Answered (success or error, also for unusable text):
                        # the requests sent after it wait no longer.
                        self._initialize_done.set()
        except RpcError as exc:
            if exc.code == ErrorCode.AUTH_REQUIRED and method != "authenticate":
                details = exc.data.get("details") if isinstance(exc.data, dict) else None
                self._sign_in.note_signed_out(str(details or exc.message))
            name_cause(exc)
            logger.info(
                "%s answered %s, cause %s: %s",
                method, exc.code, causes.cause_of(exc.data), exc.message,
            )  # fmt: skip
            raise
        except Exception as exc:
            # A bug: answered -32603 naming it, with its cause like every error.
            logger.exception("request %r failed", method)
            raise session_rpc_error(internal_error(exc)) from exc
        finally:
            if request.rollback is not None:
                request.rollback.rollback_left()
            if session_id is not None and request.kind is not None and request.kind.is_turn:
                # A prompt answered without a turn must not hold its place.
                session = self._manager.get(session_id)
                if session is not None:
                    session.drop_prompt(ctx.seq)

    async def wait_initialized(self) -> None:
        """Return once an ``initialize`` request has been handled (its answer is
        handed to the peer, success or error)."""
        await self._initialize_done.wait()

    async def _wait_initialized(self, method: str, *, too_early: bool = False) -> None:
        # Request tasks start in no fixed order: a request sent right after
        # initialize (without waiting for its answer) waits for it here.
        # (Not called once initialize succeeded: it would return at once.)
        if not too_early and self._initialize_seen and not self._initialize_done.is_set():
            await self._initialize_done.wait()
        if too_early or not self._initialized:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                "the first ACP request must be initialize"
                + (" (and it failed)" if self._initialize_seen and not too_early else ""),
                {"method": method},
            )

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        if method == "session/cancel" and self._initialized:
            try:
                params = compat.legacy_session_id(method, params)
                cancel = codec.structure(params, models.SessionIdParams)
            except Exception:
                logger.warning("ignoring malformed session/cancel: %r", params)
                return
            for place in self._lifecycle.places(cancel.session_id):
                # A prompt sent before it, still waiting behind a load or resume:
                # answered cancelled once it arrives.
                if (
                    isinstance(place, Request)
                    and place.seq < ctx.seq
                    and place.kind is not None
                    and place.kind.is_turn
                ):
                    place.cancel_behind()
            if self._lifecycle.pending(cancel.session_id):
                # Sent behind a load or resume (maybe of a session another
                # client drives now): it cancels once that is done.
                cancel_later = functools.partial(self._cancel, cancel.session_id, ctx.seq)
                self._lifecycle.then(cancel.session_id, ctx.seq, cancel_later)
                return
            self._cancel(cancel.session_id, ctx.seq)
        else:
            logger.debug("ignoring notification %r", method)

    def _cancel(self, session_id: str, seq: int) -> None:
        """A ``session/cancel`` at wire position ``seq``, from this client."""
        session = self._manager.get(session_id)
        if session is None:
            logger.info("session/cancel for unknown session %r", session_id)
            return
        if session.outlet.client is not self._client:
            # Two clients rule (README "Long-running sessions"): the newest
            # client to open a session drives it; the others' prompts for
            # it are refused, their cancels ignored.
            logger.info(
                "session/cancel for %s from a client not attached to it: ignored", session_id
            )
            return
        session.cancel(seq)

    # --- the agent's own methods (routes.py) ----------------------------------

    async def initialize(self, params: models.InitializeRequest, request: Request) -> Any:
        self.client_capabilities = params.client_capabilities
        self.notifications = wants_notifications(params.meta)
        self._initialized = True
        if params.protocol_version != PROTOCOL_VERSION:
            logger.info(
                "client asked for protocol version %s; answering %s",
                params.protocol_version,
                PROTOCOL_VERSION,
            )
        response = models.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=models.AgentCapabilities(
                load_session=True,
                # Not audio: audio blocks are staged as files (acp/content.py), but
                # agy has no tool that listens to them (README "Not possible with agy").
                prompt_capabilities=models.PromptCapabilities(image=True, embedded_context=True),
                mcp_capabilities=models.McpCapabilities(http=True),
                session_capabilities=models.SessionCapabilities(
                    close={}, list={}, resume={}, delete={}, additional_directories={}
                ),
                meta={"agybridge": extension_capabilities(notifications=self.notifications)},
            ),
            agent_info=models.Implementation(
                name="agybridge", title="Antigravity (agybridge)", version=__version__
            ),
            auth_methods=auth_methods(terminal=self._client_has_terminal_auth()),
            meta={"bridgeCapabilities": compat.bridge_capabilities(*await self._offered())},
        )
        log_initialize(params)
        return codec.unstructure_plain(response)

    async def _catalog_offers(self) -> tuple[list[str], list[str]]:
        """What the sessions' catalog offers (no warm cache to read: tests)."""
        catalog = self._manager.deps.catalog()
        return [m.slug for m in catalog.models], list(catalog.agents)

    def _client_has_terminal_auth(self) -> bool:
        auth = self.client_capabilities.auth or {}
        return auth.get("terminal") is True

    async def settings_options(self, params: dict[str, Any], request: Request) -> Any:
        """``_agybridge/settings/options`` (docs/extensions.md "Settings")."""
        return {"settings": self._settings_rows()}

    async def authenticate(self, params: models.AuthenticateRequest, request: Request) -> Any:
        check_method(params.method_id, terminal=self._client_has_terminal_auth())
        with translate_session_errors():
            await self._sign_in.authenticate()
        return {}

    @property
    def sessions(self) -> SessionMethods:
        """The methods that need sessions: loaded on first use, in one place
        (issue 15, lazy start-up)."""
        if self._sessions is None:
            from .session_methods import SessionMethods  # noqa: PLC0415

            self._sessions = SessionMethods(
                self._manager,
                self._client,
                default_settings=self._default_settings,
                limits=self._limits,
                doctor=self._doctor,
                catalog_ready=self._catalog_ready,
                sign_in=self._sign_in,
                client_capabilities=self._client_capabilities,
                client_gone=self._client_gone,
            )
            if self._on_sessions_loaded is not None:
                self._on_sessions_loaded()
        return self._sessions

    def load_sessions(self) -> None:
        """Load what the first session request needs (the session machinery,
        the update encoders) now: called once ``initialize`` is answered, so an
        editor's first ``session/new`` or ``session/load`` need not wait for it."""
        from .updates import warm_up  # noqa: PLC0415

        _ = self.sessions  # the property loads the session methods
        self._manager.load_sessions()
        warm_up()

    def _client_capabilities(self) -> models.ClientCapabilities:
        return self.client_capabilities
