"""agy's questions to the user (its ``ask_question`` tool) as ACP questions, and
the user's answer as agy reads it (pure).

agy's arguments (hooks-and-tools.md §B2): ``questions[{question, options,
is_multi_select}]``. Headless, agy settles its own questions: with no hook the
call shows only as a ``step_type:"unknown"`` step and the model carries on as
if the user had skipped it (samples/untether-1.3.1-ask-question-nohook). The
bridge sees the call through its PreToolUse hook before it runs, and asks the
editor: with ``elicitation/create`` (a form, one field per question) when the
client advertises ``elicitation.form``, else with one
``session/request_permission`` per question whose options are the answers.

How the answer reaches agy: a PreToolUse hook cannot hand a tool a result; it
can only allow (then agy settles the question itself, as without a hook) or
deny with a ``reason``, which the model reads as the tool's error
``tool call denied by pre-tool hook: <reason>`` (§A4, §A6). So the answer is
the deny reason, worded so the model takes it as the user's answer, not as a
refusal: :func:`reason_for_agy`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .. import causes

QUESTION_TOOL = "ask_question"
#: Bounds on what is put before the user (a model's arguments are not trusted).
MAX_QUESTIONS = 10
MAX_OPTIONS = 20
MAX_TEXT = 500
#: The permission fallback's option for "no answer".
SKIP_OPTION = "skip"
#: What agy's model reads before the answers: they are answers, not a denial.
ANSWERED_PREFIX = "answered by the user in the editor (this is the answer, not a refusal):"


@attrs.frozen
class Question:
    text: str
    options: tuple[str, ...] = ()
    multi: bool = False


#: One answer per question: the chosen option(s) or typed text; None: unanswered.
Answer = str | tuple[str, ...] | None


@attrs.frozen
class Answers:
    values: tuple[Answer, ...]
    #: The user turned the question down (elicitation ``decline``).
    declined: bool = False


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def parse_questions(args: Mapping[str, Any]) -> list[Question]:
    """The questions in ``ask_question``'s arguments; malformed entries are skipped."""
    raw = args.get("questions")
    if isinstance(raw, str):  # models send lists as JSON strings too (§B4, ReplacementChunks)
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    if not isinstance(raw, list):
        return []
    questions: list[Question] = []
    for entry in raw[:MAX_QUESTIONS]:
        if not isinstance(entry, dict) or not isinstance(entry.get("question"), str):
            continue
        text = _clip(entry["question"])
        options = entry.get("options")
        choices: list[str] = []
        for option in options if isinstance(options, list) else []:
            if isinstance(option, str) and option.strip() and _clip(option) not in choices:
                choices.append(_clip(option))
        if text:
            multi = entry.get("is_multi_select") is True
            questions.append(Question(text, tuple(choices[:MAX_OPTIONS]), multi))
    return questions


def card_title(questions: Sequence[Question]) -> str:
    first = questions[0].text.splitlines()[0] if questions else "a question"
    more = f" (+{len(questions) - 1} more)" if len(questions) > 1 else ""
    return f"agy asks: {first}{more}"


def _field(index: int) -> str:
    return f"answer{index + 1}"


def elicitation_params(
    session_id: str, call_id: str, questions: Sequence[Question]
) -> dict[str, Any]:
    """``elicitation/create`` params: a form with one field per question."""
    properties: dict[str, Any] = {}
    for index, question in enumerate(questions):
        field: dict[str, Any] = {"type": "string", "title": question.text}
        if question.options and question.multi:
            field = {
                "type": "array",
                "title": question.text,
                "items": {"type": "string", "enum": list(question.options)},
            }
        elif question.options:
            field["enum"] = list(question.options)
        properties[_field(index)] = field
    message = questions[0].text if len(questions) == 1 else f"agy asks {len(questions)} questions"
    return {
        "sessionId": session_id,
        "toolCallId": call_id,
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": properties,
            "required": [_field(i) for i in range(len(questions))],
        },
    }


def _checked(question: Question, value: Any) -> Answer:
    """A field's value if it answers ``question`` (an offered option when it has
    options); None otherwise."""
    if question.multi and question.options:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return None
        picked = tuple(v for v in question.options if v in value)
        return picked if picked and len(picked) == len(set(value)) else None
    if not isinstance(value, str) or not value.strip():
        return None
    if question.options and value not in question.options:
        return None
    return _clip(value)


def answers_from_elicitation(questions: Sequence[Question], result: Any) -> Answers:
    """The answers in an ``elicitation/create`` result (``accept`` with content;
    ``decline``; anything else, ``cancel`` included, answers nothing)."""
    nothing = (None,) * len(questions)
    action = result.get("action") if isinstance(result, dict) else None
    if action == "decline":
        return Answers(nothing, declined=True)
    content = result.get("content") if isinstance(result, dict) else None
    if action != "accept" or not isinstance(content, dict):
        return Answers(nothing)
    return Answers(tuple(_checked(q, content.get(_field(i))) for i, q in enumerate(questions)))


def askable_by_permission(question: Question) -> bool:
    """A permission question can only offer choices: a free-text question cannot
    be put that way."""
    return bool(question.options)


def permission_options(question: Question) -> list[dict[str, str]]:
    """The answers as permission options, and one to leave it unanswered."""
    options = [
        {"optionId": f"option{index + 1}", "name": option, "kind": "allow_once"}
        for index, option in enumerate(question.options)
    ]
    options.append({"optionId": SKIP_OPTION, "name": "Don't answer", "kind": "reject_once"})
    return options


def chosen_option(answer: Any) -> str | None:
    """The optionId a ``session/request_permission`` answer selected; None for
    ``cancelled`` (or garbage)."""
    if not isinstance(answer, dict):
        return None
    outcome = answer.get("outcome")
    if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
        option = outcome.get("optionId")
        return option if isinstance(option, str) else None
    return None


def answer_from_permission(question: Question, option_id: str | None) -> Answer:
    """The answer the chosen permission option stands for (one option even for a
    multi-select question: a permission question picks one)."""
    for index, option in enumerate(question.options):
        if option_id == f"option{index + 1}":
            return (option,) if question.multi else option
    return None


def _shown(answer: Answer) -> str:
    if answer is None:
        return "(no answer)"
    return ", ".join(answer) if isinstance(answer, tuple) else answer


def unanswered_meta(question: str) -> dict[str, Any]:
    """The ``_meta`` of a question card no answer came for (its cause)."""
    return causes.meta("question_unanswered", question=question)


def reason_for_agy(questions: Sequence[Question], answers: Answers) -> str:
    """The hook's deny reason: what agy's model reads as the tool's result."""
    asked = "; ".join(f'"{q.text}"' for q in questions)
    if answers.declined:
        return f"the user declined to answer {asked} in the editor; do not ask again"
    if all(a is None for a in answers.values):
        return f"the user did not answer {asked} in the editor"
    pairs = "; ".join(
        f'"{q.text}" -> {_shown(a)}' for q, a in zip(questions, answers.values, strict=True)
    )
    return f"{ANSWERED_PREFIX} {pairs}"


def answer_text(questions: Sequence[Question], answers: Answers) -> str:
    """The question card's content once answered (what the user sees)."""
    if answers.declined:
        return "You declined to answer."
    lines = [f"{q.text}\n→ {_shown(a)}" for q, a in zip(questions, answers.values, strict=True)]
    return "\n\n".join(lines)
