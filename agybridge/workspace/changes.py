"""One recorded file change (:class:`Mutation`) and which paths are the session's.

A :class:`Mutation` is what the mutation log (``mutations.py``) appends and a
rollback (``rollback.py``) reads: the file's snapshot before and after, who
made the change and when, in the order the session saw them. Its stored form
(``to_store``/``from_store``) is the session database's edit log, so it
changes with that format and with nothing else. :func:`inside` decides which
paths are the session's: only changes inside its roots are recorded, and a
rollback names them relative to the first root.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import attrs

from ..store import utc_now
from .snapshots import Snapshot


@attrs.frozen
class Mutation:
    """One file change, in the order the session saw them (``seq``)."""

    seq: int
    turn: int
    path: str
    before: Snapshot | None  # None: not seen (agy wrote before we could look)
    after: Snapshot
    source: str  # "agy" or "rollback"
    tool: str | None = None
    tool_call_id: str | None = None
    #: A rollback's ``toTurn``.
    rolled_back_to: int | None = None
    at: str = attrs.Factory(utc_now)

    @property
    def kind(self) -> str:
        if not self.after.exists:
            return "deleted"
        if self.before is not None and not self.before.exists:
            return "created"
        return "modified" if self.before is not None else "written"

    def to_store(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "turn": self.turn,
            "path": self.path,
            "before": None if self.before is None else self.before.to_wire(),
            "after": self.after.to_wire(),
            "source": self.source,
            "tool": self.tool,
            "toolCallId": self.tool_call_id,
            "rolledBackTo": self.rolled_back_to,
            "at": self.at,
        }

    @classmethod
    def from_store(cls, value: dict[str, Any]) -> Mutation:
        before = value.get("before")
        return cls(
            seq=int(value["seq"]),
            turn=int(value["turn"]),
            path=str(value["path"]),
            before=None if before is None else Snapshot.from_wire(before),
            after=Snapshot.from_wire(value["after"]),
            source=str(value["source"]),
            tool=value.get("tool"),
            tool_call_id=value.get("toolCallId"),
            rolled_back_to=value.get("rolledBackTo"),
            at=str(value["at"]),
        )


def inside(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        real_root = os.path.realpath(root)
        if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep):
            return True
    return False
