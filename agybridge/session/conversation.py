"""agy's conversation behind a session: its id, resuming it, and drift.

agy is the source of the model's context (``--conversation <id>``). An id
agy does not know silently starts a new conversation (contract.md §1.1), so
the id is re-read from every ``init``/``result``; a fork is recorded and told
to the user once.
"""

from __future__ import annotations

import logging

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
