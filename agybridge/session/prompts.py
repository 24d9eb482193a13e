"""One prompt as the session serves it: what agy is sent, its turn's mapper,
and the answer its request task waits for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import trio

from .errors import SessionError
from .mapper import TurnMapper


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
        self._cancelled = False

    def new(self) -> trio.CancelScope:
        scope = trio.CancelScope()
        if self._cancelled:
            scope.cancel()
        self._scopes.append(scope)
        return scope

    def cancel(self) -> None:
        self._cancelled = True
        for scope in self._scopes:
            scope.cancel()
        self._scopes.clear()


@attrs.define(eq=False)
class PromptWork:
    text: str = ""
    #: What the user typed, for the title and the display history.
    display_text: str = ""
    mapper: TurnMapper | None = None
    #: agy said on stderr that it is not signed in, during this turn.
    auth_failed: bool = False
    #: Deadlines of the current attempt (cancelled when it ends).
    timers: AttemptScopes = attrs.Factory(AttemptScopes)
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
        if self._done.is_set():
            return
        self.timers.cancel()
        if error is not None:
            self._error = error
        else:
            assert stop is not None
            self._result = PromptResult(stop, dict(meta or {}))
        self._done.set()

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
