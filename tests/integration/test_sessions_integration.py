"""Sessions that survive restarts, through the wire with two bridge processes.

new -> two prompts -> close -> a NEW bridge process on the same database ->
list shows the session with its title -> load replays both turns (text and
tool cards) -> the next prompt runs on an agy resumed with --conversation.
Every message is schema-validated.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agybridge.store import SessionRecord, Store

from ..acp_wire import Harness, RawClient, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60


async def ok(client: RawClient, method: str, params: dict[str, Any]) -> Any:
    response = await client.request(method, params)
    assert "result" in response, f"{method}: {response}\n{client.diagnostics()}"
    return response["result"]


async def prompt(client: RawClient, session_id: str, text: str) -> str:
    result = await ok(
        client,
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
    )
    stop: str = result["stopReason"]
    return stop


async def test_history_survives_a_restart(harness: Harness) -> None:
    """The whole acceptance path across two bridge processes."""
    validator = WireValidator()
    cwd = str(harness.tmp_path)
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as first:
            await first.initialize()
            session_id = (await ok(first, "session/new", {"cwd": cwd, "mcpServers": []}))[
                "sessionId"
            ]
            assert await prompt(first, session_id, "Fix the flaky test please") == "end_turn"
            assert await prompt(first, session_id, "[fake-agy:tool] now run it") == "end_turn"
            first_turns = [
                u
                for u in first.updates(session_id)
                if u["sessionUpdate"] in ("agent_message_chunk", "tool_call")
            ]
            assert await ok(first, "session/close", {"sessionId": session_id}) == {}
        conversation = harness.session_argvs()[0]
        launches_before = len(harness.session_argvs())

        async with harness.open_bridge(validator=validator) as second:
            await second.initialize()
            listed = await ok(second, "session/list", {"cwd": cwd})
            [info] = [s for s in listed["sessions"] if s["sessionId"] == session_id]
            assert info["title"] == "Fix the flaky test please"
            assert info["cwd"] == cwd and info["updatedAt"]
            conversation_id = info["_meta"]["conversationId"]

            mark = second.mark()
            loaded = await second.request(
                "session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
            )
            assert "result" in loaded, loaded
            replay = second.updates(session_id, since=mark)
            replay_end = second.position(loaded)
            assert all(
                second.position(m) < replay_end
                for m in second.received[mark:]
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"]
                in ("user_message_chunk", "agent_message_chunk", "tool_call")
            )
            users = [
                u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"
            ]
            assert users == ["Fix the flaky test please", "[fake-agy:tool] now run it"]
            agent_text = "".join(
                u["content"]["text"] for u in replay if u["sessionUpdate"] == "agent_message_chunk"
            )
            first_text = "".join(
                u["content"]["text"]
                for u in first_turns
                if u["sessionUpdate"] == "agent_message_chunk"
            )
            assert agent_text == first_text
            tools = [u for u in replay if u["sessionUpdate"] == "tool_call"]
            first_tools = [u for u in first_turns if u["sessionUpdate"] == "tool_call"]
            assert [(t["toolCallId"], t["title"], t["kind"]) for t in tools] == [
                (t["toolCallId"], t["title"], t["kind"]) for t in first_tools
            ]
            assert all(t["status"] == "completed" for t in tools)
            # Stable message ids: the replay reuses the original ones.
            assert {
                u["messageId"] for u in replay if u["sessionUpdate"] == "agent_message_chunk"
            } <= {u["messageId"] for u in first_turns if "messageId" in u}

            assert await prompt(second, session_id, "and again") == "end_turn"
        # The loaded session journals its next turn after the stored ones.
        with Store.open(harness.tmp_path / "agybridge.db") as store:
            users = [(e.turn, e.text) for e in store.journal(session_id) if e.kind == "user"]
        assert users == [
            (0, "Fix the flaky test please"),
            (1, "[fake-agy:tool] now run it"),
            (2, "and again"),
        ]
        argv = harness.session_argvs()[launches_before]
        assert argv[argv.index("--conversation") + 1] == conversation_id
        assert "--conversation" not in conversation
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_resume_does_not_replay_and_other_cwds_are_refused(harness: Harness) -> None:
    """resume answers without history; another cwd, unknown ids, bad cursors and
    bad directories are clear errors; delete is idempotent."""
    validator = WireValidator()
    cwd = str(harness.tmp_path)
    other = harness.tmp_path / "elsewhere"
    other.mkdir()
    extra = harness.tmp_path / "lib"
    extra.mkdir()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            session_id = (
                await ok(
                    client,
                    "session/new",
                    {"cwd": cwd, "mcpServers": [], "additionalDirectories": [str(extra)]},
                )
            )["sessionId"]
            assert await prompt(client, session_id, "hello") == "end_turn"
            assert await ok(client, "session/close", {"sessionId": session_id}) == {}

            wrong = await client.request(
                "session/load", {"sessionId": session_id, "cwd": str(other), "mcpServers": []}
            )
            assert wrong["error"]["code"] == -32602 and cwd in wrong["error"]["message"]
            unknown = await client.request("session/resume", {"sessionId": "nope", "cwd": cwd})
            assert unknown["error"]["code"] == -32002
            bad_dir = await client.request(
                "session/new",
                {"cwd": cwd, "mcpServers": [], "additionalDirectories": ["relative/dir"]},
            )
            assert bad_dir["error"]["code"] == -32602
            bad_cursor = await client.request("session/list", {"cursor": "not-a-cursor"})
            assert bad_cursor["error"]["code"] == -32602
            assert bad_cursor["error"]["data"]["path"] == "$.cursor"

            listed = await ok(client, "session/list", {"cwd": cwd})
            assert listed["sessions"][0]["additionalDirectories"] == [str(extra)]

            mark = client.mark()
            resumed = await ok(
                client,
                "session/resume",
                {"sessionId": session_id, "cwd": cwd, "additionalDirectories": [str(extra)]},
            )
            assert resumed["modes"]["currentModeId"] == "ask"
            # No history replay (commands and config may be announced).
            replayed = {"user_message_chunk", "agent_message_chunk", "tool_call"}
            assert [
                u for u in client.updates(session_id, since=mark) if u["sessionUpdate"] in replayed
            ] == []
            assert await prompt(client, session_id, "still here") == "end_turn"

            assert await ok(client, "session/delete", {"sessionId": session_id}) == {}
            assert await ok(client, "session/delete", {"sessionId": session_id}) == {}
            gone = await client.request(
                "session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
            )
            assert gone["error"]["code"] == -32002
        argvs = harness.session_argvs()
        assert all(str(extra) in argv for argv in argvs)
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_list_pages_over_250_sessions(harness: Harness) -> None:
    """Pagination returns each of 250 stored sessions exactly once, newest first."""
    cwd = str(harness.tmp_path)
    with Store.open(harness.tmp_path / "agybridge.db") as store:
        for i in range(250):
            store.upsert_session(
                SessionRecord(
                    session_id=f"sess_{i:04d}",
                    cwd=cwd,
                    title=f"t{i}",
                    created_at="2026-11-01T00:00:00Z",
                    updated_at=f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00Z",
                )
            )
    validator = WireValidator()
    seen: list[str] = []
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            cursor = None
            pages = 0
            while True:
                params = {"cwd": cwd} if cursor is None else {"cwd": cwd, "cursor": cursor}
                page = await ok(client, "session/list", params)
                seen += [s["sessionId"] for s in page["sessions"]]
                pages += 1
                cursor = page.get("nextCursor")
                if not cursor:
                    break
        await harness.assert_no_leftovers()
    assert sorted(seen) == sorted(f"sess_{i:04d}" for i in range(250))
    assert len(seen) == 250 and pages > 1
    assert seen[0] == "sess_0249"
    assert validator.problems == []


@pytest.mark.parametrize("cwd", ["", "relative/dir"])
async def test_a_list_filter_that_is_not_an_absolute_path_is_refused(
    harness: Harness, cwd: str
) -> None:
    """The schema: cwd "Must be an absolute path". An empty one is not "no filter"
    (which would list every directory's sessions): it is -32602 like a relative one."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            answer = await client.request("session/list", {"cwd": cwd})
            assert answer["error"]["code"] == -32602, answer
        await harness.assert_no_leftovers()


@pytest.mark.parametrize("opened_by", ["new", "load"])
async def test_a_session_deleted_by_another_process_stays_deleted(
    harness: Harness, opened_by: str
) -> None:
    """`agybridge sessions delete` (another process) on a live session wins: the
    session keeps answering its prompts, once each, but its later turns do not
    write the row back (nor journal lines), and the bridge says so in its log.
    The same for a session this bridge loaded from the store: its row exists already."""
    validator = WireValidator()
    cwd = str(harness.tmp_path)
    db = harness.tmp_path / "agybridge.db"
    with trio.fail_after(TIMEOUT_S):
        if opened_by == "load":
            async with harness.open_bridge(validator=validator) as client:
                await client.initialize()
                session_id = await client.new_session(cwd)
                assert await prompt(client, session_id, "before") == "end_turn"
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            if opened_by == "load":
                await ok(
                    client,
                    "session/load",
                    {"sessionId": session_id, "cwd": cwd, "mcpServers": []},
                )
            else:
                session_id = await client.new_session(cwd)
                assert await prompt(client, session_id, "first") == "end_turn"

            deleted = await harness.run_cli("sessions", "delete", session_id)
            assert deleted.stdout.decode() == f"deleted {session_id}\n"
            assert await prompt(client, session_id, "second") == "end_turn"
            assert await prompt(client, session_id, "third") == "end_turn"
            answers = [
                m for m in client.received if "id" in m and "stopReason" in m.get("result", {})
            ]
            assert len(answers) == (2 if opened_by == "load" else 3)

            def stored() -> tuple[SessionRecord | None, int]:
                with Store.open(db) as store:
                    return store.get_session(session_id), len(store.journal(session_id))

            assert await trio.to_thread.run_sync(stored) == (None, 0)
            listed = await ok(client, "session/list", {"cwd": cwd})
            assert session_id not in [s["sessionId"] for s in listed["sessions"]]
        await harness.assert_no_leftovers()
    log = (harness.tmp_path / "agybridge.log").read_text()
    warned = f"WARNING agybridge.session.persistence: session {session_id} was deleted"
    warnings = [line for line in log.splitlines() if warned in line]
    assert len(warnings) == 1, log
    assert validator.problems == []


async def test_list_filters_by_folders_in_meta(harness: Harness) -> None:
    """session/list's folder filter, which the stable schema dropped, is
    ``_meta.additionalDirectories`` (exact match, like the draft's top-level
    field, still accepted); a malformed one is -32602 naming the field."""
    cwd = str(harness.tmp_path)
    extra = harness.tmp_path / "extra"
    extra.mkdir()
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            plain = (await ok(client, "session/new", {"cwd": cwd, "mcpServers": []}))["sessionId"]
            wide = (
                await ok(
                    client,
                    "session/new",
                    {"cwd": cwd, "mcpServers": [], "additionalDirectories": [str(extra)]},
                )
            )["sessionId"]

            async def listed(params: dict[str, Any]) -> list[str]:
                answer = await ok(client, "session/list", params)
                return [s["sessionId"] for s in answer["sessions"]]

            assert await listed({"_meta": {"additionalDirectories": [str(extra)]}}) == [wide]
            assert await listed({"_meta": {"additionalDirectories": []}}) == [plain]
            assert await listed({"additionalDirectories": [str(extra)]}) == [wide]
            assert set(await listed({"cwd": cwd})) == {plain, wide}
            for bad, path in [
                ("nope", "$._meta.additionalDirectories"),
                (["relative"], "$._meta.additionalDirectories[0]"),
            ]:
                refused = await client.request(
                    "session/list", {"_meta": {"additionalDirectories": bad}}
                )
                assert refused["error"]["code"] == -32602, refused
                assert refused["error"]["data"]["path"] == path
                assert "_meta.additionalDirectories" in refused["error"]["message"]
                cause = refused["error"]["data"]["_meta"]["agybridge"]["cause"]
                assert cause == "list_filter_invalid"
        await harness.assert_no_leftovers()
    assert validator.problems == []
