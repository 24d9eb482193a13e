"""Classify agy's stderr lines (pure).

agy writes human text to stderr: warnings, soft-deny notices, ``error: ...``
lines, a structured ``AGY_ERROR: {json}`` line before exit 3, auth failures and
the print-timeout notice (contract.md §4). The session keeps a tail of these
lines for error messages and reacts to the kinds below.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs

from ..causes import is_auth_text


class StderrKind(enum.Enum):
    SOFT_DENY = "soft_deny"
    AGY_ERROR = "agy_error"
    AUTH = "auth"
    PRINT_TIMEOUT = "print_timeout"
    INTERRUPTED = "interrupted"
    ERROR = "error"
    WARNING = "warning"
    OTHER = "other"


@attrs.frozen
class StderrLine:
    kind: StderrKind
    text: str
    #: The parsed JSON of an ``AGY_ERROR:`` line (contract.md §4).
    details: dict[str, Any] | None = None


def classify_stderr(text: str) -> StderrLine:
    """Classify one stderr line (without its newline)."""
    stripped = text.strip()
    lowered = stripped.lower()
    if stripped.startswith("AGY_ERROR:"):
        try:
            details = json.loads(stripped.removeprefix("AGY_ERROR:"))
        except ValueError:
            details = None
        if isinstance(details, dict):
            return StderrLine(StderrKind.AGY_ERROR, stripped, details)
        return StderrLine(StderrKind.ERROR, stripped)
    if stripped.startswith("jetski:") and "auto-denied" in lowered:
        return StderrLine(StderrKind.SOFT_DENY, stripped)
    if is_auth_text(lowered):
        return StderrLine(StderrKind.AUTH, stripped)
    if stripped.startswith("[agy] print timeout"):
        return StderrLine(StderrKind.PRINT_TIMEOUT, stripped)
    if lowered in ("error: interrupted", "context canceled"):
        return StderrLine(StderrKind.INTERRUPTED, stripped)
    if lowered.startswith(("error:", "error ", "panic:", "fatal:")):
        return StderrLine(StderrKind.ERROR, stripped)
    if lowered.startswith("warning:"):
        return StderrLine(StderrKind.WARNING, stripped)
    return StderrLine(StderrKind.OTHER, stripped)
