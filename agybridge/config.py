"""Settings: every environment variable the bridge reads, validated in one place.

A bad value is a start-up error that names the variable, the value and what
would be accepted; nothing else in the package reads ``os.environ`` for
configuration.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import overload

import attrs
import platformdirs

from .acp.limits import MAX_FILE_BYTES, MAX_PROMPT_BYTES, PromptLimits
from .lines import DEFAULT_MAX_LINE_BYTES
from .session.config import ENV_NAMES, ConfigValueError, LaunchSettings, settings_from_env
from .session.deps import DEFAULT_STALL_NOTICE_S, DEFAULT_STARTUP_TIMEOUT_S, Timeouts
from .store import LegacyPaths, default_db_path, legacy_paths

APP_NAME = "agybridge"


class ConfigError(Exception):
    """An environment variable holds a value the bridge cannot use."""


@attrs.frozen
class Settings:
    """Bridge settings, built from the environment by :meth:`from_env`."""

    #: The agy binary: ``AGY_BIN`` or ``agy`` on PATH (resolved at spawn time).
    agy_bin: str = "agy"
    #: AGY_BIN was set (doctor tells "not on PATH" from "AGY_BIN is wrong").
    agy_bin_set: bool = False
    #: Grace after SIGINT before SIGTERM, and after SIGTERM before SIGKILL.
    sigint_grace_s: float = 2.0
    sigterm_grace_s: float = 1.0
    #: Longest NDJSON line accepted from the client or from agy.
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    #: How long shutdown (stdin EOF, SIGTERM, SIGHUP) lets turns finish as
    #: cancelled before everything is torn down.
    shutdown_grace_s: float = 3.0
    log_file: Path | None = None
    log_level: str = "INFO"
    #: AGYBRIDGE_TRACE=1: every wire message to the log, secrets redacted.
    trace: bool = False
    #: Tokens the usage meter counts as the model's window; None = by model.
    context_window: int | None = None
    #: Defaults for every session's agy launch (AGYBRIDGE_MODEL, ...).
    launch: LaunchSettings = attrs.Factory(LaunchSettings)
    #: Deprecation notes about the environment, logged once at start-up.
    warnings: tuple[str, ...] = ()
    #: The session database (AGYBRIDGE_DB); None keeps sessions in memory.
    db_path: Path | None = None
    #: agy-acp-map's files, imported once (AGY_ACP_STORE, AGY_ACP_HISTORY_DIR).
    legacy: LegacyPaths | None = None
    #: Where prompt attachments are staged for agy (private, per session).
    staging_dir: str = ""
    #: AGYBRIDGE_KEEP_STAGING=1 keeps staged files (debugging).
    keep_staging: bool = False
    #: AGYBRIDGE_DELETE_ON_CLOSE=1: session/close also deletes the stored
    #: session (as session/delete), for editors that never delete one.
    delete_on_close: bool = False
    #: AGYBRIDGE_ACP_V2=1: a client that asks for ACP protocol 2 gets the v2
    #: draft (agent/wire_v2.py); otherwise every client speaks v1.
    acp_v2: bool = False
    prompt_limits: PromptLimits = attrs.Factory(PromptLimits)
    #: Bounds on waiting for agy: start-up, stall notice, stall timeout.
    timeouts: Timeouts = attrs.Factory(Timeouts)
    #: The daemon: what a client's disconnect does to its sessions' turns
    #: (AGYBRIDGE_ON_DISCONNECT, ``keep`` or ``cancel``).
    on_disconnect: str = "keep"
    #: The daemon exits after this long with no session and no client
    #: (AGYBRIDGE_DAEMON_IDLE_EXIT_S; 0: never).
    daemon_idle_exit_s: float = 0.0
    #: The daemon detaches a client that reads nothing of what it was sent
    #: for this long (AGYBRIDGE_CLIENT_READ_TIMEOUT_S; 0: never).
    client_read_timeout_s: float = 10.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read settings from ``env`` (default ``os.environ``).

        Raises:
            ConfigError: a variable is set to a value that cannot be used.
        """
        env, legacy_warnings = _agy_acp_env(os.environ if env is None else env)
        log_file_raw = env.get("AGYBRIDGE_LOG_FILE")
        if log_file_raw is None:
            log_file: Path | None = Path(platformdirs.user_log_dir(APP_NAME)) / f"{APP_NAME}.log"
        elif log_file_raw in ("", "-"):
            log_file = None  # explicitly disabled
        else:
            log_file = Path(log_file_raw).expanduser()
        level_raw = env.get("AGYBRIDGE_LOG_LEVEL", "INFO")
        level = level_raw.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ConfigError(
                f"AGYBRIDGE_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, not {level_raw!r}"
            )
        try:
            launch, warnings = settings_from_env(env)
        except ConfigValueError as exc:
            raise ConfigError(str(exc)) from None
        try:
            limits = PromptLimits(
                max_file_bytes=_positive_int(env, "AGYBRIDGE_MAX_ATTACHMENT_BYTES", MAX_FILE_BYTES),
                max_prompt_bytes=_positive_int(
                    env, "AGYBRIDGE_MAX_PROMPT_ATTACHMENT_BYTES", MAX_PROMPT_BYTES
                ),
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        keep = _flag(env, "AGYBRIDGE_KEEP_STAGING")
        on_disconnect = env.get("AGYBRIDGE_ON_DISCONNECT", "keep").strip().lower() or "keep"
        if on_disconnect not in ("keep", "cancel"):
            raise ConfigError(
                f"AGYBRIDGE_ON_DISCONNECT must be keep or cancel, not {on_disconnect!r}"
            )
        return cls(
            trace=_flag(env, "AGYBRIDGE_TRACE"),
            on_disconnect=on_disconnect,
            daemon_idle_exit_s=_seconds(env, "AGYBRIDGE_DAEMON_IDLE_EXIT_S", 0.0),
            client_read_timeout_s=_seconds(env, "AGYBRIDGE_CLIENT_READ_TIMEOUT_S", 10.0),
            staging_dir=env.get("AGYBRIDGE_STAGING_DIR") or default_staging_dir(),
            keep_staging=keep,
            delete_on_close=_flag(env, "AGYBRIDGE_DELETE_ON_CLOSE"),
            acp_v2=_flag(env, "AGYBRIDGE_ACP_V2"),
            prompt_limits=limits,
            db_path=default_db_path(env),
            legacy=legacy_paths(env),
            launch=launch,
            warnings=(*legacy_warnings, *warnings),
            agy_bin=env.get("AGY_BIN") or "agy",
            agy_bin_set=bool(env.get("AGY_BIN")),
            sigint_grace_s=_seconds(env, "AGYBRIDGE_SIGINT_GRACE_S", 2.0),
            sigterm_grace_s=_seconds(env, "AGYBRIDGE_SIGTERM_GRACE_S", 1.0),
            max_line_bytes=_positive_int(env, "AGYBRIDGE_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES),
            shutdown_grace_s=_seconds(env, "AGYBRIDGE_SHUTDOWN_GRACE_S", 3.0),
            log_file=log_file,
            log_level=level,
            context_window=_positive_int(env, "AGYBRIDGE_CONTEXT_WINDOW", None),
            timeouts=_timeouts(env),
        )

    def resolve_agy_bin(self) -> str | None:
        """The absolute path of the agy binary, or None when it cannot be found.

        agy is always spawned by absolute path, never through a shell: users
        alias ``agy`` to add flags such as ``--dangerously-skip-permissions``
        (contract.md §1.1).
        """
        if os.sep in self.agy_bin:
            path = Path(self.agy_bin).expanduser()
            if path.is_file() and os.access(path, os.X_OK):
                return str(path.resolve())
            return None
        return shutil.which(self.agy_bin)


#: agy-acp-map variables with an AGYBRIDGE_* equivalent: read as that one
#: (when it is not set itself), with a start-up warning naming ours.
_AGY_ACP_EQUIVALENTS = {
    "AGY_ACP_KEEP_STAGING": "AGYBRIDGE_KEEP_STAGING",
    "AGY_ACP_CONTEXT_SIZE": "AGYBRIDGE_CONTEXT_WINDOW",
    "AGY_ACP_LOG": "AGYBRIDGE_LOG_FILE",
    "AGY_ACP_DELETE_ON_CLOSE": "AGYBRIDGE_DELETE_ON_CLOSE",
}
#: agy-acp-map variables agybridge does not honour, and what to do instead.
_AGY_ACP_UNSUPPORTED = {
    "AGY_ACP_WARMUP": "agybridge always starts agy when the session is created",
}


def _agy_acp_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``env`` with agy-acp-map's variables read as ours, and what to warn about.

    ``AGY_ACP_SKIP_PERMISSIONS=1`` means ``AGYBRIDGE_SAFETY=autonomous`` when no
    safety or mode is set (agy-acp-map: "if safety unset"). The model and
    launch variables are aliased in ``session.config.ENV_NAMES``; the store
    paths in ``store.paths``.
    """
    out = dict(env)
    warnings = []
    for theirs, ours in _AGY_ACP_EQUIVALENTS.items():
        if env.get(theirs) and ours not in env:
            out[ours] = env[theirs]
            warnings.append(f"{theirs} is agy-acp-map's name; agybridge reads it as {ours}")
    skip = env.get("AGY_ACP_SKIP_PERMISSIONS", "").strip().lower()
    if skip:
        chosen = [n for n in _SAFETY_VARIABLES if env.get(n)]
        if skip not in ("1", "true", "0", "false"):
            raise ConfigError(f"AGY_ACP_SKIP_PERMISSIONS must be 1 or 0, not {skip!r}")
        if chosen:
            warnings.append(f"AGY_ACP_SKIP_PERMISSIONS is ignored: {chosen[0]} is set")
        elif skip in ("1", "true"):
            out["AGYBRIDGE_SAFETY"] = "autonomous"
            warnings.append(
                "AGY_ACP_SKIP_PERMISSIONS=1 is agy-acp-map's name; agybridge reads it as "
                "AGYBRIDGE_SAFETY=autonomous (prefer that)"
            )
        else:
            warnings.append(
                "AGY_ACP_SKIP_PERMISSIONS=0 has no effect: agybridge's default mode (ask) "
                "never skips a permission without asking you; AGYBRIDGE_SAFETY=safe uses "
                "agy's own checks"
            )
    for name, instead in _AGY_ACP_UNSUPPORTED.items():
        if env.get(name):
            warnings.append(f"{name} is not supported: {instead}")
    return out, warnings


_SAFETY_VARIABLES = ("AGYBRIDGE_SAFETY", "AGY_ACP_SAFETY", "AGYBRIDGE_MODE", "AGY_ACP_MODE")


def default_staging_dir() -> str:
    """``<user state dir>/staging`` (``~/.local/state/agybridge/staging`` on Linux).

    Not the runtime dir: without ``XDG_RUNTIME_DIR`` platformdirs falls back
    to a guessable ``/tmp/runtime-<uid>`` another user could create first.
    """
    return os.path.join(platformdirs.user_state_dir(APP_NAME), "staging")


def _timeouts(env: Mapping[str, str]) -> Timeouts:
    startup = _seconds(env, "AGYBRIDGE_STARTUP_TIMEOUT_S", DEFAULT_STARTUP_TIMEOUT_S)
    if startup <= 0:
        raise ConfigError("AGYBRIDGE_STARTUP_TIMEOUT_S must be more than 0 seconds")
    return Timeouts(
        startup_s=startup,
        stall_notice_s=_seconds(env, "AGYBRIDGE_STALL_NOTICE_S", DEFAULT_STALL_NOTICE_S),
        stall_timeout_s=_seconds(env, "AGYBRIDGE_STALL_TIMEOUT_S", 0.0),
        idle_s=_seconds(env, "AGYBRIDGE_IDLE_TIMEOUT_S", 0.0, limit=7 * 86400),
    )


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw not in ("", "0", "1", "true", "false", "yes", "no"):
        raise ConfigError(f"{name} must be 1 or 0, not {raw!r}")
    return raw in ("1", "true", "yes")


def _seconds(env: Mapping[str, str], name: str, default: float, *, limit: float = 3600) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not 0 <= value <= limit:
        raise ConfigError(f"{name} must be between 0 and {limit:g} seconds, not {raw!r}")
    return value


@overload
def _positive_int(env: Mapping[str, str], name: str, default: int) -> int: ...
@overload
def _positive_int(env: Mapping[str, str], name: str, default: None) -> int | None: ...
def _positive_int(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{name} must be positive, not {raw!r}")
    return value


def _shown(value: object) -> str | None:
    """A setting's value as the environment would spell it (None: unset)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def setting_rows(
    settings: Settings, env: Mapping[str, str] | None = None
) -> list[dict[str, object]]:
    """``_agybridge/settings/options``: each variable the bridge reads, the value
    in effect and where it came from (``environment``, agy-acp-map's name for
    it, or ``default``). None is reloadable: the environment is the only
    source, and a running process's environment cannot be given anew."""
    env = os.environ if env is None else env
    launch, limits, timeouts = settings.launch, settings.prompt_limits, settings.timeouts
    values: dict[str, object] = {
        "AGY_BIN": settings.agy_bin,
        "AGYBRIDGE_MODEL": launch.model,
        "AGYBRIDGE_EFFORT": launch.effort,
        "AGYBRIDGE_MODE": launch.mode,
        "AGYBRIDGE_AGENT": launch.agent,
        "AGYBRIDGE_SANDBOX": launch.sandbox,
        "AGYBRIDGE_JSON_SCHEMA": launch.json_schema,
        "AGYBRIDGE_PRINT_TIMEOUT": launch.print_timeout,
        "AGYBRIDGE_SLASH_COMMANDS": launch.slash_commands,
        "AGYBRIDGE_DB": settings.db_path,
        "AGYBRIDGE_STAGING_DIR": settings.staging_dir,
        "AGYBRIDGE_KEEP_STAGING": settings.keep_staging,
        "AGYBRIDGE_DELETE_ON_CLOSE": settings.delete_on_close,
        "AGYBRIDGE_MAX_ATTACHMENT_BYTES": limits.max_file_bytes,
        "AGYBRIDGE_MAX_PROMPT_ATTACHMENT_BYTES": limits.max_prompt_bytes,
        "AGYBRIDGE_CONTEXT_WINDOW": settings.context_window,
        "AGYBRIDGE_SIGINT_GRACE_S": settings.sigint_grace_s,
        "AGYBRIDGE_SIGTERM_GRACE_S": settings.sigterm_grace_s,
        "AGYBRIDGE_SHUTDOWN_GRACE_S": settings.shutdown_grace_s,
        "AGYBRIDGE_STARTUP_TIMEOUT_S": timeouts.startup_s,
        "AGYBRIDGE_STALL_NOTICE_S": timeouts.stall_notice_s,
        "AGYBRIDGE_STALL_TIMEOUT_S": timeouts.stall_timeout_s,
        "AGYBRIDGE_IDLE_TIMEOUT_S": timeouts.idle_s,
        "AGYBRIDGE_MAX_LINE_BYTES": settings.max_line_bytes,
        "AGYBRIDGE_LOG_FILE": settings.log_file,
        "AGYBRIDGE_LOG_LEVEL": settings.log_level,
        "AGYBRIDGE_TRACE": settings.trace,
        "AGYBRIDGE_ON_DISCONNECT": settings.on_disconnect,
        "AGYBRIDGE_DAEMON_IDLE_EXIT_S": settings.daemon_idle_exit_s,
        "AGYBRIDGE_CLIENT_READ_TIMEOUT_S": settings.client_read_timeout_s,
    }
    aliases = {ours: theirs for theirs, ours in _AGY_ACP_EQUIVALENTS.items()}
    aliases.update((ours, theirs) for ours, theirs in ENV_NAMES.values() if ours and theirs)
    rows: list[dict[str, object]] = []
    for name, value in values.items():
        alias = aliases.get(name)
        source = (
            "environment" if env.get(name) else alias if alias and env.get(alias) else "default"
        )
        if name == "AGYBRIDGE_MODE" and source == "default":  # a safety tier sets the mode
            source = next((n for n in _SAFETY_VARIABLES if env.get(n)), source)
        rows.append({"name": name, "value": _shown(value), "source": source, "reloadable": False})
    return rows
