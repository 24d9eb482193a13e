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
