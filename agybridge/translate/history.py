"""Display history (pure): a finished turn -> journal lines -> replayed updates.

The journal keeps what ``session/load`` must show again, no more: the user's
prompt, one line per tool call (kind, title, final status) and the turn's
final assistant text. agy remains the source of the model's context; this is
only what the editor displays (architecture.md, "Persistence").
"""

from __future__ import annotations

from collections.abc import Iterable

from ..acp import models
from ..acp.text_check import encodes_utf8
from ..store import JournalEntry
from .mapper import TurnMapper


def turn_entries(
    session_id: str,
    turn: int,
    prompt_text: str | None,
    mapper: TurnMapper,
    user_message_id: str,
    *,
    created_at: str,
) -> list[JournalEntry]:
    """The journal lines of one finished turn, in display order (``prompt_text``
    None: no prompt line, it was journalled with an earlier attempt), all
    written at ``created_at``."""
    # The class itself, not its named constructors: every line gets the one
    # moment of the turn's write.
    entries = []
    if prompt_text is not None:
        entries.append(
            JournalEntry(
                session_id,
                turn,
                0,
                "user",
                message_id=user_message_id,
                text=storable(prompt_text),
                created_at=created_at,
            )
        )
    for call in mapper.tools.calls.values():
        entries.append(
            JournalEntry(
                session_id,
                turn,
                len(entries),
                "tool",
                tool_call_id=call.call_id,
                tool_kind=call.kind,
                tool_title=storable(call.title),
                tool_status=call.status if call.finished else "failed",
                created_at=created_at,
            )
        )
    text = storable(mapper.streamed_text)
    if text.strip():
        entries.append(
            JournalEntry(
                session_id,
                turn,
                len(entries),
                "agent",
                message_id=mapper.message_id,
                text=text,
                created_at=created_at,
            )
        )
    return entries


def storable(text: str) -> str:
    """``text`` as UTF-8 can hold it (SQLite cannot store a lone surrogate).

    agy's JSON may split a surrogate pair over two deltas (``"\\ud83d"`` then
    ``"\\ude00"``): joined, the halves become the character again; a half
    with no partner becomes U+FFFD.
    """
    if text.isascii() or encodes_utf8(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def replay_updates(entries: Iterable[JournalEntry]) -> list[models.SessionUpdate]:
    """What the client is sent on ``session/load``, with the original ids."""
    updates: list[models.SessionUpdate] = []
    for entry in entries:
        message_id = entry.message_id or f"history-{entry.turn}-{entry.index}"
        if entry.kind == "user" and entry.text:
            updates.append(
                models.UserMessageChunk(
                    content=models.TextContent(text=entry.text), message_id=message_id
                )
            )
        elif entry.kind == "agent" and entry.text:
            updates.append(
                models.AgentMessageChunk(
                    content=models.TextContent(text=entry.text), message_id=message_id
                )
            )
        elif entry.kind == "tool":
            updates.append(
                models.ToolCall(
                    tool_call_id=entry.tool_call_id or f"history-tool-{entry.turn}-{entry.index}",
                    title=entry.tool_title or "Tool call",
                    kind=entry.tool_kind or "other",
                    status="failed" if entry.tool_status == "failed" else "completed",
                )
            )
    return updates
