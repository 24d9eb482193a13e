"""The ACP session methods: ``session/new`` to ``session/delete``, the prompt
turn, the bridge's slash commands and the ``_agybridge/*`` extensions.

`AcpAgent` (handlers.py) loads this module when the first of these requests
arrives: answering ``initialize`` needs none of the session machinery it
imports (issue 15, lazy start-up).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from ..acp import codec, models
from ..acp.content import PromptContentError
from ..acp.limits import PromptLimits
from ..jsonrpc import ErrorCode, RequestContext, RpcError
from ..session import Session, SessionError, SessionManager
from ..session.commands import BridgeCommand
from ..session.config import ConfigValueError, LaunchSettings
from ..session.history import replay_updates
from ..session.mcp import McpServerError, build_mcp_config
from ..session.outlet import DETACH_NOTICE_S, ClientSink, detached_notice
from ..session.spec import SessionSpec
from ..session.staging import StagingError
from ..store import AsyncStore, InvalidCursorError
from . import commands, compat, prompting
from .advertised import STEER
from .auth import SignInState
from .extensions import Extensions, str_param
from .params import (
    check_directories,
    check_directory,
    normalise,
    on_disconnect_from,
    parse,
    session_params,
    session_rpc_error,
    settings_from,
    translate_session_errors,
    unknown_session,
)

if TYPE_CHECKING:
    from .handlers import AcpAgent

Method = Callable[[Any, RequestContext], Awaitable[Any]]


class SessionMethods:
    """The methods that need sessions, for one `AcpAgent` (its client and settings)."""

    def __init__(
        self,
        agent: AcpAgent,
        manager: SessionManager,
        client: ClientSink,
        *,
        default_settings: LaunchSettings,
        limits: PromptLimits,
        doctor: Callable[[], list[str]],
        catalog_ready: Callable[[], Awaitable[None]] | None,
        sign_in: SignInState,
        client_gone: Callable[[], bool] | None = None,
    ) -> None:
        self._agent = agent
        self._client_gone = client_gone
        self._manager = manager
        self._client = client
        self._default_settings = default_settings
        self._limits = limits
        self._doctor = doctor
        self._catalog_ready = catalog_ready
        self._sign_in = sign_in
        self._extensions = Extensions(manager)
        #: method -> implementation: handlers.SESSION_METHODS and STEER; the
        #: agent routes these and the extensions here (a test checks they agree).
        self.methods: dict[str, Method] = {
            "session/new": self._new_session,
            "session/prompt": self._prompt,
            "session/close": self._close_session,
            "session/set_config_option": self._set_config_option,
            "session/set_mode": self._set_mode,
            "session/list": self._list_sessions,
            "session/load": self._load_session,
            "session/resume": self._resume_session,
            "session/delete": self._delete_session,
            STEER: self._steer,
        }

    async def handle(self, method: str, params: Any, ctx: RequestContext) -> Any:
        served = self.methods.get(method)
        if served is None:
            return await self._extensions.handle(method, params)
        return await served(params, ctx)

    async def _new_session(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(session_params(params), models.NewSessionRequest)
        spec = SessionSpec(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=check_directory(request.cwd, "cwd"),
            additional_dirs=check_directories(request.additional_directories),
            settings=settings_from(self._default_settings, *compat.launch_sources(params)),
            terminals=self._client_wants_terminals(),
            mcp_config=mcp_config(request.mcp_servers),
            on_disconnect=on_disconnect_from(request.meta),
            conversation_id=compat.conversation_id(params),
        )
        if self._catalog_ready is not None:
            # A cached catalog is read in milliseconds: offer it now rather
            # than push it right after (a warm bridge then pushes nothing).
            await self._catalog_ready()
        with translate_session_errors():
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
        request = parse(session_params(params, null_lists=False), models.ListSessionsRequest)
        # `is not None`: an empty cwd is no absolute path (-32602), not "no filter".
        cwd = (
            check_directory(request.cwd, "cwd", must_exist=False)
            if request.cwd is not None
            else None
        )
        dirs = None
        if request.additional_directories is not None:
            dirs = tuple(normalise(d) for d in request.additional_directories)
        store = self._require_store()
        try:
            records, cursor = await store.list_sessions(
                cwd=cwd, additional_dirs=dirs, cursor=request.cursor
            )
        except InvalidCursorError as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS, str(exc), {"path": "$.cursor", "cursor": request.cursor}
            ) from None
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
        request = parse(session_params(params), models.OpenSessionRequest)
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

        with translate_session_errors():
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
        await session.outlet.attach_replaying(
            self._client, history if replay else None, gone=self._client_gone
        )
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
        await self._let_go(request.session_id, "deleted")
        await self._manager.close(request.session_id)
        await self._require_store().delete_session(request.session_id)
        return {}  # deleting what does not exist is not an error (idempotent)

    def _driven(self, session_id: str) -> Session:
        """The live session, if this client drives it (two clients rule, README
        "Long-running sessions": the newest client to open a session drives it;
        the others may not prompt it or change its settings).

        Raises:
            RpcError: -32002 no such live session; -32600 another client has it.
        """
        session = self._session(session_id)
        if session.outlet.client is not self._client:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"session {session_id!r} is not attached to this client (another "
                "client opened it, or it was detached): session/load or session/resume it "
                "here to take it over (session/close and session/delete work from any "
                "client; the one attached is told)",
                {"sessionId": session_id},
            )
        return session

    async def _let_go(self, session_id: str, how: str) -> None:
        """Closing or deleting a session another client drives (the daemon; any
        client may, README "Two clients"): that client is not waited on (it
        may have stopped reading) and is told, as when another client opens
        it, with an ``attached: false`` notice (given `DETACH_NOTICE_S` at most)."""
        live = self._manager.get(session_id)
        if live is None:
            return
        driver = live.outlet.client
        live.outlet.let_go(self._client)
        if driver is None or driver is self._client or live.outlet.client is driver:
            return  # nobody else drove it (or a bridge of one client)
        notice = detached_notice(f"the session was {how} by another client")
        with trio.move_on_after(DETACH_NOTICE_S):
            await driver(session_id, (notice,))

    def _require_store(self) -> AsyncStore:
        store = self._manager.store
        if store is None:
            raise RpcError(ErrorCode.INTERNAL_ERROR, "the session store is not available")
        return store

    async def _set_config_option(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.SetConfigOptionRequest)
        session = self._driven(request.session_id)
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
        session = self._driven(request.session_id)
        try:
            await session.set_mode(request.mode_id)
        except ConfigValueError as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS, str(exc), {"modeId": request.mode_id}
            ) from None
        return {}

    async def _prompt(self, params: Any, ctx: RequestContext) -> Any:
        request = codec.structure_plain_prompt(params) or parse(params, models.PromptRequest)
        session = self._driven(request.session_id)
        skill = None
        if prompting.slash_text(request.prompt):  # else it is no command
            command = prompting.command_of(request.prompt, session)
            if command is None:
                # A skill? The scan session/new started may not be done yet.
                await session.barrier()
                command = prompting.command_of(request.prompt, session)
            if isinstance(command, BridgeCommand):
                return await self._answer_command(session, command, ctx.seq)
            skill = command
        try:
            prepared = await prompting.prepare(
                session, request.prompt, ctx.seq, self._limits, skill
            )
        except PromptContentError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc), exc.data) from None
        except StagingError as exc:
            raise RpcError(ErrorCode.INTERNAL_ERROR, str(exc), {"details": str(exc)}) from None
        # $/cancel_request for a prompt means "cancel this turn", answered with
        # the normal cancelled result (ACP cancellation.mdx).
        ctx.on_cancel = lambda: session.cancel_prompt(ctx.seq)
        try:
            # A rollback sent just before: agy must not run while the files
            # are being restored (its note goes with the turn: send_user_turn).
            await session.mutations.settled()
            result = await session.prompt(
                ctx.seq, prepared.text, prepared.display_text, self._client
            )
        except SessionError as exc:  # translate_session_errors, without a context manager per turn
            raise session_rpc_error(exc) from None
        finally:
            if prepared.converted.files:
                await prompting.discard(session, ctx.seq)
        meta = dict(result.meta) or None
        response = models.PromptResponse(stop_reason=result.stop_reason, meta=meta)
        return codec.unstructure_prompt_response(response)

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
        if not params["text"].strip():
            # Named as the steer's field, not as the prompt block it becomes.
            raise RpcError(
                ErrorCode.INVALID_PARAMS, "Invalid params: text is empty", {"path": "$.text"}
            )
        prompt = {
            # -32602 naming the field, as every extension (session/prompt's
            # own check would answer a list of problems).
            "sessionId": str_param(params, "sessionId", required=True),
            "prompt": [{"type": "text", "text": params["text"]}],
        }
        return await self._prompt(prompt, ctx)

    async def _answer_command(self, session: Session, command: BridgeCommand, seq: int) -> Any:
        """Answer a bridge command with a message, without an agy turn."""
        reply = await commands.run_command(session, command, self._doctor, seq)
        chunk = models.AgentMessageChunk(
            content=models.TextContent(text=reply), message_id=f"cmd_{uuid.uuid4().hex}"
        )
        await self._client(session.session_id, (chunk,))
        return codec.unstructure(models.PromptResponse(stop_reason=models.STOP_END_TURN))

    async def _close_session(self, params: Any, ctx: RequestContext) -> Any:
        request = parse(params, models.SessionIdParams)
        await self._let_go(request.session_id, "closed")
        if not await self._manager.close(request.session_id):
            raise unknown_session(request.session_id)
        return {}

    def _client_wants_terminals(self) -> bool:
        """Zed's display-only terminal extension (acp/brief.md §8)."""
        meta = self._agent.client_capabilities.meta or {}
        return meta.get("terminal_output") is True

    def _session(self, session_id: str) -> Session:
        session = self._manager.get(session_id)
        if session is None:
            raise unknown_session(session_id)
        return session


def mcp_config(servers: list[dict[str, Any]]) -> dict[str, Any]:
    """agy's MCP config for the session's private root (-32602 for a bad entry;
    sse servers are skipped with a warning, as Zed sends them regardless)."""
    try:
        config, _skipped = build_mcp_config(servers)
    except McpServerError as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, str(exc), exc.data) from None
    return config


def _conversation_meta(session: Session) -> dict[str, Any] | None:
    """agy-acp-map's ``_meta.conversationId`` on new/load/resume (when known)."""
    known = session.conversation.id
    return {"conversationId": known} if known else None
