"""Turn an ACP prompt into the text agy receives, plus the files to stage (pure).

agy's stream-json stdin takes text only; any other block type ends the agy
session with an error (contract.md §2.1). So every block is checked before
anything is produced, and a prompt either converts completely or fails with a
:class:`PromptContentError` naming the offending block: never half-sent.

:func:`convert_prompt` handles every block ACP may send (acp/brief.md §3):

- ``text`` as is; ``resource_link`` as a short block naming what the client
  pointed at; an embedded text ``resource`` as a heading (URI, MIME type) and
  its text. Parts are joined by blank lines.
- ``image``: ``mimeType`` must be ``image/*``, ``data`` strict base64 (no
  whitespace, no data URL), within the size limits, checked on the encoded
  length before anything is decoded. The bytes decide the type (PNG, JPEG,
  GIF, WebP by magic number, ``media.sniff_image_type``): a JPEG
  labelled ``image/png`` is staged as ``.jpg``.
- an embedded ``blob`` resource: staged like an image when its type is on the
  allow-list below, else refused naming the type.
- ``audio`` and unknown blocks are refused.

Images and blobs become :class:`StagedFile` specs whose absolute paths (inside
the caller's private staging directory, which agy gets with ``--add-dir``) the
text already names: agy is told to view the file there. Writing them is the
caller's job (``workspace/staging.py``); nothing here does I/O.

Blob allow-list (the bytes decide where they can):

===================  ================================  =========
type                 recognised by                     extension
===================  ================================  =========
PNG/JPEG/GIF/WebP    magic number                      .png .jpg .gif .webp
PDF                  ``%PDF-`` prefix                  .pdf
plain text           ``mimeType`` + valid UTF-8        .txt
Markdown             ``mimeType`` + valid UTF-8        .md
CSV                  ``mimeType`` + valid UTF-8        .csv
JSON                 ``mimeType`` + valid UTF-8        .json
===================  ================================  =========
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..media import sniff_image_type
from . import models
from .limits import PromptLimits

#: The limits when the caller gives none (immutable, so shared).
_DEFAULT_LIMITS = PromptLimits()

UNSUPPORTED_IMAGE_MESSAGE = "Unsupported image format. Use PNG, JPEG, GIF, or WebP."
AUDIO_MESSAGE = "Audio content is not supported"

_IMAGE_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}
#: Text types staged from a blob when the bytes are UTF-8 (their ``mimeType``
#: decides: text has no magic number).
_TEXT_EXTENSIONS = {
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/csv": ".csv",
    "application/json": ".json",
}
_PDF = "application/pdf"
_SUPPORTED_BLOBS = "PNG, JPEG, GIF, WebP, PDF, plain text, Markdown, CSV or JSON"
_BLOCK_TYPES = "text, resource_link, image or resource"

_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=]")
_STEM_JUNK = re.compile(r"[^A-Za-z0-9_-]+")


@attrs.frozen
class StagedFile:
    """One file to write before the prompt reaches agy (the text names ``path``)."""

    #: File name inside the staging directory: ``<stem>-<12 hex digest><ext>``.
    name: str
    #: Absolute path: the staging directory joined with ``name``.
    path: str
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")
    #: The type the bytes proved (or, for text, the declared type).
    mime_type: str
    #: The prompt block it came from.
    index: int


@attrs.frozen
class ConvertedPrompt:
    """A prompt as agy's text plus the files that text refers to."""

    text: str
    files: tuple[StagedFile, ...] = ()

    @property
    def staged_bytes(self) -> int:
        return sum(len(file.data) for file in self.files)


@attrs.frozen
class PromptContentError(Exception):
    """The prompt holds a block the bridge cannot pass to agy (JSON-RPC -32602)."""

    message: str
    #: The offending block; None when the prompt has none (an empty array).
    index: int | None
    block_type: str
    #: JSON path below the block (``".data"``, ``".resource.blob"``), or "".
    field: str = ""
    #: Extra facts for the error's ``data`` (``mimeType``, ``limitBytes``).
    details: Mapping[str, Any] = attrs.field(factory=dict)

    def __str__(self) -> str:
        return self.message

    @property
    def data(self) -> dict[str, Any]:
        block = "" if self.index is None else f"[{self.index}]"
        return {
            "path": f"$.prompt{block}{self.field}",
            "type": self.block_type,
            **self.details,
        }


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
    converter = _Converter(os.path.normpath(staging_dir), limits)
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
    staging_dir: str
    limits: PromptLimits
    parts: list[str] = attrs.Factory(list)
    files: dict[str, StagedFile] = attrs.Factory(dict)
    #: Decoded bytes of every staged block so far (duplicates included).
    used: int = 0

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
            raise PromptContentError(AUDIO_MESSAGE, index, "audio")
        else:
            kind = _block_type(block)
            if kind == "<missing>":
                message = f"Content block has no 'type'. Send {_BLOCK_TYPES} blocks."
            else:
                message = f"Unsupported content block type {kind!r}. Send {_BLOCK_TYPES} blocks."
            raise PromptContentError(message, index, kind)

    def finish(self) -> ConvertedPrompt:
        return _converted(self.parts, tuple(self.files.values()))

    def _add_image(self, index: int, block: models.ImageContent) -> None:
        declared = block.mime_type
        base = _base_mime(declared)
        if not base.startswith("image/") or base == "image/":
            raise PromptContentError(
                f"Image mimeType must be an image/* type, not {declared!r}.",
                index,
                "image",
                ".mimeType",
                {"mimeType": declared},
            )
        raw = self._decode(block.data, index, "image", ".data", "Image")
        mime = sniff_image_type(raw)
        if mime is None:
            raise PromptContentError(
                UNSUPPORTED_IMAGE_MESSAGE, index, "image", ".data", {"mimeType": declared}
            )
        file = self._stage(
            raw,
            mime=mime,
            extension=_IMAGE_EXTENSIONS[mime],
            uri=block.uri,
            stem="image",
            index=index,
        )
        self.parts.append(
            f"[Attached image: {file.path} ({mime}, {len(raw)} bytes)]\n"
            "View the file at this absolute path to see the image."
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
        raw = self._decode(blob, index, "resource", ".resource.blob", "Embedded resource")
        mime, extension = _blob_type(raw, mime_type, index)
        file = self._stage(
            raw, mime=mime, extension=extension, uri=uri, stem="attachment", index=index
        )
        self.parts.append(
            f"[Attached file: {file.path} ({mime}, {len(raw)} bytes)]\n"
            f"Original URI: {uri}\n"
            "View the file at this absolute path to read it."
        )

    def _decode(self, data: str, index: int, block_type: str, field: str, what: str) -> bytes:
        """Strict base64 → bytes within the limits; sizes first, from the length alone."""

        def fail(message: str, **details: Any) -> PromptContentError:
            return PromptContentError(message, index, block_type, field, details)

        limits = self.limits
        if data[:5].lower() == "data:":
            raise fail(f"{what} data must be plain base64, not a data: URL.")
        # A 500 MB string must not be scanned or decoded: its length proves it too big.
        if len(data) > _max_encoded_length(limits.max_file_bytes):
            raise self._too_large(what, index, block_type, field)
        if self.used + _min_decoded_length(len(data)) > limits.max_prompt_bytes:
            raise self._over_budget(index, block_type, field)
        problem = _base64_problem(data)
        if problem is not None:
            raise fail(f"{what} data is not valid base64: {problem}.")
        try:
            raw = base64.b64decode(data, validate=True)
        except binascii.Error:  # not expected after _base64_problem
            raise fail(f"{what} data is not valid base64.") from None
        if not raw:
            raise fail(f"{what} is empty.")
        if len(raw) > limits.max_file_bytes:
            raise self._too_large(what, index, block_type, field)
        if self.used + len(raw) > limits.max_prompt_bytes:
            raise self._over_budget(index, block_type, field)
        self.used += len(raw)
        return raw

    def _too_large(self, what: str, index: int, block_type: str, field: str) -> PromptContentError:
        limit = self.limits.max_file_bytes
        return PromptContentError(
            f"{what} is larger than the {_size(limit)} limit.",
            index,
            block_type,
            field,
            {"limitBytes": limit},
        )

    def _over_budget(self, index: int, block_type: str, field: str) -> PromptContentError:
        limit = self.limits.max_prompt_bytes
        return PromptContentError(
            f"The prompt's images and files are larger than the {_size(limit)} limit per prompt.",
            index,
            block_type,
            field,
            {"limitBytes": limit},
        )

    def _stage(
        self, raw: bytes, *, mime: str, extension: str, uri: str | None, stem: str, index: int
    ) -> StagedFile:
        # Content-addressed names: unique per content, so a kept staging
        # directory (AGYBRIDGE_KEEP_STAGING) never has a file overwritten by
        # different bytes, and equal attachments share one file.
        digest = hashlib.blake2b(raw, digest_size=6).hexdigest()
        name = f"{_stem(uri, stem)}-{digest}{extension}"
        existing = self.files.get(name)
        if existing is not None:
            return existing
        file = StagedFile(
            name=name,
            path=os.path.join(self.staging_dir, name),
            data=raw,
            mime_type=mime,
            index=index,
        )
        self.files[name] = file
        return file


def _blob_type(raw: bytes, declared: str | None, index: int) -> tuple[str, str]:
    """(MIME type, extension) for an embedded blob on the allow-list, else an error."""
    image = sniff_image_type(raw)
    if image is not None:
        return image, _IMAGE_EXTENSIONS[image]
    if raw.startswith(b"%PDF-"):
        return _PDF, ".pdf"
    base = _base_mime(declared or "")
    field, details = ".resource.blob", {"mimeType": declared}
    if base in _TEXT_EXTENSIONS:
        if b"\x00" not in raw:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                return base, _TEXT_EXTENSIONS[base]
        raise PromptContentError(
            f"Embedded resource is labelled {declared!r} but is not valid UTF-8 text.",
            index,
            "resource",
            field,
            details,
        )
    if base.startswith("image/"):
        raise PromptContentError(UNSUPPORTED_IMAGE_MESSAGE, index, "resource", field, details)
    if base == _PDF:
        raise PromptContentError(
            f"Embedded resource is labelled {declared!r} but is not a PDF file.",
            index,
            "resource",
            field,
            details,
        )
    if not base:
        message = (
            "Unsupported embedded resource: it has no mimeType and its contents are not "
            f"a known type. Embed {_SUPPORTED_BLOBS}."
        )
    else:
        message = f"Unsupported embedded resource type {declared!r}. Embed {_SUPPORTED_BLOBS}."
    raise PromptContentError(message, index, "resource", field, details)


def _base64_problem(data: str) -> str | None:
    """Why ``data`` is not strict base64 (RFC 4648 §4, padded), or None."""
    bad = _NOT_BASE64.search(data)
    if bad is not None:
        return f"character {bad.group()!r} at offset {bad.start()} is not in the base64 alphabet"
    if len(data) % 4:
        return f"its length ({len(data)}) is not a multiple of 4"
    body = data.rstrip("=")
    if "=" in body or len(data) - len(body) > 2:
        return "'=' padding may only end the data (at most two)"
    return None


def _max_encoded_length(max_bytes: int) -> int:
    """The longest strict base64 text whose bytes fit in ``max_bytes``."""
    return 4 * -(-max_bytes // 3)


def _min_decoded_length(encoded_length: int) -> int:
    """The fewest bytes a strict base64 text of this length can decode to."""
    return max(0, encoded_length // 4 * 3 - 2)


def _base_mime(mime: str) -> str:
    """``"Text/Plain; charset=utf-8"`` → ``"text/plain"``."""
    return mime.split(";", 1)[0].strip().lower()


def _stem(uri: str | None, default: str) -> str:
    """A safe file-name stem from the last segment of ``uri`` (without extension)."""
    if not uri:
        return default
    segment = re.split(r"[?#]", uri, maxsplit=1)[0].rstrip("/").rsplit("/", 1)[-1]
    segment = segment.rsplit(".", 1)[0] if "." in segment[1:] else segment
    stem = _STEM_JUNK.sub("-", segment).strip("-_")[:40].strip("-_")
    return stem or default


def _size(limit: int) -> str:
    if limit % 2**20 == 0:
        return f"{limit // 2**20} MiB"
    if limit % 2**10 == 0:
        return f"{limit // 2**10} KiB"
    return f"{limit} bytes"


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
