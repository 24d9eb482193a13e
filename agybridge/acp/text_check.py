"""Strings a JSON message may carry but nothing downstream can use.

JSON allows ``"\\ud800"`` (a lone surrogate), which no UTF-8 consumer (agy's
stdin, a file, SQLite) accepts, and ``"\\u0000"``, which no path, argv entry
or environment value can hold. Finding them at the door turns a crash deep
inside (``embedded null byte``, ``surrogates not allowed``) into a -32602
naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

#: Fields that are free text, where a NUL is content, not a path or a flag.
FREE_TEXT = re.compile(r"^\$\.prompt\[\d+\]\.(text|resource\.text)$")


def find_bad_text(value: Any, path: str = "$") -> tuple[str, str] | None:
    """(JSON path, what is wrong) of the first unusable string in ``value``."""
    if _plainly_clean(value):
        return None  # every request of a turn: no paths built to find nothing
    return _walk(value, path, lambda p: FREE_TEXT.match(p) is not None)


def _plainly_clean(value: Any) -> bool:
    """No string in ``value`` holds a NUL or a lone surrogate (False: look closer)."""
    if isinstance(value, str):
        return "\x00" not in value and (value.isascii() or encodes_utf8(value))
    if isinstance(value, dict):
        items: tuple[Any, ...] | list[Any] = (*value, *value.values())
    elif isinstance(value, list):
        items = value
    else:
        return True
    # A loop, not all(...): one frame per level, as the full walk (a generator
    # per level would halve the depth a request may have).
    for item in items:  # noqa: SIM110 (the comment above)
        if not _plainly_clean(item):
            return False
    return True


def encodes_utf8(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate: what a ``"\\ud800"``
    escape, or a command-line argument that is not UTF-8, becomes in Python)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _walk(value: Any, path: str, nul_ok: Callable[[str], bool]) -> tuple[str, str] | None:
    if isinstance(value, str):
        return _check(value, path, nul_ok)
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}"
            if isinstance(key, str) and (problem := _check(key, child, lambda _p: False)):
                return problem
            if problem := _walk(item, child, nul_ok):
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if problem := _walk(item, f"{path}[{index}]", nul_ok):
                return problem
    return None


def _check(text: str, path: str, nul_ok: Callable[[str], bool]) -> tuple[str, str] | None:
    if not text.isascii() and not encodes_utf8(text):
        return path, "is not valid Unicode (it contains a lone surrogate such as \\ud800)"
    if "\x00" in text and not nul_ok(path):
        return path, "contains a NUL character (\\u0000)"
    return None
