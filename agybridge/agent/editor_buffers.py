"""Unsaved editor buffers offered to agy as context (the client's ``fs/read_text_file``).

agy reads and writes files on disk with its own tools and runs commands itself: the
client's ``fs/*`` and ``terminal/*`` cannot stand in for them (README "Not possible
with agy"). What agy cannot see is text the user changed in the editor and has not
saved. So when the client advertises ``fs.readTextFile``, each local file a prompt
links (a ``resource_link`` with a ``file:`` URI) is read through the client, and when
the editor's text differs from the disk (or the file exists only in the editor) the
prompt carries it after the user's blocks, saying so. A client that answers with an
error, or not within :data:`BUFFER_WAIT_S`, costs nothing: agy reads the disk.
Embedded text resources need none of this: the client already sent the editor's text.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import trio

from ..acp import models
from ..jsonrpc import PeerClosedError, RpcError
from ..session import Session
from ..session.deps import AskQuestion

logger = logging.getLogger(__name__)

#: How long a prompt waits for the client to read its linked files (all of them).
BUFFER_WAIT_S = 5.0
#: A buffer longer than this is named, not included (agy gets a line of stdin per turn).
MAX_BUFFER_CHARS = 256 * 1024
#: Linked files read per prompt at most.
MAX_FILES = 16


def linked_files(blocks: Sequence[models.ContentBlock]) -> list[str]:
    """The absolute local paths the prompt's ``resource_link`` blocks name, in order."""
    paths: list[str] = []
    for block in blocks:
        if not isinstance(block, models.ResourceLink):
            continue
        parts = urlsplit(block.uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            continue
        path = unquote(parts.path)
        if os.path.isabs(path) and "\x00" not in path and path not in paths:
            paths.append(os.path.normpath(path))
    return paths[:MAX_FILES]


def describe_unsaved(path: str, text: str) -> str:
    """What agy is told about a buffer whose text differs from the disk."""
    heading = f"[Unsaved changes in the editor: {path}]"
    if len(text) > MAX_BUFFER_CHARS:
        return (
            f"{heading}\nThe editor holds {len(text)} characters not saved to disk (too many "
            "to include here): the file on disk is not what the user sees."
        )
    return f"{heading}\nThe file on disk is older; the editor's current text follows.\n{text}"


async def unsaved_buffers(session: Session, blocks: Sequence[models.ContentBlock]) -> list[str]:
    """A part for each linked file whose editor text is not what is on disk.

    The files are asked for at once, under one deadline: a client that does not
    answer delays the prompt by :data:`BUFFER_WAIT_S` at most, however many it links."""
    ask = session.deps.ask_question
    paths = linked_files(blocks)
    if ask is None or not paths:
        return []
    texts: dict[str, str] = {}

    async def read(path: str) -> None:
        text = await _editor_text(session.session_id, path, ask)
        if text is not None:
            texts[path] = text

    with trio.move_on_after(BUFFER_WAIT_S) as waited:
        async with trio.open_nursery() as nursery:
            for path in paths:
                nursery.start_soon(read, path)
    if waited.cancelled_caught:
        logger.info("the editor did not give every linked file within %g s", BUFFER_WAIT_S)
    parts: list[str] = []
    for path in paths:
        text = texts.get(path)
        if text is not None and not await trio.to_thread.run_sync(_on_disk, path, text):
            parts.append(describe_unsaved(path, text))
    return parts


async def _editor_text(session_id: str, path: str, ask: AskQuestion) -> str | None:
    def phrase(capabilities: models.ClientCapabilities) -> tuple[str, Any] | None:
        if not capabilities.fs.read_text_file:
            return None
        return "fs/read_text_file", {"sessionId": session_id, "path": path}

    try:
        asked = await ask(session_id, phrase)
    except (RpcError, PeerClosedError) as exc:
        logger.info("the editor did not give %s: %s", path, exc)
        return None
    answer = asked[1] if asked is not None else None
    content = answer.get("content") if isinstance(answer, dict) else None
    return content if isinstance(content, str) else None


def _on_disk(path: str, text: str) -> bool:
    """The file on disk holds exactly ``text`` (read no further than that proves)."""
    expected = text.encode("utf-8")
    try:
        with open(path, "rb") as file:
            return file.read(len(expected) + 1) == expected
    except OSError:
        return False  # only in the editor (a new buffer), or unreadable to agy too
