"""Plain text chunks: what most of a turn's ``session/update``s are (pure).

Both the wire encoder's fast path and the running turn's log treat a text
chunk that carries nothing but its text and message id specially; this is
the one definition of such a chunk.
"""

from __future__ import annotations

from typing import TypeAlias

from . import models

TextChunk: TypeAlias = models.AgentMessageChunk | models.AgentThoughtChunk | models.UserMessageChunk
_CHUNK_CLASSES = (models.AgentMessageChunk, models.AgentThoughtChunk, models.UserMessageChunk)


def plain_text_chunk(update: models.SessionUpdate) -> tuple[TextChunk, str] | None:
    """``update`` and its text if it is a message, thought or user chunk of
    plain text (no annotations, no ``_meta`` on it or its content); None
    otherwise."""
    # The exact type first (the classes are final): most updates are agent
    # text, tested without a call.
    if type(update) is not models.AgentMessageChunk and not isinstance(update, _CHUNK_CLASSES):
        return None
    content = update.content
    if (
        type(content) is not models.TextContent
        or content.annotations is not None
        or content.meta is not None
        or update.meta is not None
    ):
        return None
    return update, content.text
