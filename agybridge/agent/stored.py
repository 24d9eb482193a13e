"""A stored session that is not loaded, read from the database alone.

``_agybridge/session/history``, ``runtime``, ``mutations`` and ``diff`` answer
for a session that is in the database but not live in this bridge (closed, or
from an earlier bridge) without starting agy or loading the session: the
journal, the index row and the mutation log (with its snapshots) are all in the
store. What only a running agy knows (its version, pid, tools, token counts,
the permission gate) is null or empty, and ``stored: true`` says so.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..session.config import LaunchSettings
from ..store import AsyncStore, SessionRecord
from ..workspace.mutations import MutationLog


@attrs.frozen
class StoredSession:
    """The session's index row and its (read-only) mutation log."""

    record: SessionRecord
    mutations: MutationLog

    @property
    def session_id(self) -> str:
        return self.record.session_id

    @property
    def cwd(self) -> str:
        return self.record.cwd


async def open_stored(store: AsyncStore | None, session_id: str) -> StoredSession | None:
    """The stored session ``session_id`` (None: not in the database)."""
    record = await store.get_session(session_id) if store is not None else None
    if record is None:
        return None
    roots = (record.cwd, *record.additional_dirs)
    # Nothing is recorded into it: no turn runs, so the current turn is moot.
    log = MutationLog(store, session_id, roots, current_turn=lambda: 0)
    await log.load()
    return StoredSession(record, log)


def stored_runtime(stored: StoredSession) -> dict[str, Any]:
    """``_agybridge/session/runtime`` for a stored session: what the database
    knows (folders, launch settings, conversation, forks, file changes)."""
    record = stored.record
    settings = LaunchSettings.from_store(record.launch)
    drift = record.meta.get("conversationDrift")
    forks = [
        {"asked": str(fork["asked"]), "got": str(fork["got"])}
        for fork in (drift if isinstance(drift, list) else [])
        if isinstance(fork, dict) and "asked" in fork and "got" in fork
    ]
    return {
        "sessionId": record.session_id,
        "cwd": record.cwd,
        "additionalDirectories": list(record.additional_dirs),
        "model": settings.model,
        "agyModel": None,
        "effort": settings.effort,
        "mode": settings.mode,
        "agyPermissionMode": None,
        "agyPermissionOverride": False,
        "agent": settings.agent,
        "agy": {"version": None, "pid": None},
        "conversationId": record.conversation_id,
        "conversationForks": forks,
        # Token counts live with the running session only (not stored).
        "tokens": {
            "inputTokens": 0,
            "outputTokens": 0,
            "totalTokens": 0,
            "contextUsed": None,
            "contextSize": None,
        },
        "tools": [],
        "mcpServers": [],
        "gate": None,
        "queuedPrompts": 0,
        "runningTurn": None,
        "mutations": len(stored.mutations.entries),
        "stored": True,
        "title": record.title,
        "updatedAt": record.updated_at,
    }
