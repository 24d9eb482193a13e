"""What an edit will do, from agy's full tool arguments (pure).

A PreToolUse hook sees the model's full arguments (``CodeContent``,
``TargetContent``, ``ReplacementContent``...), which stream-json trims
(hooks-and-tools.md §A3, §B2). Before the user decides, the bridge shows the
edit as a diff of the whole file (§B4): the current text with the change
applied, or the replaced snippet alone when the target text is not found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..acp import models


def _text(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    return value if isinstance(value, str) else None


def _chunks(args: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    chunks = args.get("ReplacementChunks")
    if isinstance(chunks, str):  # sometimes a JSON string (§B2)
        try:
            chunks = json.loads(chunks)
        except ValueError:
            return []
    return [c for c in chunks if isinstance(c, Mapping)] if isinstance(chunks, list) else []


def _replace(text: str, target: str, replacement: str, every: bool) -> str | None:
    if not target or target not in text:
        return None
    return text.replace(target, replacement) if every else text.replace(target, replacement, 1)


def proposed_diff(
    tool: str, args: Mapping[str, Any], current: str | None
) -> models.DiffContent | None:
    """The diff an edit tool call proposes, given the target file's current
    text (None: the file does not exist)."""
    path = _text(args, "TargetFile")
    if not path:
        return None
    if tool == "write_to_file":
        new = _text(args, "CodeContent")
        return (
            None if new is None else models.DiffContent(path=path, old_text=current, new_text=new)
        )
    if tool == "replace_file_content":
        target, replacement = _text(args, "TargetContent"), _text(args, "ReplacementContent")
        if target is None or replacement is None:
            return None
        if current is not None:
            applied = _replace(current, target, replacement, args.get("AllowMultiple") is True)
            if applied is not None:
                return models.DiffContent(path=path, old_text=current, new_text=applied)
        return models.DiffContent(path=path, old_text=target, new_text=replacement)
    if tool == "multi_replace_file_content" and current is not None:
        text: str | None = current
        for chunk in _chunks(args):
            target, replacement = _text(chunk, "TargetContent"), _text(chunk, "ReplacementContent")
            if text is None or target is None or replacement is None:
                return None
            text = _replace(text, target, replacement, chunk.get("AllowMultiple") is True)
        if text is None or text == current:
            return None
        return models.DiffContent(path=path, old_text=current, new_text=text)
    return None
