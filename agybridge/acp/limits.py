"""Prompt size limits: the settings read them at start-up (AGYBRIDGE_MAX_FILE_BYTES...),
and attachments.py enforces them. Apart from it so that reading the settings
does not load the prompt's conversion (lazy start-up: ``initialize`` needs none)."""

from __future__ import annotations

from typing import Any

import attrs

MAX_FILE_BYTES = 8 * 2**20  # 8 MiB: one image or embedded file, decoded
MAX_PROMPT_BYTES = 32 * 2**20  # 32 MiB: every staged file of one prompt, decoded


def _positive(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive, not {value!r}")


@attrs.frozen
class PromptLimits:
    """Size limits for staged files, in decoded bytes (the caller's settings)."""

    #: One image or embedded file.
    max_file_bytes: int = attrs.field(default=MAX_FILE_BYTES, validator=_positive)
    #: Every staged file of one prompt together.
    max_prompt_bytes: int = attrs.field(default=MAX_PROMPT_BYTES, validator=_positive)
