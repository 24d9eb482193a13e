"""Configuration through the wire: options on session/new, changes mid-session.

Switching model and mode changes the next turn's agy argv (the fake records
every launch); changes made during a turn apply when it ends and are
announced with config_option_update / current_mode_update; everything
validates against the ACP schema.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, RawClient, WireValidator, agy_state_dir

pytestmark = pytest.mark.integration

TIMEOUT_S = 60


async def new_session(client: RawClient, **params: Any) -> dict[str, Any]:
    await client.initialize()
    response = await client.request(
        "session/new", {"cwd": str(client.tmp_path), "mcpServers": [], **params}
    )
    assert "result" in response, response
    result: dict[str, Any] = response["result"]
    return result


async def prompt(client: RawClient, session_id: str, text: str) -> dict[str, Any]:
    return await client.response(await client.start_prompt(session_id, text))


async def wait_for_model(
    client: RawClient, session_id: str, created: dict[str, Any], slug: str
) -> None:
    """Discovery runs in the background: the model is offered on session/new
    if it finished first, else in a config_option_update when it does."""

    def offered(options: list[dict[str, Any]]) -> bool:
        model = next(o for o in options if o["id"] == "model")
        return any(choice["value"] == slug for choice in model["options"])

    if offered(created["configOptions"]):
        return
    await client.wait_for(
        lambda: (
            any(
                offered(u["configOptions"])
                for u in client.updates(session_id, "config_option_update")
            )
            or None
        ),
        f"{slug} offered",
    )


def current(options: list[dict[str, Any]], option_id: str) -> str:
    value: str = next(o["currentValue"] for o in options if o["id"] == option_id)
    return value


async def test_switching_model_and_mode_changes_the_next_argv(harness: Harness) -> None:
    """set_config_option(model) and set_mode(autonomous) between turns: the next
    turn runs on an agy launched with them, resuming the same conversation."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            created = await new_session(client)
            session_id = created["sessionId"]
            assert created["modes"]["currentModeId"] == "ask"
            assert current(created["configOptions"], "model") == "default"
            assert (await prompt(client, session_id, "one"))["result"]["stopReason"] == "end_turn"

            await wait_for_model(client, session_id, created, "gemini-3.1-pro-low")
            changed = await client.request(
                "session/set_config_option",
                {"sessionId": session_id, "configId": "model", "value": "gemini-3.1-pro-low"},
            )
            assert current(changed["result"]["configOptions"], "model") == "gemini-3.1-pro-low"
            mode = await client.request(
                "session/set_mode", {"sessionId": session_id, "modeId": "autonomous"}
            )
            assert mode["result"] == {}
            assert (await prompt(client, session_id, "two"))["result"]["stopReason"] == "end_turn"
        argvs = harness.session_argvs()
        first, last = argvs[0], argvs[-1]
        assert "--model=gemini-3.1-pro-low" not in first
        assert "--model=gemini-3.1-pro-low" in last
        assert "--dangerously-skip-permissions" in last and "--sandbox" in last
        conversation = last[last.index("--conversation") + 1]
        assert (agy_state_dir(harness.tmp_path) / f"{conversation}.json").exists()
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_change_during_a_turn_applies_when_it_ends(harness: Harness) -> None:
    """A mode change during a turn does not disturb it; when the turn ends the
    client gets config_option_update and current_mode_update, and the next
    turn runs in the new mode."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator, FAKE_AGY_SLOW_SECONDS="0.6", FAKE_AGY_SPAWN_CHILDREN="0"
        ) as client:
            session_id = (await new_session(client))["sessionId"]
            mark = client.mark()
            running = await client.start_prompt(session_id, "[fake-agy:slow] go")
            await client.wait_update(session_id, "agent_message_chunk", since=mark)
            changed = await client.request(
                "session/set_mode", {"sessionId": session_id, "modeId": "accept-edits"}
            )
            assert changed["result"] == {}
            done = await client.response(running)
            assert done["result"]["stopReason"] == "end_turn"
            end = client.position(done)
            modes = [u for u in client.updates(session_id, "current_mode_update", since=mark)]
            assert [m["currentModeId"] for m in modes] == ["accept-edits"]
            options = client.updates(session_id, "config_option_update", since=mark)
            assert options and current(options[-1]["configOptions"], "mode") == "accept-edits"
            assert all(
                client.position(m) < end
                for m in client.received[mark:]
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "current_mode_update"
            )
            assert (await prompt(client, session_id, "next"))["result"]["stopReason"] == "end_turn"
        argvs = harness.session_argvs()
        assert "--mode=accept-edits" not in argvs[0]
        assert "--mode=accept-edits" in argvs[-1]
        await harness.assert_no_leftovers()
    assert validator.problems == []


#: Unknown options and values, with the words of the answer that name what is allowed.
BAD_VALUES: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("session/set_mode", {"modeId": "yolo"}, "'yolo' is not a value of 'mode'"),
    (
        "session/set_config_option",
        {"configId": "effort", "value": "extreme"},
        "choose one of default, low, medium, high",
    ),
    (
        "session/set_config_option",
        {"configId": "colour", "value": "red"},
        "unknown configId 'colour'",
    ),
)


async def test_bad_values_are_invalid_params(harness: Harness) -> None:
    """Unknown options and values answer -32602 naming what is allowed (one
    session takes them all in turn: a refused value changes nothing)."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            session_id = (await new_session(client))["sessionId"]
            for method, params, fragment in BAD_VALUES:
                response = await client.request(method, {"sessionId": session_id, **params})
                assert response["error"]["code"] == -32602, (params, response)
                assert fragment in response["error"]["message"], (params, response)
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_new_session_meta_sets_launch_settings(harness: Harness) -> None:
    """session/new _meta may choose the model and mode of the first launch."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            created = await new_session(
                client, _meta={"model": "gemini-3.7-flash-low", "mode": "plan"}
            )
            assert created["modes"]["currentModeId"] == "plan"
            # A turn, so the launch is on record before the bridge stops.
            reply = await prompt(client, created["sessionId"], "hi")
            assert reply["result"]["stopReason"] == "end_turn"
            bad = await client.request(
                "session/new",
                {"cwd": str(client.tmp_path), "mcpServers": [], "_meta": {"effort": "huge"}},
            )
            assert bad["error"]["code"] == -32602 and "_meta.effort" in bad["error"]["message"]
        first = harness.session_argvs()[0]
        assert "--model=gemini-3.7-flash-low" in first and "--mode=plan" in first
        await harness.assert_no_leftovers()


@pytest.mark.parametrize("busy", [False, True])
async def test_a_slash_command_change_is_announced_once(harness: Harness, busy: bool) -> None:
    """``/mode plan`` changes the mode: the client hears it once (one
    current_mode_update, one config_option_update naming it) whether the
    session was idle (applied at once) or a turn was running (applied when
    it ends). Before, an idle change was only told in the chat: the editor's
    mode and option menus kept showing the old mode."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator, FAKE_AGY_SLOW_SECONDS="0.6", FAKE_AGY_SPAWN_CHILDREN="0"
        ) as client:
            created = await new_session(client)
            session_id = created["sessionId"]
            # The catalog's own config_option_update (models discovered) first.
            await wait_for_model(client, session_id, created, "gemini-3.1-pro-low")
            mark = client.mark()
            running = None
            if busy:
                running = await client.start_prompt(session_id, "[fake-agy:slow] go")
                await client.wait_update(session_id, "agent_message_chunk", since=mark)
            answered = await prompt(client, session_id, "/mode plan")
            assert answered["result"]["stopReason"] == "end_turn"
            if running is not None:
                assert (await client.response(running))["result"]["stopReason"] == "end_turn"
            # A request after both: everything they sent is in.
            assert "result" in await client.request(
                "_agybridge/session/runtime", {"sessionId": session_id}
            )
            modes = client.updates(session_id, "current_mode_update", since=mark)
            assert [m["currentModeId"] for m in modes] == ["plan"]
            options = client.updates(session_id, "config_option_update", since=mark)
            assert [current(o["configOptions"], "mode") for o in options] == ["plan"]
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_changes_sent_together_are_all_kept(harness: Harness) -> None:
    """Three changes in one write, the client not waiting for the answers:
    every one is kept (before, each was computed from the settings as they
    were before any of them was applied, and the last one undid the others)."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:  # raw lines: no validator
            session_id = (await new_session(client))["sessionId"]
            changes = [("mode", "plan"), ("effort", "high"), ("sandbox", "true")]
            ids = [client.new_id() for _ in changes]
            await client.send_raw(
                b"".join(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": request_id,
                            "method": "session/set_config_option",
                            "params": {"sessionId": session_id, "configId": key, "value": value},
                        }
                    ).encode()
                    + b"\n"
                    for request_id, (key, value) in zip(ids, changes, strict=True)
                )
            )
            for request_id in ids:
                assert "result" in await client.response(request_id)
            status = await client.request("_agybridge/session/runtime", {"sessionId": session_id})
            assert (status["result"]["mode"], status["result"]["effort"]) == ("plan", "high")
            assert "result" in await prompt(client, session_id, "hi")
        argv = harness.session_argvs()[-1]
        assert "--mode=plan" in argv and "--effort=high" in argv and "--sandbox" in argv, argv
        await harness.assert_no_leftovers()
