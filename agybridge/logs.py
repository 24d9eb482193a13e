"""Logging: warnings and up to stderr, everything at the set level to a file.

stdout is never a log destination: it carries ACP bytes only.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
_LOG_FILE_BYTES = 10 * 2**20  # 10 MiB per file, 3 kept


def configure_logging(log_file: Path | None, level: str = "INFO") -> Path | None:
    """Install the handlers; returns the log file actually used (None if none)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(level)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    to_stderr.setFormatter(logging.Formatter("agybridge: %(levelname)s %(message)s"))
    root.addHandler(to_stderr)
    if log_file is None:
        return None
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=_LOG_FILE_BYTES, backupCount=3, encoding="utf-8"
        )
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot write log file %s: %s", log_file, exc)
        return None
    to_file.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(to_file)
    return log_file
