"""What a cell produced: turns as the client saw them, and the cell's verdict."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from .causes import Cause
from .model import Cell

Status = Literal["passed", "flaky", "failed", "error", "skipped"]
#: Report order of the statuses (counts, summaries).
STATUSES: tuple[Status, ...] = ("passed", "flaky", "failed", "error", "skipped")


@attrs.define
class ToolCall:
    id: str
    kind: str | None = None
    title: str | None = None
    status: str | None = None


@attrs.define
class TurnRecord:
    prompt: str
    #: Seconds since the cell started (its own clock, ``trio.current_time``).
    sent_s: float
    first_chunk_s: float | None = None
    ended_s: float | None = None
    stop_reason: str | None = None
    text: str = ""
    #: ``_meta.usage.totalTokens`` of the prompt response.
    tokens: int | None = None
    agy_error: dict[str, Any] | None = None
    structured_output: Any = None
    #: The prompt response's ``_meta`` (agybridge names a turn's cause in it).
    meta: dict[str, Any] = attrs.Factory(dict)
    #: The `causes.CAUSES` id when the turn did not end normally (print timeout, ...).
    end_cause: str | None = None
    #: The images the reply showed (messages and tool cards), by their uri or data.
    images: set[str] = attrs.Factory(set)
    #: The cause the bridge's error answer to the prompt named (``expect.error``).
    refused: str | None = None

    @property
    def outcome(self) -> str | None:
        """How the turn ended to the runner: its cause when abnormal, else its stop reason."""
        return self.end_cause or self.stop_reason


@attrs.define
class Failure:
    """An expectation that did not hold."""

    expectation: str
    expected: str
    seen: str

    def text(self) -> str:
        return f"{self.expectation}: expected {self.expected}; seen {self.seen}"


@attrs.define
class CellRecord:
    """Everything one attempt at a cell saw (the client fills it as updates arrive)."""

    turns: list[TurnRecord] = attrs.Factory(list)
    tool_calls: dict[str, ToolCall] = attrs.Factory(dict)
    #: Permission requests: ``{"title", "kind", "answer"}`` each.
    permissions: list[dict[str, Any]] = attrs.Factory(list)
    transcript: list[str] = attrs.Factory(list)
    #: Largest ``usage_update.used`` seen (context tokens in use).
    context_used: int = 0
    budget_exceeded: str | None = None
    workspace: str | None = None
    #: ``agentInfo`` from the bridge's ``initialize`` answer.
    agent_info: dict[str, Any] | None = None
    agy_version: str | None = None
    #: Phases, seconds since the attempt started: initialize answered, session/new answered.
    bridge_start_s: float | None = None
    session_ready_s: float | None = None
    #: ``session/list`` named the cell's session (asked only for ``expect.listed``).
    listed: bool | None = None

    @property
    def turn_s(self) -> float | None:
        """First prompt sent -> last response: the model's time, without bridge start-up."""
        if not self.turns or self.turns[-1].ended_s is None:
            return None
        return self.turns[-1].ended_s - self.turns[0].sent_s

    @property
    def tokens(self) -> int:
        """Tokens the cell used: the per-turn totals, or the context in use if larger."""
        return max(sum(t.tokens or 0 for t in self.turns), self.context_used)

    @property
    def first_chunk_s(self) -> float | None:
        firsts = [t.first_chunk_s - t.sent_s for t in self.turns if t.first_chunk_s is not None]
        return firsts[0] if firsts else None


@attrs.define
class Attempt:
    """An earlier attempt at a cell that did not pass (kept when a retry followed)."""

    error: Cause | None
    failures: list[Failure]
    transcript: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "error": self.error.to_json() if self.error is not None else None,
            "failures": [attrs.asdict(f) for f in self.failures],
        }


@attrs.define
class CellResult:
    cell: Cell
    status: Status
    record: CellRecord = attrs.Factory(CellRecord)
    failures: list[Failure] = attrs.Factory(list)
    error: Cause | None = None
    skip_reason: str | None = None
    attempts: int = 0
    #: Seconds since the run started; ``seq_*`` order every cell start and end of the run.
    started_s: float = 0.0
    ended_s: float = 0.0
    seq_start: int = 0
    seq_end: int = 0
    baseline: dict[str, Any] | None = None
    leftovers: list[str] = attrs.Factory(list)
    #: Attempts before the last, each of which did not pass (a retry followed).
    earlier: list[Attempt] = attrs.Factory(list)

    @property
    def duration_s(self) -> float:
        return self.ended_s - self.started_s

    def to_json(self) -> dict[str, Any]:
        record = self.record
        return {
            "id": self.cell.id,
            "key": self.cell.key,
            "repeat": self.cell.repeat,
            "case": self.cell.case.name,
            "axes": dict(self.cell.axes),
            "status": self.status,
            "attempts": self.attempts,
            "earlier_attempts": [a.to_json() for a in self.earlier],
            "started_s": round(self.started_s, 3),
            "ended_s": round(self.ended_s, 3),
            "duration_s": round(self.duration_s, 3),
            "seq_start": self.seq_start,
            "seq_end": self.seq_end,
            "first_chunk_s": _round(record.first_chunk_s),
            "bridge_start_s": _round(record.bridge_start_s),
            "session_ready_s": _round(record.session_ready_s),
            "turn_s": _round(record.turn_s),
            "tokens": record.tokens,
            "stop_reason": record.turns[-1].stop_reason if record.turns else None,
            "outcome": record.turns[-1].outcome if record.turns else None,
            "turns": [
                {
                    "prompt": t.prompt,
                    "stop_reason": t.stop_reason,
                    "first_chunk_s": _round(
                        None if t.first_chunk_s is None else t.first_chunk_s - t.sent_s
                    ),
                    "duration_s": _round(None if t.ended_s is None else t.ended_s - t.sent_s),
                    "tokens": t.tokens,
                    "text": t.text,
                    "agy_error": t.agy_error,
                    "end_cause": t.end_cause,
                }
                for t in record.turns
            ],
            "tool_calls": [attrs.asdict(call) for call in record.tool_calls.values()],
            "permissions": record.permissions,
            "budget_exceeded": record.budget_exceeded,
            "failures": [attrs.asdict(f) for f in self.failures],
            "error": self.error.to_json() if self.error is not None else None,
            "skip_reason": self.skip_reason,
            "baseline": self.baseline,
            "leftovers": self.leftovers,
            "transcript": record.transcript,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
