"""The ACP client side of one cell: records updates, answers permission requests.

It is what an editor is to the bridge: it gets ``session/update`` notifications and
``session/request_permission`` requests, and answers the latter as the case's
``permissions`` says (``allow``: allow once; ``deny``: reject once; ``fail``: reject
once and remember, so the cell fails). Every update lands in the `CellRecord` as it
arrives, timestamped with trio's clock, and as a transcript line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import trio

from ..jsonrpc import MessageContext, RequestContext, RpcError
from .model import Permissions
from .results import CellRecord, ToolCall, TurnRecord

_ALLOW = ("allow_once", "allow_always")
_REJECT = ("reject_once", "reject_always")


class CellClient:
    """A jsonrpc `Handler` recording one cell's session."""

    def __init__(
        self,
        record: CellRecord,
        permissions: Permissions,
        started_at: float,
        on_line: Callable[[str], None],
        on_usage: Callable[[], None],
    ) -> None:
        self.record = record
        self.permissions = permissions
        self.started_at = started_at
        self._on_line = on_line
        self._on_usage = on_usage
        self._text_open = False
        self._unshown = ""
        self._shown_lines = 0

    def now(self) -> float:
        return trio.current_time() - self.started_at

    def line(self, text: str) -> None:
        self._close_text()
        self.record.transcript.append(text)
        self._on_line(text)

    def _close_text(self) -> None:
        if self._text_open:
            self._text_open = False
            if self._unshown:
                self._on_line(self._prefix() + self._unshown)
            self._unshown = ""

    def _prefix(self) -> str:
        return "agent: " if not self._shown_lines else "       "

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        """Requests are answered as they come (a permission question needs no order)."""

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        if method != "session/request_permission" or not isinstance(params, dict):
            raise RpcError.method_not_found(method)
        tool = params.get("toolCall") or {}
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        wanted = _ALLOW if self.permissions == "allow" else _REJECT
        chosen = next((o for kind in wanted for o in options if o.get("kind") == kind), None)
        answer = "cancelled" if chosen is None else str(chosen.get("kind"))
        self.record.permissions.append(
            {"title": tool.get("title"), "kind": tool.get("kind"), "answer": answer}
        )
        self.line(f"[permission] {tool.get('title') or tool.get('toolCallId')} -> {answer}")
        if chosen is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": chosen.get("optionId")}}

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        if method != "session/update" or not isinstance(params, dict):
            return
        update = params.get("update")
        if not isinstance(update, dict) or not self.record.turns:
            return
        turn = self.record.turns[-1]
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content") or {}
            _note_image(turn, content)
            if content.get("type") == "text":
                if turn.first_chunk_s is None:
                    turn.first_chunk_s = self.now()
                turn.text += str(content.get("text", ""))
                self._append_text(str(content.get("text", "")))
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update)
            for entry in update.get("content") or ():
                if isinstance(entry, dict) and entry.get("type") == "content":
                    _note_image(turn, entry.get("content"))
        elif kind == "usage_update":
            used = update.get("used")
            if isinstance(used, int):
                self.record.context_used = max(self.record.context_used, used)
                self._on_usage()
        elif kind == "plan":
            self.line(f"[plan] {len(update.get('entries') or [])} entries")

    def _append_text(self, text: str) -> None:
        if not self._text_open:
            self.record.transcript.append("agent: ")
            self._text_open = True
            self._shown_lines = 0
        self.record.transcript[-1] += text
        # The live view (-v) gets each complete line as soon as it is complete.
        self._unshown += text
        *complete, self._unshown = self._unshown.split("\n")
        for line in complete:
            self._on_line(self._prefix() + line)
            self._shown_lines += 1

    def _tool(self, update: dict[str, Any]) -> None:
        call_id = str(update.get("toolCallId"))
        call = self.record.tool_calls.setdefault(call_id, ToolCall(call_id))
        for field in ("kind", "title", "status"):
            value = update.get(field)
            if value is not None:
                setattr(call, field, str(value))
        if update.get("sessionUpdate") == "tool_call" or update.get("status") in (
            "completed",
            "failed",
        ):
            self.line(f"[tool {call.kind or '?'}] {call.title or call_id} ({call.status})")

    def response(self, result: Any) -> None:
        """Record a prompt response on the current turn."""
        turn = self.record.turns[-1]
        turn.ended_s = self.now()
        meta = result.get("_meta") if isinstance(result, dict) else None
        turn.stop_reason = str(result.get("stopReason")) if isinstance(result, dict) else None
        if isinstance(meta, dict):
            usage = meta.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("totalTokens"), int):
                turn.tokens = usage["totalTokens"]
            if isinstance(meta.get("agyError"), dict):
                turn.agy_error = meta["agyError"]
            turn.structured_output = meta.get("structuredOutput")
            turn.meta = meta
        self.line(f"[turn ended: {turn.stop_reason}, {turn.tokens} tokens]")
        if turn.agy_error:
            self.line(f"[agy error] {json.dumps(turn.agy_error)[:300]}")
        self._on_usage()


def _note_image(turn: TurnRecord, content: Any) -> None:
    """Count an image block once, however many updates repeat it."""
    if isinstance(content, dict) and content.get("type") == "image":
        key = content.get("uri") or hashlib.blake2b(str(content.get("data")).encode()).hexdigest()
        turn.images.add(str(key))
