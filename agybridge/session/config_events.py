"""The turn core's vocabulary for what the client changes about how agy is
launched: the settings (options, mode) and the session's directory list.
Both are requested at any time and applied between turns (``turns.py``):
at once when no turn runs, else when the running turn ends, and agy is
respawned warm with them. Plain data, re-exported by ``turn_events.py``."""

from __future__ import annotations

import attrs

from .config import LaunchSettings

# --- events (in) ---------------------------------------------------------------


@attrs.frozen
class SettingsRequested:
    #: None: they stay (a reload).
    settings: LaunchSettings | None
    #: Tell the client when applied at once too (the change did not come
    #: with an answer that carries the options: a slash command).
    announce: bool = False
    #: Respawn agy (warm) even if nothing changed: it reads its own settings,
    #: agents and workspace files only when it starts (``settings/reload``).
    reload: bool = False


@attrs.frozen
class DirectoriesRequested:
    """``additionalDirectories`` sent again (``session/load``,
    ``session/resume``): the session's complete list from now on (ACP); or
    the session moved to another ``cwd`` (``_agybridge/session/set_workspace``)."""

    #: None: the list stays (a move).
    dirs: tuple[str, ...] | None
    #: The new working directory (None: it stays).
    cwd: str | None = None


# --- actions (out) -------------------------------------------------------------


@attrs.frozen
class ApplySettings:
    old: LaunchSettings
    new: LaunchSettings
    #: Tell the client (the change was requested during the turn that just
    #: ended, or by a slash command).
    announce: bool


@attrs.frozen
class ApplyDirectories:
    """The session's roots become ``new`` (the next agy gets them as ``--add-dir``),
    and its working directory ``cwd`` when that moved."""

    old: tuple[str, ...]
    new: tuple[str, ...]
    #: The new working directory (None: it did not move).
    cwd: str | None = None
