"""Did the cell do what the case expects? Each miss is a `Failure` (expected vs seen).

Text expectations (``contains``, ``not_contains``, ``regex``, ``json_schema``) read the
agent's text of the LAST turn (a multi-turn case checks where the conversation ended);
``json_schema`` validates the turn's structured output when agy gave one, else its text
parsed as JSON. ``stop_reason`` is the last turn's outcome: a turn the bridge reported
as cut short (print timeout, agy error, interruption: `TurnRecord.end_cause`) is never
``end_turn``. ``tool_kinds`` must each appear among the tools that COMPLETED,
``tool_attempts`` among every tool call whatever its end; ``no_tools`` and
``not_tool_kinds`` are their negations. ``files`` are read from the cell's workspace
after the run, ``files_absent`` must not exist there;
``max_seconds`` bounds the turn time (first prompt sent to last response) and
``max_tokens`` the tokens used. ``images`` counts the images the last turn showed
(message chunks and tool cards), ``error`` is the cause the bridge's error answer to the
last prompt named, ``listed`` whether ``session/list`` named the cell's session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import Case, fill
from .results import CellRecord, Failure

_SEEN_CHARS = 300


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return json.dumps(text if len(text) <= _SEEN_CHARS else text[:_SEEN_CHARS] + "…")


def check(case: Case, record: CellRecord, values: dict[str, str] | None = None) -> list[Failure]:
    """Every failed expectation of ``case`` (permissions and budget included).

    ``values`` fill the ``{{name}}`` placeholders of the text expectations.
    """
    expect = case.expect
    values = values or {}
    failures: list[Failure] = []
    last = record.turns[-1] if record.turns else None
    text = last.text if last is not None else ""
    seen = _excerpt(text)
    for needle in (fill(n, values) for n in expect.contains):
        if needle not in text:
            failures.append(Failure("expect.contains", f"text containing {needle!r}", seen))
    for needle in (fill(n, values) for n in expect.not_contains):
        if needle in text:
            failures.append(Failure("expect.not_contains", f"text without {needle!r}", seen))
    for pattern in expect.regex:
        if pattern.search(text) is None:
            failures.append(Failure("expect.regex", f"text matching /{pattern.pattern}/", seen))
    if expect.schema is not None:
        failures += _schema(expect.schema, str(expect.json_schema), last, text)
    if expect.stop_reason is not None:
        stop = last.outcome if last is not None else None
        if stop != expect.stop_reason:
            failures.append(Failure("expect.stop_reason", expect.stop_reason, str(stop)))
    failures += _tools(case, record)
    failures += _answers(case, record)
    for name, needle in expect.files.items():
        failures += _file(Path(record.workspace or "."), name, needle)
    for name in expect.files_absent:
        if (Path(record.workspace or ".") / name).exists():
            failures.append(Failure("expect.files_absent", f"no {name}", f"{name} exists"))
    turn_s = record.turn_s
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


def _tools(case: Case, record: CellRecord) -> list[Failure]:
    expect = case.expect
    calls = list(record.tool_calls.values())
    tried = sorted({c.kind for c in calls if c.kind})
    completed = sorted({c.kind for c in calls if c.kind and c.status == "completed"})
    seen = ", ".join(f"{c.kind or '?'} ({c.status or 'no status'})" for c in calls) or "none"
    failures = []
    for kind in expect.tool_kinds:
        if kind not in completed:
            failures.append(
                Failure("expect.tool_kinds", f"a {kind!r} tool call that completed", seen)
            )
    for kind in expect.tool_attempts:
        if kind not in tried:
            failures.append(Failure("expect.tool_attempts", f"a {kind!r} tool call", seen))
    if expect.no_tools and calls:
        failures.append(Failure("expect.no_tools", "no tool call", seen))
    for kind in expect.not_tool_kinds:
        if kind in tried:
            failures.append(Failure("expect.not_tool_kinds", f"no {kind!r} tool call", seen))
    return failures


def _answers(case: Case, record: CellRecord) -> list[Failure]:
    """``images``, ``error`` and ``listed``: what the bridge answered besides text."""
    expect = case.expect
    last = record.turns[-1] if record.turns else None
    failures = []
    images = len(last.images) if last is not None else 0
    if expect.images is not None and images < expect.images:
        failures.append(Failure("expect.images", f"at least {expect.images} image(s)", f"{images}"))
    if expect.error is not None:
        refused = last.refused if last is not None else None
        if refused != expect.error:
            answered = f"the prompt answered ({last.outcome})" if last is not None else "no prompt"
            seen = f"an error naming {refused!r}" if refused is not None else answered
            failures.append(Failure("expect.error", f"an error naming {expect.error!r}", seen))
    if expect.listed and not record.listed:
        failures.append(Failure("expect.listed", "the session in session/list", "not listed"))
    return failures


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
