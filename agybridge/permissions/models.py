"""The gate's values: one hook call in, one decision out (pure).

`HookRequest.from_payload` reads agy's PreToolUse stdin JSON (camelCase protojson,
hooks-and-tools.md §A3)::

    {"toolCall": {"name": "run_command", "args": {"CommandLine": "ls", ...}},
     "stepIdx": 3, "conversationId": "<uuid>", "workspacePaths": ["/ws"], ...}

``toolCall.args`` are the model's full arguments (file bodies included), unlike the
stream's trimmed ``parameters`` (§B2). ``stepIdx`` equals the stream's ``step_index``
of the same tool step (§A3), which is how the session finds the tool card. protojson
may write 64-bit integers as strings, so a digit string is accepted for ``stepIdx``;
``args`` given as a JSON string (seen for nested MCP arguments) is decoded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import attrs


class PayloadError(ValueError):
    """The hook payload is not a PreToolUse call we can judge (it is denied)."""


@attrs.frozen
class HookRequest:
    """One PreToolUse call, as agy described it.

    Attributes:
      tool_name: agy's tool name (``run_command``, ``view_file``…).
      args: the full tool arguments (PascalCase keys, as agy sends them).
      step_idx: the step index (= stream ``step_index``), if agy sent one.
      conversation_id: agy's conversation id, if sent.
      workspace_paths: agy's workspace roots (the hook root among them).
      raw: the whole payload, verbatim.
    """

    tool_name: str
    args: Mapping[str, Any]
    step_idx: int | None = None
    conversation_id: str | None = None
    workspace_paths: tuple[str, ...] = ()
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_payload(cls, payload: object) -> HookRequest:
        """Parse agy's stdin JSON (already decoded).

        Raises:
          PayloadError: not an object, or no ``toolCall.name``.
        """
        if not isinstance(payload, dict):
            raise PayloadError(f"hook payload must be an object, not {type(payload).__name__}")
        call = payload.get("toolCall")
        if not isinstance(call, dict):
            raise PayloadError("hook payload has no toolCall object")
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise PayloadError("hook payload has no toolCall.name")
        args = call.get("args")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                raise PayloadError("toolCall.args is a string but not JSON") from None
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise PayloadError(f"toolCall.args must be an object, not {type(args).__name__}")
        step = payload.get("stepIdx")
        step_idx: int | None = None
        if isinstance(step, int) and not isinstance(step, bool):
            step_idx = step
        elif isinstance(step, str) and step.isascii() and step.isdigit():
            step_idx = int(step)
        conversation = payload.get("conversationId")
        paths = payload.get("workspacePaths")
        return cls(
            tool_name=name,
            args=args,
            step_idx=step_idx,
            conversation_id=conversation if isinstance(conversation, str) else None,
            workspace_paths=tuple(p for p in paths if isinstance(p, str))
            if isinstance(paths, list)
            else (),
            raw=payload,
        )


@attrs.frozen
class Decision:
    """The answer for agy: allow, or deny with a short reason the model reads."""

    decision: Literal["allow", "deny"]
    reason: str = ""

    @classmethod
    def allow(cls) -> Decision:
        return cls("allow")

    @classmethod
    def deny(cls, reason: str) -> Decision:
        return cls("deny", reason)

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"


def encode_decision(decision: Decision) -> bytes:
    """The broker's reply line: agy's decision JSON plus a newline (§A4)."""
    body: dict[str, str] = {"decision": decision.decision}
    if decision.decision == "deny":
        body["reason"] = decision.reason or "denied by agybridge"
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
