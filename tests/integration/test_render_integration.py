"""How the bridge renders rich agy output, end to end over the raw ACP wire.

Each test spawns the real bridge (``python -m agybridge``) with the fake agy, drives it
with `acp_wire.RawClient` (every message in both directions validated against the official
ACP schema; zero problems allowed), picks fake scenarios per prompt with the
``[fake-agy:NAME] args`` directive, and ends by asserting that no process carrying the
test's marker is left. Nothing is synchronised by sleeping: tests wait for wire events
under ``trio.fail_after``; where a turn must stay open while something else happens, the
fake holds it on a ``gate=PATH`` file the test creates.

Sessions run in ``<tmp>/ws`` so that the fake's state dir (``<tmp>/home/.gemini/
antigravity-cli``, where it keeps ``brain/<id>/`` as agy does below ``$HOME``) lies outside
the roots.
``FAKE_AGY_STDOUT_LOG`` records the raw agy lines, so expectations such as per-turn usage
are computed from what the bridge was actually given.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import trio

from fake_agy._fake_scenarios import (
    BIG_OUTPUT_BYTES,
    EDIT_SUFFIX,
    IMAGE_NAME,
    NOTES_CONTENT,
    UNKNOWN_EVENT,
    UNKNOWN_STATE,
    UNKNOWN_STEP_TYPE,
    big_output_text,
    huge_line_text,
    tiny_png,
)
from tests.acp_wire import Harness, RawClient, agy_state_dir, stop_reason

pytestmark = pytest.mark.integration

TEST_TIMEOUT_S = 20
#: Big payloads cross three processes and a schema validator.
BIG_TEST_TIMEOUT_S = 40

Update = dict[str, Any]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The session cwd (and agy's only --add-dir root)."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


def assert_clean(client: RawClient) -> None:
    """Zero schema problems and no request left unanswered, in both directions."""
    problems = client.validator.problems + [
        f"never answered: {u}" for u in client.validator.unanswered()
    ]
    assert not problems, client.validator.report() + "\n" + client.diagnostics()


async def initialize(client: RawClient, *, terminals: bool = False) -> None:
    """``initialize``; with ``terminals``, Zed's ``_meta.terminal_output`` capability."""
    capabilities: dict[str, Any] = {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }
    if terminals:
        capabilities["_meta"] = {"terminal_output": True}
    response = await client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": capabilities,
            "clientInfo": {"name": "agybridge-render-test", "version": "0"},
        },
    )
    assert "result" in response, response


async def open_session(client: RawClient, cwd: Path, *, terminals: bool = False) -> str:
    await initialize(client, terminals=terminals)
    return await client.new_session(cwd)


async def prompt(client: RawClient, session_id: str, text: str) -> tuple[Update, list[Update]]:
    """Run one prompt; returns its response and the session's updates of that turn."""
    mark = client.mark()
    request_id = await client.start_prompt(session_id, text)
    response = await client.response(request_id)
    assert "result" in response, f"{response}\n{client.diagnostics()}"
    return response, client.updates(session_id, since=mark)


def of_kind(updates: list[Update], kind: str) -> list[Update]:
    return [u for u in updates if u["sessionUpdate"] == kind]


def message_text(updates: list[Update]) -> str:
    return "".join(u["content"].get("text", "") for u in of_kind(updates, "agent_message_chunk"))


def call_updates(updates: list[Update], call_id: str) -> list[Update]:
    return [
        u
        for u in updates
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and u["toolCallId"] == call_id
    ]


def completed(updates: list[Update], call_id: str) -> Update:
    [done] = [u for u in call_updates(updates, call_id) if u.get("status") == "completed"]
    return done


def images_in(updates: list[Update]) -> list[bytes]:
    """Decoded bytes of every image block: agent messages and tool call content."""
    found = []
    for update in updates:
        blocks = []
        if update["sessionUpdate"] == "agent_message_chunk":
            blocks.append(update["content"])
        content = update.get("content")
        if update["sessionUpdate"] != "agent_message_chunk" and isinstance(content, list):
            blocks += [item["content"] for item in content if item.get("type") == "content"]
        for block in blocks:
            if block.get("type") == "image":
                assert block["mimeType"] == "image/png"
                found.append(base64.b64decode(block["data"], validate=True))
    return found


def raw_agy_lines(tmp_path: Path) -> list[dict[str, Any]]:
    """The fake's stdout lines (``FAKE_AGY_STDOUT_LOG``) as ``{pid, event}``."""
    path = tmp_path / "agy-stdout.ndjson"
    entries = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        try:
            entries.append({"pid": entry["pid"], "event": json.loads(entry["stdout"])})
        except ValueError:
            continue
    return entries


def per_turn_step_usage(tmp_path: Path) -> list[dict[str, int]]:
    """For each agy ``result`` on the raw wire, the sum of that turn's step usages."""
    turns: list[dict[str, int]] = []
    running: dict[str, int] = {}
    for entry in raw_agy_lines(tmp_path):
        event = entry["event"]
        if event.get("event") == "step_update":
            for key, value in event["step_update"].get("usage", {}).items():
                running[key] = running.get(key, 0) + value
        elif event.get("event") == "result":
            turns.append(running)
            running = {}
    return turns


def agy_launches(harness: Harness) -> list[dict[str, Any]]:
    """Launch-log entries of stream-json agy sessions (not ``agy models`` and the like)."""
    return [e for e in harness.launches() if "--input-format" in e.get("argv", [])]


def camel(usage: dict[str, int]) -> dict[str, int]:
    return {
        "inputTokens": usage.get("input_tokens", 0),
        "outputTokens": usage.get("output_tokens", 0),
        "thinkingTokens": usage.get("thinking_tokens", 0),
        "cacheReadTokens": usage.get("cache_read_tokens", 0),
        "totalTokens": usage.get("total_tokens", 0),
    }


#: These tests are about rendering agy's output: they run without the
#: permission gate (its round trip has tests of its own), so tools run unasked.
HARNESS_ENV = {"AGYBRIDGE_MODE": "safe"}


# --------------------------------------------------------------------------- edit


async def test_edit_renders_a_diff_of_the_file_on_disk(harness: Harness, ws: Path) -> None:
    """replace_file_content: an `edit` tool_call located at the absolute path, then a
    completed update whose diff equals the file before and after on disk."""
    target = ws / "notes.txt"
    before = "first line\nsecond line\n"
    target.write_text(before)
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:edit] notes.txt")
            assert stop_reason(response) == "end_turn"
        after = target.read_text()
        assert after == f"first line{EDIT_SUFFIX}\nsecond line\n"
        [call] = of_kind(updates, "tool_call")
        assert call["kind"] == "edit"
        assert call["status"] == "in_progress"
        assert call["title"] == "Edit notes.txt"
        assert call["locations"] == [{"path": str(target)}]
        assert call["rawInput"] == {"TargetFile": str(target)}
        done = completed(updates, call["toolCallId"])
        diffs = [c for c in done["content"] if c["type"] == "diff"]
        assert diffs == [{"type": "diff", "path": str(target), "oldText": before, "newText": after}]
        assert "I edited the first line of notes.txt." in message_text(updates)
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_edit_of_a_new_file_shows_the_write_then_the_diff(harness: Harness, ws: Path) -> None:
    """A missing target: write_to_file (parameters only on DONE) becomes an `edit` card
    that learns its location on completion; the replace diff starts from the new file."""
    target = ws / "made.txt"
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:edit] made.txt")
            assert stop_reason(response) == "end_turn"
        write, replace = of_kind(updates, "tool_call")
        assert write["kind"] == replace["kind"] == "edit"
        write_updates = call_updates(updates, write["toolCallId"])
        assert any(u.get("locations") == [{"path": str(target)}] for u in write_updates)
        assert write_updates[-1]["status"] == "completed"
        diff = next(c for c in completed(updates, replace["toolCallId"])["content"])
        assert diff["type"] == "diff"
        assert diff["newText"] == target.read_text()
        assert diff["oldText"] == diff["newText"].replace(EDIT_SUFFIX, "", 1)
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_edit_written_right_after_active_still_has_a_diff(harness: Harness, ws: Path) -> None:
    """agy changes the file right after announcing the step: the bridge
    snapshots the file as it reads the ACTIVE line, so the diff survives.

    The fake writes the file as soon as the test has seen the step's card on
    the wire (``gate=``), with no delay: the snapshot must come before the card,
    not later. (With agy writing before the bridge has even read the ACTIVE line
    it is a race no stream-json reader can always win; the PreToolUse hook,
    which runs before the write, is the complete answer.)
    """
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(
            FAKE_AGY_EDIT_DELAY="0", FAKE_AGY_FRAGMENT_DELAY="0"
        ) as client:
            session_id = await open_session(client, ws)
            missing = []
            for attempt in range(8):
                (ws / f"f{attempt}.txt").write_text("one\ntwo\n")
                gate = harness.tmp_path / f"gate-{attempt}"
                mark = client.mark()
                request = await client.start_prompt(
                    session_id, f"[fake-agy:edit] f{attempt}.txt gate={gate}"
                )
                await client.wait_update(session_id, "tool_call", since=mark)
                gate.touch()
                assert stop_reason(await client.response(request)) == "end_turn"
                updates = client.updates(session_id, since=mark)
                [call] = of_kind(updates, "tool_call")
                assert (ws / f"f{attempt}.txt").read_text() == f"one{EDIT_SUFFIX}\ntwo\n"
                content = completed(updates, call["toolCallId"]).get("content") or []
                if not [c for c in content if c["type"] == "diff"]:
                    missing.append(attempt)
        assert_clean(client)
    await harness.assert_no_leftovers()
    assert not missing, f"edits without a diff: {missing} of 8"


# --------------------------------------------------------------------------- multi-tool


async def test_multi_tool_kinds_titles_and_output(harness: Harness, ws: Path) -> None:
    """view_file/grep_search/run_command/write_to_file render as read/search/execute/edit
    with titles naming their targets; outputs arrive as text content."""
    notes = ws / "fake-agy-notes.txt"
    summary = ws / "fake-agy-summary.txt"
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:multi-tool]")
            assert stop_reason(response) == "end_turn"
        calls = of_kind(updates, "tool_call")
        assert [c["kind"] for c in calls] == ["read", "search", "execute", "edit"]
        view, search, command, write = calls
        assert view["title"] == "Read fake-agy-notes.txt"
        assert view["locations"] == [{"path": str(notes)}]
        assert search["title"].startswith("Search 'needle'")
        assert command["title"] == "Run cat fake-agy-notes.txt"
        assert command["rawInput"] == {"CommandLine": "cat fake-agy-notes.txt"}
        # write_to_file names its target only on DONE: the card learns it then.
        write_titles = [u.get("title") for u in call_updates(updates, write["toolCallId"])]
        # "Create" when agy says it will not overwrite (Overwrite: false), else "Write".
        assert {"Write fake-agy-summary.txt", "Create fake-agy-summary.txt"} & set(write_titles)
        for call in calls:
            assert call["status"] == "in_progress"
            assert completed(updates, call["toolCallId"])
        texts = {
            call["kind"]: "".join(
                c["content"]["text"]
                for c in completed(updates, call["toolCallId"]).get("content") or []
                if c["type"] == "content"
            )
            for call in calls
        }
        assert NOTES_CONTENT.strip() in texts["execute"]
        assert "2 lines" in texts["read"]
        assert "the needle is here" in texts["search"]
        assert completed(updates, command["toolCallId"])["rawOutput"] == {"output": NOTES_CONTENT}
        assert summary.exists()
        assert message_text(updates).startswith("I read fake-agy-notes.txt")
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_run_command_as_a_zed_terminal(harness: Harness, ws: Path) -> None:
    """With ``_meta.terminal_output``, run_command is a display-only terminal: terminal
    content, terminal_info on the call, terminal_output + terminal_exit on completion."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws, terminals=True)
            response, updates = await prompt(client, session_id, "[fake-agy:multi-tool]")
            assert stop_reason(response) == "end_turn"
        [command] = [c for c in of_kind(updates, "tool_call") if c["kind"] == "execute"]
        terminal_id = command["_meta"]["terminal_info"]["terminal_id"]
        assert command["_meta"]["terminal_info"]["cwd"] == str(ws)
        assert {"type": "terminal", "terminalId": terminal_id} in command["content"]
        done = completed(updates, command["toolCallId"])
        assert {"type": "terminal", "terminalId": terminal_id} in done["content"]
        meta = done["_meta"]
        assert meta["terminal_output"] == {"terminal_id": terminal_id, "data": NOTES_CONTENT}
        assert meta["terminal_exit"]["terminal_id"] == terminal_id
        # Other kinds stay plain cards.
        others = [c for c in of_kind(updates, "tool_call") if c["kind"] != "execute"]
        assert all("_meta" not in c or "terminal_info" not in c["_meta"] for c in others)
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- images


async def test_generated_image_is_inlined(harness: Harness, ws: Path) -> None:
    """A PNG generate_image wrote inside the session root arrives as an image block whose
    base64 decodes to the file's bytes."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:image-out]")
            assert stop_reason(response) == "end_turn"
        png = (ws / f"{IMAGE_NAME}.png").read_bytes()
        assert png == tiny_png()
        images = images_in(updates)
        assert images, "no image block"
        assert all(image == png for image in images)
        [call] = of_kind(updates, "tool_call")
        assert call["title"] == f"Generate image {IMAGE_NAME}"
        assert f"{IMAGE_NAME}.png" in message_text(updates)
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_image_in_this_conversations_folder_is_inlined(harness: Harness, ws: Path) -> None:
    """An image agy generated into its own folder of this session's conversation
    (``brain/<conversation>/``, outside every root) is shown inline."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:image-out] outside")
            assert stop_reason(response) == "end_turn"
        [conversation] = [p.name for p in (agy_state_dir(harness.tmp_path) / "brain").iterdir()]
        png = agy_state_dir(harness.tmp_path) / "brain" / conversation / f"{IMAGE_NAME}.png"
        images = images_in(updates)
        assert images and all(image == png.read_bytes() for image in images)
        assert str(png) in message_text(updates)
        assert_clean(client)
    await harness.assert_no_leftovers()


@pytest.mark.parametrize("variant", ["other-conversation", "not-image"])
async def test_unsafe_image_is_not_inlined(harness: Harness, ws: Path, variant: str) -> None:
    """An image in another agy conversation's folder or a .png that is not an image is
    never inlined; the turn still completes with its text, and the log says why the
    other conversation's image was refused."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, f"[fake-agy:image-out] {variant}")
            assert stop_reason(response) == "end_turn"
        assert images_in(updates) == []
        assert f"{IMAGE_NAME}.png" in message_text(updates)
        assert_clean(client)
    why = "not shown: it is in another agy conversation's folder"
    if variant == "other-conversation":
        log = (harness.tmp_path / "agybridge.log").read_text()
        assert why in log
    # The image's card says why too (only for another conversation's folder).
    [call] = [u for u in of_kind(updates, "tool_call_update") if u.get("status") == "completed"]
    notes = [c["content"]["text"] for c in call.get("content") or [] if c["type"] == "content"]
    assert any(why in note for note in notes) == (variant == "other-conversation")
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- notices


async def test_soft_deny_names_the_permission_and_the_allow_rule(
    harness: Harness, ws: Path
) -> None:
    """A soft-denied command: end_turn, a message naming the "command" permission and how
    to allow it, and _meta.deniedPermissions."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:soft-deny] rm it")
            assert stop_reason(response) == "end_turn"
        text = message_text(updates)
        assert text.strip()
        assert '"command"' in text
        assert "command(" in text and "permissions.allow" in text
        assert response["result"]["_meta"]["deniedPermissions"] == ["command"]
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_quota_error_shows_the_reset_time(harness: Harness, ws: Path) -> None:
    """The 429 turn: end_turn, a message with the reset time, and _meta.agyError with the
    fields parsed from the error text."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:quota] hi")
            assert stop_reason(response) == "end_turn"
        error = response["result"]["_meta"]["agyError"]
        assert error["error"].startswith("Individual quota reached.")
        assert error["resetsIn"] == "100h23m59s"
        assert error["resetsAt"].endswith("Z")
        text = message_text(updates)
        assert "Individual quota reached" in text
        assert error["resetsAt"] in text
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_quota_error_meta_carries_the_agy_error_line(harness: Harness, ws: Path) -> None:
    """_meta.agyError also has the structured AGY_ERROR fields (contract.md §4)."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, _ = await prompt(client, session_id, "[fake-agy:quota] hi")
        assert_clean(client)
    await harness.assert_no_leftovers()
    error = response["result"]["_meta"]["agyError"]
    assert error.get("status") == "RESOURCE_EXHAUSTED", error
    assert error.get("errorCode") == 429 and error.get("retryable") is True, error


async def test_prompt_after_a_surviving_quota_turn(harness: Harness, ws: Path) -> None:
    """When agy survives an API error (CL 1.2.10), the next prompt runs on the same agy."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(FAKE_AGY_QUOTA_CONTINUE="1") as client:
            session_id = await open_session(client, ws)
            await prompt(client, session_id, "[fake-agy:quota] hi")
            again, updates = await prompt(client, session_id, "after the quota")
            assert stop_reason(again) == "end_turn"
            assert message_text(updates) == "after the quota\n"
        assert len(agy_launches(harness)) == 1
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_prompt_right_after_a_quota_exit_is_served(harness: Harness, ws: Path) -> None:
    """agy exits 3 a moment after the quota result (FAKE_AGY_EXIT_DELAY=1; agy: 0.05-0.3 s);
    the next prompt must still be answered, by a new agy."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(FAKE_AGY_EXIT_DELAY="1") as client:
            session_id = await open_session(client, ws)
            await prompt(client, session_id, "[fake-agy:quota] hi")
            again, updates = await prompt(client, session_id, "after the quota")
            assert stop_reason(again) == "end_turn"
            assert message_text(updates) == "after the quota\n"
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- schema


async def test_structured_output_is_shown_once_fenced(harness: Harness, ws: Path) -> None:
    """A structured-output turn: one fenced JSON message (no raw JSON besides it) and
    _meta.structuredOutput on the prompt response."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:schema] Paris")
            assert stop_reason(response) == "end_turn"
        structured = response["result"]["_meta"]["structuredOutput"]
        assert structured == {"answer": "Paris", "confidence": 1.5}
        text = message_text(updates)
        assert text.count("```json") == 1
        fenced = text.split("```json\n", 1)[1].split("\n```", 1)[0]
        assert json.loads(fenced) == structured
        assert text.count('"answer"') == 1, text
        assert of_kind(updates, "tool_call") == []  # agy's finish tool is bookkeeping
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_structured_output_streamed_as_text_is_not_duplicated(
    harness: Harness, ws: Path
) -> None:
    """When agy streams its JSON line (1.3.1: with its internal toolAction/toolSummary
    keys), the client sees only the clean object, once, fenced."""
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    }
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(AGYBRIDGE_JSON_SCHEMA=json.dumps(schema)) as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:schema] stream")
            assert stop_reason(response) == "end_turn"
        structured = response["result"]["_meta"]["structuredOutput"]
        assert structured == {"answer": "stream", "confidence": 1.5}
        text = message_text(updates)
        assert text.count('"answer"') == 1, text
        assert text.startswith("```json\n") and "toolAction" not in json.dumps(updates)
        assert json.loads(text.replace("```json", "").replace("```", "")) == structured
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- unknowns


async def test_unknown_output_is_counted_and_the_turn_completes(harness: Harness, ws: Path) -> None:
    """An unknown event, step type and state and a non-JSON line: the turn still ends
    end_turn with its text and tool card; _meta.unrecognisedAgyOutput counts each."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            response, updates = await prompt(client, session_id, "[fake-agy:unknown-events]")
            assert stop_reason(response) == "end_turn"
        assert message_text(updates) == "Still here after some output I could not explain.\n"
        [call] = of_kind(updates, "tool_call")
        assert completed(updates, call["toolCallId"])
        counts = response["result"]["_meta"]["unrecognisedAgyOutput"]
        assert counts == {
            f"event:{UNKNOWN_EVENT}": 1,
            f"step_type:{UNKNOWN_STEP_TYPE}": 1,
            f"state:{UNKNOWN_STATE}": 1,
            "malformed:not JSON": 1,
        }, counts
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- usage, title


async def test_usage_per_turn_and_across_a_respawn(harness: Harness, ws: Path) -> None:
    """usage_update follows model steps; _meta.usage is each turn's own figures (the raw
    step usages of that turn), never a cumulative sum: over two turns of one agy, and for
    the first turn of an agy respawned with --conversation after a cancel."""
    bridge = harness.open_bridge(
        FAKE_AGY_STDOUT_LOG=str(harness.tmp_path / "agy-stdout.ndjson"),
        # The respawned agy's first result.usage then also counts the earlier turns (MJ).
        FAKE_AGY_RESUME_USAGE="1",
    )
    with trio.fail_after(TEST_TIMEOUT_S):
        async with bridge as client:
            session_id = await open_session(client, ws)
            metas: list[dict[str, Any]] = []
            meters: list[list[Update]] = []
            for text in ("first turn", "second turn"):
                response, updates = await prompt(client, session_id, text)
                assert stop_reason(response) == "end_turn"
                metas.append(response["result"]["_meta"])
                meters.append(of_kind(updates, "usage_update"))
            # Cancel a slow turn: agy is killed and respawned with --conversation.
            mark = client.mark()
            slow_id = await client.start_prompt(session_id, "[fake-agy:slow] long")
            await client.wait_update(session_id, "agent_message_chunk", since=mark)
            await client.notify("session/cancel", {"sessionId": session_id})
            assert stop_reason(await client.response(slow_id)) == "cancelled"
            response, updates = await prompt(client, session_id, "after the respawn")
            assert stop_reason(response) == "end_turn"
            metas.append(response["result"]["_meta"])
            meters.append(of_kind(updates, "usage_update"))
        launches = agy_launches(harness)
        assert len(launches) == 2 and "--conversation" in launches[1]["argv"]
        # Raw per-turn step sums; the cancelled turn's result is the third.
        raw = per_turn_step_usage(harness.tmp_path)
        assert len(raw) == 4
        expected = [raw[0], raw[1], raw[3]]
        assert [m["usage"] for m in metas] == [camel(u) for u in expected]
        results = [
            e["event"]["result"]["usage"]
            for e in raw_agy_lines(harness.tmp_path)
            if e["event"].get("event") == "result"
        ]
        # agy's figures are cumulative, the bridge's are not (also after the respawn).
        assert results[1]["total_tokens"] > metas[1]["usage"]["totalTokens"]
        assert results[3]["total_tokens"] > metas[2]["usage"]["totalTokens"]
        for meta, meter in zip(metas, meters, strict=True):
            assert meter, "no usage_update in the turn"
            assert meter[-1]["used"] == meta["context"]["used"] > 0
            assert meter[-1]["size"] == meta["context"]["size"] > 0
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_first_prompt_titles_the_session(harness: Harness, ws: Path) -> None:
    """session_info_update carries the first prompt's line as title, once."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await open_session(client, ws)
            _, first = await prompt(client, session_id, "  Summarise   the notes\nplease ")
            _, second = await prompt(client, session_id, "another question")
        infos = of_kind(first, "session_info_update")
        assert [i.get("title") for i in infos if "title" in i] == ["Summarise the notes"]
        assert all("title" not in i for i in of_kind(second, "session_info_update"))
        assert of_kind(second, "session_info_update"), "no updatedAt on the second turn"
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- big payloads


async def run_big_beside_echo(
    harness: Harness, tmp_path: Path, scenario: str
) -> tuple[Update, list[Update]]:
    """Session A runs ``scenario`` held open by a gate after its payload; session B runs
    two echo turns meanwhile. B must finish both while A is still open (A can only finish
    once the gate exists, which the test creates after B is done). Returns A's response
    and updates."""
    gate = tmp_path / f"{scenario}.gate"
    ws_a, ws_b = tmp_path / "ws-a", tmp_path / "ws-b"
    ws_a.mkdir()
    ws_b.mkdir()
    async with harness.open_bridge() as client:
        await initialize(client)
        session_a = await client.new_session(ws_a)
        session_b = await client.new_session(ws_b)
        mark = client.mark()
        big_id = await client.start_prompt(session_a, f"[fake-agy:{scenario}] gate={gate}")
        echo_ids = []
        for text in ("echo one", "echo two"):
            echo_ids.append(await client.start_prompt(session_b, text))
            echo = await client.response(echo_ids[-1])
            assert stop_reason(echo) == "end_turn"
            assert client.response_nowait(big_id) is None
        kind = "tool_call_update" if scenario == "big-output" else "agent_message_chunk"
        await client.wait_update(session_a, kind, since=mark)  # the payload went through
        assert client.response_nowait(big_id) is None
        gate.touch()
        response = await client.response(big_id)
        positions = [client.position(client.response_nowait(i) or {}) for i in echo_ids]
        assert max(positions) < client.position(response)
        assert client.message_text(session_b, since=mark) == "echo one\necho two\n"
        updates = client.updates(session_a, since=mark)
    assert_clean(client)
    return response, updates


async def test_big_tool_output_passes_through_without_stalling_others(
    harness: Harness, tmp_path: Path
) -> None:
    """A 1 MiB run_command output reaches the client intact (rawOutput; the card's text is
    capped) while another session's turns complete."""
    with trio.fail_after(BIG_TEST_TIMEOUT_S):
        response, updates = await run_big_beside_echo(harness, tmp_path, "big-output")
    assert stop_reason(response) == "end_turn"
    [call] = of_kind(updates, "tool_call")
    done = completed(updates, call["toolCallId"])
    output = done["rawOutput"]["output"]
    assert len(output) == BIG_OUTPUT_BYTES and output == big_output_text()
    [text] = [c["content"]["text"] for c in done["content"] if c["type"] == "content"]
    assert text.startswith("```\n" + big_output_text()[:1000])
    assert message_text(updates) == f"The command printed {BIG_OUTPUT_BYTES} bytes.\n"
    await harness.assert_no_leftovers()


async def test_huge_text_line_passes_through_without_stalling_others(
    harness: Harness, tmp_path: Path
) -> None:
    """A >10 MB text_delta line arrives as the same text (equal size), once, while another
    session's turns complete."""
    with trio.fail_after(BIG_TEST_TIMEOUT_S):
        response, updates = await run_big_beside_echo(harness, tmp_path, "huge-line")
    assert stop_reason(response) == "end_turn"
    text = message_text(updates)
    expected = huge_line_text() + "\n"
    assert len(text) == len(expected)
    assert text == expected
    await harness.assert_no_leftovers()
