"""The mapper against any step sequence the contract allows (and some it does
not): out of order, gaps, reused indexes, DONE without ACTIVE, unknown states
and types, tool steps that never finish, empty and split deltas.

Every update validates against the official schema, the mapper is pure (same
input, same output), every ``tool_call_update`` names a call announced
before it, no call is left running once the turn is over, and agy's text
reaches the client exactly once.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agybridge.acp import codec, models
from agybridge.agy import events
from agybridge.translate.mapper import TurnMapper

from ...acp_wire import assert_updates_valid

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
CWD = "/home/user/project"

STATES = st.sampled_from(["ACTIVE", "DONE", "ERROR", "CANCELED", "WAITING", ""])
TOOL_NAMES = st.sampled_from(
    ["run_command", "view_file", "write_to_file", "task_boundary", "invoke_subagent",
     "finish", "no_such_tool", "grep_search"]
)  # fmt: skip
STEP_TYPES = st.sampled_from(
    ["agent_response", "tool", "checkpoint", "user_input", "error_message", "subagent",
     "thought", "system_message"]
)  # fmt: skip
TEXT = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\ud83d", "\ude00"]))


@st.composite
def tool_step(draw: st.DrawFn, index: int) -> events.StepUpdate:
    name = draw(TOOL_NAMES)
    params = draw(
        st.none()
        | st.fixed_dictionaries(
            {},
            optional={
                "CommandLine": st.text(max_size=20),
                "AbsolutePath": st.sampled_from(["/home/user/project/a.py", "rel.py", ""]),
                "TargetFile": st.sampled_from(["/home/user/project/b.py", ""]),
                "TaskName": st.text(max_size=10),
                "Subagents": st.lists(st.fixed_dictionaries({"Role": st.text(max_size=5)})),
            },
        )
    )
    error = draw(st.none() | st.builds(events.ToolError, st.none() | st.text(max_size=5),
                                       st.none() | st.text(max_size=10)))  # fmt: skip
    info = events.ToolInfo(name=name, parameters=params,
                           output=draw(st.none() | st.text(max_size=30)), error=error)  # fmt: skip
    return events.StepUpdate(index, draw(STATES), "tool", tool_name=name, tool_info=info)


@st.composite
def step(draw: st.DrawFn) -> events.StepUpdate:
    index = draw(st.integers(0, 6))
    kind = draw(STEP_TYPES)
    if kind == "tool":
        return draw(tool_step(index))
    usage = draw(st.none() | st.builds(events.Usage, *[st.integers(0, 10**6)] * 5))
    delta = draw(st.none() | TEXT) if kind == "agent_response" else None
    sub = None
    if kind == "subagent":
        sub = {"subagents": [{"role": draw(st.text(max_size=5))}]}
    return events.StepUpdate(
        index, draw(STATES), kind, text_delta=delta, usage=usage, subagent_info=sub
    )


@st.composite
def turn(draw: st.DrawFn) -> tuple[list[events.StepUpdate], events.Result]:
    steps = draw(st.lists(step(), max_size=25))
    status = draw(st.sampled_from(["SUCCESS", "ERROR", "CANCELED", "INTERRUPTED", "RUNNING"]))
    deltas = "".join(s.text_delta or "" for s in steps if s.step_type == "agent_response")
    response = draw(st.sampled_from([deltas, deltas + "tail", "", "other"]))
    usage = draw(st.none() | st.builds(events.Usage, *[st.integers(0, 10**7)] * 5))
    error = draw(st.none() | st.text(max_size=20))
    return steps, events.Result(status=status, response=response, error=error, usage=usage)


def run(steps: list[events.StepUpdate], result: events.Result) -> list[models.SessionUpdate]:
    mapper = TurnMapper(message_id="m", cwd=CWD, now=NOW, terminals=True)
    updates: list[models.SessionUpdate] = []
    for item in steps:
        updates += mapper.feed(events.StepUpdateEvent(item))
    updates += mapper.feed(events.ResultEvent(result))
    return updates


def wire(updates: list[models.SessionUpdate]) -> list[Any]:
    return [codec.unstructure(u) for u in updates]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turn())
def test_any_step_sequence_maps_to_valid_consistent_updates(
    case: tuple[list[events.StepUpdate], events.Result],
) -> None:
    steps, result = case
    updates = run(steps, result)
    assert_updates_valid(updates)
    assert wire(updates) == wire(run(steps, result))  # pure
    announced: dict[str, str] = {}
    for update in updates:
        if isinstance(update, models.ToolCall):
            assert update.tool_call_id not in announced, "a call announced twice"
            announced[update.tool_call_id] = update.status or "pending"
        elif isinstance(update, models.ToolCallUpdate):
            assert update.tool_call_id in announced, "an update for a call never announced"
            if update.status is not None:
                assert announced[update.tool_call_id] not in ("completed", "failed"), (
                    "a finished call changed status"
                )
                announced[update.tool_call_id] = update.status
    assert all(status in ("completed", "failed") for status in announced.values()), announced
    shown = "".join(
        u.content.text
        for u in updates
        if isinstance(u, models.AgentMessageChunk) and isinstance(u.content, models.TextContent)
    )
    deltas = "".join(s.text_delta or "" for s in steps if s.step_type == "agent_response")
    assert shown.startswith(deltas)
    if result.status == "SUCCESS" and (result.response or "").startswith(deltas):
        assert shown.startswith(result.response or "")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(
    ["Subagents", "Role", "TypeName", "Prompt", "TaskName", "TaskStatus", "Action", "TaskId",
     "CommandLine", "AbsolutePath", "TargetFile", "StartLine", "EndLine", "Query", "Url",
     "ReplacementChunks", "Overwrite", "ServerName", "ToolName", "ImageName", "subagents",
     "role", "type_name"]
)  # fmt: skip
LOOSE = st.dictionaries(KEYS, JSON | st.lists(st.dictionaries(KEYS, JSON, max_size=3), max_size=2))


@settings(max_examples=500, deadline=None)
@given(
    kind=st.sampled_from(["tool", "subagent"]),
    name=TOOL_NAMES | st.sampled_from(["manage_task", "schedule", "call_mcp_tool", "view_file"]),
    state=STATES,
    params=LOOSE,
)
@example(kind="subagent", name="finish", state="ACTIVE", params={"Subagents": 5})
@example(kind="tool", name="invoke_subagent", state="DONE", params={"Subagents": True})
def test_any_json_in_tool_parameters_or_subagent_info_is_mapped(
    kind: str, name: str, state: str, params: dict[str, Any]
) -> None:
    """Whatever JSON agy puts in ``tool_info.parameters`` or ``subagent_info``
    (the parser keeps them as they come), the mapper answers with valid
    updates and never raises."""
    body: dict[str, Any] = {"step_index": 3, "state": state, "step_type": kind}
    if kind == "tool":
        body |= {"tool_name": name, "tool_info": {"name": name, "parameters": params}}
    else:
        body["subagent_info"] = {"subagents": params.get("Subagents"), **params}
    event = events.parse_event(json.dumps({"event": "step_update", "step_update": body}))
    mapper = TurnMapper(message_id="m", cwd=CWD, now=NOW)
    updates = mapper.feed(event)
    updates += mapper.feed(events.ResultEvent(events.Result(status="SUCCESS")))
    assert_updates_valid(updates)
