"""Tests of the fake agy's rendering scenarios: edit, multi-tool, image-out, schema,
unknown-events, big-output, huge-line (fake_agy._fake_scenarios).

Each checks the wire shapes contract.md §3.4 / hooks-and-tools.md §B2 describe (a tool
step is ACTIVE then DONE|ERROR on one ``step_index``, ``tool_name`` equals
``tool_info.name``, PascalCase parameters) and the real files the scenario touches.
``tests/fake_agy/test_fake_agy_shapes.py`` checks every key against the captures.
"""

from __future__ import annotations

import json
import select
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_agy._fake_scenarios import (
    BIG_OUTPUT_BYTES,
    BIG_OUTPUT_COMMAND,
    DEFAULT_SCHEMA,
    EDIT_INITIAL_CONTENT,
    EDIT_SUFFIX,
    HUGE_LINE_CHARS,
    IMAGE_NAME,
    NOT_AN_IMAGE,
    NOTES_CONTENT,
    UNKNOWN_EVENT,
    UNKNOWN_STATE,
    UNKNOWN_STEP_TYPE,
    big_output_text,
    directive_args,
    huge_line_text,
    tiny_png,
)
from tests.fake_agy.test_fake_agy import STREAM, Event, Harness, split_turns, user

Step = dict[str, Any]


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    try:
        yield harness
    finally:
        harness.cleanup()


def tool_steps(steps: list[Step]) -> dict[int, list[Step]]:
    """Tool updates by step_index, in order."""
    found: dict[int, list[Step]] = {}
    for step in steps:
        if step["step_type"] == "tool":
            found.setdefault(step["step_index"], []).append(step)
    return found


def check_tool_step(updates: list[Step], name: str) -> None:
    """ACTIVE first, one DONE|ERROR last; tool_name duplicated in tool_info.name."""
    assert updates[0]["state"] == "ACTIVE"
    assert updates[-1]["state"] in ("DONE", "ERROR")
    assert all(u["state"] not in ("DONE", "ERROR") for u in updates[:-1])
    for update in updates:
        assert update["tool_name"] == update["tool_info"]["name"] == name
    assert isinstance(updates[-1]["duration_seconds"], float)


def one_turn(events: list[Event]) -> tuple[list[Step], Step]:
    [(steps, result)] = split_turns(events)
    assert steps[0]["step_type"] == "user_input"
    assert result["status"] == "SUCCESS" and "error" not in result
    assert result["response"] == "".join(s.get("text_delta", "") for s in steps)
    return steps, result


def test_directive_args() -> None:
    """Words after the directive are the scenario's arguments."""
    assert directive_args("[fake-agy:edit] a/b.txt  more") == ["a/b.txt", "more"]
    assert directive_args("please [fake-agy:image-out]") == []
    assert directive_args("no directive here") == []


def test_tiny_png_is_a_valid_png() -> None:
    """Signature, chunk CRCs, a 1x1 IHDR and an IDAT that inflates to one RGBA row."""
    data = tiny_png()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    offset, chunks = 8, {}
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        chunks[kind] = body
        offset += 12 + length
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">II", chunks[b"IHDR"][:8]) == (1, 1)
    assert len(zlib.decompress(chunks[b"IDAT"])) == 1 + 4


# --- edit ------------------------------------------------------------------------------


def test_edit_replaces_the_first_line_after_announcing_the_target(fake: Harness) -> None:
    """replace_file_content is ACTIVE with TargetFile while the file is still unchanged."""
    target = fake.cwd / "notes.txt"
    target.write_text("first line\nsecond line\n")
    live = fake.start(STREAM, FAKE_AGY_EDIT_DELAY="1")
    live.send(user("[fake-agy:edit] notes.txt"))
    active = live.until(
        lambda e: e.get("step_update", {}).get("tool_name") == "replace_file_content"
    )[-1]["step_update"]
    assert active["state"] == "ACTIVE"
    assert active["tool_info"]["parameters"] == {"TargetFile": str(target)}
    assert target.read_text() == "first line\nsecond line\n"  # not yet changed
    live.until(lambda e: e.get("event") == "result")
    done = live.finish()
    assert done.code == 0
    assert target.read_text() == f"first line{EDIT_SUFFIX}\nsecond line\n"
    steps, _ = one_turn(live.seen)
    [updates] = tool_steps(steps).values()
    check_tool_step(updates, "replace_file_content")
    assert [u["state"] for u in updates] == ["ACTIVE", "DONE"]
    assert updates[1]["tool_info"] == {
        "name": "replace_file_content",
        "parameters": {"TargetFile": str(target)},
    }


def test_edit_creates_a_missing_file_with_write_to_file_first(fake: Harness) -> None:
    """A missing target: write_to_file (parameters on DONE only), then the replace."""
    done = fake.run(STREAM, [user("[fake-agy:edit] sub/new.txt")], FAKE_AGY_EDIT_DELAY="0")
    target = fake.cwd / "sub" / "new.txt"
    first, rest = EDIT_INITIAL_CONTENT.split("\n", 1)
    assert target.read_text() == f"{first}{EDIT_SUFFIX}\n{rest}"
    steps, result = one_turn(done.events)
    write, replace = tool_steps(steps).values()
    check_tool_step(write, "write_to_file")
    assert "parameters" not in write[0]["tool_info"]
    assert write[1]["tool_info"]["parameters"] == {"TargetFile": str(target)}
    check_tool_step(replace, "replace_file_content")
    assert "sub/new.txt" in result["response"]


def test_edit_default_target_uses_the_add_dir_workspace(fake: Harness, tmp_path: Path) -> None:
    """Without a path the fake edits fake-agy-edit.txt in the first --add-dir root."""
    workspace = tmp_path / "root"
    workspace.mkdir()
    fake.run([*STREAM, "--add-dir", str(workspace)], [user("[fake-agy:edit]")])
    assert (workspace / "fake-agy-edit.txt").read_text().startswith("fake-agy edit target (")
    assert not (fake.cwd / "fake-agy-edit.txt").exists()


# --- multi-tool ------------------------------------------------------------------------


def test_multi_tool_steps_and_files(fake: Harness) -> None:
    """view_file, grep_search, run_command, write_to_file: B2 parameters and outputs."""
    done = fake.run(STREAM, [user("[fake-agy:multi-tool]")])
    steps, result = one_turn(done.events)
    notes = fake.cwd / "fake-agy-notes.txt"
    summary = fake.cwd / "fake-agy-summary.txt"
    assert notes.read_text() == NOTES_CONTENT
    assert summary.read_text().startswith("fake-agy-notes.txt: 1 line(s)")
    view, search, command, write = tool_steps(steps).values()
    for updates, name in (
        (view, "view_file"),
        (search, "grep_search"),
        (command, "run_command"),
        (write, "write_to_file"),
    ):
        check_tool_step(updates, name)
        assert [u["state"] for u in updates] == ["ACTIVE", "DONE"]
    assert view[0]["tool_info"]["parameters"] == {"AbsolutePath": str(notes)}
    assert view[1]["tool_info"]["output"] == f"2 lines, {len(NOTES_CONTENT)} bytes"
    assert search[1]["tool_info"]["parameters"] == {"Query": "needle", "SearchPath": str(fake.cwd)}
    assert search[1]["tool_info"]["output"] == "fake-agy-notes.txt:2: the needle is here\n"
    assert command[0]["tool_info"]["parameters"] == {"CommandLine": "cat fake-agy-notes.txt"}
    assert command[1]["tool_info"]["output"] == NOTES_CONTENT
    assert write[0]["tool_info"] == {"name": "write_to_file"}
    assert write[1]["tool_info"] == {
        "name": "write_to_file",
        "parameters": {"TargetFile": str(summary)},
    }
    assert result["response"].startswith("I read fake-agy-notes.txt")


# --- image-out -------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["", "outside", "other-conversation", "not-image"])
def test_image_out_writes_a_real_file(fake: Harness, variant: str) -> None:
    """generate_image writes the PNG (or the non-image) where the variant says and names it
    in its output (absolute) and in the reply (relative inside the workspace)."""
    done = fake.run(STREAM, [user(f"[fake-agy:image-out] {variant}")])
    steps, result = one_turn(done.events)
    [updates] = tool_steps(steps).values()
    check_tool_step(updates, "generate_image")
    assert updates[0]["tool_info"]["parameters"] == {"ImageName": IMAGE_NAME}
    output = updates[1]["tool_info"]["output"]
    path = Path(output.rsplit(" ", 1)[1])
    assert path.is_absolute() and path.name == f"{IMAGE_NAME}.png"
    if variant == "outside":
        cid = result["conversation_id"]
        assert path == fake.state_dir / "brain" / cid / f"{IMAGE_NAME}.png"
        assert str(path) in result["response"]
    elif variant == "other-conversation":
        cid = result["conversation_id"]
        assert path.parent.parent == fake.state_dir / "brain" and path.parent.name != cid
        assert str(path) in result["response"]
    else:
        assert path == fake.cwd / f"{IMAGE_NAME}.png"
        assert result["response"] == f"Here is the image: {IMAGE_NAME}.png\n"
    assert path.read_bytes() == (NOT_AN_IMAGE if variant == "not-image" else tiny_png())


# --- schema ----------------------------------------------------------------------------


def test_schema_without_the_flag_answers_the_default_schema(fake: Harness) -> None:
    """finish ACTIVE as a tool step, DONE as step_type finish; structured_output + JSON."""
    done = fake.run(STREAM, [user("[fake-agy:schema] capital of France")])
    [(steps, result)] = split_turns(done.events)
    finish = [s for s in steps if s.get("tool_name") == "finish" or s["step_type"] == "finish"]
    assert [(s["step_type"], s["state"]) for s in finish] == [
        ("tool", "ACTIVE"),
        ("finish", "DONE"),
    ]
    assert finish[0]["step_index"] == finish[1]["step_index"]
    assert finish[0]["tool_info"] == {"name": "finish"}
    assert not [s for s in steps if s.get("text_delta")]
    assert result["structured_output"] == {"answer": "capital of France", "confidence": 1.5}
    assert json.loads(result["response"]) == result["structured_output"]
    assert set(result["structured_output"]) == set(DEFAULT_SCHEMA["properties"])
    assert "json_schema" not in done.events[0]["init"]


def test_schema_stream_variant_also_streams_the_json(fake: Harness) -> None:
    """``stream``: as agy 1.3.1, the JSON line arrives as one agent_response DONE with
    agy's internal keys, the response restates it, structured_output is clean."""
    done = fake.run(STREAM, [user("[fake-agy:schema] stream")])
    [(steps, result)] = split_turns(done.events)
    deltas = "".join(s.get("text_delta", "") for s in steps)
    assert deltas == result["response"] and deltas.endswith("}\n")
    line = json.loads(result["response"])
    assert {"toolAction", "toolSummary"} <= set(line)
    clean = {k: v for k, v in line.items() if k not in ("toolAction", "toolSummary")}
    assert clean == result["structured_output"]
    [finish_done] = [s for s in steps if s.get("step_type") == "finish"]
    assert "usage" not in finish_done


def test_schema_honours_the_json_schema_flag(fake: Harness) -> None:
    """With --json-schema the scenario answers that schema."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    done = fake.run([*STREAM, "--json-schema", json.dumps(schema)], [user("[fake-agy:schema]")])
    assert done.results()[0]["structured_output"] == {"n": 1}


# --- unknown-events --------------------------------------------------------------------


def test_unknown_events_surround_a_normal_turn(fake: Harness) -> None:
    """An unknown event, step type and state, a non-JSON line, then text and a result."""
    done = fake.run(STREAM, [user("[fake-agy:unknown-events]")])
    lines = done.stdout.splitlines()
    assert sum(1 for line in lines if not line.startswith("{")) == 1
    names = [e["event"] for e in done.events]
    assert UNKNOWN_EVENT in names
    assert done.events[names.index(UNKNOWN_EVENT)][UNKNOWN_EVENT]["conversation_id"]
    steps = [e["step_update"] for e in done.events if e["event"] == "step_update"]
    assert [s for s in steps if s["step_type"] == UNKNOWN_STEP_TYPE]
    [updates] = tool_steps(steps).values()
    assert [u["state"] for u in updates] == ["ACTIVE", UNKNOWN_STATE, "DONE"]
    _, result = one_turn([e for e in done.events if e["event"] in ("step_update", "result")])
    assert result["response"].startswith("Still here")


# --- big-output, huge-line -------------------------------------------------------------


def test_big_output_is_one_mebibyte(fake: Harness) -> None:
    """run_command's output is exactly what `yes … | head -c 1048576` prints."""
    done = fake.run(STREAM, [user("[fake-agy:big-output]")])
    steps, _ = one_turn(done.events)
    [updates] = tool_steps(steps).values()
    check_tool_step(updates, "run_command")
    assert updates[0]["tool_info"]["parameters"] == {"CommandLine": BIG_OUTPUT_COMMAND}
    output = updates[1]["tool_info"]["output"]
    assert output == big_output_text() and len(output.encode()) == BIG_OUTPUT_BYTES


def test_huge_line_is_one_stdout_line_over_ten_megabytes(fake: Harness) -> None:
    """One ACTIVE delta of HUGE_LINE_CHARS characters; the result restates it."""
    done = fake.run(STREAM, [user("[fake-agy:huge-line]")])
    huge = [line for line in done.stdout.splitlines() if len(line) > 10 * 2**20]
    assert len(huge) == 2  # the delta, and the result's response
    assert len(huge[0].encode()) > 10 * 2**20
    steps, result = one_turn(done.events)
    deltas = [s["text_delta"] for s in steps if s.get("text_delta")]
    assert deltas == [huge_line_text(), "\n"]
    assert len(deltas[0]) == HUGE_LINE_CHARS
    assert result["response"] == huge_line_text() + "\n"


def is_payload(event: Event, scenario: str) -> bool:
    step = event.get("step_update", {})
    if scenario == "big-output":
        return bool(step.get("tool_name") == "run_command" and step.get("state") == "DONE")
    return len(step.get("text_delta", "")) == HUGE_LINE_CHARS


@pytest.mark.parametrize("scenario", ["big-output", "huge-line"])
def test_gate_holds_the_turn_until_the_file_exists(
    fake: Harness, tmp_path: Path, scenario: str
) -> None:
    """gate=PATH: after the big payload, nothing more until PATH exists."""
    gate = tmp_path / "gate"
    live = fake.start(STREAM)
    live.send(user(f"[fake-agy:{scenario}] gate={gate}"), user("next"))
    live.until(lambda e: is_payload(e, scenario))
    assert live.proc.stdout is not None
    # Held: no further line within 0.3 s (a fake that did not hold prints at once).
    ready, _, _ = select.select([live.proc.stdout], [], [], 0.3)
    assert not ready and b"\n" not in live.pending()
    gate.touch()
    first = live.until(lambda e: e.get("event") == "result")[-1]
    assert first["result"]["status"] == "SUCCESS"
    second = live.until(lambda e: e.get("event") == "result")[-1]
    assert second["result"]["response"] == "next\n"
    assert live.finish().code == 0


def test_stdout_log_records_every_line(fake: Harness, tmp_path: Path) -> None:
    """FAKE_AGY_STDOUT_LOG: {pid, stdout} per line, in order, noise included."""
    log = tmp_path / "stdout.ndjson"
    done = fake.run(STREAM, [user("[fake-agy:noise] hi")], FAKE_AGY_STDOUT_LOG=str(log))
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["stdout"] for e in entries] == done.stdout.splitlines()
    assert {e["pid"] for e in entries} == {entries[0]["pid"]}


# --- knobs used by the rendering tests -------------------------------------------------


@pytest.mark.parametrize("resume_usage", [False, True])
def test_resume_usage_continues_the_conversation_sum(fake: Harness, resume_usage: bool) -> None:
    """FAKE_AGY_RESUME_USAGE=1: a --conversation resume's result.usage continues the sum."""
    first = fake.run(STREAM, [user("one")]).results()[0]
    done = fake.run(
        [*STREAM, "--conversation", first["conversation_id"]],
        [user("two")],
        FAKE_AGY_RESUME_USAGE="1" if resume_usage else "0",
    )
    [(steps, result)] = split_turns(done.events)
    own = sum(s.get("usage", {}).get("total_tokens", 0) for s in steps)
    carried = first["usage"]["total_tokens"] if resume_usage else 0
    assert result["usage"]["total_tokens"] == carried + own


def test_exit_delay_keeps_agy_alive_after_a_quota_result(fake: Harness) -> None:
    """FAKE_AGY_EXIT_DELAY: the exit-3 process lingers after its result, reading nothing."""
    live = fake.start(STREAM, FAKE_AGY_SCENARIO="quota", FAKE_AGY_EXIT_DELAY="0.5")
    live.send(user("hi"))
    live.until(lambda e: e.get("event") == "result")
    assert live.proc.poll() is None  # still there right after the result
    live.send(user("never read"))
    done = live.finish()
    assert done.code == 3 and done.results() == []
    assert [e["stdin"] for e in fake.log_entries() if "stdin" in e] == [user("hi")]
