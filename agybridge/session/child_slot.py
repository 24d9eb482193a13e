"""The one owner of a session's agy children: the current one and those
being retired. Nothing else holds an :class:`~agybridge.agy.AgyChild`.

The turn core decides when a child is spawned or retired (and never spawns
while one is still retiring); this slot performs it: :meth:`ensure` starts
incarnation N in the session's nursery, :meth:`retire` starts its
SIGINT → SIGTERM → SIGKILL escalation, and :meth:`forget` drops it once its
exit has been reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import trio

from ..agy import AgyChild, AgyEvent, AgySpawnError, EscalationPolicy, MessageSink

logger = logging.getLogger(__name__)


class ChildSlot:
    def __init__(
        self,
        *,
        policy: EscalationPolicy,
        max_line_bytes: int,
        messages: MessageSink,
        annotate: Callable[[AgyEvent], object] | None = None,
    ) -> None:
        self._policy = policy
        self._max_line_bytes = max_line_bytes
        self._messages = messages
        self._annotate = annotate
        self._children: dict[int, AgyChild] = {}
        self._retired: set[int] = set()

    async def ensure(
        self,
        nursery: trio.Nursery,
        incarnation: int,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str] | None,
    ) -> AgyChild:
        """Start incarnation ``incarnation`` (once); returns when it exists.

        Raises:
            AgySpawnError: it could not be started.
        """
        child = self._children.get(incarnation)
        if child is not None:
            return child
        child = AgyChild(
            argv=argv,
            cwd=cwd,
            env=env,
            incarnation=incarnation,
            policy=self._policy,
            max_line_bytes=self._max_line_bytes,
            messages=self._messages,
            annotate=self._annotate,
        )
        await nursery.start(child.run)
        self._children[incarnation] = child
        return child

    def get(self, incarnation: int) -> AgyChild | None:
        return self._children.get(incarnation)

    @property
    def current(self) -> AgyChild | None:
        """The newest child not being retired."""
        live = [inc for inc in self._children if inc not in self._retired]
        return self._children[max(live)] if live else None

    def retire(self, incarnation: int, reason: str) -> None:
        """Start stopping it (sync, idempotent); its exit arrives as a message."""
        child = self._children.get(incarnation)
        if child is not None:
            self._retired.add(incarnation)
            child.kill(reason)

    def forget(self, incarnation: int) -> None:
        """Its exit was reported: the slot no longer holds it."""
        self._children.pop(incarnation, None)
        self._retired.discard(incarnation)


__all__ = ["AgySpawnError", "ChildSlot"]
