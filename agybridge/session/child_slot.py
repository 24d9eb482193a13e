"""The one owner of a session's agy children (a port of the session loop):
the current one and those being retired, with what each printed that the
session needs later (its notes for error messages, its last ``result.usage``).
Nothing else holds an :class:`~agybridge.agy.AgyChild`.

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

from ..agy import AgyChild, AgyEvent, AgySpawnError, EscalationPolicy, MessageSink, Usage
from .errors import ChildNotes

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
        self._notes: dict[int, ChildNotes] = {}
        #: The last ``result.usage`` of each process (None: its last result had none).
        self._usage: dict[int, Usage | None] = {}

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
        self._notes[incarnation] = ChildNotes()
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
        self._notes.pop(incarnation, None)
        self._usage.pop(incarnation, None)

    def notes(self, incarnation: int) -> ChildNotes | None:
        """What that process printed that is not an event (for error messages)."""
        return self._notes.get(incarnation)

    def finished_turn(self, incarnation: int, usage: Usage | None) -> None:
        """That process printed a ``result`` (with this cumulative usage)."""
        self._usage[incarnation] = usage

    def result_usage(self, incarnation: int) -> Usage | None:
        """The last ``result.usage`` of that process (cumulative)."""
        return self._usage.get(incarnation)

    def had_result(self, incarnation: int) -> bool:
        """That process has finished a turn (with or without usage)."""
        return incarnation in self._usage


__all__ = ["AgySpawnError", "ChildSlot"]
