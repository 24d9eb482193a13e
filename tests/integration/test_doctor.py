"""``agybridge doctor`` against the fake agy, and the doctor's pure pieces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from agybridge.agy import SignIn, classify_probe
from agybridge.config import Settings
from agybridge.doctor import checks
from agybridge.doctor.checks import Status

from ..acp_wire import Harness

TIMEOUT_S = 120


async def doctor(harness: Harness, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    with trio.fail_after(TIMEOUT_S):
        done = await trio.run_process(
            [sys.executable, "-m", "agybridge", "doctor", *args],
            env=harness.env(**env),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    await harness.assert_no_leftovers()
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


async def test_all_good_exits_0(harness: Harness) -> None:
    """Signed-in fake agy, fresh paths: every check passes, exit 0."""
    done = await doctor(harness)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✗" not in done.stdout and "all checks passed" in done.stdout
    for name in ("signed in", "permission gate", "models and agents", "version", "OS"):
        assert f"✓ {name}:" in done.stdout


async def test_signed_out_fails_naming_sign_in(harness: Harness) -> None:
    """Signed out: non-zero exit, a line naming sign-in with the fix; the
    checks that need sign-in are skipped, not counted."""
    done = await doctor(harness, FAKE_AGY_SIGNED_OUT="1")
    assert done.returncode == 1, done.stdout
    assert "✗ signed in: agy is not signed in" in done.stdout
    assert "fix: run `agybridge login`" in done.stdout
    assert "- permission gate: not checked: agy is not signed in" in done.stdout


async def test_json_output_counts_failures(harness: Harness) -> None:
    done = await doctor(harness, "--json", FAKE_AGY_SIGNED_OUT="1")
    report = json.loads(done.stdout)
    assert report["failed"] == done.returncode == 1 and report["ok"] is False
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == ["signed in"] and failed[0]["fix"]
    # The wire's id for the same problem (`agybridge.causes`); a passed check has none.
    assert failed[0]["cause"] == "not_signed_in"
    assert {c["cause"] for c in report["checks"] if c["status"] != "fail"} == {None}


def _not_executable(tmp: Path) -> Path:
    (tmp / "agy").touch()
    return tmp / "agy"


#: An unusable AGY_BIN: how to make it, the catalogue cause, what the doctor says.
BAD_AGY_BINS = [
    pytest.param(
        lambda tmp: tmp / "missing" / "agy", "agy_not_found", "does not exist", id="missing"
    ),
    pytest.param(
        lambda tmp: tmp, "agy_is_directory", "is a directory, not the agy program", id="directory"
    ),
    pytest.param(_not_executable, "agy_not_executable", "is not executable", id="not-executable"),
]


@pytest.mark.parametrize(("make", "cause", "words"), BAD_AGY_BINS)
async def test_a_bad_agy_bin_has_its_own_message_and_catalogue_cause(
    harness: Harness, make: Callable[[Path], Path], cause: str, words: str
) -> None:
    """Missing, directory and non-executable AGY_BIN: three messages, each a fix,
    and ``doctor --json`` names each with the id session/new answers."""
    target = make(harness.tmp_path)
    done = await doctor(harness, AGY_BIN=str(target))
    assert done.returncode == 1, done.stdout
    first = done.stdout.splitlines()[1]
    assert first == f"✗ agy: AGY_BIN={target} {words}"
    assert done.stdout.splitlines()[2].startswith("    fix: ")
    report = json.loads((await doctor(harness, "--json", AGY_BIN=str(target))).stdout)
    (agy,) = [c for c in report["checks"] if c["name"] == "agy"]
    assert (agy["status"], agy["cause"]) == ("fail", cause)


def test_every_failed_check_has_a_catalogue_cause(tmp_path: Path) -> None:
    """Each check the doctor can fail maps to a catalogue row (no KeyError, no typo)."""
    from agybridge import causes  # noqa: PLC0415

    (tmp_path / "f").write_text("")  # a staging "dir" that is a file
    failing = [
        checks.version("1.1.9"),
        checks.version(None, "exit 1"),
        checks.gate("no hooks"),
        checks.discovery([], [], "UNAVAILABLE (code 503): down"),
        checks.operating_system("win32"),
        checks.private_dir("staging dir", str(tmp_path / "f")),
        checks.log_file(tmp_path),
    ]
    found = [checks.cause_of(c) for c in failing]
    assert found == [
        "agy_too_old",
        "agy_fails",
        "gate_unavailable",
        "unavailable",
        "platform_unsupported",
        "staging_unusable",
        "log_file_unusable",
    ]
    assert all(cause in causes.CAUSES for cause in found)


def test_unset_agy_bin_is_told_apart(tmp_path: Path) -> None:
    settings = Settings.from_env({"PATH": str(tmp_path)})
    check, found = checks.agy_binary(settings)
    assert found is None and check.summary == "agy is not on PATH and AGY_BIN is not set"


def test_directory_holding_agy_suggests_the_binary(tmp_path: Path) -> None:
    (tmp_path / "agy").write_text("#!/bin/sh\n")
    check, _ = checks.agy_binary(Settings.from_env({"AGY_BIN": str(tmp_path)}))
    assert check.fix == f"set AGY_BIN={tmp_path / 'agy'}"


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "state"),
    [
        (0, '{"status":"SUCCESS","command":{}}', "", SignIn.SIGNED_IN),
        (1, '{"status":"ERROR","error":"authentication failed or timed out"}', "",
         SignIn.SIGNED_OUT),
        (1, "", "error getting token source: You are not logged into Antigravity.",
         SignIn.SIGNED_OUT),
        (1, "", "Error: authentication timed out.", SignIn.SIGNED_OUT),
        (2, "", "panic: boom", SignIn.UNKNOWN),
        (0, '{"result":{"status":"ERROR","error":"network down"}}', "", SignIn.UNKNOWN),
    ],
)  # fmt: skip
def test_probe_classification(returncode: int, stdout: str, stderr: str, state: SignIn) -> None:
    """The probe's verdict comes from the stderr classifier's AUTH class."""
    assert classify_probe(returncode, stdout, stderr).state is state


@pytest.mark.parametrize(
    ("text", "status"),
    [("1.2.14", Status.OK), ("agy version 1.1.18", Status.OK), ("1.1.9", Status.FAIL),
     ("dev", Status.OK)],
)  # fmt: skip
def test_version_minimum(text: str, status: Status) -> None:
    assert checks.version(text).status is status


def test_private_dir_modes(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    tight = tmp_path / "tight"
    tight.mkdir(mode=0o700)
    assert checks.private_dir("d", str(loose)).fix == f"chmod 700 {loose}"
    assert checks.private_dir("d", str(tight)).status is Status.OK
    assert checks.private_dir("d", str(tmp_path / "new")).status is Status.OK


def test_windows_is_not_supported() -> None:
    assert checks.operating_system("win32").status is Status.FAIL
    assert checks.operating_system("linux").status is Status.OK


def test_log_file_that_is_a_directory_fails(tmp_path: Path) -> None:
    """AGYBRIDGE_LOG_FILE naming a directory: the bridge cannot log there, so
    the check fails with a fix (it said ✓ before, even for a 0700 directory)."""
    folder = tmp_path / "logs"
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o700)
    check = checks.log_file(folder)
    assert check.status is Status.FAIL, check
    assert "is a directory" in check.summary and check.fix


def test_database_below_a_regular_file_fails(tmp_path: Path) -> None:
    """AGYBRIDGE_DB inside something that is a file, not a folder: it can never
    be created, so the check fails (it said "not created yet" ✓ before)."""
    (tmp_path / "afile").write_text("")
    from agybridge.doctor.gather import _database  # noqa: PLC0415

    check = _database(tmp_path / "afile" / "agybridge.db")
    assert check.status is Status.FAIL, check
    assert "not a directory" in check.summary and check.fix


def _database_check(path: Path) -> checks.Check:
    from agybridge.doctor.gather import _database  # noqa: PLC0415

    return _database(path)


def test_a_corrupt_database_is_reported_and_left_as_it_is(tmp_path: Path) -> None:
    """The doctor only looks: a file that is not a healthy database fails the
    check, saying what the bridge will do, and is not moved aside (it said ✓
    with 0 sessions before, having moved the user's file away)."""
    path = tmp_path / "agybridge.db"
    garbage = b"SQLite format 3\x00" + bytes(range(256)) * 8
    path.write_bytes(garbage)
    check = _database_check(path)
    assert check.status is Status.FAIL, check
    assert "move it aside" in check.summary and check.fix
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agybridge.db"]


def test_a_database_in_use_is_counted_without_being_changed(tmp_path: Path) -> None:
    """A healthy database another process has open (WAL): its sessions are
    counted read-only; an old empty file is reported, not migrated."""
    from agybridge.store import SCHEMA_VERSION, SessionRecord, Store  # noqa: PLC0415

    path = tmp_path / "agybridge.db"
    with Store.open(path) as store:
        store.upsert_session(SessionRecord("s1", "/w"))
        store.upsert_session(SessionRecord("s2", "/w"))
        check = _database_check(path)
    assert check.status is Status.OK, check
    assert f"schema v{SCHEMA_VERSION}" in check.summary and "2 session(s)" in check.summary
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    check = _database_check(empty)
    assert check.status is Status.OK, check
    assert "schema v0" in check.summary and empty.read_bytes() == b""


def test_a_database_of_a_newer_agybridge_fails_untouched(tmp_path: Path) -> None:
    import sqlite3  # noqa: PLC0415

    from agybridge.store import SCHEMA_VERSION, Store  # noqa: PLC0415

    path = tmp_path / "agybridge.db"
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    check = _database_check(path)
    assert check.status is Status.FAIL, check
    assert "upgrade agybridge" in check.summary
    assert path.read_bytes() == before
