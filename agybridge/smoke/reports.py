"""The run's reports: JUnit XML, JSON and Markdown.

JUnit: one ``<testcase>`` per cell (``classname`` = case, ``name`` = axis values,
``system-out`` = the transcript); an expectation that did not hold is a ``<failure>``
(expected vs seen), agy or the bridge not doing its job is an ``<error>`` whose
``type`` is the classified cause; skipped cells are ``<skipped>``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from .. import __version__
from ..acp.text_check import encodes_utf8
from .results import CellResult

# XML 1.0 cannot carry most control characters, surrogates, U+FFFE or U+FFFF, even
# escaped (a lone surrogate reaches us from a "\ud800" escape in the bridge's JSON).
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    return _XML_BAD.sub("", text)


def counts(results: list[CellResult]) -> dict[str, int]:
    found = Counter(r.status for r in results)
    return {s: found.get(s, 0) for s in ("passed", "failed", "error", "skipped")}


def junit(results: list[CellResult], suite: str, duration_s: float) -> bytes:
    tally = counts(results)
    root = ET.Element("testsuites", name="agybridge smoke")
    element = ET.SubElement(
        root,
        "testsuite",
        name=_xml_text(suite),
        tests=str(len(results)),
        failures=str(tally["failed"]),
        errors=str(tally["error"]),
        skipped=str(tally["skipped"]),
        time=f"{duration_s:.3f}",
        timestamp=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
    )
    for result in results:
        case = ET.SubElement(
            element,
            "testcase",
            classname=_xml_text(result.cell.case.name),
            name=_xml_text(result.cell.label),
            time=f"{result.duration_s:.3f}",
        )
        if result.status == "skipped":
            ET.SubElement(case, "skipped", message=_xml_text(result.skip_reason or "skipped"))
        elif result.error is not None:
            error = ET.SubElement(
                case, "error", type=result.error.kind, message=_xml_text(result.error.message)
            )
            error.text = _xml_text(_error_body(result))
        elif result.failures:
            first = result.failures[0]
            failure = ET.SubElement(
                case,
                "failure",
                type=first.expectation,
                message=_xml_text(f"expected {first.expected}; seen {first.seen}"),
            )
            failure.text = _xml_text(
                "\n".join(
                    f"{f.expectation}\n  expected: {f.expected}\n  seen: {f.seen}"
                    for f in result.failures
                )
            )
        out = ET.SubElement(case, "system-out")
        out.text = _xml_text("\n".join(result.record.transcript))
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True)) + b"\n"


def _error_body(result: CellResult) -> str:
    assert result.error is not None
    lines = [
        f"cause: {result.error.kind}",
        f"message: {result.error.message}",
        f"transient: {result.error.transient}",
        f"attempts: {result.attempts}",
    ]
    for key, value in result.error.details.items():
        lines.append(f"{key}: {value}")
    return "\n".join(lines)


def json_report(
    results: list[CellResult], meta: dict[str, Any], duration_s: float
) -> dict[str, Any]:
    return {
        "kind": "agybridge-smoke",
        "version": 1,
        "agybridge": __version__,
        **meta,
        "duration_s": round(duration_s, 3),
        "counts": counts(results),
        "cells": [r.to_json() for r in results],
    }


def _ratio(value: float | None) -> str:
    if value is None:
        return ""
    return f" ({(value - 1) * 100:+.0f}%)"


def markdown(results: list[CellResult], title: str, duration_s: float, note: str = "") -> str:
    tally = counts(results)
    verdict = "✅ passed" if not (tally["failed"] or tally["error"]) else "❌ failed"
    lines = [
        f"## agybridge smoke: {title} — {verdict}",
        "",
        f"{len(results)} cells: {tally['passed']} passed, {tally['failed']} failed, "
        f"{tally['error']} errors, {tally['skipped']} skipped in {duration_s:.1f} s.",
    ]
    if note:
        lines += ["", f"> **{note}**"]
    lines += [
        "",
        "| case | axes | result | time (s) | first chunk (s) | tokens | stop reason | tries |",
        "|---|---|---|--:|--:|--:|---|--:|",
    ]
    marks = {"passed": "✅ pass", "failed": "❌ FAIL", "error": "💥 ERROR", "skipped": "⏭ skip"}
    for r in results:
        base = r.baseline or {}
        first = r.record.first_chunk_s
        stop = r.record.turns[-1].stop_reason if r.record.turns else None
        lines.append(
            f"| {_cell(r.cell.case.name)} | {_cell(r.cell.label)} | {marks[r.status]} | "
            f"{r.duration_s:.2f}{_ratio(base.get('duration_ratio'))} | "
            f"{'' if first is None else f'{first:.2f}'} | "
            f"{r.record.tokens if r.record.turns else ''}{_ratio(base.get('token_ratio'))} | "
            f"{stop or ''} | {r.attempts or ''} |"
        )
    problems = [r for r in results if r.status in ("failed", "error")]
    if problems:
        lines += ["", "### Problems", ""]
    for r in problems:
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
