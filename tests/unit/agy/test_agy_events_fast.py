"""agy's hot events (text deltas, steps and results with usage) parsed without
the converter: the same value the converter builds, for generated lines (exact
types, wrong types, extra keys)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agybridge.agy import events

_ANY = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
_USAGE = st.dictionaries(
    st.sampled_from(
        ["input_tokens", "output_tokens", "thinking_tokens", "cache_read_tokens", "total_tokens"]
    )
    | st.text(max_size=4),
    st.integers(0, 10**9),
    max_size=6,
)
#: Every key agy writes, each with values of its exact type (None where allowed).
_COMMON = {
    "conversation_id": st.none() | st.text(max_size=8),
    "duration_seconds": st.none() | st.floats(0, 10),
    "usage": st.none() | _USAGE,
}
_STEP = st.fixed_dictionaries(
    {
        "step_index": st.integers(0, 99),
        "state": st.sampled_from(["ACTIVE", "DONE", "ERROR"]),
        "step_type": st.sampled_from(["agent_response", "tool", "checkpoint"]),
    },
    optional={"text_delta": st.none() | st.text(), "tool_name": st.none() | st.text(), **_COMMON},
)
_RESULT = st.fixed_dictionaries(
    {"status": st.sampled_from(["SUCCESS", "ERROR"])},
    optional={
        "response": st.none() | st.text(),
        "error": st.none() | st.text(),
        "num_turns": st.none() | st.integers(0, 50),
        **_COMMON,
    },
)
#: What may spoil a body: another type for a field, a key the fast path leaves
#: to the converter, a usage count of another type.
_SPOIL = st.sampled_from(
    [
        "step_index",
        "state",
        "step_type",
        "text_delta",
        "status",
        "response",
        "num_turns",
        "conversation_id",
        "duration_seconds",
        "usage",
        "tool_info",
        "subagent_info",
        "structured_output",
        "denied_actions",
        "future_key",
    ]
)


@settings(max_examples=300)
@given(
    body=_STEP | _RESULT,
    event=st.sampled_from(["step_update", "result", "other"]),
    spoil=st.none() | st.tuples(_SPOIL, _ANY),
    spoil_usage=st.none() | _ANY,
    extra=st.booleans(),
)
def test_fast_path_equals_the_converter(
    body: dict[str, Any],
    event: str,
    spoil: tuple[str, Any] | None,
    spoil_usage: Any,
    extra: bool,
) -> None:
    if spoil is not None:
        body = body | {spoil[0]: spoil[1]}
    if spoil_usage is not None and isinstance(body.get("usage"), dict):
        body = body | {"usage": body["usage"] | {"total_tokens": spoil_usage}}
    raw: dict[str, Any] = {"event": event, event: body}
    if extra:
        raw["unknown_top_level"] = 1
    fast = events.fast_event(raw)
    if fast is None:
        return
    assert fast == events._converter.structure(raw, events.AgyEvent)  # type: ignore[arg-type]


@settings(max_examples=200)
@given(
    body=_STEP | _RESULT,
    event=st.sampled_from(["step_update", "result"]),
    drop=st.sampled_from(["step_index", "state", "step_type", "status"]),
)
def test_fast_path_leaves_a_missing_required_field_to_the_converter(
    body: dict[str, Any], event: str, drop: str
) -> None:
    raw: dict[str, Any] = {"event": event, event: {k: v for k, v in body.items() if k != drop}}
    fast = events.fast_event(raw)
    try:
        expected: object = events._converter.structure(raw, events.AgyEvent)  # type: ignore[arg-type]
    except events._SHAPE_ERRORS:
        assert fast is None
    else:
        assert fast is None or fast == expected


def test_a_plain_delta_takes_the_fast_path() -> None:
    line = {
        "event": "step_update",
        "step_update": {
            "conversation_id": "c",
            "step_index": 2,
            "state": "ACTIVE",
            "step_type": "agent_response",
            "text_delta": "hé",
        },
    }
    fast = events.fast_event(line)
    assert fast is not None and fast.step_update.text_delta == "hé"
    assert events.parse_event(json.dumps(line)) == fast


def test_steps_and_results_with_usage_take_the_fast_path() -> None:
    usage = {"input_tokens": 381, "output_tokens": 30, "total_tokens": 411}
    step = {"step_index": 3, "state": "DONE", "step_type": "agent_response", "text_delta": "\n"}
    step |= {"duration_seconds": 0.036, "usage": usage}
    result = {"status": "SUCCESS", "response": "hi", "duration_seconds": 0.5, "num_turns": 1}
    result |= {"usage": usage, "conversation_id": "c"}
    for line in (
        {"event": "step_update", "step_update": step},
        {"event": "result", "result": result},
    ):
        fast = events.fast_event(line)
        assert fast is not None
        assert fast == events._converter.structure(line, events.AgyEvent)  # type: ignore[arg-type]
        assert events.parse_event(json.dumps(line)) == fast


def test_a_result_with_one_unreadable_field_still_ends_the_turn() -> None:
    """A ``result`` is the only end of a turn (contract.md §2.3, §3.5): one field
    of an unexpected type (a null token count, a denied action that is not an
    object) must not turn the whole line into noise, or the prompt waits
    forever (the stall timeout is off by default). The field is dropped."""
    usage = {"input_tokens": None, "output_tokens": 3, "total_tokens": 3}
    body = {"status": "SUCCESS", "response": "hi\n", "usage": usage, "num_turns": 1}
    parsed = events.parse_event(json.dumps({"event": "result", "result": body}))
    assert isinstance(parsed, events.ResultEvent), parsed
    assert parsed.result.status == "SUCCESS" and parsed.result.response == "hi\n"
    assert parsed.result.usage is None and parsed.result.num_turns == 1
    body = {"status": "SUCCESS", "response": "", "denied_actions": ["command"]}
    parsed = events.parse_event(json.dumps({"event": "result", "result": body}))
    assert isinstance(parsed, events.ResultEvent), parsed
    assert parsed.result.denied_actions is None


def test_a_text_delta_survives_an_unreadable_usage() -> None:
    """agy's text is never dropped for a field beside it that cannot be read."""
    body = {
        "step_index": 2,
        "state": "DONE",
        "step_type": "agent_response",
        "text_delta": "done\n",
        "usage": {"input_tokens": "many"},
    }
    parsed = events.parse_event(json.dumps({"event": "step_update", "step_update": body}))
    assert isinstance(parsed, events.StepUpdateEvent), parsed
    assert parsed.step_update.text_delta == "done\n" and parsed.step_update.usage is None


def test_a_line_without_its_required_fields_stays_malformed() -> None:
    parsed = events.parse_event(json.dumps({"event": "result", "result": {"response": "x"}}))
    assert isinstance(parsed, events.MalformedLine)
    body = {"step_index": "two", "state": "DONE", "step_type": "agent_response"}
    parsed = events.parse_event(json.dumps({"event": "step_update", "step_update": body}))
    assert isinstance(parsed, events.MalformedLine)


_JSON = st.recursive(
    _ANY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(max_examples=300)
@given(
    value=_JSON | st.builds(lambda body: {"event": "step_update", "step_update": body}, _STEP),
    head=st.sampled_from(["", " ", "\n"]),
    tail=st.sampled_from(["", " ", "\r", "\t \n", "x", " {}", "]", "1"]),
    as_bytes=st.booleans(),
)
def test_parse_event_reads_a_line_as_json_loads_does(
    value: Any, head: str, tail: str, as_bytes: bool
) -> None:
    """The decoder started at the line's first character accepts and refuses
    what ``json.loads`` does: surrounding whitespace, trailing data."""
    text = head + json.dumps(value) + tail
    parsed = events.parse_event(text.encode() if as_bytes else text)
    try:
        raw = json.loads(text)
    except ValueError:
        assert parsed == events.MalformedLine(line=text, reason="not JSON")
        return
    if not isinstance(raw, dict):
        assert parsed == events.MalformedLine(line=text, reason="not a JSON object")
        return
    assert parsed == events.parse_event(json.dumps(raw))


def test_an_event_name_of_another_type_is_left_to_the_converter() -> None:
    for name in ([1], {"a": 1}, 1, None, True):
        assert events.fast_event({"event": name, "step_update": {}}) is None
    assert events.fast_event({"step_update": {}}) is None
    assert events.fast_event({"event": "step_update"}) is None
