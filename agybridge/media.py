"""Media types proven by their bytes (pure; shared by prompt input and output).

The bytes decide, never the label: a JPEG sent as ``image/png`` is a JPEG.
"""

from __future__ import annotations


def sniff_image_type(data: bytes) -> str | None:
    """The MIME type the bytes prove (PNG, JPEG, GIF, WebP), or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


#: Audio containers by magic number: (MIME type, extension).
_AUDIO_EXTENSIONS = {
    "audio/wav": ".wav",
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "audio/flac": ".flac",
    "audio/mp4": ".m4a",
    "audio/webm": ".webm",
    "audio/aiff": ".aiff",
}
AUDIO_FORMATS = "WAV, MP3, OGG, FLAC, M4A, WebM or AIFF"


def sniff_audio_type(data: bytes) -> str | None:
    """The audio MIME type the bytes prove (see :data:`AUDIO_FORMATS`), or None."""
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WAVE":
        return "audio/wav"
    # An ID3 tag, or a bare MPEG audio frame (11 sync bits, layer not "reserved").
    if data.startswith(b"ID3") or (
        len(data) >= 2 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0 and data[1] & 0x06
    ):
        return "audio/mpeg"
    if data.startswith(b"OggS"):
        return "audio/ogg"
    if data.startswith(b"fLaC"):
        return "audio/flac"
    if len(data) >= 12 and data[4:8] == b"ftyp" and data[8:11] in (b"M4A", b"M4B", b"mp4"):
        return "audio/mp4"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "audio/webm"
    if len(data) >= 12 and data.startswith(b"FORM") and data[8:12] in (b"AIFF", b"AIFC"):
        return "audio/aiff"
    return None


def audio_extension(mime: str) -> str:
    """The file extension for a type :func:`sniff_audio_type` returned."""
    return _AUDIO_EXTENSIONS[mime]
