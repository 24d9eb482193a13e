"""Prompt conversion (acp/content.py): what is accepted, staged and refused, exactly."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import content, models
from agybridge.acp.content import (
    UNSUPPORTED_AUDIO_MESSAGE,
    UNSUPPORTED_IMAGE_MESSAGE,
    ConvertedPrompt,
    PromptContentError,
    StagedFile,
    convert_prompt,
    convert_text_prompt,
    describe_resource_link,
)
from agybridge.acp.limits import PromptLimits

CAPTURES = Path(__file__).parents[2] / "data" / "agy-captures"
STAGING = "/run/agybridge/1-0123456789abcdef/attachments"

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(16))
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(20))
GIF = b"GIF89a\x01\x00\x01\x00" + bytes(range(12))
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + bytes(range(12))
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n"
BMP = b"BM" + bytes(30)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)
MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" + bytes(8)
OGG = b"OggS\x00\x02" + bytes(20)
FLAC = b"fLaC\x00\x00\x00\x22" + bytes(16)
M4A = b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00" + bytes(8)
WEBM = b"\x1a\x45\xdf\xa3" + bytes(20)
AIFF = b"FORM\x00\x00\x00\x20AIFFCOMM" + bytes(12)
ZIP = b"PK\x03\x04\x14\x00" + bytes(20)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def image(data: bytes | str, mime_type: str = "image/png", uri: str | None = None) -> Any:
    encoded = data if isinstance(data, str) else b64(data)
    return models.ImageContent(data=encoded, mime_type=mime_type, uri=uri)


def resource(**fields: Any) -> models.EmbeddedResource:
    return models.EmbeddedResource(resource=fields)


def blob(data: bytes | str, mime_type: str | None = None, uri: str = "file:///p/doc") -> Any:
    fields: dict[str, Any] = {"uri": uri, "blob": data if isinstance(data, str) else b64(data)}
    if mime_type is not None:
        fields["mimeType"] = mime_type
    return resource(**fields)


def audio(data: bytes | str, mime_type: str = "audio/wav") -> models.AudioContent:
    return models.AudioContent(
        data=data if isinstance(data, str) else b64(data), mime_type=mime_type
    )


def text(value: str) -> models.TextContent:
    return models.TextContent(text=value)


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=6).hexdigest()


def convert(prompt: list[Any], limits: PromptLimits | None = None) -> ConvertedPrompt:
    return convert_prompt(prompt, staging_dir=STAGING, limits=limits or PromptLimits())


LINK = models.ResourceLink(
    uri="file:///home/u/p/a.py", name="a.py", mime_type="text/x-python", size=120
)

# --- accepted ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ([text("hello")], "hello"),
        ([text("a"), text("b\n")], "a\n\nb\n"),
        ([text("look at"), LINK], "look at\n\n" + describe_resource_link(LINK)),
        (
            [resource(uri="file:///p/a.py", text="print(1)\n", mimeType="text/x-python")],
            "[Resource: file:///p/a.py (text/x-python)]\nprint(1)\n",
        ),
        ([resource(uri="mem://note", text="")], "[Resource: mem://note]\n"),
        (
            [text("x"), resource(uri="u", text="t", mimeType=None)],
            "x\n\n[Resource: u]\nt",
        ),
    ],
)
def test_text_parts(prompt: list[Any], expected: str) -> None:
    """Text, links and embedded text resources become text joined by blank lines."""
    converted = convert(prompt)
    assert converted == ConvertedPrompt(text=expected, files=())


def test_png_is_staged_and_named_by_absolute_path() -> None:
    """An image becomes a staged file and a text naming its absolute path."""
    converted = convert([text("what is this?"), image(PNG)])
    name = f"image-{digest(PNG)}.png"
    path = f"{STAGING}/{name}"
    assert converted.files == (
        StagedFile(name=name, path=path, data=PNG, mime_type="image/png", index=1),
    )
    assert converted.text == (
        "what is this?\n\n"
        f"[Attached image: {path} (image/png, {len(PNG)} bytes)]\n"
        "View the file at this absolute path to see the image."
    )
    assert converted.staged_bytes == len(PNG)


@pytest.mark.parametrize(
    ("data", "label", "mime", "extension"),
    [
        (PNG, "image/png", "image/png", ".png"),
        (JPEG, "image/jpeg", "image/jpeg", ".jpg"),
        (JPEG, "image/png", "image/jpeg", ".jpg"),  # mislabelled: the bytes decide
        (GIF, "image/gif", "image/gif", ".gif"),
        (GIF, "IMAGE/WEBP", "image/gif", ".gif"),
        (WEBP, "image/webp", "image/webp", ".webp"),
        (PNG, "image/png; x=y", "image/png", ".png"),
    ],
)
def test_image_type_comes_from_the_bytes(
    data: bytes, label: str, mime: str, extension: str
) -> None:
    """PNG, JPEG, GIF and WebP are recognised by magic number, whatever the label."""
    (file,) = convert([image(data, label)]).files
    assert (file.mime_type, file.name) == (mime, f"image-{digest(data)}{extension}")


def test_image_only_prompt_is_not_empty() -> None:
    """A prompt holding just an image converts."""
    converted = convert([image(PNG)])
    assert converted.text.startswith("[Attached image: ")


@pytest.mark.parametrize("extra", [0, 1, 2, 3])
def test_every_padding_length_decodes(extra: int) -> None:
    """Base64 with no, one or two '=' decodes to the exact bytes."""
    data = PNG + b"x" * extra
    (file,) = convert([image(data)]).files
    assert file.data == data


def test_identical_attachments_share_one_file() -> None:
    """The same bytes twice are staged once and named twice."""
    converted = convert([image(PNG), text("and"), image(PNG)])
    (file,) = converted.files
    assert converted.text.count(file.path) == 2
    assert file.index == 0


@pytest.mark.parametrize(
    ("uri", "stem"),
    [
        (None, "image"),
        ("file:///home/u/shots/Screen Shot 1.png", "Screen-Shot-1"),
        ("https://x.test/a/b/photo.jpeg?size=large#frag", "photo"),
        ("file:///tmp/.hidden", "hidden"),
        ("file:///tmp/../..", "image"),
        ("zed://clipboard/", "clipboard"),
        ("file:///x/" + "n" * 80 + ".png", "n" * 40),
        ("file:///x/%2F..%2Fetc", "2F"),
    ],
)
def test_file_names_are_safe(uri: str | None, stem: str) -> None:
    """File names come from the URI's last segment, reduced to safe characters."""
    (file,) = convert([image(PNG, uri=uri)]).files
    assert file.name == f"{stem}-{digest(PNG)}.png"
    assert file.path == f"{STAGING}/{file.name}"


@given(st.text(max_size=60))
def test_any_uri_gives_a_plain_file_name(uri: str) -> None:
    """No URI can put a separator, a leading dot or '..' into a file name."""
    (file,) = convert([blob(PDF, uri=uri)]).files
    assert "/" not in file.name
    assert "\\" not in file.name
    assert not file.name.startswith(".")
    assert file.name.endswith(f"-{digest(PDF)}.pdf")


@pytest.mark.parametrize(
    ("data", "mime_type", "staged_mime", "extension"),
    [
        (PDF, "application/pdf", "application/pdf", ".pdf"),
        (PDF, None, "application/pdf", ".pdf"),
        (PDF, "application/octet-stream", "application/pdf", ".pdf"),
        (PNG, None, "image/png", ".png"),
        (JPEG, "image/png", "image/jpeg", ".jpg"),
        ("héllo\n".encode(), "text/plain", "text/plain", ".txt"),
        (b"# Title\n", "text/markdown", "text/markdown", ".md"),
        (b"# Title\n", "text/x-markdown", "text/x-markdown", ".md"),
        (b"a,b\n1,2\n", "text/csv", "text/csv", ".csv"),
        (b'{"a": 1}', "application/json", "application/json", ".json"),
        (b"plain", "Text/Plain; charset=utf-8", "text/plain", ".txt"),
    ],
)
def test_blob_types_agy_can_view(
    data: bytes, mime_type: str | None, staged_mime: str, extension: str
) -> None:
    """Embedded blobs of a known document or image type are staged like images."""
    check_blob(
        data, mime_type, staged_mime, extension, "View the file at this absolute path to read it."
    )


@pytest.mark.parametrize(
    ("data", "mime_type", "staged_mime", "extension"),
    [
        (ZIP, "application/zip", "application/zip", ".zip"),
        (b"<p>hi</p>", "text/html", "text/html", ".html"),
        (b"\x00\x01\x02", None, "application/octet-stream", ".bin"),
        (b"\x00\x01\x02", "application/x-custom", "application/x-custom", ".bin"),
        (b"\x00\x01\x02", "not a type/ at all", "application/octet-stream", ".bin"),
        (b"ID3 is how this text starts", "application/x-notes", "application/x-notes", ".bin"),
        (WAV, "audio/wav", "audio/wav", ".wav"),
        (MP3, None, "audio/mpeg", ".mp3"),
        (OGG, "application/octet-stream", "audio/ogg", ".ogg"),
    ],
)
def test_other_blobs_are_staged_as_files_to_inspect(
    data: bytes, mime_type: str | None, staged_mime: str, extension: str
) -> None:
    """Blobs agy's viewer cannot read (archives, audio, unknown bytes) are staged
    too, as agy-acp-map does, and agy is told it is a binary file for its tools.
    Audio magic counts only for blobs labelled audio or not labelled."""
    how = "It is a binary file: inspect it at this absolute path with your tools."
    check_blob(data, mime_type, staged_mime, extension, how)


def check_blob(
    data: bytes, mime_type: str | None, staged_mime: str, extension: str, how: str
) -> None:
    converted = convert([blob(data, mime_type, uri="file:///home/u/report.bin")])
    (file,) = converted.files
    assert (file.mime_type, file.name, file.data) == (
        staged_mime,
        f"report-{digest(data)}{extension}",
        data,
    )
    assert converted.text == (
        f"[Attached file: {file.path} ({staged_mime}, {len(data)} bytes)]\n"
        f"Original URI: file:///home/u/report.bin\n{how}"
    )


@pytest.mark.parametrize(
    ("data", "label", "mime", "extension"),
    [
        (WAV, "audio/wav", "audio/wav", ".wav"),
        (WAV, "audio/x-wav", "audio/wav", ".wav"),
        (MP3, "audio/mpeg", "audio/mpeg", ".mp3"),
        (b"\xff\xfb\x90\x00" + bytes(8), "audio/mp3", "audio/mpeg", ".mp3"),
        (OGG, "audio/ogg; codecs=opus", "audio/ogg", ".ogg"),
        (FLAC, "audio/flac", "audio/flac", ".flac"),
        (M4A, "audio/mp4", "audio/mp4", ".m4a"),
        (WEBM, "audio/webm", "audio/webm", ".webm"),
        (AIFF, "AUDIO/AIFF", "audio/aiff", ".aiff"),
        (OGG, "audio/wav", "audio/ogg", ".ogg"),  # mislabelled: the bytes decide
    ],
)
def test_audio_is_staged_by_its_bytes(data: bytes, label: str, mime: str, extension: str) -> None:
    """An audio block becomes a staged file whose type its bytes prove; agy is told
    its viewer does not play audio."""
    converted = convert([text("transcribe"), audio(data, label)])
    (file,) = converted.files
    assert (file.mime_type, file.name, file.index) == (mime, f"audio-{digest(data)}{extension}", 1)
    assert converted.text == (
        "transcribe\n\n"
        f"[Attached audio: {file.path} ({mime}, {len(data)} bytes)]\n"
        "Use the audio file at this absolute path (your file viewer shows text and "
        "images only: process it with a command-line tool if one is installed)."
    )


@pytest.mark.parametrize(
    "capture", ["tiezbro-1.1.14-pong-single-done.ndjson", "untether-1.3.1-subagent.ndjson"]
)
def test_no_agy_tool_listens_to_audio(capture: str) -> None:
    """Why promptCapabilities.audio stays false: a real agy's tools (``init.tools``) can
    view files and images but none plays, transcribes or listens to audio."""
    lines = (CAPTURES / capture).read_text().splitlines()
    (init,) = [json.loads(line)["init"] for line in lines if '"event":"init"' in line]
    tools = init["tools"]
    assert len(tools) >= 56 and "view_file" in tools
    assert [t for t in tools if re.search("audio|sound|speech|transcri|listen", t)] == []


# --- refused -------------------------------------------------------------------------

SMALL = PromptLimits(max_file_bytes=32, max_prompt_bytes=48)

_NOT_B64 = "Image data is not valid base64: "

REJECTIONS: list[tuple[str, list[Any], int, str, str, str]] = [
    # (id, prompt, index, type, JSON path below the block, exact message)
    ("audio not audio", [text("x"), audio(b"hello audio")], 1, "audio", ".data",
     UNSUPPORTED_AUDIO_MESSAGE),
    ("audio labelled image", [audio(WAV, "image/png")], 0, "audio", ".mimeType",
     "Audio mimeType must be an audio/* type, not 'image/png'."),
    ("audio not base64", [audio("UklG*g==")], 0, "audio", ".data",
     "Audio data is not valid base64: character '*' at offset 4 is not in the base64 "
     "alphabet."),
    ("empty audio", [audio("")], 0, "audio", ".data", "Audio is empty."),
    ("unknown", [text("x"), models.UnknownContent(raw={"type": "video"})], 1, "video", "",
     "Unsupported content block type 'video'. "
     "Send text, resource_link, image, audio or resource blocks."),
    ("no type", [models.UnknownContent(raw={})], 0, "<missing>", "",
     "Content block has no 'type'. Send text, resource_link, image, audio or resource blocks."),
    ("gif as text/plain", [image(GIF, "text/plain")], 0, "image", ".mimeType",
     "Image mimeType must be an image/* type, not 'text/plain'."),
    ("bare image/", [image(PNG, "image/")], 0, "image", ".mimeType",
     "Image mimeType must be an image/* type, not 'image/'."),
    ("empty mime", [image(PNG, "")], 0, "image", ".mimeType",
     "Image mimeType must be an image/* type, not ''."),
    ("data url", [image("data:image/png;base64," + b64(PNG))], 0, "image", ".data",
     "Image data must be plain base64, not a data: URL."),
    ("DATA url", [image("DATA:image/png;base64," + b64(PNG))], 0, "image", ".data",
     "Image data must be plain base64, not a data: URL."),
    ("newline", [image(b64(PNG)[:8] + "\n" + b64(PNG)[8:])], 0, "image", ".data",
     _NOT_B64 + "character '\\n' at offset 8 is not in the base64 alphabet."),
    ("trailing newline", [image(b64(PNG) + "\n")], 0, "image", ".data",
     _NOT_B64 + f"character '\\n' at offset {len(b64(PNG))} is not in the base64 alphabet."),
    ("leading space", [image(" " + b64(PNG))], 0, "image", ".data",
     _NOT_B64 + "character ' ' at offset 0 is not in the base64 alphabet."),
    ("url-safe alphabet", [image("iVBORw0KGgo-_A==")], 0, "image", ".data",
     _NOT_B64 + "character '-' at offset 11 is not in the base64 alphabet."),
    ("non-ascii", [image("iVBORw0KGgoé===")], 0, "image", ".data",
     _NOT_B64 + "character 'é' at offset 11 is not in the base64 alphabet."),
    ("missing padding", [image(b64(PNG + b"xy").rstrip("="))], 0, "image", ".data",
     _NOT_B64 + f"its length ({len(b64(PNG + b'xy')) - 2}) is not a multiple of 4."),
    ("padding inside", [image("iVBO=w0K")], 0, "image", ".data",
     _NOT_B64 + "'=' padding may only end the data (at most two)."),
    ("three pads", [image("iVBORw0KGg==" + "A===")], 0, "image", ".data",
     _NOT_B64 + "'=' padding may only end the data (at most two)."),
    ("only padding", [image("====")], 0, "image", ".data",
     _NOT_B64 + "'=' padding may only end the data (at most two)."),
    ("empty image", [image("")], 0, "image", ".data", "Image is empty."),
    ("bmp", [image(BMP, "image/bmp")], 0, "image", ".data", UNSUPPORTED_IMAGE_MESSAGE),
    ("svg", [image(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml")],
     0, "image", ".data", UNSUPPORTED_IMAGE_MESSAGE),
    ("pdf as image", [image(PDF, "image/png")], 0, "image", ".data",
     UNSUPPORTED_IMAGE_MESSAGE),
    ("resource without uri", [resource(text="t")], 0, "resource", ".resource.uri",
     "Embedded resource needs a string 'uri'."),
    ("resource uri not a string", [resource(uri=3, text="t")], 0, "resource",
     ".resource.uri", "Embedded resource needs a string 'uri'."),
    ("resource mime not a string", [resource(uri="u", text="t", mimeType=1)], 0,
     "resource", ".resource.mimeType", "Embedded resource 'mimeType' must be a string."),
    ("text and blob", [resource(uri="u", text="t", blob=b64(PDF))], 0, "resource",
     ".resource", "Embedded resource needs exactly one of 'text' or 'blob'."),
    ("neither text nor blob", [resource(uri="u")], 0, "resource", ".resource",
     "Embedded resource needs exactly one of 'text' or 'blob'."),
    ("text not a string", [resource(uri="u", text=None)], 0, "resource",
     ".resource.text", "Embedded resource 'text' must be a string."),
    ("blob not a string", [resource(uri="u", blob=[1])], 0, "resource",
     ".resource.blob", "Embedded resource 'blob' must be a string."),
    ("empty blob", [blob("", "application/pdf")], 0, "resource", ".resource.blob",
     "Embedded resource is empty."),
    ("blob not base64", [blob("JVBERi0*", "application/pdf")], 0, "resource",
     ".resource.blob", "Embedded resource data is not valid base64: "
     "character '*' at offset 7 is not in the base64 alphabet."),
    ("blob data url", [blob("data:application/pdf;base64," + b64(PDF))], 0, "resource",
     ".resource.blob", "Embedded resource data must be plain base64, not a data: URL."),
    ("audio blob not audio", [blob(b"\x00\x01", "audio/wav")], 0, "resource",
     ".resource.blob", UNSUPPORTED_AUDIO_MESSAGE),
    ("bmp blob", [blob(BMP, "image/bmp")], 0, "resource", ".resource.blob",
     UNSUPPORTED_IMAGE_MESSAGE),
    ("fake pdf", [blob(b"not a pdf", "application/pdf")], 0, "resource", ".resource.blob",
     "Embedded resource is labelled 'application/pdf' but is not a PDF file."),
    ("latin-1 text", [blob("héllo".encode("latin-1"), "text/plain")], 0, "resource",
     ".resource.blob",
     "Embedded resource is labelled 'text/plain' but is not valid UTF-8 text."),
    ("text with NUL", [blob(b"a\x00b", "text/csv")], 0, "resource", ".resource.blob",
     "Embedded resource is labelled 'text/csv' but is not valid UTF-8 text."),
    ("blank text", [text(" \n"), text("")], 0, "text", "",
     "The prompt is empty: send some text, an image or a resource."),
    ("first bad block wins", [text("x"), image(BMP), audio("")],
     1, "image", ".data", UNSUPPORTED_IMAGE_MESSAGE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("prompt", "index", "block_type", "field", "message"),
    [pytest.param(*row[1:], id=row[0]) for row in REJECTIONS],
)
def test_rejections(
    prompt: list[Any], index: int, block_type: str, field: str, message: str
) -> None:
    """Every refusal names the block, its type and JSON path, with an exact message."""
    with pytest.raises(PromptContentError) as caught:
        convert(prompt)
    error = caught.value
    assert (str(error), error.index, error.block_type) == (message, index, block_type)
    assert error.data["path"] == f"$.prompt[{index}]{field}"
    assert error.data["type"] == block_type
    # An attachment's bytes or type have their cause; malformed blocks are invalid_params.
    media = block_type in ("image", "audio") and field in (".data", ".mimeType")
    attachment = media or (field == ".resource.blob" and "must be a string" not in message)
    assert error.cause == ("attachment_invalid" if attachment else "invalid_params")


LIMITED: list[tuple[str, list[Any], int, str, str]] = [
    # (id, prompt, index, JSON path below the block, exact message) under SMALL limits
    ("image over 32 B", [image(b"\x89PNG\r\n\x1a\n" + bytes(25))], 0, ".data",
     "Image is larger than the 32 bytes limit."),
    ("blob over 32 B", [blob(b"%PDF-" + bytes(28), "application/pdf")], 0,
     ".resource.blob", "Embedded resource is larger than the 32 bytes limit."),
    ("prompt over 48 B", [image(PNG[:30]), text("and"), image(JPEG[:30])], 2, ".data",
     "The prompt's attachments are larger than the 48 bytes limit per prompt."),
    ("audio over 32 B", [audio(WAV + bytes(8))], 0, ".data",
     "Audio is larger than the 32 bytes limit."),
]  # fmt: skip


@pytest.mark.parametrize(
    ("prompt", "index", "field", "message"),
    [pytest.param(*row[1:], id=row[0]) for row in LIMITED],
)
def test_size_limits(prompt: list[Any], index: int, field: str, message: str) -> None:
    """Per-file and per-prompt limits fail with the limit in the message and data."""
    with pytest.raises(PromptContentError) as caught:
        convert(prompt, SMALL)
    error = caught.value
    assert (str(error), error.index) == (message, index)
    assert error.data["path"] == f"$.prompt[{index}]{field}"
    assert error.data["limitBytes"] in (32, 48)
    assert error.cause == "attachment_too_large"


def test_limits_at_the_edge() -> None:
    """A file of exactly the limit converts; one byte more does not."""
    exact = PNG + bytes(32 - len(PNG))
    assert convert([image(exact)], SMALL).files[0].data == exact
    with pytest.raises(PromptContentError, match="larger than the 32 bytes limit"):
        convert([image(exact + b"x")], SMALL)


def test_default_limits() -> None:
    """The default limits are 8 MiB per file and 32 MiB per prompt."""
    assert PromptLimits() == PromptLimits(max_file_bytes=8 * 2**20, max_prompt_bytes=32 * 2**20)
    too_big = image(PNG + bytes(8 * 2**20))
    with pytest.raises(PromptContentError) as caught:
        convert([too_big])
    assert str(caught.value) == "Image is larger than the 8 MiB limit."
    images = [image(PNG + bytes(8 * 2**20 - len(PNG) - i)) for i in range(1, 6)]
    with pytest.raises(PromptContentError) as caught:
        convert(images)
    assert str(caught.value) == (
        "The prompt's attachments are larger than the 32 MiB limit per prompt."
    )
    assert caught.value.index == 4


@pytest.mark.parametrize(
    ("fields", "error"),
    [({"max_file_bytes": 0}, "max_file_bytes must be positive, not 0"),
     ({"max_prompt_bytes": -1}, "max_prompt_bytes must be positive, not -1")],
)  # fmt: skip
def test_limits_must_be_positive(fields: dict[str, int], error: str) -> None:
    """Non-positive limits are a programming error."""
    with pytest.raises(ValueError, match=error):
        PromptLimits(**fields)


def test_staging_dir_must_be_absolute() -> None:
    """A relative staging directory is refused before any block is looked at."""
    with pytest.raises(ValueError, match="staging_dir must be an absolute path, not 'rel'"):
        convert_prompt([text("x")], staging_dir="rel")


def test_staging_dir_is_normalised() -> None:
    """Paths in the text are normalised, so they match what the writer checks."""
    converted = convert_prompt([image(PNG)], staging_dir=STAGING + "/./")
    assert converted.files[0].path == f"{STAGING}/{converted.files[0].name}"


# --- property ------------------------------------------------------------------------

_good_blocks = st.sampled_from(
    [
        text("hello"),
        text(""),
        text("two\n\nparagraphs"),
        LINK,
        image(PNG),
        image(JPEG, "image/png"),
        image(GIF, "image/gif", uri="file:///a/b.gif"),
        image(WEBP, "image/webp"),
        resource(uri="file:///p/a.md", text="# A", mimeType="text/markdown"),
        blob(PDF, "application/pdf"),
        blob(b"a,b", "text/csv", uri="file:///p/t.csv"),
        blob(ZIP, "application/zip"),
        audio(WAV),
    ]
)
_bad_blocks = st.sampled_from(
    [
        audio(b"\x00\x00\x00"),
        models.UnknownContent(raw={"type": "video"}),
        models.UnknownContent(raw={}),
        image(GIF, "text/plain"),
        image(BMP),
        image(""),
        image(b64(PNG) + " "),
        image("data:image/png;base64," + b64(PNG)),
        resource(uri="u"),
        blob(b"\xff\xfe", "text/plain"),
    ]
)
_tagged_blocks = st.tuples(_good_blocks, st.just(True)) | st.tuples(_bad_blocks, st.just(False))


def _alone(block: Any) -> tuple[str, tuple[StagedFile, ...]]:
    if isinstance(block, models.TextContent):
        return block.text, ()
    converted = convert([block])
    return converted.text, converted.files


@given(st.lists(_tagged_blocks, max_size=8))
def test_prompt_converts_completely_or_not_at_all(tagged: list[tuple[Any, bool]]) -> None:
    """A prompt converts block by block into exactly its parts, or fails at its first bad block."""
    prompt = [block for block, _ in tagged]
    first_bad = next((i for i, (_, ok) in enumerate(tagged) if not ok), None)
    try:
        converted = convert(prompt)
    except PromptContentError as error:
        if first_bad is None:
            assert error.block_type == "text"
            assert all(isinstance(b, models.TextContent) and not b.text.strip() for b in prompt)
        else:
            assert error.index == first_bad
        block = "" if error.index is None else f"[{error.index}]"
        assert error.data["path"].startswith(f"$.prompt{block}")
        return
    assert first_bad is None
    alone = [_alone(block) for block in prompt]
    assert converted.text == "\n\n".join(part for part, _ in alone)
    expected_files = {file.name: file.data for _, files in alone for file in files}
    assert {file.name: file.data for file in converted.files} == expected_files
    for file in converted.files:
        assert file.path in converted.text
        block = prompt[file.index]
        assert isinstance(
            block, models.ImageContent | models.AudioContent | models.EmbeddedResource
        )


def test_module_constants() -> None:
    """The two formats messages are exact."""
    assert content.UNSUPPORTED_IMAGE_MESSAGE == (
        "Unsupported image format. Use PNG, JPEG, GIF, or WebP."
    )
    assert content.UNSUPPORTED_AUDIO_MESSAGE == (
        "Unsupported audio format. Use WAV, MP3, OGG, FLAC, M4A, WebM or AIFF."
    )


def test_no_blocks_is_refused_at_the_prompt_itself() -> None:
    """An empty array has no block 0: the refusal names $.prompt."""
    with pytest.raises(PromptContentError) as caught:
        convert([])
    assert str(caught.value) == "The prompt is empty: send some text, an image or a resource."
    assert caught.value.data["path"] == "$.prompt"


@given(
    st.lists(st.text(alphabet=st.sampled_from(" \t\n\ra/é"), max_size=6) | st.text(), max_size=5)
)
def test_text_prompt_converts_as_the_general_path(parts: list[str]) -> None:
    """``convert_text_prompt`` (text blocks only, no staging directory) answers
    as ``convert_prompt``: the same text, no files, the same refusal."""
    blocks = [text(part) for part in parts]
    try:
        expected: Any = convert(blocks)
    except PromptContentError as exc:
        expected = (str(exc), exc.data)
    try:
        got: Any = convert_text_prompt(blocks)
    except PromptContentError as exc:
        got = (str(exc), exc.data)
    assert got == expected


# Every character str.strip removes (all are below U+3001); the test adds a few it keeps.
_BLANKS = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())


@given(st.lists(st.text(alphabet=st.sampled_from(_BLANKS + "a\u200b\x00"), max_size=4), max_size=4))
def test_a_prompt_is_empty_exactly_when_every_part_strips_to_nothing(parts: list[str]) -> None:
    """The emptiness check on the joined text refuses what a part-by-part
    ``strip`` finds blank, and nothing else."""
    blank = not any(part.strip() for part in parts)
    try:
        convert_text_prompt([text(part) for part in parts])
    except PromptContentError:
        refused = True
    else:
        refused = False
    assert refused == blank
