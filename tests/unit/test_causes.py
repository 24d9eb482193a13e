"""The catalogue of causes (`agybridge.causes`): its rows, its classifier, and
docs/errors.md, which is the same table for people.

``python -m tests.unit.test_causes`` rewrites the table in docs/errors.md from
the catalogue; the test fails until the doc and the table agree.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from agybridge import causes
from agybridge.jsonrpc import ErrorCode, RpcError
from agybridge.jsonrpc.errors import FRAMING_CAUSES

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
BEGIN = "<!-- causes:begin -->"
END = "<!-- causes:end -->"


def _outcome(row: causes.Cause) -> str:
    parts = []
    if row.code is not None:
        parts.append(f"error `{int(row.code)}`")
    if row.stop is not None:
        parts.append(f"stop `{row.stop}` + notice")
    if row.elsewhere is not None:
        parts.append(_shown(row.elsewhere))
    return " or ".join(parts)


def _shown(text: str) -> str:
    """A template as a person reads it: fields as `<field>`, pipes escaped."""
    return re.sub(r"\{(\w+)(?:![rs])?\}", r"`<\1>`", text).replace("|", "\\|")


def table() -> str:
    """The catalogue as docs/errors.md's table."""
    lines = [
        "| cause | when | what the client gets | message | what to do | retry helps |",
        "|---|---|---|---|---|---|",
    ]
    for row in causes.CAUSES.values():
        lines.append(
            f"| `{row.id}` | {_shown(row.when)} | {_outcome(row)} | {_shown(row.message)} "
            f"| {_shown(row.fix)} | {'yes' if row.transient else 'no'} |"
        )
    return "\n".join(lines)


def test_docs_errors_md_is_the_catalogue() -> None:
    text = DOC.read_text()
    assert BEGIN in text and END in text, "docs/errors.md lost its table markers"
    shown = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert shown == table(), "run `python -m tests.unit.test_causes` to rewrite the table"


def test_the_readme_troubleshooting_links_the_catalogue() -> None:
    readme = (DOC.parents[1] / "README.md").read_text()
    troubleshooting = readme.split("### Troubleshooting", 1)[1].split("\n## ", 1)[0]
    assert "docs/errors.md" in troubleshooting


def test_only_a_bridge_bug_answers_internal_error() -> None:
    internal = [row.id for row in causes.CAUSES.values() if row.code == ErrorCode.INTERNAL_ERROR]
    assert internal == ["bridge_bug"]
    for row in causes.CAUSES.values():
        assert row.code is not None or row.stop is not None or row.elsewhere, row.id
        assert row.message and row.fix and row.when, row.id


@pytest.mark.parametrize(
    ("text", "details", "cause"),
    [
        ("Eligibility check failed: UNAVAILABLE (code 503): down", None, "unavailable"),
        ("down", {"error_code": 503}, "unavailable"),
        ("Individual quota reached. Resets in 100h23m59s.", None, "quota"),
        ("RESOURCE_EXHAUSTED (code 429): Individual quota reached.", None, "quota"),
        ("slow down", {"status": "RESOURCE_EXHAUSTED", "error_code": 429}, "rate_limited"),
        ("Your AI credits balance is too low to continue.", None, "quota"),
        ('invalid model selection (--model "x" --effort "")', None, "invalid_model"),
        ("You are not logged into Antigravity.", None, "not_signed_in"),
        ("interrupted", None, "interrupted"),
        ("print timeout (5m0s) reached", None, "print_timeout"),
        ("Agent execution terminated due to error.", None, "agy_error"),
    ],
)
def test_one_classifier_for_agy_failures(
    text: str, details: dict[str, object] | None, cause: str
) -> None:
    """A 5xx is unavailable and a quota a quota, whether AGY_ERROR said it or only words."""
    assert causes.classify_agy_failure(text, details) == cause


@pytest.mark.parametrize(
    ("returncode", "said", "fields"),
    [
        (2, "exit code 2", {"exitCode": 2}),
        (-11, "killed by SIGSEGV", {"signal": "SIGSEGV"}),
        (-9, "killed by SIGKILL", {"signal": "SIGKILL"}),
        (None, "no exit status", {"exitCode": None}),
    ],
)
def test_a_signal_death_is_named_by_its_signal(
    returncode: int | None, said: str, fields: dict[str, object]
) -> None:
    assert causes.exit_description(returncode) == said
    assert causes.exit_fields(returncode) == fields


def test_meta_names_the_cause_and_drops_empty_fields() -> None:
    meta = causes.meta("quota", resetsAt="2026-12-10T13:35:12Z", resetsIn=None)
    assert meta == {"agybridge": {"cause": "quota", "resetsAt": "2026-12-10T13:35:12Z"}}
    assert causes.cause_of(meta) == "quota"
    assert causes.cause_of({"_meta": meta, "details": "x"}) == "quota"
    assert causes.cause_of({"agybridge": {"cause": "no_such"}}) is None
    with pytest.raises(KeyError):
        causes.meta("no_such_cause")


def _write() -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")


if __name__ == "__main__":
    _write()
    sys.exit(0)


def test_the_framing_layers_own_errors_name_catalogue_causes() -> None:
    """jsonrpc answers parse errors and invalid requests itself (it sits below
    the catalogue): the ids it names are catalogue rows with the same code."""
    for code, cause_id in FRAMING_CAUSES.items():
        assert causes.cause(cause_id).code == code
    error = RpcError.parse_error(data={"details": "x"})
    assert causes.cause_of(error.data) == "invalid_json"
    assert isinstance(error.data, dict) and error.data["details"] == "x"
