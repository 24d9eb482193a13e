"""From an ACP prompt to what agy receives.

Prompt blocks are checked and converted completely before anything reaches
agy (``acp.content.convert_prompt``); attachments are staged as files in the
session's private ``--add-dir`` root and named by absolute path; linked files
the user changed in the editor without saving follow as text
(``editor_buffers.py``). A prompt
that is one of the bridge's commands (``/model``, ``/mode``, ``/effort``,
``/status``, ``/doctor``) is answered by ``commands.py`` without an agy turn;
``/skill`` prompts are rewritten so they work with agy's slash expansion
disabled.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TypeGuard

import attrs
import trio

from ..acp import models
from ..acp.content import ConvertedPrompt, convert_prompt, convert_text_prompt
from ..acp.limits import PromptLimits
from ..session import Session
from ..session.commands import BridgeCommand, SkillRequest, parse, skill_prompt
from . import editor_buffers


@attrs.frozen
class PreparedPrompt:
    text: str
    #: What the user typed, for the display history.
    display_text: str
    converted: ConvertedPrompt


def command_of(
    blocks: Sequence[models.ContentBlock], session: Session
) -> BridgeCommand | SkillRequest | None:
    """A slash command, if the prompt is exactly one text block holding one."""
    if len(blocks) != 1 or not isinstance(blocks[0], models.TextContent):
        return None
    return parse(blocks[0].text, session.skills)


def slash_text(blocks: Sequence[models.ContentBlock]) -> bool:
    """The prompt is one text block that starts with ``/`` (a command, maybe)."""
    return (
        len(blocks) == 1
        and isinstance(blocks[0], models.TextContent)
        and blocks[0].text.lstrip().startswith("/")
    )


def display_text(blocks: Sequence[models.ContentBlock]) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, models.TextContent):
            parts.append(block.text)
        elif isinstance(block, models.ResourceLink):
            parts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, models.EmbeddedResource):
            parts.append(f"[resource: {block.resource.get('uri', '?')}]")
        elif isinstance(block, models.ImageContent):
            parts.append("[image]")
    return "\n\n".join(parts)


async def prepare(
    session: Session,
    blocks: Sequence[models.ContentBlock],
    key: int,
    limits: PromptLimits,
    skill: SkillRequest | None = None,
) -> PreparedPrompt:
    """Convert (in a worker thread: base64 of tens of MiB is CPU work) and
    stage the prompt's files.

    Raises:
        PromptContentError: a block cannot be passed to agy (-32602).
        StagingError: the files could not be written (-32603).
    """
    if skill is None and _plain_and_small(blocks):
        # The usual prompt: string work of microseconds (no thread hop), no
        # file to stage, and what agy gets is what the user typed (display_text).
        converted = convert_text_prompt(blocks)
        return PreparedPrompt(text=converted.text, display_text=converted.text, converted=converted)
    shown = display_text(blocks)
    # The editor's unsaved text of linked files (a no-op unless the client reads files).
    unsaved = await editor_buffers.unsaved_buffers(session, blocks)
    if skill is not None:
        blocks = [models.TextContent(text=skill_prompt(skill))]
    staging = session.staging
    staging_dir = staging.prompt_dir(key) if staging is not None else "/nonexistent-staging"
    convert = functools.partial(convert_prompt, blocks, staging_dir=staging_dir, limits=limits)
    if _plain_and_small(blocks):
        converted = convert()  # a skill's text: no thread hop
    else:
        converted = await trio.to_thread.run_sync(convert)
    if converted.files:
        if staging is None:
            raise RuntimeError("attachments need a staging directory")
        await trio.to_thread.run_sync(staging.write, converted.files)
    text = "\n\n".join([converted.text, *unsaved])
    return PreparedPrompt(text=text, display_text=shown, converted=converted)


#: Text-only prompts up to this many characters are converted in the loop.
INLINE_TEXT_CHARS = 2**16


def _plain_and_small(
    blocks: Sequence[models.ContentBlock],
) -> TypeGuard[Sequence[models.TextContent]]:
    total = 0
    for block in blocks:
        if type(block) is not models.TextContent:
            return False
        total += len(block.text)
    return total <= INLINE_TEXT_CHARS


async def discard(session: Session, key: int) -> None:
    """Remove a prompt's staged files once its turn is over (shielded: also
    after a cancel)."""
    staging = session.staging
    if staging is not None:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(staging.discard, key)
