"""The run's reports: JUnit XML, JSON and Markdown.

JUnit (valid against Jenkins' ``junit-10.xsd``): one ``<testcase>`` per cell
(``classname`` = case, ``name`` = axis values, ``system-out`` = the transcript); an
expectation that did not hold is a ``<failure>`` (expected vs seen), agy or the bridge
not doing its job is an ``<error>`` whose ``type`` is the classified cause; skipped
cells are ``<skipped>``. Attempts that a retry followed are written as Maven Surefire
does: ``<flakyError>``/``<flakyFailure>`` in a cell that passed at last (a flaky one),
``<rerunError>``/``<rerunFailure>`` in one that never did. Every text is capped
(`MAX_TEXT_CHARS`, with a note of what was cut) so no parser refuses the file; the
JSON report keeps everything. The suite carries ``hostname``, ``timestamp`` and
``<properties>`` (runner, bridge and agy versions).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import socket
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from .. import __version__
from ..acp.text_check import encodes_utf8
from .results import STATUSES, Attempt, CellResult

#: Longest text in one JUnit element or attribute (lxml refuses text nodes over 10 MB).
MAX_TEXT_CHARS = 64 * 1024
_MAX_ATTRIBUTE_CHARS = 2000

# XML 1.0 cannot carry most control characters, surrogates, U+FFFE or U+FFFF, even
# escaped (a lone surrogate reaches us from a "\ud800" escape in the bridge's JSON).
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    return capped(_XML_BAD.sub("", text), limit)


def capped(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text``, or its head and tail with a note of how much was cut between them."""
    if len(text) <= limit:
        return text
    note = "\n[agybridge smoke: {} characters cut here; the JSON report has them all]\n"
    keep = max(0, (limit - len(note.format(len(text)))) // 2)
    return text[:keep] + note.format(len(text) - 2 * keep) + text[len(text) - keep :]


def _attribute(text: str) -> str:
    return _xml_text(text, _MAX_ATTRIBUTE_CHARS)


def counts(results: list[CellResult]) -> dict[str, int]:
    found = Counter(r.status for r in results)
    return {s: found.get(s, 0) for s in STATUSES}


def junit(
    results: list[CellResult],
    suite: str,
    duration_s: float,
    properties: dict[str, str] | None = None,
    started: dt.datetime | None = None,
) -> bytes:
    tally = counts(results)
    root = ET.Element(
        "testsuites",
        name="agybridge smoke",
        tests=str(len(results)),
        failures=str(tally["failed"]),
        errors=str(tally["error"]),
        time=f"{duration_s:.3f}",
    )
    started = started or dt.datetime.now(dt.UTC)
    element = ET.SubElement(
        root,
        "testsuite",
        name=_attribute(suite),
        tests=str(len(results)),
        failures=str(tally["failed"]),
        errors=str(tally["error"]),
        skipped=str(tally["skipped"]),
        time=f"{duration_s:.3f}",
        timestamp=started.astimezone(dt.UTC).replace(microsecond=0, tzinfo=None).isoformat(),
        hostname=_attribute(socket.gethostname()),
    )
    listed = ET.SubElement(element, "properties")
    for name, value in (properties or {}).items():
        ET.SubElement(listed, "property", name=_attribute(name), value=_attribute(value))
    for result in results:
        case = ET.SubElement(
            element,
            "testcase",
            classname=_attribute(result.cell.case.name),
            name=_attribute(result.cell.label),
            time=f"{result.duration_s:.3f}",
        )
        if result.status == "skipped":
            ET.SubElement(case, "skipped", message=_attribute(result.skip_reason or "skipped"))
        else:
            last = Attempt(result.error, result.failures, result.record.transcript)
            if result.status != "flaky":
                _verdict(case, "", last, result.attempts)
            earlier = "flaky" if result.status == "flaky" else "rerun"
            for number, attempt in enumerate(result.earlier, start=1):
                _verdict(case, earlier, attempt, number, with_output=True)
        out = ET.SubElement(case, "system-out")
        out.text = _xml_text("\n".join(result.record.transcript))
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True)) + b"\n"


def _verdict(
    case: ET.Element, prefix: str, attempt: Attempt, number: int, *, with_output: bool = False
) -> None:
    """``<error>``/``<failure>`` (prefix "") or a Surefire ``flaky``/``rerun`` element."""
    if attempt.error is not None:
        tag, kind, message = "error", attempt.error.kind, attempt.error.message
        body = _error_body(attempt, number)
    elif attempt.failures:
        first = attempt.failures[0]
        tag, kind = "failure", first.expectation
        message = f"expected {first.expected}; seen {first.seen}"
        body = "\n".join(
            f"{f.expectation}\n  expected: {f.expected}\n  seen: {f.seen}" for f in attempt.failures
        )
    else:
        return
    if prefix:
        tag = prefix + tag.title()
    element = ET.SubElement(case, tag, type=_attribute(kind), message=_attribute(message))
    if with_output:
        # rerunType: the message's details go in <stackTrace>, the attempt's transcript
        # in its own <system-out>.
        ET.SubElement(element, "stackTrace").text = _xml_text(body)
        ET.SubElement(element, "system-out").text = _xml_text("\n".join(attempt.transcript))
    else:
        element.text = _xml_text(body)


def _error_body(attempt: Attempt, number: int) -> str:
    error = attempt.error
    assert error is not None
    lines = [
        f"cause: {error.kind}",
        f"message: {error.message}",
        f"transient: {error.transient}",
        f"attempt: {number}",
    ]
    for key, value in error.details.items():
        lines.append(f"{key}: {value}")
    return "\n".join(lines)


def json_report(
    results: list[CellResult], meta: dict[str, Any], duration_s: float
) -> dict[str, Any]:
    return {
        "kind": "agybridge-smoke",
        "version": 2,
        "agybridge": __version__,
        **meta,
        "duration_s": round(duration_s, 3),
        "counts": counts(results),
        "cells": [r.to_json() for r in results],
    }


def _ratio(deltas: dict[str, Any], phase: str) -> str:
    found = deltas.get(phase)
    value = found.get("ratio") if isinstance(found, dict) else None
    if value is None:
        return ""
    return f" ({(value - 1) * 100:+.0f}%)"


def tally_text(tally: dict[str, int]) -> str:
    return (
        f"{tally['passed']} passed, {tally['flaky']} flaky, {tally['failed']} failed, "
        f"{tally['error']} errors, {tally['skipped']} skipped"
    )


def markdown(results: list[CellResult], title: str, duration_s: float, note: str = "") -> str:
    tally = counts(results)
    verdict = "✅ passed" if not (tally["failed"] or tally["error"]) else "❌ failed"
    lines = [
        f"## agybridge smoke: {title} — {verdict}",
        "",
        f"{len(results)} cells: {tally_text(tally)} in {duration_s:.1f} s.",
    ]
    if note:
        lines += ["", f"> **{note}**"]
    lines += [
        "",
        "| case | axes | result | turn (s) | first chunk (s) | tokens | stop reason | tries |",
        "|---|---|---|--:|--:|--:|---|--:|",
    ]
    marks = {
        "passed": "✅ pass",
        "flaky": "⚠️ flaky",
        "failed": "❌ FAIL",
        "error": "💥 ERROR",
        "skipped": "⏭ skip",
    }
    for r in results:
        base = r.baseline or {}
        turn, first = r.record.turn_s, r.record.first_chunk_s
        stop = r.record.turns[-1].outcome if r.record.turns else None
        lines.append(
            f"| {_cell(r.cell.case.name)} | {_cell(r.cell.label)} | {marks[r.status]} | "
            f"{'' if turn is None else f'{turn:.2f}'}{_ratio(base, 'turn_s')} | "
            f"{'' if first is None else f'{first:.2f}'}{_ratio(base, 'first_chunk_s')} | "
            f"{r.record.tokens if r.record.turns else ''}{_ratio(base, 'tokens')} | "
            f"{stop or ''} | {r.attempts or ''} |"
        )
    problems = [r for r in results if r.status in ("failed", "error", "flaky")]
    if problems:
        lines += ["", "### Problems", ""]
    for r in problems:
        for number, attempt in enumerate(r.earlier, start=1):
            what = attempt.error.kind if attempt.error is not None else "failure"
            lines.append(
                f"- **{_cell(r.cell.id)}**: attempt {number} of {r.attempts}: `{what}`"
                + (" (passed on a retry: flaky)" if r.status == "flaky" else "")
            )
        if r.error is not None:
            lines.append(
                f"- **{_cell(r.cell.id)}**: error `{r.error.kind}`: {_cell(r.error.message)}"
            )
        for f in r.failures:
            lines.append(
                f"- **{_cell(r.cell.id)}**: `{f.expectation}` expected {_cell(f.expected)}; "
                f"seen {_cell(f.seen)}"
            )
    skipped = [r for r in results if r.status == "skipped"]
    if skipped and len(skipped) < len(results):
        lines += ["", "Skipped: " + ", ".join(f"{r.cell.id} ({r.skip_reason})" for r in skipped)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Safe inside a Markdown table cell: one line, no pipe."""
    return " ".join(text.split()).replace("|", "\\|")[:400]


def json_text(data: Any) -> str:
    """``data`` as indented JSON that is valid UTF-8 (a lone surrogate stays an escape)."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if not encodes_utf8(text):
        text = json.dumps(data, indent=2)
    return text + "\n"


def write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        # errors="replace": a lone surrogate from agy's output becomes "?", not a crash.
        path.write_text(data, encoding="utf-8", errors="replace")
    else:
        path.write_bytes(data)


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8", errors="replace") as handle:
        handle.write(text if text.endswith("\n") else text + "\n")
