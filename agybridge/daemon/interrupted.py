"""Turns the daemon's death cut off are in the history (issue 28).

While a ``session/prompt`` is being served, a note of it (session, prompt
text) is kept in the store (one ``meta`` value, written by one task as it
changes, so a prompt never waits for it). A daemon that stops cleanly leaves
none; one that was killed leaves the notes of the prompts it was serving, and
the next daemon on the database (the only one: store/claim.py) journals each
as a turn of its own: the prompt, and an answer saying it was interrupted, so
the next ``session/load`` shows it.
"""

from __future__ import annotations

import itertools
import logging
import os
from typing import Any

import trio

from ..store import AsyncStore, JournalEntry, StoreError

logger = logging.getLogger(__name__)

#: The store's ``meta`` key of the notes.
NOTES_KEY = "daemon.prompts-in-progress"
#: The most of a prompt's text a note keeps.
MAX_TEXT_CHARS = 4000


def interrupted_text(pid: int) -> str:
    return (
        f"(This turn was interrupted: the agybridge daemon, pid {pid}, stopped before it "
        "ended, and its answer was lost. Send the prompt again to run it.)"
    )


class PromptNotes:
    """The prompts being served, mirrored in the store."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store
        self._notes: dict[str, dict[str, Any]] = {}
        self._keys = itertools.count()
        self._changed = trio.Event()
        self._written: dict[str, dict[str, Any]] = {}

    def started(self, params: Any) -> str | None:
        """Note a prompt; the key to `ended` it with (None: nothing to note)."""
        if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
            return None
        key = f"{next(self._keys):012d}"
        self._notes[key] = {
            "sessionId": params["sessionId"],
            "text": _prompt_text(params.get("prompt")),
            "pid": os.getpid(),
        }
        self._changed.set()
        return key

    def ended(self, key: str | None) -> None:
        if key is not None and self._notes.pop(key, None) is not None:
            self._changed.set()

    async def run(self) -> None:
        """Write the notes whenever they change (several changes: one write)."""
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            await self.flush()

    async def flush(self) -> None:
        notes = dict(self._notes)
        if notes == self._written:
            return
        try:
            await self._store.meta_put(NOTES_KEY, notes)
        except StoreError as exc:
            logger.warning("could not note the prompts in progress: %s", exc)
            return
        self._written = notes


async def journal_interrupted(store: AsyncStore) -> int:
    """Journal the prompts a killed daemon left noted; how many there were."""
    notes = await store.meta_get(NOTES_KEY)
    if not isinstance(notes, dict) or not notes:
        return 0
    recorded = 0
    for _key, note in sorted(notes.items()):
        session_id = note.get("sessionId") if isinstance(note, dict) else None
        if not isinstance(session_id, str) or await store.get_session(session_id) is None:
            continue  # deleted, or never saved: no history to show it in
        journal = await store.journal(session_id)
        turn = max((entry.turn for entry in journal), default=-1) + 1
        pid = note.get("pid") if isinstance(note.get("pid"), int) else 0
        await store.append_journal(
            [
                JournalEntry.user(session_id, turn, 0, str(note.get("text") or "")),
                JournalEntry.agent(session_id, turn, 1, interrupted_text(pid)),
            ]
        )
        logger.warning(
            "session %s: a turn was interrupted by the death of daemon pid %s; "
            "it is in the history",
            session_id,
            pid,
        )
        recorded += 1
    await store.meta_put(NOTES_KEY, {})
    return recorded


def _prompt_text(blocks: Any) -> str:
    parts: list[str] = []
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(f"[{block.get('type', 'content')}]")
    text = "\n".join(parts)
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + " [...]"
