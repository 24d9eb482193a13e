"""Map one turn of agy stream-json events to ACP session updates (pure).

Theory of operation. A :class:`TurnMapper` lives for one turn, h11-style:
``feed(event, seen) -> list[update]`` and ``feed_stderr(line)``; state is in
named fields. A turn is RUNNING until agy's ``result`` (exactly one per turn,
contract.md §3.5) moves it to FINISHED, which fixes :attr:`TurnMapper.outcome`
(and the response's ``_meta``: ``outcome.py``); feeding an event after that
raises :class:`MapperError`. The mapper does no
I/O: what it needs from disk (edit targets, images named in output) the
session reads first and passes in as an :class:`Observation`, asking
:meth:`ReadNeeds.paths_to_read` (its ``needs``) which paths matter.

Text: every ``text_delta`` is an incremental fragment, and ACTIVE and DONE of
one step carry different fragments, so all are forwarded (never deduplicated
by step index). ``result.response`` restates the whole turn's text: only the
part not already streamed is forwarded (contract.md §3.6), so text arrives
exactly once whatever mix of deltas and response agy sends. The streamed
text is not kept whole (:class:`~.streamed.StreamedText`: counts, a digest, a
bounded head and tail), so a long turn costs flat memory. With
``--json-schema`` the response is the serialised JSON: the structured output
is shown once, fenced, instead.

Tool steps go to :class:`ToolCallTracker`; plan/background-work tools,
subagents and stderr notices feed one complete ``plan``
(:class:`~.plan.TurnPlan`); usage becomes ``usage_update``s; denials, quota
and timeouts become messages a user can act on. Unknown events, step types
and states are skipped and counted: agy's vocabulary grows (contract.md §3.3).
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
from collections import Counter
from typing import Any

import attrs

from .. import causes
from ..acp import models
from ..agy import events
from ..agy.stderr import StderrKind, StderrLine
from . import ext_events, notices, usage
from .card_text import fenced
from .observation import NO_OBSERVATION, Observation
from .outcome import OutcomeKind, TurnOutcome, ending, response_meta
from .plan import TurnPlan
from .read_needs import ReadNeeds
from .streamed import HeldAnswer, StreamedText
from .tool_calls import ToolCallTracker

logger = logging.getLogger(__name__)


class MapperError(Exception):
    """An event arrived that the turn's state does not allow."""


class TurnState(enum.Enum):
    RUNNING = "running"
    FINISHED = "finished"


_KNOWN_STEP_TYPES = frozenset(
    {
        "user_input",
        "agent_response",
        "tool",
        "checkpoint",
        "system_message",
        "error_message",
        "unknown",
        "subagent",
        "finish",
    }
)
_KNOWN_STATES = frozenset({events.STATE_ACTIVE, events.STATE_DONE, events.STATE_ERROR})
#: No tokens (frozen: one value shared by every turn, not one made per turn).
_NO_USAGE = events.Usage()


@attrs.define
class TurnMapper:
    """Maps one turn; see the module docstring."""

    message_id: str
    cwd: str = "/"
    #: Zed's display-only terminal extension (client ``_meta.terminal_output``).
    terminals: bool = False
    context_size: int = usage.DEFAULT_CONTEXT_WINDOW
    #: The AGYBRIDGE_CONTEXT_WINDOW setting: wins over the window ``init.model`` implies.
    context_window_override: int | None = None
    #: agy runs with ``--json-schema``: its answer is one JSON line, held back so the
    #: client sees the clean ``structured_output`` instead (contract.md §11).
    structured: bool = False
    #: The previous ``result.usage`` of the same agy process, if any.
    previous_result_usage: events.Usage | None = None
    #: The process started a new conversation (no ``--conversation``): its
    #: first ``result.usage`` is then exactly this turn's.
    fresh_process: bool = True
    #: The hook gate is on: every tool step must have gone through it.
    gate_active: bool = False
    #: Set when the user cancelled: an ERROR result is then the interruption
    #: agy reports for SIGINT, not something to show as an error.
    cancel_requested: bool = False
    #: The client shows ``notice`` updates: warnings go there, not into the chat.
    show_notices: bool = False
    #: Produce the ``_agybridge/*`` extension events (ext_events.py; the wire
    #: drops them for a client that did not ask for them).
    extension_events: bool = False
    now: dt.datetime = attrs.Factory(lambda: dt.datetime.now(dt.UTC))
    state: TurnState = TurnState.RUNNING
    streamed: StreamedText = attrs.Factory(StreamedText)
    outcome: TurnOutcome | None = None
    #: Events this bridge could not interpret, by kind (logged once each).
    unrecognised: Counter[str] = attrs.Factory(Counter)
    tools: ToolCallTracker = attrs.field(init=False)
    step_usage: events.Usage = _NO_USAGE
    context_used: int | None = None
    turn_usage: events.Usage | None = None
    turn_plan: TurnPlan = attrs.Factory(TurnPlan)
    denied: list[str] = attrs.Factory(list)
    agy_error_details: dict[str, Any] | None = None
    print_timeout: bool = False
    structured_output: Any = None
    quota: notices.QuotaError | None = None
    #: An ERROR result after agy gave its answer (contract.md §11): a partial turn.
    partial: bool = False
    #: agy's own text (not only whitespace) came this turn.
    _answered: bool = False
    _held: HeldAnswer = attrs.Factory(HeldAnswer)
    #: Why the turn did not end well (a catalogue id), and its fields: the
    #: response's ``_meta.agybridge``.
    cause: str | None = None
    cause_fields: dict[str, Any] = attrs.Factory(dict)
    needs: ReadNeeds = attrs.field(init=False)
    _usage_sent: int | None = None

    def __attrs_post_init__(self) -> None:
        self.needs = ReadNeeds(self.cwd)
        self.tools = ToolCallTracker(
            call_prefix=f"{self.message_id}-tool",
            cwd=self.cwd,
            terminals=self.terminals,
            hold_silent_done=True,
        )
        self.turn_plan.extension_events = self.extension_events

    @property
    def plan(self) -> dict[str, models.PlanEntry]:
        """The plan's entries by key (the session keeps them for replay)."""
        return self.turn_plan.entries

    @property
    def streamed_text(self) -> str:
        """The turn's text as shown (for the journal; built on each call)."""
        return self.streamed.text

    # --- events ------------------------------------------------------------

    def feed(
        self,
        event: events.AgyEvent | events.MalformedLine,
        seen: Observation = NO_OBSERVATION,
    ) -> list[models.SessionUpdate]:
        if self.state is TurnState.FINISHED:
            raise MapperError(
                f"can't handle {type(event).__name__} when the turn state is {self.state.value}"
            )
        # Mostly steps: their exact type is tested first (no isinstance call).
        if type(event) is events.StepUpdateEvent or isinstance(event, events.StepUpdateEvent):
            if seen.images:
                self.needs.shown(seen.images)
            if self.tools.watching:  # a later step settles earlier tools (tool_calls.py)
                earlier = self.tools.before_step(event.step_update.step_index)
                return [*earlier, *self._step(event.step_update, seen)]
            return self._step(event.step_update, seen)
        if isinstance(event, events.ResultEvent):
            return self._result(event.result)
        if isinstance(event, events.InitEvent):
            # The session reads the rest; the window of this turn's model is known
            # from now on (contract.md §11: init.model is the only early model fact).
            if event.init.model:
                self.context_size = usage.context_window(
                    event.init.model, self.context_window_override
                )
            if event.init.json_schema is not None and not self._answered:
                self.structured = True
            return []
        if isinstance(event, events.UnknownEvent):
            self._note(f"event:{event.name}")
        else:
            self._note(f"malformed:{event.reason.split(':')[0]}")
        return []

    def feed_stderr(self, line: StderrLine) -> list[models.SessionUpdate]:
        """Notices from agy's stderr during this turn."""
        if self.state is TurnState.FINISHED:
            # stderr is another pipe: agy's AGY_ERROR line may trail its
            # result. Keep the details for the response's _meta.
            if line.kind is StderrKind.AGY_ERROR:
                self.agy_error_details = dict(line.details or {})
            return []
        if line.kind is StderrKind.SOFT_DENY:
            permission = notices.soft_denied_permission(line.text)
            self.denied.append(permission or "")
        elif line.kind is StderrKind.AGY_ERROR:
            self.agy_error_details = dict(line.details or {})
        elif line.kind is StderrKind.PRINT_TIMEOUT:
            self.print_timeout = True
        return self.turn_plan.from_stderr(line.text)

    def _note(self, kind: str) -> None:
        if kind not in self.unrecognised:
            logger.warning("agy sent something this bridge does not map: %s", kind)
        self.unrecognised[kind] += 1

    def _step(self, step: events.StepUpdate, seen: Observation) -> list[models.SessionUpdate]:
        if step.step_type not in _KNOWN_STEP_TYPES:
            self._note(f"step_type:{step.step_type}")
            return []
        if step.state not in _KNOWN_STATES:
            self._note(f"state:{step.state}")
        updates: list[models.SessionUpdate]
        if step.step_type == "agent_response":
            text = step.text_delta
            if text:  # the hot path: one delta of agy's reply
                self.needs.scan_text(step.step_index, text)
                if not self._answered and not text.isspace():
                    self._answered = True
                updates = self._held_text(text) if self.structured else [self._text(text)]
            else:
                updates = []
            for image in seen.images.values() if seen.images else ():
                updates.append(
                    models.AgentMessageChunk(
                        content=models.ImageContent(data=image.data, mime_type=image.mime_type),
                        message_id=self.message_id,
                    )
                )
        elif step.step_type == "tool":
            updates = [*self.tools.feed(step, seen), *self.turn_plan.from_tool(step)]
        elif step.step_type == "subagent" and step.subagent_info:
            updates = self.turn_plan.from_subagents(step)  # a new list
        elif step.step_type == "system_message":
            # What agy marks a subagent's return with (contract.md §11).
            updates = self.turn_plan.subagents_returned()
        else:
            updates = []
        if step.usage is not None:
            updates += self._usage(step)
        return updates

    def _held_text(self, text: str) -> list[models.SessionUpdate]:
        """A text delta under ``--json-schema``: held while it may be the answer's
        JSON line (it starts with ``{``), shown as soon as it cannot be."""
        shown = self._held.offer(text)
        if shown is None:
            return []
        self.structured = False  # not the JSON answer: the rest streams
        return [self._text(shown)]

    def _release_text(self) -> list[models.SessionUpdate]:
        held, self.structured = self._held.take(), False
        return [self._text(held)] if held else []

    def _text(self, text: str) -> models.AgentMessageChunk:
        if self.state is TurnState.RUNNING:
            self.streamed.add_delta(text)
        else:
            self.streamed.add_after(text)
        return models.AgentMessageChunk(
            content=models.TextContent(text=text), message_id=self.message_id
        )

    def _message(self, text: str) -> models.AgentMessageChunk:
        """A bridge-authored paragraph after whatever agy said: one blank line
        between them, whatever line end agy's text had."""
        tail = self.streamed.last_chars(2)
        separator = "\n\n"[len(tail) - len(tail.rstrip("\n")) :] if self.streamed.visible else ""
        return self._text(separator + text)

    def _usage(self, step: events.StepUpdate) -> list[models.SessionUpdate]:
        assert step.usage is not None
        self.step_usage = usage.add(self.step_usage, step.usage)
        if step.step_type != "agent_response":
            return []  # the context in use is a model step's
        self.context_used = usage.context_used(step.usage)
        return self._usage_update()

    def _usage_update(self) -> list[models.SessionUpdate]:
        if self.context_used is None or self.context_used == self._usage_sent:
            return []
        self._usage_sent = self.context_used
        return [models.UsageUpdate(used=self.context_used, size=self.context_size)]

    # --- the end of the turn -----------------------------------------------

    def _result(self, result: events.Result) -> list[models.SessionUpdate]:
        self.state = TurnState.FINISHED
        updates: list[models.SessionUpdate] = []
        previous = self.previous_result_usage
        if previous is None and self.fresh_process:
            previous = _NO_USAGE
        self.turn_usage = usage.turn_usage(result.usage, previous, self.step_usage)
        if result.structured_output is not None:
            self.structured_output = result.structured_output
        if result.structured_output is not None and (self.structured or not self.streamed.visible):
            # The response (and any held delta) is agy's serialised JSON, maybe with
            # its internal keys: show the clean object once, readable. (Streamed by an
            # agy the mapper was not told runs with a schema, it was shown already.)
            self._held.take()
            rendered = json.dumps(result.structured_output, indent=2, ensure_ascii=False)
            updates.append(self._message(fenced(rendered, "json")))
        else:
            updates += self._release_text()
            updates += self._remaining_response(result.response or "")
        self.denied += notices.denied_permissions(result.denied_actions)
        blocks, untied = self.tools.block_denied(self.denied)
        updates += blocks
        updates += self.tools.release_held()
        updates += self.tools.fail_unfinished("the turn ended before this tool finished")
        updates += self.turn_plan.finish()
        if self.denied:
            titles = [t for ts in self.tools.blocked_titles().values() for t in ts]
            message = notices.soft_deny_message(self.denied, blocked=titles, untied=untied)
            # A notice, not the turn's cause: the turn ran, one action did not.
            permissions = sorted({p for p in self.denied if p})
            meta = causes.meta("policy_blocked", permissions=permissions)
            updates += self._warning(message, "policy_blocked", meta)
        if self.print_timeout:
            updates += self._notice(notices.PRINT_TIMEOUT_MESSAGE, "print_timeout", error=False)
        ungated = self.tools.ungated_finished() if self.gate_active else []
        if ungated:
            logger.warning("tool steps finished without the permission gate: %s", ungated)
            text = (
                "agy ran "
                + ", ".join(f"`{t}`" for t in ungated)
                + " without going through the permission gate."
            )
            updates += self._warning(text, ext_events.GATE_BYPASSED, None)
        updates += self._status(result)
        # The meter's final value for the turn (unless it was just sent).
        updates += self._usage_update()
        if self.extension_events:
            updates.append(
                ext_events.usage_event(self.turn_usage, self.context_used, self.context_size)
            )
        return updates

    def end_without_result(self, reason: str) -> list[models.SessionUpdate]:
        """The turn is answered without agy's ``result`` (cancelled, agy
        exited, stalled): tool calls the client saw running end failed, so no
        card spins forever (the journal records them so too)."""
        if self.state is TurnState.FINISHED:
            return []
        return [
            *self._release_text(),
            *self.tools.release_held(),
            *self.tools.fail_unfinished(reason),
        ]

    def _remaining_response(self, response: str) -> list[models.SessionUpdate]:
        rest = self.streamed.rest_of(response)
        if rest is not None:
            return [self._text(rest)] if rest else []
        # The streamed deltas are what the user saw; a response that does not
        # extend them is a restatement we must not show twice.
        logger.warning(
            "result.response does not extend the streamed text (%d vs %d chars); "
            "keeping the streamed text",
            len(response),
            self.streamed.delta_chars,
        )
        return []

    def _status(self, result: events.Result) -> list[models.SessionUpdate]:
        end = ending(
            result,
            denied=bool(self.denied),
            cancel_requested=self.cancel_requested,
            answered=self._answered,
            print_timeout_shown=self.print_timeout,
            agy_error_details=self.agy_error_details,
            now=self.now,
        )
        self.outcome = end.outcome
        if end.outcome.kind is OutcomeKind.AGY_ERROR and result.status != events.STATUS_ERROR:
            self._note(f"status:{result.status}")
        self.partial = end.outcome.partial
        self.quota = end.quota
        self.print_timeout = self.print_timeout or end.print_timeout
        if end.notice is None:
            return []
        return self._notice(end.notice.text, end.notice.cause, error=True, **end.notice.fields)

    def _notice(
        self, text: str, cause: str, *, error: bool, **fields: Any
    ) -> list[models.SessionUpdate]:
        """A bridge notice of why the turn did not end well: ``_meta.agybridge``
        names the cause, and the turn's response says it too (the first one)."""
        if self.cause is None:
            self.cause = cause
            self.cause_fields = {k: v for k, v in fields.items() if v is not None}
        return self._warning(text, cause, causes.meta(cause, **fields), error=error)

    def _warning(
        self, text: str, cause: str, meta: dict[str, Any] | None, *, error: bool = False
    ) -> list[models.SessionUpdate]:
        """A bridge-authored warning (or the turn's error): a ``⚠️`` paragraph in
        the chat, or a ``notice`` for a client that shows them; plus its
        extension event (ext_events.py). Only at the end of a turn."""
        shown: models.SessionUpdate
        if self.show_notices:
            title = ext_events.title(cause)
            shown = attrs.evolve(ext_events.notice(title, text, error=error), meta=meta)
        else:
            shown = attrs.evolve(self._message("⚠️ " + text), meta=meta)
        if not self.extension_events:
            return [shown]
        return [shown, ext_events.problem_event(cause, text, error=error)]

    def response_meta(self) -> dict[str, Any]:
        """The prompt response's ``_meta`` for this turn (:func:`~.outcome.response_meta`)."""
        return response_meta(
            structured_output=self.structured_output,
            turn_usage=self.turn_usage,
            context_used=self.context_used,
            context_size=self.context_size,
            quota=self.quota,
            agy_error_details=self.agy_error_details,
            denied=self.denied,
            unrecognised=self.unrecognised,
            partial=self.partial,
            cause=causes.meta(self.cause, **self.cause_fields) if self.cause else None,
        )
