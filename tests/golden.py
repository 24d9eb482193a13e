"""Golden transcripts: each real agy capture mapped to its exact ACP updates.

``python -m tests.golden`` rewrites ``tests/data/golden/*.ndjson`` from the
captures; review the diff before committing. The tests only compare, they
never write.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

from agybridge.acp import codec, models
from agybridge.agy import events
from agybridge.agy.stderr import classify_stderr
from agybridge.translate.mapper import TurnMapper

from .conftest import SAMPLES, sample_files

GOLDEN = Path(__file__).parent / "data" / "golden"
SESSION_ID = "sess_golden"
CWD = "/home/user/project"
#: Fixed "now" so quota reset times are reproducible.
NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def split_turns(lines: list[str]) -> list[list[events.AgyEvent | events.MalformedLine]]:
    """A capture's events, one list per turn, each ending at its result."""
    turns: list[list[events.AgyEvent | events.MalformedLine]] = [[]]
    for line in lines:
        event = events.parse_event(line)
        turns[-1].append(event)
        if isinstance(event, events.ResultEvent):
            turns.append([])
    return [turn for turn in turns if turn]


def render(capture: Path) -> list[dict[str, Any]]:
    """The session/update notifications (wire form) a capture produces, in order."""
    lines = [line for line in capture.read_text().splitlines() if line.strip()]
    messages: list[dict[str, Any]] = []
    previous: events.Usage | None = None
    for index, turn in enumerate(split_turns(lines)):
        mapper = TurnMapper(
            message_id=f"msg_golden_{index}", cwd=CWD, now=NOW, previous_result_usage=previous
        )
        for event in turn:
            if mapper.outcome is not None:
                break
            for update in mapper.feed(event):
                messages.append(notification(update))
            if isinstance(event, events.ResultEvent) and event.result.usage is not None:
                previous = event.result.usage
        if mapper.outcome is not None:
            messages.append({"turnEnd": mapper.outcome.kind.value, "meta": mapper.response_meta()})
    return messages


def render_stderr(capture: Path) -> list[dict[str, Any]]:
    """Updates a turn produces from a capture of stderr lines, then an empty SUCCESS."""
    mapper = TurnMapper(message_id="msg_golden_stderr", cwd=CWD, now=NOW)
    messages = []
    for line in capture.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            for update in mapper.feed_stderr(classify_stderr(line)):
                messages.append(notification(update))
    for update in mapper.feed(events.ResultEvent(events.Result(status="SUCCESS", response=""))):
        messages.append(notification(update))
    messages.append(
        {
            "turnEnd": mapper.outcome.kind.value if mapper.outcome else None,
            "meta": mapper.response_meta(),
        }
    )
    return messages


def notification(update: models.SessionUpdate) -> dict[str, Any]:
    params = codec.unstructure(models.SessionNotification(session_id=SESSION_ID, update=update))
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def captures() -> list[Path]:
    # The stdin-input sample is what agy read, not what it wrote.
    files = [f for f in sample_files() if "stdin" not in f.name]
    stderr = SAMPLES / "stderr-lines-observed.txt"
    return files + ([stderr] if stderr.exists() else [])


def golden_path(capture: Path) -> Path:
    return GOLDEN / (capture.stem + ".ndjson")


def produce(capture: Path) -> list[dict[str, Any]]:
    return render_stderr(capture) if capture.suffix == ".txt" else render(capture)


def main() -> int:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for capture in captures():
        path = golden_path(capture)
        path.write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in produce(capture)))
        print(f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
