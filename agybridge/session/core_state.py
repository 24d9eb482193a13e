"""The turn core's state: one object that ``turns.py`` (the queue and the
table), ``outcomes.py`` (how a turn ends) and ``supervision.py`` (agy children
and the permission gate) extend, each a part of one state machine — read
``turns.py``'s docstring for the whole. Nothing outside the core reads or
writes these fields: the driver asks :class:`~.turns.TurnCore`'s queries.
"""

from __future__ import annotations

from .config import LaunchSettings
from .errors import SessionError
from .ledgers import ChildLedger, PromptQueue
from .turn_events import Action, Event, GateState, Stop, Turn, TurnState

#: A turn in these states has no child of its own.
_NOT_ON_A_CHILD = frozenset({TurnState.STARTING, TurnState.ASKING})


class CoreError(Exception):
    """An event the core's state does not allow (a bug in the driver)."""


class CoreState:
    """The fields of one session's core, and the helpers every part uses."""

    def __init__(
        self, settings: LaunchSettings, *, resumable: bool = False, muted: bool = False
    ) -> None:
        self._settings = settings
        #: The latest settings the client asked for (applied between turns).
        self._requested = settings
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

    # Provided by the other parts (turns.py, outcomes.py).

    def _finish(
        self, turn: Turn, stop: Stop | None = None, error: SessionError | None = None
    ) -> None:
        raise NotImplementedError

    def _cancel_matching(self) -> None:
        raise NotImplementedError

    def _maybe_closed(self) -> None:
        raise NotImplementedError

    def _retire_turn(
        self,
        turn: Turn,
        stop: Stop | None,
        error: SessionError | None,
        reason: str,
        *,
        warm: bool = True,
    ) -> None:
        raise NotImplementedError
