"""agy's stream-json stdout events as frozen attrs values, and their parser.

Every stdout line is ``{"event": <name>, <name>: {...}}`` except ``init``, which
carries ``conversation_id`` at the top level (contract.md §3). Both protocols
grow, so unknown keys are ignored, an unknown ``event`` becomes
:class:`UnknownEvent` and a line that is not a JSON object becomes
:class:`MalformedLine`: parsing never raises.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import cattrs
from cattrs.strategies import configure_tagged_union

# Field values agy documents (contract.md §3.2, §3.5); anything else is kept as
# a plain string and treated as unknown by the mapper.
STATE_ACTIVE = "ACTIVE"
STATE_DONE = "DONE"
STATE_ERROR = "ERROR"
STATUS_SUCCESS = "SUCCESS"
STATUS_ERROR = "ERROR"


@attrs.frozen
class Usage:
    """Token counts of one step, or the running sum on ``result`` (cumulative)."""

    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cache_read_tokens: int = 0
    total_tokens: int = 0


@attrs.frozen
class ToolError:
    type: str | None = None
    message: str | None = None


@attrs.frozen
class ToolInfo:
    name: str | None = None
    parameters: dict[str, Any] | None = None
    output: str | None = None
    error: ToolError | None = None


@attrs.frozen
class InitInfo:
    cwd: str | None = None
    tools: list[str] = attrs.Factory(list)
    permission_mode: str | None = None
    model: str | None = None
    agent: str | None = None


@attrs.frozen
class InitEvent:
    """Once per process, normally before the first turn (contract.md §3.1)."""

    conversation_id: str = ""
    init: InitInfo = attrs.Factory(InitInfo)


@attrs.frozen
class StepUpdate:
    step_index: int
    state: str
    step_type: str
    conversation_id: str | None = None
    text_delta: str | None = None
    duration_seconds: float | None = None
    usage: Usage | None = None
    tool_name: str | None = None
    tool_info: ToolInfo | None = None
    subagent_info: dict[str, Any] | None = None


@attrs.frozen
class StepUpdateEvent:
    step_update: StepUpdate


@attrs.frozen
class Result:
    """Exactly one per turn; usage, num_turns and duration are cumulative (§3.5)."""

    status: str
    conversation_id: str | None = None
    response: str | None = None
    error: str | None = None
    duration_seconds: float | None = None
    num_turns: int | None = None
    usage: Usage | None = None
    structured_output: Any = None
    denied_actions: list[dict[str, Any]] | None = None


@attrs.frozen
class ResultEvent:
    result: Result


@attrs.frozen
class UnknownEvent:
    """An ``event`` this bridge does not know, kept raw (forward compatibility)."""

    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.raw.get("event", ""))


@attrs.frozen
class MalformedLine:
    """A stdout line that is not a usable event (non-JSON noise, wrong types)."""

    line: str
    reason: str


AgyEvent = InitEvent | StepUpdateEvent | ResultEvent | UnknownEvent
_TAGS: dict[type, str] = {
    InitEvent: "init",
    StepUpdateEvent: "step_update",
    ResultEvent: "result",
}


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter()
    # Registered before the union strategy, which captures hooks when called.
    converter.register_structure_hook(UnknownEvent, lambda raw, _: UnknownEvent(raw=raw))
    configure_tagged_union(
        AgyEvent,
        converter,
        tag_generator=lambda cl: _TAGS.get(cl, cl.__name__),
        tag_name="event",
        default=UnknownEvent,
    )
    return converter


_converter = _make_converter()


#: The keys of agy's hot event, a text delta (contract.md §3.2).
_DELTA_KEYS = frozenset({"conversation_id", "step_index", "state", "step_type", "text_delta"})


def fast_step_update(raw: dict[str, Any]) -> StepUpdateEvent | None:
    """A plain step update (a text delta: no usage, no tool) built without the
    converter, when every field already has its exact type; None otherwise.
    The same value the converter builds: a generated-input test compares them."""
    if raw.get("event") != "step_update":
        return None
    step = raw.get("step_update")
    if type(step) is not dict or not _DELTA_KEYS.issuperset(step):
        return None
    index, state, kind = step.get("step_index"), step.get("state"), step.get("step_type")
    conversation, delta = step.get("conversation_id"), step.get("text_delta")
    if (
        type(index) is not int
        or type(state) is not str
        or type(kind) is not str
        or (conversation is not None and type(conversation) is not str)
        or (delta is not None and type(delta) is not str)
    ):
        return None
    return StepUpdateEvent(StepUpdate(index, state, kind, conversation, delta))


_raw_decode = json.JSONDecoder().raw_decode


def parse_event(line: bytes | str) -> AgyEvent | MalformedLine:
    """Parse one stdout line; never raises."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    try:
        # raw_decode skips json.loads' two whitespace regexes (agy's lines
        # have none around them); anything else goes the long way.
        raw, end = _raw_decode(text)
        if end != len(text) and not text[end:].isspace():
            raise ValueError("extra data")
    except ValueError:
        try:
            raw = json.loads(text)
        except ValueError:
            return MalformedLine(line=text, reason="not JSON")
    if not isinstance(raw, dict):
        return MalformedLine(line=text, reason="not a JSON object")
    fast = fast_step_update(raw)
    if fast is not None:
        return fast
    try:
        event: AgyEvent = _converter.structure(raw, AgyEvent)  # type: ignore[arg-type]
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as exc:
        details = (
            "; ".join(cattrs.transform_error(exc))
            if isinstance(exc, cattrs.BaseValidationError)
            else repr(exc)
        )
        return MalformedLine(line=text, reason=f"unexpected shape: {details}")
    return event
