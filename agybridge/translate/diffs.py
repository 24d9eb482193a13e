"""Unified diffs of recorded mutations, as text and as structured hunks (pure)."""

from __future__ import annotations

import difflib
import re
from typing import Any

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def unified(path: str, before: str | None, after: str | None) -> dict[str, Any]:
    """One file's diff: ``{path, binary, diff, hunks}``; ``binary`` when either
    side is not known as text (then there is no diff)."""
    if before is None or after is None:
        return {"path": path, "binary": True, "diff": "", "hunks": []}
    lines = list(
        difflib.unified_diff(
            _lines(before),
            _lines(after),
            fromfile=f"a{path}",
            tofile=f"b{path}",
        )
    )
    no_newline = "\n\\ No newline at end of file\n"
    text = "".join(line if line.endswith("\n") else line + no_newline for line in lines)
    return {"path": path, "binary": False, "diff": text, "hunks": hunks_of(lines)}


def _lines(text: str) -> list[str]:
    """The lines ``\\n`` ends, with it (the last may lack it), as diff(1)
    sees them: unlike ``str.splitlines``, a form feed, a lone carriage return
    or U+2028 inside a line does not end it."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def hunks_of(lines: list[str]) -> list[dict[str, Any]]:
    """``@@`` hunks of a unified diff's lines: ranges and tagged lines."""
    hunks: list[dict[str, Any]] = []
    for line in lines:
        match = _HUNK.match(line)
        if match:
            old_start, old_len, new_start, new_len = match.groups()
            hunks.append(
                {
                    "oldStart": int(old_start),
                    "oldLines": int(old_len) if old_len is not None else 1,
                    "newStart": int(new_start),
                    "newLines": int(new_len) if new_len is not None else 1,
                    "lines": [],
                }
            )
        elif hunks and line[:1] in (" ", "+", "-"):
            tag = {" ": "context", "+": "add", "-": "remove"}[line[0]]
            hunks[-1]["lines"].append({"type": tag, "text": line[1:].rstrip("\n")})
    return hunks
