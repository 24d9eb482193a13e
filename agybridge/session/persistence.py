"""What is kept of a session: its row in the session index and its display
journal (:class:`SessionBook`), and agy's conversation behind it
(:class:`Conversation`).

A store failure is logged, not raised: history is a convenience, the turn is
what matters. The first save creates the row; later saves only update it. A
row deleted while the session runs (``agybridge sessions delete``, another
bridge on the same database) stays deleted: the session goes on answering its
prompts, but saves nothing more (one warning), rather than writing the row back
without its history.

agy is the source of the model's context (``--conversation <id>``). An id agy
does not know silently starts a new conversation (contract.md §1.1), so the id
is re-read from every ``init``/``result``; a fork is recorded and told to the
user once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..store import AsyncStore, SessionRecord, StoreError, utc_now
from ..translate.history import turn_entries
from ..translate.mapper import TurnMapper
from ..translate.usage import to_meta as usage_meta
from .config import LaunchSettings

logger = logging.getLogger(__name__)


class SessionBook:
    def __init__(self, store: AsyncStore | None, session_id: str, next_turn: int) -> None:
        self._store = store
        self._session_id = session_id
        #: Index of the next turn in the display journal.
        self.next_turn = next_turn
        #: Tokens of this session so far (for /status).
        self.usage_totals: dict[str, int] = {}
        #: The row was written once: later saves only update it.
        self._saved = False
        #: The row was deleted by someone else: nothing more is saved.
        self.deleted = False

    @staticmethod
    def row(
        *,
        session_id: str,
        cwd: str,
        additional_dirs: tuple[str, ...],
        conversation_id: str | None,
        drift: list[tuple[str, str]],
        title: str | None,
        settings: LaunchSettings,
        created_at: str,
        plan: Sequence[Mapping[str, Any]] = (),
        updated_at: str | None = None,
    ) -> SessionRecord:
        """The session's index row (``updated_at`` None: now)."""
        drifted = [{"asked": asked, "got": got} for asked, got in drift]
        meta: dict[str, Any] = {"conversationDrift": drifted} if drifted else {}
        if plan:
            meta["plan"] = [dict(entry) for entry in plan]
        return SessionRecord(
            session_id=session_id,
            cwd=cwd,
            additional_dirs=additional_dirs,
            conversation_id=conversation_id,
            title=title,
            launch=settings.to_store(),
            created_at=created_at,
            updated_at=utc_now() if updated_at is None else updated_at,
            meta=meta,
        )

    async def save(self, record: SessionRecord) -> None:
        if self._store is None or self.deleted:
            return
        try:
            if self._saved:
                written = await self._store.update_session(record)
            else:
                await self._store.upsert_session(record)
                written = True
        except StoreError as exc:
            logger.warning(
                "session %s: could not save the session index: %s", self._session_id, exc
            )
            return
        self._note(written)

    async def record_turn(
        self, text: str | None, mapper: TurnMapper, record: Callable[[str], SessionRecord]
    ) -> None:
        """Journal one finished turn (the prompt reached agy) and save the
        session's row (``record(updated_at)``, built once the turn is counted)
        with it; the lines and the row carry one moment, the write's.
        ``text`` None: the prompt is journalled already (a retried turn)."""
        index, self.next_turn = self.next_turn, self.next_turn + 1
        now = utc_now()
        entries = turn_entries(
            self._session_id, index, text, mapper, f"user_{uuid.uuid4().hex}", created_at=now
        )
        if self._store is None or self.deleted:
            return
        try:
            written = await self._store.record_turn(entries, record(now), create=not self._saved)
        except StoreError as exc:
            logger.warning("session %s: could not save turn %d: %s", self._session_id, index, exc)
            return
        self._note(written)

    def _note(self, written: bool) -> None:
        if written:
            self._saved = True
        elif not self.deleted:
            self.deleted = True
            logger.warning(
                "session %s was deleted from the session database by another process "
                "(agybridge sessions delete, or another bridge): it keeps answering here, "
                "but its history is no longer saved",
                self._session_id,
            )

    def count_usage(self, mapper: TurnMapper) -> None:
        spent = mapper.turn_usage
        if spent is not None:
            for key, value in usage_meta(spent).items():
                self.usage_totals[key] = self.usage_totals.get(key, 0) + value
        if mapper.context_used is not None:
            self.usage_totals["contextUsed"] = mapper.context_used
            self.usage_totals["contextSize"] = mapper.context_size


logger = logging.getLogger(__name__)


class Conversation:
    def __init__(self, session_id: str, conversation_id: str | None) -> None:
        self._session_id = session_id
        self.id = conversation_id
        #: The id we asked the current agy to resume, to detect a fork.
        self._resuming: str | None = None
        #: (asked, got) each time agy forked instead of resuming.
        self.drift: list[tuple[str, str]] = []
        self.fork_notice: str | None = None

    def resume_id(self, resumable: bool) -> str | None:
        """The id to pass as ``--conversation`` for a new agy process (only
        once a turn reached agy: an id agy never used would fork)."""
        self._resuming = self.id if resumable else None
        return self._resuming

    def learn(self, conversation_id: str, source: str) -> bool:
        """agy reported its conversation id; True if it changed."""
        if not conversation_id or conversation_id == self.id:
            return False
        asked = self._resuming
        if asked is not None and conversation_id != asked:
            logger.warning(
                "session %s: asked agy to resume conversation %s but it reported %s (%s); "
                "agy started a new conversation",
                self._session_id,
                asked,
                conversation_id,
                source,
            )
            self.drift.append((asked, conversation_id))
            self.fork_notice = (
                f"ℹ️ agy could not resume conversation {asked} and started a new "
                f"one ({conversation_id}): it does not remember the earlier turns of this "
                "session."
            )
            self._resuming = None
        self.id = conversation_id
        return True

    def take_fork_notice(self) -> str | None:
        notice, self.fork_notice = self.fork_notice, None
        return notice
