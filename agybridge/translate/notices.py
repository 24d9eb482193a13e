"""Messages users can act on, built from agy's errors and notices (pure).

Sources of each text form: contract.md §4 (stderr) and §3.5 (``result``);
samples in ``shared/agy/samples/stderr-lines-observed.txt``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

SETTINGS_PATH = "~/.gemini/antigravity-cli/settings.json"

_SOFT_DENY = re.compile(r'required the "(?P<permission>[^"]+)" permission')
# Go's time.Duration.String(): "100h23m59s", "1.5s", "500ms", "0s".
_GO_DURATION = r"(?:\d+(?:\.\d+)?(?:h|ms|us|µs|ns|m|s))+"
_RESETS_IN = re.compile(rf"Resets in (?P<duration>{_GO_DURATION})")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)")
_DURATION_SECONDS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}
# Capacity words agy prints; the gRPC status names only in capitals, so that
# "... is unavailable with --input-format ..." is not taken for an outage.
_QUOTA_WORDS = ("quota", "code 429", "code 503", "credits balance", "overloaded")
_QUOTA_STATUSES = ("RESOURCE_EXHAUSTED", "UNAVAILABLE")

#: What to allow for each permission agy names (contract.md §4: allow rules
#: look like ``command(git)``, ``write_file(src/)``).
_ALLOW_RULE_EXAMPLES = {
    "command": "command(<program>)",
    "write_file": "write_file(<path>)",
    "read_file": "read_file(<path>)",
    "url": "url(<domain>)",
    "read_url": "read_url(<domain>)",
    "mcp": "mcp(<server>)",
}


def soft_denied_permission(stderr_line: str) -> str | None:
    """The permission a ``jetski: … auto-denied`` line names, if any."""
    match = _SOFT_DENY.search(stderr_line)
    return match.group("permission") if match else None


def allow_rule_example(permission: str) -> str:
    """An allow rule for ``permission`` with a placeholder target."""
    return _ALLOW_RULE_EXAMPLES.get(permission, f"{permission}(<target>)")


def soft_deny_message(
    permissions: Iterable[str],
    *,
    blocked: Sequence[str] = (),
    untied: Mapping[str, str] | None = None,
) -> str:
    """One message naming every denied permission and how to allow it, then the
    cards of the blocked steps (``blocked``: their titles) or, per permission no
    step could be tied to, why (``untied``)."""
    names = sorted({name for name in permissions if name})
    if not names:
        text = (
            "agy auto-denied an action: headless agy cannot ask for approval. Add an allow "
            f"rule for it under `permissions.allow` in {SETTINGS_PATH}, or run this session "
            "in an autonomous mode (agy's --dangerously-skip-permissions)."
        )
    else:
        rules = ", ".join(f"`{allow_rule_example(n)}`" for n in names)
        quoted = ", ".join(f'"{n}"' for n in names)
        text = (
            f"agy auto-denied an action that needs the {quoted} permission: headless agy "
            "cannot ask for approval. To allow it, add an allow rule such as "
            f"{rules} under `permissions.allow` in {SETTINGS_PATH}, or run this session in "
            "an autonomous mode (agy's --dangerously-skip-permissions)."
        )
    if blocked:
        text += " Blocked: " + ", ".join(f"`{title}`" for title in blocked) + "."
    for name, why in sorted((untied or {}).items()):
        which = "it" if len(names) == 1 else f"the {name} denial"
        text += f" agy did not say which step {which} blocked: {why}."
    return text


def denied_permissions(denied_actions: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """Permission names from ``result.denied_actions`` (1.1.27+)."""
    names = []
    for action in denied_actions or ():
        name = action.get("action") or action.get("display_name")
        if isinstance(name, str) and name:
            names.append(name)
    return names


def parse_duration(text: str) -> dt.timedelta | None:
    """Go durations such as ``100h23m59s`` or ``0s``."""
    parts = _DURATION_PART.findall(text)
    if not parts:
        return None
    seconds = 0.0
    for value, unit in parts:
        seconds += float(value) * _DURATION_SECONDS[unit]
    try:
        return dt.timedelta(seconds=seconds)
    except OverflowError:  # beyond any calendar (or infinite): no date to name
        return None


@attrs.frozen
class QuotaError:
    """A quota or capacity failure, parsed from ``result.error`` / ``AGY_ERROR``."""

    text: str
    resets_in: str | None = None
    resets_at: str | None = None
    details: Mapping[str, Any] | None = None

    def message(self, *, after_answer: bool = False) -> str:
        """What to show; ``after_answer``: agy answered first, so this names
        what failed after the answer rather than the turn."""
        text = self.text if after_answer else f"agy could not run this turn: {self.text}"
        if self.resets_at:
            text += f" (quota resets at {self.resets_at})"
        return text

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"error": self.text}
        if self.resets_in:
            meta["resetsIn"] = self.resets_in
        if self.resets_at:
            meta["resetsAt"] = self.resets_at
        if self.details:
            meta.update(camel_keys(self.details))
        return meta


def camel_keys(details: Mapping[str, Any]) -> dict[str, Any]:
    """``AGY_ERROR`` fields (snake_case) as ``_meta`` keys (camelCase)."""
    return {_camel(key): value for key, value in details.items()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def quota_error(
    text: str, details: Mapping[str, Any] | None, now: dt.datetime
) -> QuotaError | None:
    """A :class:`QuotaError` if ``text`` (or the AGY_ERROR details) is one."""
    haystack = text + " " + str((details or {}).get("short_error", ""))
    lowered = haystack.lower()
    is_quota = (
        any(word in lowered for word in _QUOTA_WORDS)
        or any(status in haystack for status in _QUOTA_STATUSES)
        or bool(details and details.get("error_code") in (429, 503))
    )
    if not is_quota:
        return None
    match = _RESETS_IN.search(haystack)
    resets_in = match.group("duration") if match and match.group("duration") else None
    resets_at = None
    if resets_in:
        delta = parse_duration(resets_in)
        try:
            at = None if delta is None else (now + delta).replace(microsecond=0)
        except OverflowError:  # after the year 9999
            at = None
        if at is not None:
            resets_at = at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return QuotaError(text=text.strip(), resets_in=resets_in, resets_at=resets_at, details=details)


PRINT_TIMEOUT_MESSAGE = (
    "agy's print timeout cut this turn short; the answer above may be incomplete. "
    "(The bridge runs agy with --print-timeout 0; an agy older than 1.2.6 or a "
    "settings override may still impose one.)"
)


def available_models(error_text: str) -> list[str]:
    """The model names listed after ``Available models:`` in agy's error."""
    _, found, tail = error_text.partition("Available models:")
    if not found:
        return []
    return [line.strip() for line in tail.splitlines() if line.strip() and line.strip() != "..."]
