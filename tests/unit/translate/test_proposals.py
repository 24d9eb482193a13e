"""Edit proposals from agy's full hook arguments, and the gate's pure helpers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agybridge.acp import models
from agybridge.session.gate import _chosen_option
from agybridge.session.hooks_check import _check_hooks_listing
from agybridge.translate.proposals import proposed_diff

F = "/w/app.py"
TEXT = "a = 1\nb = 2\nb = 2\n"

# (tool, args, current text, expected diff or None)
CASES: list[tuple[str, dict[str, Any], str | None, models.DiffContent | None]] = [
    (
        "write_to_file",
        {"TargetFile": F, "CodeContent": "new\n"},
        None,
        models.DiffContent(path=F, old_text=None, new_text="new\n"),
    ),
    (
        "write_to_file",
        {"TargetFile": F, "CodeContent": "new\n"},
        TEXT,
        models.DiffContent(path=F, old_text=TEXT, new_text="new\n"),
    ),
    (
        "replace_file_content",
        {"TargetFile": F, "TargetContent": "b = 2", "ReplacementContent": "b = 3"},
        TEXT,
        models.DiffContent(path=F, old_text=TEXT, new_text="a = 1\nb = 3\nb = 2\n"),
    ),
    (
        "replace_file_content",
        {
            "TargetFile": F,
            "TargetContent": "b = 2",
            "ReplacementContent": "b = 3",
            "AllowMultiple": True,
        },
        TEXT,
        models.DiffContent(path=F, old_text=TEXT, new_text="a = 1\nb = 3\nb = 3\n"),
    ),
    # Target text not found: the replaced snippet alone.
    (
        "replace_file_content",
        {"TargetFile": F, "TargetContent": "zzz", "ReplacementContent": "yyy"},
        TEXT,
        models.DiffContent(path=F, old_text="zzz", new_text="yyy"),
    ),
    (
        "multi_replace_file_content",
        {
            "TargetFile": F,
            "ReplacementChunks": json.dumps(
                [
                    {"TargetContent": "a = 1", "ReplacementContent": "a = 0"},
                    {
                        "TargetContent": "b = 2",
                        "ReplacementContent": "b = 9",
                        "AllowMultiple": True,
                    },
                ]
            ),
        },
        TEXT,
        models.DiffContent(path=F, old_text=TEXT, new_text="a = 0\nb = 9\nb = 9\n"),
    ),
    (
        "multi_replace_file_content",
        {
            "TargetFile": F,
            "ReplacementChunks": [{"TargetContent": "nope", "ReplacementContent": "x"}],
        },
        TEXT,
        None,
    ),
    ("write_to_file", {"TargetFile": F}, TEXT, None),  # no content: nothing to show
    ("run_command", {"CommandLine": "ls"}, None, None),
]


@pytest.mark.parametrize(("tool", "args", "current", "expected"), CASES)
def test_proposed_diff(
    tool: str, args: dict[str, Any], current: str | None, expected: models.DiffContent | None
) -> None:
    """Edits become whole-file diffs when the target text is found."""
    assert proposed_diff(tool, args, current) == expected


@pytest.mark.parametrize(
    ("answer", "option"),
    [
        ({"outcome": {"outcome": "selected", "optionId": "allow_once"}}, "allow_once"),
        ({"outcome": {"outcome": "cancelled"}}, None),
        (None, None),
        ({"outcome": "selected"}, None),
        ({"outcome": {"outcome": "selected", "optionId": 3}}, None),
    ],
)
def test_chosen_option(answer: Any, option: str | None) -> None:
    """Only a well-formed selection counts; anything else is no answer (deny)."""
    assert _chosen_option(answer) == option


def envelope(hooks: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {"status": "SUCCESS", "command": {"name": "hooks", "data": {"hooks": hooks}}}
    ).encode()


def test_hooks_listing_check() -> None:
    """The gate counts as loaded only if agy lists it, enabled, from our file."""
    ours = "/run/agyb-x/hook/.agents/hooks.json"
    good = {"name": "agybridge-gate", "enabled": True, "source": ours}
    assert _check_hooks_listing(envelope([good]), ours) is None
    assert _check_hooks_listing(envelope([{**good, "enabled": False}]), ours) is not None
    assert _check_hooks_listing(envelope([{**good, "source": "/elsewhere"}]), ours) is not None
    assert _check_hooks_listing(envelope([]), ours) is not None
    assert _check_hooks_listing(b"not json", ours) == "agy -p /hooks printed no JSON"
