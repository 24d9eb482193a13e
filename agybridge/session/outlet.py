"""Where a session's updates go: the client attached to it, if any.

A session never knows its client. It is given an :class:`Outlet`, and the
layer that owns connections attaches a client's sink to it (and may detach
it, or attach another one later), so a session can outlive the connection
that created it: the workstation supervisor keeps sessions running while
editors come and go.

While a turn runs, the outlet keeps its updates (a :class:`TurnLog`), whether a client
is attached or not, until the turn is in the display journal: a client that
attaches mid-turn is shown the stored history, then this turn so far, then
the rest live, then the turn's outcome (:func:`turn_outcome`). A turn that
ended with nobody attached keeps its outcome for the next client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import trio

from ..acp import models
from ..acp.turn_log import TurnLog
from ..locks import EagerLock

logger = logging.getLogger(__name__)

#: Sends ``session/update``s to a client, in order: (session id, updates).
#: A batch is one hand-over (a read of agy's output mapped in one step).
ClientSink = Callable[[str, Sequence[models.SessionUpdate]], Awaitable[None]]

#: Held updates are handed over at the latest when this many are waiting.
HOLD_LIMIT = 256
#: Telling a replaced client must not hold up the new one if it stopped reading.
DETACH_NOTICE_S = 1.0


def turn_outcome(state: str, **details: Any) -> models.SessionInfoUpdate:
    """The turn-outcome notification (README "Long-running sessions"):
    ``session_info_update`` with ``_meta.agybridge.turn = {state, ...}``;
    state ``running``, ``ended`` (with ``stopReason``) or ``failed`` (with
    ``error``)."""
    return models.SessionInfoUpdate(meta={"agybridge": {"turn": {"state": state, **details}}})


def detached_notice(reason: str) -> models.SessionInfoUpdate:
    """Told to a client another client took the session from."""
    return models.SessionInfoUpdate(meta={"agybridge": {"attached": False, "reason": reason}})


class Outlet:
    """One session's way out; see the module docstring."""

    def __init__(
        self, session_id: str, client: ClientSink | None = None, *, takeovers: bool = True
    ) -> None:
        self.session_id = session_id
        #: Another client may take the session over (the daemon): a hand-over to
        #: the one it replaces can be given up. Not with one client for good
        #: (stdio), where the cancel scope would cost every hand-over for nothing.
        self._takeovers = takeovers
        self._client = client
        self._attached = trio.Event()
        if client is not None:
            self._attached.set()
        #: Updates sent while no client was attached.
        self.dropped = 0
        #: Wall-clock time of the last update (for status).
        self.last_activity = time.time()
        #: The last turn that did not end well: ``{cause, at}`` (for status).
        self.last_failure: dict[str, Any] | None = None
        #: The running turn: its updates so far, who started it, since when.
        self._turn: TurnLog | None = None
        self._turn_owner: ClientSink | None = None
        self.turn_started_at: float | None = None
        #: The outcome of a turn that ended while nobody was attached.
        self._unseen_outcome: models.SessionInfoUpdate | None = None
        #: The turn's opening update (``turn_started``): sent (in the turn's
        #: log) but handed over with the next hand-over, ahead of it, so it
        #: costs no write of its own.
        self._lead: models.SessionUpdate | None = None
        # Orders attaching (history + replay) against live updates and the
        # turn's journalling, so a client sees every update exactly once.
        self._guard = EagerLock()
        #: Updates collected while the session loop maps a batch (``holding``).
        self._held: list[models.SessionUpdate] | None = None
        self._holding = _Holding(self)  # stateless: one for every batch
        self._unheld = _Unheld(self)  # likewise
        self._journalling = _Journalling(self)  # likewise
        #: The hand-over to a client in progress (under the guard): a client
        #: taking the session over gives up one to another client.
        self._handing: tuple[ClientSink, trio.CancelScope] | None = None
        #: Clients taking the session over, waiting for the guard: the client
        #: they replace is sent nothing meanwhile (it may have stopped reading).
        self._takers: list[ClientSink] = []
        #: Work done for one client (its questions), cancelled when it is not
        #: the attached client any more (``while_attached``).
        self._bound: list[tuple[ClientSink, trio.CancelScope]] = []

    @property
    def takeovers(self) -> bool:
        """Whether another client may take the session over (hand-overs can be given up)."""
        return self._takeovers

    @property
    def handing_over(self) -> bool:
        """Updates are being handed to a client right now (it may be slow to read)."""
        return self._handing is not None

    @property
    def attached(self) -> bool:
        return self._client is not None

    @property
    def client(self) -> ClientSink | None:
        return self._client

    def attach(self, client: ClientSink) -> None:
        self._client = client
        self._attached.set()
        self._unbind()

    def detach(self) -> None:
        self._client = None
        if self._attached.is_set():
            self._attached = trio.Event()
        self._unbind()

    def let_go(self, closer: ClientSink) -> None:
        """``closer`` is closing the session: another client attached to it is
        detached and a hand-over to it given up, so the close does not wait on a
        client that may have stopped reading (only where clients can take
        sessions from each other: the daemon)."""
        if not self._takeovers or self._client is None or self._client is closer:
            return
        self.detach()
        handing = self._handing
        if handing is not None and handing[0] is not closer:
            handing[1].cancel(reason="another client is closing the session")

    def _unbind(self) -> None:
        for client, scope in self._bound:
            if client is not self._client:
                scope.cancel(reason="the client was detached from the session")

    @contextmanager
    def while_attached(self, client: ClientSink) -> Iterator[trio.CancelScope]:
        """A cancel scope that is cancelled once ``client`` is not the attached
        client (detached, or another client took the session over): a
        question asked of it is then asked of the next client instead."""
        with trio.CancelScope() as scope:
            bound = (client, scope)
            self._bound.append(bound)
            try:
                if client is not self._client:
                    scope.cancel(reason="the client is not attached to the session")
                yield scope
            finally:
                self._bound.remove(bound)

    async def wait_attached(self) -> ClientSink:
        """The attached client, once there is one (a plain wait)."""
        while self._client is None:
            await self._attached.wait()
        return self._client

    async def send(self, update: models.SessionUpdate) -> None:
        await self.send_all((update,))

    async def send_all(self, updates: Sequence[models.SessionUpdate]) -> None:
        """`send` for several updates, in order (one step of the mapper)."""
        held = self._held
        if held is None:
            async with self._guard:
                await self._deliver(updates)
            return
        held += updates
        if len(held) >= HOLD_LIMIT:
            await self.flush()

    async def _deliver(self, updates: Sequence[models.SessionUpdate]) -> None:
        self.last_activity = time.time()
        turn = self._turn
        if turn is not None:
            turn.extend(updates)
        lead = self._lead
        if lead is not None:  # already in the turn's log
            self._lead = None
            updates = (lead, *updates)
        client = self._client
        if client is None or not await self._hand_over(client, updates):
            self.dropped += len(updates)

    async def _hand_over(self, client: ClientSink, updates: Sequence[models.SessionUpdate]) -> bool:
        """Send to ``client`` (under the guard); False if it was given up because
        another client is taking the session over (a client that stopped reading
        must not keep the session from the next one)."""
        if not self._takeovers:
            await client(self.session_id, updates)
            return True
        with trio.CancelScope() as scope:
            if any(taker is not client for taker in self._takers):
                scope.cancel(reason="another client is taking the session over")
            self._handing = (client, scope)
            try:
                await client(self.session_id, updates)
            finally:
                self._handing = None
        return not scope.cancelled_caught

    # --- holding a batch -------------------------------------------------------

    async def flush(self) -> None:
        """Hand over what is held (and go on holding). Returns once it is all
        with the client: what another task adds meanwhile goes too, and a part
        another task's send is handing over (at HOLD_LIMIT) has gone first."""
        async with self._guard:
            while self._held:
                held, self._held = self._held, []
                await self._deliver(held)

    def holding(self) -> _Holding:
        """Hold updates inside the block (the session loop mapping a batch of
        agy events); they are handed over, in order, when it ends."""
        return self._holding

    def unheld(self) -> _Unheld | _NotHolding:
        """Hand over what is held, then send straight through inside the block
        (whatever happens in it is ordered after the updates before it). The
        block runs even if handing over failed: it gets that exception (else
        None) and must raise it."""
        return self._unheld if self._held is not None else _NOT_HOLDING

    # --- the running turn ------------------------------------------------------

    async def turn_started(
        self,
        prompt_text: str,
        owner: ClientSink | None = None,
        lead: models.SessionUpdate | None = None,
    ) -> None:
        """A prompt's turn starts (its prompt, for a client that attaches later);
        ``owner``: the client that sent the prompt (it gets the answer), when
        known, else the attached one. ``lead``: the turn's first update, sent
        with the turn's first hand-over (its first updates, else `hand_over_lead`
        before the prompt is answered), so it costs no write of its own."""
        async with self._guard:
            self._turn = turn = TurnLog()
            self._turn_owner = owner if owner is not None else self._client
            self.turn_started_at = self.last_activity = time.time()
            self._unseen_outcome = None
            prompt = models.UserMessageChunk(content=models.TextContent(text=prompt_text))
            turn.extend((prompt,) if lead is None else (prompt, lead))
            self._lead = lead

    async def hand_over_lead(self) -> None:
        """Hand the turn's lead over if it still waits (before the prompt's
        answer, which must come after it)."""
        if self._lead is not None:
            async with self._guard:
                if self._lead is not None:  # else another hand-over took it
                    await self._deliver(())

    def journalling(self) -> _Journalling:
        """Hold attaching off while the turn is written to the display journal;
        after it, the journal has the turn, so the outlet lets it go (not
        after a block that raised)."""
        return self._journalling

    async def turn_ended(self, outcome: models.SessionInfoUpdate) -> None:
        """The turn was answered: a client that did not send it is told how it
        ended; with none attached, the next one is."""
        async with self._guard:
            if self._turn is None:
                return
            owner, self._turn, self._turn_owner = self._turn_owner, None, None
            self.turn_started_at = None
            if (named := (outcome.meta or {}).get("agybridge", {}).get("cause")) is not None:
                self.last_failure = {"cause": named, "at": self.last_activity}
            client = self._client
            if client is None:
                self._unseen_outcome = outcome
            elif client is not owner:
                await self._hand_over(client, (outcome,))

    @property
    def turn_running(self) -> bool:
        return self._turn is not None

    # --- attaching ---------------------------------------------------------------

    async def attach_replaying(
        self,
        client: ClientSink,
        history: Callable[[], Awaitable[Iterable[models.SessionUpdate]]] | None,
        *,
        gone: Callable[[], bool] | None = None,
    ) -> ClientSink | None:
        """Attach ``client`` and bring it up to date: the stored ``history``
        (None: nothing, for ``session/resume``), the running turn so far, and
        the outcome of a turn it has not seen. Returns the client it replaced
        (told it was detached), if another one was attached. A client that
        ``gone`` says has left for good by the time its turn comes (its open
        waited behind others) attaches to nothing and takes nothing (nor
        holds up what goes to the attached client)."""
        if gone is not None and gone():
            logger.info("session %s: not attached to a departed client", self.session_id)
            return None
        self._takers.append(client)
        handing = self._handing
        if handing is not None and handing[0] is not client:
            handing[1].cancel(reason="another client is taking the session over")
        try:
            async with self._guard:
                self._takers.remove(client)
                if gone is not None and gone():
                    logger.info("session %s: not attached to a departed client", self.session_id)
                    return None
                return await self._attach_now(client, history)
        finally:
            if client in self._takers:
                self._takers.remove(client)

    async def _attach_now(
        self,
        client: ClientSink,
        history: Callable[[], Awaitable[Iterable[models.SessionUpdate]]] | None,
    ) -> ClientSink | None:
        previous = self._client
        if previous is client:
            previous = None
        self.attach(client)
        # The replay below has the lead (the turn's log does).
        lead, self._lead = self._lead, None
        if previous is not None:
            try:
                with trio.move_on_after(DETACH_NOTICE_S):
                    notice = detached_notice("the session was opened by another client")
                    await previous(self.session_id, (notice,) if lead is None else (lead, notice))
            except Exception as exc:  # that client is going away anyway
                logger.info("session %s: could not tell the old client: %s", self.session_id, exc)
        replay: list[models.SessionUpdate] = []
        if history is not None:
            replay += await history()
        if self._turn is not None:
            if self._turn.lost:
                replay.append(_lost_notice(self._turn.lost))
            replay += self._turn.updates()
            replay.append(turn_outcome("running"))
        elif self._unseen_outcome is not None:
            replay.append(self._unseen_outcome)
            self._unseen_outcome = None
        for start in range(0, len(replay), HOLD_LIMIT):
            if not await self._hand_over(client, replay[start : start + HOLD_LIMIT]):
                break  # a newer client is taking it over
        return previous


def _lost_notice(count: int) -> models.SessionUpdate:
    return models.AgentThoughtChunk(
        content=models.TextContent(
            text=f"({count} earlier updates of this turn were not kept while detached)\n"
        )
    )


# The context managers below are small classes, not @asynccontextmanager
# generators: they run for every read of agy's output, every core step and
# every turn.


class _Holding:
    __slots__ = ("_outlet",)

    def __init__(self, outlet: Outlet) -> None:
        self._outlet = outlet

    async def __aenter__(self) -> None:
        self._outlet._held = []

    async def __aexit__(self, *exc_info: object) -> None:
        outlet = self._outlet
        try:
            # Most reads of agy's output leave nothing to hand over; then a
            # flush has nothing to wait for either, unless a hand-over is under way.
            if outlet._held or outlet._guard.locked():
                await outlet.flush()
        finally:
            outlet._held = None


class _Unheld:
    """`Outlet.unheld` while holding."""

    __slots__ = ("_outlet",)

    def __init__(self, outlet: Outlet) -> None:
        self._outlet = outlet

    async def __aenter__(self) -> Exception | None:
        try:
            await self._outlet.flush()
        except Exception as exc:  # a bug: the caller's block runs regardless
            return exc
        finally:
            self._outlet._held = None
        return None

    async def __aexit__(self, *exc_info: object) -> None:
        self._outlet._held = []


class _NotHolding:
    """`Outlet.unheld` while not holding: nothing to do."""

    __slots__ = ()

    async def __aenter__(self) -> Exception | None:
        return None

    async def __aexit__(self, *exc_info: object) -> None:
        pass


_NOT_HOLDING = _NotHolding()


class _Journalling:
    __slots__ = ("_outlet",)

    def __init__(self, outlet: Outlet) -> None:
        self._outlet = outlet

    async def __aenter__(self) -> None:
        await self._outlet._guard.__aenter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        try:
            turn = self._outlet._turn
            if exc_type is None and turn is not None:
                turn.clear()
        finally:
            await self._outlet._guard.__aexit__()
