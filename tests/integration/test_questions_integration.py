"""agy's questions reach the editor: the fake agy's ``ask_question`` -> the bridge's
PreToolUse hook -> ``elicitation/create`` (a client that advertises form elicitation)
or ``session/request_permission`` with the answers as options (one that does not) ->
the answer back to agy as the hook's deny reason, which the fake's model restates.

Every wire message is schema-validated and nothing may be left running.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from fake_agy._fake_scenarios import QUESTION, QUESTION_OPTIONS, SECOND_QUESTION

from ..acp_wire import Harness, RawClient, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
FORMS = {"form": {}}
DENIED = "tool call denied by pre-tool hook: "
ANSWERED = "answered by the user in the editor (this is the answer, not a refusal): "


async def ask(client: RawClient, prompt: str = "[fake-agy:ask-question]", **caps: Any) -> str:
    """Initialize (with ``caps``), open a session and run ``prompt``; the session id."""
    await client.initialize(**caps)
    session_id = await client.new_session()
    response = await client.response(await client.start_prompt(session_id, prompt))
    assert response["result"]["stopReason"] == "end_turn", response
    return session_id


def hook_reasons(harness: Harness) -> list[tuple[str, str, str | None]]:
    """(tool, verdict, reason) of every hook call the fake agy made."""
    return [
        (e["hook"]["tool"], e["hook"]["verdict"], e["hook"].get("reason"))
        for e in harness.launches()
        if "hook" in e
    ]


def question_card(client: RawClient, session_id: str) -> list[dict[str, Any]]:
    """The updates of the question's card, in order."""
    updates = client.updates(session_id)
    [call_id] = {
        u["toolCallId"] for u in updates if str(u.get("title", "")).startswith("agy asks: ")
    }
    return [u for u in updates if u.get("toolCallId") == call_id]


async def test_question_as_an_elicitation(harness: Harness) -> None:
    """A client with form elicitation gets one elicitation/create, tied to the question's
    card, with the options as an enum; its answer reaches agy, and the card shows it."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            client.elicitation_result = {"action": "accept", "content": {"answer1": "blue"}}
            session_id = await ask(client, elicitation=FORMS)
            assert client.permission_requests == []
            [request] = client.elicitation_requests
            params = request["params"]
            assert params["mode"] == "form" and params["message"] == QUESTION
            field = params["requestedSchema"]["properties"]["answer1"]
            assert field == {"type": "string", "title": QUESTION, "enum": list(QUESTION_OPTIONS)}
            card = question_card(client, session_id)
            assert card[0]["status"] == "pending" and card[0]["toolCallId"] == params["toolCallId"]
            assert card[-1]["status"] == "completed"
            assert card[-1]["content"][0]["content"]["text"] == f"{QUESTION}\n→ blue"
            told = f'{DENIED}{ANSWERED}"{QUESTION}" -> blue'
            assert told in client.message_text(session_id)
        assert hook_reasons(harness) == [
            ("ask_question", "deny", f'{ANSWERED}"{QUESTION}" -> blue')
        ]
        await harness.assert_no_leftovers()
    assert validator.problems == []


@pytest.mark.parametrize("mode", ["ask", "safe", "autonomous"])
async def test_question_as_a_permission(harness: Harness, mode: str) -> None:
    """Without the capability: session/request_permission whose options are the answers
    (and one not to answer); the chosen answer reaches agy. Not a permission: asked in
    the ungated modes too, where the hook only observes."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, AGYBRIDGE_MODE=mode) as client:
            client.permission_choice = "option2"
            session_id = await ask(client)
            assert client.elicitation_requests == []
            [request] = client.permission_requests
            options = request["params"]["options"]
            assert [(o["name"], o["kind"]) for o in options] == [
                ("red", "allow_once"),
                ("green", "allow_once"),
                ("blue", "allow_once"),
                ("Don't answer", "reject_once"),
            ]
            assert request["params"]["toolCall"]["title"] == QUESTION
            assert f'"{QUESTION}" -> green' in client.message_text(session_id)
            assert question_card(client, session_id)[-1]["status"] == "completed"
        [(_, verdict, reason)] = hook_reasons(harness)
        assert verdict == "deny" and reason == f'{ANSWERED}"{QUESTION}" -> green'
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_two_questions_multi_select_by_form(harness: Harness) -> None:
    """Two questions, the first multi-select: one form with an array field and a string
    field; both answers reach agy in order."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            client.elicitation_result = {
                "action": "accept",
                "content": {"answer1": ["red", "blue"], "answer2": "dark"},
            }
            session_id = await ask(client, "[fake-agy:ask-question] multi two", elicitation=FORMS)
            [request] = client.elicitation_requests
            properties = request["params"]["requestedSchema"]["properties"]
            assert properties["answer1"]["type"] == "array"
            assert properties["answer2"]["title"] == SECOND_QUESTION
            text = client.message_text(session_id)
            assert f'"{QUESTION}" -> red, blue; "{SECOND_QUESTION}" -> dark' in text
        await harness.assert_no_leftovers()
    assert validator.problems == []


@pytest.mark.parametrize(
    ("result", "told"),
    [
        ({"action": "decline"}, "the user declined to answer"),
        ({"action": "cancel"}, "the user did not answer"),
    ],
)
async def test_declined_or_cancelled_question(
    harness: Harness, result: dict[str, Any], told: str
) -> None:
    """A declined or cancelled form: agy is told so (not left to guess an answer)."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            client.elicitation_result = result
            session_id = await ask(client, elicitation=FORMS)
            assert f'{DENIED}{told} "{QUESTION}"' in client.message_text(session_id)
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_free_text_question_without_forms_is_left_to_agy(harness: Harness) -> None:
    """A question without options cannot be a permission question: nothing is sent, and
    agy is told the user did not answer."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            session_id = await ask(client, "[fake-agy:ask-question] free")
            assert client.permission_requests == [] and client.elicitation_requests == []
            assert f'{DENIED}the user did not answer "{QUESTION}"' in client.message_text(
                session_id
            )
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_cancel_while_a_question_is_open(harness: Harness) -> None:
    """session/cancel with the form open: the turn answers cancelled, the hook is denied
    at once (like a pending permission), nothing is left running."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            client.elicitation_result = None  # the test answers
            await client.initialize(elicitation=FORMS)
            session_id = await client.new_session()
            request_id = await client.start_prompt(session_id, "[fake-agy:ask-question]")
            await client.wait_for(lambda: client.elicitation_requests or None, "the form")
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.response(request_id)
            assert response["result"]["stopReason"] == "cancelled"
            await client.answer(client.elicitation_requests[0], {"action": "cancel"})
        log = (harness.tmp_path / "agybridge.log").read_text()
        assert "denied 1 pending permission request(s): the user cancelled the turn" in log
        await harness.assert_no_leftovers()
    assert validator.problems == []
