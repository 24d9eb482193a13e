"""A running turn's updates, kept for a client that attaches mid-turn (pure).

Most of a turn is text chunks. Consecutive plain text chunks of one kind and
message are kept as one run, its text joined in blocks as it grows, so a
100k-delta turn is a few hundred strings rather than 100k update objects;
a client attaching replays the run as one chunk (clients concatenate chunks
either way). Everything else is kept as sent. The oldest entries go beyond
``max_entries``, and :attr:`TurnLog.lost` counts the updates they held.
Updates are merged a few hundred at a time, or when the log is read: logging
a batch only appends it, and a short turn (cleared once journalled) is never
merged at all.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from . import models
from .chunks import plain_text_chunk

#: Entries kept (a text run is one entry); a turn has a few hundred.
MAX_ENTRIES = 20_000
#: Parts of a text run joined into one block once this many have come.
BLOCK_PARTS = 256
#: Updates logged before they are merged into the entries.
MERGE_AFTER = 256

_RunKey = tuple[type[Any], str | None]


class _TextRun:
    """Consecutive text chunks of one kind and message id."""

    __slots__ = ("_blocks", "_parts", "count", "key")

    def __init__(self, key: _RunKey, text: str) -> None:
        self.key = key
        self.count = 1
        self._blocks: list[str] = []
        self._parts = [text]

    def add(self, text: str) -> None:
        self.count += 1
        parts = self._parts
        parts.append(text)
        if len(parts) >= BLOCK_PARTS:
            self._blocks.append("".join(parts))
            parts.clear()

    def update(self) -> models.SessionUpdate:
        kind, message_id = self.key
        text = "".join(self._blocks) + "".join(self._parts)
        chunk: models.SessionUpdate = kind(
            content=models.TextContent(text=text), message_id=message_id
        )
        return chunk


class TurnLog:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: collections.deque[models.SessionUpdate | _TextRun] = collections.deque()
        self._max = max_entries
        self._lost = 0
        #: Updates logged but not merged into the entries yet (most turns are
        #: cleared before this fills).
        self._fresh: list[models.SessionUpdate] = []

    @property
    def lost(self) -> int:
        """Updates that went out of the log (the oldest, beyond the bound)."""
        self._merge()
        return self._lost

    def add(self, update: models.SessionUpdate) -> None:
        self.extend((update,))

    def extend(self, updates: Iterable[models.SessionUpdate]) -> None:
        """`add` each of ``updates``, in order (a batch handed over at once)."""
        fresh = self._fresh
        fresh += updates
        if len(fresh) >= MERGE_AFTER:
            self._merge()

    def _merge(self) -> None:
        """Merge the fresh updates into the entries."""
        fresh, self._fresh = self._fresh, []
        entries = self._entries
        for update in fresh:
            plain = plain_text_chunk(update)
            if plain is not None:
                chunk, text = plain
                key = (type(chunk), chunk.message_id)
                last = entries[-1] if entries else None
                if type(last) is _TextRun and last.key == key:
                    last.add(text)
                    continue
                entry: models.SessionUpdate | _TextRun = _TextRun(key, text)
            else:
                entry = update
            if len(entries) >= self._max:
                dropped = entries.popleft()
                self._lost += dropped.count if isinstance(dropped, _TextRun) else 1
            entries.append(entry)

    def updates(self) -> list[models.SessionUpdate]:
        """What was kept, in order (a text run as one chunk)."""
        self._merge()
        return [e.update() if isinstance(e, _TextRun) else e for e in self._entries]

    def clear(self) -> None:
        self._entries.clear()
        self._fresh = []
        self._lost = 0

    def __len__(self) -> int:
        self._merge()
        return len(self._entries)
