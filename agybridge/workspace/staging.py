"""The private per-session directory agy gets with ``--add-dir`` (blocking I/O).

agy's stdin takes text only, so images and embedded files are written here and
named by absolute path in the prompt (contract.md §2.1); the session's MCP
config lives here too (``workspace/mcp.py``), since agy reads ``.agents/`` in
every ``--add-dir`` root (hooks-and-tools.md §A2). Never the user's project.

Layout, under a base directory in the bridge's state area::

    <base>/<pid>-<16 hex>/          0700  the --add-dir root
        .lock                       0600  flock held while the session lives
        attachments/<prompt key>/   0700  one prompt's staged files (0600),
                                          discarded after its turn
        .agents/mcp_config.json     0600  written by workspace/mcp.py

Every function here blocks: call it through ``trio.to_thread.run_sync``.
``keep`` (``AGYBRIDGE_KEEP_STAGING=1``, passed in by the caller) turns
``discard``, ``clear``, ``remove`` and ``sweep_stale`` into no-ops for debugging.

Stale directories (a bridge that crashed) are found by name and lock: the
owner's pid is gone, or the directory is older than ``max_age_s`` and no live
process holds its lock (pids are reused; locks die with their process).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ..acp.content import StagedFile

logger = logging.getLogger(__name__)

STALE_AFTER_S = 24 * 3600.0  # a leftover this old is removed even if its pid is in use
ATTACHMENTS = "attachments"
LOCK_NAME = ".lock"
_ROOT_NAME = re.compile(r"(?P<pid>\d+)-[0-9a-f]{16}")
_PROMPT_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class StagingError(Exception):
    """The staging directory could not be created or written."""


@attrs.define
class StagingArea:
    """One session's private ``--add-dir`` root; see the module docstring."""

    #: Absolute, symlink-free path of the root (pass it to agy with --add-dir).
    root: str
    keep: bool = False
    _lock_fd: int | None = None

    @classmethod
    def create(cls, base_dir: str, *, keep: bool = False) -> StagingArea:
        """Make a new root under ``base_dir`` (created 0700 if missing) and lock it.

        Raises:
            StagingError: a directory could not be made.
        """
        root: str | None = None
        lock_fd: int | None = None
        try:
            os.makedirs(base_dir, mode=0o700, exist_ok=True)
            base = os.path.realpath(base_dir)
            _check_base(base)
            while root is None:
                candidate = os.path.join(base, f"{os.getpid()}-{secrets.token_hex(8)}")
                with contextlib.suppress(FileExistsError):
                    os.mkdir(candidate, 0o700)
                    root = candidate
            os.chmod(root, 0o700)  # whatever the umask
            lock_fd = os.open(
                os.path.join(root, LOCK_NAME),
                os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | _NOFOLLOW,
                0o600,
            )
            _lock(lock_fd)
            os.mkdir(os.path.join(root, ATTACHMENTS), 0o700)
        except OSError as exc:
            if lock_fd is not None:
                os.close(lock_fd)
            if root is not None:
                _remove_entry(root)
            raise StagingError(f"cannot create a staging directory in {base_dir!r}: {exc}") from exc
        logger.debug("staging directory %s", root)
        return cls(root=root, keep=keep, lock_fd=lock_fd)

    @property
    def attachments_dir(self) -> str:
        """Where staged files go (directly, or in a :meth:`prompt_dir`)."""
        return os.path.join(self.root, ATTACHMENTS)

    def prompt_dir(self, key: int | str) -> str:
        """``attachments/<key>``: one prompt's ``staging_dir`` for ``convert_prompt``.

        Prompts queue while a turn runs, so each gets its own directory and
        :meth:`discard` after its turn removes only its own files.
        """
        name = str(key)
        if not _PROMPT_KEY.fullmatch(name):
            raise ValueError(f"prompt key must be letters, digits, '-' or '_', not {key!r}")
        return os.path.join(self.attachments_dir, name)

    def write(self, files: Iterable[StagedFile]) -> None:
        """Write ``files`` (0600, their prompt directory 0700); all or nothing.

        Raises:
            StagingError: a file is not meant for this area, or writing failed.
        """
        written: list[str] = []
        made: list[str] = []
        try:
            for file in files:
                directory = self._directory_for(file)
                if directory != self.attachments_dir and not os.path.isdir(directory):
                    os.mkdir(directory, 0o700)
                    made.append(directory)
                _write_private(file.path, file.data)
                written.append(file.path)
        except (OSError, StagingError) as exc:
            for path in written:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            for directory in made:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)  # only if empty
            if isinstance(exc, StagingError):
                raise
            raise StagingError(f"cannot write a staged file in {self.root!r}: {exc}") from exc
        if written:
            logger.debug("staged %d file(s) in %s", len(written), self.attachments_dir)

    def discard(self, key: int | str) -> None:
        """Remove one prompt's directory after its turn (never raises)."""
        if not self.keep:
            _remove_entry(self.prompt_dir(key))

    def _directory_for(self, file: StagedFile) -> str:
        directory, name = os.path.split(file.path)
        inside = directory == self.attachments_dir or (
            os.path.dirname(directory) == self.attachments_dir
            and _PROMPT_KEY.fullmatch(os.path.basename(directory)) is not None
        )
        if not inside or name != file.name or not _FILE_NAME.fullmatch(name):
            raise StagingError(f"refusing to stage {file.path!r} outside {self.attachments_dir!r}")
        return directory

    def clear(self) -> None:
        """Empty the attachments directory, every prompt's (never raises).

        Only when no prompt is queued (idle, or after a cancel cleared the
        queue): a queued prompt's files are already written.
        """
        if self.keep:
            return
        directory = self.attachments_dir
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            entries = []
        except OSError as exc:
            logger.warning("cannot list staging directory %s: %s", directory, exc)
            return
        for entry in entries:
            _remove_entry(entry.path)
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            logger.warning("cannot recreate staging directory %s: %s", directory, exc)

    def remove(self) -> None:
        """Delete the whole root on session close (idempotent, never raises)."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None
        if self.keep:
            logger.info("keeping staging directory %s (AGYBRIDGE_KEEP_STAGING)", self.root)
            return
        _remove_entry(self.root)


def sweep_stale(
    base_dir: str,
    *,
    keep: bool = False,
    max_age_s: float = STALE_AFTER_S,
    now: float | None = None,
    pid_alive: Callable[[int], bool] | None = None,
) -> list[str]:
    """Remove leftovers of dead bridge processes from ``base_dir`` (start-up, blocking).

    A ``<pid>-<hex>`` directory is stale when no live process holds its lock
    and either its pid is gone or it is older than ``max_age_s`` (newest
    mtime of the root, its lock file and its subdirectories). Anything else
    in ``base_dir`` is left alone.

    Returns:
        The removed paths.
    """
    if keep:
        return []
    alive = _pid_alive if pid_alive is None else pid_alive
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(base_dir))
    except OSError:
        return []
    removed: list[str] = []
    for entry in entries:
        match = _ROOT_NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        pid = int(match["pid"])
        old = now - _newest_mtime(entry.path) > max_age_s
        if not old and alive(pid):
            continue
        lock_fd = _open_lock(entry.path)
        try:
            if lock_fd is not None and not _try_lock(lock_fd):
                continue  # a live process (maybe a reused pid's new owner) holds it
            _remove_entry(entry.path)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)
        if not os.path.lexists(entry.path):
            removed.append(entry.path)
    if removed:
        logger.info("removed %d stale staging director(y/ies) in %s", len(removed), base_dir)
    return removed


# --- helpers --------------------------------------------------------------------------


def _check_base(base: str) -> None:
    """Refuse a base another user could rearrange under us (``/tmp`` is fine: sticky)."""
    info = os.stat(base)
    if os.name != "posix":
        return
    shared = info.st_uid != os.getuid() or info.st_mode & 0o022
    if shared and not info.st_mode & stat.S_ISVTX:
        raise StagingError(
            f"staging base {base!r} is writable by other users; "
            "use a directory only you can write to"
        )


def _write_private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | _NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), 0o600)  # an existing file keeps its mode otherwise
            out.write(data)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)  # no partial file (disk full, file-size limit)
        raise


def _remove_entry(path: str) -> None:
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode):
            shutil.rmtree(path)  # never follows symlinks inside
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("cannot remove %s: %s", path, exc)


def _newest_mtime(root: str) -> float:
    newest = 0.0
    for path in (
        root,
        os.path.join(root, LOCK_NAME),
        os.path.join(root, ATTACHMENTS),
        os.path.join(root, ".agents"),
    ):
        with contextlib.suppress(OSError):
            newest = max(newest, os.lstat(path).st_mtime)
    return newest


def _open_lock(root: str) -> int | None:
    try:
        return os.open(os.path.join(root, LOCK_NAME), os.O_RDWR | os.O_CLOEXEC | _NOFOLLOW)
    except OSError:
        return None  # no lock file: nobody can be holding it


if sys.platform == "win32":

    def _lock(fd: int) -> None:
        pass

    def _try_lock(fd: int) -> bool:
        return True  # no flock: age and pid decide

    def _pid_alive(pid: int) -> bool:
        # os.kill(pid, 0) would send CTRL_C_EVENT on Windows: assume alive,
        # so only the age rule removes leftovers there.
        return True

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    def _pid_alive(pid: int) -> bool:
        if pid <= 0:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by someone else
        return True
