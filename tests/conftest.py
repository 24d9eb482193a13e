"""Shared test fixtures and paths."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Real agy captures, read from the shared reference folder beside the repo
#: (never copied into the project); tests using them skip when it is absent.
SAMPLES = REPO.parent / "shared" / "agy" / "samples"


def sample_files() -> list[Path]:
    return sorted(SAMPLES.glob("*.ndjson")) if SAMPLES.is_dir() else []


@pytest.fixture
def samples_dir() -> Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"agy samples not found at {SAMPLES}")
    return SAMPLES
