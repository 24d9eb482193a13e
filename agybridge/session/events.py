"""The session's events task: agy's messages -> turns, updates and lifecycle.

The only consumer of one session's child messages (stdout events, classified
stderr lines, exits), in order. Events of the running turn go through its
mapper and out as ``session/update``s before the turn is marked done, so a
turn's updates always precede its prompt response. Events outside a turn
(``init``, a pre-turn failure) update the session. A child that exits ends
its turn: ``cancelled`` when the user cancelled, an :class:`AgyExitedError`
otherwise; after a kill the session is warmed again at once.

:class:`ChildEvents` is a mixin of :class:`~agybridge.session.session.Session`:
it declares the session state it reads and writes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from ..acp import models
from ..agy import (
    AgyChild,
    ChildEvent,
    ChildExited,
    ChildMessage,
    ChildStderr,
    InitEvent,
    ResultEvent,
    StderrKind,
    StepUpdateEvent,
    Usage,
)
from .errors import AgyExitedError, SessionError, classify_agy_error
from .images import observe
from .mapper import OutcomeKind, TurnMapper, TurnOutcome
from .staging import StagingArea
from .tool_calls import NO_OBSERVATION

logger = logging.getLogger(__name__)

#: After an ERROR result, how long the turn may wait for the AGY_ERROR line
#: from the other pipe when agy neither prints it nor exits.
ERROR_DETAILS_GRACE_S = 0.5


@attrs.define(eq=False)
class Turn:
    """One prompt's turn: its mapper, the child it was sent to, and how it ended."""

    seq: float
    mapper: TurnMapper
    child: AgyChild | None = None
    done: trio.Event = attrs.Factory(trio.Event)
    outcome: TurnOutcome | None = None
    error: SessionError | None = None
    auth_failed: bool = False
    #: agy has said something about this turn (it read the prompt).
    heard: bool = False
    #: agy ended the turn with an error whose AGY_ERROR details may still be
    #: on their way (stderr is another pipe).
    awaiting_details: bool = False

    def reset(self) -> None:
        """Forget an attempt that agy never read, to send the prompt again."""
        self.child, self.done, self.outcome, self.error = None, trio.Event(), None, None

    def finish(self, outcome: TurnOutcome | None = None, error: SessionError | None = None) -> None:
        if self.done.is_set():
            return
        self.outcome, self.error = outcome, error
        self.done.set()


class ChildEvents:
    """The events task and its handlers (mixed into Session)."""

    # Session state these handlers use (set in Session.__init__).
    session_id: str
    cwd: str
    additional_dirs: tuple[str, ...]
    staging: StagingArea | None
    model: str | None
    conversation_id: str | None
    conversation_drift: list[tuple[str, str]]
    _send_update: Callable[[str, models.SessionUpdate], Awaitable[None]]
    _messages_receive: trio.MemoryReceiveChannel[ChildMessage]
    _nursery: trio.Nursery | None
    _turn: Turn | None
    _child: AgyChild | None
    _closing: bool
    _resuming: str | None
    _fork_notice: str | None
    _startup_failure: SessionError | None
    _last_result_usage: tuple[int, Usage] | None

    def _save_soon(self) -> None:
        raise NotImplementedError

    async def _respawn_after_kill(self) -> None:
        raise NotImplementedError

    async def _events_task(self) -> None:
        async with self._messages_receive:
            async for message in self._messages_receive:
                if isinstance(message, ChildEvent):
                    await self._on_event(message)
                elif isinstance(message, ChildStderr):
                    await self._on_stderr(message)
                else:
                    self._on_exit(message)

    def _turn_for(self, incarnation: int) -> Turn | None:
        turn = self._turn
        if turn is None or turn.child is None or turn.child.incarnation != incarnation:
            return None
        return turn if not turn.done.is_set() else None

    async def _on_event(self, message: ChildEvent) -> None:
        event = message.event
        if isinstance(event, InitEvent):
            self._learn_conversation(event.conversation_id, "init")
            if event.init.model:
                self.model = event.init.model
        elif isinstance(event, ResultEvent):
            if event.result.conversation_id:
                self._learn_conversation(event.result.conversation_id, "result")
            if event.result.usage is not None:
                self._last_result_usage = (message.incarnation, event.result.usage)
        turn = self._turn_for(message.incarnation)
        if turn is None:
            self._between_turns(message)
            return
        if isinstance(event, StepUpdateEvent | ResultEvent):
            turn.heard = True
        files, images = turn.mapper.paths_to_read(event)
        early = message.attachment if isinstance(message.attachment, dict) else {}
        files = [path for path in files if path not in early]
        seen = NO_OBSERVATION
        if files or images:
            roots = [self.cwd, *self.additional_dirs]
            if self.staging is not None:
                roots.append(self.staging.root)
            seen = await trio.to_thread.run_sync(observe, files, images, roots)
        if early:
            seen = attrs.evolve(seen, files={**seen.files, **early})
        for update in turn.mapper.feed(event, seen):
            await self._send_update(self.session_id, update)
        outcome = turn.mapper.outcome
        if outcome is None:
            return
        if turn.mapper.cancel_requested:
            return  # finished when the child is gone (see _on_exit)
        if outcome.kind is OutcomeKind.AGY_ERROR and turn.mapper.agy_error_details is None:
            # agy prints AGY_ERROR on stderr around its ERROR result, usually
            # just before exiting (contract.md §4): finish on that line, on
            # the exit, or after a short grace if agy carries on serving.
            turn.awaiting_details = True
            assert self._nursery is not None
            self._nursery.start_soon(self._complete_after_grace, turn)
            return
        self._complete(turn)

    def _complete(self, turn: Turn) -> None:
        """Finish a turn whose result arrived: its outcome, or the error it is."""
        outcome = turn.mapper.outcome
        assert outcome is not None
        turn.awaiting_details = False
        if outcome.kind is OutcomeKind.AGY_ERROR and not turn.mapper.quota:
            error = self._classify_error(outcome.error or "", turn)
            if error is not None:
                turn.finish(error=error)
                return
        turn.finish(outcome)

    async def _complete_after_grace(self, turn: Turn) -> None:
        await trio.sleep(ERROR_DETAILS_GRACE_S)
        if turn.awaiting_details and not turn.done.is_set():
            self._complete(turn)

    def _between_turns(self, message: ChildEvent) -> None:
        event = message.event
        child = self._child
        from_live_child = (
            child is not None and child.incarnation == message.incarnation and not child.killed
        )
        if not from_live_child:
            # e.g. the "interrupted" result of a child we killed after its
            # prompt request was withdrawn: nothing anyone waits for.
            logger.debug(
                "session %s: late event from agy[%s]: %r",
                self.session_id,
                message.incarnation,
                event,
            )
        elif isinstance(event, ResultEvent) and event.result.status != "SUCCESS":
            # A pre-turn failure (e.g. unknown model: no init, one ERROR
            # result, exit 1; contract.md §3.1): reported to the next prompt.
            text = event.result.error or f"agy failed with status {event.result.status}"
            self._startup_failure = self._classify_error(text, None) or SessionError(
                f"agy failed before the turn started: {text}"
            )
        elif not isinstance(event, InitEvent):
            logger.debug("session %s: event outside a turn: %r", self.session_id, event)

    def _classify_error(self, text: str, turn: Turn | None) -> SessionError | None:
        return classify_agy_error(text, auth_failed=turn is not None and turn.auth_failed)

    async def _on_stderr(self, message: ChildStderr) -> None:
        turn = self._turn_for(message.incarnation)
        if turn is not None:
            for update in turn.mapper.feed_stderr(message.line):
                await self._send_update(self.session_id, update)
            if turn.awaiting_details and message.line.kind is StderrKind.AGY_ERROR:
                self._complete(turn)
        if message.line.kind is StderrKind.AUTH:
            logger.warning(
                "session %s: agy reports an auth problem: %s", self.session_id, message.line.text
            )
            if turn is not None:
                turn.auth_failed = True

    def _on_exit(self, message: ChildExited) -> None:
        if self._child is not None and self._child.incarnation == message.incarnation:
            self._child = None
        turn = self._turn_for(message.incarnation)
        if turn is not None and turn.awaiting_details:
            self._complete(turn)  # its result came; the exit is agy's reaction
        elif turn is not None:
            if turn.mapper.cancel_requested:
                turn.finish(TurnOutcome(OutcomeKind.CANCELLED, "CANCELLED"))
            else:
                tail = "\n".join(message.stderr_tail[-5:])
                turn.finish(
                    error=AgyExitedError(
                        f"agy exited unexpectedly (exit code {message.returncode}) "
                        "before finishing the turn" + (f": {tail}" if tail else ""),
                        data={
                            "exitCode": message.returncode,
                            "stderrTail": list(message.stderr_tail),
                        },
                    )
                )
        elif self._startup_failure is None and not message.killed and message.returncode:
            tail = "\n".join(message.stderr_tail[-5:])
            self._startup_failure = AgyExitedError(
                f"agy exited with code {message.returncode} before the prompt"
                + (f": {tail}" if tail else ""),
                data={"exitCode": message.returncode, "stderrTail": list(message.stderr_tail)},
            )
        if message.killed and not self._closing and self._nursery is not None:
            # Warm again right away: the next prompt should not wait for start-up.
            self._nursery.start_soon(self._respawn_after_kill)

    def _learn_conversation(self, conversation_id: str, source: str) -> None:
        if not conversation_id or conversation_id == self.conversation_id:
            return
        if self._resuming is not None and conversation_id != self._resuming:
            # An unknown --conversation silently starts a new conversation
            # (contract.md §1.1): keep working, record it, tell the user once.
            logger.warning(
                "session %s: asked agy to resume conversation %s but it reported %s (%s); "
                "agy started a new conversation",
                self.session_id,
                self._resuming,
                conversation_id,
                source,
            )
            self.conversation_drift.append((self._resuming, conversation_id))
            self._fork_notice = (
                f"ℹ️ agy could not resume conversation {self._resuming} and started a new "
                f"one ({conversation_id}): it does not remember the earlier turns of this "
                "session."
            )
            self._resuming = None
        self.conversation_id = conversation_id
        self._save_soon()
