"""Rendering the doctor's checks: ✓/✗ lines with fixes, or JSON for tools."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .checks import Check, Status, cause_of, failures

_MARK = {Status.OK: "✓", Status.FAIL: "✗", Status.PENDING: "…", Status.SKIPPED: "-"}


def lines(checks: Sequence[Check]) -> list[str]:
    """One line per check; a failed one adds an indented ``fix:`` line."""
    out: list[str] = []
    for check in checks:
        out.append(f"{_MARK[check.status]} {check.name}: {check.summary}")
        if check.status is Status.FAIL and check.fix:
            out.append(f"    fix: {check.fix}")
    return out


def one_line_each(checks: Sequence[Check]) -> list[str]:
    """One line per check, the fix on the same line (``/doctor``'s list items)."""
    return [
        f"{_MARK[c.status]} {c.name}: {c.summary}"
        + (f" — fix: {c.fix}" if c.status is Status.FAIL and c.fix else "")
        for c in checks
    ]


def text(checks: Sequence[Check]) -> str:
    failed = failures(checks)
    verdict = "all checks passed" if failed == 0 else f"{failed} check(s) failed"
    return "\n".join([*lines(checks), "", verdict]) + "\n"


def to_json(checks: Sequence[Check]) -> str:
    doc = {
        "ok": failures(checks) == 0,
        "failed": failures(checks),
        "checks": [
            {
                "name": c.name,
                "status": c.status.value,
                "summary": c.summary,
                "fix": c.fix,
                # A failed check's catalogue id: what the wire's errors name.
                "cause": cause_of(c),
            }
            for c in checks
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
