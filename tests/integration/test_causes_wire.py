"""Every cause the fake agy can produce, as an editor reads it (raw wire, official schema).

One row per catalogue cause (`agybridge.causes`) that a turn or a session can
meet with the fake agy: the exact JSON-RPC code (or the stop reason and its
notice), ``_meta.agybridge.cause`` with its structured fields, and the words
of the message that name the thing (exit code or signal, reset time, model,
limit, path). No row answers -32603: none of these is a bug in the bridge.
The start-up causes (AGY_BIN, staging) are test_start_errors.py's rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agybridge import causes
from tests.acp_wire import Harness, open_bridge, wait_no_leftovers

pytestmark = pytest.mark.integration

TEST_TIMEOUT_S = 30


@attrs.frozen
class Row:
    #: FAKE_AGY_* / AGYBRIDGE_* settings of the bridge.
    env: dict[str, str]
    cause: str
    #: Words the message (error message, or the notice) must contain.
    words: tuple[str, ...]
    #: ``_meta.agybridge`` fields the answer must carry (a subset).
    fields: dict[str, Any] = attrs.Factory(dict)
    #: Prompts sent in turn; the last one's answer is checked.
    prompts: tuple[str, ...] = ("hello",)


ROWS: dict[str, Row] = {
    "agy crashes": Row(
        {"FAKE_AGY_SCENARIO": "crash", "FAKE_AGY_CRASH_EXIT_CODE": "2"},
        "agy_crashed",
        ("agy exited unexpectedly (exit code 2)", "panic: runtime error"),
        {"exitCode": 2},
    ),
    "agy killed by a signal": Row(
        {"FAKE_AGY_SCENARIO": "killed"},
        "agy_crashed",
        ("agy exited unexpectedly (killed by SIGSEGV)",),
        {"signal": "SIGSEGV"},
    ),
    "quota (AGY_ERROR)": Row(
        {"FAKE_AGY_SCENARIO": "quota"},
        "quota",
        ("Individual quota reached", "quota resets at 20"),
        {"resetsIn": "100h23m59s"},
    ),
    "quota in words only": Row(
        {"FAKE_AGY_SCENARIO": "quota-words"},
        "quota",
        ("Individual quota reached", "quota resets at 20"),
        {"resetsIn": "100h23m59s"},
    ),
    "503 at start-up": Row(
        {"FAKE_AGY_SCENARIO": "unavailable"}, "unavailable", ("UNAVAILABLE (code 503)",)
    ),
    "503 mid-session": Row(
        {"FAKE_AGY_SCENARIO": "echo,unavailable"},
        "unavailable",
        ("UNAVAILABLE (code 503)",),
        prompts=("first", "second"),
    ),
    "print timeout": Row(
        {"FAKE_AGY_SCENARIO": "print-timeout"}, "print_timeout", ("print timeout cut this turn",)
    ),
    "interrupted": Row(
        {"FAKE_AGY_SCENARIO": "interrupted"},
        "interrupted",
        ("agy was interrupted from outside the bridge", "Retry the prompt"),
    ),
    "stall timeout": Row(
        {
            "FAKE_AGY_SCENARIO": "slow",
            "FAKE_AGY_SLOW_INTERVAL": "600",
            "AGYBRIDGE_STALL_TIMEOUT_S": "1",
        },
        "stall_timeout",
        ("printed nothing for 1 s", "AGYBRIDGE_STALL_TIMEOUT_S"),
        {"seconds": 1.0},
    ),
    "start-up timeout": Row(
        {"FAKE_AGY_STARTUP_HANG": "silent", "AGYBRIDGE_STARTUP_TIMEOUT_S": "1"},
        "agy_start_timeout",
        ("agy did not start within 1 s", "agybridge doctor", "AGYBRIDGE_STARTUP_TIMEOUT_S"),
        {"seconds": 1.0},
    ),
    "garbage output": Row(
        {"FAKE_AGY_STARTUP_HANG": "garbage", "AGYBRIDGE_STARTUP_TIMEOUT_S": "1"},
        "agy_garbage",
        ("not stream-json", "warming up the model cache"),
    ),
    "not signed in": Row({"FAKE_AGY_SIGNED_OUT": "1"}, "not_signed_in", ("agy is not signed in",)),
    "unknown model": Row(
        {"AGYBRIDGE_MODEL": "nonesuch"},
        "invalid_model",
        ("nonesuch", "available models"),
        {"model": "nonesuch"},
    ),
}


def _notice(updates: list[dict[str, Any]], cause: str) -> dict[str, Any]:
    found = [
        u
        for u in updates
        if u.get("sessionUpdate") == "agent_message_chunk"
        and causes.cause_of(u.get("_meta")) == cause
    ]
    assert len(found) == 1, updates
    return found[0]


@pytest.mark.parametrize("row", sorted(ROWS))
async def test_each_cause_reaches_the_wire_as_the_catalogue_says(
    harness: Harness, tmp_path: Path, row: str
) -> None:
    spec = ROWS[row]
    expected = causes.cause(spec.cause)
    with trio.fail_after(TEST_TIMEOUT_S):
        async with open_bridge(tmp_path, harness.env(**spec.env)) as client:
            await client.initialize()
            opened = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            answer = opened
            if "result" in opened:
                session_id = opened["result"]["sessionId"]
                for text in spec.prompts:
                    since = client.mark()
                    answer = await client.response(await client.start_prompt(session_id, text))
            if "error" in answer:
                error = answer["error"]
                assert error["code"] == expected.code, error
                assert error["code"] != -32603, error
                meta = error["data"]["_meta"]["agybridge"]
                message = error["message"]
            else:
                result = answer["result"]
                assert expected.stop is not None, f"{spec.cause} answered {result}"
                assert result["stopReason"] == expected.stop, result
                meta = result["_meta"]["agybridge"]
                notice = _notice(client.updates(session_id, since=since), spec.cause)
                message = notice["content"]["text"]
                assert notice["_meta"]["agybridge"]["cause"] == spec.cause
            assert meta["cause"] == spec.cause, answer
            assert spec.fields.items() <= meta.items(), meta
            for words in spec.words:
                assert words in message, f"{words!r} not in {message!r}"
            assert "AGY_ERROR" not in message, message
            assert not client.validator.problems, client.validator.report()
    assert await wait_no_leftovers(harness.marker) == []


#: Requests a client gets wrong, each answered with its own cause (one bridge).
CLIENT_ROWS: tuple[tuple[str, dict[str, Any], int, str, str], ...] = (
    ("session/set_mode", {"modeId": "nonesuch"}, -32602, "invalid_setting", "nonesuch"),
    (
        "session/set_config_option",
        {"configId": "effort", "value": "extreme"},
        -32602,
        "invalid_setting",
        "extreme",
    ),
    (
        "session/set_config_option",
        {"configId": "model", "value": "nonesuch"},
        -32602,
        "invalid_model",
        "nonesuch",
    ),
    (
        "session/prompt",
        {"sessionId": "sess_nope", "prompt": []},
        -32002,
        "unknown_session",
        "sess_nope",
    ),
    ("session/frobnicate", {}, -32601, "unknown_method", "session/frobnicate"),
)


async def test_a_clients_mistakes_name_their_cause(harness: Harness, tmp_path: Path) -> None:
    """A bad mode, effort or model is the setting's own cause (not a bridge
    error); an unknown session or method is named too."""
    with trio.fail_after(TEST_TIMEOUT_S):
        async with open_bridge(tmp_path, harness.env()) as client:
            await client.initialize()
            session_id = await client.new_session(tmp_path)
            for method, params, code, cause, words in CLIENT_ROWS:
                invalid = method == "session/frobnicate"  # not in the schema: on purpose
                request_id = await client.start_request(
                    method, {"sessionId": session_id, **params}, expect_invalid=invalid
                )
                answer = await client.response(request_id)
                error = answer["error"]
                assert (error["code"], causes.cause_of(error["data"])) == (code, cause), answer
                assert words in error["message"], error
            assert not client.validator.problems, client.validator.report()


async def test_a_working_directory_that_went_away_is_cwd_missing(
    harness: Harness, tmp_path: Path
) -> None:
    """agy crashes, the session's directory is removed, the next prompt cannot
    start agy there: -32002 naming the directory, cause ``cwd_missing``."""
    work = tmp_path / "work"
    work.mkdir()
    with trio.fail_after(TEST_TIMEOUT_S):
        async with open_bridge(tmp_path, harness.env()) as client:
            await client.initialize()
            session_id = await client.new_session(work)
            crashed = await client.response(
                await client.start_prompt(session_id, "[fake-agy:crash] hi")
            )
            assert causes.cause_of(crashed["error"]["data"]) == "agy_crashed", crashed
            work.rmdir()
            answer = await client.response(await client.start_prompt(session_id, "again"))
            error = answer["error"]
            assert (error["code"], causes.cause_of(error["data"])) == (-32002, "cwd_missing")
            assert error["data"]["_meta"]["agybridge"]["path"] == str(work)
            assert str(work) in error["message"] and "existing directory" in error["message"]
            assert not client.validator.problems, client.validator.report()
    assert await wait_no_leftovers(harness.marker) == []
