"""Golden transcripts: every real capture maps to its reviewed ACP updates.

Expected files are written by ``python -m tests.golden`` (never by a test)
and reviewed; each emitted message is also validated against the official
ACP schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ...acp_wire import WireValidator
from ...golden import captures, golden_path, produce


@pytest.mark.parametrize("capture", captures(), ids=lambda p: p.name)
def test_capture_matches_golden(capture: Path) -> None:
    """The capture produces exactly the reviewed update list."""
    expected_path = golden_path(capture)
    assert expected_path.exists(), f"run `python -m tests.golden` to create {expected_path}"
    expected = [json.loads(line) for line in expected_path.read_text().splitlines()]
    assert json.loads(json.dumps(produce(capture))) == expected


@pytest.mark.parametrize("capture", captures(), ids=lambda p: p.name)
def test_capture_updates_are_schema_valid(capture: Path) -> None:
    """Every session/update the mapper writes validates against the ACP schema."""
    validator = WireValidator()
    for message in produce(capture):
        if "method" in message:
            validator.feed("a2c", message)
    assert validator.problems == []
    assert validator.count > 0 or capture.suffix == ".txt"
