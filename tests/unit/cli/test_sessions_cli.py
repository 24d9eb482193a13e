"""``agybridge sessions`` with arguments no stored session can match: messages, not tracebacks."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agybridge import cli_sessions
from agybridge.store import SessionRecord, Store


def run(db: Path, *argv: str) -> int:
    top = argparse.ArgumentParser(prog="agybridge")
    cli_sessions.add_parser(top.add_subparsers(dest="command", required=True))
    return cli_sessions.run(top.parse_args(["sessions", *argv]), db)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "sessions.db"
    with Store.open(path) as store:
        store.upsert_session(SessionRecord("abc", str(tmp_path)))
    return path


# A command-line argument that is not UTF-8 (a path or id typed with stray bytes)
# reaches Python as a lone surrogate (surrogateescape); no session can hold one.
NOT_UTF8 = "x\udcff"


@pytest.mark.parametrize("action", ["show", "export", "delete"])
def test_an_id_that_is_not_utf8_is_no_such_session(
    db: Path, action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(db, action, NOT_UTF8) == 1
    out, err = capsys.readouterr()
    assert out == "" and "no session" in err


@pytest.mark.parametrize("as_json", [False, True])
def test_a_cwd_that_is_not_utf8_lists_nothing(
    db: Path, as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(db, "list", "--cwd", NOT_UTF8, *(["--json"] if as_json else [])) == 0
    out, err = capsys.readouterr()
    assert out.strip() == ("[]" if as_json else "no sessions") and err == ""


@pytest.mark.parametrize("where", ["missing/dir/out.md", "."])
def test_export_to_an_unwritable_path_says_so(
    db: Path, tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / where
    assert run(db, "export", "abc", "-o", str(target)) == 1
    out, err = capsys.readouterr()
    assert out == "" and str(target) in err and "cannot write" in err


@pytest.mark.parametrize("action", [["list"], ["list", "--json"], ["show", "abc"]])
def test_a_reader_that_went_away_is_no_traceback(db: Path, action: list[str]) -> None:
    """``agybridge sessions list | head -1``: the pipe closes under us; stop quietly."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "agybridge", "sessions", *action],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env={**os.environ, "AGYBRIDGE_DB": str(db)},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode != 0
