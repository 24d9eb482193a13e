"""Raw-wire tests of the bridge's error codes, turn queueing, cancellation and shutdown.

Every test spawns the real bridge (``python -m agybridge``) with the fake agy, talks
NDJSON to it through `acp_wire.RawClient` (every message in both directions is checked
against the official ACP schema; deliberately malformed requests are sent with
``expect_invalid`` so that only their answers are checked), and ends by asserting that
no process carrying the test's marker is left. Prompts pick fake-agy scenarios with the
``[fake-agy:NAME]`` directive. No sleeps synchronise anything: tests wait for wire
events (the first ``agent_message_chunk`` before a cancel, responses) under
``trio.fail_after``; timings are measured, with bounds from the acceptance criteria.
"""

from __future__ import annotations

import functools
import json
import signal
from typing import Any

import pytest
import trio

from tests.acp_wire import Harness, RawClient, WireValidator, agy_state_dir, stop_reason

pytestmark = pytest.mark.integration

#: Per-test bound on wall time (bridge and fake agy start-ups are ~0.3 s each).
TEST_TIMEOUT_S = 20
#: The bridge's escalation defaults (agybridge.config.Settings).
SIGINT_GRACE_S = 2.0
SIGTERM_GRACE_S = 1.0
#: Acceptance: a cancelled `slow` turn answers within 1 s of the cancel.
SLOW_CANCEL_BOUND_S = 1.0

SLOW = "[fake-agy:slow] stream ticks until cancelled"
#: session/update kinds that belong to a turn and must precede its response (brief §6).
TURN_CONTENT_UPDATES = frozenset(
    {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"}
)


def error_of(response: dict[str, Any]) -> dict[str, Any]:
    assert "error" in response, f"expected an error, got {response}"
    error: dict[str, Any] = response["error"]
    return error


def assert_clean(client: RawClient) -> None:
    """Zero schema problems and no request left unanswered, in both directions."""
    problems = client.validator.problems + [
        f"never answered: {u}" for u in client.validator.unanswered()
    ]
    assert not problems, client.validator.report() + "\n" + client.diagnostics()


async def ready_session(client: RawClient) -> str:
    await client.initialize()
    return await client.new_session()


async def start_streaming_prompt(client: RawClient, session_id: str, text: str = SLOW) -> int:
    """Send a prompt and return its id once its first agent_message_chunk has arrived."""
    mark = client.mark()
    request_id = await client.start_prompt(session_id, text)
    await client.wait_update(session_id, "agent_message_chunk", since=mark)
    return request_id


# --------------------------------------------------------------------------- -32700


async def test_garbage_line_is_parse_error_and_connection_survives(harness: Harness) -> None:
    """An unparsable line gets -32700 with id null; the connection keeps working."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.send_raw(b"this is { not json\n")
            parse_error = await client.wait_for(
                lambda: client.response_nowait(None), "the -32700 answer"
            )
            assert parse_error["id"] is None
            assert error_of(parse_error)["code"] == -32700
            assert error_of(parse_error)["data"]["_meta"]["agybridge"]["cause"] == "invalid_json"
            await ready_session(client)
        assert client.process.returncode == 0
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- -32600


async def test_request_before_initialize_is_invalid_request(harness: Harness) -> None:
    """session/new before initialize is -32600 naming initialize; afterwards it works."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            response = await client.request(
                "session/new", {"cwd": str(harness.tmp_path), "mcpServers": []}
            )
            error = error_of(response)
            assert error["code"] == -32600
            assert "initialize" in error["message"]
            await ready_session(client)
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_requests_pipelined_after_initialize_wait_for_it(harness: Harness) -> None:
    """initialize and session/new sent in one write (no waiting for the answer):
    session/new waits for initialize instead of being refused. Request tasks start
    in no fixed order: the order where session/new's task runs first is forced in
    process by tests/unit/agent/test_initialize_order.py (it was five bridges here)."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            lines = [
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                },
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "session/new",
                    "params": {"cwd": str(harness.tmp_path), "mcpServers": []},
                },
            ]
            for message in lines:
                client.validator.feed("c2a", message)
            await client.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            answer = await client.wait_for(lambda: client.response_nowait(1), "session/new")
            assert "result" in answer, answer
            assert client.position(client.response_nowait(0)) < client.position(answer)
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_batch_is_invalid_request(harness: Harness) -> None:
    """A JSON array (a batch) is answered once with -32600 and id null; nothing in it runs."""
    batch = [{"jsonrpc": "2.0", "id": 77, "method": "initialize", "params": {}}]
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.send_raw(json.dumps(batch).encode() + b"\n")
            answer = await client.wait_for(lambda: client.response_nowait(None), "the answer")
            assert error_of(answer)["code"] == -32600
            assert error_of(answer)["data"]["_meta"]["agybridge"]["cause"] == "invalid_request"
            await ready_session(client)
            assert client.response_nowait(77) is None, "a request inside the batch was run"
        assert_clean(client)
    await harness.assert_no_leftovers()


#: JSON values that are not valid JSON-RPC requests, with the id their -32600
#: echoes (ids far above those of the client's own requests: `RawClient.response`
#: finds the first answer to an id on the whole wire).
BAD_ENVELOPES: tuple[tuple[Any, int | None], ...] = (
    ({"id": 9005, "method": "initialize", "params": {}}, 9005),  # no "jsonrpc"
    ({"jsonrpc": "1.0", "id": 9006, "method": "initialize", "params": {}}, 9006),
    ({"jsonrpc": "2.0", "id": 9007, "method": 42}, 9007),  # method not a string
    ({"jsonrpc": "2.0", "id": 9008, "method": "initialize", "params": "x"}, 9008),
    ({"jsonrpc": "2.0", "id": True, "method": "initialize"}, None),  # a bool is no id
    (["not", "an", "object"], None),
    ("just a string", None),
)


async def test_bad_envelope_is_invalid_request(harness: Harness) -> None:
    """A JSON value that is not a valid JSON-RPC request is -32600 (its id echoed
    when usable), and the bridge goes on serving: one bridge takes them all in turn."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            for message, expected_id in BAD_ENVELOPES:
                # Nothing else is asked meanwhile: the first response is the answer.
                answered = functools.partial(_first_response_since, client, client.mark())
                await client.send(message, expect_invalid=True)
                answer = await client.wait_for(answered, f"the answer to {message!r}")
                assert error_of(answer)["code"] == -32600, message
                assert answer["id"] == expected_id, message
                await client.new_session()  # still serving
        assert_clean(client)
    await harness.assert_no_leftovers()


def _first_response_since(client: RawClient, mark: int) -> dict[str, Any] | None:
    return next((m for m in client.received[mark:] if "method" not in m), None)


# --------------------------------------------------------------------------- -32601


async def test_unknown_method_is_method_not_found(harness: Harness) -> None:
    """Unknown requests (plain, `_`-extension, unadvertised ones) are -32601; unknown
    notifications are ignored without an answer."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            await client.notify("_agybridge/unknown_notification", {"x": 1})
            await client.notify("$/unknown_protocol_notification", {}, expect_invalid=True)
            await client.notify("no/such_notification", {}, expect_invalid=True)
            for method in ("no/such_method", "_agybridge/no_such_extension", "session/fork"):
                request_id = await client.start_request(method, {}, expect_invalid=True)
                error = error_of(await client.response(request_id))
                assert error["code"] == -32601, (method, error)
            # Only the three requests were answered (plus initialize): notifications never are.
            responses = [m for m in client.received if "method" not in m]
            assert len(responses) == 4, responses
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- -32602


@pytest.mark.parametrize(
    ("params", "expect_in_message", "data_path"),
    [
        pytest.param({"cwd": "relative/dir", "mcpServers": []}, "absolute", "$.cwd", id="rel-cwd"),
        pytest.param({"mcpServers": []}, "cwd", None, id="missing-cwd"),
        pytest.param(
            {"cwd": "/nonexistent/agybridge-test-dir", "mcpServers": []},
            "/nonexistent/agybridge-test-dir",
            "$.cwd",
            id="cwd-not-a-directory",
        ),
    ],
)
async def test_bad_session_new_params_are_invalid_params(
    harness: Harness, params: dict[str, Any], expect_in_message: str, data_path: str | None
) -> None:
    """session/new with a missing, relative or non-existent cwd is -32602 with useful data."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            # Missing cwd breaks the schema itself; the others are schema-valid strings.
            request_id = await client.start_request(
                "session/new", params, expect_invalid="cwd" not in params
            )
            error = error_of(await client.response(request_id))
            assert error["code"] == -32602
            assert expect_in_message in error["message"]
            assert error.get("data"), "invalid params should say what is wrong in data"
            if data_path is not None:
                assert error["data"]["path"] == data_path
            else:
                assert any("$.cwd" in p for p in error["data"]["problems"]), error
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_null_lists_and_a_malformed_meta_are_defaulted(harness: Harness) -> None:
    """``mcpServers: null`` is no servers and a ``_meta`` that is not an object is
    none, on session/new, list and load (the schema's x-deserialize-default-on-error;
    the TS SDK's defaultOnNull/defaultOnError): not -32602."""
    cwd = str(harness.tmp_path)
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            new = await client.request(
                "session/new",
                {"cwd": cwd, "mcpServers": None, "additionalDirectories": None, "_meta": 5},
            )
            assert "result" in new, new
            session_id = new["result"]["sessionId"]
            listed = await client.request("session/list", {"cwd": cwd, "_meta": "x"})
            assert [s["sessionId"] for s in listed["result"]["sessions"]] == [session_id]
            # session/list's own additionalDirectories filter: null is no filter, not [].
            extra = harness.tmp_path / "extra"
            extra.mkdir()
            other = await client.request(
                "session/new", {"cwd": cwd, "mcpServers": [], "additionalDirectories": [str(extra)]}
            )
            listed = await client.request("session/list", {"additionalDirectories": None})
            assert {s["sessionId"] for s in listed["result"]["sessions"]} == {
                session_id,
                other["result"]["sessionId"],
            }
            await client.request("session/close", {"sessionId": session_id})
            loaded = await client.request(
                "session/load",
                {"sessionId": session_id, "cwd": cwd, "mcpServers": None, "_meta": []},
            )
            assert "result" in loaded, loaded
    await harness.assert_no_leftovers()


#: Prompt blocks the bridge cannot pass to agy, with the words of their -32602.
UNADVERTISED_BLOCKS: tuple[tuple[dict[str, Any], str], ...] = (
    (
        {"type": "audio", "data": "aGVsbG8gd29ybGQ=", "mimeType": "audio/wav"},
        "Unsupported audio format. Use WAV, MP3, OGG, FLAC, M4A, WebM or AIFF.",
    ),
    (
        {"type": "audio", "data": "UklGRg=", "mimeType": "audio/wav"},
        "Audio data is not valid base64: its length (7) is not a multiple of 4.",
    ),
    ({"type": "image", "data": "R0lGODlhAQABAAAAACw=", "mimeType": "text/plain"}, "image"),
    (
        {"type": "image", "data": "aGVsbG8gd29ybGQ=", "mimeType": "image/png"},
        "Unsupported image format. Use PNG, JPEG, GIF, or WebP.",
    ),
)


async def test_unadvertised_prompt_blocks_are_invalid_params(harness: Harness) -> None:
    """Prompt blocks the bridge cannot pass to agy are -32602 saying why; the whole
    prompt is refused, the session stays usable and agy never saw the prompt (one
    session takes each block in turn)."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            for block, message in UNADVERTISED_BLOCKS:
                response = await client.request(
                    "session/prompt",
                    {"sessionId": session_id, "prompt": [{"type": "text", "text": "look"}, block]},
                )
                error = error_of(response)
                assert error["code"] == -32602, block
                assert message in error["message"], block
                assert error["data"]["details"] == error["message"], block
                assert error["data"]["path"].startswith("$.prompt[1]"), block
                cause = error["data"]["_meta"]["agybridge"]
                assert cause == {"cause": "attachment_invalid", "path": error["data"]["path"]}
                mark = client.mark()
                ok = await client.request(
                    "session/prompt",
                    {"sessionId": session_id, "prompt": [{"type": "text", "text": "plain text"}]},
                )
                assert ok["result"]["stopReason"] == "end_turn"
                assert "plain text" in client.message_text(session_id, since=mark)
        stdin_lines = [e["stdin"] for e in harness.launches() if "stdin" in e]
        assert not any("look" in line for line in stdin_lines), stdin_lines
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- -32002


async def test_unknown_session_is_resource_not_found(harness: Harness) -> None:
    """session/prompt and session/close for an unknown sessionId are -32002 with the id in
    data; session/cancel for one is ignored; a closed session is unknown afterwards."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            await client.notify("session/cancel", {"sessionId": "sess_unknown"})
            prompt = {"sessionId": "sess_unknown", "prompt": [{"type": "text", "text": "hi"}]}
            for method, params in (
                ("session/prompt", prompt),
                ("session/close", {"sessionId": "sess_unknown"}),
            ):
                error = error_of(await client.request(method, params))
                assert error["code"] == -32002, (method, error)
                assert error["data"]["sessionId"] == "sess_unknown"
            assert (await client.request("session/close", {"sessionId": session_id}))[
                "result"
            ] == {}
            again = await client.request("session/close", {"sessionId": session_id})
            assert error_of(again)["code"] == -32002
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- -32603


async def test_agy_crash_mid_turn_is_agy_crashed(harness: Harness) -> None:
    """agy exiting mid-turn answers the prompt -32042 (agy failed, not a bridge bug:
    cause ``agy_crashed``) naming agy's exit; the next prompt starts a new agy and works."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            response = await client.request(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": [{"type": "text", "text": "[fake-agy:crash] please"}],
                },
            )
            error = error_of(response)
            assert error["code"] == -32042
            assert error["data"]["_meta"]["agybridge"] == {"cause": "agy_crashed", "exitCode": 1}
            assert "agy exited unexpectedly" in error["message"]
            assert "exit code 1" in error["message"]
            assert error["data"]["exitCode"] == 1
            mark = client.mark()
            ok = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "again"}]},
            )
            assert ok["result"]["stopReason"] == "end_turn"
            assert client.message_text(session_id, since=mark) == "again\n"
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- -32800


async def test_cancel_request_for_prompt_answers_cancelled(harness: Harness) -> None:
    """$/cancel_request for a running session/prompt ends the turn with stopReason
    cancelled (a result, not -32800)."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            prompt_id = await start_streaming_prompt(client, session_id)
            await client.notify("$/cancel_request", {"requestId": prompt_id})
            response = await client.response(prompt_id)
            assert stop_reason(response) == "cancelled", response
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_cancel_request_for_other_request_is_request_cancelled(harness: Harness) -> None:
    """$/cancel_request for a pending non-prompt request (session/close waiting for an agy
    that ignores SIGINT) answers it -32800."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            prompt_id = await start_streaming_prompt(
                client, session_id, "[fake-agy:ignore-sigint] keep going"
            )
            close_id = await client.start_request("session/close", {"sessionId": session_id})
            await client.notify("$/cancel_request", {"requestId": close_id})
            error = error_of(await client.response(close_id))
            assert error["code"] == -32800
            # The close may or may not have begun before it was cancelled: either way a
            # session/cancel ends the turn, and the prompt still gets its answer.
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.response(prompt_id)
            assert stop_reason(response) == "cancelled", response
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_null_result_from_client_is_accepted(harness: Harness) -> None:
    """A client answering session/request_permission with "result": null (as
    some SDK clients do for empty results) is taken as no answer: the action is
    denied, nothing breaks, and the turn ends normally."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(AGYBRIDGE_MODE="ask") as client:
            client.permission_choice = "hold"
            session_id = await ready_session(client)
            prompt_id = await client.start_prompt(session_id, "[fake-agy:permission-tool]")
            request = await client.wait_for(
                lambda: client.permission_requests[0] if client.permission_requests else None,
                "a permission request",
            )
            await client.send(
                {"jsonrpc": "2.0", "id": request["id"], "result": None}, expect_invalid=True
            )
            # Later questions of the turn: answered normally.
            client.permission_choice = "reject_once"
            for pending in client.permission_requests[1:]:
                await client.answer_permission(pending, "reject_once")
            response = await client.response(prompt_id)
            assert stop_reason(response) == "end_turn", response
        verdicts = [e["hook"]["verdict"] for e in harness.launches() if "hook" in e]
        assert verdicts[0] == "deny"
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- turns


async def test_prompts_on_one_session_are_served_fifo(harness: Harness) -> None:
    """A second prompt waits for the first: agy gets them in wire order, the responses
    come in that order, and the second turn's updates follow the first's response.

    Each pair is sent in one write. The first pair's first turn is a short `slow` one
    (3 ticks, ~0.6 s), so the second prompt must wait while it streams; several quick
    echo pairs follow, because an ordering that depends on task scheduling fails only
    now and then.
    """
    pairs = [("[fake-agy:slow] first 0", "second 0")]
    pairs += [(f"first {i}", f"second {i}") for i in range(1, 9)]
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge(
            FAKE_AGY_SLOW_SECONDS="0.6", FAKE_AGY_SPAWN_CHILDREN="0"
        ) as client:
            session_id = await ready_session(client)
            for first_text, second_text in pairs:
                mark = client.mark()
                first, second = await client.start_prompts_together(
                    session_id, [first_text, second_text]
                )
                second_response = await client.response(second)
                first_response = client.response_nowait(first)
                assert first_response is not None, (
                    f"{second_text!r} was answered before {first_text!r}: prompts are not "
                    f"served in wire order\n{client.diagnostics()}"
                )
                assert stop_reason(first_response) == "end_turn"
                assert stop_reason(second_response) == "end_turn"
                boundary = client.position(first_response)
                assert boundary < client.position(second_response)
                chunks = [
                    (client.position(m), m["params"]["update"])
                    for m in client.received[mark:]
                    if m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                ]
                before = [u for i, u in chunks if i < boundary]
                after = [u for i, u in chunks if i > boundary]
                assert {u["messageId"] for u in before}.isdisjoint(u["messageId"] for u in after)
                assert "".join(u["content"]["text"] for u in after) == second_text + "\n"
                if "fake-agy" not in first_text:
                    assert "".join(u["content"]["text"] for u in before) == first_text + "\n"
        stdin_lines = [json.loads(e["stdin"]) for e in harness.launches() if "stdin" in e]
        received = [line["message"]["content"] for line in stdin_lines]
        assert received == [text for pair in pairs for text in pair]
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_cancel_ends_running_and_queued_prompts(harness: Harness) -> None:
    """session/cancel with a running slow turn and a queued prompt answers both
    cancelled within 1 s; the queued prompt never reaches agy."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            running = await start_streaming_prompt(client, session_id)
            queued = await client.start_prompt(session_id, "queued prompt")
            cancelled_at = trio.current_time()
            await client.notify("session/cancel", {"sessionId": session_id})
            answers = [await client.response(running), await client.response(queued)]
            elapsed = trio.current_time() - cancelled_at
            assert [stop_reason(a) for a in answers] == ["cancelled", "cancelled"]
            assert elapsed < SLOW_CANCEL_BOUND_S, f"cancel took {elapsed:.2f} s"
            # Every content update of the cancelled turn precedes its answer (session
            # metadata such as session_info_update may follow a turn).
            last_update = max(
                i
                for i, m in enumerate(client.received)
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] in TURN_CONTENT_UPDATES
            )
            assert last_update < client.position(answers[0]), client.diagnostics()
        stdin_lines = [e["stdin"] for e in harness.launches() if "stdin" in e]
        assert not any("queued prompt" in line for line in stdin_lines), stdin_lines
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_cancel_escalates_when_agy_ignores_sigint(harness: Harness) -> None:
    """With an agy that ignores SIGINT, the cancelled prompt still answers cancelled,
    after the SIGINT grace and within SIGINT grace + SIGTERM grace + 0.5 s."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            prompt_id = await start_streaming_prompt(
                client, session_id, "[fake-agy:ignore-sigint] keep going"
            )
            cancelled_at = trio.current_time()
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.response(prompt_id)
            elapsed = trio.current_time() - cancelled_at
            assert stop_reason(response) == "cancelled", response
            # The lower bound shows SIGINT really was ignored and SIGTERM ended the turn.
            assert SIGINT_GRACE_S - 0.1 <= elapsed <= SIGINT_GRACE_S + SIGTERM_GRACE_S + 0.5, (
                f"answered after {elapsed:.2f} s"
            )
        ignored = [e for e in harness.launches() if e.get("ignored")]
        assert [e["signal"] for e in ignored] == ["SIGINT"], ignored
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_prompt_after_cancel_resumes_conversation(harness: Harness) -> None:
    """After a cancel, agy is respawned with --conversation <its id> and the next prompt
    works."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            prompt_id = await start_streaming_prompt(client, session_id)
            await client.notify("session/cancel", {"sessionId": session_id})
            assert (await client.response(prompt_id))["result"]["stopReason"] == "cancelled"
            mark = client.mark()
            ok = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "still there?"}]},
            )
            assert ok["result"]["stopReason"] == "end_turn"
            assert client.message_text(session_id, since=mark) == "still there?\n"
        argvs = harness.session_argvs()
        assert len(argvs) >= 2, argvs
        assert "--conversation" not in argvs[0]
        conversation = argvs[1][argvs[1].index("--conversation") + 1]
        # The fake keeps one state file per conversation it created.
        assert (agy_state_dir(harness.tmp_path) / f"{conversation}.json").exists()
        # Every later incarnation resumes the same conversation.
        assert all(a[a.index("--conversation") + 1] == conversation for a in argvs[1:])
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- shutdown


async def test_stdin_eof_with_two_sessions_mid_turn(harness: Harness) -> None:
    """stdin EOF while two sessions are mid-turn: both prompts answer cancelled, the
    bridge exits 0 within 5 s, and no agy (or agy child) survives."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            sessions = [await client.new_session(), await client.new_session()]
            prompts = [await start_streaming_prompt(client, s) for s in sessions]
            # Each slow turn started two `sleep` children (one in its own session).
            children = [e for e in harness.launches() if "child" in e]
            assert len(children) == 4, children
            await client.close_stdin()
            with trio.fail_after(5):
                await client.process.wait()
                await client.wait_for(lambda: client.eof, "stdout EOF")
            assert client.process.returncode == 0
            for prompt_id in prompts:
                response = client.response_nowait(prompt_id)
                assert stop_reason(response) == "cancelled", (response, client.diagnostics())
        assert_clean(client)
    await harness.assert_no_leftovers()


async def test_sigterm_exits_zero_and_leaves_nothing(harness: Harness) -> None:
    """SIGTERM to the bridge mid-turn: the prompt answers cancelled, exit 0, nothing left."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await ready_session(client)
            prompt_id = await start_streaming_prompt(client, session_id)
            client.process.send_signal(signal.SIGTERM)
            with trio.fail_after(5):
                await client.process.wait()
                await client.wait_for(lambda: client.eof, "stdout EOF")
            assert client.process.returncode == 0, client.diagnostics()
            response = client.response_nowait(prompt_id)
            assert response is not None and stop_reason(response) == "cancelled", (
                response,
                client.diagnostics(),
            )
        assert_clean(client)
    await harness.assert_no_leftovers()


# --------------------------------------------------------------------------- the validator


def test_wire_validator_catches_violations() -> None:
    """The validator is not vacuous: each known-bad message yields a problem, the
    matching good exchange none (so "zero problems" above means something)."""
    validator = WireValidator()
    good = [
        ("c2a", {"jsonrpc": "2.0", "id": 0, "method": "session/new",
                 "params": {"cwd": "/tmp", "mcpServers": []}}),
        ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {"sessionId": "s"}}),
        ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
                 "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "x"}]}}),
        ("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                                         "content": {"type": "text", "text": "y"}}}}),
        ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}),
        ("a2c", {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}}),
    ]  # fmt: skip
    for direction, message in good:
        assert validator.feed(direction, message) == [], message
    assert not validator.unanswered()

    bad = [
        # Schema: the mode update needs currentModeId (the doc example's modeId is wrong).
        ("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "current_mode_update",
                                         "modeId": "ask"}}}),
        # Schema: unknown stopReason, and a null result where an object is required.
        ("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                 "params": {"sessionId": "s", "prompt": []}}),
        ("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "done"}}),
        ("c2a", {"jsonrpc": "2.0", "id": 3, "method": "session/new",
                 "params": {"cwd": "/tmp", "mcpServers": []}}),
        ("a2c", {"jsonrpc": "2.0", "id": 3, "result": None}),
        # Bookkeeping: an answer nobody asked for; an error without a message.
        ("a2c", {"jsonrpc": "2.0", "id": 99, "result": {}}),
        ("c2a", {"jsonrpc": "2.0", "id": 4, "method": "session/close",
                 "params": {"sessionId": "s"}}),
        ("a2c", {"jsonrpc": "2.0", "id": 4, "error": {"code": -32002}}),
        # Envelope: wrong jsonrpc version; a method the agent does not call.
        ("a2c", {"jsonrpc": "1.0", "method": "session/update", "params": {}}),
        ("a2c", {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {}}),
    ]  # fmt: skip
    flagged = [bool(validator.feed(direction, message)) for direction, message in bad]
    expected = [True, False, True, False, True, True, False, True, True, True]
    assert flagged == expected, validator.report()
