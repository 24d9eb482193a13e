"""Session configuration: launch settings, ACP config options and modes (pure).

agy's launch flags cannot change inside a process (contract.md §2.3), so a
session's :class:`LaunchSettings` decide each spawn, and a change means a
respawn with ``--conversation``. They are offered to editors as ACP
``configOptions`` (model, reasoning effort, mode; agy agents when there are
any) and, for clients without config options, as legacy ``modes``.

Modes are the bridge's safety tiers plus agy's own ``--mode`` values:

=========================  ===================================================
``safe`` (default)         agy's own checks; what needs approval is
                           auto-denied headless and explained to the user
``autonomous``             ``--dangerously-skip-permissions --sandbox``
``autonomous-unsandboxed`` ``--dangerously-skip-permissions``
``plan``                   ``--mode plan``
``accept-edits``           ``--mode accept-edits``
=========================  ===================================================
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..acp import models

if TYPE_CHECKING:  # the settings are read before initialize; agy's modules load later
    from ..agy import LaunchSpec
    from ..agy.discovery import ModelInfo

logger = logging.getLogger(__name__)

DEFAULT = "default"
#: Longest value put in one agy argument: Linux refuses an argument of more
#: than 128 KiB (MAX_ARG_STRLEN) with E2BIG, so every spawn would fail.
MAX_ARG_BYTES = 64 * 2**10
_GO_DURATION = re.compile(r"0|(?:\d+(?:\.\d+)?(?:h|ms|us|µs|ns|m|s))+")

#: id -> (name, description), in the order editors show them.
MODES: dict[str, tuple[str, str]] = {
    "ask": (
        "Ask",
        "agy asks you before each action: reads inside the workspace are allowed, "
        "everything else waits for your answer in the editor.",
    ),
    "accept-edits": (
        "Accept edits",
        "Like Ask, but file edits inside the workspace are applied without asking "
        "(agy's accept-edits mode).",
    ),
    "plan": (
        "Plan",
        "agy's plan mode: it drafts a plan before changing anything; "
        "actions are asked like in Ask.",
    ),
    "safe": (
        "Safe",
        "agy's own permission checks. Actions that need approval are auto-denied "
        "(headless agy cannot ask) and the bridge tells you how to allow them.",
    ),
    "autonomous": (
        "Autonomous (sandboxed)",
        "Skip agy's permission checks; terminal commands run in agy's sandbox.",
    ),
    "autonomous-unsandboxed": (
        "Autonomous, no sandbox",
        "Skip agy's permission checks with no sandbox: agy may run any command. "
        "Only for disposable workspaces.",
    ),
}
#: Modes in which agy's own checks are off and the bridge's hook gate decides.
GATED_MODES = frozenset({"ask", "accept-edits", "plan"})
EFFORTS: dict[str, str] = {"low": "Low", "medium": "Medium", "high": "High"}

#: Setting name -> (AGYBRIDGE_* variable, agy-acp-map alias).
ENV_NAMES: dict[str, tuple[str, str]] = {
    "model": ("AGYBRIDGE_MODEL", "AGY_ACP_MODEL"),
    "effort": ("AGYBRIDGE_EFFORT", "AGY_ACP_EFFORT"),
    "mode": ("AGYBRIDGE_MODE", "AGY_ACP_MODE"),
    "agent": ("AGYBRIDGE_AGENT", "AGY_ACP_AGENT"),
    "sandbox": ("AGYBRIDGE_SANDBOX", "AGY_ACP_SANDBOX"),
    "json_schema": ("AGYBRIDGE_JSON_SCHEMA", "AGY_ACP_JSON_SCHEMA"),
    "print_timeout": ("AGYBRIDGE_PRINT_TIMEOUT", "AGY_ACP_PRINT_TIMEOUT"),
    "safety": ("AGYBRIDGE_SAFETY", "AGY_ACP_SAFETY"),
    "slash_commands": ("AGYBRIDGE_SLASH_COMMANDS", ""),
    "disable_slash_commands": ("", "AGY_ACP_DISABLE_SLASH_COMMANDS"),
}
#: session/new ``_meta`` keys accepted for the same settings.
META_KEYS = {
    "model": "model",
    "effort": "effort",
    "mode": "mode",
    "agent": "agent",
    "sandbox": "sandbox",
    "jsonSchema": "json_schema",
    "printTimeout": "print_timeout",
    "safety": "safety",
    "slashCommands": "slash_commands",
    "disableSlashCommands": "disable_slash_commands",
}


#: ``session/set_config_option`` ids accepted beyond the offered options
#: (agy-acp-map's names); ``safety`` sets the mode.
LAUNCH_ONLY_OPTIONS = {
    "sandbox": "sandbox",
    "printTimeout": "print_timeout",
    "jsonSchema": "json_schema",
    "disableSlashCommands": "disable_slash_commands",
    "safety": "safety",
}


class ConfigValueError(ValueError):
    """A configuration value the bridge cannot use (message says why)."""

    #: The JSON path of the value, when it came from a request.
    path: str | None = None


@attrs.frozen
class Catalog:
    """What agy offers, from discovery (may be empty: discovery failed)."""

    models: tuple[ModelInfo, ...] = ()
    agents: tuple[str, ...] = ()
    #: ``agy --version`` (None until known).
    agy_version: str | None = None


@attrs.frozen
class LaunchSettings:
    """Everything the user can change about how agy is launched."""

    model: str | None = None
    effort: str | None = None
    mode: str = "ask"
    agent: str | None = None
    #: Explicit ``--sandbox`` choice; None = what the mode implies.
    sandbox: bool | None = None
    json_schema: str | None = None
    print_timeout: str = "0"
    #: agy's slash-command/skill expansion of prompts (off by default).
    slash_commands: bool = False

    def launch_spec(
        self,
        cwd: str,
        additional_dirs: Sequence[str] = (),
        conversation_id: str | None = None,
        gate_dir: str | None = None,
        observer_dir: str | None = None,
    ) -> LaunchSpec:
        """How to launch agy with these settings.

        ``gate_dir`` is the verified permission gate's hook root: the gated
        modes need it, and without it they run with agy's own checks (fail
        closed: never skip agy's checks without the gate). ``observer_dir``:
        the same root for an ungated agy, whose hook only observes.
        """
        from ..agy import LaunchSpec  # noqa: PLC0415 - issue 15: not at start-up

        gated = gate_dir is not None  # passed only when verified and wanted
        hook_dir = gate_dir or observer_dir
        extra = (*self.agy_flags(), "--dangerously-skip-permissions") if gated else self.agy_flags()
        return LaunchSpec(
            cwd=cwd,
            additional_dirs=(*additional_dirs, *((hook_dir,) if hook_dir else ())),
            conversation_id=conversation_id,
            model=self.model,
            effort=self.effort,
            mode=self.mode if self.mode in ("plan", "accept-edits") else None,
            agent=self.agent,
            print_timeout=self.print_timeout,
            extra_args=extra,
        )

    def agy_flags(self) -> tuple[str, ...]:
        """Safety, sandbox, slash and schema flags (model etc. are spec fields)."""
        flags: list[str] = []
        if self.mode in ("autonomous", "autonomous-unsandboxed"):
            flags.append("--dangerously-skip-permissions")
        sandbox = self.sandbox if self.sandbox is not None else self.mode == "autonomous"
        if sandbox and self.mode != "autonomous-unsandboxed":
            flags.append("--sandbox")
        # agy 1.1.14 ignores --mode plan when slash expansion is disabled.
        if not self.slash_commands and self.mode != "plan":
            flags.append("--disable-slash-commands")
        if self.json_schema:
            flags.append(f"--json-schema={self.json_schema}")
        return tuple(flags)

    def to_store(self) -> dict[str, str]:
        """Flat strings for the session index."""
        return dict(_store_values(self))

    @classmethod
    def from_store(cls, values: Mapping[str, str]) -> LaunchSettings:
        settings = cls()
        for name, raw in values.items():
            try:
                settings = with_setting(settings, name, raw)
            except ConfigValueError as exc:
                logger.warning("ignoring stored setting %s=%r: %s", name, raw, exc)
        return settings


@functools.lru_cache(maxsize=64)
def _store_values(settings: LaunchSettings) -> dict[str, str]:
    # Every turn saves the session's row; its settings rarely change.
    return {
        k: json.dumps(v) if not isinstance(v, str) else v
        for k, v in attrs.asdict(settings).items()
        if v is not None
    }


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigValueError(f"{name} must be true or false, not {value!r}")


def _safety_mode(value: str) -> str:
    text = value.strip().lower().replace("_", "-")
    aliases = {"auto": "autonomous", "unsandboxed": "autonomous-unsandboxed"}
    mode = aliases.get(text, text)
    if mode not in ("safe", "autonomous", "autonomous-unsandboxed"):
        raise ConfigValueError(
            f"safety must be safe, autonomous or autonomous-unsandboxed, not {value!r}"
        )
    return mode


def with_setting(settings: LaunchSettings, name: str, value: Any) -> LaunchSettings:
    """``settings`` with one setting changed (validated).

    Raises:
        ConfigValueError: the value is not acceptable.
    """
    if value is None or value == "":
        return settings
    text_value = value if isinstance(value, str) else json.dumps(value)
    size = len(text_value.encode("utf-8", "surrogatepass"))
    if size > MAX_ARG_BYTES:
        raise ConfigValueError(
            f"{name} is too long for agy's command line ({size} bytes, at most {MAX_ARG_BYTES})"
            + ("; give a schema file's path instead" if name == "json_schema" else "")
        )
    if name in ("model", "agent"):
        text = str(value).strip()
        if text.startswith("-"):
            raise ConfigValueError(f"{name} must not start with '-': {value!r}")
        chosen = None if text == DEFAULT else text
        if name == "model":
            return attrs.evolve(settings, model=chosen)
        return attrs.evolve(settings, agent=chosen)
    if name == "effort":
        text = str(value).strip().lower()
        if text == DEFAULT:
            return attrs.evolve(settings, effort=None)
        if text not in EFFORTS and text not in ("xhigh", "max"):
            raise ConfigValueError(f"effort must be low, medium or high, not {value!r}")
        return attrs.evolve(settings, effort=text)
    if name == "mode":
        text = str(value).strip().lower()
        if text not in MODES:
            raise ConfigValueError(f"mode must be one of {', '.join(MODES)}, not {value!r}")
        return attrs.evolve(settings, mode=text)
    if name == "safety":
        return attrs.evolve(settings, mode=_safety_mode(str(value)))
    if name == "sandbox":
        return attrs.evolve(settings, sandbox=_bool(value, "sandbox"))
    if name == "slash_commands":
        return attrs.evolve(settings, slash_commands=_bool(value, "slash commands"))
    if name == "disable_slash_commands":
        return attrs.evolve(settings, slash_commands=not _bool(value, "disableSlashCommands"))
    if name == "json_schema":
        text = value if isinstance(value, str) else json.dumps(value)
        return attrs.evolve(settings, json_schema=text.strip() or None)
    if name == "print_timeout":
        text = str(value).strip()
        if not _GO_DURATION.fullmatch(text):
            raise ConfigValueError(
                f"print timeout must be a Go duration like 0, 30m or 1h, not {value!r}"
            )
        return attrs.evolve(settings, print_timeout=text)
    raise ConfigValueError(f"unknown setting {name!r}")


def settings_from_env(env: Mapping[str, str]) -> tuple[LaunchSettings, list[str]]:
    """Defaults from ``AGYBRIDGE_*`` (agy-acp-map's ``AGY_ACP_*`` accepted as
    aliases); returns the settings and warnings to log once.

    Raises:
        ConfigValueError: a variable holds an unusable value (names it).
    """
    settings = LaunchSettings()
    warnings = []
    for name, (ours, alias) in ENV_NAMES.items():
        variable = ours if ours and env.get(ours) else alias
        if not variable or not env.get(variable):
            continue
        if variable == alias and alias:
            warnings.append(
                f"{alias} is agy-acp-map's name; agybridge reads it, but prefer "
                f"{ours or 'AGYBRIDGE_SLASH_COMMANDS'}"
            )
        try:
            settings = with_setting(settings, name, env[variable])
        except ConfigValueError as exc:
            raise ConfigValueError(f"{variable}: {exc}") from None
    return settings, warnings


def settings_from_meta(
    settings: LaunchSettings,
    meta: Mapping[str, Any] | None,
    paths: Mapping[str, str] | None = None,
) -> LaunchSettings:
    """Apply the launch keys a client put in ``session/new`` ``_meta``
    (``paths``: the JSON path each key was sent at, if not ``$._meta.<key>``)."""
    for key, name in META_KEYS.items():
        if meta and key in meta:
            try:
                settings = with_setting(settings, name, meta[key])
            except ConfigValueError as exc:
                path = (paths or {}).get(key, f"$._meta.{key}")
                error = ConfigValueError(f"{path.removeprefix('$.')}: {exc}")
                error.path = path
                raise error from None
    return settings


# --- ACP views ---------------------------------------------------------------


def _select(  # noqa: PLR0917 - one row of the option table
    option_id: str,
    name: str,
    description: str,
    category: str | None,
    current: str,
    values: Sequence[tuple[str, str, str | None]],
) -> models.SessionConfigOption:
    return models.SessionConfigOption(
        id=option_id,
        name=name,
        description=description,
        category=category,
        current_value=current,
        options=[
            models.SessionConfigSelectOption(value=v, name=n, description=d) for v, n, d in values
        ],
    )


def config_options(settings: LaunchSettings, catalog: Catalog) -> list[models.SessionConfigOption]:
    """The complete option list for ``settings`` (current values set)."""
    model_values: list[tuple[str, str, str | None]] = [(DEFAULT, "Default", "agy's default model")]
    model_values += [(m.slug, m.name, m.slug) for m in catalog.models]
    if settings.model and all(v != settings.model for v, _, _ in model_values):
        # Discovery failed or is pending: the current model still shows.
        model_values.append((settings.model, settings.model, "configured model"))
    efforts: list[tuple[str, str, str | None]] = [(DEFAULT, "Default", "agy's default effort")]
    efforts += [(v, n, None) for v, n in EFFORTS.items()]
    if settings.effort and settings.effort not in EFFORTS:
        efforts.append((settings.effort, settings.effort.capitalize(), None))
    options = [
        _select(
            "mode",
            "Mode",
            "How much agy may do without asking",
            "mode",
            settings.mode,
            [(mode_id, name, description) for mode_id, (name, description) in MODES.items()],
        ),
        _select(
            "model", "Model", "The model agy uses", "model", settings.model or DEFAULT, model_values
        ),
        _select(
            "effort",
            "Reasoning effort",
            "agy's --effort",
            "thought_level",
            settings.effort or DEFAULT,
            efforts,
        ),
    ]
    if catalog.agents or settings.agent:
        agents: list[tuple[str, str, str | None]] = [(DEFAULT, "Default", "agy's default agent")]
        agents += [(a, a, None) for a in catalog.agents]
        if settings.agent and settings.agent not in catalog.agents:
            agents.append((settings.agent, settings.agent, "configured agent"))
        options.append(
            _select("agent", "Agent", "agy's --agent", "_agent", settings.agent or DEFAULT, agents)
        )
    return options


def mode_state(settings: LaunchSettings) -> models.SessionModeState:
    return models.SessionModeState(
        current_mode_id=settings.mode,
        available_modes=[
            models.SessionMode(id=mode_id, name=name, description=description)
            for mode_id, (name, description) in MODES.items()
        ],
    )


def option_setting(config_id: str) -> str:
    """The setting (``with_setting`` name) a config option id changes."""
    return LAUNCH_ONLY_OPTIONS.get(config_id, config_id)


def apply_option(
    settings: LaunchSettings, config_id: str, value: str, catalog: Catalog
) -> LaunchSettings:
    """``settings`` with a client's ``session/set_config_option`` applied.

    Raises:
        ConfigValueError: unknown option or a value it does not offer.
    """
    if config_id in LAUNCH_ONLY_OPTIONS:
        # agy-acp-map's extra configIds: settings without an option of their own.
        return with_setting(settings, option_setting(config_id), value)
    offered = {option.id: option for option in config_options(settings, catalog)}
    option = offered.get(config_id)
    if option is None:
        raise ConfigValueError(
            f"unknown configId {config_id!r}; this session offers {', '.join(offered)}"
        )
    values = [choice.value for choice in option.options]
    if value not in values:
        raise ConfigValueError(
            f"{value!r} is not a value of {config_id!r}; choose one of {', '.join(values)}"
        )
    return with_setting(settings, config_id, value)
