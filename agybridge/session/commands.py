"""Slash commands: the bridge's own, and the user's agy skills (pure).

ACP clients send a command as a prompt starting with ``/name``
(slash-commands.mdx). The bridge answers its own commands itself (``/model``,
``/mode``, ``/effort``, ``/status``, ``/doctor``) without an agy turn. A
``/skill`` prompt for a workspace skill is rewritten into plain instructions
naming the skill's file, so it works with agy's slash expansion disabled
(the default: agy would otherwise expand any prompt that happens to start
with ``/``). Everything else goes to agy unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from ..acp import models
from ..workspace.skills import Skill

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
