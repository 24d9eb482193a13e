"""``_agybridge/session/history``: the journal and the mutation log as one
paged list (read only: nothing is replayed as updates)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from ..jsonrpc import ErrorCode, RpcError
from ..session.mutations import Mutation
from ..store import JournalEntry

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
_CURSOR_PREFIX = "h1:"


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


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{offset}".encode()).decode("ascii")


def _offset(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
        if text.startswith(_CURSOR_PREFIX):
            offset = int(text[len(_CURSOR_PREFIX) :])
            if offset >= 0:
                return offset
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
    keyed: list[tuple[tuple[int, int, int], dict[str, Any]]] = [
        ((e.turn, 0, e.index), _entry(e)) for e in journal
    ]
    keyed += [
        (
            (m.turn, 1, m.seq),
            {"turn": m.turn, "kind": "mutation", "mutation": mutation_wire(m, changed)},
        )
        for m, changed in mutations
    ]
    keyed.sort(key=lambda item: item[0])
    start = _offset(cursor) if cursor is not None else 0
    size = limit or DEFAULT_LIMIT
    entries = [wire for _, wire in keyed[start : start + size]]
    more = start + size < len(keyed)
    return {"entries": entries, "nextCursor": _cursor(start + size) if more else None}
