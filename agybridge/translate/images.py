"""Images named in agy's output: ``image_candidates`` finds png/jpg/gif/webp
paths in text (pure). Whether one is shown is decided by reading it
(``workspace/reads.py``: inside the session's roots, small, really an image)."""

from __future__ import annotations

import os
import re

MAX_CANDIDATES = 8  # per event: output listing hundreds of files is not a gallery

_EXT = r"\.(?:png|jpe?g|gif|webp)"
#: A quoted path (may hold spaces) or a bare one (no spaces); never a URL.
_PATH = re.compile(
    rf"""(?:[`'"](?P<quoted>[^`'"\n]+?{_EXT})[`'"])"""
    rf"""|(?<![\w:/.])(?P<bare>(?:/|\./|[\w\-~])[^\s`'"<>()\[\]{{}}|,;*?]*?{_EXT})(?![\w/])""",
    re.IGNORECASE,
)


def image_candidates(text: str, cwd: str) -> list[str]:
    """Absolute paths of image files named in ``text`` (not yet checked)."""
    found: list[str] = []
    for match in _PATH.finditer(text):
        raw = (match.group("quoted") or match.group("bare") or "").strip()
        if "://" in raw:
            continue
        if raw.startswith("~"):
            continue
        if ".." in raw.replace("\\", "/").split("/"):
            continue  # refused outright, whatever it resolves to
        path = raw if os.path.isabs(raw) else os.path.join(cwd, raw)
        path = os.path.normpath(path)
        if path not in found:
            found.append(path)
        if len(found) >= MAX_CANDIDATES:
            break
    return found
