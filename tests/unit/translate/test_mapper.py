"""The pure turn mapper: agy events in, ACP updates out."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import models
from agybridge.agy import events
from agybridge.translate.mapper import MapperError, TurnMapper
from agybridge.translate.outcome import OutcomeKind

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def step(index: int, state: str, step_type: str, **fields: object) -> events.StepUpdateEvent:
    return events.StepUpdateEvent(
        events.StepUpdate(step_index=index, state=state, step_type=step_type, **fields)  # type: ignore[arg-type]
    )


def result(status: str = "SUCCESS", response: str = "", **fields: object) -> events.ResultEvent:
    return events.ResultEvent(events.Result(status=status, response=response, **fields))  # type: ignore[arg-type]


def shown_text(updates: list[models.SessionUpdate]) -> str:
    """Concatenated text of agent message chunks (chunking does not matter)."""
    return "".join(
        u.content.text
        for u in updates
        if isinstance(u, models.AgentMessageChunk) and isinstance(u.content, models.TextContent)
    )


def run_turn(mapper: TurnMapper, turn: list[events.AgyEvent]) -> list[models.SessionUpdate]:
    updates: list[models.SessionUpdate] = []
    for event in turn:
        updates += mapper.feed(event)
    return updates


# (description, events, expected shown text, expected outcome)
CASES = [
    (
        "ACTIVE and DONE carry different fragments: both are shown",
        [
            step(0, "DONE", "user_input"),
            step(2, "ACTIVE", "agent_response", text_delta="pong"),
            step(2, "DONE", "agent_response", text_delta="\n"),
            result(response="pong\n"),
        ],
        "pong\n",
        OutcomeKind.END_TURN,
    ),
    (
        "a response with nothing streamed is shown once",
        [step(0, "DONE", "user_input"), result(response="only in result\n")],
        "only in result\n",
        OutcomeKind.END_TURN,
    ),
    (
        "the unstreamed suffix of the response is shown, the rest not again",
        [step(2, "ACTIVE", "agent_response", text_delta="hel"), result(response="hello")],
        "hello",
        OutcomeKind.END_TURN,
    ),
    (
        "a response that does not extend the stream is not shown again",
        [step(2, "ACTIVE", "agent_response", text_delta="streamed"), result(response="other")],
        "streamed",
        OutcomeKind.END_TURN,
    ),
    (
        "an ERROR result becomes an explanatory message",
        [
            step(1, "DONE", "error_message"),
            result(status="ERROR", error="Individual quota reached. Resets in 1h."),
        ],
        "⚠️ agy could not run this turn: Individual quota reached. Resets in 1h. "
        "(quota resets at 2026-11-30T13:00:00Z). Wait for the reset, or switch to another model.",
        OutcomeKind.AGY_ERROR,
    ),
    (
        "several agent_response steps in one turn are all shown",
        [
            step(2, "DONE", "agent_response", text_delta="LAUNCHED\n"),
            step(5, "DONE", "tool", tool_name="run_command"),
            step(7, "DONE", "agent_response", text_delta="RESULT=1\n"),
            result(response="LAUNCHED\nRESULT=1\n"),
        ],
        "LAUNCHED\nRESULT=1\n",
        OutcomeKind.END_TURN,
    ),
    (
        "unknown step types, states and events do not break the turn",
        [
            step(1, "DONE", "context_compaction"),
            step(2, "WAITING", "agent_response", text_delta="ok"),
            events.UnknownEvent({"event": "heartbeat"}),
            events.MalformedLine("garbage", "not JSON"),
            result(response="ok"),
        ],
        "ok",
        OutcomeKind.END_TURN,
    ),
]


@pytest.mark.parametrize(
    ("events_in", "text", "outcome"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_table(events_in: list[events.AgyEvent], text: str, outcome: OutcomeKind) -> None:
    """Each recorded turn shows exactly its text once and ends as expected."""
    mapper = TurnMapper(message_id="m1", now=NOW)
    updates = run_turn(mapper, events_in)
    assert shown_text(updates) == text
    assert mapper.outcome is not None and mapper.outcome.kind is outcome
    assert all(u.message_id == "m1" for u in updates if isinstance(u, models.AgentMessageChunk))


def test_unrecognised_output_is_counted() -> None:
    """Forward compatibility: what the bridge cannot map is counted by kind."""
    mapper = TurnMapper(message_id="m")
    run_turn(
        mapper,
        [
            step(1, "DONE", "context_compaction"),
            step(2, "DONE", "context_compaction"),
            events.UnknownEvent({"event": "x"}),
            result(),
        ],
    )
    assert mapper.unrecognised == {"step_type:context_compaction": 2, "event:x": 1}


def test_cancelled_error_result_is_a_cancellation() -> None:
    """After a cancel, agy's ERROR "interrupted" result is not shown as an error."""
    mapper = TurnMapper(message_id="m", cancel_requested=True)
    updates = run_turn(
        mapper,
        [
            step(2, "ACTIVE", "agent_response", text_delta="par"),
            result(status="ERROR", error="interrupted", response=""),
        ],
    )
    assert shown_text(updates) == "par"
    assert mapper.outcome is not None and mapper.outcome.kind is OutcomeKind.CANCELLED


def test_event_after_result_is_an_error() -> None:
    """Exactly one result per turn: anything after it is a protocol error."""
    mapper = TurnMapper(message_id="m")
    mapper.feed(result())
    with pytest.raises(MapperError, match="StepUpdateEvent when the turn state is finished"):
        mapper.feed(step(3, "DONE", "agent_response", text_delta="late"))


@given(
    text=st.text(min_size=0, max_size=200),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    streamed_share=st.integers(min_value=0, max_value=200),
)
def test_text_arrives_exactly_once(text: str, cuts: list[int], streamed_share: int) -> None:
    """Whatever part of the text was streamed, and in whatever fragments, the user
    sees the turn's text exactly once."""
    streamed = text[: min(streamed_share, len(text))]
    bounds = sorted({0, len(streamed), *(c for c in cuts if c < len(streamed))})
    fragments = [streamed[a:b] for a, b in itertools.pairwise(bounds)]
    turn: list[events.AgyEvent] = [step(0, "DONE", "user_input")]
    turn += [step(2, "ACTIVE", "agent_response", text_delta=f) for f in fragments if f]
    turn.append(result(response=text))
    assert shown_text(run_turn(TurnMapper(message_id="m"), turn)) == text
