"""Turn an ACP prompt into the text agy receives (pure).

agy's stream-json stdin takes text only; any other block type ends the agy
session with an error (contract.md §2.1). So every block is checked before
anything is sent, and a prompt either converts completely or fails with a
:class:`PromptContentError` naming the offending block: never half-sent.

Supported now: ``text`` (as is) and ``resource_link`` (a short block naming
what the client pointed at, so agy can open it itself). Both are baseline ACP
(every agent must accept them); richer blocks stay unadvertised in
``promptCapabilities`` and are refused here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from . import models


@attrs.frozen
class PromptContentError(Exception):
    """The prompt holds a block the bridge cannot pass to agy."""

    message: str
    index: int
    block_type: str

    def __str__(self) -> str:
        return self.message

    @property
    def data(self) -> dict[str, Any]:
        return {"path": f"$.prompt[{self.index}]", "type": self.block_type}


_UNSUPPORTED = {
    models.ImageContent: "image",
    models.AudioContent: "audio",
    models.EmbeddedResource: "resource",
}


def prompt_to_text(blocks: Sequence[models.ContentBlock]) -> str:
    """The agy prompt text for ``blocks``: parts joined by blank lines.

    Raises:
        PromptContentError: a block is not supported, or the prompt is empty.
    """
    parts: list[str] = []
    for index, block in enumerate(blocks):
        if isinstance(block, models.TextContent):
            parts.append(block.text)
        elif isinstance(block, models.ResourceLink):
            parts.append(describe_resource_link(block))
        elif isinstance(block, models.UnknownContent):
            kind = str(block.raw.get("type", "<missing>"))
            raise PromptContentError(
                f"prompt block {index} has unknown type {kind!r}; "
                "this agent accepts text and resource_link blocks",
                index,
                kind,
            )
        else:
            kind = _UNSUPPORTED.get(type(block), type(block).__name__)
            raise PromptContentError(
                f"prompt block {index} is {kind!r} content, which this agent does not "
                "accept (see promptCapabilities); send text or resource_link blocks",
                index,
                kind,
            )
    if not any(part.strip() for part in parts):
        raise PromptContentError(
            "the prompt is empty: send at least one non-empty text block", 0, "text"
        )
    return "\n\n".join(parts)


def describe_resource_link(link: models.ResourceLink) -> str:
    """A short text naming a linked resource and what is known about it."""
    lines = [f"[Resource: {link.name}]", f"URI: {link.uri}"]
    if link.title:
        lines.append(f"Title: {link.title}")
    if link.mime_type:
        lines.append(f"MIME type: {link.mime_type}")
    if link.description:
        lines.append(f"Description: {link.description}")
    if link.size is not None:
        lines.append(f"Size: {link.size} bytes")
    return "\n".join(lines)
