"""Shared test fixtures and paths."""

from __future__ import annotations

import compileall
import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from .acp_wire import Harness
from .other_user import reachable_tmp  # noqa: F401  # a fixture for the tests that need a second user

# Deterministic property tests: the same examples on every run and machine, and
# no per-example deadline (a loaded 2-core CI machine must not make them flaky).
settings.register_profile("agybridge", derandomize=True, deadline=None, print_blob=True)
# AGYBRIDGE_HYPOTHESIS_SEEDED=1: other examples than CI's, chosen by pytest's
# --hypothesis-seed=N (to run the property tests at many seeds by hand).
settings.register_profile("seeded", derandomize=False, deadline=None, print_blob=True)
settings.load_profile("seeded" if os.environ.get("AGYBRIDGE_HYPOTHESIS_SEEDED") else "agybridge")

REPO = Path(__file__).resolve().parents[1]
#: Test data (captures, transcripts, fixtures): test modules find it through
#: here, not their own ``__file__``, so they can live in any test folder.
DATA_DIR = REPO / "tests" / "data"
#: Real agy captures, copied verbatim into the repository (see its README), so
#: every clone runs every capture test; none of them may skip.
SAMPLES = REPO / "tests" / "data" / "agy-captures"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package and the fake agy to bytecode once, before any test.

    The suite starts well over a thousand bridge and fake-agy interpreters; where
    PYTHONDONTWRITEBYTECODE is set (it is on the machines CI runs on) none of them writes
    its bytecode, so each compiled every module it imported again: about 0.5 of
    the 1.2 s of CPU a one-bridge test costs (8 such tests: 9.6 -> 5.5 s). Bytecode
    that exists is read whatever that variable says. Once per run, not per xdist
    worker; files already compiled are only checked."""
    if hasattr(session.config, "workerinput"):
        return
    for package in ("agybridge", "fake_agy"):
        compileall.compile_dir(REPO / package, quiet=1)


def sample_files() -> list[Path]:
    return sorted(SAMPLES.glob("*.ndjson"))


@pytest.fixture(autouse=True)
def _restore_logger_levels() -> Iterator[None]:
    """A test that runs a command in-process (``agybridge smoke`` quiets the
    jsonrpc logger) must not change what later tests' ``caplog`` sees: test
    order depends on the folder layout."""
    levels = {
        name: logger.level
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger) and name.startswith("agybridge")
    }
    yield
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and name.startswith("agybridge"):
            logger.setLevel(levels.get(name, logging.NOTSET))


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
