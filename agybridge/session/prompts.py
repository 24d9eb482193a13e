"""One prompt as the session serves it: what agy is sent, its turn's mapper,
and the answer its request task waits for."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from .. import causes
from ..acp import models
from ..acp.models import STOP_CANCELLED
from ..translate.mapper import TurnMapper
from . import turn_events as ev
from .errors import InternalSessionError, SessionError
from .outlet import ClientSink, turn_outcome


@attrs.frozen
class PromptResult:
    stop_reason: str
    #: The prompt response's ``_meta``: token figures, structured output,
    #: parsed agy errors, counts of output the bridge could not map.
    meta: Mapping[str, Any] = attrs.Factory(dict)


class AttemptScopes:
    """Cancel scopes of one turn attempt's background work (deadlines, a
    question to the client); all cancelled together when the attempt ends."""

    def __init__(self) -> None:
        self._scopes: list[trio.CancelScope] = []
        self._on_cancel: list[Callable[[], None]] = []
        self._cancelled = False

    def new(self) -> trio.CancelScope:
        scope = trio.CancelScope()
        if self._cancelled:
            scope.cancel()
        self._scopes.append(scope)
        return scope

    def on_cancel(self, end: Callable[[], None]) -> None:
        """Call ``end`` when the attempt ends (now, if it has)."""
        if self._cancelled:
            end()
        else:
            self._on_cancel.append(end)

    def cancel(self) -> None:
        self._cancelled = True
        for scope in self._scopes:
            scope.cancel()
        self._scopes.clear()
        ends, self._on_cancel = self._on_cancel, []
        for end in ends:
            end()


@attrs.define(eq=False)
class PromptWork:
    text: str = ""
    #: What the user typed, for the title and the display history.
    display_text: str = ""
    #: The client that sent the prompt (it gets the answer), if known.
    owner: ClientSink | None = None
    mapper: TurnMapper | None = None
    #: agy said on stderr that it is not signed in, during this turn.
    auth_failed: bool = False
    #: Its request task holds it (and takes the answer from it).
    claimed: bool = False
    #: The prompt is in the display journal (a retried turn journals it once).
    prompt_journalled: bool = False
    #: Deadlines of the current attempt (cancelled when it ends).
    timers: AttemptScopes = attrs.Factory(AttemptScopes)
    #: The answer is set (the first answer wins: exactly one per prompt).
    answered: bool = attrs.field(default=False, init=False)
    _done: trio.Event = attrs.Factory(trio.Event)
    _result: PromptResult | None = None
    _error: SessionError | None = None

    def answer(
        self,
        *,
        stop: str | None = None,
        error: SessionError | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Set the answer (the first one wins: exactly one per prompt)."""
        if self.answered:
            return
        self.answered = True
        self.timers.cancel()
        if error is not None:
            self._error = error
        else:
            assert stop is not None
            self._result = PromptResult(stop, dict(meta or {}))
        self._done.set()

    def give(self, action: ev.AnswerPrompt | ev.AmendAnswer) -> models.SessionInfoUpdate:
        """Answer the prompt as the core's ``action`` says; the turn-outcome
        notification that goes with the answer."""
        if action.error is not None:
            self.answer(error=action.error)
            failed = turn_outcome("failed", error={"message": action.error.message})
            return _naming_cause(failed, action.error.meta())
        assert type(action) is ev.AnswerPrompt
        if action.stop is ev.Stop.CANCELLED:
            self.answer(stop=models.STOP_CANCELLED)
            return turn_outcome("ended", stopReason=models.STOP_CANCELLED)
        assert self.mapper is not None
        meta = self.mapper.response_meta()
        self.answer(stop=models.STOP_END_TURN, meta=meta)
        return _naming_cause(turn_outcome("ended", stopReason=models.STOP_END_TURN), meta)

    async def result(self) -> PromptResult:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


TITLE_MAX_CHARS = 80


def make_title(prompt: str) -> str:
    """A one-line session title from the first prompt."""
    line = next((line.strip() for line in prompt.splitlines() if line.strip()), "")
    line = " ".join(line.split())
    if len(line) > TITLE_MAX_CHARS:
        line = line[: TITLE_MAX_CHARS - 1].rstrip() + "…"
    return line or "New session"


class PromptBook:
    """A session's prompts from arrival until their request task has taken
    the answer (a turn may outlive a request task that went away)."""

    def __init__(self) -> None:
        self._work: dict[float, PromptWork] = {}
        #: The session is over: how a prompt arriving now is answered.
        self._closed_with: tuple[str | None, SessionError | None] | None = None
        #: What the client sent in the last prompt whose turn failed (an error
        #: answer), for ``_agybridge/session/retry``; None once a later turn
        #: did not fail (cancelled or refused is not failed).
        self.failed: list[models.ContentBlock] | None = None

    def get(self, seq: float) -> PromptWork | None:
        """The prompt's work, if the book holds it."""
        return self._work.get(seq)

    def arrived(self, seq: float) -> PromptWork:
        """The prompt's work, made when it is new."""
        work = self._work.get(seq)
        if work is None:
            work = self._work[seq] = PromptWork()
            if self._closed_with is not None:
                stop, error = self._closed_with
                work.answer(stop=stop, error=error)
        return work

    def claim(
        self, seq: float, text: str, display_text: str, owner: ClientSink | None = None
    ) -> PromptWork:
        """The request task takes its prompt, now ready to run."""
        work = self.arrived(seq)
        work.claimed = True
        work.text, work.display_text, work.owner = text, display_text, owner
        return work

    def release(self, seq: float, work: PromptWork) -> None:
        """The request task is done waiting; keep a turn that still runs."""
        if work.answered:
            self._work.pop(seq, None)

    def drop(self, seq: float) -> None:
        """Answered without a turn by the agent (an error, a bridge command)."""
        work = self._work.get(seq)
        if work is not None and not work.claimed:
            del self._work[seq]

    def take_answered(self, seq: float) -> PromptWork | None:
        """The prompt the core answers; forgotten if its request task holds it."""
        work = self._work.get(seq)
        if work is not None and work.claimed:
            del self._work[seq]
        return work

    def close_after(self, failure: BaseException | None) -> None:
        """The session is over: no prompt may be left waiting. Cut short by
        shutdown it is cancelled; by a failure of the bridge, that error."""
        if isinstance(failure, BaseExceptionGroup):
            failure = failure.split(trio.Cancelled)[1]
        if failure is None or isinstance(failure, trio.Cancelled | KeyboardInterrupt):
            self.close(stop=STOP_CANCELLED)
        elif isinstance(failure, SessionError):  # e.g. agy could not be started
            self.close(error=failure)
        else:
            self.close(error=InternalSessionError(f"the session failed: {failure!r}"))

    def close(self, *, stop: str | None = None, error: SessionError | None = None) -> None:
        """The session is over: every prompt waiting, and any arriving from
        now on, is answered so."""
        self._closed_with = (stop, error)
        for work in self._work.values():
            work.answer(stop=stop, error=error)


def _naming_cause(outcome: models.SessionInfoUpdate, meta: Any) -> models.SessionInfoUpdate:
    """The turn-outcome notification with the cause ``meta`` names (if any)
    beside its ``turn``: ``_meta.agybridge.cause`` and the cause's fields."""
    if causes.cause_of(meta) is None:
        return outcome
    merged = {**meta["agybridge"], **(outcome.meta or {})["agybridge"]}
    return attrs.evolve(outcome, meta={"agybridge": merged})
