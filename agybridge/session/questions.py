"""agy's questions (its ``ask_question`` tool), put to the editor by the gate.

The hook helper brings the call before it runs; :meth:`QuestionDesk.ask`
announces a pending card ("agy asks: ..."), asks the client attached to the
session — a form ``elicitation/create`` when that client advertises
``elicitation.form``, else one ``session/request_permission`` per question
with the answers as its options (a question without options cannot be put
that way and stays unanswered) — closes the card with the answer, and returns
the hook's decision: a deny whose reason is the answer, the one way a hook can
hand agy text (translate/questions.py). A question nobody answers is cancelled
by the broker's deadline like a permission question (the hook then gets the
broker's "did not answer in time"); a card still pending then is failed when
the turn ends.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import trio

from .. import causes
from ..acp import codec, models
from ..permissions import Decision, HookRequest
from ..translate.mapper import TurnMapper
from ..translate.questions import (
    QUESTION_TOOL,
    Answer,
    Answers,
    Question,
    answer_from_permission,
    answer_text,
    answers_from_elicitation,
    askable_by_permission,
    chosen_option,
    elicitation_params,
    parse_questions,
    permission_options,
    reason_for_agy,
    unanswered_meta,
)
from .deps import AskQuestion, InTurn

logger = logging.getLogger(__name__)

ELICIT = "elicitation/create"
PERMISSION = "session/request_permission"
NO_TURN_REASON = "no turn is running"


class QuestionDesk:
    """One session's way of putting agy's questions to its client."""

    def __init__(self, session_id: str, ask_question: AskQuestion, in_turn: InTurn) -> None:
        self._session_id = session_id
        self._ask_question = ask_question
        self._in_turn = in_turn

    async def ask(self, request: HookRequest, step: int) -> Decision:
        """The hook's answer to one ``ask_question`` call (see the module docstring)."""
        questions = parse_questions(request.args)
        if not questions:  # nothing a person could answer: agy settles it, as headless
            logger.info("session %s: ask_question without a question", self._session_id)
            return Decision.allow()
        announced: list[tuple[str, models.ToolCallUpdate]] = []

        def announce(mapper: TurnMapper) -> list[models.SessionUpdate]:
            call_id, updates, tool_call = mapper.tools.announce_pending(
                step, QUESTION_TOOL, dict(request.args), None
            )
            announced.append((call_id, tool_call))
            return updates

        if not await self._in_turn(announce):
            return Decision.deny(NO_TURN_REASON)
        call_id, tool_call = announced[0]
        asked = "; ".join(q.text for q in questions)
        cause: dict[str, Any] | None
        try:
            answers = await self._answers(call_id, tool_call, questions)
        except trio.Cancelled:
            raise
        except Exception as exc:  # the editor failed or went away: nothing answered
            logger.warning("session %s: question to the editor failed: %s", self._session_id, exc)
            answers = Answers((None,) * len(questions))
            cause = causes.meta("question_failed", question=asked, detail=str(exc))
        else:
            unanswered = not answers.declined and all(a is None for a in answers.values)
            cause = unanswered_meta(asked) if unanswered else None
        shown = answer_text(questions, answers)
        await self._in_turn(lambda mapper: mapper.tools.finish_question(step, shown, cause))
        reason = reason_for_agy(questions, answers)
        logger.info("session %s: agy's question answered: %s", self._session_id, reason)
        return Decision.deny(reason)

    async def _answers(
        self, call_id: str, tool_call: models.ToolCallUpdate, questions: Sequence[Question]
    ) -> Answers:
        values: list[Answer] = []
        for question in questions:

            def phrase(
                capabilities: models.ClientCapabilities, question: Question = question
            ) -> tuple[str, Any] | None:
                if capabilities.elicits_forms:
                    return ELICIT, elicitation_params(self._session_id, call_id, questions)
                if not askable_by_permission(question):
                    return None
                return PERMISSION, {
                    "sessionId": self._session_id,
                    "toolCall": {**codec.unstructure(tool_call), "title": question.text},
                    "options": permission_options(question),
                }

            asked = await self._ask_question(self._session_id, phrase)
            if asked is not None and asked[0] == ELICIT:
                # One form holds every question (asked of the first question's client).
                return answers_from_elicitation(questions, asked[1])
            option = chosen_option(asked[1]) if asked is not None else None
            values.append(answer_from_permission(question, option))
            if asked is not None and option is None:
                break  # the client cancelled the question: ask it nothing more
        values += [None] * (len(questions) - len(values))
        return Answers(tuple(values))
