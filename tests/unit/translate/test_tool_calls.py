"""Tool steps -> ACP tool_call / tool_call_update (contract.md §3.4, acp/brief.md §3)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge import causes
from agybridge.acp import models
from agybridge.agy import StepUpdate, events
from agybridge.translate.card_text import MAX_CONTENT_CHARS, fenced
from agybridge.translate.observation import NO_OBSERVATION, ImageData, Observation
from agybridge.translate.tool_calls import ToolCallTracker

from ...acp_wire import assert_updates_valid
from ...conftest import sample_files

CWD = "/home/user/project"
TARGET = f"{CWD}/src/app.py"


def tool(
    index: int,
    state: str,
    *,
    name: str | None = "run_command",
    params: dict[str, Any] | None = None,
    output: str | None = None,
    error: str | None = None,
    info_name: str | None = None,
) -> StepUpdate:
    return StepUpdate(
        step_index=index,
        state=state,
        step_type="tool",
        tool_name=name,
        tool_info=events.ToolInfo(
            name=info_name if info_name is not None else name,
            parameters=params,
            output=output,
            error=events.ToolError(type="TOOL_ERROR", message=error) if error is not None else None,
        ),
    )


def text_content(text: str) -> models.ContentToolCallContent:
    return models.ContentToolCallContent(models.TextContent(text=text))


def run(
    tracker: ToolCallTracker, steps: Sequence[StepUpdate | tuple[StepUpdate, Observation]]
) -> list[list[models.SessionUpdate]]:
    """Feed each step (with its observation); the updates of each, schema-checked."""
    out = []
    for item in steps:
        step, seen = item if isinstance(item, tuple) else (item, NO_OBSERVATION)
        out.append(tracker.feed(step, seen))
    assert_updates_valid([u for updates in out for u in updates])
    return out


LS = {"CommandLine": "ls -la"}
DENIED = (
    "error executing cascade step: CORTEX_STEP_TYPE_RUN_COMMAND: granting access to C:\\: "
    "Access is denied."
)
#: The PreToolUse hook denial in untether-1.3.1-hook-deny-mid-turn-user-input.
HOOK_DENIED = "tool call denied by pre-tool hook: probe hook deny: the user refused this command"
INVALID_ARGS = "invalid arguments:\n- missing property 'toolSummary'"

# (description, steps fed in order, the updates each step must produce)
LIFECYCLE_CASES: list[tuple[str, list[StepUpdate], list[list[models.SessionUpdate]]]] = [
    (
        "ACTIVE announces in_progress, DONE completes with fenced output",
        [tool(4, "ACTIVE", params=LS), tool(4, "DONE", params=LS, output="a\nb\n")],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-4",
                    title="Run ls -la",
                    kind="execute",
                    status="in_progress",
                    raw_input=LS,
                )
            ],
            [
                models.ToolCallUpdate(
                    tool_call_id="m1-tool-4",
                    status="completed",
                    content=[text_content("```\na\nb\n```")],
                    raw_output={"output": "a\nb\n"},
                )
            ],
        ],
    ),
    (
        "first sight DONE: the call is announced, then completed (CRLF shown as LF)",
        [tool(4, "DONE", params=LS, output="hello_headless_demo\r\n")],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-4",
                    title="Run ls -la",
                    kind="execute",
                    status="in_progress",
                    raw_input=LS,
                ),
                models.ToolCallUpdate(
                    tool_call_id="m1-tool-4",
                    status="completed",
                    content=[text_content("```\nhello_headless_demo\n```")],
                    raw_output={"output": "hello_headless_demo\r\n"},
                ),
            ]
        ],
    ),
    (
        "repeated ACTIVE sends nothing new; DONE without output has no content",
        [tool(2, "ACTIVE", params=LS), tool(2, "ACTIVE", params=LS), tool(2, "DONE", params=LS)],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-2",
                    title="Run ls -la",
                    kind="execute",
                    status="in_progress",
                    raw_input=LS,
                )
            ],
            [],
            [models.ToolCallUpdate(tool_call_id="m1-tool-2", status="completed")],
        ],
    ),
    (
        "ERROR fails the call with agy's message as content",
        [tool(8, "ACTIVE", params=LS), tool(8, "ERROR", params=LS, error=DENIED)],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-8",
                    title="Run ls -la",
                    kind="execute",
                    status="in_progress",
                    raw_input=LS,
                )
            ],
            [
                models.ToolCallUpdate(
                    tool_call_id="m1-tool-8",
                    status="failed",
                    content=[text_content(DENIED)],
                    raw_output={"error": {"type": "TOOL_ERROR", "message": DENIED}},
                )
            ],
        ],
    ),
    (
        "a DONE step carrying tool_info.error is a failure too",
        [tool(3, "DONE", name="view_file", error=INVALID_ARGS)],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-3",
                    title="Read file",
                    kind="read",
                    status="in_progress",
                    raw_input={},
                ),
                models.ToolCallUpdate(
                    tool_call_id="m1-tool-3",
                    status="failed",
                    content=[text_content(INVALID_ARGS)],
                    raw_output={"error": {"type": "TOOL_ERROR", "message": INVALID_ARGS}},
                ),
            ]
        ],
    ),
    (
        "ERROR without an error object still fails, with a generic message",
        [tool(3, "ERROR", params=LS)],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-3",
                    title="Run ls -la",
                    kind="execute",
                    status="in_progress",
                    raw_input=LS,
                ),
                models.ToolCallUpdate(
                    tool_call_id="m1-tool-3",
                    status="failed",
                    content=[text_content("the tool failed")],
                ),
            ]
        ],
    ),
    (
        "parameters first seen on DONE update title, kind, locations and rawInput",
        [
            tool(6, "ACTIVE", name="write_to_file"),
            tool(6, "DONE", name="write_to_file", params={"TargetFile": TARGET}),
        ],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-6",
                    title="Write file",
                    kind="edit",
                    status="in_progress",
                    raw_input={},
                )
            ],
            [
                models.ToolCallUpdate(
                    tool_call_id="m1-tool-6",
                    title="Write src/app.py",
                    kind="edit",
                    locations=[models.ToolCallLocation(path=TARGET)],
                    raw_input={"TargetFile": TARGET},
                ),
                models.ToolCallUpdate(tool_call_id="m1-tool-6", status="completed"),
            ],
        ],
    ),
    (
        "after completion, further sights of the step send nothing",
        [
            tool(4, "DONE", params=LS, output="x"),
            tool(4, "DONE", params=LS, output="x"),
            tool(4, "ERROR", params=LS, error="late"),
        ],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-4",
                    title="Run ls -la",
                    kind="execute",
                    status="in_progress",
                    raw_input=LS,
                ),
                models.ToolCallUpdate(
                    tool_call_id="m1-tool-4",
                    status="completed",
                    content=[text_content("```\nx\n```")],
                    raw_output={"output": "x"},
                ),
            ],
            [],
            [],
        ],
    ),
    (
        "the hidden finish tool never gets a card",
        [tool(9, "ACTIVE", name="finish"), tool(9, "DONE", name="finish", output="{}")],
        [[], []],
    ),
    (
        "the name comes from tool_info when tool_name is missing",
        [tool(1, "ACTIVE", name=None, info_name="list_dir", params={"DirectoryPath": CWD})],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-1",
                    title="List .",
                    kind="read",
                    status="in_progress",
                    locations=[models.ToolCallLocation(path=CWD)],
                    raw_input={"DirectoryPath": CWD},
                )
            ]
        ],
    ),
    (
        "a step with no name at all is an unknown tool, never dropped",
        [tool(1, "ACTIVE", name=None, info_name="")],
        [
            [
                models.ToolCall(
                    tool_call_id="m1-tool-1",
                    title="Unknown tool",
                    kind="other",
                    status="in_progress",
                    raw_input={},
                )
            ]
        ],
    ),
]


@pytest.mark.parametrize(
    ("steps", "expected"), [c[1:] for c in LIFECYCLE_CASES], ids=[c[0] for c in LIFECYCLE_CASES]
)
def test_lifecycle(steps: list[StepUpdate], expected: list[list[models.SessionUpdate]]) -> None:
    """Each step sequence produces exactly the expected, schema-valid updates."""
    tracker = ToolCallTracker(call_prefix="m1-tool", cwd=CWD)
    assert run(tracker, steps) == expected


def edit(index: int, state: str, output: str | None = None) -> StepUpdate:
    return tool(index, state, name="write_to_file", params={"TargetFile": TARGET}, output=output)


def files(*text: str | None) -> Observation:
    """The edit target as the session read it (no argument: not read)."""
    return Observation(files={TARGET: text[0]} if text else {})


# (description, what was read at ACTIVE, what was read at DONE, output, expected completion content)
DIFF_CASES: list[tuple[str, Observation, Observation, str | None, list[Any] | None]] = [
    (
        "changed file: a diff from the first read to the last",
        files("old\n"),
        files("new\n"),
        None,
        [models.DiffContent(path=TARGET, old_text="old\n", new_text="new\n")],
    ),
    (
        "new file: oldText is None",
        files(None),
        files("hello\n"),
        None,
        [models.DiffContent(path=TARGET, old_text=None, new_text="hello\n")],
    ),
    ("unchanged file: no diff", files("same"), files("same"), None, None),
    ("file never read at first sight: no diff", files(), files("new"), None, None),
    ("file not read at the end: no diff", files("old"), files(), None, None),
    ("file deleted by the edit: no diff", files("old"), files(None), None, None),
    (
        "a diff replaces the output text",
        files("a"),
        files("b"),
        "Created file",
        [models.DiffContent(path=TARGET, old_text="a", new_text="b")],
    ),
    (
        "no diff: the output is shown instead",
        files("a"),
        files("a"),
        "nothing to do",
        [text_content("```\nnothing to do\n```")],
    ),
]


@pytest.mark.parametrize(
    ("before", "after", "output", "content"),
    [c[1:] for c in DIFF_CASES],
    ids=[c[0] for c in DIFF_CASES],
)
def test_edit_diffs(
    before: Observation, after: Observation, output: str | None, content: list[Any] | None
) -> None:
    """An edit's completion carries a diff only when both reads exist and differ."""
    tracker = ToolCallTracker(call_prefix="m1-tool", cwd=CWD)
    _, done = run(tracker, [(edit(5, "ACTIVE"), before), (edit(5, "DONE", output), after)])
    assert done == [
        models.ToolCallUpdate(
            tool_call_id="m1-tool-5",
            status="completed",
            content=content,
            raw_output={"output": output} if output is not None else None,
        )
    ]


def test_edit_first_seen_done_has_no_diff() -> None:
    """A single DONE sight only shows the file after the edit, so no diff is invented."""
    tracker = ToolCallTracker(call_prefix="m1-tool", cwd=CWD)
    [updates] = run(tracker, [(edit(5, "DONE"), files("after"))])
    assert [type(u) for u in updates] == [models.ToolCall, models.ToolCallUpdate]
    assert updates[1] == models.ToolCallUpdate(tool_call_id="m1-tool-5", status="completed")


def test_terminal_lifecycle() -> None:
    """With client terminals, commands show a terminal that streams output and exits."""
    tracker = ToolCallTracker(call_prefix="m1-tool", cwd=CWD, terminals=True)
    announce, first, second, same, done = run(
        tracker,
        [
            tool(3, "ACTIVE", params=LS),
            tool(3, "ACTIVE", params=LS, output="a\n"),
            tool(3, "ACTIVE", params=LS, output="a\nb\n"),
            tool(3, "ACTIVE", params=LS, output="a\nb\n"),
            tool(3, "DONE", params=LS, output="a\nb\nc\n"),
        ],
    )
    terminal = [models.TerminalContent(terminal_id="m1-tool-3")]
    exit_meta = {"terminal_id": "m1-tool-3", "exit_code": None, "signal": None}
    assert announce == [
        models.ToolCall(
            tool_call_id="m1-tool-3",
            title="Run ls -la",
            kind="execute",
            status="in_progress",
            content=terminal,
            raw_input=LS,
            meta={"terminal_info": {"terminal_id": "m1-tool-3", "cwd": CWD}},
        )
    ]
    assert first == [
        models.ToolCallUpdate(
            tool_call_id="m1-tool-3",
            meta={"terminal_output": {"terminal_id": "m1-tool-3", "data": "a\n"}},
        )
    ]
    assert second == [
        models.ToolCallUpdate(
            tool_call_id="m1-tool-3",
            meta={"terminal_output": {"terminal_id": "m1-tool-3", "data": "b\n"}},
        )
    ]
    assert same == []
    assert done == [
        models.ToolCallUpdate(
            tool_call_id="m1-tool-3",
            status="completed",
            content=terminal,
            raw_output={"output": "a\nb\nc\n"},
            meta={
                "terminal_output": {"terminal_id": "m1-tool-3", "data": "c\n"},
                "terminal_exit": exit_meta,
            },
        )
    ]


def test_terminal_without_output_and_failed_terminal() -> None:
    """A silent command only exits; a failed one exits and shows the error text."""
    tracker = ToolCallTracker(call_prefix="p", cwd=CWD, terminals=True)
    [[_, silent]] = run(tracker, [tool(1, "DONE", params=LS)])
    assert silent.meta == {
        "terminal_exit": {"terminal_id": "p-1", "exit_code": None, "signal": None}
    }
    assert silent.content == [models.TerminalContent(terminal_id="p-1")]
    [[_, failed]] = run(tracker, [tool(2, "ERROR", params=LS, error="boom")])
    assert failed == models.ToolCallUpdate(
        tool_call_id="p-2",
        status="failed",
        content=[text_content("boom")],
        raw_output={"error": {"type": "TOOL_ERROR", "message": "boom"}},
        meta={"terminal_exit": {"terminal_id": "p-2", "exit_code": None, "signal": None}},
    )


def test_terminals_only_for_execute_tools() -> None:
    """Non-command tools stay plain cards even when the client has terminals."""
    tracker = ToolCallTracker(call_prefix="p", cwd=CWD, terminals=True)
    [[call, done]] = run(
        tracker, [tool(1, "DONE", name="grep_search", params={"Query": "x"}, output="hit")]
    )
    assert isinstance(call, models.ToolCall) and call.meta is None and call.content is None
    assert done == models.ToolCallUpdate(
        tool_call_id="p-1",
        status="completed",
        content=[text_content("```\nhit\n```")],
        raw_output={"output": "hit"},
    )


def test_fail_unfinished() -> None:
    """Calls still running when the turn ends are failed once, with the reason."""
    tracker = ToolCallTracker(call_prefix="m1-tool", cwd=CWD)
    run(
        tracker,
        [tool(1, "ACTIVE", params=LS), tool(2, "DONE", params=LS), tool(3, "ACTIVE", params=LS)],
    )
    updates = tracker.fail_unfinished("the turn ended")
    assert_updates_valid(updates)
    assert updates == [
        models.ToolCallUpdate(
            tool_call_id=f"m1-tool-{i}", status="failed", content=[text_content("the turn ended")]
        )
        for i in (1, 3)
    ]
    assert tracker.fail_unfinished("again") == []
    assert tracker.feed(tool(1, "DONE", params=LS, output="late"), NO_OBSERVATION) == []


@pytest.mark.parametrize(
    ("length", "capped"), [(MAX_CONTENT_CHARS, False), (MAX_CONTENT_CHARS + 10, True)]
)
def test_large_output_is_capped_in_content_not_in_raw_output(length: int, capped: bool) -> None:
    """Output over 256 KiB is cut in the card but stays whole in rawOutput."""
    output = "x" * length
    tracker = ToolCallTracker(call_prefix="p", cwd=CWD)
    [[_, done]] = run(tracker, [tool(1, "DONE", params=LS, output=output)])
    assert isinstance(done, models.ToolCallUpdate)
    assert done.raw_output == {"output": output}
    shown = "x" * MAX_CONTENT_CHARS + ("\n… (10 more characters in rawOutput)" if capped else "")
    assert done.content == [text_content(fenced(shown))]


def test_images_are_added_to_the_completion() -> None:
    """Images the session verified for a finished step follow its output."""
    tracker = ToolCallTracker(call_prefix="p", cwd=CWD)
    seen = Observation(images={f"{CWD}/plot.png": ImageData("image/png", "iVBORw0KGgo=")})
    [[_, done]] = run(tracker, [(tool(1, "DONE", params=LS, output="wrote plot.png"), seen)])
    assert isinstance(done, models.ToolCallUpdate)
    assert done.content == [
        text_content("```\nwrote plot.png\n```"),
        models.ContentToolCallContent(
            models.ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
        ),
    ]


def test_call_ids_are_per_step_and_prefix() -> None:
    """Ids combine the turn's prefix with the step index, so they never collide."""
    first = ToolCallTracker(call_prefix="m1-tool", cwd=CWD)
    second = ToolCallTracker(call_prefix="m2-tool", cwd=CWD)
    ids = [
        u.tool_call_id
        for tracker in (first, second)
        for index in (1, 2)
        for u in tracker.feed(tool(index, "ACTIVE", params=LS), NO_OBSERVATION)
        if isinstance(u, models.ToolCall)
    ]
    assert ids == ["m1-tool-1", "m1-tool-2", "m2-tool-1", "m2-tool-2"]


@pytest.mark.parametrize("terminals", [False, True])
def test_captured_tool_steps(samples_dir: Path, terminals: bool) -> None:
    """Every tool step in the real captures maps to schema-valid updates, failures as failed."""
    steps = [
        event.step_update
        for path in sample_files()
        for line in path.read_text().splitlines()
        if line.strip()
        for event in [events.parse_event(line)]
        if isinstance(event, events.StepUpdateEvent) and event.step_update.step_type == "tool"
    ]
    assert steps, "the captures hold tool steps"
    tracker = ToolCallTracker(call_prefix="cap", cwd="C:\\Users\\sanle", terminals=terminals)
    updates = [u for updates in run(tracker, steps) for u in updates]
    failed = [u for u in updates if isinstance(u, models.ToolCallUpdate) and u.status == "failed"]
    assert [u.content for u in failed] == [[text_content(DENIED)], [text_content(HOOK_DENIED)]]


# --- fenced ---------------------------------------------------------------------------


def longest_backtick_run(text: str) -> int:
    longest = run_length = 0
    for char in text:
        run_length = run_length + 1 if char == "`" else 0
        longest = max(longest, run_length)
    return longest


@pytest.mark.parametrize(
    ("text", "info", "expected"),
    [
        ("plain", "", "```\nplain\n```"),
        ("ends with newlines\n\n", "", "```\nends with newlines\n```"),
        ("has ``` inside", "", "````\nhas ``` inside\n````"),
        ("`````", "", "``````\n`````\n``````"),
        ('{"a": 1}', "json", '```json\n{"a": 1}\n```'),
        ("", "", "```\n\n```"),
    ],
)
def test_fenced_examples(text: str, info: str, expected: str) -> None:
    """The fence is three backticks, or one longer than the longest run inside."""
    assert fenced(text, info) == expected


@given(
    text=st.text(alphabet=st.sampled_from("`~ \n\r\tax")) | st.text(),
    info=st.sampled_from(["", "json", "text"]),
)
def test_fenced_block_closes_after_the_text(text: str, info: str) -> None:
    """No line of the text can close the fence, and the text is recoverable from the block."""
    block = fenced(text, info)
    opening, _, rest = block.partition("\n")
    body, _, closing = rest.rpartition("\n")
    fence = opening.removesuffix(info)
    assert set(fence) == {"`"} and len(fence) >= 3
    assert closing == fence
    assert longest_backtick_run(body) < len(fence)
    assert body == text.rstrip("\n")


def test_a_command_first_named_by_the_hook_still_gets_its_terminal() -> None:
    """In ask mode the hook can announce a command before the stream does: the
    card is still a Zed terminal, and the stream's later lines complete it."""
    tracker = ToolCallTracker(call_prefix="m-tool", cwd=CWD, terminals=True)
    call_id, [announce], request = tracker.announce_pending(
        7, "run_command", {"CommandLine": "ls", "Cwd": CWD}, None
    )
    assert isinstance(announce, models.ToolCall) and announce.status == "pending"
    assert announce.meta == {"terminal_info": {"terminal_id": call_id, "cwd": CWD}}
    assert announce.content == [models.TerminalContent(terminal_id=call_id)]
    assert request.tool_call_id == call_id
    done = tracker.feed(
        events.StepUpdate(
            step_index=7,
            state="DONE",
            step_type="tool",
            tool_name="run_command",
            tool_info=events.ToolInfo(
                name="run_command", parameters={"CommandLine": "ls"}, output="a\n"
            ),
        ),
        NO_OBSERVATION,
    )
    [final] = done
    assert isinstance(final, models.ToolCallUpdate) and final.status == "completed"
    assert final.meta is not None and "terminal_exit" in final.meta


def test_an_image_of_another_conversation_names_its_cause() -> None:
    """The card of an image in another agy conversation's folder says why it is not
    shown, in the catalogue's words, and names the cause (image_other_conversation)."""

    path = "/home/user/.gemini/antigravity/brain/other/plot.png"
    why = "it is in another agy conversation's folder; only this session's folder is shown"
    tracker = ToolCallTracker(call_prefix="p", cwd=CWD)
    seen = Observation(refused={path: why})
    [[_, done]] = run(tracker, [(tool(1, "DONE", params=LS, output="wrote plot.png"), seen)])
    assert isinstance(done, models.ToolCallUpdate)
    [note] = [c for c in done.content or [] if c != text_content("```\nwrote plot.png\n```")]
    told = causes.cause("image_other_conversation").render(path=path)
    assert note == text_content(f"{told}; only this session's folder is shown.")
    assert done.meta == {"agybridge": {"cause": "image_other_conversation", "path": path}}
