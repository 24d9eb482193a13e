"""The log: private files, and payloads cut to a few KiB with their total size."""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agybridge.acp import codec, models
from agybridge.agent.wirelog import log_initialize
from agybridge.logs import (
    MAX_ANSWER_BYTES,
    MAX_LOGGED_BYTES,
    configure_logging,
    lines_naming,
    truncated,
)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_truncated_keeps_short_text_and_names_the_size_of_long() -> None:
    """Short payloads pass whole; long ones are cut at the limit and say how big they were."""
    assert truncated("abc", 10) == "abc"
    cut = truncated("x" * 100, 10)
    assert cut == "xxxxxxxxxx... [90 more bytes, 100 in total]"
    assert truncated(b"\xff" * 3, 10) == "\ufffd" * 3


def test_an_existing_log_directory_keeps_its_mode(tmp_path: Path, restore_logging: None) -> None:
    """AGYBRIDGE_LOG_FILE in a directory that exists (a shared one, the home
    directory): the file is 0600, the directory is not chmodded."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    log_file = shared / "agybridge.log"
    assert configure_logging(log_file) == log_file
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755


def test_log_file_and_rotations_are_private(tmp_path: Path, restore_logging: None) -> None:
    """0600 file in a new 0700 directory, also after rotation, also for an old 0644 file."""
    log_file = tmp_path / "new" / "agybridge.log"
    assert configure_logging(log_file) == log_file
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(log_file.parent.stat().st_mode) == 0o700
    handler = next(h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler))
    assert isinstance(handler, logging.handlers.RotatingFileHandler)
    logging.getLogger("t").warning("before rotation")
    handler.doRollover()
    logging.getLogger("t").warning("after rotation")
    for path in (log_file, log_file.with_name("agybridge.log.1")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    old = tmp_path / "old.log"
    old.write_text("")
    old.chmod(0o644)
    configure_logging(old)
    assert stat.S_IMODE(old.stat().st_mode) == 0o600


def test_a_megabyte_payload_is_logged_cut(
    tmp_path: Path, restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 5 MiB message reaches stderr and the file as a few KiB plus its total size."""
    log_file = tmp_path / "agybridge.log"
    configure_logging(log_file)
    payload = "{" + "a" * (5 * 2**20)
    logging.getLogger("agybridge.jsonrpc").warning("invalid message: %s", payload)
    for handler in logging.getLogger().handlers:
        handler.flush()
    err = capsys.readouterr().err
    text = log_file.read_text()
    for out in (err, text):
        assert len(out) < 2 * MAX_LOGGED_BYTES
        assert f"{len('invalid message: ') + len(payload)} in total" in out


def test_client_data_with_line_breaks_stays_on_one_log_line(
    tmp_path: Path, restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``clientInfo`` name with a newline (or a carriage return, an escape
    sequence, a line separator) is written escaped: one record, one line in
    the file and on stderr, so it cannot forge a log line or drive a terminal."""
    log_file = tmp_path / "agybridge.log"
    configure_logging(log_file)
    forged = "zed\n2026-12-02 01:00:00,000 1 ERROR agybridge.server: forged\r\x1b[2J\u2028x"
    request = codec.structure(
        {"protocolVersion": 1, "clientInfo": {"name": forged, "version": "1"}},
        models.InitializeRequest,
    )
    log_initialize(request)
    logging.getLogger("agybridge.session").warning("session %s: a warning", forged)
    for handler in logging.getLogger().handlers:
        handler.flush()
    lines = log_file.read_text().splitlines()
    assert len(lines) == 2, lines
    assert "initialize from zed\\n2026-12-02" in lines[0]
    assert "\\r\\x1b[2J\\u2028x 1: protocol 1" in lines[0]
    assert capsys.readouterr().err.count("\n") == 1


def test_lines_naming_reads_rotated_files_oldest_first_within_the_byte_bound(
    tmp_path: Path,
) -> None:
    """``_agybridge/session/logs``'s reader: the session's lines from .3 to the
    live file, the newest ``limit``, cut from the oldest at MAX_ANSWER_BYTES."""
    log = tmp_path / "agybridge.log"
    (tmp_path / "agybridge.log.2").write_text("[s1] oldest\n[s2] other\n", encoding="utf-8")
    (tmp_path / "agybridge.log.1").write_text("[s1] middle\n", encoding="utf-8")
    log.write_text("[s1] newest\n", encoding="utf-8")
    assert lines_naming(log, "[s1]", 10) == (["[s1] oldest", "[s1] middle", "[s1] newest"], False)
    assert lines_naming(log, "[s1]", 2) == (["[s1] middle", "[s1] newest"], True)
    big = "x" * (MAX_ANSWER_BYTES // 2)
    log.write_text(f"[s1] {big}\n[s1] {big}\n[s1] last\n", encoding="utf-8")
    lines, cut = lines_naming(log, "[s1]", 10)
    assert cut and lines[-1] == "[s1] last" and len(lines) == 2
    assert lines_naming(tmp_path / "none.log", "[s1]", 5) == ([], False)
