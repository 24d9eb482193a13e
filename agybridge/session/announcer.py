"""What a session tells its client outside a turn: its configuration options
and modes, and the slash commands it offers (the bridge's and the
workspace's agy skills). Changes are sent only once the client has seen the
session (Zed drops updates for a session whose response it has not seen),
and a catalog change only when the options really changed."""

from __future__ import annotations

import functools
from collections.abc import Callable

import trio

from ..acp import models
from ..workspace.skills import Skill, find_skills
from .commands import BRIDGE_COMMANDS, available_commands
from .config import Catalog, LaunchSettings, config_options, mode_state
from .outlet import Outlet


class Announcer:
    def __init__(
        self, outlet: Outlet, catalog: Callable[[], Catalog], roots: tuple[str, ...]
    ) -> None:
        self._outlet = outlet
        self._catalog = catalog
        self._roots = roots
        #: Workspace skills offered as slash commands (found when announced).
        self.skills: list[Skill] = []
        self._seen: list[models.SessionConfigOption] | None = None

    @property
    def client_knows(self) -> bool:
        """The client has the session (a new/load/resume response was sent)."""
        return self._seen is not None

    def config_options(self, requested: LaunchSettings) -> list[models.SessionConfigOption]:
        """The complete option list, with the values the client last chose."""
        return config_options(requested, self._catalog())

    def modes(self, requested: LaunchSettings) -> models.SessionModeState:
        return mode_state(requested)

    def options_seen(self, requested: LaunchSettings) -> None:
        """The client got the option list (in a response)."""
        self._seen = self.config_options(requested)

    async def send_commands(self) -> None:
        self.skills = await trio.to_thread.run_sync(
            functools.partial(find_skills, list(self._roots), reserved=BRIDGE_COMMANDS.keys())
        )
        await self._outlet.send(
            models.AvailableCommandsUpdate(available_commands=available_commands(self.skills))
        )

    async def send_options(self, requested: LaunchSettings, *, only_if_changed: bool) -> None:
        options = self.config_options(requested)
        if only_if_changed and options == self._seen:
            return
        self._seen = options
        await self._outlet.send(models.ConfigOptionUpdate(config_options=options))

    async def settings_applied(self, old: LaunchSettings, new: LaunchSettings) -> None:
        """A change requested during a turn took effect as it ended: say so."""
        await self.send_options(new, only_if_changed=False)
        if old.mode != new.mode:
            await self._outlet.send(models.CurrentModeUpdate(current_mode_id=new.mode))
