"""The ACP session methods: ``session/new`` to ``session/delete``, the prompt
turn, the bridge's slash commands and the ``_agybridge/*`` extensions.

Each method is a row of the route table (routes.py), which hands it its
params already checked against their model (params.py) and the `Request`.
`AcpAgent` (handlers.py) loads this module when the first of these requests
arrives: answering ``initialize`` needs none of the session machinery it
imports (issue 15, lazy start-up).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .. import causes
from ..acp import codec, models
from ..acp.content import PromptContentError
from ..acp.limits import PromptLimits
from ..jsonrpc import ErrorCode, RpcError
from ..session import Session, SessionError, SessionManager
from ..session.commands import BridgeCommand
from ..session.config import ConfigValueError, LaunchSettings
from ..session.outlet import DETACH_NOTICE_S, ClientSink, detached_notice
from ..session.spec import SessionSpec
from ..store import AsyncStore, InvalidCursorError
from ..translate.history import replay_updates
from ..workspace.mcp import McpServerError, build_mcp_config
from ..workspace.staging import StagingError
from . import commands, compat, prompting
from .auth import SignInState
from .extensions import Extensions
from .params import (
    check_directories,
    check_directory,
    listed_directories,
    normalise,
    on_disconnect_from,
    session_rpc_error,
    setting_error,
    settings_from,
    translate_session_errors,
    unknown_session,
)
from .request import Request


class SessionMethods:
    """The methods that need sessions, for one `AcpAgent` (its client and settings)."""

    def __init__(
        self,
        manager: SessionManager,
        client: ClientSink,
        *,
        default_settings: LaunchSettings,
        limits: PromptLimits,
        doctor: Callable[[], list[str]],
        catalog_ready: Callable[[], Awaitable[None]] | None,
        sign_in: SignInState,
        client_capabilities: Callable[[], models.ClientCapabilities],
        client_gone: Callable[[], bool] | None = None,
    ) -> None:
        """``client_capabilities``: what the client's ``initialize`` said."""
        self._client_capabilities = client_capabilities
        self._client_gone = client_gone
        self._manager = manager
        self._client = client
        self._default_settings = default_settings
        self._limits = limits
        self._doctor = doctor
        self._catalog_ready = catalog_ready
        self._sign_in = sign_in
        #: The ``_agybridge/*`` methods (routes.py reaches them through here).
        self.extensions: Extensions = Extensions(manager)

    async def new_session(self, request: models.NewSessionRequest, call: Request) -> Any:
        params = call.params  # with the compatibility fields the model leaves out
        spec = SessionSpec(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=check_directory(request.cwd, "cwd"),
            additional_dirs=check_directories(request.additional_directories),
            settings=settings_from(self._default_settings, *compat.launch_sources(params)),
            terminals=self._client_wants_terminals(),
            notices=self._client_capabilities().shows_notices,
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

    async def list_sessions(self, request: models.ListSessionsRequest, call: Request) -> Any:
        # `is not None`: an empty cwd is no absolute path (-32602), not "no filter".
        cwd = (
            check_directory(request.cwd, "cwd", must_exist=False)
            if request.cwd is not None
            else None
        )
        dirs = listed_directories(request)
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

    async def load_session(self, request: models.OpenSessionRequest, call: Request) -> Any:
        return await self._open_session(request, replay=True)

    async def resume_session(self, request: models.OpenSessionRequest, call: Request) -> Any:
        return await self._open_session(request, replay=False)

    async def _open_session(self, request: models.OpenSessionRequest, *, replay: bool) -> Any:
        """session/load (replays the display journal first) and session/resume.

        Everything they send precedes their response. Two opens of one stored
        session at once share one session (the second waits for the first).
        """
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
        next_turn = await store.next_turn(request.session_id) if record is not None else 0
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
                notices=self._client_capabilities().shows_notices,
                conversation_id=record.conversation_id,
                title=record.title,
                next_turn=next_turn,
                created_at=record.created_at,
                mcp_config=servers,
                plan=tuple(record.meta.get("plan") or ()),
            )

        with translate_session_errors():
            session, started = await self._manager.open(
                request.session_id, spec_from_store, self._client
            )
        # A live session takes the list sent as its complete list (ACP).
        moved = None if started else await _directories_sent(session, dirs)
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
        meta = _conversation_meta(session)
        if moved is not None:
            meta = {**(meta or {}), "agybridge": {"additionalDirectories": moved}}
        response = models.SessionStateResponse(
            modes=session.modes(), config_options=session.config_options(), meta=meta
        )
        return codec.unstructure(response)

    async def delete_session(self, request: models.SessionIdParams, call: Request) -> Any:
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

    async def set_config_option(self, request: models.SetConfigOptionRequest, call: Request) -> Any:
        session = self._driven(request.session_id)
        try:
            await session.set_config_option(request.config_id, request.value)
        except ConfigValueError as exc:
            data = {"configId": request.config_id, "value": request.value}
            raise setting_error(exc, request.config_id, data) from None
        session.options_seen()
        return codec.unstructure(
            models.SetConfigOptionResponse(config_options=session.config_options())
        )

    async def set_mode(self, request: models.SetModeRequest, call: Request) -> Any:
        session = self._driven(request.session_id)
        try:
            await session.set_mode(request.mode_id)
        except ConfigValueError as exc:
            data = {"modeId": request.mode_id, "value": request.mode_id}
            raise setting_error(exc, "mode", data) from None
        return {}

    async def prompt(self, request: models.PromptRequest, call: Request) -> Any:
        """session/prompt, and ``_agybridge/session/steer`` as the prompt it is
        (docs/extensions.md "Steering": answered like a prompt when its turn ends)."""
        session = self._driven(request.session_id)
        skill = None
        if prompting.slash_text(request.prompt):  # else it is no command
            command = prompting.command_of(request.prompt, session)
            if command is None:
                # A skill? The scan session/new started may not be done yet.
                await session.barrier()
                command = prompting.command_of(request.prompt, session)
            if isinstance(command, BridgeCommand):
                return await self._answer_command(session, command, call.seq)
            skill = command
        try:
            prepared = await prompting.prepare(
                session, request.prompt, call.seq, self._limits, skill
            )
        except PromptContentError as exc:
            # details: the message again, as every error answer has it (Zed shows it).
            cause = causes.meta(exc.cause, path=exc.data["path"])
            data = {"details": str(exc), **exc.data, "_meta": cause}
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc), data) from None
        except StagingError as exc:
            # The directory was made at session/new: it broke since (full disk,
            # removed, made read-only). The prompt is refused, nothing reached agy.
            root = session.staging.root if session.staging is not None else None
            message = causes.cause("staging_unusable").with_fix(str(exc))
            error = SessionError(message, cause="staging_unusable", fields={"path": root})
            raise session_rpc_error(error) from None
        # $/cancel_request for a prompt means "cancel this turn", answered with
        # the normal cancelled result (ACP cancellation.mdx).
        call.ctx.on_cancel = lambda: session.cancel_prompt(call.seq)
        try:
            # A rollback sent just before: agy must not run while the files
            # are being restored (its note goes with the turn: send_user_turn).
            await session.mutations.settled()
            result = await session.prompt(
                call.seq, prepared.text, prepared.display_text, self._client
            )
        except SessionError as exc:  # translate_session_errors, without a context manager per turn
            session.prompts.failed = request.prompt
            raise session_rpc_error(exc) from None
        finally:
            if prepared.converted.files:
                await prompting.discard(session, call.seq)
        # A turn agy ended with an error is answered, its cause in _meta (a quota, ...).
        failed = result.stop_reason != models.STOP_CANCELLED and causes.cause_of(result.meta)
        session.prompts.failed = request.prompt if failed else None
        meta = dict(result.meta) or None
        response = models.PromptResponse(stop_reason=result.stop_reason, meta=meta)
        return codec.unstructure_prompt_response(response)

    async def retry(self, request: models.SessionIdParams, call: Request) -> Any:
        """``_agybridge/session/retry``: the last prompt again, when its turn
        failed; answered like it (docs/extensions.md "Retry")."""
        session = self._driven(request.session_id)
        await session.barrier()  # the prompts sent before this request are queued
        failed = session.prompts.failed
        refused = "retry_while_running" if session.busy else "nothing_to_retry"
        if session.busy or failed is None:
            row = causes.cause(refused)
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                row.with_fix(row.render()),
                {"sessionId": request.session_id, "_meta": causes.meta(refused)},
            )
        return await self.prompt(models.PromptRequest(request.session_id, failed), call)

    async def _answer_command(self, session: Session, command: BridgeCommand, seq: int) -> Any:
        """Answer a bridge command with a message, without an agy turn."""
        reply = await commands.run_command(session, command, self._doctor, seq)
        chunk = models.AgentMessageChunk(
            content=models.TextContent(text=reply), message_id=f"cmd_{uuid.uuid4().hex}"
        )
        await self._client(session.session_id, (chunk,))
        return codec.unstructure(models.PromptResponse(stop_reason=models.STOP_END_TURN))

    async def close_session(self, request: models.SessionIdParams, call: Request) -> Any:
        await self._let_go(request.session_id, "closed")
        if not await self._manager.close(request.session_id):
            raise unknown_session(request.session_id)
        if self._manager.deps.delete_on_close:
            await self._require_store().delete_session(request.session_id)
        return {}

    def _client_wants_terminals(self) -> bool:
        """Zed's display-only terminal extension (acp/brief.md §8)."""
        meta = self._client_capabilities().meta or {}
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


async def _directories_sent(session: Session, dirs: tuple[str, ...]) -> dict[str, Any] | None:
    """A load or resume of a live session sent ``dirs``: applied (agy respawned
    warm with them, now or after the running turn); what changed, for the
    answer's ``_meta`` (None: the list is the same)."""
    before = session.additional_dirs
    now = await session.set_directories(dirs)
    if now and dirs == before:
        return None
    return {
        "previous": list(before),
        "current": list(dirs),
        "applied": "now" if now else "afterTurn",
    }


def _conversation_meta(session: Session) -> dict[str, Any] | None:
    """agy-acp-map's ``_meta.conversationId`` on new/load/resume (when known)."""
    known = session.conversation.id
    return {"conversationId": known} if known else None
