"""Map one turn of agy stream-json events to ACP session updates (pure).

Theory of operation. A :class:`TurnMapper` lives for one turn, h11-style:
``feed(event) -> list[update]``; state is in named fields. A turn is RUNNING
until agy's ``result`` (exactly one per turn, contract.md §3.5) moves it to
FINISHED, which fixes :attr:`TurnMapper.outcome`; feeding anything after that
raises :class:`MapperError`.

Text: every ``text_delta`` is an incremental fragment, and ACTIVE and DONE of
one step carry different fragments, so all are forwarded (never deduplicated
by step index). ``result.response`` restates the whole turn's text: only the
part not already streamed is forwarded (contract.md §3.6), so text arrives
exactly once whatever mix of deltas and response agy sends.

Unknown events, step types and states are skipped and counted: agy's
vocabulary grows (contract.md §3.3).
"""

from __future__ import annotations

import enum
import logging
from collections import Counter

import attrs

from ..acp import models
from ..agy import events

logger = logging.getLogger(__name__)


class MapperError(Exception):
    """An event arrived that the turn's state does not allow."""


class TurnState(enum.Enum):
    RUNNING = "running"
    FINISHED = "finished"


class OutcomeKind(enum.Enum):
    END_TURN = "end_turn"
    #: agy reported an ERROR result; the error text was shown as a message.
    AGY_ERROR = "agy_error"
    CANCELLED = "cancelled"


@attrs.frozen
class TurnOutcome:
    kind: OutcomeKind
    status: str
    error: str | None = None


_KNOWN_STEP_TYPES = frozenset(
    {
        "user_input",
        "agent_response",
        "tool",
        "checkpoint",
        "system_message",
        "error_message",
        "unknown",
    }
)


@attrs.define
class TurnMapper:
    """Maps one turn; see the module docstring."""

    message_id: str
    #: Set when the user cancelled: an ERROR result is then the interruption
    #: agy reports for SIGINT, not something to show as an error.
    cancel_requested: bool = False
    state: TurnState = TurnState.RUNNING
    streamed: list[str] = attrs.Factory(list)
    outcome: TurnOutcome | None = None
    #: Events this bridge could not interpret, by kind (logged once each).
    unrecognised: Counter[str] = attrs.Factory(Counter)

    @property
    def streamed_text(self) -> str:
        return "".join(self.streamed)

    def feed(self, event: events.AgyEvent | events.MalformedLine) -> list[models.SessionUpdate]:
        if self.state is TurnState.FINISHED:
            raise MapperError(
                f"can't handle {type(event).__name__} when the turn state is {self.state.value}"
            )
        if isinstance(event, events.StepUpdateEvent):
            return self._step(event.step_update)
        if isinstance(event, events.ResultEvent):
            return self._result(event.result)
        if isinstance(event, events.InitEvent):
            return []  # process-level; the session reads it
        if isinstance(event, events.UnknownEvent):
            self._note(f"event:{event.name}")
        else:
            self._note(f"malformed:{event.reason.split(':')[0]}")
        return []

    def _note(self, kind: str) -> None:
        if kind not in self.unrecognised:
            logger.warning("agy sent something this bridge does not map: %s", kind)
        self.unrecognised[kind] += 1

    def _step(self, step: events.StepUpdate) -> list[models.SessionUpdate]:
        if step.step_type not in _KNOWN_STEP_TYPES:
            self._note(f"step_type:{step.step_type}")
            return []
        if step.state not in (events.STATE_ACTIVE, events.STATE_DONE, events.STATE_ERROR):
            self._note(f"state:{step.state}")
        if step.step_type == "agent_response" and step.text_delta:
            return [self._text(step.text_delta)]
        return []

    def _text(self, text: str) -> models.AgentMessageChunk:
        self.streamed.append(text)
        return models.AgentMessageChunk(
            content=models.TextContent(text=text), message_id=self.message_id
        )

    def _result(self, result: events.Result) -> list[models.SessionUpdate]:
        self.state = TurnState.FINISHED
        updates: list[models.SessionUpdate] = []
        response = result.response or ""
        streamed = self.streamed_text
        if response.startswith(streamed):
            if response[len(streamed) :]:
                updates.append(self._text(response[len(streamed) :]))
        else:
            # The streamed deltas are what the user saw; a response that does
            # not extend them is a restatement we must not show twice.
            logger.warning(
                "result.response does not extend the streamed text (%d vs %d chars); "
                "keeping the streamed text",
                len(response),
                len(streamed),
            )
        status = result.status
        if status == events.STATUS_SUCCESS:
            self.outcome = TurnOutcome(OutcomeKind.END_TURN, status)
        elif self.cancel_requested or status in ("CANCELED", "CANCELLED", "INTERRUPTED"):
            self.outcome = TurnOutcome(OutcomeKind.CANCELLED, status, result.error)
        else:
            error = result.error or f"agy ended the turn with status {status}"
            if status != events.STATUS_ERROR:
                self._note(f"status:{status}")
            self.outcome = TurnOutcome(OutcomeKind.AGY_ERROR, status, error)
            updates.append(
                models.AgentMessageChunk(
                    content=models.TextContent(
                        text=("\n\n" if self.streamed_text else "") + f"⚠️ agy error: {error}"
                    ),
                    message_id=self.message_id,
                )
            )
        return updates
