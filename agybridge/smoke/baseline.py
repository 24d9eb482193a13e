"""Compare a run with an earlier JSON report: a cell that grew too slow or too hungry fails.

The baseline is any earlier ``--json`` report; cells match by id (case and axis values).
A cell that passed its expectations fails when its duration exceeds ``max_slowdown``
times the baseline's, or its tokens ``max_token_growth`` times; every compared cell gets
the deltas for the Markdown. Cells the baseline lacks (or that errored) are not compared.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .results import CellResult, Failure


class BaselineError(Exception):
    """The baseline file cannot be read or is not a report of this tool."""


def load(path: Path) -> dict[str, dict[str, Any]]:
    """Cell id -> the baseline's cell entry."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BaselineError(f"cannot read the baseline {path}: {exc}") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) and "id" in c for c in cells):
        raise BaselineError(f"{path} is not an `agybridge smoke run --json` report")
    return {str(c["id"]): c for c in cells}


def _number(value: Any) -> float | int | None:
    """A finite number from the baseline, else None (Python's json reads NaN, Infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _growth(now: float | int | None, before: float | int | None) -> float | None:
    if now is None or before is None or before <= 0:
        return None
    return float(now) / float(before)


def compare(
    results: list[CellResult],
    baseline: dict[str, dict[str, Any]],
    max_slowdown: float,
    max_token_growth: float,
) -> None:
    """Annotate ``results`` with deltas; fail the cells past a threshold."""
    for result in results:
        before = baseline.get(result.cell.id)
        if before is None or result.status not in ("passed", "failed"):
            continue
        if before.get("status") not in ("passed", "failed"):
            continue
        before_s, before_tokens = _number(before.get("duration_s")), _number(before.get("tokens"))
        duration = _growth(result.duration_s, before_s)
        tokens = _growth(result.record.tokens, before_tokens)
        result.baseline = {
            "duration_s": before_s,
            "tokens": before_tokens,
            "duration_ratio": None if duration is None else round(duration, 3),
            "token_ratio": None if tokens is None else round(tokens, 3),
        }
        if duration is not None and duration > max_slowdown:
            result.failures.append(
                Failure(
                    "baseline.duration",
                    f"≤ {max_slowdown:g} × {before['duration_s']:.2f} s",
                    f"{result.duration_s:.2f} s ({duration:.2f}×)",
                )
            )
        if tokens is not None and tokens > max_token_growth:
            result.failures.append(
                Failure(
                    "baseline.tokens",
                    f"≤ {max_token_growth:g} × {before['tokens']} tokens",
                    f"{result.record.tokens} tokens ({tokens:.2f}×)",
                )
            )
        if result.failures:
            result.status = "failed"
