"""Messages users can act on, from agy's soft-deny notices and errors (contract.md §3.5, §4)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from agybridge.translate import notices

NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def stderr_lines(samples_dir: Path) -> list[str]:
    """The captured stderr lines (comments dropped)."""
    text = (samples_dir / "stderr-lines-observed.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def captured_line(samples_dir: Path, prefix: str) -> str:
    [line] = [line for line in stderr_lines(samples_dir) if line.startswith(prefix)]
    return line


# --- soft deny ------------------------------------------------------------------------


def test_soft_deny_permission_from_the_captured_line(samples_dir: Path) -> None:
    """The exact jetski line names the "command" permission."""
    assert notices.soft_denied_permission(captured_line(samples_dir, "jetski:")) == "command"


@pytest.mark.parametrize(
    ("line", "permission"),
    [
        ('jetski: … a tool required the "write_file" permission that headless …', "write_file"),
        ("error: interrupted", None),
        ("jetski: no output produced — a tool was auto-denied.", None),
        ('required the "" permission', None),
    ],
)
def test_soft_deny_permission_other_lines(line: str, permission: str | None) -> None:
    """Only a quoted, non-empty permission name is taken from a line."""
    assert notices.soft_denied_permission(line) == permission


@pytest.mark.parametrize(
    ("permissions", "named", "rules"),
    [
        (["command"], ['"command"'], ["`command(<program>)`"]),
        (["write_file"], ['"write_file"'], ["`write_file(<path>)`"]),
        (["url"], ['"url"'], ["`url(<domain>)`"]),
        (["browser"], ['"browser"'], ["`browser(<target>)`"]),
        (
            ["write_file", "command", "command"],
            ['"command", "write_file"'],
            ["`command(<program>)`, `write_file(<path>)`"],
        ),
    ],
)
def test_soft_deny_message(permissions: list[str], named: list[str], rules: list[str]) -> None:
    """The message names each permission once, an allow rule for it and where to put it."""
    message = notices.soft_deny_message(permissions)
    for text in [*named, *rules, "`permissions.allow`", notices.SETTINGS_PATH]:
        assert text in message
    assert "--dangerously-skip-permissions" in message


def test_soft_deny_message_without_a_permission_name() -> None:
    """When agy named no permission, the message does not invent an allow rule for one."""
    message = notices.soft_deny_message([])
    assert message.strip()
    assert "a tool(" not in message
    assert '"a tool" permission' not in message


@pytest.mark.parametrize(
    ("denied_actions", "names"),
    [
        ([{"action": "command", "display_name": "RunCommand"}], ["command"]),
        ([{"display_name": "RunCommand"}], ["RunCommand"]),
        (
            [{"action": "command"}, {"action": "read_url", "display_name": "ReadUrl"}],
            ["command", "read_url"],
        ),
        ([{"action": 3}, {"action": ""}, {}], []),
        ([], []),
        (None, []),
    ],
)
def test_denied_permissions(denied_actions: list[dict[str, Any]] | None, names: list[str]) -> None:
    """Permission names come from ``result.denied_actions`` entries that have one."""
    assert notices.denied_permissions(denied_actions) == names


# --- durations and quota --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "duration"),
    [
        ("100h23m59s", dt.timedelta(hours=100, minutes=23, seconds=59)),
        ("167h51m3s", dt.timedelta(hours=167, minutes=51, seconds=3)),
        ("0s", dt.timedelta(0)),
        ("1.5s", dt.timedelta(seconds=1.5)),
        ("2m", dt.timedelta(minutes=2)),
        ("1h0m0s", dt.timedelta(hours=1)),
        ("", None),
        ("soon", None),
    ],
)
def test_parse_duration(text: str, duration: dt.timedelta | None) -> None:
    """Go duration strings become timedeltas; text without one is None."""
    assert notices.parse_duration(text) == duration


def test_parse_duration_milliseconds() -> None:
    """Go prints durations under a second in ms: 500ms is half a second."""
    assert notices.parse_duration("500ms") == dt.timedelta(milliseconds=500)


INDIVIDUAL = (
    "Individual quota reached. Please upgrade your subscription to increase your limits. "
    "Resets in 100h23m59s."
)
ATTEMPT_8 = (
    "API error (attempt 8): RESOURCE_EXHAUSTED (code 429): Individual quota reached. Please "
    "upgrade your subscription to increase your limits. Resets in 0s."
)
ELIGIBILITY = (
    "Eligibility check failed: UNAVAILABLE (code 503): The service is currently unavailable."
)
CREDITS = "Your AI credits balance is too low to continue."

# (real result.error text, resets_in, resets_at from NOW)
QUOTA_CASES = [
    (INDIVIDUAL, "100h23m59s", "2026-12-04T16:23:59Z"),
    (ATTEMPT_8, "0s", "2026-11-30T12:00:00Z"),
    (ELIGIBILITY, None, None),
    (CREDITS, None, None),
    ("Resets in 1.5s. RESOURCE_EXHAUSTED", "1.5s", "2026-11-30T12:00:01Z"),
]


@pytest.mark.parametrize(("text", "resets_in", "resets_at"), QUOTA_CASES)
def test_quota_error_texts(text: str, resets_in: str | None, resets_at: str | None) -> None:
    """Quota and capacity texts (contract.md §4) parse, with the reset time from ``now``."""
    quota = notices.quota_error(text, None, NOW)
    assert quota == notices.QuotaError(text=text, resets_in=resets_in, resets_at=resets_at)
    message = quota.message()
    assert message.startswith("agy could not run this turn: " + text)
    assert (f"(quota resets at {resets_at})" in message) == (resets_at is not None)


def test_quota_reset_time_is_utc_whatever_the_clock_zone() -> None:
    """``resets_at`` is an absolute UTC time even when ``now`` carries another offset."""
    tokyo = NOW.astimezone(dt.timezone(dt.timedelta(hours=9)))
    quota = notices.quota_error(INDIVIDUAL, None, tokyo)
    assert quota is not None and quota.resets_at == "2026-12-04T16:23:59Z"


@pytest.mark.parametrize(
    "text",
    [
        "Agent execution terminated due to error.",
        "interrupted",
        "tool call denied by pre-tool hook: not allowed",
        'invalid model selection (--model "x" --effort ""): model x is not recognized',
        "agent executor error: generating and executing: Error 400, Message: API key not valid",
    ],
)
def test_non_quota_errors(text: str) -> None:
    """Errors that are not about quota or capacity give None."""
    assert notices.quota_error(text, None, NOW) is None


def test_model_command_error_is_not_a_quota_error() -> None:
    """A slash command agy cannot run in stream mode is not a quota or capacity problem."""
    text = (
        "/model is answered by the CLI itself and is unavailable with --input-format "
        "stream-json; run it as its own --print /model invocation"
    )
    assert notices.quota_error(text, None, NOW) is None


def test_quota_from_agy_error_details(samples_dir: Path) -> None:
    """AGY_ERROR details alone make a quota error; its fields become camelCase meta."""
    details = json.loads(captured_line(samples_dir, "AGY_ERROR:").removeprefix("AGY_ERROR:"))
    quota = notices.quota_error("Agent execution terminated due to error.", details, NOW)
    assert quota is not None
    assert quota.resets_in == "167h51m3s"  # taken from short_error
    assert quota.resets_at == "2026-12-07T11:51:03Z"
    assert quota.meta() == {
        "error": "Agent execution terminated due to error.",
        "resetsIn": "167h51m3s",
        "resetsAt": "2026-12-07T11:51:03Z",
        "shortError": details["short_error"],
        "status": "RESOURCE_EXHAUSTED",
        "errorCode": 429,
        "codeKind": "http",
        "retryable": True,
        "errorId": "6baa4ce9-c373-4086-bb0d-fbb8421bacf3-1",
    }


@pytest.mark.parametrize("code", [429, 503])
def test_quota_from_error_code_only(code: int) -> None:
    """An HTTP 429 or 503 error code marks a quota/capacity error even with plain text."""
    quota = notices.quota_error("something failed", {"error_code": code}, NOW)
    assert quota is not None and quota.resets_at is None
    assert quota.meta() == {"error": "something failed", "errorCode": code}


def test_non_quota_error_code() -> None:
    """A 400 with unrelated text is not a quota error."""
    details = {"error_code": 400, "status": "INVALID_ARGUMENT", "short_error": "API key not valid"}
    assert notices.quota_error("bad key", details, NOW) is None


def test_camel_keys() -> None:
    """AGY_ERROR snake_case keys become camelCase."""
    assert notices.camel_keys({"short_error": 1, "error_id": 2, "status": 3}) == {
        "shortError": 1,
        "errorId": 2,
        "status": 3,
    }


# --- available models -----------------------------------------------------------------


def test_available_models_from_the_captured_error(samples_dir: Path) -> None:
    """Every model listed in the real invalid-model error is found, in order."""
    line = (samples_dir / "tiezbro-1.1.14-invalid-model-error.ndjson").read_text().splitlines()[0]
    error = json.loads(line)["result"]["error"]
    models = notices.available_models(error)
    assert len(models) == 14
    assert models[:3] == [
        "Gemini 3.7 Flash (High)",
        "Gemini 3.7 Flash (Medium)",
        "Gemini 3.7 Flash (Low)",
    ]
    assert models[-3:] == [
        "Claude Sonnet 4.6 (Thinking)",
        "Claude Opus 4.6 (Thinking)",
        "GPT-OSS 120B (Medium)",
    ]


@pytest.mark.parametrize(
    ("text", "models"),
    [
        (
            "invalid model selection: x\nAvailable models:\n  Gemini 3.6 Flash (High)\n  ...",
            ["Gemini 3.6 Flash (High)"],
        ),
        ("invalid model selection: x", []),
        ("Available models:\n\n  A\n\n  B\n", ["A", "B"]),
    ],
)
def test_available_models(text: str, models: list[str]) -> None:
    """Names after ``Available models:`` are listed; elisions and blank lines are not."""
    assert notices.available_models(text) == models


@pytest.mark.parametrize("duration", ["99999999999999h", "2000000000h", "9" * 400 + "s"])
def test_quota_reset_beyond_the_calendar_is_kept_as_text(duration: str) -> None:
    """A reset time no date can hold (agy's text, not ours) never raises: the
    message keeps agy's duration and names no reset date."""
    quota = notices.quota_error(f"Individual quota reached. Resets in {duration}.", None, NOW)
    assert quota is not None and quota.resets_in == duration and quota.resets_at is None
    assert "Resets in" in quota.message()
