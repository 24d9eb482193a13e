"""What an editor is shown for agy 1.3.x's shapes, end to end over the raw ACP wire.

The real captures (``FAKE_AGY_REPLAY``) and the fake's 1.3.x scenarios go through the real
bridge; every message is validated against the official ACP schema. Each test checks what
a user sees: card statuses, text, notices, plan entries, window sizes, the prompt's answer
(contract.md §11).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from fake_agy._fake_scenarios import PARTIAL_ANSWER, RETRIED_QUOTA_ERROR
from tests.acp_wire import Harness, RawClient, WireValidator, stop_reason

from ..conftest import SAMPLES

pytestmark = pytest.mark.integration

TIMEOUT_S = 30


async def prompt(
    client: RawClient, session_id: str, text: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    mark = client.mark()
    response = await client.response(await client.start_prompt(session_id, text))
    return response, client.updates(session_id, since=mark)


def text_of(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"].get("text", "") for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def card_statuses(updates: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Every status each tool card was shown with, in order."""
    statuses: dict[str, list[str]] = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update") and update.get("status"):
            statuses.setdefault(update["toolCallId"], []).append(update["status"])
    return statuses


def capture(name: str) -> str:
    return str(SAMPLES / name)


Turn = tuple[dict[str, Any], list[dict[str, Any]]]


async def run_turns(
    harness: Harness,
    texts: list[str],
    scenario: str = "echo",
    *,
    choice: str | None = None,
    **env: str,
) -> tuple[list[Turn], RawClient]:
    """Prompts ``texts`` in one new session of a bridge (``env``: its environment,
    ``choice``: the answer to permission questions); every message schema-valid and
    nothing left running."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(scenario, validator=validator, **env) as client:
            if choice is not None:
                client.permission_choice = choice
            await client.initialize()
            session_id = await client.new_session()
            turns = [await prompt(client, session_id, text) for text in texts]
    await harness.assert_no_leftovers()
    assert validator.problems == []
    return turns, client


async def test_blocked_command_is_failed_on_its_card(harness: Harness) -> None:
    """1.3.1 soft-deny: the blocked run_command never shows ✓; its card fails with the
    permission and the allow rule; the notice names the card; the turn ends end_turn."""
    replay = capture("untether-1.3.1-tools-soft-denied.ndjson")
    [(response, updates)], _ = await run_turns(harness, ["run it"], FAKE_AGY_REPLAY=replay)
    assert stop_reason(response) == "end_turn"
    assert response["result"]["_meta"]["deniedPermissions"] == ["command"]
    cards = {u["toolCallId"]: u for u in updates if u["sessionUpdate"] == "tool_call"}
    [blocked_id] = [i for i, card in cards.items() if card["title"] == "Run echo probe-shell"]
    [read_id] = [i for i in cards if i != blocked_id]
    statuses = card_statuses(updates)
    assert statuses[blocked_id] == ["in_progress", "failed"]
    assert statuses[read_id] == ["in_progress", "completed"]
    [failed] = [u for u in updates if u.get("status") == "failed"]
    card_text = failed["content"][0]["content"]["text"]
    assert '"command" permission' in card_text and "`command(echo)`" in card_text
    assert failed["rawOutput"]["error"]["allowRule"] == "command(echo)"
    shown = text_of(updates)
    assert shown.startswith("⚠️ agy auto-denied") and "Blocked: `Run echo probe-shell`." in shown
    # (The replay bypasses the bridge's hook, so the read is reported as ungated; the
    # blocked command did not run, so it is not.)
    assert "`Run echo probe-shell` without going through" not in shown


@pytest.mark.parametrize("scenario", ["soft-deny", "permission-check-failed"])
async def test_safe_mode_denial_on_the_card_and_a_declined_retry(
    harness: Harness, scenario: str
) -> None:
    """Safe mode, agy's own check denies the command (1.3.x and 1.2.x shapes): the card
    fails with the allow rule (1.2.x: CANCELED is agy's denial, not a cancel); "Don't
    allow" on the retry question is a choice, so that card completes, not fails."""
    [(response, updates)], client = await run_turns(
        harness, ["run it"], scenario, choice="reject", AGYBRIDGE_MODE="safe"
    )
    assert stop_reason(response) == "end_turn"
    [asked] = client.permission_requests
    statuses = card_statuses(updates)
    allow_id = asked["params"]["toolCall"]["toolCallId"]
    assert statuses[allow_id][-1] == "completed"
    [(command_id, command_statuses)] = [(i, s) for i, s in statuses.items() if i != allow_id]
    assert command_statuses == ["in_progress", "failed"]
    [failed] = [
        u for u in updates if u.get("toolCallId") == command_id and u.get("status") == "failed"
    ]
    card_text = failed["content"][0]["content"]["text"]
    assert "`command(echo)`" in card_text
    if scenario == "permission-check-failed":
        assert card_text.startswith("permission check failed for command")
    assert "Blocked: `Run echo hello_headless_demo`." in text_of(updates)


async def test_answer_inside_an_error_result_is_partial(harness: Harness) -> None:
    """The answer, then a warning naming the 429 that came after it, never "could not
    run this turn"; end_turn with _meta.partial and agy's error details."""
    [(response, updates)], _ = await run_turns(harness, ["what is 2+2"], "partial-error")
    assert stop_reason(response) == "end_turn"
    shown = text_of(updates)
    assert shown.startswith(f"{PARTIAL_ANSWER}\n\n⚠️ agy stopped after this answer: ")
    assert RETRIED_QUOTA_ERROR in shown and "could not run this turn" not in shown
    assert "\n\n\n" not in shown
    meta = response["result"]["_meta"]
    assert meta["partial"] is True
    assert meta["agyError"]["error"] == RETRIED_QUOTA_ERROR


async def test_structured_answer_is_the_clean_object(harness: Harness) -> None:
    """1.3.1 --json-schema: the fenced clean object, never agy's JSON line or its
    internal keys, in any update."""
    replay = capture("untether-1.3.1-json-schema-finish.ndjson")
    [(response, updates)], _ = await run_turns(harness, ["greet"], FAKE_AGY_REPLAY=replay)
    structured = {"answer": "Hello!\n\n1, 2, 3.", "count": 3}
    assert response["result"]["_meta"]["structuredOutput"] == structured
    shown = text_of(updates)
    assert shown == "```json\n" + json.dumps(structured, indent=2) + "\n```"
    assert "toolAction" not in json.dumps(updates) and "toolSummary" not in json.dumps(updates)


async def test_window_from_init_model_is_the_same_on_every_turn(harness: Harness) -> None:
    """1.3.2 init.model, read only once the first prompt is sent (lazy init): turn 1's
    window is the model's, equal to turn 2's, in the meter and in _meta."""
    replay = capture("untether-1.3.2-init-model-ok.ndjson")
    turns, _ = await run_turns(
        harness, ["one", "two"], FAKE_AGY_REPLAY=replay, FAKE_AGY_LAZY_INIT="1"
    )
    sizes = [
        [u["size"] for u in updates if u["sessionUpdate"] == "usage_update"] for _, updates in turns
    ]
    assert sizes[0] and sizes[1]
    assert set(sizes[0]) == set(sizes[1]) == {1_048_576}
    assert [r["result"]["_meta"]["context"]["size"] for r, _ in turns] == [1_048_576] * 2


async def test_subagent_in_progress_until_its_return(harness: Harness) -> None:
    """1.3.1 subagent: the plan entry (role, initial prompt) is in progress through the
    spawning step's DONE and the parent's waiting text, completed at the return."""
    replay = capture("untether-1.3.1-subagent.ndjson")
    [(response, updates)], _ = await run_turns(harness, ["ask"], FAKE_AGY_REPLAY=replay)
    assert stop_reason(response) == "end_turn"
    entry = "Subagent Secret Reader: Read notes.txt and reply with the secret word only."
    plans = [(i, u["entries"]) for i, u in enumerate(updates) if u["sessionUpdate"] == "plan"]
    assert [[(e["content"], e["status"]) for e in entries] for _, entries in plans] == [
        [(entry, "in_progress")],
        [(entry, "completed")],
    ]
    chunks = [
        (i, u["content"].get("text", ""))
        for i, u in enumerate(updates)
        if u["sessionUpdate"] == "agent_message_chunk"
    ]
    waiting = max(i for i, text in chunks if "Waiting for its response." in text)
    answer = next(i for i, text in chunks if "SUB SAID banana" in text)
    assert waiting < plans[1][0] < answer


async def test_signed_out_is_a_sign_in_error(harness: Harness) -> None:
    """1.3.2 signed out (only the ERROR result): the prompt fails with the sign-in
    error (-32000, auth required), naming agy's words."""
    replay = capture("untether-1.3.2-signed-out-result.ndjson")
    [(response, _)], _ = await run_turns(harness, ["hello"], FAKE_AGY_REPLAY=replay)
    error = response["error"]
    assert error["code"] == -32000
    assert "not signed in" in error["message"]
    assert "authentication failed or timed out" in json.dumps(error.get("data"))
