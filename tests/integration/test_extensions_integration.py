"""The ``_agybridge/*`` extensions over the wire, with the fake agy editing files.

Two editing turns are recorded as mutations (per turn, with provenance), shown
as diffs and rolled back; a file changed behind agy's back makes rollback
refuse unless forced; ``/undo`` works from the prompt; ``initialize``
advertises exactly the methods that answer. Every extension payload is
checked against docs/extensions.schema.json.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from agybridge.store import BLOB_KEY, MUTATION_LOG_KEY, Store, referenced_blobs
from fake_agy._fake_scenarios import EDIT_INITIAL_CONTENT, EDIT_SUFFIX

from ..acp_wire import Harness, RawClient, WireValidator
from ..extension_schema import call, check_def

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
#: Edits inside the workspace pass unasked; the hook still sees them first.
HARNESS_ENV = {"AGYBRIDGE_MODE": "accept-edits"}


async def prompt(client: RawClient, session_id: str, text: str) -> dict[str, Any]:
    response = await client.response(await client.start_prompt(session_id, text))
    assert "result" in response, f"{response}\n{client.diagnostics()}"
    return response


async def result(client: RawClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await call(client, method, params)
    assert "result" in response, f"{method}: {response}\n{client.diagnostics()}"
    value: dict[str, Any] = response["result"]
    return value


def make_workspace(harness: Harness, notes: bytes | None = None) -> Path:
    """The session's cwd, with ``notes.txt`` holding ``notes`` (None: no file yet)."""
    workspace = harness.tmp_path / "ws"
    workspace.mkdir()
    if notes is not None:
        (workspace / "notes.txt").write_bytes(notes)
    return workspace


async def two_editing_turns(client: RawClient, workspace: Path) -> tuple[str, Path]:
    await client.initialize()
    session_id = await client.new_session(workspace)
    await prompt(client, session_id, "[fake-agy:edit] notes.txt")
    await prompt(client, session_id, "[fake-agy:edit] notes.txt")
    return session_id, workspace / "notes.txt"


async def test_two_turns_are_listed_diffed_and_rolled_back(harness: Harness) -> None:
    """mutations lists each turn's change with provenance; diff shows it;
    rollback toTurn 0 restores the original bytes (the file did not exist)."""
    workspace = make_workspace(harness)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            session_id, target = await two_editing_turns(client, workspace)
            first_line = EDIT_INITIAL_CONTENT.partition("\n")[0]
            assert target.read_text().startswith(first_line + EDIT_SUFFIX * 2)

            listed = await result(client, "_agybridge/session/mutations", {"sessionId": session_id})
            turns = {t["turn"]: t["files"] for t in listed["turns"]}
            assert sorted(turns) == [0, 1]
            kinds = [(f["kind"], f["tool"]) for f in turns[0]]
            assert kinds == [("created", "write_to_file"), ("modified", "replace_file_content")]
            assert [f["kind"] for f in turns[1]] == ["modified"]
            for files in turns.values():
                for f in files:
                    assert f["path"] == str(target)
                    assert f["provenance"] == {"writtenBy": "agy", "changedAfter": False}
                    assert f["toolCallId"]
            assert turns[1][0]["after"]["sha256"] != turns[1][0]["before"]["sha256"]
            since = await result(
                client, "_agybridge/session/mutations", {"sessionId": session_id, "sinceTurn": 1}
            )
            assert [t["turn"] for t in since["turns"]] == [1]

            diff = await result(
                client, "_agybridge/session/diff", {"sessionId": session_id, "turn": 1}
            )
            assert len(diff["files"]) == 1
            assert f"-{first_line}{EDIT_SUFFIX}\n" in diff["diff"]
            assert f"+{first_line}{EDIT_SUFFIX * 2}\n" in diff["diff"]
            hunk = diff["files"][0]["hunks"][0]
            assert {"type": "add", "text": first_line + EDIT_SUFFIX * 2} in hunk["lines"]
            whole = await result(
                client, "_agybridge/session/diff", {"sessionId": session_id, "path": "notes.txt"}
            )
            added = [ln for h in whole["files"][0]["hunks"] for ln in h["lines"]]
            assert [ln["type"] for ln in added] == ["add"] * len(EDIT_INITIAL_CONTENT.splitlines())

            dry = await result(
                client,
                "_agybridge/session/rollback",
                {"sessionId": session_id, "toTurn": 1, "dryRun": True},
            )
            assert dry["applied"] is False
            assert [f["action"] for f in dry["files"]] == ["restore"]
            assert target.read_text().startswith(first_line + EDIT_SUFFIX * 2)

            back = await result(
                client, "_agybridge/session/rollback", {"sessionId": session_id, "toTurn": 0}
            )
            assert back["applied"] is True
            assert [f["action"] for f in back["files"]] == ["delete"]
            assert not target.exists()  # the original state: no such file
            assert back["agyNotice"] and "notes.txt" in back["agyNotice"]

            after = await result(client, "_agybridge/session/mutations", {"sessionId": session_id})
            rolled = [f for t in after["turns"] for f in t["files"] if f["source"] == "rollback"]
            assert [(f["kind"], f["rolledBackTo"]) for f in rolled] == [("deleted", 0)]

            # agy is told on its next turn: the echo shows what agy read.
            mark = client.mark()
            await prompt(client, session_id, "[fake-agy:echo] hello again")
            echoed = client.message_text(session_id, since=mark)
            assert "rolled back" in echoed and "- notes.txt: deleted" in echoed, echoed
            mark = client.mark()
            await prompt(client, session_id, "[fake-agy:echo] and again")
            assert "rolled back" not in client.message_text(session_id, since=mark)
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_a_file_changed_after_agy_makes_rollback_refuse(harness: Harness) -> None:
    """Someone else edits the file after agy: provenance says so, rollback
    refuses naming it, and force restores the original bytes anyway."""
    original = b"mine: first line\nsecond\n"
    workspace = make_workspace(harness, original)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            session_id, target = await two_editing_turns(client, workspace)
            target.write_bytes(target.read_bytes() + b"user's own line\n")

            listed = await result(client, "_agybridge/session/mutations", {"sessionId": session_id})
            last = listed["turns"][-1]["files"][-1]
            assert last["provenance"]["changedAfter"] is True
            first = listed["turns"][0]["files"][0]
            assert first["kind"] == "modified"
            assert first["provenance"]["changedAfter"] is False

            refused = await call(
                client, "_agybridge/session/rollback", {"sessionId": session_id, "toTurn": 0}
            )
            assert refused["error"]["code"] == -32600, refused
            assert str(target) in refused["error"]["message"]
            assert refused["error"]["data"]["files"][0]["changedSinceAgy"] is True
            assert b"user's own line" in target.read_bytes()

            forced = await result(
                client,
                "_agybridge/session/rollback",
                {"sessionId": session_id, "toTurn": 0, "force": True},
            )
            assert forced["applied"] is True
            assert target.read_bytes() == original
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_undo_and_diff_from_the_prompt(harness: Harness) -> None:
    """/diff shows agy's change; /undo undoes the last editing turn, then the one before."""
    original = b"line one\nline two\n"
    workspace = make_workspace(harness, original)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            session_id, target = await two_editing_turns(client, workspace)
            once = target.read_bytes().replace(EDIT_SUFFIX.encode() * 2, EDIT_SUFFIX.encode())

            mark = client.mark()
            await prompt(client, session_id, "/diff 2")
            assert f"+line one{EDIT_SUFFIX * 2}" in client.message_text(session_id, since=mark)

            mark = client.mark()
            await prompt(client, session_id, "/undo")
            assert "from turn 2 on" in client.message_text(session_id, since=mark)
            assert target.read_bytes() == once
            await prompt(client, session_id, "/undo")
            assert target.read_bytes() == original
            mark = client.mark()
            await prompt(client, session_id, "/undo")
            assert "Nothing to undo" in client.message_text(session_id, since=mark)
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_initialize_advertises_exactly_what_answers(harness: Harness) -> None:
    """Every method listed in _meta.agybridge answers with a valid result; an
    unlisted _agybridge method is -32601; standard capabilities are unchanged."""
    workspace = make_workspace(harness)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            init = (await client.initialize())["result"]
            caps = init["agentCapabilities"]
            advertised = caps["_meta"]["agybridge"]
            check_def("Capabilities", advertised)
            assert advertised["version"] == 1
            assert advertised["notifications"] == []
            assert init["_meta"]["bridgeCapabilities"]["permissionRoundTrip"] is True
            session_id = await client.new_session(workspace)
            await prompt(client, session_id, "[fake-agy:edit]")
            samples: dict[str, dict[str, Any]] = {
                "_agybridge/session/runtime": {},
                "_agybridge/session/history": {"limit": 2},
                "_agybridge/session/mutations": {},
                "_agybridge/session/diff": {},
                "_agybridge/session/rollback": {"toTurn": 0, "dryRun": True},
                "_agybridge/mcp/list": {},
                "_agybridge/skills/list": {},
                "_agybridge/session/steer": {"text": "[fake-agy:echo] steer"},
                "_agybridge/session/set_workspace": {"cwd": str(workspace)},
                "_agybridge/session/logs": {"limit": 5},
                # Refused here (no turn failed, no MCP server): their own wire
                # tests make them answer (test_retry_logs_wire, test_mcp_test_wire).
                "_agybridge/session/retry": {},
                "_agybridge/mcp/test": {"name": "docs"},
                "_agybridge/settings/options": {},
                "_agybridge/settings/reload": {},
            }
            refused_with = {"_agybridge/session/retry": -32600, "_agybridge/mcp/test": -32602}
            assert set(advertised["extensions"]) == set(samples)
            for method in advertised["extensions"]:
                params = {"sessionId": session_id, **samples[method]}
                if method in refused_with:
                    refused = await call(client, method, params)
                    assert refused["error"]["code"] == refused_with[method], refused
                    continue
                answered = await result(client, method, params)
                if method == "_agybridge/settings/options":
                    options = {row["name"]: row for row in answered["settings"]}
            # The harness sets these; a grace period is left at its default.
            assert options["AGYBRIDGE_LOG_LEVEL"] == {
                "name": "AGYBRIDGE_LOG_LEVEL", "value": "DEBUG",
                "source": "environment", "reloadable": False,
            }  # fmt: skip
            assert options["AGYBRIDGE_SIGINT_GRACE_S"]["source"] == "default"
            missing = await client.request("_agybridge/session/nothing", {"sessionId": session_id})
            assert missing["error"]["code"] == -32601
            unknown = await call(client, "_agybridge/session/runtime", {"sessionId": "nope"})
            assert unknown["error"]["code"] == -32002
            bad = await client.request(
                "_agybridge/session/rollback", {"sessionId": session_id, "toTurn": -1}
            )
            assert bad["error"]["code"] == -32602 and "toTurn" in bad["error"]["message"]
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_history_pages_prompts_answers_tools_and_mutations(harness: Harness) -> None:
    """history returns the journal and the mutations in turn order, page by page."""
    workspace = make_workspace(harness)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            session_id, _ = await two_editing_turns(client, workspace)
            entries: list[dict[str, Any]] = []
            cursor = None
            pages = 0
            while True:
                params: dict[str, Any] = {"sessionId": session_id, "limit": 3}
                if cursor:
                    params["cursor"] = cursor
                page = await result(client, "_agybridge/session/history", params)
                entries += page["entries"]
                pages += 1
                cursor = page["nextCursor"]
                if cursor is None:
                    break
            kinds = [(e["turn"], e["kind"]) for e in entries]
            assert kinds[0] == (0, "user")
            assert (0, "mutation") in kinds and (1, "mutation") in kinds
            assert (1, "tool") in kinds and (1, "agent") in kinds
            assert kinds == sorted(kinds, key=lambda k: k[0])
            assert pages == -(-len(entries) // 3)
            bad = await client.request(
                "_agybridge/session/history", {"sessionId": session_id, "cursor": "zzz"}
            )
            assert bad["error"]["code"] == -32602
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_mutations_survive_a_restart(harness: Harness) -> None:
    """The log and its snapshots are stored with the session: a new bridge
    that loads it lists the changes and can roll them back."""
    original = b"kept across restarts\n"
    workspace = make_workspace(harness, original)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            session_id, target = await two_editing_turns(client, workspace)
        async with harness.open_bridge("edit", validator=validator) as client:
            await client.initialize()
            loaded = await client.request(
                "session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
            )
            assert "result" in loaded, loaded
            listed = await result(client, "_agybridge/session/mutations", {"sessionId": session_id})
            assert [t["turn"] for t in listed["turns"]] == [0, 1]
            await result(
                client, "_agybridge/session/rollback", {"sessionId": session_id, "toTurn": 0}
            )
            assert target.read_bytes() == original
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_a_prompt_sent_right_behind_a_rollback_tells_agy(harness: Harness) -> None:
    """A client that does not wait for the rollback's answer before prompting:
    the prompt waits for the rollback, and agy reads the note with it (not one
    turn late, after it may have edited the files being restored)."""
    workspace = make_workspace(harness)
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=WireValidator()) as client:
            session_id, target = await two_editing_turns(client, workspace)
            rollback_id, prompt_id = client.new_id(), client.new_id()
            messages = [
                {
                    "jsonrpc": "2.0",
                    "id": rollback_id,
                    "method": "_agybridge/session/rollback",
                    "params": {"sessionId": session_id, "toTurn": 0},
                },
                {
                    "jsonrpc": "2.0",
                    "id": prompt_id,
                    "method": "session/prompt",
                    "params": {
                        "sessionId": session_id,
                        "prompt": [{"type": "text", "text": "[fake-agy:echo] hello again"}],
                    },
                },
            ]
            mark = client.mark()
            await client.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
            rolled = await client.response(rollback_id)
            assert rolled["result"]["applied"] is True, rolled
            assert "result" in await client.response(prompt_id)
            assert not target.exists()
            echoed = client.message_text(session_id, since=mark)
            assert "rolled back" in echoed and "- notes.txt: deleted" in echoed, echoed
        await harness.assert_no_leftovers()


async def test_undo_and_status_after_a_restart_see_the_stored_changes(harness: Harness) -> None:
    """A new bridge that loads the session: ``/undo`` undoes the stored last
    turn and the runtime snapshot counts the stored changes (before, the log
    was read from the store only by diff/mutations/rollback: ``/undo`` said
    "Nothing to undo" and ``runtime.mutations`` was 0)."""
    original = b"kept across restarts\n"
    workspace = make_workspace(harness, original)
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=WireValidator()) as client:
            session_id, target = await two_editing_turns(client, workspace)
            edited_twice = target.read_bytes()
        async with harness.open_bridge("edit", validator=WireValidator()) as client:
            await client.initialize()
            loaded = await client.request(
                "session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
            )
            assert "result" in loaded, loaded
            status = await result(client, "_agybridge/session/runtime", {"sessionId": session_id})
            assert status["mutations"] == 2, status
            mark = client.mark()
            await prompt(client, session_id, "/undo")
            assert "from turn 2 on" in client.message_text(session_id, since=mark)
            assert target.read_bytes() != edited_twice
        await harness.assert_no_leftovers()


async def test_diff_with_odd_arguments_answers_in_the_chat(harness: Harness) -> None:
    """``/diff`` with an argument that is not a plain turn number answers
    with a message (a superscript digit passed ``str.isdigit`` and then made
    ``int()`` raise, as did 5000 digits: an internal error instead of an answer).
    One bridge and session serve every argument: a refused ``/diff`` changes nothing."""
    workspace = make_workspace(harness, b"x\n")
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=WireValidator()) as client:
            await client.initialize()
            session_id = await client.new_session(workspace)
            for args in ["²", "1²", "-1", "0", "1 2", "١", "9" * 5000]:
                mark = client.mark()
                await prompt(client, session_id, f"/diff {args}")
                answer = client.message_text(session_id, since=mark)
                assert "turn number" in answer, f"/diff {args[:40]!r}: {answer!r}"
        await harness.assert_no_leftovers()


def text_block(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


async def test_a_prompt_sent_right_behind_undo_tells_agy(harness: Harness) -> None:
    """``/undo`` and a prompt in one write: the prompt's turn waits behind
    the ``/undo`` (wire order) and agy reads the rollback note with it. Before,
    the note was taken as the prompt's task started, possibly before the
    ``/undo`` had rolled anything back: agy read it one turn late."""
    workspace = make_workspace(harness)
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=WireValidator()) as client:
            session_id, _ = await two_editing_turns(client, workspace)
            undo_id, prompt_id = client.new_id(), client.new_id()
            texts = {undo_id: "/undo", prompt_id: "[fake-agy:echo] hello again"}
            mark = client.mark()
            await client.send_raw(  # one write: the prompt does not wait for the /undo
                b"".join(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": request_id,
                            "method": "session/prompt",
                            "params": {"sessionId": session_id, "prompt": [text_block(text)]},
                        }
                    ).encode()
                    + b"\n"
                    for request_id, text in texts.items()
                )
            )
            assert "result" in await client.response(undo_id)
            assert "result" in await client.response(prompt_id)
            echoed = client.message_text(session_id, since=mark)
            assert "rolled back" in echoed and "- notes.txt: restored" in echoed, echoed
        await harness.assert_no_leftovers()


async def test_undo_refused_for_a_file_changed_after_agy_says_undo_force(harness: Harness) -> None:
    """``/undo`` of a turn whose file someone changed after agy: the chat
    answer names the command that overwrites it (``/undo force``), not the
    extension's ``force: true`` parameter a person typing cannot pass."""
    workspace = make_workspace(harness, b"mine\n")
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=WireValidator()) as client:
            session_id, target = await two_editing_turns(client, workspace)
            target.write_bytes(target.read_bytes() + b"user's own line\n")
            mark = client.mark()
            await prompt(client, session_id, "/undo")
            refused = client.message_text(session_id, since=mark)
            assert str(target) in refused and "`/undo force`" in refused, refused
            assert "force: true" not in refused, refused
            mark = client.mark()
            await prompt(client, session_id, "/undo force")
            assert "from turn 2 on" in client.message_text(session_id, since=mark)
            assert b"user's own line" not in target.read_bytes()
        await harness.assert_no_leftovers()


async def test_deleting_a_session_deletes_its_edit_log_and_its_own_snapshots(
    harness: Harness,
) -> None:
    """session/delete and ``agybridge sessions delete`` remove a session's
    mutation log and the file snapshots no other session refers to: two
    sessions that edited the same content share its snapshots, which stay
    until the second is deleted too; then nothing of either is left."""
    db = harness.tmp_path / "agybridge.db"

    def edit_keys() -> dict[str, set[str]]:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            keys = [key for (key,) in conn.execute("SELECT key FROM meta")]
        return {
            "logs": {
                k.removeprefix(MUTATION_LOG_KEY) for k in keys if k.startswith(MUTATION_LOG_KEY)
            },
            "blobs": {k.removeprefix(BLOB_KEY) for k in keys if k.startswith(BLOB_KEY)},
        }

    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            await client.initialize()
            sessions = []
            for name in ("a", "b"):
                workspace = harness.tmp_path / name
                workspace.mkdir()
                session_id = await client.new_session(workspace)
                await prompt(client, session_id, "[fake-agy:edit] notes.txt")
                sessions.append(session_id)
            first, second = sessions
            await prompt(client, second, "[fake-agy:edit] notes.txt")  # one more content
            stored = await trio.to_thread.run_sync(edit_keys)
            assert stored["logs"] == {first, second}
            with Store.open(db) as store:
                of = {s: referenced_blobs(store.meta_get(MUTATION_LOG_KEY + s)) for s in sessions}
            assert of[first] < of[second] and stored["blobs"] == of[second]

            answer = await client.request("session/delete", {"sessionId": first})
            assert answer.get("result") == {}, answer
            assert await trio.to_thread.run_sync(edit_keys) == stored | {"logs": {second}}
        deleted = await harness.run_cli("sessions", "delete", second)
        assert deleted.stdout.decode() == f"deleted {second}\n"
        assert await trio.to_thread.run_sync(edit_keys) == {"logs": set(), "blobs": set()}
        await harness.assert_no_leftovers()
    assert validator.problems == []
