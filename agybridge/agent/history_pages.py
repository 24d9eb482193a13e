"""``_agybridge/session/history``: the journal and the mutation log as one
paged list (read only: nothing is replayed as updates)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from ..jsonrpc import ErrorCode, RpcError
from ..store import JournalEntry
from ..workspace.changes import Mutation

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: A cursor holds the last journal line given, (turn, index), and the last
#: mutation's seq (-1: none yet): each only grows as the session goes on, but
#: a turn journalled when it ends sorts before the mutations listed while it
#: ran, so neither an offset nor one sort key would give each entry once.
_CURSOR_PREFIX = "h2:"
_Key = tuple[int, int, int]  # (journal turn, journal index, mutation seq)


def _entry(entry: JournalEntry) -> dict[str, Any]:
    wire: dict[str, Any] = {"turn": entry.turn, "kind": entry.kind, "at": entry.created_at}
    if entry.kind == "tool":
        wire.update(
            toolCallId=entry.tool_call_id,
            toolKind=entry.tool_kind,
            title=entry.tool_title,
            status=entry.tool_status,
        )
    else:
        wire.update(text=entry.text, messageId=entry.message_id)
    return wire


def _cursor(key: _Key) -> str:
    text = _CURSOR_PREFIX + ":".join(str(part) for part in key)
    return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def _after(cursor: str) -> _Key:
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
        if text.startswith(_CURSOR_PREFIX):
            turn, index, seq = (int(part) for part in text[len(_CURSOR_PREFIX) :].split(":"))
            if min(turn, index, seq) >= -1:
                return turn, index, seq
    except (ValueError, binascii.Error, UnicodeError):
        pass
    raise RpcError(
        ErrorCode.INVALID_PARAMS,
        f"Invalid params: cursor {cursor!r} is not one this bridge gave out",
        {"path": "$.cursor"},
    )


def mutation_wire(mutation: Mutation, changed_after: bool | None) -> dict[str, Any]:
    return {
        "seq": mutation.seq,
        "path": mutation.path,
        "kind": mutation.kind,
        "source": mutation.source,
        "tool": mutation.tool,
        "toolCallId": mutation.tool_call_id,
        "before": None if mutation.before is None else mutation.before.to_wire(),
        "after": mutation.after.to_wire(),
        "rolledBackTo": mutation.rolled_back_to,
        "at": mutation.at,
        "provenance": {"writtenBy": mutation.source, "changedAfter": changed_after},
    }


def page(
    journal: Sequence[JournalEntry],
    mutations: Sequence[tuple[Mutation, bool | None]],
    cursor: str | None,
    limit: int | None,
) -> dict[str, Any]:
    """Entries in turn order (a turn's prompt, answers and tool calls, then its
    file mutations), ``limit`` at a time from ``cursor``."""
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"Invalid params: limit must be between 1 and {MAX_LIMIT}, not {limit}",
            {"path": "$.limit"},
        )
    keyed: list[tuple[_Key, dict[str, Any]]] = [((e.turn, 0, e.index), _entry(e)) for e in journal]
    keyed += [
        (
            (m.turn, 1, m.seq),
            {"turn": m.turn, "kind": "mutation", "mutation": mutation_wire(m, changed)},
        )
        for m, changed in mutations
    ]
    keyed.sort(key=lambda item: item[0])
    journal_at, seq_at = ((-1, -1), -1)
    if cursor is not None:
        turn, index, seq_at = _after(cursor)
        journal_at = (turn, index)
    keyed = [
        ((turn, kind, index), wire)
        for (turn, kind, index), wire in keyed
        if (index > seq_at if kind else (turn, index) > journal_at)
    ]
    size = limit or DEFAULT_LIMIT
    chosen, more = keyed[:size], len(keyed) > size
    for (turn, kind, index), _ in chosen:
        if kind:
            seq_at = index
        else:
            journal_at = (turn, index)
    return {
        "entries": [wire for _, wire in chosen],
        "nextCursor": _cursor((*journal_at, seq_at)) if more else None,
    }
