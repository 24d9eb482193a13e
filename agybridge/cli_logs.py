"""``agybridge logs [-f] [-n N]``: the log file's tail, optionally followed.

Following polls the file's size every :data:`FOLLOW_POLL_S` (a terminal
command, not the bridge: there is nothing to wait on but the file) and
starts again from the top when the bridge rotates it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import deque
from pathlib import Path

from .logs import lines_naming

FOLLOW_POLL_S = 0.5


def tail_lines(path: Path, count: int) -> list[str]:
    """The last ``count`` lines of ``path`` (streamed: the file may be large)."""
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        return list(deque(handle, maxlen=count)) if count > 0 else []


def run(path: Path | None, count: int, follow: bool, session: str | None = None) -> int:
    """Print the tail; with ``follow``, keep printing until Ctrl+C. ``session``:
    only the lines naming it (its tag, as ``_agybridge/session/logs`` reads them),
    from the rotated files too."""
    if path is None:
        print("agybridge: the log file is disabled (AGYBRIDGE_LOG_FILE is empty)", file=sys.stderr)
        return 1
    if not path.exists() and not follow:
        print(f"agybridge: no log yet at {path} (the bridge writes it when an editor starts it)",
              file=sys.stderr)  # fmt: skip
        return 1
    if path.exists():
        if session is None:
            sys.stdout.writelines(tail_lines(path, count))
        else:
            sys.stdout.writelines(f"{line}\n" for line in lines_naming(path, session, count)[0])
        sys.stdout.flush()
    if not follow:
        return 0
    with contextlib.suppress(KeyboardInterrupt):
        _follow(path, session.encode() if session else b"")
    return 0


def _follow(path: Path, needle: bytes) -> None:
    """Print what is appended (only lines holding ``needle`` when it is not empty)."""
    pending = b""
    position = path.stat().st_size if path.exists() else 0
    inode = path.stat().st_ino if path.exists() else None
    while True:
        time.sleep(FOLLOW_POLL_S)
        try:
            info = path.stat()
        except FileNotFoundError:
            continue
        if info.st_ino != inode or info.st_size < position:  # rotated or truncated
            inode, position = info.st_ino, 0
        if info.st_size > position:
            with path.open("rb") as handle:
                handle.seek(position)
                chunk = handle.read(info.st_size - position)
            position += len(chunk)
            if needle:
                *lines, pending = (pending + chunk).split(b"\n")
                chunk = b"".join(line + b"\n" for line in lines if needle in line)
            os.write(sys.stdout.fileno(), chunk)
