"""Wire-level regression tests for issue 9's eight problems, through the real bridge.

Each test drives ``python -m agybridge`` with the fake agy over raw NDJSON
(`acp_wire.RawClient`: every message schema-checked) and ends with the marker scan
for leftovers. They are written against the wire protocol only, so they survive the
session core's rewrite; each failed on the code before it (commit be6c9a9).

Two kinds of waits appear besides wire events: a *delay* before a close (the race
under test is "close at any moment", so several moments are tried) and an
*observation window* in which nothing may arrive (absence has no event to wait on;
2 s is the ACP conformance kit's window after a ``cancelled`` answer).
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import trio

from agybridge.store import Store
from fake_agy._fake_edge import GARBAGE_LINE

from ..acp_wire import (
    BridgeGone,
    Harness,
    RawClient,
    WireValidator,
    leftover_processes,
    stop_reason,
)

pytestmark = pytest.mark.integration

TIMEOUT_S = 40
#: The ACP kit's window after a cancelled answer in which no update may come.
QUIET_WINDOW_S = 2.0
SLOW = "[fake-agy:slow] tick until cancelled"
#: The turn-content kinds a stall notice may use (visible text or a tool-card status).
NOTICE_KINDS = frozenset(
    {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update"}
)


def assert_clean(client: RawClient) -> None:
    """Zero schema problems and no request left unanswered, in both directions."""
    problems = client.validator.problems + [
        f"never answered: {u}" for u in client.validator.unanswered()
    ]
    assert not problems, client.validator.report() + "\n" + client.diagnostics()


def error_of(response: dict[str, Any], code: int) -> dict[str, Any]:
    """The response's error, which must carry ``code``."""
    assert "error" in response, response
    error: dict[str, Any] = response["error"]
    assert error["code"] == code, response
    return error


def answers_to(client: RawClient, request_id: int) -> list[dict[str, Any]]:
    """Every response carrying ``request_id`` (a prompt must get exactly one)."""
    return [
        m
        for m in client.received
        if "method" not in m and m.get("id") == request_id and ("result" in m or "error" in m)
    ]


def agy_sessions(harness: Harness) -> list[str]:
    """Live stream-json agy processes of this test (not discovery or the gate check).
    A launcher's own subshells (bin/fake-agy's ``$(...)``: a forked bash with the
    same command line, for a moment) are not agy processes of their own."""
    found = [p for p in leftover_processes(harness.marker) if "--input-format" in p]
    pids = {line.split()[0] for line in found}
    parents = {line: _parent_pid(line.split()[0]) for line in found}
    # A process gone meanwhile (no parent to read) is not live either.
    return [line for line, parent in parents.items() if parent is not None and parent not in pids]


def _parent_pid(pid: str) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[1]


async def wait_no_agy_session(harness: Harness, timeout_s: float = 5.0) -> list[str]:
    """Poll /proc until no agy session process runs (a death is not an awaitable event)."""
    with trio.move_on_after(timeout_s):
        while agy_sessions(harness):  # noqa: ASYNC110
            await trio.sleep(0.05)
    return agy_sessions(harness)


async def ok(client: RawClient, method: str, params: dict[str, Any]) -> Any:
    response = await client.request(method, params)
    assert "result" in response, f"{method}: {response}\n{client.diagnostics()}"
    return response["result"]


async def prompt(client: RawClient, session_id: str, text: str) -> dict[str, Any]:
    return await client.response(await client.start_prompt(session_id, text))


def session_traffic_after(client: RawClient, session_id: str, position: int) -> list[Any]:
    """session/update notifications for ``session_id`` received after ``position``."""
    return [
        m["params"]["update"]
        for m in client.received[position + 1 :]
        if m.get("method") == "session/update" and m["params"].get("sessionId") == session_id
    ]


async def streaming_prompt(client: RawClient) -> tuple[str, int]:
    """A new session running a ``slow`` prompt whose first text has arrived."""
    await client.initialize()
    session_id = await client.new_session()
    mark = client.mark()
    prompt_id = await client.start_prompt(session_id, SLOW)
    await client.wait_update(session_id, "agent_message_chunk", since=mark)
    return session_id, prompt_id


async def stored_session(harness: Harness, client: RawClient) -> str:
    """A session with two turns (text and a tool card), closed: ready to load."""
    session_id = await client.new_session()
    assert stop_reason(await prompt(client, session_id, "remember this")) == "end_turn"
    assert stop_reason(await prompt(client, session_id, "[fake-agy:tool] run")) == "end_turn"
    assert await ok(client, "session/close", {"sessionId": session_id}) == {}
    assert await wait_no_agy_session(harness) == []  # a clean slate to count children
    return session_id


# --------------------------------------------------------------------------- 1


#: Moments (s after the prompt was written) at which the turn is ended.
END_DELAYS_S = (0.0, 0.01, 0.02, 0.035, 0.05, 0.1, 0.25)


@pytest.mark.parametrize("end", ["session/close", "session/cancel", "eof"])
async def test_ending_a_first_ask_turn_at_any_moment_answers_the_prompt_once(
    harness: Harness, end: str
) -> None:
    """ask mode, agy slow to start: session/close, session/cancel or stdin EOF at
    several moments of the first turn (while agy starts and the gate is verified)
    answers the prompt exactly once, ``cancelled``; the bridge exits 0 after EOF and
    nothing is left."""
    for delay in END_DELAYS_S:
        validator = WireValidator()
        with trio.fail_after(TIMEOUT_S):
            async with harness.open_bridge(
                validator=validator, AGYBRIDGE_MODE="ask", FAKE_AGY_STARTUP_DELAY="0.3"
            ) as client:
                await client.initialize()
                session_id = await client.new_session()
                prompt_id = await client.start_prompt(session_id, "hello")
                await trio.sleep(delay)  # the moment under test, not a synchronisation
                if end == "session/close":
                    await client.start_request(end, {"sessionId": session_id})
                elif end == "session/cancel":
                    await client.notify(end, {"sessionId": session_id})
                else:
                    await client.close_stdin()
                with trio.move_on_after(5), suppress(BridgeGone):
                    await client.response(prompt_id)
                response = client.response_nowait(prompt_id)
                assert stop_reason(response) == "cancelled", (
                    f"{end} {delay} s into the turn: prompt answered {response}\n"
                    + client.diagnostics()
                )
                if end != "eof":
                    await client.close_stdin()
                await client.process.wait()
                await client.wait_for(lambda: client.eof, "stdout EOF")
                assert client.process.returncode == 0
                assert len(answers_to(client, prompt_id)) == 1, delay
            assert_clean(client)
        await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- 2


async def test_nothing_is_sent_after_a_cancelled_answer(harness: Harness) -> None:
    """Cold discovery cache, discovery finishing right after a prompt answered
    ``cancelled``: no session/update for that session until the client's next request
    for it (the catalog change is sent before that request's answer)."""
    gate = harness.tmp_path / "discovery-gate"
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(FAKE_AGY_DISCOVERY_GATE=str(gate)) as client:
            session_id, prompt_id = await streaming_prompt(client)
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.response(prompt_id)
            assert stop_reason(response) == "cancelled"
            gate.touch()  # agy's model list arrives now
            await trio.sleep(QUIET_WINDOW_S)  # observation window: nothing may arrive
            late = session_traffic_after(client, session_id, client.position(response))
            assert late == [], late
            # The session still works, and the new catalog came before this answer.
            again = await prompt(client, session_id, "again")
            assert stop_reason(again) == "end_turn"
            assert client.updates(session_id, "config_option_update"), "catalog never sent"
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_a_warm_discovery_cache_is_never_pushed(harness: Harness) -> None:
    """With the discovery cache already in the database, the second bridge sends no
    config_option_update for the catalog at all: session/new carries it."""
    db = harness.tmp_path / "agybridge.db"
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as first:
            await first.initialize()
            await first.new_session()
            # Discovery writes the cache in the background; poll the database for it.
            while not _discovery_cached(db):  # noqa: ASYNC110
                await trio.sleep(0.05)
        async with harness.open_bridge() as client:
            session_id, prompt_id = await streaming_prompt(client)
            await client.notify("session/cancel", {"sessionId": session_id})
            assert stop_reason(await client.response(prompt_id)) == "cancelled"
            await trio.sleep(QUIET_WINDOW_S)  # observation window
            pushes = client.updates(session_id, "config_option_update")
            assert pushes == [], pushes
        assert_clean(client)
    await harness.assert_no_leftovers()


def _discovery_cached(db: Path) -> bool:
    with Store.open(db) as store:
        return store.cache_get("discovery") is not None


# --------------------------------------------------------------------------- 3


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_load_and_resume_send_everything_before_their_response(
    harness: Harness, method: str
) -> None:
    """Every update a load/resume sends (history, commands, config, plan) precedes
    its response; nothing for the session follows it until the next request."""
    cwd = str(harness.tmp_path)
    db = harness.tmp_path / "agybridge.db"
    with trio.fail_after(TIMEOUT_S):
        # The session is stored by an earlier bridge whose model discovery is
        # cached, so nothing changes by itself while the load is answered.
        async with harness.open_bridge() as first:
            await first.initialize()
            session_id = await stored_session(harness, first)
            while not _discovery_cached(db):  # noqa: ASYNC110
                await trio.sleep(0.05)
        async with harness.open_bridge() as client:
            await client.initialize()
            mark = client.mark()
            params: dict[str, Any] = {"sessionId": session_id, "cwd": cwd}
            if method == "session/load":
                params["mcpServers"] = []
            response = await client.request(method, params)
            assert "result" in response, response
            await trio.sleep(QUIET_WINDOW_S)  # observation window
            late = session_traffic_after(client, session_id, client.position(response))
            assert late == [], late
            before = client.updates(session_id, since=mark)
            kinds = {u["sessionUpdate"] for u in before}
            assert "available_commands_update" in kinds, kinds
            if method == "session/load":
                assert "user_message_chunk" in kinds, kinds
            assert stop_reason(await prompt(client, session_id, "still here")) == "end_turn"
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- 4


async def test_two_loads_in_one_write_share_one_child(harness: Harness) -> None:
    """Two session/load of one stored session in one write: both answered (the second
    waits and succeeds, or gets a clear error), never two agy children for it, and
    none after session/close."""
    cwd = str(harness.tmp_path)
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await stored_session(harness, client)
            params = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
            messages = []
            for _ in range(2):
                messages.append(
                    {
                        "jsonrpc": "2.0",
                        "id": client.new_id(),
                        "method": "session/load",
                        "params": params,
                    }
                )
                client.validator.feed("c2a", messages[-1])
            await client.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
            answers = [await client.response(m["id"]) for m in messages]
            assert any("result" in a for a in answers), answers
            for answer in answers:
                if "error" in answer:
                    assert answer["error"]["message"].strip(), answer
            assert len(agy_sessions(harness)) <= 1, agy_sessions(harness)
            assert stop_reason(await prompt(client, session_id, "and now")) == "end_turn"
            assert len(agy_sessions(harness)) == 1, agy_sessions(harness)
            assert await ok(client, "session/close", {"sessionId": session_id}) == {}
            survivors = await wait_no_agy_session(harness)
            assert survivors == [], survivors
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- 5


async def test_output_after_a_turns_result_is_not_a_cancel_and_the_session_survives(
    harness: Harness,
) -> None:
    """agy breaks its contract (a step after an ERROR result, before any AGY_ERROR
    line): before issue 9 this raised inside the session, the prompt was answered
    ``cancelled`` and the session vanished. Now the late step is ignored, the turn
    ends on its result (agy's error shown as a warning after the partial answer
    it follows), and the session keeps working.
    The internal-error path itself (-32603) is tested in-process in
    test_internal_error.py, where a real bug can be made."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await client.new_session()
            mark = client.mark()
            response = await prompt(client, session_id, "[fake-agy:late-event] go")
            assert stop_reason(response) == "end_turn", response
            shown = client.message_text(session_id, since=mark)
            assert "agy stopped after this answer: fake-agy: step failed" in shown
            again = await prompt(client, session_id, "still there?")
            assert stop_reason(again) == "end_turn", again
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- 6

STARTUP_TIMEOUT_S = 1.5


@pytest.mark.parametrize("hang", ["silent", "garbage"])
async def test_startup_deadline_answers_a_prompt_whose_agy_never_starts(
    harness: Harness, hang: str
) -> None:
    """agy prints nothing (or one garbage line) and never an event: the prompt is
    answered with a clear error soon after AGYBRIDGE_STARTUP_TIMEOUT_S, the child
    is retired, and the next prompt runs on a fresh agy."""
    hang_flag = harness.tmp_path / "hang"
    hang_flag.touch()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            AGYBRIDGE_STARTUP_TIMEOUT_S=str(STARTUP_TIMEOUT_S),
            FAKE_AGY_STARTUP_HANG=hang,
            FAKE_AGY_HANG_WHILE=str(hang_flag),
        ) as client:
            await client.initialize()
            session_id = await client.new_session()
            prompt_id = await client.start_prompt(session_id, "hello")
            # Generous over the deadline (start-up of the bridge's own checks).
            with trio.fail_after(STARTUP_TIMEOUT_S + 4):
                response = await client.response(prompt_id)
            assert "error" in response, response
            message = response["error"]["message"]
            assert "doctor" in message, message
            if hang == "garbage":
                assert GARBAGE_LINE in message, message
            assert await wait_no_agy_session(harness) == []
            hang_flag.unlink()
            again = await prompt(client, session_id, "and now?")
            assert stop_reason(again) == "end_turn", again
        assert_clean(client)
    await harness.assert_no_leftovers()


STALL_ENV = {
    "FAKE_AGY_SLOW_INTERVAL": "30",  # one tick, then 30 s of silence
    "FAKE_AGY_SLOW_SECONDS": "60",
    "FAKE_AGY_SPAWN_CHILDREN": "0",
}


async def test_stall_notice_is_told_once(harness: Harness) -> None:
    """A running turn silent for AGYBRIDGE_STALL_NOTICE_S: the editor is told once
    (not a failure); the turn still answers ``cancelled`` when cancelled."""
    notice_s = 1.0
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            AGYBRIDGE_STALL_NOTICE_S=str(notice_s), **STALL_ENV
        ) as client:
            session_id, prompt_id = await streaming_prompt(client)
            after_tick = client.mark()

            def notices() -> list[Any]:
                return [
                    u
                    for u in client.updates(session_id, since=after_tick)
                    if u["sessionUpdate"] in NOTICE_KINDS
                ]

            with trio.fail_after(notice_s + 4):
                await client.wait_for(notices, "the stall notice")
            await trio.sleep(3 * notice_s)  # observation window: told once only
            assert len(notices()) == 1, notices()
            assert client.response_nowait(prompt_id) is None  # a notice, not a failure
            await client.notify("session/cancel", {"sessionId": session_id})
            assert stop_reason(await client.response(prompt_id)) == "cancelled"
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_stall_timeout_fails_the_turn(harness: Harness) -> None:
    """AGYBRIDGE_STALL_TIMEOUT_S: a turn silent that long is answered with an error
    (not ``cancelled``), its agy retired, and the session stays usable."""
    timeout_s = 1.5
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            AGYBRIDGE_STALL_TIMEOUT_S=str(timeout_s), **STALL_ENV
        ) as client:
            session_id, prompt_id = await streaming_prompt(client)
            with trio.fail_after(timeout_s + 4):
                response = await client.response(prompt_id)
            error = error_of(response, -32042)  # agy failed the request: not a bridge bug
            assert error["data"]["_meta"]["agybridge"]["cause"] == "stall_timeout"
            assert await wait_no_agy_session(harness) == []
            assert stop_reason(await prompt(client, session_id, "next")) == "end_turn"
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- 7


async def test_usage_falls_back_to_total_tokens(harness: Harness) -> None:
    """A later turn whose usage objects carry only ``total_tokens``: its usage_update
    is not 0 (the meter falls back to the total)."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await client.new_session()
            assert stop_reason(await prompt(client, session_id, "first")) == "end_turn"
            first = client.updates(session_id, "usage_update")
            assert first and first[-1]["used"] > 0, first
            mark = client.mark()
            response = await prompt(client, session_id, "[fake-agy:total-usage] second")
            assert stop_reason(response) == "end_turn"
            second = client.updates(session_id, "usage_update", since=mark)
            assert second, "no usage_update in the second turn"
            assert all(u["used"] > 0 for u in second), second
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- 8


async def test_lone_surrogate_in_prompt_text_is_invalid_params(harness: Harness) -> None:
    """``"\\ud800"`` in prompt text: -32602 naming ``$.prompt[0].text``; the session
    keeps working."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            session_id = await client.new_session()
            response = await prompt(client, session_id, "bad \ud800 text")
            assert error_of(response, -32602)["data"]["path"] == "$.prompt[0].text", response
            assert stop_reason(await prompt(client, session_id, "good text")) == "end_turn"
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_nul_in_session_new_meta_is_invalid_params(harness: Harness) -> None:
    """A NUL in a session/new ``_meta`` value: -32602 naming ``$._meta.model``."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            response = await client.request(
                "session/new",
                {
                    "cwd": str(harness.tmp_path),
                    "mcpServers": [],
                    "_meta": {"model": "gemini\u0000x"},
                },
            )
            assert error_of(response, -32602)["data"]["path"] == "$._meta.model", response
            await client.new_session()  # the connection is fine
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- idle


async def test_an_idle_sessions_agy_is_stopped_and_the_next_prompt_resumes(
    harness: Harness,
) -> None:
    """AGYBRIDGE_IDLE_TIMEOUT_S (issue 11, unattended use): an idle session's agy
    is stopped; the session stays, and its next prompt starts agy again on the
    same conversation."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(AGYBRIDGE_IDLE_TIMEOUT_S="0.3") as client:
            await client.initialize()
            session_id = await client.new_session()
            assert stop_reason(await prompt(client, session_id, "first")) == "end_turn"
            assert await wait_no_agy_session(harness) == []
            assert stop_reason(await prompt(client, session_id, "second")) == "end_turn"
            argvs = harness.session_argvs()
            assert len(argvs) >= 2 and "--conversation" in argvs[-1], argvs
        assert_clean(client)
    await harness.assert_no_leftovers()
