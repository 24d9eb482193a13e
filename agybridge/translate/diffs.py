"""Unified diffs of recorded mutations, as text and as structured hunks (pure)."""

from __future__ import annotations

import difflib
import enum
import re
from typing import Any

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class Unknown(enum.Enum):
    """A side of a diff that is not text: why."""

    #: The bridge never saw this content (agy wrote before it could look), or
    #: did not keep it.
    UNSEEN = "unknown"
    #: Bytes that are not UTF-8 text.
    BINARY = "binary"


#: One side of a diff: the file's text ("" for no file), or why there is none.
Side = str | Unknown


def unified(path: str, before: Side, after: Side, *, before_unseen: bool = False) -> dict[str, Any]:
    """One file's diff: ``{path, binary, diff, hunks}``.

    ``binary`` only when a side is bytes that are not text (then there is no
    diff). A side the bridge never saw is said (``"before": "unknown"``, or
    ``"after"``), never called binary; ``before_unseen``: the content before
    the change was not seen, and ``before`` is the first content the bridge
    did see (the diff shows the change from there)."""
    found: dict[str, Any] = {"path": path, "binary": Unknown.BINARY in (before, after)}
    if before_unseen or before is Unknown.UNSEEN:
        found["before"] = Unknown.UNSEEN.value
    if after is Unknown.UNSEEN:
        found["after"] = Unknown.UNSEEN.value
    if isinstance(before, Unknown) or isinstance(after, Unknown):
        return {**found, "diff": "", "hunks": []}
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
    return {**found, "diff": text, "hunks": hunks_of(lines)}


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
