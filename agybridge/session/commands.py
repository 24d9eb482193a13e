"""Slash commands and what a session tells its client outside a turn.

The bridge's own commands and the user's agy skills (pure): ACP clients send a
command as a prompt starting with ``/name`` (slash-commands.mdx). The bridge
answers its own commands itself (``/model``, ``/mode``, ``/effort``,
``/status``, ``/doctor``) without an agy turn. A ``/skill`` prompt for a
workspace skill is rewritten into plain instructions naming the skill's file,
so it works with agy's slash expansion disabled (the default: agy would
otherwise expand any prompt that happens to start with ``/``). Everything else
goes to agy unchanged.

:class:`Announcer` sends the session's configuration options, modes and
commands (the bridge's and the workspace's skills). Changes are sent only once
the client has seen the session (Zed drops updates for a session whose
response it has not seen), and a catalog change only when the options really
changed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

import attrs
import trio

from ..acp import models
from ..workspace.skills import Skill, find_skills
from .config import Catalog, LaunchSettings, config_options, mode_state
from .outlet import Outlet

#: The bridge's commands: name -> (description, input hint or None).
BRIDGE_COMMANDS: dict[str, tuple[str, str | None]] = {
    "model": ("Show or switch agy's model", "model slug, or 'default'"),
    "mode": ("Show or switch the session mode (safety tier or agy mode)", "mode id"),
    "effort": ("Show or switch the reasoning effort", "low, medium, high or default"),
    "status": ("Session, agy conversation, agy version and token usage", None),
    "doctor": ("Check agy: binary, version, sign-in, discovery and logs", None),
    "diff": ("Show the file changes agy made in this session (or in one turn)", "turn number"),
    "undo": ("Undo the file changes of agy's last turn that changed files", "force"),
}

_COMMAND = re.compile(r"^/(?P<name>[A-Za-z0-9][A-Za-z0-9._:-]*)(?:[ \t]+(?P<args>.*))?$", re.S)


@attrs.frozen
class BridgeCommand:
    name: str
    args: str


@attrs.frozen
class SkillRequest:
    skill: Skill
    args: str


def parse(text: str, skills: Sequence[Skill]) -> BridgeCommand | SkillRequest | None:
    """What a prompt's text asks for, if it is a command the bridge knows."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name, args = match.group("name"), (match.group("args") or "").strip()
    if name in BRIDGE_COMMANDS:
        return BridgeCommand(name, args)
    for skill in skills:
        if skill.name == name:
            return SkillRequest(skill, args)
    return None


def skill_prompt(request: SkillRequest) -> str:
    """Plain text that makes agy use the skill without slash expansion."""
    text = (
        f'Use the skill "{request.skill.name}": read its instructions in '
        f"{request.skill.path} and follow them."
    )
    if request.args:
        text += f"\n\nInput for the skill:\n{request.args}"
    return text


def available_commands(skills: Sequence[Skill]) -> list[models.AvailableCommand]:
    """The bridge's commands, then the workspace skills."""
    commands = [
        models.AvailableCommand(
            name=name,
            description=description,
            input=models.CommandInput(hint=hint) if hint else None,
        )
        for name, (description, hint) in BRIDGE_COMMANDS.items()
    ]
    commands += [
        models.AvailableCommand(
            name=skill.name,
            description=skill.description or f"agy skill {skill.name}",
            input=models.CommandInput(hint="what the skill should work on"),
        )
        for skill in skills
        if skill.name not in BRIDGE_COMMANDS
    ]
    return commands


class Announcer:
    def __init__(
        self, outlet: Outlet, catalog: Callable[[], Catalog], roots: tuple[str, ...]
    ) -> None:
        self._outlet = outlet
        self._catalog = catalog
        #: Where workspace skills are looked for (the session's roots).
        self.roots = roots
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
            functools.partial(find_skills, list(self.roots), reserved=BRIDGE_COMMANDS.keys())
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
