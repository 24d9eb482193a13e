"""Logging: warnings and up to stderr, everything at the set level to a file.

stdout is never a log destination: it carries ACP bytes only.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import sys
from collections import deque
from contextvars import ContextVar
from pathlib import Path
from typing import Any

_FORMAT = "%(asctime)s %(process)d %(session_tag)s%(levelname)s %(name)s: %(message)s"
_LOG_FILE_BYTES = 10 * 2**20  # 10 MiB per file, 3 kept
#: Protocol payloads quoted in log lines are cut here: a 5 MiB bad line once
#: went whole into stderr and the log.
MAX_LOGGED_BYTES = 4 * 2**10  # 4 KiB


#: What would break a record's line (or drive a terminal) if logged raw: C0 controls
#: but tab, DEL, C1 (NEL) and the Unicode line/paragraph separators.
_LINE_BREAKERS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    return ascii(match.group())[1:-1]  # "\n", "\x1b", "\u2028"


def truncated(payload: str | bytes, limit: int = MAX_LOGGED_BYTES) -> str:
    """``payload`` for a log line: at most ``limit`` bytes, with the total size when cut."""
    data = payload.encode("utf-8", "replace") if isinstance(payload, str) else payload
    text = data[:limit].decode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return f"{text}... [{len(data) - limit} more bytes, {len(data)} in total]"


#: The session a task works for (set where a session's tasks start; trio's
#: tasks inherit it): the log file tags its lines with it, and
#: ``_agybridge/session/logs`` finds a session's lines (its agy's too) by it.
SESSION: ContextVar[str | None] = ContextVar("agybridge_session", default=None)


class _SessionTagFilter(logging.Filter):
    """Sets ``session_tag``: ``[<session id>] `` in a session's tasks, else empty."""

    def filter(self, record: logging.LogRecord) -> bool:
        session = SESSION.get()
        record.session_tag = f"[{session}] " if session else ""
        return True


class _TruncateFilter(logging.Filter):
    """Cuts every message to `MAX_LOGGED_BYTES`, naming the total size: payloads
    quoted in log lines (a bad protocol message, an agy line) can be megabytes.
    Line breaks and other control characters in it are escaped (``\\n``): what
    a client sends (its ``clientInfo`` name, a path) could otherwise forge log
    lines. One record is one line (a traceback, added by the formatter, aside)."""

    def filter(self, record: logging.LogRecord) -> bool:
        # Handlers share the record: the first one cuts it, once.
        if getattr(record, "agybridge_cut", False):
            return True
        record.agybridge_cut = True
        message = record.getMessage()
        cut = _LINE_BREAKERS.sub(_escaped, message)
        if len(cut) > MAX_LOGGED_BYTES // 4:  # cheap pre-check before encoding
            cut = truncated(cut)
        if cut != message:
            record.msg, record.args = cut, None
        return True


def configure_logging(log_file: Path | None, level: str = "INFO") -> Path | None:
    """Install the handlers; returns the log file actually used (None if none)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(level)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    to_stderr.setFormatter(logging.Formatter("agybridge: %(levelname)s %(message)s"))
    to_stderr.addFilter(_TruncateFilter())
    root.addHandler(to_stderr)
    if log_file is None:
        return None
    try:
        make_private_dir(log_file.parent)
        to_file = PrivateRotatingFileHandler(
            log_file, maxBytes=_LOG_FILE_BYTES, backupCount=3, encoding="utf-8"
        )
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot write log file %s: %s", log_file, exc)
        return None
    to_file.setFormatter(logging.Formatter(_FORMAT))
    to_file.addFilter(_TruncateFilter())
    to_file.addFilter(_SessionTagFilter())
    root.addHandler(to_file)
    return log_file


def make_private_dir(path: Path) -> None:
    """Create ``path`` 0700 (parents too) if it is missing. An existing one is
    left as it is: it may be a directory the user shares on purpose (the log
    file itself is 0600), and it was not ours to chmod (issue 28)."""
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Log files are 0600 (prompts' metadata, paths): created so, and each
    rotated-in file too (``_open`` runs at start and after every rollover)."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


#: ``_agybridge/session/logs``: at most this many bytes of lines in an answer.
MAX_ANSWER_BYTES = 256 * 2**10


def lines_naming(path: Path, needle: str, limit: int) -> tuple[list[str], bool]:
    """The last ``limit`` lines of the log file ``path`` and its rotated files
    (oldest first) that contain ``needle``, without their line ends, at most
    `MAX_ANSWER_BYTES` of them; and whether older ones were left out. Blocking
    (a worker thread's); a file that is not there has no lines.

    Raises:
        OSError: a file is there but cannot be read.
    """
    found: deque[str] = deque(maxlen=limit)
    seen = 0
    # The rotated files are path.3 (oldest) ... path.1, then path itself.
    for name in [f"{path}.{n}" for n in (3, 2, 1)] + [str(path)]:
        try:
            with open(name, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if needle in line:
                        found.append(line.rstrip("\n"))
                        seen += 1
        except FileNotFoundError:
            continue  # not rotated that often yet
    kept = list(found)
    size = sum(len(line.encode("utf-8")) + 1 for line in kept)
    while kept and size > MAX_ANSWER_BYTES:
        size -= len(kept.pop(0).encode("utf-8")) + 1
    return kept, len(kept) < seen
