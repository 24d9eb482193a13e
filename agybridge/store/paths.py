"""Where the store lives, whether that path can hold it, and where an agy-acp-map
installation kept its sessions.

The path functions take the environment as an argument: `agybridge.config` is the
one place that reads ``os.environ``. `check_path` lives here, apart from the
opening code (sqlite3), so that a bridge can refuse a bad path at start-up and
open the database later (issue 15).
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path

import attrs
import platformdirs

from .errors import StorePathError, StoreUnavailableError

APP_NAME = "agybridge"
DB_FILENAME = "agybridge.db"
#: Overrides the database file.
DB_ENV = "AGYBRIDGE_DB"
#: agy-acp-map's session index overrides, in the order it checks them.
LEGACY_STORE_ENVS = ("AGY_ACP_SESSION_STORE", "AGY_ACP_STORE")
#: agy-acp-map's display-history directory override.
LEGACY_HISTORY_ENV = "AGY_ACP_HISTORY_DIR"


def default_db_path(env: Mapping[str, str]) -> Path:
    """``$AGYBRIDGE_DB`` if set (``~`` expanded), else ``<user state dir>/agybridge.db``."""
    raw = env.get(DB_ENV, "").strip()
    if raw:
        return Path(raw).expanduser().absolute()
    return Path(platformdirs.user_state_dir(APP_NAME)) / DB_FILENAME


@attrs.frozen
class LegacyPaths:
    """An agy-acp-map installation's files (they may not exist)."""

    #: The session index, ``sessions.json``.
    sessions_file: Path
    #: The directory of ``<encodeURIComponent(sessionId)>.jsonl`` display histories.
    history_dir: Path


def legacy_paths(env: Mapping[str, str], *, home: Path | None = None) -> LegacyPaths:
    """agy-acp-map's files, resolved the way agy-acp-map resolves them.

    The index is ``$AGY_ACP_SESSION_STORE``, else ``$AGY_ACP_STORE``, else
    ``~/.agy-acp-map/sessions.json``. Histories are ``$AGY_ACP_HISTORY_DIR``, else a
    ``history`` directory beside the index (agy-acp-map derives it from the index path,
    so an overridden index moves its histories too).
    """
    home = Path.home() if home is None else home
    store_raw = next(
        (env[name].strip() for name in LEGACY_STORE_ENVS if env.get(name, "").strip()), ""
    )
    sessions_file = (
        Path(store_raw).expanduser().absolute()
        if store_raw
        else home / ".agy-acp-map" / "sessions.json"
    )
    history_raw = env.get(LEGACY_HISTORY_ENV, "").strip()
    history_dir = (
        Path(history_raw).expanduser().absolute()
        if history_raw
        else sessions_file.parent / "history"
    )
    return LegacyPaths(sessions_file=sessions_file, history_dir=history_dir)


def check_path(path: Path) -> None:
    """Raise `StorePathError` unless ``path`` is absent or (leads to) a regular file."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise StorePathError(path, "a symlink to nothing") from None
        return
    except NotADirectoryError:
        return  # a parent is a file: mkdir reports that
    except OSError as exc:
        raise StoreUnavailableError(path, f"cannot examine it: {exc}") from exc
    if stat.S_ISREG(info.st_mode):
        return
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    what = next((name for test, name in kinds.items() if test(info.st_mode)), "not a file")
    if path.is_symlink():
        what = f"a symlink to {what}"
    raise StorePathError(path, what)
