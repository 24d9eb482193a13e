"""agy's stream-json stdout events as frozen attrs values, and their parser.

Every stdout line is ``{"event": <name>, <name>: {...}}`` except ``init``, which
carries ``conversation_id`` at the top level (contract.md §3). Both protocols
grow, so unknown keys are ignored, an unknown ``event`` becomes
:class:`UnknownEvent` and a line that is not a JSON object becomes
:class:`MalformedLine`: parsing never raises.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable
from types import NoneType
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
    #: The ``--json-schema`` agy runs with (contract.md §3.1).
    json_schema: Any = None


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
#: The tagged union's hook (`cattrs.Converter.structure` takes a class, not a union).
_structure_event = _converter.get_structure_hook(AgyEvent)


def _exact_types(cls: type) -> dict[str, tuple[type, ...]]:
    """The fields of ``cls`` whose JSON value is kept as it is (``str``,
    ``int``, ``float``, ``None`` or a union of them), with the exact types each
    takes: all the fast path checks. Derived, so the class stays the one
    statement of the shape."""
    plain = {str, int, float, NoneType}
    kinds: dict[str, tuple[type, ...]] = {}
    for field in attrs.fields(attrs.resolve_types(cls)):
        hint = field.type
        union = typing.get_origin(hint) in (types.UnionType, typing.Union)
        accepted = typing.get_args(hint) if union else (hint,)
        if plain.issuperset(accepted):
            kinds[field.name] = accepted
    return kinds


_USAGE_KEYS = frozenset(attrs.fields_dict(Usage))


def _usage(counts: dict[str, Any]) -> Usage | None:
    """agy's token counts if each one the bridge knows is an int; else None."""
    if not _USAGE_KEYS.issuperset(counts):
        counts = {key: count for key, count in counts.items() if key in _USAGE_KEYS}
    for count in counts.values():
        if type(count) is not int:
            return None
    return Usage(**counts)


class _FastShape(typing.NamedTuple):
    """What the fast path needs of one event: its classes and the exact types
    of the keys it reads itself (a field it cannot do without is left to the
    class: missing, it raises)."""

    outer: Callable[[Any], StepUpdateEvent | ResultEvent]
    inner: Callable[..., Any]
    kinds: dict[str, tuple[type, ...]]


def _fast_shape(outer: type[StepUpdateEvent] | type[ResultEvent], inner: type[Any]) -> _FastShape:
    kinds = _exact_types(inner) | {"usage": (dict, NoneType)}
    return _FastShape(outer, inner, kinds)


#: agy's hot events: text deltas, and the steps and result that carry usage
#: (contract.md §3.2, §3.5); any other key (tool or subagent details, a
#: structured output) leaves the line to the converter.
_FAST_SHAPES = {
    "step_update": _fast_shape(StepUpdateEvent, StepUpdate),
    "result": _fast_shape(ResultEvent, Result),
}


def fast_event(raw: dict[str, Any]) -> StepUpdateEvent | ResultEvent | None:
    """A step update without tool or subagent details, or a plain result,
    built without the converter when every field already has its exact type;
    None otherwise. The same value the converter builds: a generated-input
    test compares them."""
    # Whatever is missing or not of the fast path (an unhashable event name
    # included) raises: the converter decides then.
    try:
        name = raw["event"]
        outer, inner, kinds = _FAST_SHAPES[name]
        body = raw[name]
        if type(body) is not dict:
            return None
        for key, value in body.items():
            if type(value) not in kinds[key]:
                return None
    except (KeyError, TypeError):  # no such event or body, or a key left to the converter
        return None
    if "usage" in body and body["usage"] is not None:
        usage = _usage(body["usage"])
        if usage is None:
            return None
        body = body | {"usage": usage}
    try:
        return outer(inner(**body))
    except TypeError:  # a required field is missing (every other one was checked)
        return None


#: One decoder for every line (json.loads makes a new one per call).
_raw_decode = json.JSONDecoder().raw_decode


def parse_event(line: bytes | str) -> AgyEvent | MalformedLine:
    """Parse one stdout line; never raises."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    try:
        # agy writes no whitespace before its objects, so the decoder can start
        # at once; a line it refuses (leading whitespace, an error to word)
        # goes the long way.
        raw, end = _raw_decode(text)
        rest = text[end:]
        if rest and not rest.isspace():
            raise ValueError("extra data")
    except ValueError:
        try:
            raw = json.loads(text)
        except ValueError:
            return MalformedLine(line=text, reason="not JSON")
    if type(raw) is not dict:  # json makes no dict subclass
        return MalformedLine(line=text, reason="not a JSON object")
    fast = fast_event(raw)
    if fast is not None:
        return fast
    try:
        event: AgyEvent = _structure_event(raw, AgyEvent)
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
