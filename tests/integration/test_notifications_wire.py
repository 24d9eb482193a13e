"""Opt-in runtime notifications and ACP ``notice`` updates, end to end over the raw wire.

One bridge, one session, three turns of the fake (a subagent, agy's own policy
denying a command, an answer followed by a 429): the turns that produce every
extension notification and every kind of bridge warning. Every message is
validated against the official ACP schema, every ``_agybridge/*`` notification
against docs/extensions.schema.json.

* A client that asks for nothing receives exactly the bytes it received before
  (``tests/data/wire/not-opted-in.ndjson``, recorded from the bridge before this
  feature: ``python -m tests.integration.test_notifications_wire DIR`` rewrites it
  with the bridge whose source is in DIR).
* A client that asks for the notifications receives the same messages plus them.
* A client that shows notices reads the warnings there, not in the chat.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.acp_wire import Harness, RawClient, WireValidator
from tests.extension_schema import check_def, check_notification

pytestmark = pytest.mark.integration

TIMEOUT_S = 30
SCENARIOS = "subagent,soft-deny,partial-error"
PROMPTS = ("ask the subagent", "run it", "what is 2+2")
EXPECTED = Path(__file__).parents[1] / "data/wire/not-opted-in.ndjson"
OPT_IN = {"agybridge": {"notifications": True}}
RUNTIME = "_agybridge/runtime_update"
NOTICES = {"notices": {}}

#: Ids that differ between runs (numbered in order of appearance), and times.
_IDS = re.compile(
    r"[a-z]+_[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
_TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


#: The conversation id ``session/new`` names when agy's ``init`` came before the
#: answer (a race of two processes, the same before and after this feature).
_EARLY_CONVERSATION = re.compile(r',"_meta":\{"conversationId":"[^"]*"\}(\}\}$)')


def normalised(lines: list[str], tmp_path: Path) -> list[str]:
    """``lines`` with this run's ids, times and directory replaced by stable names
    (the first, the ``session/new`` answer, without a conversation id that came early)."""
    lines = [_EARLY_CONVERSATION.sub(r"\1", lines[0]), *lines[1:]] if lines else lines
    names: dict[str, str] = {}

    def name(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<id{len(names)}>")

    return [
        _TIMES.sub("<time>", _IDS.sub(name, line.replace(str(tmp_path), "<tmp>"))) for line in lines
    ]


async def run(
    harness: Harness,
    meta: dict[str, Any] | None = None,
    *,
    pythonpath: str | None = None,
    **capabilities: Any,
) -> tuple[list[str], dict[str, Any], RawClient]:
    """The three turns for a client whose ``initialize`` says ``meta`` and
    ``capabilities``: the agent's raw lines after the initialize answer, that
    answer, and the client. ``pythonpath``: run the bridge from that source."""
    validator = WireValidator()
    params: dict[str, Any] = {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False},
            **capabilities,
        },
        "clientInfo": {"name": "notifications-test", "version": "0"},
    }
    if meta is not None:
        params["_meta"] = meta
    extra = {"PYTHONPATH": pythonpath} if pythonpath else {}
    # The model discovery is held until the session exists, so its
    # config_option_update comes at the same place in every run.
    gate = harness.tmp_path / "discovery-gate"
    with trio.fail_after(TIMEOUT_S):
        # Safe mode, and "reject" when asked: agy's own policy then blocks the command.
        async with harness.open_bridge(
            SCENARIOS,
            validator=validator,
            AGYBRIDGE_MODE="safe",
            FAKE_AGY_DISCOVERY_GATE=str(gate),
            **extra,
        ) as client:
            client.permission_choice = "reject"
            answer = await client.request("initialize", params)
            session_id = await client.new_session()
            gate.touch()
            await client.wait_update(session_id, "config_option_update")
            for text in PROMPTS:
                await client.response(await client.start_prompt(session_id, text))
            if meta is not None:  # the last turn's runtime update follows its answer
                await client.wait_for(
                    lambda: len(of_method(client, RUNTIME)) == len(PROMPTS) or None,
                    "a runtime update after each turn",
                )
    await harness.assert_no_leftovers()
    assert validator.problems == [], validator.report()
    sent = [json.loads(entry) for entry in client.transcript]
    lines = [entry["raw"] for entry in sent if entry["dir"] == "a2c"]
    assert json.loads(lines[0]) == answer
    return lines[1:], answer, client


def of_method(client: RawClient, method: str) -> list[dict[str, Any]]:
    return [m for m in client.received if m.get("method") == method]


def advertised(answer: dict[str, Any]) -> dict[str, Any]:
    mine: dict[str, Any] = answer["result"]["agentCapabilities"]["_meta"]["agybridge"]
    check_def("Capabilities", mine)
    return mine


def extension_notifications(client: RawClient) -> list[tuple[str, dict[str, Any]]]:
    found = [
        (m["method"], m["params"])
        for m in client.received
        if "id" not in m and m.get("method", "").startswith("_agybridge/")
    ]
    for method, params in found:
        check_notification(method, params)
    return found


def chat_text(client: RawClient, session_id: str) -> str:
    return "".join(
        u["content"].get("text", "")
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


async def test_a_client_that_asks_for_nothing_gets_the_same_bytes(harness: Harness) -> None:
    """Not opted in: every line after ``initialize`` is what the bridge sent before
    this feature (ids and times aside), and ``initialize`` lists no notifications."""
    lines, answer, _ = await run(harness)
    assert advertised(answer)["notifications"] == []
    assert normalised(lines, harness.tmp_path) == EXPECTED.read_text().splitlines()


async def test_opted_in_client_gets_the_same_messages_plus_the_notifications(
    harness: Harness,
) -> None:
    """``_meta.agybridge.notifications: true``: the same messages as a client that did not
    ask, with the ``_agybridge/*`` notifications among them, each where it happened."""
    check_def("NotificationsOptIn", OPT_IN["agybridge"])
    lines, answer, client = await run(harness, OPT_IN)
    assert advertised(answer)["notifications"] == [
        "_agybridge/runtime_update",
        "_agybridge/usage_update",
        "_agybridge/warning",
        "_agybridge/error",
        "_agybridge/sub_agent_invocation_start",
        "_agybridge/sub_agent_finished",
    ]
    plain = [line for line in lines if '"method":"_agybridge/' not in line]
    assert normalised(plain, harness.tmp_path) == EXPECTED.read_text().splitlines()
    everything = extension_notifications(client)
    session_id = everything[0][1]["sessionId"]
    assert {params["sessionId"] for _, params in everything} == {session_id}
    # Once each turn has ended (beside its answer): the runtime, the turn's tokens counted.
    totals = [p["runtime"]["tokens"]["totalTokens"] for m, p in everything if m == RUNTIME]
    assert 0 < totals[0] <= totals[1] < totals[2]  # the denied turn spent nothing
    found = [(method, params) for method, params in everything if method != RUNTIME]
    assert [method for method, _ in found] == [
        "_agybridge/sub_agent_invocation_start",
        "_agybridge/sub_agent_finished",
        "_agybridge/usage_update",
        "_agybridge/warning",
        "_agybridge/usage_update",
        "_agybridge/error",
        "_agybridge/usage_update",
    ]
    started, finished = found[0][1], found[1][1]
    assert started["agentName"] == finished["agentName"] == "Secret Reader"
    assert started["invocationId"] == finished["invocationId"]
    assert finished["outcome"] == "returned"
    # The return is announced before the answer that uses it.
    at = {line: i for i, line in enumerate(lines)}
    returned = next(i for line, i in at.items() if "sub_agent_finished" in line)
    assert returned < next(i for line, i in at.items() if "SUB SAID banana" in line)
    warning, error = found[3][1], found[5][1]
    assert warning["code"] == "policy_blocked"
    assert warning["message"] in chat_text(client, session_id)
    assert (error["code"], error["recoverable"]) == ("quota", True)
    usage = found[2][1]
    assert usage["maxContextTokens"] == 200_000 and usage["totalTokens"] > 0


async def test_a_client_that_shows_notices_reads_warnings_there(harness: Harness) -> None:
    """``clientCapabilities.session.notices``: the denial's warning and the 429 after the
    answer are ``notice`` updates (warning, error), and the chat has no ⚠️ paragraph."""
    _, _, client = await run(harness, session=NOTICES)
    [session_id] = {
        u["params"]["sessionId"] for u in client.received if "sessionId" in u.get("params", {})
    }
    notices = [u for u in client.updates(session_id) if u["sessionUpdate"] == "notice"]
    assert [(n["severity"], n["_meta"]["agybridge"]["cause"]) for n in notices] == [
        ("warning", "policy_blocked"),
        ("error", "quota"),
    ]
    assert notices[0]["title"].startswith("agy's own policy auto-denied an action")
    assert "`command(<program>)`" in notices[0]["description"]
    assert "RESOURCE_EXHAUSTED" in notices[1]["description"]
    text = chat_text(client, session_id)
    assert "⚠️" not in text
    assert "SUB SAID banana" in text and "The answer is 4." in text
    assert not [m for m in client.received if m.get("method", "").startswith("_agybridge/")]


async def _record(source: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        harness = Harness(Path(tmp))
        try:
            lines, _, _ = await run(harness, pythonpath=str(source))
        finally:
            harness.kill_leftovers()
        EXPECTED.parent.mkdir(parents=True, exist_ok=True)
        EXPECTED.write_text("\n".join(normalised(lines, harness.tmp_path)) + "\n")


if __name__ == "__main__":
    # python -m tests.integration.test_notifications_wire DIR: DIR holds the bridge's
    # source before this feature (e.g. `git archive <commit> | tar -x -C DIR`).
    trio.run(_record, Path(sys.argv[1]).resolve())
