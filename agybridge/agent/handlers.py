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
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import trio

from .. import __version__
from ..acp import codec, models
from ..acp.content import PromptContentError, PromptLimits
from ..jsonrpc import ErrorCode, MessageContext, RequestContext, RpcError
from ..session import (
    AuthRequiredError,
    InvalidModelError,
    Session,
    SessionError,
    SessionManager,
)
from ..session.commands import BridgeCommand, SkillRequest
from ..session.config import ConfigValueError, LaunchSettings
from ..session.deps import SessionSpec
from ..session.history import replay_updates
from ..session.outlet import ClientSink
from ..session.staging import StagingError
from ..store import AsyncStore, InvalidCursorError
from . import commands, compat, prompting
from .auth import SignInState, auth_methods, check_method
from .extensions import STEER, Extensions
from .ordering import LifecycleOrder
from .params import (
    check_directories,
    check_directory,
    check_text,
    mcp_config,
    normalise,
    on_disconnect_from,
    parse,
    settings_from,
    unknown_session,
)
from .wirelog import log_initialize

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
#: Requests that open or end a session: applied in wire order per session.
LIFECYCLE_METHODS = frozenset({"session/load", "session/resume", "session/close", "session/delete"})


@contextmanager
def _translate_session_errors() -> Iterator[None]:
    """Session failures -> JSON-RPC errors, in one place."""
    try:
        yield
    except AuthRequiredError as exc:
        raise RpcError(ErrorCode.AUTH_REQUIRED, exc.message, exc.data) from None
    except InvalidModelError as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, exc.message, exc.data) from None
    except SessionError as exc:
        raise RpcError(
            ErrorCode.INTERNAL_ERROR, exc.message, {"details": exc.message, **exc.data}
        ) from None


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
    ) -> None:
        self._manager = manager
        self._client = client
        self._sign_in = sign_in
        self._limits = limits or PromptLimits()
        self._doctor = doctor or (lambda: ["no diagnostics available"])
        self._catalog_ready = catalog_ready
        self._default_settings = default_settings or LaunchSettings()
        #: An initialize request has arrived (wire order), and has succeeded.
        self._initialize_seen = False
        self._initialize_done = trio.Event()
        self._initialized = False
        #: Each request's params, checked once in wire order (or the error).
        self._checked: dict[int, RpcError | None] = {}
        self._lifecycle = LifecycleOrder()
        self.client_capabilities = models.ClientCapabilities()
        self._methods: dict[str, Callable[[Any, RequestContext], Any]] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self._new_session,
            "session/prompt": self._prompt,
            "session/close": self._close_session,
            "session/set_config_option": self._set_config_option,
            "session/set_mode": self._set_mode,
            "session/list": self._list_sessions,
            "session/load": self._load_session,
            "session/resume": self._resume_session,
            "session/delete": self._delete_session,
        }
        self._extensions = Extensions(manager)
        for name in self._extensions.methods:
            self._methods[name] = functools.partial(self._extension, name)
        # Steer runs a turn like session/prompt: it is served here.
        self._methods[STEER] = self._steer
        self._extensions.served_elsewhere[STEER] = 1

    # --- the Handler protocol ------------------------------------------------

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        """In wire order, before the request's task starts."""
        if method == "initialize":
            self._initialize_seen = True
        try:
            check_text(params)
        except RpcError as exc:
            self._checked[ctx.seq] = exc
            return
        self._checked[ctx.seq] = None
        if not self._initialize_seen or method not in self._methods:
            return
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if method in LIFECYCLE_METHODS and isinstance(session_id, str):
            self._lifecycle.ticket(session_id, ctx.seq)
        session = self._named_session(params)
        if session is None:
            if isinstance(session_id, str):
                self._manager.client_spoke(session_id)
            return
        if method == "session/prompt":
            session.prompt_arrived(ctx.seq)  # its place in the FIFO queue
        elif method == STEER:
            session.steer_arrived(ctx.seq)  # ahead of the prompts waiting
        else:
            session.client_request(ctx.seq)

    def _named_session(self, params: Any) -> Session | None:
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        return self._manager.get(session_id) if isinstance(session_id, str) else None

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        handler = self._methods.get(method)
        problem = self._checked.pop(ctx.seq, None)
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        ordered = method in LIFECYCLE_METHODS and isinstance(session_id, str)
        try:
            async with (
                self._lifecycle.turn(session_id, ctx.seq)
                if ordered and isinstance(session_id, str)
                else contextlib.nullcontext()
            ):
                if handler is None:
                    raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method!r}")
                if method != "initialize":
                    await self._wait_initialized(method)
                if problem is not None:
                    raise problem
                return await handler(params, ctx)
        except RpcError as exc:
            if exc.code == ErrorCode.AUTH_REQUIRED and method != "authenticate":
                details = exc.data.get("details") if isinstance(exc.data, dict) else None
                self._sign_in.note_signed_out(str(details or exc.message))
            raise
        finally:
            if method in ("session/prompt", STEER):
                # A prompt answered without a turn must not hold its place.
                session = self._named_session(params)
                if session is not None:
                    session.drop_prompt(ctx.seq)

    async def _wait_initialized(self, method: str) -> None:
        # Request tasks start in no fixed order: a request sent right after
        # initialize (without waiting for its answer) waits for it here.
        if self._initialize_seen:
            await self._initialize_done.wait()
        if not self._initialized:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                "the first ACP request must be initialize"
                + (" (and it failed)" if self._initialize_seen else ""),
                {"method": method},
            )

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        if method == "session/cancel" and self._initialized:
            try:
                cancel = codec.structure(params, models.SessionIdParams)
            except Exception:
                logger.warning("ignoring malformed session/cancel: %r", params)
                return
            session = self._manager.get(cancel.session_id)
            if session is None:
                logger.info("session/cancel for unknown session %r", cancel.session_id)
                return
            session.cancel(ctx.seq)
        else:
            logger.debug("ignoring notification %r", method)

    # --- methods -----------------------------------------------------------

    async def _initialize(self, params: Any, ctx: RequestContext) -> Any:
        try:
            request = parse(params, models.InitializeRequest)
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
                meta={"agybridge": self._extensions.capabilities()},
            ),
            agent_info=models.Implementation(
                name="agybridge", title="Antigravity (agybridge)", version=__version__
            ),
            auth_methods=auth_methods(terminal=self._client_has_terminal_auth()),
            meta={"bridgeCapabilities": compat.bridge_capabilities(self._manager.deps.catalog())},
        )
        log_initialize(request)
        return codec.unstructure(response)

    def _client_has_terminal_auth(self) -> bool:
        auth = self.client_capabilities.auth or {}
        return auth.get("terminal") is True

    async def _authenticate(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.AuthenticateRequest)
        check_method(request.method_id, terminal=self._client_has_terminal_auth())
        with _translate_session_errors():
            await self._sign_in.authenticate()
        return {}

    async def _extension(self, method: str, params: Any, ctx: RequestContext) -> Any:
        return await self._extensions.handle(method, params)

    async def _new_session(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.NewSessionRequest)
        spec = SessionSpec(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=check_directory(request.cwd, "cwd"),
            additional_dirs=check_directories(request.additional_directories),
            settings=settings_from(self._default_settings, compat.launch_meta(params)),
            terminals=self._client_wants_terminals(),
            mcp_config=mcp_config(request.mcp_servers),
            on_disconnect=on_disconnect_from(request.meta),
            conversation_id=compat.conversation_id(params),
        )
        if self._catalog_ready is not None:
            # A cached catalog is read in milliseconds: offer it now rather
            # than push it right after (a warm bridge then pushes nothing).
            await self._catalog_ready()
        with _translate_session_errors():
            await self._sign_in.require()
            session = await self._manager.create(spec, self._client)
        response = models.NewSessionResponse(
            session_id=session.session_id,
            modes=session.modes(),
            config_options=session.config_options(),
            meta=_conversation_meta(session),
        )
        session.options_seen()
        # Posted without a checkpoint before the peer queues this response, so
        # the commands are written after it (Zed drops updates for sessions it
        # has not seen yet).
        session.announce("commands")
        return codec.unstructure(response)

    async def _list_sessions(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.ListSessionsRequest)
        cwd = check_directory(request.cwd, "cwd", must_exist=False) if request.cwd else None
        dirs = None
        if request.additional_directories is not None:
            dirs = tuple(normalise(d) for d in request.additional_directories)
        store = self._require_store()
        try:
            records, cursor = await store.list_sessions(
                cwd=cwd, additional_dirs=dirs, cursor=request.cursor
            )
        except InvalidCursorError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc), {"cursor": request.cursor}) from None
        return codec.unstructure(
            models.ListSessionsResponse(
                sessions=[
                    models.SessionInfo(
                        session_id=r.session_id,
                        cwd=r.cwd,
                        additional_directories=list(r.additional_dirs),
                        title=r.title,
                        updated_at=r.updated_at,
                        meta={"conversationId": r.conversation_id} if r.conversation_id else None,
                    )
                    for r in records
                ],
                next_cursor=cursor,
            )
        )

    async def _load_session(self, params: Any, ctx: RequestContext) -> Any:
        return await self._open_session(params, replay=True)

    async def _resume_session(self, params: Any, ctx: RequestContext) -> Any:
        return await self._open_session(params, replay=False)

    async def _open_session(self, params: Any, *, replay: bool) -> Any:
        """session/load (replays the display journal first) and session/resume.

        Everything they send precedes their response. Two opens of one stored
        session at once share one session (the second waits for the first).
        """
        request = parse(params, models.OpenSessionRequest)
        cwd = check_directory(request.cwd, "cwd")
        dirs = check_directories(request.additional_directories)
        servers = mcp_config(request.mcp_servers or [])
        on_disconnect = on_disconnect_from(request.meta)
        store = self._require_store()
        live = self._manager.get(request.session_id)
        record = await store.get_session(request.session_id)
        if live is None and record is None:
            raise unknown_session(request.session_id)
        owner = live.cwd if live is not None else record.cwd if record else cwd
        if normalise(owner) != cwd:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"session {request.session_id!r} belongs to {owner!r}, not {cwd!r}: "
                "open it from that directory",
                {"sessionId": request.session_id, "sessionCwd": owner, "cwd": cwd},
            )
        journal = await store.journal(request.session_id) if record is not None else []
        if self._catalog_ready is not None:
            await self._catalog_ready()

        async def spec_from_store() -> SessionSpec:
            if record is None:  # it was live, and closed while we looked
                raise unknown_session(request.session_id)
            return SessionSpec(
                session_id=record.session_id,
                cwd=cwd,
                additional_dirs=dirs,
                settings=LaunchSettings.from_store(record.launch),
                terminals=self._client_wants_terminals(),
                conversation_id=record.conversation_id,
                title=record.title,
                next_turn=max((e.turn for e in journal), default=-1) + 1,
                created_at=record.created_at,
                mcp_config=servers,
                plan=tuple(record.meta.get("plan") or ()),
            )

        with _translate_session_errors():
            session, _ = await self._manager.open(request.session_id, spec_from_store, self._client)
        if on_disconnect is not None:
            session.on_disconnect = on_disconnect

        async def history() -> list[models.SessionUpdate]:
            # Read again under the outlet's lock: a turn journalled meanwhile
            # is then in it, not lost between the journal and the live turn.
            updates = replay_updates(await store.journal(request.session_id))
            if session.plan:  # the last plan, as agy-acp-map re-sends it
                updates.append(codec.structure({"entries": list(session.plan)}, models.Plan))
            return updates

        # The client registered the session before sending load: the history
        # (then a running turn so far) may (must) arrive before the response.
        await session.outlet.attach_replaying(self._client, history if replay else None)
        await session.announce_now()
        await session.barrier()
        response = models.SessionStateResponse(
            modes=session.modes(),
            config_options=session.config_options(),
            meta=_conversation_meta(session),
        )
        return codec.unstructure(response)

    async def _delete_session(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.SessionIdParams)
        await self._manager.close(request.session_id)
        await self._require_store().delete_session(request.session_id)
        return {}  # deleting what does not exist is not an error (idempotent)

    def _require_store(self) -> AsyncStore:
        store = self._manager.store
        if store is None:
            raise RpcError(ErrorCode.INTERNAL_ERROR, "the session store is not available")
        return store

    async def _set_config_option(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.SetConfigOptionRequest)
        session = self._session(request.session_id)
        try:
            await session.set_config_option(request.config_id, request.value)
        except ConfigValueError as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                str(exc),
                {"configId": request.config_id, "value": request.value},
            ) from None
        session.options_seen()
        return codec.unstructure(
            models.SetConfigOptionResponse(config_options=session.config_options())
        )

    async def _set_mode(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.SetModeRequest)
        session = self._session(request.session_id)
        try:
            await session.set_mode(request.mode_id)
        except ConfigValueError as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS, str(exc), {"modeId": request.mode_id}
            ) from None
        return {}

    async def _prompt(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.PromptRequest)
        session = self._session(request.session_id)
        if session.outlet.client is not self._client:
            # Two clients rule (README "Long-running sessions"): the newest
            # client to open a session drives it.
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"session {request.session_id!r} is not attached to this client (another "
                "client opened it, or it was detached): session/load or session/resume it "
                "here to take it over",
                {"sessionId": request.session_id},
            )
        command = prompting.command_of(request.prompt, session)
        if isinstance(command, BridgeCommand):
            return await self._answer_command(session, command)
        try:
            prepared = await prompting.prepare(
                session,
                request.prompt,
                ctx.seq,
                self._limits,
                command if isinstance(command, SkillRequest) else None,
            )
        except PromptContentError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc), exc.data) from None
        except StagingError as exc:
            raise RpcError(ErrorCode.INTERNAL_ERROR, str(exc), {"details": str(exc)}) from None
        # $/cancel_request for a prompt means "cancel this turn", answered with
        # the normal cancelled result (ACP cancellation.mdx).
        ctx.on_cancel = lambda: session.cancel_prompt(ctx.seq)
        try:
            with _translate_session_errors():
                result = await session.prompt(
                    ctx.seq, _with_rollback_note(session, prepared.text), prepared.display_text
                )
        finally:
            if prepared.converted.files:
                await prompting.discard(session, ctx.seq)
        meta = dict(result.meta) or None
        return codec.unstructure(models.PromptResponse(stop_reason=result.stop_reason, meta=meta))

    async def _steer(self, params: Any, ctx: RequestContext) -> Any:
        """``_agybridge/session/steer {sessionId, text}``: a text prompt that
        goes ahead of the prompts waiting; answered like session/prompt when
        its turn ends (docs/extensions.md "Steering")."""
        if not isinstance(params, dict) or not isinstance(params.get("text"), str):
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                "Invalid params: text must be a string",
                {"path": "$.text"},
            )
        prompt = {
            "sessionId": params.get("sessionId"),
            "prompt": [{"type": "text", "text": params["text"]}],
        }
        return await self._prompt(prompt, ctx)

    async def _answer_command(self, session: Session, command: BridgeCommand) -> Any:
        """Answer a bridge command with a message, without an agy turn."""
        reply = await commands.run_command(session, command, self._doctor)
        chunk = models.AgentMessageChunk(
            content=models.TextContent(text=reply), message_id=f"cmd_{uuid.uuid4().hex}"
        )
        await self._client(session.session_id, (chunk,))
        return codec.unstructure(models.PromptResponse(stop_reason=models.STOP_END_TURN))

    async def _close_session(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.SessionIdParams)
        if not await self._manager.close(request.session_id):
            raise unknown_session(request.session_id)
        return {}

    def _client_wants_terminals(self) -> bool:
        """Zed's display-only terminal extension (acp/brief.md §8)."""
        meta = self.client_capabilities.meta or {}
        return meta.get("terminal_output") is True

    def _session(self, session_id: str) -> Session:
        session = self._manager.get(session_id)
        if session is None:
            raise unknown_session(session_id)
        return session


def _with_rollback_note(session: Session, text: str) -> str:
    """What agy reads: the user's text after a note on files rolled back
    since its last turn (the journal keeps the user's text alone)."""
    note = session.mutations.take_agy_note()
    return note + text if note else text


def _conversation_meta(session: Session) -> dict[str, Any] | None:
    """agy-acp-map's ``_meta.conversationId`` on new/load/resume (when known)."""
    known = session.conversation.id
    return {"conversationId": known} if known else None
