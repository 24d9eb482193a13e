"""The ACP agent: JSON-RPC methods -> sessions, and errors -> JSON-RPC codes.

This is the top of the stack: it is the JSON-RPC handler, validates every
request with the ACP codec (a bad field is ``-32602`` with the field's path in
``data``), and translates session errors once, here (style.md §7).

Capabilities advertised are exactly what works: text and ``resource_link``
prompts, ``session/close``. Nothing else is claimed.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import trio

from . import __version__, prompting
from .acp import codec, models
from .acp.content import PromptContentError, PromptLimits
from .jsonrpc import ErrorCode, MessageContext, RequestContext, RpcError
from .session import (
    AgyExitedError,
    AgyStartError,
    AuthRequiredError,
    InvalidModelError,
    Session,
    SessionError,
    SessionManager,
)
from .session.commands import BridgeCommand, SkillRequest
from .session.config import (
    ConfigValueError,
    LaunchSettings,
    settings_from_meta,
)
from .session.history import replay_updates
from .session.mcp import McpServerError, build_mcp_config
from .session.staging import StagingError
from .store import AsyncStore, InvalidCursorError

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
T = TypeVar("T")


def _parse(params: Any, cls: type[T]) -> T:
    try:
        return codec.structure(params if params is not None else {}, cls)
    except Exception as exc:
        problems = codec.describe_error(exc)
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"Invalid params: {problems[0]}" if problems else "Invalid params",
            {"problems": problems},
        ) from None


@contextmanager
def _translate_session_errors() -> Iterator[None]:
    """Session failures -> JSON-RPC errors, in one place."""
    try:
        yield
    except AuthRequiredError as exc:
        raise RpcError(ErrorCode.AUTH_REQUIRED, exc.message, exc.data) from None
    except InvalidModelError as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, exc.message, exc.data) from None
    except (AgyStartError, AgyExitedError, SessionError) as exc:
        raise RpcError(
            ErrorCode.INTERNAL_ERROR, exc.message, {"details": exc.message, **exc.data}
        ) from None


class AcpAgent:
    """Serves ACP v1 requests (implements the jsonrpc ``Handler`` protocol)."""

    def __init__(
        self,
        manager: SessionManager,
        default_settings: LaunchSettings | None = None,
        notify_update: Callable[[str, models.SessionUpdate], Awaitable[None]] | None = None,
        limits: PromptLimits | None = None,
        doctor: Callable[[], list[str]] | None = None,
    ) -> None:
        self._manager = manager
        self._limits = limits or PromptLimits()
        self._doctor = doctor or (lambda: ["no diagnostics available"])
        self._notify_update = notify_update or _no_updates
        self._default_settings = default_settings or LaunchSettings()
        #: An initialize request has arrived (wire order), and has succeeded.
        self._initialize_seen = False
        self._initialize_done = trio.Event()
        self._initialized = False
        self.client_capabilities = models.ClientCapabilities()
        self._methods: dict[str, Callable[[Any, RequestContext], Any]] = {
            "initialize": self._initialize,
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

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        handler = self._methods.get(method)
        if handler is None:
            raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method!r}")
        if method != "initialize":
            await self._wait_initialized(method)
        return await handler(params, ctx)

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

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        """Called in wire order before the request's task starts: reserve a
        prompt's place in its session's queue (FIFO per session)."""
        if method == "initialize":
            self._initialize_seen = True
        if method == "session/prompt" and self._initialize_seen:
            session = self._queued_session(params)
            if session is not None:
                session.enqueue_prompt(ctx.seq)

    def _queued_session(self, params: Any) -> Session | None:
        """The live session a prompt's params name, if any (else the handler
        answers with the error)."""
        try:
            request = codec.structure(params, models.SessionIdParams)
        except Exception:
            return None
        return self._manager.get(request.session_id)

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
            request = _parse(params, models.InitializeRequest)
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
            ),
            agent_info=models.Implementation(
                name="agybridge", title="Antigravity (agybridge)", version=__version__
            ),
            auth_methods=[],
        )
        return codec.unstructure(response)

    async def _new_session(self, params: Any, ctx: RequestContext) -> Any:
        request = _parse(params, models.NewSessionRequest)
        cwd = _check_directory(request.cwd, "cwd")
        dirs = _check_directories(request.additional_directories)
        mcp_config = _mcp_config(request.mcp_servers)
        settings = _settings_from_meta(self._default_settings, request.meta)
        with _translate_session_errors():
            session = await self._manager.create(
                cwd=cwd,
                additional_dirs=dirs,
                settings=settings,
                terminals=self._client_wants_terminals(),
                mcp_config=mcp_config,
            )
        response = models.NewSessionResponse(
            session_id=session.session_id,
            modes=session.modes(),
            config_options=session.config_options(),
        )
        # No checkpoint from here until the peer queues this response, so any
        # later update is written after it (Zed drops updates for sessions it
        # has not seen yet).
        session.start_announcements()
        return codec.unstructure(response)

    async def _list_sessions(self, params: Any, ctx: RequestContext) -> Any:
        request = _parse(params, models.ListSessionsRequest)
        cwd = _check_directory(request.cwd, "cwd", must_exist=False) if request.cwd else None
        dirs = None
        if request.additional_directories is not None:
            dirs = tuple(_normalise(d) for d in request.additional_directories)
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
        """session/load (replays the display journal first) and session/resume."""
        request = _parse(params, models.OpenSessionRequest)
        cwd = _check_directory(request.cwd, "cwd")
        dirs = _check_directories(request.additional_directories)
        mcp_config = _mcp_config(request.mcp_servers or [])
        session = self._manager.get(request.session_id)
        store = self._require_store()
        record = await store.get_session(request.session_id)
        if session is None and record is None:
            raise _unknown_session(request.session_id)
        owner = session.cwd if session is not None else record.cwd if record else cwd
        if _normalise(owner) != cwd:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"session {request.session_id!r} belongs to {owner!r}, not {cwd!r}: "
                "open it from that directory",
                {"sessionId": request.session_id, "sessionCwd": owner, "cwd": cwd},
            )
        journal = await store.journal(request.session_id) if record is not None else []
        if session is None:
            assert record is not None
            with _translate_session_errors():
                session = await self._manager.create(
                    cwd=cwd,
                    additional_dirs=dirs,
                    settings=LaunchSettings.from_store(record.launch),
                    terminals=self._client_wants_terminals(),
                    session_id=record.session_id,
                    conversation_id=record.conversation_id,
                    title=record.title,
                    next_turn=max((e.turn for e in journal), default=-1) + 1,
                    created_at=record.created_at,
                    mcp_config=mcp_config,
                )
        if replay:
            # The client registered the session before sending load: the
            # history may (must) arrive before the response.
            for update in replay_updates(journal):
                await self._notify_update(session.session_id, update)
        response = models.SessionStateResponse(
            modes=session.modes(), config_options=session.config_options()
        )
        session.start_announcements()
        return codec.unstructure(response)

    async def _delete_session(self, params: Any, ctx: RequestContext) -> Any:
        request = _parse(params, models.SessionIdParams)
        await self._manager.close(request.session_id)
        await self._require_store().delete_session(request.session_id)
        return {}  # deleting what does not exist is not an error (idempotent)

    def _require_store(self) -> AsyncStore:
        store = self._manager.store
        if store is None:
            raise RpcError(ErrorCode.INTERNAL_ERROR, "the session store is not available")
        return store

    async def _set_config_option(self, params: Any, ctx: RequestContext) -> Any:
        request = _parse(params, models.SetConfigOptionRequest)
        session = self._session(request.session_id)
        try:
            await session.set_config_option(request.config_id, request.value)
        except ConfigValueError as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                str(exc),
                {"configId": request.config_id, "value": request.value},
            ) from None
        return codec.unstructure(
            models.SetConfigOptionResponse(config_options=session.config_options())
        )

    async def _set_mode(self, params: Any, ctx: RequestContext) -> Any:
        request = _parse(params, models.SetModeRequest)
        session = self._session(request.session_id)
        try:
            await session.set_mode(request.mode_id)
        except ConfigValueError as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS, str(exc), {"modeId": request.mode_id}
            ) from None
        return {}

    async def _prompt(self, params: Any, ctx: RequestContext) -> Any:
        queued_in = self._queued_session(params)
        try:
            request = _parse(params, models.PromptRequest)
            session = self._session(request.session_id)
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
                        prepared.text, ctx.seq, display_text=prepared.display_text
                    )
            finally:
                if prepared.converted.files:
                    await prompting.discard(session, ctx.seq)
        finally:
            # A rejected prompt must not hold its place in the queue.
            if queued_in is not None:
                queued_in.withdraw_prompt(ctx.seq)
        meta = dict(result.meta) or None
        return codec.unstructure(models.PromptResponse(stop_reason=result.stop_reason, meta=meta))

    async def _answer_command(self, session: Session, command: BridgeCommand) -> Any:
        """Answer a bridge command with a message, without an agy turn."""
        reply = await prompting.run_command(session, command, self._doctor)
        await self._notify_update(
            session.session_id,
            models.AgentMessageChunk(
                content=models.TextContent(text=reply), message_id=f"cmd_{uuid.uuid4().hex}"
            ),
        )
        return codec.unstructure(models.PromptResponse(stop_reason=models.STOP_END_TURN))

    async def _close_session(self, params: Any, ctx: RequestContext) -> Any:
        request = _parse(params, models.SessionIdParams)
        if not await self._manager.close(request.session_id):
            raise _unknown_session(request.session_id)
        return {}

    def _client_wants_terminals(self) -> bool:
        """Zed's display-only terminal extension (acp/brief.md §8)."""
        meta = self.client_capabilities.meta or {}
        return meta.get("terminal_output") is True

    def _session(self, session_id: str) -> Session:
        session = self._manager.get(session_id)
        if session is None:
            raise _unknown_session(session_id)
        return session


async def _no_updates(session_id: str, update: models.SessionUpdate) -> None:
    raise RuntimeError("AcpAgent was created without notify_update")


def _settings_from_meta(defaults: LaunchSettings, meta: Any) -> LaunchSettings:
    try:
        return settings_from_meta(defaults, meta if isinstance(meta, dict) else None)
    except ConfigValueError as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, str(exc), {"path": "$._meta"}) from None


def _unknown_session(session_id: str) -> RpcError:
    return RpcError(
        ErrorCode.RESOURCE_NOT_FOUND,
        f"Resource not found: no live session {session_id!r}",
        {"sessionId": session_id},
    )


def _mcp_config(servers: list[dict[str, Any]]) -> dict[str, Any]:
    """agy's MCP config for the session's private root (-32602 for a bad entry;
    sse servers are skipped with a warning, as Zed sends them regardless)."""
    try:
        config, _skipped = build_mcp_config(servers)
    except McpServerError as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, str(exc), exc.data) from None
    return config


def _normalise(path: str) -> str:
    return os.path.normpath(path)


def _check_directories(paths: list[str] | None) -> tuple[str, ...]:
    checked = [
        _check_directory(path, f"additionalDirectories[{i}]") for i, path in enumerate(paths or [])
    ]
    return tuple(dict.fromkeys(checked))  # each root once, in order


def _check_directory(path: str, field: str, *, must_exist: bool = True) -> str:
    if not os.path.isabs(path):
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"{field} must be an absolute path, not {path!r}",
            {"path": f"$.{field}", "value": path},
        )
    if must_exist and not os.path.isdir(path):
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"{field} {path!r} does not exist or is not a directory",
            {"path": f"$.{field}", "value": path},
        )
    return os.path.normpath(path)


async def send_update_via(
    notify: Callable[[str, Any], Any], session_id: str, update: models.SessionUpdate
) -> None:
    """Write one ``session/update`` through the peer's single writer."""
    await notify(
        "session/update",
        codec.unstructure(models.SessionNotification(session_id=session_id, update=update)),
    )
