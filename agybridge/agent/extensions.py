"""agybridge's ACP extension methods (``_agybridge/...``).

Each method here is a row of the route table (routes.py) with its version,
which ``initialize`` lists in ``agentCapabilities._meta.agybridge.extensions``. The payloads are
documented in docs/extensions.md and described by docs/extensions.schema.json.
"""

from __future__ import annotations

import functools
import posixpath
from pathlib import Path
from typing import Any

import trio

from .. import causes
from ..jsonrpc import ErrorCode, RpcError
from ..logs import lines_naming
from ..session import Session, SessionManager
from ..session.config_events import DirectoriesRequested, SettingsRequested
from ..translate.diffs import Side, Unknown, unified
from ..workspace.changes import Mutation
from ..workspace.mcp_probe import probe
from ..workspace.mutations import MutationLog
from ..workspace.rollback import Restore, RollbackRefused
from ..workspace.snapshots import Snapshot
from . import history_pages as history
from .history_pages import mutation_wire
from .params import (
    bool_param,
    check_directory,
    int_param,
    ranged_int_param,
    str_param,
    unknown_session,
)
from .request import Request
from .runtime import mcp_servers, runtime
from .stored import StoredSession, open_stored, stored_runtime

#: ``_agybridge/session/logs``: the most lines one answer may ask for.
MAX_LOG_LINES = 1000
#: ``_agybridge/mcp/test``: the longest wait for an answer it may ask for.
MAX_MCP_TEST_MS = 60_000


class Extensions:
    """The ``_agybridge/*`` methods over a session manager."""

    def __init__(self, manager: SessionManager) -> None:
        self._manager = manager

    def _session(self, params: dict[str, Any]) -> Session:
        session_id = str_param(params, "sessionId", required=True)
        assert session_id is not None
        session = self._manager.get(session_id)
        if session is None:
            raise unknown_session(session_id)
        return session

    async def _readable(self, params: dict[str, Any]) -> Session | StoredSession:
        """The live session, else the stored one read from the database
        (without starting agy): for the methods that only read."""
        session_id = str_param(params, "sessionId", required=True)
        assert session_id is not None
        session = self._manager.get(session_id)
        if session is not None:
            return session
        stored = await open_stored(self._manager.store, session_id)
        if stored is None:
            raise unknown_session(session_id)
        return stored

    # --- methods -------------------------------------------------------------

    async def runtime(self, params: dict[str, Any], request: Request) -> Any:
        session = await self._readable(params)
        if isinstance(session, StoredSession):
            return stored_runtime(session)
        await session.mutations.load()  # a loaded session's log is in the store
        await session.barrier()  # the prompts sent before this request are queued
        return runtime(session)

    async def history(self, params: dict[str, Any], request: Request) -> Any:
        session = await self._readable(params)
        limit = int_param(params, "limit")
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                "Invalid params: cursor must be a string",
                {"path": "$.cursor"},
            )
        store = self._manager.store
        journal = await store.journal(session.session_id) if store is not None else []
        mutations = await session.mutations.with_provenance()
        return history.page(journal, mutations, cursor, limit)

    async def mutations(self, params: dict[str, Any], request: Request) -> Any:
        session = await self._readable(params)
        since = int_param(params, "sinceTurn") or 0
        listed = await session.mutations.with_provenance(since)
        turns: dict[int, list[dict[str, Any]]] = {}
        for mutation, changed in listed:
            turns.setdefault(mutation.turn, []).append(mutation_wire(mutation, changed))
        return {"turns": [{"turn": t, "files": files} for t, files in sorted(turns.items())]}

    async def diff(self, params: dict[str, Any], request: Request) -> Any:
        session = await self._readable(params)
        turn = int_param(params, "turn")
        since = int_param(params, "sinceTurn")
        if turn is not None and since is not None:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                "Invalid params: give turn or sinceTurn, not both",
                {"path": "$.turn"},
            )
        path = str_param(params, "path")
        if path is not None:
            path = posixpath.normpath(posixpath.join(session.cwd, path))
        return await diff_of(session.mutations, turn=turn, since=since, path=path)

    async def rollback(self, params: dict[str, Any], request: Request) -> Any:
        session = self._session(params)
        to_turn = int_param(params, "toTurn", required=True)
        assert to_turn is not None
        return await rollback(
            session,
            to_turn,
            dry_run=bool_param(params, "dryRun"),
            force=bool_param(params, "force"),
        )

    async def set_workspace(self, params: dict[str, Any], request: Request) -> Any:
        """Move a live session to another ``cwd`` (docs/extensions.md)."""
        session = self._session(params)
        path = str_param(params, "cwd", required=True)
        assert path is not None
        cwd = check_directory(path, "cwd")  # as session/new checks it
        previous = session.cwd
        await session.ask(DirectoriesRequested(None, cwd))
        now = session.cwd == cwd
        return {
            "sessionId": session.session_id,
            "cwd": cwd,
            "previousCwd": previous,
            "additionalDirectories": list(session.core.requested_dirs),
            "applied": "now" if now else "afterTurn",
        }

    async def logs(self, params: dict[str, Any], request: Request) -> Any:
        """The log file's lines that name the session (docs/extensions.md)."""
        session = await self._readable(params)
        limit = ranged_int_param(params, "limit", 1, MAX_LOG_LINES)
        path = self._manager.deps.log_file
        answer: dict[str, Any] = {"sessionId": session.session_id, "logFile": path}
        if path is None:  # AGYBRIDGE_LOG_FILE is empty: no log is kept
            return {**answer, "lines": [], "truncated": False}
        scan = functools.partial(lines_naming, Path(path), session.session_id, limit or 200)
        try:
            lines, cut = await trio.to_thread.run_sync(scan, abandon_on_cancel=True)
        except OSError as exc:
            row = causes.cause("log_file_unusable")
            fields = {"path": path, "detail": exc.strerror or str(exc)}
            message = row.with_fix(row.render(**fields))
            raise RpcError(
                row.code or ErrorCode.INTERNAL_ERROR,
                message,
                {"details": message, "_meta": causes.meta("log_file_unusable", path=path)},
            ) from None
        return {**answer, "lines": lines, "truncated": cut}

    async def settings_reload(self, params: dict[str, Any], request: Request) -> Any:
        """agy respawned warm, so it reads its own settings anew (docs/extensions.md)."""
        session = self._session(params)
        running = session.slot.current is not None
        await session.ask(SettingsRequested(None, reload=True))
        return {
            "sessionId": session.session_id,
            "applied": "afterTurn" if session.busy else "now" if running else "nextTurn",
        }

    async def mcp_list(self, params: dict[str, Any], request: Request) -> Any:
        return {"servers": mcp_servers(self._session(params))}

    async def mcp_test(self, params: dict[str, Any], request: Request) -> Any:
        """Start one of the session's MCP servers; did it answer ``initialize``?"""
        session = self._session(params)
        name = str_param(params, "name", required=True)
        timeout_ms = ranged_int_param(params, "timeoutMs", 100, MAX_MCP_TEST_MS)
        servers = session.spec.mcp_config.get("mcpServers", {})
        entry = servers.get(name)
        if entry is None:
            known = ", ".join(map(repr, servers)) or "none"
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"Invalid params: the session has no MCP server {name!r} (it has: {known})",
                {"path": "$.name"},
            )
        started = trio.current_time()
        outcome = await probe(
            entry,
            cwd=session.cwd,
            timeout_s=(timeout_ms or 10_000) / 1000,
            policy=self._manager.deps.policy,
        )
        return {
            "name": name,
            "transport": "stdio" if "command" in entry else "http",
            **outcome.wire(),
            "elapsedMs": round((trio.current_time() - started) * 1000),
        }

    async def skills_list(self, params: dict[str, Any], request: Request) -> Any:
        session = self._session(params)
        await session.barrier()  # the scan session/new started may not be done yet
        return {
            "skills": [
                {"name": s.name, "description": s.description, "path": s.path}
                for s in session.skills
            ]
        }


async def diff_of(
    log: MutationLog, *, turn: int | None, since: int | None, path: str | None
) -> dict[str, Any]:
    """One diff per file of a session's mutation ``log`` over the chosen
    turns: first before → last after.

    Cancellation: returns at once; the diff, computed in a worker thread, is abandoned.
    """
    await log.load()
    first: dict[str, Mutation] = {}
    last: dict[str, Mutation] = {}
    for mutation in log.entries:
        if turn is not None and mutation.turn != turn:
            continue
        if since is not None and mutation.turn < since:
            continue
        if path is not None and mutation.path != path:
            continue
        first.setdefault(mutation.path, mutation)
        last[mutation.path] = mutation
    sides = []
    for p, earliest in first.items():
        before = _side(log, earliest.before)
        unseen = before is Unknown.UNSEEN
        if unseen:  # from the first content the bridge did see: after that first change
            before = _side(log, earliest.after)
        sides.append((p, before, _side(log, last[p].after), unseen))
    # difflib is quadratic on many repeated lines (a minute for two 1 MiB files):
    # never on the event loop, where it stalled every session. Pure, so a
    # cancelled request abandons it.
    files = await trio.to_thread.run_sync(
        lambda: [unified(p, b, a, before_unseen=u) for p, b, a, u in sides],
        abandon_on_cancel=True,
    )
    return {"files": files, "diff": "".join(f["diff"] for f in files)}


def _side(log: MutationLog, snapshot: Snapshot | None) -> Side:
    """A snapshot as one side of a diff: its text ("" for no file), or why not."""
    if snapshot is None:
        return Unknown.UNSEEN
    if not snapshot.exists:
        return ""
    data = log.blobs.get(snapshot)
    if data is None:
        return Unknown.UNSEEN  # seen, but its bytes were not kept
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return Unknown.BINARY


def _restore_wire(restore: Restore) -> dict[str, Any]:
    return {
        "path": restore.path,
        "action": restore.action,
        "changedSinceAgy": restore.conflict,
        "restorable": restore.restorable,
    }


async def rollback(session: Session, to_turn: int, *, dry_run: bool, force: bool) -> dict[str, Any]:
    """``_agybridge/session/rollback`` (also ``/undo``); see docs/extensions.md."""
    if session.busy:
        raise RpcError(
            ErrorCode.INVALID_REQUEST,
            "a turn is running: roll back when it has finished (or cancel it first)",
            {"sessionId": session.session_id},
        )
    try:
        plan = await session.mutations.rollback(to_turn, force=force, dry_run=dry_run)
    except RollbackRefused as exc:
        raise RpcError(
            ErrorCode.INVALID_REQUEST,
            str(exc),
            {"files": [_restore_wire(r) for r in exc.plan], "toTurn": to_turn},
        ) from None
    return {
        "toTurn": to_turn,
        "dryRun": dry_run,
        "applied": not dry_run and any(r.action != "unchanged" for r in plan),
        "files": [_restore_wire(r) for r in plan],
        "agyNotice": session.mutations.agy_note,
    }
