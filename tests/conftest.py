"""Shared test fixtures and paths."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import settings

from .acp_wire import Harness

# Deterministic property tests: the same examples on every run and machine, and
# no per-example deadline (a loaded 2-core CI machine must not make them flaky).
settings.register_profile("agybridge", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("agybridge")

REPO = Path(__file__).resolve().parents[1]
#: Real agy captures, copied verbatim into the repository (see its README), so
#: every clone runs every capture test; none of them may skip.
SAMPLES = REPO / "tests" / "data" / "agy-captures"


def sample_files() -> list[Path]:
    return sorted(SAMPLES.glob("*.ndjson"))


@pytest.fixture
def samples_dir() -> Path:
    return SAMPLES


@pytest.fixture
async def harness(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """A bridge environment in ``tmp_path`` (plus the test module's
    ``HARNESS_ENV``); kills leftovers as a safety net (every test asserts
    first that there are none)."""
    h = Harness(tmp_path, extra_env=dict(getattr(request.module, "HARNESS_ENV", {})))
    try:
        yield h
    finally:
        h.kill_leftovers()
