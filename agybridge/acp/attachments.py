"""The bytes a prompt attaches, and the files they become (pure).

An image or audio block or an embedded ``blob`` resource carries base64 data. Here it
is checked and decoded strictly (no whitespace, no data URL) within the size
limits, judged on the encoded length before anything is decoded; its bytes
decide its type (PNG, JPEG, GIF, WebP by magic number,
``media.sniff_image_type``: a JPEG labelled ``image/png`` is staged as
``.jpg``); and it becomes a :class:`StagedFile` with a content-addressed name
inside the caller's staging directory. Writing the files is the caller's job
(``workspace/staging.py``); nothing here does I/O.

Blob types (the bytes decide where they can):

===================  ================================  =========
type                 recognised by                     extension
===================  ================================  =========
PNG/JPEG/GIF/WebP    magic number                      .png .jpg .gif .webp
PDF                  ``%PDF-`` prefix                  .pdf
audio                magic number (``media.py``)       .wav .mp3 .ogg ...
plain text           ``mimeType`` + valid UTF-8        .txt
Markdown             ``mimeType`` + valid UTF-8        .md
CSV                  ``mimeType`` + valid UTF-8        .csv
JSON                 ``mimeType`` + valid UTF-8        .json
anything else        staged as a binary file           by ``mimeType``, else .bin
===================  ================================  =========

A blob whose label promises a checked type its bytes are not (an "image/png"
that is no image, a "text/plain" that is not UTF-8) is refused: it is a client
bug agy could only misread. Audio blocks must hold one of the audio types.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import attrs

from ..media import AUDIO_FORMATS, audio_extension, sniff_audio_type, sniff_image_type
from .limits import PromptLimits
from .prompt_error import PromptContentError

UNSUPPORTED_IMAGE_MESSAGE = "Unsupported image format. Use PNG, JPEG, GIF, or WebP."
UNSUPPORTED_AUDIO_MESSAGE = f"Unsupported audio format. Use {AUDIO_FORMATS}."
#: The type of a blob nothing recognises and nobody labelled.
OCTET_STREAM = "application/octet-stream"
INVALID = "attachment_invalid"
TOO_LARGE = "attachment_too_large"

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
#: Extensions for binary blobs by their label (a file manager and ``file`` read
#: them better than ``.bin``); anything else is ``.bin``.
_BINARY_EXTENSIONS = {
    "application/zip": ".zip",
    "application/gzip": ".gz",
    "application/x-gzip": ".gz",
    "application/x-tar": ".tar",
    "application/x-7z-compressed": ".7z",
    "application/msword": ".doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.ms-excel": ".xls",
    "text/html": ".html",
    "application/xml": ".xml",
    "text/xml": ".xml",
    "video/mp4": ".mp4",
}

#: ``type/subtype`` as RFC 6838 allows them: what may be echoed to agy as a type.
_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
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


class Attached(NamedTuple):
    """One block's file, and the type the block's own bytes proved (a file equal
    bytes staged before is shared, and a text type may have been labelled otherwise)."""

    file: StagedFile
    mime_type: str


class _MediaKind(NamedTuple):
    """An image or audio block: its type prefix, how its bytes prove a type."""

    block: str
    what: str
    sniff: Callable[[bytes], str | None]
    extension: Callable[[str], str]
    unsupported: str


_IMAGE = _MediaKind(
    "image", "Image", sniff_image_type, _IMAGE_EXTENSIONS.__getitem__, UNSUPPORTED_IMAGE_MESSAGE
)
_AUDIO = _MediaKind("audio", "Audio", sniff_audio_type, audio_extension, UNSUPPORTED_AUDIO_MESSAGE)


@attrs.define
class Attachments:
    """The files one prompt stages, within its limits."""

    #: Absolute and normalised.
    staging_dir: str
    limits: PromptLimits
    files: dict[str, StagedFile] = attrs.Factory(dict)
    #: Decoded bytes of every staged block so far (duplicates included).
    used: int = 0

    def image(self, data: str, declared: str, *, uri: str | None, index: int) -> Attached:
        """An image block's file: its bytes must be one of the image types."""
        return self._media(_IMAGE, data, declared, uri=uri, index=index)

    def audio(self, data: str, declared: str, *, index: int) -> Attached:
        """An audio block's file: its bytes must be one of the audio types."""
        return self._media(_AUDIO, data, declared, uri=None, index=index)

    def _media(
        self, kind: _MediaKind, data: str, declared: str, *, uri: str | None, index: int
    ) -> Attached:
        base = _base_mime(declared)
        if not base.startswith(f"{kind.block}/") or base == f"{kind.block}/":
            raise PromptContentError(
                f"{kind.what} mimeType must be an {kind.block}/* type, not {declared!r}.",
                index,
                kind.block,
                ".mimeType",
                {"mimeType": declared},
                INVALID,
            )
        raw = self._decode(data, index, kind.block, ".data", kind.what)
        mime = kind.sniff(raw)
        if mime is None:
            details = {"mimeType": declared}
            raise PromptContentError(kind.unsupported, index, kind.block, ".data", details, INVALID)
        extension = kind.extension(mime)
        file = self._stage(
            raw, mime=mime, extension=extension, uri=uri, stem=kind.block, index=index
        )
        return Attached(file, mime)

    def blob(self, data: str, declared: str | None, *, uri: str, index: int) -> Attached:
        """An embedded blob's file: its bytes must be on the allow-list."""
        raw = self._decode(data, index, "resource", ".resource.blob", "Embedded resource")
        mime, extension = _blob_type(raw, declared, index)
        file = self._stage(
            raw, mime=mime, extension=extension, uri=uri, stem="attachment", index=index
        )
        return Attached(file, mime)

    def _decode(self, data: str, index: int, block_type: str, field: str, what: str) -> bytes:
        """Strict base64 → bytes within the limits; sizes first, from the length alone."""

        def fail(message: str, **details: Any) -> PromptContentError:
            return PromptContentError(message, index, block_type, field, details, INVALID)

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
            TOO_LARGE,
        )

    def _over_budget(self, index: int, block_type: str, field: str) -> PromptContentError:
        limit = self.limits.max_prompt_bytes
        return PromptContentError(
            f"The prompt's attachments are larger than the {_size(limit)} limit per prompt.",
            index,
            block_type,
            field,
            {"limitBytes": limit},
            TOO_LARGE,
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


def viewable(mime: str) -> bool:
    """agy's file viewer reads a file of this (staged) type: images, PDF, text."""
    return mime in _IMAGE_EXTENSIONS or mime == _PDF or mime in _TEXT_EXTENSIONS


def _base_mime(mime: str) -> str:
    """``"Text/Plain; charset=utf-8"`` → ``"text/plain"``."""
    return mime.split(";", 1)[0].strip().lower()


def _blob_type(raw: bytes, declared: str | None, index: int) -> tuple[str, str]:
    """(MIME type, extension) for an embedded blob (see the module docstring), or
    an error when its label promises a checked type its bytes are not."""
    image = sniff_image_type(raw)
    if image is not None:
        return image, _IMAGE_EXTENSIONS[image]
    if raw.startswith(b"%PDF-"):
        return _PDF, ".pdf"
    base = _base_mime(declared or "")
    # Audio magic is weaker (a bare MPEG frame is two bytes): trusted only for
    # blobs labelled audio, or not labelled at all.
    audio = (
        sniff_audio_type(raw) if base in ("", OCTET_STREAM) or base.startswith("audio/") else None
    )
    if audio is not None:
        return audio, audio_extension(audio)

    def refuse(message: str) -> PromptContentError:
        details = {"mimeType": declared}
        return PromptContentError(message, index, "resource", ".resource.blob", details, INVALID)

    if base in _TEXT_EXTENSIONS:
        if b"\x00" not in raw:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                return base, _TEXT_EXTENSIONS[base]
        raise refuse(f"Embedded resource is labelled {declared!r} but is not valid UTF-8 text.")
    if base.startswith("image/"):
        raise refuse(UNSUPPORTED_IMAGE_MESSAGE)
    if base.startswith("audio/"):
        raise refuse(UNSUPPORTED_AUDIO_MESSAGE)
    if base == _PDF:
        raise refuse(f"Embedded resource is labelled {declared!r} but is not a PDF file.")
    if not _MIME.fullmatch(base):
        return OCTET_STREAM, ".bin"  # no label, or one that is no MIME type: just bytes
    return base, _BINARY_EXTENSIONS.get(base, ".bin")


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
