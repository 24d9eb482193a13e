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


#: The keys of agy's hot events: text deltas, and the steps and result that
#: carry usage (contract.md §3.2, §3.5); others go through the converter.
_STEP_KEYS = frozenset(
    {
        "conversation_id",
        "step_index",
        "state",
        "step_type",
        "text_delta",
        "duration_seconds",
        "usage",
    }
)
_RESULT_KEYS = frozenset(
    {"status", "conversation_id", "response", "error", "duration_seconds", "num_turns", "usage"}
)
_USAGE_KEYS = frozenset(attrs.fields_dict(Usage))
#: Not a usable value for the fast path (the converter decides).
_NO = object()


def _optional(value: Any, kind: type) -> Any:
    return value if value is None or type(value) is kind else _NO


def _usage(value: Any) -> Any:
    if value is None:
        return None
    if type(value) is not dict or not all(
        key not in _USAGE_KEYS or type(count) is int for key, count in value.items()
    ):
        return _NO
    return Usage(**{key: count for key, count in value.items() if key in _USAGE_KEYS})


def fast_event(raw: dict[str, Any]) -> StepUpdateEvent | ResultEvent | None:
    """A step update without tool or subagent details, or a plain result,
    built without the converter when every field already has its exact type;
    None otherwise. The same value the converter builds: a generated-input
    test compares them."""
    name = raw.get("event")
    # A tuple, not a set: ``event`` may hold any JSON value, a list included.
    body = raw.get(name) if name in ("step_update", "result") else None
    if type(body) is not dict:
        return None
    get = body.get
    conversation, duration = get("conversation_id"), get("duration_seconds")
    usage = _usage(get("usage"))
    if (
        (conversation is not None and type(conversation) is not str)
        or (duration is not None and type(duration) is not float)
        or usage is _NO
    ):
        return None
    if name == "result":
        status, response, error = get("status"), get("response"), get("error")
        turns = get("num_turns")
        if (
            not _RESULT_KEYS.issuperset(body)
            or type(status) is not str
            or _NO in (_optional(response, str), _optional(error, str), _optional(turns, int))
        ):
            return None
        return ResultEvent(Result(status, conversation, response, error, duration, turns, usage))
    index, state, kind, delta = get("step_index"), get("state"), get("step_type"), get("text_delta")
    if (
        not _STEP_KEYS.issuperset(body)
        or type(index) is not int
        or type(state) is not str
        or type(kind) is not str
        or (delta is not None and type(delta) is not str)
    ):
        return None
    return StepUpdateEvent(StepUpdate(index, state, kind, conversation, delta, duration, usage))


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
    fast = fast_event(raw)
    if fast is not None:
        return fast
    try:
        event: AgyEvent = _converter.structure(raw, AgyEvent)  # type: ignore[arg-type]
    except _SHAPE_ERRORS as exc:
        lenient = _without_unreadable_fields(raw)
        if lenient is not None:
            return lenient
        details = (
            "; ".join(cattrs.transform_error(exc))
            if isinstance(exc, cattrs.BaseValidationError)
            else repr(exc)
        )
        return MalformedLine(line=text, reason=f"unexpected shape: {details}")
    return event


_SHAPE_ERRORS = (cattrs.BaseValidationError, KeyError, TypeError, ValueError)
_BODIES: dict[str, tuple[type[StepUpdateEvent] | type[ResultEvent], type[Any]]] = {
    "step_update": (StepUpdateEvent, StepUpdate),
    "result": (ResultEvent, Result),
}


def _without_unreadable_fields(raw: dict[str, Any]) -> StepUpdateEvent | ResultEvent | None:
    """A step or result with the optional fields that cannot be read left out.

    A ``result`` is the only end of a turn and a step may carry agy's text: a
    token count of another type beside them must not make the line noise.
    None when a field the event cannot do without is unreadable or missing.
    """
    name = raw.get("event")
    if not isinstance(name, str) or name not in _BODIES:
        return None
    body = raw.get(name)
    if not isinstance(body, dict):
        return None
    outer, inner = _BODIES[name]
    fields = attrs.fields_dict(attrs.resolve_types(inner))
    kept: dict[str, Any] = {}
    for key, value in body.items():
        field = fields.get(key)
        if field is None or field.type is None:
            continue
        try:
            kept[key] = _converter.structure(value, field.type)
        except _SHAPE_ERRORS:
            if field.default is attrs.NOTHING:
                return None
    try:
        return outer(inner(**kept))
    except TypeError:  # a required field is missing
        return None
