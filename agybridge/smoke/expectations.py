"""Did the cell do what the case expects? Each miss is a `Failure` (expected vs seen).

Text expectations (``contains``, ``not_contains``, ``regex``, ``json_schema``) read the
agent's text of the LAST turn (a multi-turn case checks where the conversation ended);
``json_schema`` validates the turn's structured output when agy gave one, else its text
parsed as JSON. ``stop_reason`` is the last turn's; ``tool_kinds`` must each appear among
the cell's tool calls; ``files`` are read from the cell's workspace after the run;
``max_seconds`` bounds the turn time (first prompt sent to last response) and
``max_tokens`` the tokens used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import Case
from .results import CellRecord, Failure

_SEEN_CHARS = 300


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return json.dumps(text if len(text) <= _SEEN_CHARS else text[:_SEEN_CHARS] + "…")


def check(case: Case, record: CellRecord) -> list[Failure]:
    """Every failed expectation of ``case`` (permissions and budget included)."""
    expect = case.expect
    failures: list[Failure] = []
    last = record.turns[-1] if record.turns else None
    text = last.text if last is not None else ""
    seen = _excerpt(text)
    for needle in expect.contains:
        if needle not in text:
            failures.append(Failure("expect.contains", f"text containing {needle!r}", seen))
    for needle in expect.not_contains:
        if needle in text:
            failures.append(Failure("expect.not_contains", f"text without {needle!r}", seen))
    for pattern in expect.regex:
        if pattern.search(text) is None:
            failures.append(Failure("expect.regex", f"text matching /{pattern.pattern}/", seen))
    if expect.schema is not None:
        failures += _schema(expect.schema, str(expect.json_schema), last, text)
    if expect.stop_reason is not None:
        stop = last.stop_reason if last is not None else None
        if stop != expect.stop_reason:
            failures.append(Failure("expect.stop_reason", expect.stop_reason, str(stop)))
    kinds = sorted({call.kind for call in record.tool_calls.values() if call.kind})
    for kind in expect.tool_kinds:
        if kind not in kinds:
            failures.append(Failure("expect.tool_kinds", f"a {kind!r} tool call", f"kinds {kinds}"))
    for name, needle in expect.files.items():
        failures += _file(Path(record.workspace or "."), name, needle)
    turn_s = _turn_seconds(record)
    if expect.max_seconds is not None and (turn_s is None or turn_s > expect.max_seconds):
        shown = "no finished turn" if turn_s is None else f"{turn_s:.2f} s"
        failures.append(Failure("expect.max_seconds", f"≤ {expect.max_seconds:g} s", shown))
    if expect.max_tokens is not None and record.tokens > expect.max_tokens:
        failures.append(
            Failure("expect.max_tokens", f"≤ {expect.max_tokens} tokens", f"{record.tokens}")
        )
    if case.permissions == "fail" and record.permissions:
        asked = ", ".join(str(p["title"]) for p in record.permissions)
        failures.append(
            Failure("permissions", 'no permission request (permissions = "fail")', asked)
        )
    if record.budget_exceeded:
        failures.append(Failure("budget", "the cell within its budget", record.budget_exceeded))
    return failures


def _turn_seconds(record: CellRecord) -> float | None:
    if not record.turns or record.turns[-1].ended_s is None:
        return None
    return record.turns[-1].ended_s - record.turns[0].sent_s


def _schema(schema: Any, where: str, last: Any, text: str) -> list[Failure]:
    import jsonschema  # type: ignore[import-untyped]  # noqa: PLC0415 - checked at load

    value = last.structured_output if last is not None else None
    if value is None:
        try:
            value = json.loads(text)
        except ValueError:
            return [Failure("expect.json_schema", f"JSON matching {where}", _excerpt(text))]
    errors = sorted(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(value),
        key=lambda e: list(e.path),
    )
    if not errors:
        return []
    problem = f"{list(errors[0].path)}: {errors[0].message}"
    return [Failure("expect.json_schema", f"JSON matching {where}", problem[:_SEEN_CHARS])]


def _file(workspace: Path, name: str, needle: str) -> list[Failure]:
    path = workspace / name
    expected = f"{name} containing {needle!r}" if needle else f"{name} to exist"
    try:
        content = path.read_text(errors="replace")
    except OSError as exc:
        return [Failure("expect.files", expected, f"{name}: {exc.strerror or exc}")]
    if needle not in content:
        return [Failure("expect.files", expected, f"{name}: {_excerpt(content)}")]
    return []
