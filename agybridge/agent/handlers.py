"""The ACP agent: JSON-RPC methods -> sessions, and errors -> JSON-RPC codes.

This is the top of the session stack: the JSON-RPC handler. Every request's
params are checked once, in wire order (``request_received``): unusable text
anywhere is ``-32602`` naming the field, and a session's requests are made
known to it in the order sent (prompts queue FIFO; a request after a cancel
ends the silence that follows a ``cancelled`` answer). Session errors are
translated once, here (style.md §7).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from .. import __version__
from ..acp import codec, models
from ..acp.limits import PromptLimits
from ..jsonrpc import ErrorCode, MessageContext, RequestContext, RpcError
from ..session.config import LaunchSettings
from . import compat
from .advertised import EXTENSION_METHODS, ROLLBACK, STEER, extension_capabilities
from .auth import SignInState, auth_methods, check_method
from .ordering import LifecycleOrder
from .params import check_text, initialize_request, parse, translate_session_errors
from .wirelog import log_initialize

if TYPE_CHECKING:
    from ..session import Session, SessionManager
    from ..session.outlet import ClientSink
    from ..workspace.mutations import MutationLog
    from .session_methods import SessionMethods

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
#: The context of a request that waits for no lifecycle request (stateless: one for all).
_UNORDERED = contextlib.nullcontext()
#: Requests that open or end a session: applied in wire order per session.
LIFECYCLE_METHODS = frozenset({"session/load", "session/resume", "session/close", "session/delete"})
#: Served by `SessionMethods` (session_methods.py), with the extensions.
SESSION_METHODS = (
    "session/new",
    "session/prompt",
    "session/close",
    "session/set_config_option",
    "session/set_mode",
    "session/list",
    "session/load",
    "session/resume",
    "session/delete",
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
        sign_in: SignInState,
        on_sessions_loaded: Callable[[], None] | None = None,
        client_gone: Callable[[], bool] | None = None,
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
        self._catalog_ready = catalog_ready
        self._default_settings = default_settings or LaunchSettings()
        #: An initialize request has arrived (wire order), and has succeeded.
        self._initialize_seen = False
        #: Requests sent before any initialize (wire order): -32600.
        self._too_early: set[int] = set()
        self._initialize_done = trio.Event()
        self._initialized = False
        #: Requests whose params failed the check made once in wire order: the error.
        self._checked: dict[int, RpcError] = {}
        #: Requests for a session not live yet, sent behind its load or resume:
        #: whether ``$/cancel_request`` came for them while they waited.
        self._behind: dict[int, bool] = {}
        #: Those of them that are prompts (or steers) -> their session id: a
        #: ``session/cancel`` sent after them cancels them too.
        self._behind_prompts: dict[int, str] = {}
        self._lifecycle = LifecycleOrder()
        #: Rollback requests in flight -> their session's mutation log, which
        #: holds back the prompts sent after them (``MutationLog.settled``).
        self._rollbacks: dict[int, MutationLog] = {}
        self.client_capabilities = models.ClientCapabilities()
        self._methods: dict[str, Callable[[Any, RequestContext], Any]] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
        }
        for name in (*SESSION_METHODS, *EXTENSION_METHODS):
            self._methods[name] = functools.partial(self._served, name)
        #: Built by the first request that needs sessions (issue 15: initialize
        #: is answered without importing the session machinery).
        self._session_methods: SessionMethods | None = None

    # --- the Handler protocol ------------------------------------------------

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        """In wire order, before the request's task starts."""
        if method == "initialize":
            self._initialize_seen = True
        elif not self._initialize_seen:
            # Refused even if its task runs once a later initialize is done.
            self._too_early.add(ctx.seq)
        if not ctx.no_escapes:  # else nothing to find (every prompt of a plain chat)
            try:
                check_text(params)
            except RpcError as exc:
                self._checked[ctx.seq] = exc
                return
        if not self._initialize_seen or method not in self._methods:
            return
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if not isinstance(session_id, str):
            return  # no session to make it known to
        if method in LIFECYCLE_METHODS:
            self._lifecycle.ticket(session_id, ctx.seq)
        elif self._lifecycle.pending(session_id):
            # Sent right behind a load, resume, close or delete of the session (a
            # client that does not wait for its answer): it arrives once that is
            # done, also when the session is live now (after a close: -32002).
            self._lifecycle.ticket(session_id, ctx.seq)
            self._behind[ctx.seq] = False
            if method in ("session/prompt", STEER):
                # Answered cancelled, as any prompt (else: -32800).
                ctx.on_cancel = functools.partial(self._cancel_behind, ctx.seq)
                self._behind_prompts[ctx.seq] = session_id
            if self._manager.get(session_id) is None:
                self._manager.client_spoke(session_id)
            return
        session = self._manager.get(session_id)
        if session is None:
            self._manager.client_spoke(session_id)
            return
        self._arrive(session, method, ctx)

    def _arrive(self, session: Session, method: str, ctx: RequestContext) -> None:
        """Make a request known to its session, in wire order."""
        if method in ("session/prompt", STEER):
            if method == STEER:
                session.steer_arrived(ctx.seq)  # ahead of the prompts waiting
            else:
                session.prompt_arrived(ctx.seq)  # its place in the FIFO queue
            # $/cancel_request for a prompt cancels its turn and is answered with
            # the cancelled result, also before the prompt's task has started.
            ctx.on_cancel = functools.partial(session.cancel_prompt, ctx.seq)
        else:
            session.client_request(ctx.seq)
            if method == ROLLBACK:
                session.mutations.rollback_arrived()
                self._rollbacks[ctx.seq] = session.mutations

    def _cancel_behind(self, seq: int) -> None:
        if seq in self._behind:
            self._behind[seq] = True

    async def _arrive_behind(self, method: str, session_id: str, ctx: RequestContext) -> bool:
        """Wait for the lifecycle requests sent before this one, then make it
        known to the session (if it is live now); whether it was cancelled meanwhile."""
        try:
            async with self._lifecycle.turn(session_id, ctx.seq):
                pass  # its place is only for waiting: later requests need not wait for it
        finally:
            cancelled = self._behind.pop(ctx.seq)
            self._behind_prompts.pop(ctx.seq, None)
        session = self._manager.get(session_id)
        if session is None:
            return cancelled  # not loaded (its load said why): the request's own error
        self._arrive(session, method, ctx)
        if cancelled:
            session.cancel_prompt(ctx.seq)  # answered cancelled, by its session
        return False

    @contextlib.asynccontextmanager
    async def _lifecycle_turn(self, session_id: str, seq: int) -> AsyncIterator[None]:
        """A load, resume, close or delete runs after this client's earlier
        ones (wire order), then as a whole against other clients' (the shared
        manager's lock: the daemon serves many clients)."""
        async with self._lifecycle.turn(session_id, seq), self._manager.lifecycle(session_id):
            yield

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        handler = self._methods.get(method)
        problem = self._checked.pop(ctx.seq, None)
        too_early = ctx.seq in self._too_early
        if too_early:
            self._too_early.discard(ctx.seq)
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if not isinstance(session_id, str):
            session_id = None
        try:
            async with (
                self._lifecycle_turn(session_id, ctx.seq)
                if session_id is not None and method in LIFECYCLE_METHODS
                else _UNORDERED
            ):
                # First, so that its place is given up whatever happens next.
                if (
                    session_id is not None
                    and ctx.seq in self._behind
                    and await self._arrive_behind(method, session_id, ctx)
                ):
                    cancelled = models.PromptResponse(stop_reason=models.STOP_CANCELLED)
                    return codec.unstructure_prompt_response(cancelled)
                if handler is None:
                    raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method!r}")
                if method != "initialize" and (too_early or not self._initialized):
                    await self._wait_initialized(method, too_early=too_early)
                if problem is not None:
                    raise problem
                return await handler(params, ctx)
        except RpcError as exc:
            if exc.code == ErrorCode.AUTH_REQUIRED and method != "authenticate":
                details = exc.data.get("details") if isinstance(exc.data, dict) else None
                self._sign_in.note_signed_out(str(details or exc.message))
            raise
        finally:
            log = self._rollbacks.pop(ctx.seq, None)
            if log is not None:
                log.rollback_left()
            if session_id is not None and method in ("session/prompt", STEER):
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
                cancel = codec.structure(params, models.SessionIdParams)
            except Exception:
                logger.warning("ignoring malformed session/cancel: %r", params)
                return
            for seq, session_id in self._behind_prompts.items():
                if session_id == cancel.session_id and seq < ctx.seq:
                    self._behind[seq] = True  # answered cancelled once it arrives
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

    # --- methods -----------------------------------------------------------

    async def _initialize(self, params: Any, ctx: RequestContext) -> Any:
        try:
            request = initialize_request(params)
            self.client_capabilities = request.client_capabilities
            self._initialized = True
        finally:
            self._initialize_done.set()
        if request.protocol_version != PROTOCOL_VERSION:
            logger.info(
                "client asked for protocol version %s; answering %s",
                request.protocol_version,
                PROTOCOL_VERSION,
            )
        response = models.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=models.AgentCapabilities(
                load_session=True,
                prompt_capabilities=models.PromptCapabilities(image=True, embedded_context=True),
                mcp_capabilities=models.McpCapabilities(http=True),
                session_capabilities=models.SessionCapabilities(
                    close={}, list={}, resume={}, delete={}, additional_directories={}
                ),
                meta={"agybridge": extension_capabilities()},
            ),
            agent_info=models.Implementation(
                name="agybridge", title="Antigravity (agybridge)", version=__version__
            ),
            auth_methods=auth_methods(terminal=self._client_has_terminal_auth()),
            meta={"bridgeCapabilities": compat.bridge_capabilities(self._manager.deps.catalog())},
        )
        log_initialize(request)
        return codec.unstructure_plain(response)

    def _client_has_terminal_auth(self) -> bool:
        auth = self.client_capabilities.auth or {}
        return auth.get("terminal") is True

    async def _authenticate(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.AuthenticateRequest)
        check_method(request.method_id, terminal=self._client_has_terminal_auth())
        with translate_session_errors():
            await self._sign_in.authenticate()
        return {}

    async def _served(self, method: str, params: Any, ctx: RequestContext) -> Any:
        if self._session_methods is None:
            # Loaded on first use, in one place (issue 15, lazy start-up).
            from .session_methods import SessionMethods  # noqa: PLC0415

            self._session_methods = SessionMethods(
                self,
                self._manager,
                self._client,
                default_settings=self._default_settings,
                limits=self._limits,
                doctor=self._doctor,
                catalog_ready=self._catalog_ready,
                sign_in=self._sign_in,
                client_gone=self._client_gone,
            )
            if self._on_sessions_loaded is not None:
                self._on_sessions_loaded()
            # Later requests go straight to their method (not through here).
            self._methods.update(self._session_methods.methods)
        return await self._session_methods.handle(method, params, ctx)
