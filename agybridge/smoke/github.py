"""GitHub Actions workflow commands, written to the log when ``GITHUB_ACTIONS=true``.

One ``::error`` per failed or errored cell and one ``::warning`` per flaky cell (they
show on the run's summary and the pull request), and each such cell's transcript in a
collapsed ``::group::``. Values are escaped as the runner expects (``%``, CR, LF; and
``:`` ``,`` in properties); a transcript is agy's output, so it is shown between
``::stop-commands::`` and its one-off token, and no line of it is taken for a command.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping

from .results import CellResult

#: Transcript lines shown per cell in the log (the reports have them all).
GROUP_LINES = 200


def enabled(env: Mapping[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get("GITHUB_ACTIONS") == "true"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def error(message: str, matrix: str) -> str:
    """One ``::error`` about the run as a whole."""
    return f"::error file={_property(matrix)},title=agybridge smoke::{_data(message[:2000])}"


def commands(results: list[CellResult], matrix: str, token: str | None = None) -> list[str]:
    """The workflow command lines for ``results`` (``matrix``: the file they came from;
    ``token``: what ends ``::stop-commands::``, random unless given)."""
    token = token or secrets.token_hex(16)
    lines: list[str] = []
    for result in results:
        if result.status not in ("failed", "error", "flaky"):
            continue
        title = f"smoke {result.status}: {result.cell.id}"
        if result.error is not None:
            message = f"{result.error.kind}: {result.error.message}"
        elif result.failures:
            message = "; ".join(f.text() for f in result.failures)
        else:
            causes = [a.error.kind if a.error else "failure" for a in result.earlier]
            message = f"passed on attempt {result.attempts} after: {', '.join(causes)}"
        level = "warning" if result.status == "flaky" else "error"
        lines.append(
            f"::{level} file={_property(matrix)},title={_property(title)}::{_data(message[:2000])}"
        )
        lines.append(f"::group::transcript of {_data(result.cell.id)}")
        lines.append(f"::stop-commands::{token}")
        for entry in result.record.transcript[-GROUP_LINES:]:
            lines += entry.splitlines() or [""]
        lines += [f"::{token}::", "::endgroup::"]
    return lines
