"""A prompt the bridge refuses, and where in it (pure).

Raised by the prompt's conversion (content.py) and by the check of its
attachments' bytes (attachments.py); the agent answers it with -32602 and
``data`` pointing at the offending block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


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
    #: The catalogue's id for it (``agybridge/causes.py``): an attachment's own
    #: failures have theirs, anything else is the client's malformed params.
    cause: str = "invalid_params"

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
