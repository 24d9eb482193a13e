"""``_agybridge/session/steer`` over the wire: a steer sent while a turn runs
is the very next turn (ahead of prompts already waiting), agy reads it right
after the running turn's result, and it is answered like a prompt; idle, it
is a prompt."""

from __future__ import annotations

import pytest
import trio

from ..acp_wire import Harness, WireValidator
from ..extension_schema import call

pytestmark = pytest.mark.integration

TIMEOUT_S = 60


async def test_a_steer_runs_next_and_idle_it_is_a_prompt(harness: Harness) -> None:
    """Turn A waits on a permission question (so it is surely running); B is
    queued, then steer S: the answers come A, S, B, and S's text reached agy."""
    workspace = harness.tmp_path / "ws"
    workspace.mkdir()
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            client.permission_choice = "hold"  # A keeps running until we answer
            await client.initialize()
            session_id = await client.new_session(workspace)
            first = await client.start_prompt(session_id, "[fake-agy:edit] a.txt")
            await client.wait_for(lambda: client.permission_requests or None, "a permission ask")
            queued = await client.start_prompt(session_id, "[fake-agy:echo] queued prompt")
            steer = await client.start_request(
                "_agybridge/session/steer",
                {"sessionId": session_id, "text": "[fake-agy:echo] steer me"},
            )
            assert client.response_nowait(steer) is None  # A is still asking
            answered = 0
            while client.response_nowait(first) is None:  # the create and the edit ask
                await client.wait_for(
                    lambda seen=answered: (
                        client.response_nowait(first)
                        or (len(client.permission_requests) > seen or None)
                    ),
                    "turn A to go on",
                )
                while answered < len(client.permission_requests):
                    request = client.permission_requests[answered]
                    await client.answer_permission(request, "allow_once")
                    answered += 1
            answers = [await client.response(r) for r in (first, steer, queued)]
            for answer in answers:
                assert answer["result"]["stopReason"] == "end_turn", answer
            positions = [client.position(a) for a in answers]
            assert positions == sorted(positions), "not answered A, S, B"
            assert "steer me" in client.message_text(session_id)

            idle = await call(
                client,
                "_agybridge/session/steer",
                {"sessionId": session_id, "text": "[fake-agy:echo] when idle"},
            )
            assert idle["result"]["stopReason"] == "end_turn"
            bad = await client.request("_agybridge/session/steer", {"sessionId": session_id})
            assert bad["error"]["code"] == -32602
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_runtime_counts_the_prompts_waiting_not_the_running_turn(harness: Harness) -> None:
    """While turn 0 runs (held on a permission question) with one prompt
    behind it: ``runningTurn`` is turn 0 and ``queuedPrompts`` is 1, and
    ``/status`` sent then does not count itself (before: the running turn
    and the ``/status`` prompt were counted as queued)."""
    workspace = harness.tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=WireValidator()) as client:
            client.permission_choice = "hold"  # the turn runs until we answer
            await client.initialize()
            session_id = await client.new_session(workspace)
            running = await client.start_prompt(session_id, "[fake-agy:edit] a.txt")
            await client.wait_for(lambda: client.permission_requests or None, "a permission ask")
            status = (await call(client, "_agybridge/session/runtime", {"sessionId": session_id}))[
                "result"
            ]
            assert status["runningTurn"]["turn"] == 0 and status["queuedPrompts"] == 0, status
            queued = await client.start_prompt(session_id, "[fake-agy:echo] queued")
            status = (await call(client, "_agybridge/session/runtime", {"sessionId": session_id}))[
                "result"
            ]
            assert status["queuedPrompts"] == 1, status
            mark = client.mark()
            assert "result" in await client.response(
                await client.start_prompt(session_id, "/status")
            )
            shown = client.message_text(session_id, since=mark)
            assert "- queued prompts: 1" in shown, shown
            await client.notify("session/cancel", {"sessionId": session_id})
            for request in (running, queued):
                assert "result" in await client.response(request)
        await harness.assert_no_leftovers()


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"text": "hi"}, "$.sessionId"),
        ({"sessionId": 5, "text": "hi"}, "$.sessionId"),
        ({"sessionId": "", "text": "hi"}, "$.sessionId"),
        ({"sessionId": "x", "text": 5}, "$.text"),
        ({"sessionId": "LIVE", "text": ""}, "$.text"),
        ({"sessionId": "LIVE", "text": " \n "}, "$.text"),
    ],
)
async def test_bad_steer_params_name_the_field(
    harness: Harness, params: dict[str, object], path: str
) -> None:
    """Like every extension (docs/extensions.md "Errors"): -32602 with
    ``data.path`` naming the field (a bad sessionId answered cattrs'
    ``problems`` list for session/prompt instead)."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            if params.get("sessionId") == "LIVE":
                params = {**params, "sessionId": await client.new_session(harness.tmp_path)}
            response = await client.request("_agybridge/session/steer", params)
            assert response["error"]["code"] == -32602, response
            assert response["error"]["data"]["path"] == path, response
        await harness.assert_no_leftovers()
