"""One writer per session database: a lock file beside it (``<db>.lock``).

A daemon holds it exclusively for its whole life and writes its pid and
socket in it; a stdio bridge holds it shared, so any number of bridges share
a database as before (their sessions are their own), but a daemon and a
bridge, or two daemons, never do: the daemon keeps sessions alive across
clients, and a second process journalling the same session would write
turns over its turns (issue 28: a session used through two daemons lost
turns). The one that comes second refuses to start, naming the first.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..locks import try_file_lock
from .errors import StoreError
from .paths import check_path


class StoreInUseError(StoreError):
    """Another process owns the database (the message names it and what to do)."""


def claim_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".lock")


def claim_for_daemon(db_path: Path, socket: str) -> int:
    """Lock ``db_path`` for this daemon; the fd to keep open (`release_claim` it).

    Raises:
        StorePathError: ``db_path`` is not a file (nothing is made beside it).
        StoreInUseError: another daemon, or a stdio bridge, has it.
    """
    check_path(db_path)
    path = claim_path(db_path)
    fd = _lock(path, exclusive=True)
    if fd is None:
        shared = _lock(path, exclusive=False)
        if shared is not None:  # only shared holders: bridges
            os.close(shared)
            raise StoreInUseError(
                f"the session database {db_path} is in use by agybridge serving an editor "
                "over stdio (`agybridge` without `attach`): one daemon per database, and "
                "no other process beside it; close those editors' agents, or set "
                "AGYBRIDGE_DB to another file"
            )
        raise StoreInUseError(
            f"the session database {db_path} is in use by another agybridge daemon "
            f"({_holder(path)}): one daemon per database; stop it (`agybridge stop` with its "
            "AGYBRIDGE_SOCKET), or set AGYBRIDGE_DB to another file"
        )
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}, socket {socket}\n".encode(), 0)
    return fd


def claim_for_bridge(db_path: Path) -> int:
    """Share ``db_path`` with other stdio bridges; the fd to keep open.

    Raises:
        StorePathError: ``db_path`` is not a file (nothing is made beside it).
        StoreInUseError: a daemon has it.
    """
    check_path(db_path)
    path = claim_path(db_path)
    fd = _lock(path, exclusive=False)
    if fd is None:
        raise StoreInUseError(
            f"the session database {db_path} is in use by the agybridge daemon "
            f"({_holder(path)}): run `agybridge attach` in the editor instead of `agybridge` "
            "to use the daemon's sessions, or set AGYBRIDGE_DB to another file"
        )
    return fd


def release_claim(fd: int, *, daemon: bool) -> None:
    """Let go of a claim (a daemon's says nobody holds it any more)."""
    if daemon:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
    os.close(fd)


def _lock(path: Path, *, exclusive: bool) -> int | None:
    try:
        return try_file_lock(str(path), exclusive=exclusive)
    except OSError as exc:
        raise StoreInUseError(
            f"cannot lock the session database through {path}: {exc.strerror or exc} "
            "(a symlink there is not followed); remove it, or set AGYBRIDGE_DB to another file"
        ) from None


def _holder(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip() or "pid unknown"
    except OSError:
        return "pid unknown"
