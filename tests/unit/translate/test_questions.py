"""agy's ask_question arguments <-> ACP questions and answers (translate/questions.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agybridge.translate.questions import (
    ANSWERED_PREFIX,
    MAX_OPTIONS,
    MAX_QUESTIONS,
    Answers,
    Question,
    answer_from_permission,
    answer_text,
    answers_from_elicitation,
    card_title,
    elicitation_params,
    parse_questions,
    permission_options,
    reason_for_agy,
)

COLOUR = Question("Colour?", ("red", "blue"))
TOPPINGS = Question("Toppings?", ("ham", "egg"), multi=True)
NAME = Question("Name?")


def test_parse_questions_as_agy_sends_them() -> None:
    args = {
        "questions": [
            {"question": "Colour?", "options": ["red", "blue"], "is_multi_select": False},
            {"question": "Toppings?", "options": ["ham", "egg"], "is_multi_select": True},
            {"question": "Name?"},
        ]
    }
    assert parse_questions(args) == [COLOUR, TOPPINGS, NAME]


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"questions": "not json"},
        {"questions": {"question": "x"}},
        {"questions": [None, 3, {"question": 4}, {"question": "  "}]},
    ],
)
def test_malformed_questions_are_skipped(args: dict[str, Any]) -> None:
    assert parse_questions(args) == []


def test_parse_questions_leniently_and_bounded() -> None:
    """A JSON-string list is read; options that are not text or repeat are dropped;
    counts are capped."""
    assert parse_questions({"questions": '[{"question": "Q", "options": ["a", "a", 1, ""]}]'}) == [
        Question("Q", ("a",))
    ]
    many = {
        "questions": [
            {"question": f"q{i}", "options": [f"o{j}" for j in range(50)]} for i in range(30)
        ]
    }
    parsed = parse_questions(many)
    assert len(parsed) == MAX_QUESTIONS and len(parsed[0].options) == MAX_OPTIONS


def test_card_title() -> None:
    assert card_title([COLOUR]) == "agy asks: Colour?"
    assert card_title([COLOUR, NAME]) == "agy asks: Colour? (+1 more)"


def test_elicitation_form_has_one_field_per_question() -> None:
    params = elicitation_params("s1", "c1", [COLOUR, TOPPINGS, NAME])
    assert params["sessionId"] == "s1" and params["toolCallId"] == "c1"
    assert params["message"] == "agy asks 3 questions"
    schema = params["requestedSchema"]
    assert schema["required"] == ["answer1", "answer2", "answer3"]
    assert schema["properties"] == {
        "answer1": {"type": "string", "title": "Colour?", "enum": ["red", "blue"]},
        "answer2": {
            "type": "array",
            "title": "Toppings?",
            "items": {"type": "string", "enum": ["ham", "egg"]},
        },
        "answer3": {"type": "string", "title": "Name?"},
    }


def test_elicitation_answers_are_checked_against_the_questions() -> None:
    """An answer that is not one of the options (or of the wrong type) counts as none."""
    questions = [COLOUR, TOPPINGS, NAME]

    def answers(content: Any, action: str = "accept") -> Answers:
        return answers_from_elicitation(questions, {"action": action, "content": content})

    good = {"answer1": "red", "answer2": ["egg", "ham"], "answer3": " Ada "}
    assert answers(good).values == ("red", ("ham", "egg"), "Ada")
    bad = {"answer1": "green", "answer2": ["ham", "bacon"], "answer3": 3}
    assert answers(bad).values == (None, None, None)
    assert answers(good, "decline") == Answers((None,) * 3, declined=True)
    assert answers(good, "cancel") == Answers((None,) * 3)
    assert answers_from_elicitation(questions, "garbage") == Answers((None,) * 3)


def test_permission_options_are_the_answers() -> None:
    options = permission_options(COLOUR)
    assert [(o["optionId"], o["name"], o["kind"]) for o in options] == [
        ("option1", "red", "allow_once"),
        ("option2", "blue", "allow_once"),
        ("skip", "Don't answer", "reject_once"),
    ]
    assert answer_from_permission(COLOUR, "option2") == "blue"
    assert answer_from_permission(TOPPINGS, "option1") == ("ham",)
    assert answer_from_permission(COLOUR, "skip") is None
    assert answer_from_permission(COLOUR, None) is None
    assert answer_from_permission(COLOUR, "option9") is None


def test_what_agy_and_the_user_read() -> None:
    answered = Answers(("blue", ("ham", "egg"), None))
    questions = [COLOUR, TOPPINGS, NAME]
    assert reason_for_agy(questions, answered) == (
        f'{ANSWERED_PREFIX} "Colour?" -> blue; "Toppings?" -> ham, egg; "Name?" -> (no answer)'
    )
    assert answer_text(questions, answered) == (
        "Colour?\n→ blue\n\nToppings?\n→ ham, egg\n\nName?\n→ (no answer)"
    )
    declined = Answers((None,), declined=True)
    assert reason_for_agy([COLOUR], declined) == (
        'the user declined to answer "Colour?" in the editor; do not ask again'
    )
    assert answer_text([COLOUR], declined) == "You declined to answer."
    assert reason_for_agy([COLOUR], Answers((None,))) == (
        'the user did not answer "Colour?" in the editor'
    )
