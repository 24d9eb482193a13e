"""The question desk (session/questions.py): agy's ask_question -> the client -> the
hook's decision, including a question nobody answers (the broker's deadline)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agybridge import causes
from agybridge.acp import models
from agybridge.permissions import Decision, HookRequest, HookRoot
from agybridge.permissions.broker import TIMEOUT_REASON
from agybridge.session.deps import Phrase, TurnWork
from agybridge.session.questions import QuestionDesk
from agybridge.translate.card_text import text_content
from agybridge.translate.mapper import TurnMapper

from ..permissions.test_permissions_broker import ask, request_line, serving

ARGS = {"questions": [{"question": "Colour?", "options": ["red", "blue"]}]}


class Turn:
    """A running turn's mapper and every update the desk had sent."""

    def __init__(self) -> None:
        self.mapper = TurnMapper(message_id="m")
        self.updates: list[models.SessionUpdate] = []

    async def in_turn(self, work: TurnWork) -> bool:
        self.updates += work(self.mapper)
        return True

    def statuses(self) -> list[str | None]:
        return [getattr(u, "status", None) for u in self.updates]


@pytest.fixture
def root() -> Any:
    made = HookRoot.create(hook_timeout_s=30)
    yield made
    made.remove()


async def test_unanswered_question_times_out_like_a_permission(root: HookRoot) -> None:
    """The client never answers: the broker's deadline cancels the question and the
    hook gets its deny; the card, still pending, is failed when the turn ends."""
    turn = Turn()
    asked = trio.Event()

    async def never(session_id: str, phrase: Phrase) -> tuple[str, Any] | None:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    desk = QuestionDesk("s1", never, turn.in_turn)

    async def decide(request: HookRequest) -> Decision:
        return await desk.ask(request, request.step_idx or 0)

    payload = {"toolCall": {"name": "ask_question", "args": ARGS}, "stepIdx": 4}
    with trio.fail_after(10):
        async with serving(root, decide, wait_s=0.2):
            reply = await ask(root, request_line(root.token, payload))
    assert asked.is_set()
    assert reply == {"decision": "deny", "reason": TIMEOUT_REASON}
    assert turn.statuses() == ["pending"]
    [failed] = turn.mapper.tools.fail_unfinished("the turn ended")
    assert getattr(failed, "status", None) == "failed"
    assert causes.cause_of(getattr(failed, "meta", None)) == "question_unanswered"


async def test_a_failing_client_is_no_answer() -> None:
    """The client's answer is an error (or it left): agy is told nobody answered."""
    turn = Turn()

    async def broken(session_id: str, phrase: Phrase) -> tuple[str, Any] | None:
        raise RuntimeError("the client went away")

    desk = QuestionDesk("s1", broken, turn.in_turn)
    decision = await desk.ask(HookRequest("ask_question", ARGS, step_idx=2), 2)
    assert decision == Decision.deny('the user did not answer "Colour?" in the editor')
    assert turn.statuses() == ["pending", "completed"]
    meta = getattr(turn.updates[-1], "meta", None)
    assert meta == {
        "agybridge": {
            "cause": "question_failed",
            "question": "Colour?",
            "detail": "the client went away",
        }
    }
    told = causes.cause("question_failed").render(**meta["agybridge"])
    assert told == "agy's question could not be asked in the editor: the client went away"


@pytest.mark.parametrize(
    "outcome",
    [{"outcome": "cancelled"}, {"outcome": "selected", "optionId": "skip"}],
)
async def test_a_question_left_unanswered_names_its_cause(outcome: dict[str, Any]) -> None:
    """The user cancels the question or picks "Don't answer": the card shows no
    answer and names question_unanswered, whose message names the question."""
    turn = Turn()

    async def unanswered(session_id: str, phrase: Phrase) -> tuple[str, Any] | None:
        return "session/request_permission", {"outcome": outcome}

    desk = QuestionDesk("s1", unanswered, turn.in_turn)
    await desk.ask(HookRequest("ask_question", ARGS, step_idx=5), 5)
    card = turn.updates[-1]
    assert getattr(card, "content", None) == [text_content("Colour?\n→ (no answer)")]
    meta = getattr(card, "meta", None)
    assert causes.cause_of(meta) == "question_unanswered"
    assert causes.cause("question_unanswered").render(**meta["agybridge"]) == (
        "agy's question was not answered: Colour?"
    )


async def test_a_call_without_questions_is_left_to_agy() -> None:
    """Nothing a person could answer: allowed, agy settles it as headless agy does."""
    turn = Turn()

    async def unused(session_id: str, phrase: Phrase) -> tuple[str, Any] | None:
        raise AssertionError("nothing to ask")

    desk = QuestionDesk("s1", unused, turn.in_turn)
    assert await desk.ask(HookRequest("ask_question", {"questions": []}, step_idx=1), 1) == (
        Decision.allow()
    )
    assert turn.updates == []


async def test_the_phrase_follows_the_clients_capabilities() -> None:
    """One phrase, two clients: a form for the one with elicitation, a permission
    question for the other."""
    turn = Turn()
    phrased: list[tuple[str, Any] | None] = []

    async def record(session_id: str, phrase: Phrase) -> tuple[str, Any] | None:
        forms = models.ClientCapabilities(elicitation={"form": {}})
        phrased.extend([phrase(forms), phrase(models.ClientCapabilities())])
        return "session/request_permission", {
            "outcome": {"outcome": "selected", "optionId": "option1"}
        }

    desk = QuestionDesk("s1", record, turn.in_turn)
    decision = await desk.ask(HookRequest("ask_question", ARGS, step_idx=3), 3)
    assert decision.reason.endswith('"Colour?" -> red')
    [(form_method, _), (permission_method, permission)] = [p for p in phrased if p]
    assert form_method == "elicitation/create"
    assert permission_method == "session/request_permission"
    assert [o["name"] for o in permission["options"]] == ["red", "blue", "Don't answer"]
