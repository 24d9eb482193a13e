"""The turn mapper beyond text: usage, notices, errors, images and what to read first.

tests/unit/translate/test_mapper.py covers text delivery and outcomes, test_plan.py plans;
every update produced here is also checked against the official ACP schema.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agybridge.acp import models
from agybridge.agy import events
from agybridge.agy.stderr import StderrKind, classify_stderr
from agybridge.translate import notices, usage
from agybridge.translate.card_text import fenced
from agybridge.translate.mapper import TurnMapper
from agybridge.translate.observation import ImageData, Observation
from agybridge.translate.outcome import OutcomeKind, TurnOutcome

from ...acp_wire import assert_updates_valid

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
CWD = "/home/user/project"

Event = events.AgyEvent | events.MalformedLine


def step(index: int, state: str, step_type: str, **fields: Any) -> events.StepUpdateEvent:
    return events.StepUpdateEvent(
        events.StepUpdate(step_index=index, state=state, step_type=step_type, **fields)
    )


def tool(
    index: int, state: str, name: str, params: dict[str, Any] | None = None, **info: Any
) -> events.StepUpdateEvent:
    return step(
        index,
        state,
        "tool",
        tool_name=name,
        tool_info=events.ToolInfo(name=name, parameters=params, **info),
    )


def result(status: str = "SUCCESS", response: str = "", **fields: Any) -> events.ResultEvent:
    return events.ResultEvent(events.Result(status=status, response=response, **fields))


def mapper(**fields: Any) -> TurnMapper:
    return TurnMapper(**{"message_id": "m1", "cwd": CWD, "now": NOW, **fields})


def feed_all(
    turn_mapper: TurnMapper, items: Sequence[Event | str | tuple[Event, Observation]]
) -> list[models.SessionUpdate]:
    """Feed events (with an observation) and stderr lines (str) in order; schema-checked."""
    updates: list[models.SessionUpdate] = []
    for item in items:
        if isinstance(item, str):
            updates += turn_mapper.feed_stderr(classify_stderr(item))
        elif isinstance(item, tuple):
            updates += turn_mapper.feed(*item)
        else:
            updates += turn_mapper.feed(item)
    assert_updates_valid(updates)
    return updates


def shown_text(updates: Sequence[models.SessionUpdate]) -> str:
    return "".join(
        u.content.text
        for u in updates
        if isinstance(u, models.AgentMessageChunk) and isinstance(u.content, models.TextContent)
    )


def of_type(updates: Sequence[models.SessionUpdate], kind: type) -> list[Any]:
    return [u for u in updates if isinstance(u, kind)]


def captured_stderr(samples_dir: Path, prefix: str) -> str:
    text = (samples_dir / "stderr-lines-observed.txt").read_text(encoding="utf-8")
    [line] = [line for line in text.splitlines() if line.startswith(prefix)]
    return line


# --- usage ----------------------------------------------------------------------------

CHECKPOINT = events.Usage(input_tokens=90, output_tokens=10, total_tokens=100)
REPLY = events.Usage(
    input_tokens=15575,
    output_tokens=20,
    thinking_tokens=19,
    cache_read_tokens=5,
    total_tokens=15595,
)
REPLY2 = events.Usage(input_tokens=16000, output_tokens=30, total_tokens=16030)


def test_usage_updates_follow_model_steps_without_repeats() -> None:
    """Each new context figure is sent once; checkpoints and the result add no repeat."""
    turn = mapper(context_size=1_048_576)
    updates = feed_all(
        turn,
        [
            step(1, "DONE", "checkpoint", usage=CHECKPOINT),
            step(2, "ACTIVE", "agent_response", text_delta="hi"),
            step(2, "DONE", "agent_response", text_delta="\n", usage=REPLY),
            step(3, "DONE", "checkpoint", usage=CHECKPOINT),
            step(4, "DONE", "agent_response", text_delta="more", usage=REPLY2),
            step(5, "DONE", "agent_response", text_delta=".", usage=REPLY2),
            result(
                response="hi\nmore.", usage=usage.total([CHECKPOINT, REPLY, CHECKPOINT, REPLY2])
            ),
        ],
    )
    assert of_type(updates, models.UsageUpdate) == [
        models.UsageUpdate(used=15575 + 5 + 20, size=1_048_576),
        models.UsageUpdate(used=16030, size=1_048_576),
    ]
    assert turn.response_meta()["context"] == {"used": 16030, "size": 1_048_576}


def test_no_usage_update_without_model_usage() -> None:
    """A turn whose steps report no model usage sends no usage_update at all."""
    turn = mapper()
    updates = feed_all(
        turn,
        [
            step(1, "DONE", "checkpoint", usage=CHECKPOINT),
            result(response="ok", usage=CHECKPOINT),
        ],
    )
    assert of_type(updates, models.UsageUpdate) == []
    assert "context" not in turn.response_meta()


TURN_STEPS = [
    step(1, "DONE", "checkpoint", usage=CHECKPOINT),
    step(2, "DONE", "agent_response", usage=REPLY),
]
STEP_SUM = usage.add(CHECKPOINT, REPLY)
OLDER = events.Usage(input_tokens=1000, output_tokens=50, total_tokens=1050)

# (description, mapper fields, result usage, expected per-turn usage)
TURN_USAGE_CASES = [
    (
        "second turn of a process: result minus the previous result",
        {"previous_result_usage": OLDER},
        usage.add(OLDER, STEP_SUM),
        STEP_SUM,
    ),
    (
        "first turn of a fresh process: the result itself",
        {"fresh_process": True},
        usage.add(STEP_SUM, CHECKPOINT),
        usage.add(STEP_SUM, CHECKPOINT),
    ),
    (
        "first turn of a resumed process: the turn's own steps, not older turns",
        {"fresh_process": False},
        usage.add(OLDER, STEP_SUM),
        STEP_SUM,
    ),
    (
        "counters reset below the previous result: the turn's own steps",
        {"previous_result_usage": usage.add(OLDER, OLDER)},
        OLDER,
        STEP_SUM,
    ),
    (
        "no usage on the result: the turn's own steps",
        {"previous_result_usage": OLDER},
        None,
        STEP_SUM,
    ),
]


@pytest.mark.parametrize(
    ("fields", "result_usage", "expected"),
    [c[1:] for c in TURN_USAGE_CASES],
    ids=[c[0] for c in TURN_USAGE_CASES],
)
def test_turn_usage_meta(
    fields: dict[str, Any], result_usage: events.Usage | None, expected: events.Usage
) -> None:
    """The prompt response's usage meta counts this turn exactly once."""
    turn = mapper(**fields)
    feed_all(turn, [*TURN_STEPS, result(response="", usage=result_usage)])
    assert turn.response_meta()["usage"] == usage.to_meta(expected)


# --- structured output ----------------------------------------------------------------

ANSWER = {"answer": 42, "items": ["ä", "b"]}


def test_structured_output_is_one_fenced_json_chunk() -> None:
    """With --json-schema the JSON is shown once, fenced, and kept in the response meta."""
    turn = mapper()
    text = json.dumps(ANSWER, separators=(",", ":"), ensure_ascii=False)
    updates = feed_all(
        turn, [step(0, "DONE", "user_input"), result(response=text, structured_output=ANSWER)]
    )
    expected = fenced(json.dumps(ANSWER, indent=2, ensure_ascii=False), "json")
    assert updates == [
        models.AgentMessageChunk(content=models.TextContent(text=expected), message_id="m1")
    ]
    assert text not in shown_text(updates)
    assert turn.response_meta()["structuredOutput"] == ANSWER
    assert turn.outcome is not None and turn.outcome.kind is OutcomeKind.END_TURN


def test_structured_output_streamed_as_deltas_is_shown_once_clean() -> None:
    """Under --json-schema the JSON line agy streams is held back: only the clean
    object is shown, readable (contract.md §11)."""
    text = json.dumps({**ANSWER, "toolAction": "x", "toolSummary": "y"})
    updates = feed_all(
        mapper(structured=True),
        [
            step(2, "ACTIVE", "agent_response", text_delta=text[:9]),
            step(2, "DONE", "agent_response", text_delta=text[9:] + "\n"),
            result(response=text + "\n", structured_output=ANSWER),
        ],
    )
    assert shown_text(updates) == fenced(json.dumps(ANSWER, indent=2, ensure_ascii=False), "json")


def test_structured_output_streamed_when_the_schema_was_unknown() -> None:
    """A mapper that was not told of the schema showed the streamed JSON: it is not
    repeated (the session tells it from the settings or init.json_schema)."""
    text = json.dumps(ANSWER)
    updates = feed_all(
        mapper(),
        [
            step(2, "ACTIVE", "agent_response", text_delta=text),
            result(response=text, structured_output=ANSWER),
        ],
    )
    assert shown_text(updates) == text


def test_structured_mapper_shows_prose_at_once() -> None:
    """Under --json-schema, text that cannot be the JSON answer is not held."""
    turn = mapper(structured=True)
    assert turn.feed(step(2, "ACTIVE", "agent_response", text_delta="  ")) == []
    updates = feed_all(turn, [step(2, "ACTIVE", "agent_response", text_delta="Sorry, ")])
    assert shown_text(updates) == "  Sorry, "
    updates = feed_all(turn, [result(response="  Sorry, no.")])
    assert shown_text(updates) == "no."


# --- notices: soft deny, print timeout ------------------------------------------------


def test_soft_deny_then_empty_success_explains_the_denial(samples_dir: Path) -> None:
    """A soft-denied tool and an empty SUCCESS end in a message naming the permission."""
    turn = mapper()
    line = captured_stderr(samples_dir, "jetski:")
    updates = feed_all(turn, [step(0, "DONE", "user_input"), line, result(response="")])
    text = shown_text(updates)
    assert text.strip()
    assert text.startswith("⚠️ ")
    assert '"command"' in text and "`command(<program>)`" in text
    assert "permissions.allow" in text
    assert turn.outcome is not None and turn.outcome.kind is OutcomeKind.END_TURN
    assert turn.response_meta()["deniedPermissions"] == ["command"]


def test_denied_actions_on_the_result() -> None:
    """``result.denied_actions`` alone explains the denial, after the reply text."""
    turn = mapper()
    denied = [{"action": "command", "display_name": "RunCommand"}]
    updates = feed_all(
        turn,
        [
            step(2, "DONE", "agent_response", text_delta="I could not run it."),
            result(response="I could not run it.", denied_actions=denied),
        ],
    )
    text = shown_text(updates)
    assert text.startswith("I could not run it.\n\n⚠️ ")
    assert text.count('"command"') == 1
    assert turn.response_meta()["deniedPermissions"] == ["command"]


def test_stderr_and_result_denials_are_named_once(samples_dir: Path) -> None:
    """The same permission denied on stderr and in denied_actions is named once."""
    turn = mapper()
    updates = feed_all(
        turn,
        [
            captured_stderr(samples_dir, "jetski:"),
            result(denied_actions=[{"action": "command"}, {"action": "write_file"}]),
        ],
    )
    text = shown_text(updates)
    assert '"command", "write_file"' in text
    assert turn.response_meta()["deniedPermissions"] == ["command", "write_file"]


def test_soft_deny_without_a_permission_name() -> None:
    """A soft-deny notice without a permission name gives no made-up allow rule."""
    line = "jetski: no output produced — a tool was auto-denied."
    assert classify_stderr(line).kind is StderrKind.SOFT_DENY
    text = shown_text(feed_all(mapper(), [line, result()]))
    assert text.strip() and "a tool(" not in text


def test_print_timeout_message() -> None:
    """agy's print-timeout notice is explained after the partial answer."""
    updates = feed_all(
        mapper(),
        [
            step(2, "ACTIVE", "agent_response", text_delta="partial"),
            "[agy] print timeout (5m0s) reached; stopping",
            result(response="partial"),
        ],
    )
    assert shown_text(updates) == "partial\n\n⚠️ " + notices.PRINT_TIMEOUT_MESSAGE


# --- errors ---------------------------------------------------------------------------


def test_quota_error_from_agy_error_line_and_result(samples_dir: Path) -> None:
    """The AGY_ERROR details and the ERROR result make one message with the reset time."""
    turn = mapper()
    error = (
        "Individual quota reached. Please upgrade your subscription to increase your limits. "
        "Resets in 167h51m3s."
    )
    updates = feed_all(
        turn,
        [
            captured_stderr(samples_dir, "error: Individual quota"),
            captured_stderr(samples_dir, "AGY_ERROR:"),
            step(1, "DONE", "error_message"),
            result(status="ERROR", error=error),
        ],
    )
    assert shown_text(updates) == (
        f"⚠️ agy could not run this turn: {error} (quota resets at 2026-12-07T11:51:03Z). "
        "Wait for the reset, or switch to another model."
    )
    # The cause, with the reset, on the notice and the response (issue 26).
    assert turn.response_meta()["agybridge"] == {
        "cause": "quota",
        "resetsIn": "167h51m3s",
        "resetsAt": "2026-12-07T11:51:03Z",
    }
    assert turn.outcome == TurnOutcome(OutcomeKind.AGY_ERROR, "ERROR", error)
    assert turn.response_meta()["agyError"] == {
        "error": error,
        "resetsIn": "167h51m3s",
        "resetsAt": "2026-12-07T11:51:03Z",
        "shortError": "RESOURCE_EXHAUSTED (code 429): " + error,
        "status": "RESOURCE_EXHAUSTED",
        "errorCode": 429,
        "codeKind": "http",
        "retryable": True,
        "errorId": "6baa4ce9-c373-4086-bb0d-fbb8421bacf3-1",
    }


def test_non_quota_agy_error_keeps_its_details() -> None:
    """Another AGY_ERROR is shown as an agy error; its details stay in camelCase meta."""
    details = {
        "short_error": "agent executor error: API key not valid",
        "status": "INVALID_ARGUMENT",
        "error_code": 400,
    }
    turn = mapper()
    updates = feed_all(
        turn,
        [
            "AGY_ERROR: " + json.dumps(details),
            result(status="ERROR", error="agent executor error: API key not valid"),
        ],
    )
    assert shown_text(updates) == (
        "⚠️ agy error: agent executor error: API key not valid. If retrying does not help, "
        "run the prompt with `agy -p` in a terminal to see agy's whole error."
    )
    assert turn.quota is None
    assert turn.response_meta()["agyError"] == {
        "shortError": "agent executor error: API key not valid",
        "status": "INVALID_ARGUMENT",
        "errorCode": 400,
    }


# --- images and what to read ----------------------------------------------------------

PNG_DATA = ImageData(mime_type="image/png", data="iVBORw0KGgo=")


def test_images_on_agent_response_done() -> None:
    """Verified images named in the reply follow its text as image chunks."""
    seen = Observation(images={f"{CWD}/plot.png": PNG_DATA})
    updates = feed_all(
        mapper(),
        [
            step(2, "ACTIVE", "agent_response", text_delta="Saved plot.png"),
            (step(2, "DONE", "agent_response", text_delta="\n"), seen),
        ],
    )
    assert updates[-2:] == [
        models.AgentMessageChunk(content=models.TextContent(text="\n"), message_id="m1"),
        models.AgentMessageChunk(
            content=models.ImageContent(data=PNG_DATA.data, mime_type="image/png"),
            message_id="m1",
        ),
    ]


TARGET = f"{CWD}/src/app.py"

# (description, events fed before, the event asked about, files to read, image candidates)
PATHS_CASES: list[tuple[str, list[Event], Event, list[str], list[str]]] = [
    (
        "edit tool: its absolute target",
        [],
        tool(3, "ACTIVE", "write_to_file", {"TargetFile": TARGET}),
        [TARGET],
        [],
    ),
    (
        "edit tool with a relative target: nothing",
        [],
        tool(3, "ACTIVE", "replace_file_content", {"TargetFile": "src/app.py"}),
        [],
        [],
    ),
    (
        "edit tool done with an image in its output: both",
        [],
        tool(3, "DONE", "write_to_file", {"TargetFile": TARGET}, output="also wrote out.png"),
        [TARGET],
        [f"{CWD}/out.png"],
    ),
    (
        "finished command: images named in its output",
        [],
        tool(
            4, "DONE", "run_command", {"CommandLine": "plot"}, output="saved chart.png, /tmp/x.jpg"
        ),
        [],
        [f"{CWD}/chart.png", "/tmp/x.jpg"],
    ),
    (
        "running command: no images yet",
        [],
        tool(4, "ACTIVE", "run_command", {"CommandLine": "plot"}, output="saved chart.png"),
        [],
        [],
    ),
    (
        "generate_image: paths in its parameters",
        [],
        tool(5, "DONE", "generate_image", {"ImageName": "cat", "ImagePaths": ["/refs/cat.png"]}),
        [],
        ["/refs/cat.png"],
    ),
    (
        "reply split across ACTIVE and DONE: the whole reply is searched",
        [step(2, "ACTIVE", "agent_response", text_delta="See `shots/a b")],
        step(2, "DONE", "agent_response", text_delta=".png` for details"),
        [],
        [f"{CWD}/shots/a b.png"],
    ),
    (
        "ACTIVE reply: not searched until DONE",
        [],
        step(2, "ACTIVE", "agent_response", text_delta="see a.png"),
        [],
        [],
    ),
    ("result: nothing", [], result(response="a.png"), [], []),
    (
        "init: nothing",
        [],
        events.InitEvent(conversation_id="c", init=events.InitInfo(cwd=CWD)),
        [],
        [],
    ),
]


@pytest.mark.parametrize(
    ("before", "event", "files", "images"),
    [c[1:] for c in PATHS_CASES],
    ids=[c[0] for c in PATHS_CASES],
)
def test_paths_to_read(
    before: list[Event], event: Event, files: list[str], images: list[str]
) -> None:
    """The mapper asks for edit targets and image candidates, nothing else."""
    turn = mapper()
    feed_all(turn, before)
    found_files, found_images = turn.needs.paths_to_read(event)
    assert (list(found_files), list(found_images)) == (files, images)


# --- ids ------------------------------------------------------------------------------


def test_tool_call_ids_are_unique_per_turn() -> None:
    """The same step index in two turns gets two ids, prefixed by each turn's message id."""
    ids = []
    for message_id in ("msg-1", "msg-2"):
        updates = feed_all(
            mapper(message_id=message_id),
            [
                tool(3, "ACTIVE", "run_command", {"CommandLine": "ls"}),
                tool(7, "DONE", "view_file", {"AbsolutePath": TARGET}),
                tool(3, "DONE", "run_command", {"CommandLine": "ls"}, output="a"),
                result(),
            ],
        )
        ids += [u.tool_call_id for u in of_type(updates, models.ToolCall)]
        updated = {u.tool_call_id for u in of_type(updates, models.ToolCallUpdate)}
        assert updated <= {u.tool_call_id for u in of_type(updates, models.ToolCall)}
    assert ids == ["msg-1-tool-3", "msg-1-tool-7", "msg-2-tool-3", "msg-2-tool-7"]
    assert len(set(ids)) == len(ids)
