"""A live session opened again with another ``additionalDirectories`` (the
daemon's usual re-attach): the list sent is the session's complete list
(ACP), so agy is respawned warm with the new ``--add-dir``s, at once when
idle, after the running turn otherwise, and the answer's
``_meta.agybridge.additionalDirectories`` says which. Schema-validated."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, RawClient, WireValidator
from ..extension_schema import call
from .test_sessions_integration import TIMEOUT_S, ok

pytestmark = pytest.mark.integration

RELOAD = "_agybridge/settings/reload"


async def prompt(client: RawClient, session_id: str, text: str = "hi") -> None:
    answer = await client.response(await client.start_prompt(session_id, text))
    assert answer["result"]["stopReason"] == "end_turn", answer


def folders(harness: Harness) -> tuple[Path, Path, Path]:
    cwd, first, second = (harness.tmp_path / name for name in ("ws", "first", "second"))
    for folder in (cwd, first, second):
        folder.mkdir()
    return cwd, first, second


def last_dirs(harness: Harness) -> list[str]:
    return last_dirs_of(harness.session_argvs()[-1])


async def open_session(client: RawClient, cwd: Path, first: Path) -> tuple[dict[str, Any], str]:
    """``initialize``, then ``session/new`` in ``cwd`` with ``first`` as its one
    additional directory: its params and the session's id."""
    await client.initialize()
    new = {"cwd": str(cwd), "mcpServers": [], "additionalDirectories": [str(first)]}
    return new, (await ok(client, "session/new", new))["sessionId"]


def slow_turn_bridge(
    harness: Harness, validator: WireValidator, release: Path
) -> AbstractAsyncContextManager[RawClient]:
    """A bridge whose ``[fake-agy:slow]`` turns run until ``release`` exists (its
    agy grows no children: the launches counted are the session's own)."""
    return harness.open_bridge(
        validator=validator, FAKE_AGY_RELEASE_FILE=str(release), FAKE_AGY_SPAWN_CHILDREN="0"
    )


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_idle_the_new_list_applies_at_once(harness: Harness, method: str) -> None:
    cwd, first, second = folders(harness)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            new, session_id = await open_session(client, cwd, first)
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
        async with slow_turn_bridge(harness, validator, release) as client:
            new, session_id = await open_session(client, cwd, first)
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


async def test_set_workspace_moves_the_session_now_or_after_the_turn(harness: Harness) -> None:
    """``_agybridge/session/set_workspace``: the same path as the directories
    (agy respawned warm in the new cwd, at once when idle, after the running
    turn otherwise); the stored session and session/list follow; a path
    session/new would refuse is refused the same way. ``settings/reload``
    respawns agy the same way with nothing changed."""
    cwd, first, second = folders(harness)
    release = harness.tmp_path / "release"
    validator = WireValidator()
    method = "_agybridge/session/set_workspace"
    with trio.fail_after(TIMEOUT_S):
        async with slow_turn_bridge(harness, validator, release) as client:
            _, session_id = await open_session(client, cwd, first)
            await prompt(client, session_id)
            moved = await call(client, method, {"sessionId": session_id, "cwd": str(second)})
            assert moved["result"] == {
                "sessionId": session_id,
                "cwd": str(second),
                "previousCwd": str(cwd),
                "additionalDirectories": [str(first)],
                "applied": "now",
            }
            await prompt(client, session_id)
            in_second = session_launches(harness)[-1]
            listed = await ok(client, "session/list", {"cwd": str(second)})
            relative = await call(client, method, {"sessionId": session_id, "cwd": "rel/dir"})
            missing = str(harness.tmp_path / "gone")
            absent = await call(client, method, {"sessionId": session_id, "cwd": missing})
            unknown = await call(client, method, {"sessionId": "nope", "cwd": str(cwd)})
            # During a turn: applied when it ends, the turn undisturbed.
            mark = client.mark()
            running = await client.start_prompt(session_id, "[fake-agy:slow] go")
            await client.wait_update(session_id, "agent_message_chunk", since=mark)
            launches = len(harness.session_argvs())
            back = await call(client, method, {"sessionId": session_id, "cwd": str(cwd)})
            assert back["result"]["applied"] == "afterTurn"
            # A reload asked meanwhile rides the same respawn.
            reload = await call(client, RELOAD, {"sessionId": session_id})
            assert reload["result"] == {"sessionId": session_id, "applied": "afterTurn"}
            assert len(harness.session_argvs()) == launches
            release.touch()
            assert (await client.response(running))["result"]["stopReason"] == "end_turn"
            await prompt(client, session_id)
            assert len(harness.session_argvs()) == launches + 1
            state = await call(client, "_agybridge/session/runtime", {"sessionId": session_id})
            # Idle, a reload respawns agy at once (warm): it reads its own files anew.
            reload = await call(client, RELOAD, {"sessionId": session_id})
            assert reload["result"]["applied"] == "now"
            await prompt(client, session_id)
            assert len(harness.session_argvs()) == launches + 2
            assert "--conversation" in harness.session_argvs()[-1]
        await harness.assert_no_leftovers()
    assert in_second["cwd"] == str(second)
    assert last_dirs_of(in_second["argv"])[:2] == [str(second), str(first)]
    assert "--conversation" in in_second["argv"]  # the same conversation, resumed
    assert [s["sessionId"] for s in listed["sessions"]] == [session_id]
    assert listed["sessions"][0]["cwd"] == str(second)
    assert relative["error"]["code"] == -32602 and "absolute" in relative["error"]["message"]
    assert absent["error"]["code"] == -32602
    assert "does not exist" in absent["error"]["message"]
    assert unknown["error"]["code"] == -32002
    assert session_launches(harness)[-1]["cwd"] == str(cwd)
    assert state["result"]["cwd"] == str(cwd)
    assert validator.problems == []


def session_launches(harness: Harness) -> list[dict[str, Any]]:
    return [e for e in harness.launches() if "--input-format" in e.get("argv", ())]


def last_dirs_of(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--add-dir"]
