"""The doctor's checks as data, built from facts (pure apart from stat calls).

Both ``agybridge doctor`` (which runs agy to learn the facts) and ``/doctor``
in a session (which reports what the running bridge already knows) build
their lines here, so they show the same checks with the same fixes.
"""

from __future__ import annotations

import enum
import os
import re
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from .. import causes
from ..agy import ProbeResult, SignIn
from ..agy.binary import locate
from ..config import Settings

#: The PreToolUse hook gate needs agy >= 1.1.18 (hooks-and-tools.md §A2).
MIN_AGY_VERSION = (1, 1, 18)
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
LOGIN_FIX = "run `agybridge login` (or `agy` once in a terminal) and sign in"


class Status(enum.Enum):
    OK = "ok"
    FAIL = "fail"
    #: Still being found out (``/doctor`` while discovery runs).
    PENDING = "pending"
    #: Not checked because an earlier check failed (not counted as a failure).
    SKIPPED = "skipped"


@attrs.frozen
class Check:
    name: str
    status: Status
    summary: str
    fix: str | None = None
    #: The catalogue id of a failed check (`agybridge.causes`) when the check's
    #: name does not say it (`cause_of`).
    cause: str | None = None


#: The catalogue id each failed check means, unless the check names its own.
_CAUSE_BY_CHECK = {
    "agy": "agy_not_found",
    "version": "agy_fails",
    "signed in": "not_signed_in",
    "permission gate": "gate_unavailable",
    "models and agents": "agy_error",
    "session database": "session_db_unusable",
    "staging dir": "staging_unusable",
    "runtime dir": "runtime_dir_unusable",
    "log file": "log_file_unusable",
    "OS": "platform_unsupported",
}


def cause_of(check: Check) -> str | None:
    """The catalogue id of a failed check (None: it did not fail): the same ids
    the wire's errors carry in ``_meta.agybridge.cause``."""
    if check.status is not Status.FAIL:
        return None
    return check.cause or _CAUSE_BY_CHECK[check.name]


def failures(checks: Sequence[Check]) -> int:
    return sum(1 for check in checks if check.status is Status.FAIL)


def agy_binary(settings: Settings) -> tuple[Check, str | None]:
    """Where agy is, telling unset / missing / a directory / not executable apart."""
    binary = locate(settings.agy_bin, from_env=settings.agy_bin_set)
    if binary.path is None:
        failed = Check("agy", Status.FAIL, binary.problem or "agy not found", binary.fix,
                       binary.cause)  # fmt: skip
        return failed, None
    where = "AGY_BIN" if settings.agy_bin_set and os.sep in settings.agy_bin else "found on PATH"
    return Check("agy", Status.OK, f"{binary.path} ({where})"), binary.path


def skipped(name: str, reason: str) -> Check:
    return Check(name, Status.SKIPPED, f"not checked: {reason}")


def version(text: str | None, error: str | None = None) -> Check:
    """agy's ``--version`` against the minimum supported."""
    minimum = ".".join(map(str, MIN_AGY_VERSION))
    if error is not None:
        return Check("version", Status.FAIL, f"`agy --version` failed: {error}",
                     "run `agy --version` in a terminal to see why")  # fmt: skip
    if text is None:
        return Check("version", Status.PENDING, "checking…")
    match = _VERSION.search(text)
    if match is None:
        return Check("version", Status.OK, f"{text!r} (not a version number; minimum {minimum})")
    found = tuple(int(part) for part in match.groups())
    if found < MIN_AGY_VERSION:
        return Check(
            "version",
            Status.FAIL,
            f"agy {match.group(0)} is older than {minimum}, the oldest with the hooks "
            "the permission gate needs",
            "update agy: `agy update`",
            "agy_too_old",
        )
    return Check("version", Status.OK, f"agy {match.group(0)} (minimum {minimum})")


def sign_in(result: ProbeResult | None) -> Check:
    if result is None:
        return Check("signed in", Status.PENDING, "not checked yet (checked before the first turn)")
    if result.state is SignIn.SIGNED_IN:
        return Check("signed in", Status.OK, "agy is signed in")
    if result.state is SignIn.SIGNED_OUT:
        return Check("signed in", Status.FAIL, f"agy is not signed in ({result.detail})", LOGIN_FIX)
    return Check(
        "signed in",
        Status.FAIL,
        f"could not tell whether agy is signed in: {result.detail}",
        "run `agy -p /hooks` in a terminal to see agy's error",
        causes.classify_agy_failure(result.detail or ""),
    )


def gate(failure: str | None, *, pending: bool = False) -> Check:
    if pending:
        return Check("permission gate", Status.PENDING, "checking…")
    if failure is None:
        return Check("permission gate", Status.OK, "agy loads agybridge's PreToolUse hook")
    return Check(
        "permission gate",
        Status.FAIL,
        f"{failure}; sessions in ask mode fall back to safe mode",
        "update agy (hooks need >= 1.1.18) and make sure ~/.gemini/config/hooks.json is valid "
        "JSON (agy drops every hook when one file is bad)",
    )


def discovery(
    models: Sequence[str], agents: Sequence[str], error: str | None, *, pending: bool = False
) -> Check:
    if pending:
        return Check("models and agents", Status.PENDING, "checking… (`agy models`, `agy agents`)")
    if error is not None:
        return Check(
            "models and agents",
            Status.FAIL,
            error,
            "run `agy models` in a terminal; sign-in and network problems show there",
            causes.classify_agy_failure(error),
        )
    shown = ", ".join(models[:3]) + (", …" if len(models) > 3 else "")
    return Check(
        "models and agents",
        Status.OK,
        f"{len(models)} model(s) ({shown or 'none'}), {len(agents)} agent(s)",
    )


def operating_system(platform: str = sys.platform) -> Check:
    if platform.startswith("linux"):
        return Check("OS", Status.OK, "Linux: supported (tested in CI)")
    if platform == "darwin":
        return Check("OS", Status.OK, "macOS: supported (POSIX; not tested in CI)")
    if platform in ("win32", "cygwin"):
        return Check(
            "OS",
            Status.FAIL,
            "Windows is not supported (the bridge needs POSIX signals, process groups "
            "and Unix sockets)",
            "run the bridge and agy inside WSL2",
        )
    return Check("OS", Status.FAIL, f"{platform}: not supported (untested POSIX)",
                 "use Linux or macOS")  # fmt: skip


def private_dir(name: str, path: str) -> Check:
    """A directory that must be ours and 0700 (or not exist yet)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return Check(name, Status.OK, f"{path} (created 0700 when first needed)")
    except OSError as exc:
        return Check(name, Status.FAIL, f"{path}: {exc.strerror}", f"check {path}")
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISDIR(info.st_mode):
        return Check(name, Status.FAIL, f"{path} is not a directory", f"remove {path}")
    if info.st_uid != os.geteuid():
        return Check(name, Status.FAIL, f"{path} belongs to uid {info.st_uid}",
                     f"remove {path} (it is re-created)")  # fmt: skip
    if mode & 0o077:
        return Check(name, Status.FAIL, f"{path} has mode {mode:o}: others can read it",
                     f"chmod 700 {path}")  # fmt: skip
    return Check(name, Status.OK, f"{path} (private, 0700)")


def log_file(path: Path | None) -> Check:
    if path is None:
        return Check("log file", Status.OK, "disabled (AGYBRIDGE_LOG_FILE is empty)")
    try:
        info = path.stat()
    except FileNotFoundError:
        parent = _existing_ancestor(path.parent)
        if not os.access(parent, os.W_OK):
            return Check("log file", Status.FAIL, f"{path} cannot be created ({parent} is "
                         "not writable)", "set AGYBRIDGE_LOG_FILE to a writable path")  # fmt: skip
        return Check("log file", Status.OK, f"{path} (not written yet)")
    except OSError as exc:
        return Check("log file", Status.FAIL, f"{path}: {exc.strerror}",
                     "set AGYBRIDGE_LOG_FILE to a writable path")  # fmt: skip
    if stat.S_ISDIR(info.st_mode):
        inside = path / "agybridge.log"
        return Check("log file", Status.FAIL, f"{path} is a directory, not a file",
                     f"set AGYBRIDGE_LOG_FILE to a file, e.g. {inside}")  # fmt: skip
    if not os.access(path, os.W_OK):
        return Check("log file", Status.FAIL, f"{path} is not writable",
                     f"chmod u+w {path}, or set AGYBRIDGE_LOG_FILE")  # fmt: skip
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        return Check("log file", Status.FAIL, f"{path} has mode {mode:o}: others can read "
                     "your prompts' metadata", f"chmod 600 {path}")  # fmt: skip
    return Check("log file", Status.OK, f"{path} ({_size(info.st_size)}; `agybridge logs`)")


def database(
    path: Path, stats: tuple[int, int] | None, error: str | None, *, bad_file: bool = False
) -> Check:
    """``stats`` = (schema version, sessions) of an existing database; ``bad_file``:
    ``error`` says why the file is not a healthy agybridge database."""
    if bad_file:
        return Check("session database", Status.FAIL,
                     f"{path}: not usable ({error}); the bridge will move it aside to "
                     f"{path.name}.corrupt-<time> and start a fresh one",
                     "keep a copy if its sessions matter, then remove it (or set AGYBRIDGE_DB "
                     "to another file)")  # fmt: skip
    if error is not None:
        return Check("session database", Status.FAIL, f"{path}: {error}",
                     "set AGYBRIDGE_DB to a writable file path")  # fmt: skip
    if stats is None:
        return Check("session database", Status.OK, f"{path} (not created yet)")
    schema, sessions = stats
    size = _size(path.stat().st_size) if path.exists() else "?"
    return Check(
        "session database",
        Status.OK,
        f"{path} (schema v{schema}, {size}, {sessions} session(s); `agybridge sessions list`)",
    )


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _size(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}"
        size //= 1024
    return f"{size} GiB"
