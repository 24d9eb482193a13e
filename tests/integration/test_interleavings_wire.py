"""Client messages that arrive together: every prompt still gets its one right answer.

Through the real bridge process and the fake agy, over raw NDJSON (`acp_wire.RawClient`,
every message schema-checked), ending with the marker scan for leftovers. Each test
writes several messages in one write, so the bridge reads them in one chunk and their
request tasks start in no fixed order: the hardest case for the session's ordering.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, RawClient, stop_reason

pytestmark = pytest.mark.integration

TIMEOUT_S = 40
SLOW = "[fake-agy:slow] tick until cancelled"


def request(client: RawClient, method: str, params: Any, *, notification: bool = False) -> Any:
    """One message, checked by the validator, for `write_together`."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not notification:
        message["id"] = client.new_id()
    client.validator.feed("c2a", message)
    return message


def prompt(client: RawClient, session_id: str, text: str) -> Any:
    return request(
        client,
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
    )


def open_request(client: RawClient, method: str, session_id: str) -> Any:
    """A ``session/load`` or ``session/resume`` of ``session_id`` from the client's cwd."""
    params: dict[str, Any] = {"sessionId": session_id, "cwd": str(client.tmp_path)}
    if method == "session/load":
        params["mcpServers"] = []
    return request(client, method, params)


async def stored_session(harness: Harness) -> str:
    """A session made by a bridge that has exited: in the store, not live."""
    async with harness.open_bridge() as first:
        await first.initialize()
        return await first.new_session()


async def write_together(client: RawClient, *messages: Any) -> None:
    await client.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))


def answers_to(client: RawClient, request_id: int) -> list[dict[str, Any]]:
    return [
        m
        for m in client.received
        if "method" not in m and m.get("id") == request_id and ("result" in m or "error" in m)
    ]


def assert_clean(client: RawClient) -> None:
    """Zero schema problems and no request left unanswered, in both directions."""
    problems = client.validator.problems + [
        f"never answered: {u}" for u in client.validator.unanswered()
    ]
    assert not problems, client.validator.report() + "\n" + client.diagnostics()


async def test_cancel_and_the_next_prompt_in_one_write(harness: Harness) -> None:
    """The user stops a turn and sends the next message at once (session/cancel and
    session/prompt in one write): the first prompt is answered ``cancelled``, the
    second runs on the fresh agy that replaces the cancelled one and ends normally
    (it was answered -32603 "internal error" when it was ready before the cancelled
    agy had exited)."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await client.new_session()
            mark = client.mark()
            first = await client.start_prompt(session_id, SLOW)
            await client.wait_update(session_id, "agent_message_chunk", since=mark)
            cancel = request(client, "session/cancel", {"sessionId": session_id}, notification=True)
            second = prompt(client, session_id, "and now this")
            mark = client.mark()
            await write_together(client, cancel, second)
            assert stop_reason(await client.response(first)) == "cancelled"
            response = await client.response(second["id"])
            assert stop_reason(response) == "end_turn", f"{response}\n{client.diagnostics()}"
            assert "and now this" in client.message_text(session_id, since=mark)
            for request_id in (first, second["id"]):
                assert len(answers_to(client, request_id)) == 1
        assert_clean(client)
    await harness.assert_no_leftovers()


@pytest.mark.parametrize("startup_delay", ["0", "0.3"])
async def test_cancel_request_in_the_prompts_own_write_answers_cancelled(
    harness: Harness, startup_delay: str
) -> None:
    """``$/cancel_request`` for a prompt, written together with that prompt (before its
    task has started): the prompt is answered with the ``cancelled`` result, as when
    its turn is running, not with -32800 (ACP: a cancelled session/prompt answers
    ``stopReason: cancelled``); the session goes on."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(FAKE_AGY_STARTUP_DELAY=startup_delay) as client:
            await client.initialize()
            session_id = await client.new_session()
            doomed = prompt(client, session_id, SLOW)
            cancel = request(
                client, "$/cancel_request", {"requestId": doomed["id"]}, notification=True
            )
            await write_together(client, doomed, cancel)
            response = await client.response(doomed["id"])
            assert stop_reason(response) == "cancelled", f"{response}\n{client.diagnostics()}"
            again = await client.response(await client.start_prompt(session_id, "still here?"))
            assert stop_reason(again) == "end_turn", again
        assert_clean(client)
    await harness.assert_no_leftovers()


@pytest.mark.parametrize("then", ["runs", "cancel_request", "close"])
@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_a_prompt_sent_behind_its_sessions_load(
    harness: Harness, method: str, then: str
) -> None:
    """A client that does not wait for ``session/load`` (or resume) to be answered
    before prompting, while agy is still starting: the prompt is served once the
    session is live, after the load's answer (it was answered -32002 "no live
    session"); a ``$/cancel_request`` or a ``session/close`` sent behind it answers it
    ``cancelled``."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as first:
            await first.initialize()
            session_id = await first.new_session()
            answer = await first.response(await first.start_prompt(session_id, "hello"))
            assert stop_reason(answer) == "end_turn"
        async with harness.open_bridge(FAKE_AGY_STARTUP_DELAY="0.3") as client:
            await client.initialize()
            load = open_request(client, method, session_id)
            follow = prompt(client, session_id, SLOW if then != "runs" else "hello again")
            extra = []
            if then == "cancel_request":
                cancel = {"requestId": follow["id"]}
                extra.append(request(client, "$/cancel_request", cancel, notification=True))
            elif then == "close":
                extra.append(request(client, "session/close", {"sessionId": session_id}))
            await write_together(client, load, follow, *extra)
            response = await client.response(follow["id"])
            expected = "end_turn" if then == "runs" else "cancelled"
            assert stop_reason(response) == expected, f"{response}\n{client.diagnostics()}"
            loaded = await client.response(load["id"])
            assert "result" in loaded, loaded
            order = [m.get("id") for m in client.received if "method" not in m]
            assert order.index(load["id"]) < order.index(follow["id"])
            if then == "runs":
                assert "hello again" in client.message_text(session_id)
            for message in (load, follow, *extra):
                if "id" in message:
                    await client.response(message["id"])
                    assert len(answers_to(client, message["id"])) == 1
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_a_mode_change_sent_behind_its_sessions_load(harness: Harness) -> None:
    """Any request for the session, not only a prompt, waits for a load sent before it
    instead of failing -32002 while agy starts."""
    with trio.fail_after(TIMEOUT_S):
        session_id = await stored_session(harness)
        async with harness.open_bridge(FAKE_AGY_STARTUP_DELAY="0.3") as client:
            await client.initialize()
            load = open_request(client, "session/load", session_id)
            mode = request(client, "session/set_mode", {"sessionId": session_id, "modeId": "ask"})
            await write_together(client, load, mode)
            assert "result" in await client.response(load["id"])
            changed = await client.response(mode["id"])
            assert changed.get("result") == {}, f"{changed}\n{client.diagnostics()}"
        assert_clean(client)
    await harness.assert_no_leftovers()


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_a_cancel_sent_behind_its_sessions_load(harness: Harness, method: str) -> None:
    """``session/cancel`` written together with a load (or resume) of a stored session
    and a prompt sent behind it: the prompt is answered ``cancelled`` and never runs,
    as it would be on a live session (the cancel was dropped as "unknown session"
    while agy was starting, and the prompt ran to ``end_turn``)."""
    with trio.fail_after(TIMEOUT_S):
        session_id = await stored_session(harness)
        async with harness.open_bridge(FAKE_AGY_STARTUP_DELAY="0.3") as client:
            await client.initialize()
            load = open_request(client, method, session_id)
            follow = prompt(client, session_id, "this must not run")
            cancel = request(client, "session/cancel", {"sessionId": session_id}, notification=True)
            await write_together(client, load, follow, cancel)
            response = await client.response(follow["id"])
            assert stop_reason(response) == "cancelled", f"{response}\n{client.diagnostics()}"
            assert "result" in await client.response(load["id"])
            assert "this must not run" not in client.message_text(session_id)
            again = await client.response(await client.start_prompt(session_id, "now run"))
            assert stop_reason(again) == "end_turn", again
        assert_clean(client)
    await harness.assert_no_leftovers()


@pytest.mark.parametrize(
    "order", ["gone,prompt", "gone,prompt,load", "load,gone,prompt", "gone,load,prompt"]
)
@pytest.mark.parametrize("method", ["session/close", "session/delete"])
async def test_a_prompt_sent_behind_its_sessions_close(
    harness: Harness, method: str, order: str
) -> None:
    """A prompt written right behind a ``session/close`` (or delete) of its live
    session is for a closed session: answered -32002 and never run, also when a
    ``session/load`` follows in the same write (it must not run on the reloaded
    session) or precedes the close. It was answered ``cancelled`` by the closing
    session it reached first (and the fuzzer saw one run to ``end_turn`` while the
    close waited for an earlier load). Behind a close and then a load, it is
    served by the reloaded session (it was answered ``cancelled`` too); a load
    of a deleted session fails, so the prompt is -32002 again."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await client.new_session()
            made = {
                "gone": lambda: request(client, method, {"sessionId": session_id}),
                "prompt": lambda: prompt(client, session_id, "this must not run"),
                "load": lambda: open_request(client, "session/load", session_id),
            }
            messages = {name: made[name]() for name in order.split(",")}
            await write_together(client, *messages.values())
            response = await client.response(messages["prompt"]["id"])
            closed = await client.response(messages["gone"]["id"])
            assert closed.get("result") == {}, closed
            for message in messages.values():
                await client.response(message["id"])
            if order == "gone,load,prompt" and method == "session/close":
                assert stop_reason(response) == "end_turn", f"{response}\n{client.diagnostics()}"
            else:
                code = response.get("error", {}).get("code")
                assert code == -32002, f"{response}\n{client.diagnostics()}"
                assert "this must not run" not in client.message_text(session_id)
        assert_clean(client)
    await harness.assert_no_leftovers()
