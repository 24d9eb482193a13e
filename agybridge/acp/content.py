"""Turn an ACP prompt into the text agy receives, plus the files to stage (pure).

agy's stream-json stdin takes text only; any other block type ends the agy
session with an error (contract.md §2.1). So every block is checked before
anything is produced, and a prompt either converts completely or fails with a
:class:`PromptContentError` naming the offending block: never half-sent.

:func:`convert_prompt` handles every block ACP may send (acp/brief.md §3):

- ``text`` as is; ``resource_link`` as a short block naming what the client
  pointed at; an embedded text ``resource`` as a heading (URI, MIME type) and
  its text. Parts are joined by blank lines.
- ``image``, ``audio`` and an embedded ``blob`` resource: their bytes are
  checked and become :class:`StagedFile` specs (attachments.py: strict
  base64, size limits, the types the bytes prove), whose absolute paths
  (inside the caller's private staging directory, which agy gets with
  ``--add-dir``) the text already names: agy is told to open the file there.
  agy has no tool that plays audio (its stdin takes text, its file viewer
  reads text and images), so ``promptCapabilities.audio`` stays false; a
  client that sends audio anyway gets agy-acp-map's behaviour, a staged file.
- Unknown blocks are refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from . import models
from .attachments import (
    UNSUPPORTED_AUDIO_MESSAGE,
    UNSUPPORTED_IMAGE_MESSAGE,
    Attachments,
    StagedFile,
    viewable,
)
from .limits import PromptLimits
from .prompt_error import PromptContentError

#: The prompt's face: the attachments' file spec and refusals are part of it.
__all__ = [
    "UNSUPPORTED_AUDIO_MESSAGE",
    "UNSUPPORTED_IMAGE_MESSAGE",
    "ConvertedPrompt",
    "PromptContentError",
    "StagedFile",
    "convert_prompt",
    "convert_text_prompt",
    "describe_resource_link",
    "describe_text_resource",
]

#: The limits when the caller gives none (immutable, so shared).
_DEFAULT_LIMITS = PromptLimits()

_BLOCK_TYPES = "text, resource_link, image, audio or resource"


@attrs.frozen
class ConvertedPrompt:
    """A prompt as agy's text plus the files that text refers to."""

    text: str
    files: tuple[StagedFile, ...] = ()

    @property
    def staged_bytes(self) -> int:
        return sum(len(file.data) for file in self.files)


def convert_prompt(
    blocks: Sequence[models.ContentBlock],
    *,
    staging_dir: str,
    limits: PromptLimits = _DEFAULT_LIMITS,
) -> ConvertedPrompt:
    """Check every block of ``blocks`` and convert the whole prompt.

    Args:
        blocks: the ``session/prompt`` content blocks.
        staging_dir: absolute path of the directory the files will be written
            to; the text names each file by its path there.
        limits: size limits for staged files.

    Returns:
        The text for agy's stdin and the files to write first.

    Raises:
        PromptContentError: a block is invalid or unsupported, a limit is
            exceeded, or the prompt is empty. Nothing is returned then.
        ValueError: ``staging_dir`` is not absolute (a caller bug).
    """
    if not os.path.isabs(staging_dir):
        raise ValueError(f"staging_dir must be an absolute path, not {staging_dir!r}")
    converter = _Converter(Attachments(os.path.normpath(staging_dir), limits))
    for index, block in enumerate(blocks):
        converter.add(index, block)
    return converter.finish()


def convert_text_prompt(blocks: Sequence[models.TextContent]) -> ConvertedPrompt:
    """`convert_prompt` for a prompt of text blocks only, which stages no file
    and so needs no staging directory (every prompt of a plain chat). A
    generated-input test compares both.

    Raises:
        PromptContentError: the prompt is empty.
    """
    return _converted([block.text for block in blocks], ())


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


def describe_text_resource(uri: str, text: str, mime_type: str | None) -> str:
    """An embedded text resource: a heading naming its URI (and type), then the text."""
    heading = f"[Resource: {uri} ({mime_type})]" if mime_type else f"[Resource: {uri}]"
    return f"{heading}\n{text}"


# --- the converter --------------------------------------------------------------------


@attrs.define
class _Converter:
    attachments: Attachments
    parts: list[str] = attrs.Factory(list)

    def add(self, index: int, block: models.ContentBlock) -> None:
        if isinstance(block, models.TextContent):
            self.parts.append(block.text)
        elif isinstance(block, models.ResourceLink):
            self.parts.append(describe_resource_link(block))
        elif isinstance(block, models.ImageContent):
            self._add_image(index, block)
        elif isinstance(block, models.EmbeddedResource):
            self._add_resource(index, block.resource)
        elif isinstance(block, models.AudioContent):
            self._add_audio(index, block)
        else:
            kind = _block_type(block)
            if kind == "<missing>":
                message = f"Content block has no 'type'. Send {_BLOCK_TYPES} blocks."
            else:
                message = f"Unsupported content block type {kind!r}. Send {_BLOCK_TYPES} blocks."
            raise PromptContentError(message, index, kind)

    def finish(self) -> ConvertedPrompt:
        return _converted(self.parts, tuple(self.attachments.files.values()))

    def _add_image(self, index: int, block: models.ImageContent) -> None:
        file, mime = self.attachments.image(block.data, block.mime_type, uri=block.uri, index=index)
        self.parts.append(
            f"[Attached image: {file.path} ({mime}, {len(file.data)} bytes)]\n"
            "View the file at this absolute path to see the image."
        )

    def _add_audio(self, index: int, block: models.AudioContent) -> None:
        file, mime = self.attachments.audio(block.data, block.mime_type, index=index)
        self.parts.append(
            f"[Attached audio: {file.path} ({mime}, {len(file.data)} bytes)]\n"
            "Use the audio file at this absolute path (your file viewer shows text and "
            "images only: process it with a command-line tool if one is installed)."
        )

    def _add_resource(self, index: int, resource: Mapping[str, Any]) -> None:
        uri = resource.get("uri")
        if not isinstance(uri, str):
            raise PromptContentError(
                "Embedded resource needs a string 'uri'.", index, "resource", ".resource.uri"
            )
        mime_type = resource.get("mimeType")
        if mime_type is not None and not isinstance(mime_type, str):
            raise PromptContentError(
                "Embedded resource 'mimeType' must be a string.",
                index,
                "resource",
                ".resource.mimeType",
            )
        has_text, has_blob = "text" in resource, "blob" in resource
        if has_text == has_blob:
            raise PromptContentError(
                "Embedded resource needs exactly one of 'text' or 'blob'.",
                index,
                "resource",
                ".resource",
            )
        if has_text:
            text = resource["text"]
            if not isinstance(text, str):
                raise PromptContentError(
                    "Embedded resource 'text' must be a string.",
                    index,
                    "resource",
                    ".resource.text",
                )
            self.parts.append(describe_text_resource(uri, text, mime_type or None))
            return
        blob = resource["blob"]
        if not isinstance(blob, str):
            raise PromptContentError(
                "Embedded resource 'blob' must be a string.", index, "resource", ".resource.blob"
            )
        file, mime = self.attachments.blob(blob, mime_type, uri=uri, index=index)
        if viewable(mime):
            how = "View the file at this absolute path to read it."
        else:
            how = "It is a binary file: inspect it at this absolute path with your tools."
        self.parts.append(
            f"[Attached file: {file.path} ({mime}, {len(file.data)} bytes)]\n"
            f"Original URI: {uri}\n{how}"
        )


def _converted(parts: list[str], files: tuple[StagedFile, ...]) -> ConvertedPrompt:
    """The prompt's text (its parts joined by blank lines) and files; an empty prompt is refused."""
    text = "\n\n".join(parts)
    # Blank unless some part has a non-blank character (isspace: no stripped copy).
    if not files and (not text or text.isspace()):
        raise PromptContentError(
            "The prompt is empty: send some text, an image or a resource.",
            0 if parts else None,
            "text",
        )
    return ConvertedPrompt(text=text, files=files)


def _block_type(block: models.ContentBlock) -> str:
    if isinstance(block, models.UnknownContent):
        kind = block.raw.get("type", "<missing>")
        return kind if isinstance(kind, str) else repr(kind)
    tag = getattr(block, "TAG", None)
    return tag if isinstance(tag, str) else type(block).__name__
