"""A live session opened again with another ``additionalDirectories`` (the
daemon's usual re-attach): the list sent is the session's complete list
(ACP), so agy is respawned warm with the new ``--add-dir``s, at once when
idle, after the running turn otherwise, and the answer's
``_meta.agybridge.additionalDirectories`` says which. Schema-validated."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from ..acp_wire import Harness, RawClient, WireValidator
from ..extension_schema import call
from .test_sessions_integration import TIMEOUT_S, ok

pytestmark = pytest.mark.integration


async def prompt(client: RawClient, session_id: str, text: str = "hi") -> None:
    answer = await client.response(await client.start_prompt(session_id, text))
    assert answer["result"]["stopReason"] == "end_turn", answer


def folders(harness: Harness) -> tuple[Path, Path, Path]:
    cwd, first, second = (harness.tmp_path / name for name in ("ws", "first", "second"))
    for folder in (cwd, first, second):
        folder.mkdir()
    return cwd, first, second


def last_dirs(harness: Harness) -> list[str]:
    argv = harness.session_argvs()[-1]
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--add-dir"]


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_idle_the_new_list_applies_at_once(harness: Harness, method: str) -> None:
    cwd, first, second = folders(harness)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            new = {"cwd": str(cwd), "mcpServers": [], "additionalDirectories": [str(first)]}
            session_id = (await ok(client, "session/new", new))["sessionId"]
            await prompt(client, session_id)
            assert str(first) in last_dirs(harness)
            same = await ok(client, method, {**new, "sessionId": session_id})
            assert "agybridge" not in (same.get("_meta") or {})  # the same list: nothing
            moved = await ok(
                client,
                method,
                {**new, "sessionId": session_id, "additionalDirectories": [str(second)]},
            )
            assert moved["_meta"]["agybridge"]["additionalDirectories"] == {
                "previous": [str(first)],
                "current": [str(second)],
                "applied": "now",
            }
            await prompt(client, session_id)
            state = await call(client, "_agybridge/session/runtime", {"sessionId": session_id})
            listed = await ok(client, "session/list", {})
        await harness.assert_no_leftovers()
    dirs = last_dirs(harness)
    assert str(second) in dirs and str(first) not in dirs
    assert "--conversation" in harness.session_argvs()[-1]  # the same conversation, resumed
    assert state["result"]["additionalDirectories"] == [str(second)]
    assert listed["sessions"][0]["additionalDirectories"] == [str(second)]
    assert validator.problems == []


async def test_during_a_turn_the_new_list_applies_when_it_ends(harness: Harness) -> None:
    cwd, first, second = folders(harness)
    release = harness.tmp_path / "release"
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator, FAKE_AGY_RELEASE_FILE=str(release), FAKE_AGY_SPAWN_CHILDREN="0"
        ) as client:
            await client.initialize()
            new = {"cwd": str(cwd), "mcpServers": [], "additionalDirectories": [str(first)]}
            session_id = (await ok(client, "session/new", new))["sessionId"]
            mark = client.mark()
            running = await client.start_prompt(session_id, "[fake-agy:slow] go")
            await client.wait_update(session_id, "agent_message_chunk", since=mark)
            launches = len(harness.session_argvs())
            moved = await ok(
                client,
                "session/resume",
                {**new, "sessionId": session_id, "additionalDirectories": [str(second)]},
            )
            assert moved["_meta"]["agybridge"]["additionalDirectories"]["applied"] == "afterTurn"
            assert len(harness.session_argvs()) == launches  # the turn goes on undisturbed
            release.touch()
            done = await client.response(running)
            assert done["result"]["stopReason"] == "end_turn"
            await prompt(client, session_id)
        await harness.assert_no_leftovers()
    dirs = last_dirs(harness)
    assert str(second) in dirs and str(first) not in dirs
    assert validator.problems == []
