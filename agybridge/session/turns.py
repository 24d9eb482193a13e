"""The rules of one session's life, sans-I/O: facts in, actions out.

Shaped like h11's ``_state.py``: everything that affects a session's prompts,
turns, agy children and gate is decided by :class:`TurnCore`, and nowhere
else. No trio, no I/O, no clock: the driver (``session.py``) feeds it *facts*
(what the client sent, what agy printed, that a deadline passed, that an
action failed) and performs the actions it returns, in order; it never reads
the core's state to decide, only asks its queries. One state machine, in
parts small enough to read: this module (the queue, the table, the entry
points), ``outcomes.py`` (how a turn ends), ``supervision.py`` (agy children
and the gate), ``core_state.py`` (the fields, the prompt queue and the child
ledger). Because one object decides, the promises can be checked
by enumerating interleavings (tests/unit/session/test_turn_core.py):

* every prompt that arrived is answered exactly once (:class:`AnswerPrompt`;
  :class:`AmendAnswer` only turns an ``end_turn`` answer not yet given into an
  error);
* nothing of a turn is sent after its answer (the driver maps agy output only
  for :meth:`TurnCore.turn_on`, which is None once the turn is answered);
* ``cancelled`` only after a cancel, a ``$/cancel_request`` or close;
* at most one agy child is alive or starting: a new one is spawned only once
  every retired one has exited;
* prompts run one at a time in wire order, except that a steer
  (``_agybridge/session/steer``) goes ahead of the prompts waiting when it
  arrives (steers among themselves in wire order): agy reads a stdin line
  written during a turn only after that turn's ``result`` (contract.md §2.3),
  so a steer becomes the very next turn;
* a configuration change requested during a turn is applied exactly once,
  when that turn ends; so is a new directory list (``session/load`` or
  ``session/resume`` of a live session): agy is respawned warm with it, at
  once when no turn runs;
* "allow and retry" is offered at most once per permission and turn: a
  denial of a permission already allowed and retried is final (the answer
  says why), so a client that always allows cannot make it loop.

The running turn's states (``None``: no turn runs)::

  STARTING ─(gate ok, child live)─▶ RUNNING ─(result)─▶ done
  RUNNING ─(error result, details pending)─▶ AWAITING_DETAILS ─(details | exit | deadline)─▶ done
  RUNNING ─(safe-mode denials not yet retried)─▶ ASKING ─(allowed)─▶ STARTING (next attempt)
  RUNNING ─(safe-mode denials, each allowed and retried once already)─▶ done, saying so
  STARTING | ASKING ─(cancel, failure)─▶ done (nothing is running)
  RUNNING | AWAITING_DETAILS ─(cancel, failure)─▶ RETIRING ─(its child exited)─▶ done
  RUNNING ─(child exited unheard, first attempt)─▶ STARTING (sent again)
  RUNNING ─(child exited otherwise)─▶ done, with the exit as the error

"done" means: pending settings applied, the turn journalled (if it reached
agy), then the answer — always in that order, always the last actions of a
turn. Events that depend on the state are looked up in ``_TRANSITIONS``; the
rest are handled the same in every state. An event a state does not expect
any more (a result of a child already retired, a deadline of an attempt that
ended) is *stale* and ignored; one no table allows is impossible and raises
:class:`CoreError`. The table, row by row (tests/unit/session/test_turn_table.py
checks it against ``_TRANSITIONS``)::

  ChildResult     RUNNING: turn_result  otherwise: result_outside_turn
  AgyErrorLine    AWAITING_DETAILS: details_arrived  otherwise: stale
  AllowAnswered   ASKING: allow_answered  otherwise: stale
  DeadlinePassed  RUNNING: deadline_running  AWAITING_DETAILS: deadline_details  otherwise: stale
  ChildExited     RUNNING AWAITING_DETAILS RETIRING: exit_during_turn  otherwise: exit_between_turns

Children: SpawnChild → ChildSpawned → (RetireChild →) ChildExited. A child
retired by the bridge is replaced at once (warm), unless it was retired for a
failure; one that exited on its own is replaced by the next prompt. The
session's first child is ``SpawnChild.first``: if it cannot be started the
core says :class:`StartFailed` and the session ends (``session/new`` fails).

After a prompt is answered ``cancelled`` the session is *muted* until the
client's next request for it: announcements made meanwhile are coalesced and
sent when that request arrives (ACP: nothing more for a cancelled turn).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from .config import LaunchSettings
from .core_state import CoreError, Turn
from .errors import SessionError
from .outcomes import Outcomes
from .turn_events import (
    Action,
    AgyErrorLine,
    AllowAnswered,
    AnswerPrompt,
    ApplyDirectories,
    ApplySettings,
    Cancel,
    CancelPrompt,
    ChildExited,
    ChildResult,
    ClientRequest,
    Close,
    Closed,
    CoreStatus,
    DeadlinePassed,
    DirectoriesRequested,
    Event,
    PromptArrived,
    PromptDropped,
    PromptReady,
    RecordTurn,
    RefusePermissions,
    SendAnnouncements,
    SettingsRequested,
    StartTurn,
    Stop,
    TurnState,
)


class TurnCore(Outcomes):
    """One session's rules; see the module docstring."""

    # --- queries -----------------------------------------------------------

    def was_answered(self, seq: float) -> bool:
        """The prompt was answered and its request task is not done yet."""
        return self._prompts.was_answered(seq)

    def status(self) -> CoreStatus:
        """What the session is doing, for status views."""
        turn = self._current
        return CoreStatus(
            gate=self._gate,
            turn_state=turn.state if turn is not None else None,
            attempt=turn.attempt if turn is not None else 0,
            queued=self._prompts.waiting(turn.seq if turn is not None else None),
        )

    @property
    def busy(self) -> bool:
        return self._current is not None

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def muted(self) -> bool:
        return self._muted

    @property
    def settings(self) -> LaunchSettings:
        """The settings agy runs with."""
        return self._settings

    @property
    def requested(self) -> LaunchSettings:
        """The settings the client last asked for (applied between turns)."""
        return self._requested

    @property
    def dirs(self) -> tuple[str, ...]:
        """The additional directories agy runs with."""
        return self._dirs

    @property
    def requested_dirs(self) -> tuple[str, ...]:
        """The additional directories the client last sent (applied between turns)."""
        return self._requested_dirs

    # --- the entry points ----------------------------------------------------

    def handle(self, event: Event) -> list[Action]:
        """Apply one fact; the actions to perform, in order.

        Raises:
            CoreError: the event is impossible in the core's state.
        """
        self._out = []
        state = self._current.state if self._current is not None else None
        handler = _TRANSITIONS.get((state, type(event)))
        if handler is None:
            where = state.value if state is not None else "idle"
            raise CoreError(f"can't handle event {type(event).__name__} when the turn is {where}")
        handler(self, event)
        self._advance()
        out, self._out = self._out, []
        return out

    def start(self) -> list[Action]:
        """The session starts: verify the gate if needed, spawn agy warm."""
        self._out = []
        self._maybe_verify_gate()
        self._spawn(first=True)
        out, self._out = self._out, []
        return out

    def announce(self, kind: str) -> list[Action]:
        """Something the client should hear outside a turn (``catalog``,
        ``commands``): now, or when the client speaks again after a cancel."""
        if self._closing:
            return []
        if self._muted:
            self._coalesced.add(kind)
            return []
        return [SendAnnouncements(frozenset({kind}), self._requested)]

    # --- the client ----------------------------------------------------------

    def _on_PromptArrived(self, event: PromptArrived) -> None:
        if self._prompts.known(event.seq):
            return  # stale: told twice (wire order, then by its task)
        self._client_spoke()
        self._prompts.add(event.seq, steer=event.steer)
        if self._closing:
            self._answer(event.seq, Stop.CANCELLED)

    def _on_PromptReady(self, event: PromptReady) -> None:
        self._prompts.make_ready(event.seq)

    def _on_PromptDropped(self, event: PromptDropped) -> None:
        running = self._current is not None and self._current.seq == event.seq
        self._prompts.task_done(event.seq, running=running)

    def _on_Cancel(self, event: Cancel) -> None:
        self._prompts.cancel_before(event.seq)
        self._cancel_matching()

    def _on_CancelPrompt(self, event: CancelPrompt) -> None:
        self._prompts.cancel(event.seq)
        self._cancel_matching()

    def _on_Close(self, event: Close) -> None:
        self._closing = True
        self._cancel_matching()
        if self._children.current is not None:
            self._retire(self._children.current, "session closed", warm=False)
        self._maybe_closed()

    def _on_ClientRequest(self, event: ClientRequest) -> None:
        self._client_spoke()

    def _client_spoke(self) -> None:
        """The silence after a cancelled answer ends."""
        if self._muted:
            self._muted = False
            if self._coalesced:
                self._emit(SendAnnouncements(frozenset(self._coalesced), self._requested))
                self._coalesced.clear()

    def _on_SettingsRequested(self, event: SettingsRequested) -> None:
        if event.settings is not None:
            self._requested = event.settings
        self._reload = self._reload or event.reload
        if self._current is None:
            self._apply_settings(announce=event.announce)

    def _on_DirectoriesRequested(self, event: DirectoriesRequested) -> None:
        if event.dirs is not None:
            self._requested_dirs = event.dirs
        if event.cwd is not None:
            self._requested_cwd = event.cwd
        if self._current is None:
            self._apply_settings(announce=False)

    # --- children -------------------------------------------------------------------

    # --- the queue -------------------------------------------------------------

    def _advance(self) -> None:
        """Start the next turn, or move the current one forward, as far as
        the state allows."""
        while True:
            turn = self._current
            if turn is None:
                if not self._start_next():
                    return
            elif turn.state is not TurnState.STARTING or not self._progress(turn):
                return

    def _start_next(self) -> bool:
        while (seq := self._prompts.head()) is not None and self._current is None:
            if self._is_cancelled(seq):
                self._answer(seq, Stop.CANCELLED)
                continue
            if not self._prompts.is_ready(seq):
                return False
            turn = self._current = Turn(seq)
            # A change requested while no turn ran applies from this turn.
            self._apply_settings(announce=False)
            at = len(self._out)
            self._emit(StartTurn(seq, 1))
            while self._current is turn and turn.state is TurnState.STARTING:
                if not self._progress(turn):
                    # Waiting for agy or the gate: the client hears of the
                    # turn now, not with agy's first output.
                    self._out[at] = StartTurn(seq, 1, waiting=True)
                    break
            return True
        return False

    def _cancel_matching(self) -> None:
        """Answer every cancelled queued prompt; stop the running turn."""
        turn = self._current
        running = turn.seq if turn is not None else None
        for seq in self._prompts.waiting(running) if self._closing else self._prompts.cancelled():
            if seq != running:
                self._answer(seq, Stop.CANCELLED)
        if turn is None or not self._is_cancelled(turn.seq):
            return
        if turn.state in (TurnState.STARTING, TurnState.ASKING):
            self._finish(turn, Stop.CANCELLED)  # nothing of it is running
        elif turn.state in (TurnState.RUNNING, TurnState.AWAITING_DETAILS):
            self._emit(RefusePermissions())
            self._retire_turn(turn, Stop.CANCELLED, None, "session/cancel")

    def _finish(
        self, turn: Turn, stop: Stop | None = None, error: SessionError | None = None
    ) -> None:
        self._current = None
        self._apply_settings(announce=True)
        if turn.reached_agy:
            self._emit(RecordTurn(turn.seq))
        if error is not None:
            self._answer(turn.seq, error=error)
        else:
            self._answer(turn.seq, stop or Stop.END_TURN)
        self._arm_idle()

    def _answer(
        self, seq: float, stop: Stop | None = None, error: SessionError | None = None
    ) -> None:
        self._prompts.answered(seq)
        amendable = error is None and stop is Stop.END_TURN
        if amendable:
            self._last_end_turn = seq
        self._emit(AnswerPrompt(seq, stop, error, amendable))
        if stop is Stop.CANCELLED:
            self._muted = True
        self._maybe_closed()

    def _apply_settings(self, *, announce: bool) -> None:
        """The settings and the directory list last requested, if they changed."""
        new, dirs = self._requested, self._requested_dirs
        changed = False
        if not (new is self._settings or new == self._settings):  # mostly the same object
            old, self._settings = self._settings, new
            self._emit(ApplySettings(old, new, announce))
            self._maybe_verify_gate()
            changed = True
        if self._reload:  # agy's own files (and the workspace skills) are read anew
            self._reload, changed = False, True
            for action in self.announce("commands"):
                self._emit(action)
        cwd = self._requested_cwd
        if dirs != self._dirs or cwd != self._cwd:
            moved = cwd if cwd != self._cwd else None
            old_dirs, self._dirs, self._cwd = self._dirs, dirs, cwd
            self._emit(ApplyDirectories(old_dirs, dirs, moved))
            changed = True
        if changed and self._children.current is not None:
            # Launch flags cannot change inside a process: respawn it warm,
            # resuming the conversation.
            self._retire(self._children.current, "configuration changed", warm=True)

    def _maybe_closed(self) -> None:
        idle = self._current is None and self._children.current is None
        if self._closing and not self._closed and idle and not self._children.retiring:
            self._closed = True
            self._emit(Closed())


_Handler = Callable[[TurnCore, Any], None]
#: The states a turn can be in (None: no turn runs).
STATES: tuple[TurnState | None, ...] = (None, *TurnState)


def _rows(
    event: type, by_state: dict[TurnState, _Handler], otherwise: _Handler
) -> dict[tuple[TurnState | None, type], _Handler]:
    """``event`` in every state: ``by_state``'s handler, else ``otherwise``."""
    return {
        (state, event): by_state[state] if state is not None and state in by_state else otherwise
        for state in STATES
    }


#: Events whose handling depends on the running turn's state (the docstring's
#: table); every other event is handled the same in every state.
STATE_DEPENDENT: dict[tuple[TurnState | None, type], _Handler] = {
    **_rows(ChildResult, {TurnState.RUNNING: TurnCore._turn_result}, TurnCore._result_outside_turn),
    **_rows(AgyErrorLine, {TurnState.AWAITING_DETAILS: TurnCore._details_arrived}, TurnCore._stale),
    **_rows(AllowAnswered, {TurnState.ASKING: TurnCore._allow_answered}, TurnCore._stale),
    **_rows(
        DeadlinePassed,
        {
            TurnState.RUNNING: TurnCore._deadline_running,
            TurnState.AWAITING_DETAILS: TurnCore._deadline_details,
        },
        TurnCore._stale,
    ),
    **_rows(
        ChildExited,
        dict.fromkeys(
            (TurnState.RUNNING, TurnState.AWAITING_DETAILS, TurnState.RETIRING),
            TurnCore._exit_during_turn,
        ),
        TurnCore._exit_between_turns,
    ),
}
#: ``(state, event type) -> handler`` for every event the core accepts.
_TRANSITIONS: dict[tuple[TurnState | None, type], _Handler] = {
    **{
        (state, kind): getattr(TurnCore, "_on_" + kind.__name__)
        for kind in get_args(Event)
        if (None, kind) not in STATE_DEPENDENT
        for state in STATES
    },
    **STATE_DEPENDENT,
}
