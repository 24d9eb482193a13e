"""agy's hot event, a text delta, parsed without the converter: the same value
the converter builds, for generated lines (exact types, wrong types, extra keys)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agybridge.agy import events

_ANY = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
_FIELDS = {
    "conversation_id": st.none() | st.text(max_size=8) | _ANY,
    "step_index": st.integers() | _ANY,
    "state": st.sampled_from(["ACTIVE", "DONE", "ERROR"]) | _ANY,
    "step_type": st.sampled_from(["agent_response", "tool"]) | _ANY,
    "text_delta": st.none() | st.text() | _ANY,
}
_STEP = st.fixed_dictionaries(
    {"step_index": _FIELDS["step_index"]},
    optional={
        **{k: v for k, v in _FIELDS.items() if k != "step_index"},
        "duration_seconds": st.floats(0, 10),
        "future_key": _ANY,
    },
)


@given(step=_STEP, event=st.sampled_from(["step_update", "result", "other"]), extra=st.booleans())
def test_fast_path_equals_the_converter(step: dict[str, Any], event: str, extra: bool) -> None:
    raw: dict[str, Any] = {"event": event, event: step}
    if extra:
        raw["unknown_top_level"] = 1
    fast = events.fast_step_update(raw)
    if fast is None:
        return
    assert fast == events._converter.structure(raw, events.AgyEvent)  # type: ignore[arg-type]


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
    fast = events.fast_step_update(line)
    assert fast is not None and fast.step_update.text_delta == "hé"
    assert events.parse_event(json.dumps(line)) == fast
