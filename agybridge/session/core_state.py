"""The turn core's state: one object that ``turns.py`` (the queue and the
table), ``outcomes.py`` (how a turn ends) and ``supervision.py`` (agy children
and the permission gate) extend, each a part of one state machine — read
``turns.py``'s docstring for the whole — and its two records: the prompts
waiting for their turn (:class:`PromptQueue`) and the agy children alive or
being retired (:class:`ChildLedger`). Plain bookkeeping, sans-I/O; nothing
outside the core reads or writes it: the driver asks
:class:`~.turns.TurnCore`'s queries.
"""

from __future__ import annotations

import attrs

from .config import LaunchSettings
from .errors import SessionError
from .turn_events import Action, Event, GateState, Stop, TurnState

#: A turn in these states has no child of its own.
_NOT_ON_A_CHILD = frozenset({TurnState.STARTING, TurnState.ASKING})


@attrs.define
class Turn:
    seq: float
    state: TurnState = TurnState.STARTING
    attempt: int = 1
    incarnation: int | None = None
    #: agy said something about this attempt (it read the prompt).
    heard: bool = False
    #: The prompt reached agy in some attempt: the turn goes in the journal.
    reached_agy: bool = False
    stall_noticed: bool = False
    #: Permissions the user allowed and this turn was retried for (at most
    #: once each: agy denying one again is final), and those asked about now.
    retried: frozenset[str] = frozenset()
    asked: frozenset[str] = frozenset()
    #: How the turn ends once its retiring child is gone.
    pending_stop: Stop | None = None
    pending_error: SessionError | None = None


@attrs.define
class Child:
    incarnation: int
    gated: bool
    #: The session's first agy (spawned by ``TurnCore.start``).
    first: bool = False
    live: bool = False
    output_seen: bool = False


class CoreError(Exception):
    """An event the core's state does not allow (a bug in the driver)."""


class CoreState:
    """The fields of one session's core, and the helpers every part uses."""

    def __init__(
        self,
        settings: LaunchSettings,
        *,
        dirs: tuple[str, ...] = (),
        cwd: str | None = None,
        resumable: bool = False,
        muted: bool = False,
    ) -> None:
        self._settings = settings
        #: The latest settings the client asked for (applied between turns).
        self._requested = settings
        #: The session's additional directories agy runs with, and the list
        #: the client last sent (applied between turns, like the settings).
        self._dirs = self._requested_dirs = dirs
        #: The working directory agy runs in, and the one last asked for (the same way).
        self._cwd = self._requested_cwd = cwd
        #: A reload was asked for: agy is respawned between turns though nothing changed.
        self._reload = False
        #: The permission gate as the core knows it.
        self._gate = GateState.NONE
        #: Safe mode after "allow and retry": agy runs behind the gate.
        self._session_allows = False
        self._gate_notice_sent = False
        self._resumable = resumable
        self._prompts = PromptQueue()
        self._current: Turn | None = None
        self._children = ChildLedger()
        self._closing = False
        self._closed = False
        #: A failure agy reported outside a turn, for the next prompt.
        self._startup_failure: SessionError | None = None
        #: The gate check found agy signed out: the waiting turn's error.
        self._auth_failure: SessionError | None = None
        self._muted = muted
        self._coalesced: set[str] = set()
        #: The last prompt answered ``end_turn``: a bug in its journalling (or
        #: in handing over its updates) amends that answer.
        self._last_end_turn: float | None = None
        self._idle_token = 0
        self._out: list[Action] = []

    def turn_on(self, incarnation: int) -> Turn | None:
        """The unanswered turn running on child ``incarnation``, if any: only
        its output may be mapped and sent."""
        turn = self._current
        if turn is None or turn.incarnation != incarnation or turn.state in _NOT_ON_A_CHILD:
            return None
        return turn

    def running_seq(self, *, mapped: bool = False) -> float | None:
        """The prompt whose turn runs (``mapped``: only while its agy output
        is mapped: RUNNING, AWAITING_DETAILS or RETIRING)."""
        turn = self._current
        if turn is None or (mapped and turn.state in _NOT_ON_A_CHILD):
            return None
        return turn.seq

    def _stale(self, event: Event) -> None:
        """The state no longer expects it (an attempt that ended, a turn
        answered): nothing to do."""

    def _running(self) -> Turn:
        turn = self._current
        if turn is None:
            raise CoreError("a turn's event was dispatched with no turn running")
        return turn

    def _is_cancelled(self, seq: float) -> bool:
        return self._closing or self._prompts.is_cancelled(seq)

    def _emit(self, action: Action) -> None:
        self._out.append(action)

    # Provided by turns.py (the queue), for the parts it is built on.

    def _finish(
        self, turn: Turn, stop: Stop | None = None, error: SessionError | None = None
    ) -> None:
        raise NotImplementedError

    def _cancel_matching(self) -> None:
        raise NotImplementedError

    def _maybe_closed(self) -> None:
        raise NotImplementedError


class PromptQueue:
    """Prompts from arrival until their answer, in the order they run:
    steers first, each kind in wire order."""

    def __init__(self) -> None:
        self._queue: list[float] = []
        self._steered: set[float] = set()
        self._ready: set[float] = set()
        self._cancelled_before: float = -1
        self._cancelled: set[float] = set()
        #: Answered prompts whose request task may still tell `PromptArrived`
        #: (ignored then); forgotten at its `PromptDropped`, which comes last.
        self._answered: set[float] = set()
        #: The running turn's prompt, if its request task is done already.
        self._gone: set[float] = set()

    def __contains__(self, seq: float) -> bool:
        return seq in self._queue

    def __bool__(self) -> bool:
        return bool(self._queue)

    def waiting(self, running: float | None) -> tuple[float, ...]:
        return tuple(seq for seq in self._queue if seq != running)

    def head(self) -> float | None:
        return self._queue[0] if self._queue else None

    def known(self, seq: float) -> bool:
        """Queued already, or answered with its request task still running."""
        return seq in self._queue or seq in self._answered

    def was_answered(self, seq: float) -> bool:
        return seq in self._answered

    def add(self, seq: float, *, steer: bool) -> None:
        if steer:
            self._steered.add(seq)
        self._queue.append(seq)
        # The running turn, wherever it sorts, is the core's current turn:
        # only an idle core takes the head.
        self._queue.sort(key=lambda s: (s not in self._steered, s))

    def make_ready(self, seq: float) -> None:
        if seq in self._queue:
            self._ready.add(seq)

    def is_ready(self, seq: float) -> bool:
        return seq in self._ready

    def task_done(self, seq: float, *, running: bool) -> None:
        """Its request task ended (answered, or went away)."""
        self._answered.discard(seq)
        if running:
            self._gone.add(seq)
        elif seq in self._queue:
            self._remove(seq)

    def cancel_before(self, seq: float) -> None:
        self._cancelled_before = max(self._cancelled_before, seq)

    def cancel(self, seq: float) -> None:
        self._cancelled.add(seq)

    def is_cancelled(self, seq: float) -> bool:
        return seq < self._cancelled_before or seq in self._cancelled

    def cancelled(self) -> list[float]:
        return [seq for seq in self._queue if self.is_cancelled(seq)]

    def answered(self, seq: float) -> None:
        """It is answered: out of the queue; remembered until its task ends."""
        if seq in self._queue:
            self._remove(seq)
        if seq in self._gone:
            self._gone.discard(seq)
        else:
            self._answered.add(seq)

    def _remove(self, seq: float) -> None:
        self._queue.remove(seq)
        self._ready.discard(seq)
        self._steered.discard(seq)


class ChildLedger:
    """agy children: the current one (at most one alive or starting) and the
    ones being retired, each with whether to replace it warm once it is gone."""

    def __init__(self) -> None:
        self.current: Child | None = None
        self._retiring: dict[int, bool] = {}
        self._incarnations = 0

    def is_current(self, incarnation: int) -> bool:
        return self.current is not None and self.current.incarnation == incarnation

    @property
    def retiring(self) -> bool:
        """A child is being stopped (never start another meanwhile)."""
        return bool(self._retiring)

    def is_retiring(self, incarnation: int) -> bool:
        return incarnation in self._retiring

    def new(self, *, gated: bool, first: bool) -> Child:
        self._incarnations += 1
        self.current = Child(self._incarnations, gated=gated, first=first)
        return self.current

    def retire(self, child: Child, *, warm: bool) -> None:
        if self.current is child:
            self.current = None
        self._retiring[child.incarnation] = warm

    def gone(self, incarnation: int) -> bool:
        """It exited (or never started); whether to replace it warm."""
        if self.is_current(incarnation):
            self.current = None
        return self._retiring.pop(incarnation, False)
