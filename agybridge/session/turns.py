"""The rules of one session's life, sans-I/O: events in, actions out.

Shaped like h11's ``_state.py``: :class:`TurnCore` holds every decision about
a session's prompts, turns and agy children, and nothing else. No trio, no
I/O, no clock: the driver (``session.py``) feeds it :data:`Event`\\ s (from
the client, the child, timers) and performs the :data:`Action`\\ s it
returns, in order. Because one object decides, the promises can be checked
by enumerating interleavings (tests/unit/session/test_turn_core.py):

* every prompt that arrived is answered exactly once (:class:`AnswerPrompt`);
* nothing of a turn is sent after its answer (the driver maps agy output only
  for :meth:`TurnCore.turn_on`, which is None once the turn is answered);
* ``cancelled`` only after a cancel, a ``$/cancel_request`` or close;
* at most one agy child is alive or starting: a new one is spawned only once
  every retired one has exited;
* prompts run one at a time in wire order, except that a steer
  (``_agybridge/session/steer``) goes ahead of the prompts waiting when it
  arrives (steers among themselves in wire order); a configuration change
  requested during a turn is applied exactly once, when that turn ends.

Steer: agy reads a stdin line written during a turn only after that turn's
``result`` (contract.md §2.3), so nothing can reach the running turn itself.
A steer therefore becomes the very next turn: agy sees it right after the
running turn's result, before prompts that were already waiting. Idle, it is
a prompt.

Turn states (``current.state``)::

  QUEUED ─(head, ready)──▶ STARTING ─(gate ok, child live)─▶ RUNNING
  RUNNING ─(result)──────▶ done            RUNNING ─(error result)─▶ AWAITING_DETAILS
  AWAITING_DETAILS ─(details | exit | deadline)─▶ done
  RUNNING ─(safe-mode denials)─▶ ASKING ─(allowed)─▶ STARTING (attempt 2)
  STARTING | ASKING ─(cancel)─▶ answered cancelled (nothing is running)
  RUNNING | AWAITING_DETAILS ─(cancel, failure, internal error)─▶ RETIRING
  RETIRING ─(its child exited)─▶ answered (cancelled, or the failure)
  RUNNING ─(child exited unheard, first attempt)─▶ STARTING (sent again)
  RUNNING ─(child exited otherwise)─▶ answered with the exit as the error
  STARTING ─(spawn failed | agy failed before the turn)─▶ answered with that error

"done" means: pending settings applied, the turn journalled (if it reached
agy), then the answer — always in that order, always the last actions of a
turn. Failures are the start-up and stall deadlines and internal errors.

Children: SpawnChild → ChildSpawned → (RetireChild →) ChildExited. A child
retired by the bridge is replaced at once (warm), unless it was retired for a
failure; one that exited on its own is replaced by the next prompt.

After a prompt is answered ``cancelled`` the session is *muted* until the
client's next request for it (one that reaches the core after the answer):
announcements (catalog, commands) made meanwhile are coalesced and sent when
that request arrives (ACP: nothing more for a cancelled turn).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from .config import GATED_MODES, LaunchSettings
from .errors import SessionError
from .turn_events import (
    AcceptPermissions,
    Action,
    AllowAnswered,
    AnswerPrompt,
    ApplySettings,
    ArmDeadline,
    ArmIdle,
    AskAllowRetry,
    Cancel,
    CancelPrompt,
    Child,
    ChildExited,
    ChildFailedBeforeTurn,
    ChildOutput,
    ChildSpawned,
    ChildSpawnFailed,
    ClientRequest,
    Close,
    Closed,
    Deadline,
    DeadlinePassed,
    ErrorDetails,
    Event,
    GateFallbackNotice,
    GateState,
    GateVerified,
    IdlePassed,
    InternalError,
    PromptArrived,
    PromptDropped,
    PromptReady,
    RecordTurn,
    RefusePermissions,
    RetireChild,
    SendAnnouncements,
    SendUserTurn,
    SettingsRequested,
    SpawnChild,
    StallNotice,
    StartTurn,
    Stop,
    Turn,
    TurnResult,
    TurnState,
    VerifyGate,
)


class TurnCore:
    """One session's rules; see the module docstring."""

    def __init__(
        self,
        settings: LaunchSettings,
        *,
        gate: GateState = GateState.NONE,
        resumable: bool = False,
        muted: bool = False,
    ) -> None:
        self.settings = settings
        #: The latest settings the client asked for (applied between turns).
        self.requested = settings
        self.gate = gate
        #: Safe mode after "allow and retry": agy runs behind the gate.
        self.session_allows = False
        self.gate_notice_sent = False
        self.resumable = resumable
        self.queue: list[float] = []
        #: Queued prompts that are steers (``PromptArrived.steer``).
        self.steered: set[float] = set()
        self.ready: set[float] = set()
        self.current: Turn | None = None
        self.cancelled_before: float = -1
        self.cancelled_seqs: set[float] = set()
        self.closing = False
        self.closed = False
        self.child: Child | None = None
        self.retiring: dict[int, bool] = {}  # incarnation -> respawn warm once gone
        self.incarnations = 0
        #: A failure agy reported outside a turn, for the next prompt.
        self.startup_failure: SessionError | None = None
        #: After a cancelled answer: announcements wait for the client's next
        #: request (a new instance of the session starts muted if the last one
        #: ended so).
        self.muted = muted
        #: The gate check found agy signed out: the waiting turn's error.
        self.auth_failure: SessionError | None = None
        self.coalesced: set[str] = set()
        #: Answered prompts whose request task may still tell `PromptArrived`
        #: (to be ignored); forgotten at its `PromptDropped`, which comes last.
        self.answered: set[float] = set()
        #: The running turn's prompt, if its request task is done already: its
        #: answer need not be remembered.
        self.gone: set[float] = set()
        #: The latest idle timeout armed (an older one firing is stale).
        self.idle_token = 0
        self._out: list[Action] = []

    # --- queries -----------------------------------------------------------

    def turn_on(self, incarnation: int) -> Turn | None:
        """The unanswered turn running on child ``incarnation``, if any: only
        its output may be mapped and sent."""
        turn = self.current
        if turn is None or turn.incarnation != incarnation:
            return None
        if turn.state not in (TurnState.RUNNING, TurnState.AWAITING_DETAILS, TurnState.RETIRING):
            return None
        return turn

    def output_is_news(self, incarnation: int, heard: bool) -> bool:
        """Whether ``ChildOutput(incarnation, heard)`` would change anything
        (most of agy's lines are deltas of a turn already heard: the loop
        skips feeding those)."""
        child = self.child
        if child is not None and child.incarnation == incarnation and not child.output_seen:
            return True
        if not heard:
            return False
        turn = self.turn_on(incarnation)
        return turn is not None and not turn.heard

    @property
    def busy(self) -> bool:
        return self.current is not None

    def gate_in_use(self) -> bool:
        """agy runs behind the gate: a gated mode, or safe mode after the user
        allowed something for the session; never a gate known to be broken."""
        if self.gate in (GateState.NONE, GateState.FAILED):
            return False
        mode = self.settings.mode
        return mode in GATED_MODES or (
            mode == "safe" and self.session_allows and self.gate is GateState.VERIFIED
        )

    # --- the one entry point -------------------------------------------------

    def handle(self, event: Event) -> list[Action]:
        """Apply one event; the actions to perform, in order."""
        self._out = []
        _HANDLERS[type(event)](self, event)
        self._advance()
        out, self._out = self._out, []
        return out

    def start(self) -> list[Action]:
        """The session starts: verify the gate if needed, spawn agy warm."""
        self._out = []
        self._maybe_verify_gate()
        self._spawn_if_idle(force=True)
        out, self._out = self._out, []
        return out

    # --- client events -------------------------------------------------------

    def _on_PromptArrived(self, event: PromptArrived) -> None:
        if event.seq in self.answered or event.seq in self.queue:
            return  # told twice (wire order, then by its task)
        self._request(event.seq)
        if event.steer:
            self.steered.add(event.seq)
        self.queue.append(event.seq)
        # Steers first, each kind in wire order (the running turn, wherever
        # it sorts, is ``current``: only an idle core takes the head).
        self.queue.sort(key=lambda seq: (seq not in self.steered, seq))
        if self.closing:
            self._answer(event.seq, Stop.CANCELLED)

    def _on_PromptReady(self, event: PromptReady) -> None:
        if event.seq in self.queue:
            self.ready.add(event.seq)

    def _on_PromptDropped(self, event: PromptDropped) -> None:
        # Its request task is done: both its PromptArrived came before this.
        self.answered.discard(event.seq)
        if self.current is not None and self.current.seq == event.seq:
            self.gone.add(event.seq)
        elif event.seq in self.queue:
            self.queue.remove(event.seq)
            self.ready.discard(event.seq)
            self.steered.discard(event.seq)

    def _on_Cancel(self, event: Cancel) -> None:
        self.cancelled_before = max(self.cancelled_before, event.seq)
        self._cancel_matching()

    def _on_CancelPrompt(self, event: CancelPrompt) -> None:
        self.cancelled_seqs.add(event.seq)
        self._cancel_matching()

    def _on_Close(self, event: Close) -> None:
        self.closing = True
        self._cancel_matching()
        child = self.child
        if child is not None:
            self._retire(child, "session closed", warm=False)
        self._maybe_closed()

    def _on_ClientRequest(self, event: ClientRequest) -> None:
        self._request(event.seq)

    def _request(self, seq: float) -> None:
        """The client spoke: the silence after a cancelled answer ends."""
        if self.muted:
            self.muted = False
            if self.coalesced:
                self._emit(SendAnnouncements(frozenset(self.coalesced)))
                self.coalesced.clear()

    def announce(self, kind: str) -> list[Action]:
        """Something the client should hear outside a turn (``catalog``,
        ``commands``): now, or when the client speaks again after a cancel."""
        if self.closing:
            return []
        if self.muted:
            self.coalesced.add(kind)
            return []
        return [SendAnnouncements(frozenset({kind}))]

    def _on_SettingsRequested(self, event: SettingsRequested) -> None:
        self.requested = event.settings
        if self.current is None:
            self._apply_settings(announce=event.announce)

    # --- child events ----------------------------------------------------------

    def _on_ChildSpawned(self, event: ChildSpawned) -> None:
        if event.incarnation in self.retiring:
            # Retired while it was being started: stop it now that it exists.
            self._emit(RetireChild(event.incarnation, "retired while starting"))
            return
        child = self.child
        if child is None or child.incarnation != event.incarnation:
            return
        child.live = True
        if self.closing:
            self._retire(child, "session closed", warm=False)
        elif self.current is None:
            self._arm_idle()

    def _on_ChildSpawnFailed(self, event: ChildSpawnFailed) -> None:
        if self.child is not None and self.child.incarnation == event.incarnation:
            self.child = None
        self.retiring.pop(event.incarnation, None)
        turn = self.current
        if turn is not None and turn.state is TurnState.STARTING:
            self._finish(turn, error=event.error)
        else:
            self.startup_failure = self.startup_failure or event.error
        self._maybe_closed()

    def _on_ChildOutput(self, event: ChildOutput) -> None:
        child = self.child
        if child is not None and child.incarnation == event.incarnation:
            child.output_seen = True
        turn = self.turn_on(event.incarnation)
        if turn is not None and event.heard:
            turn.heard = True

    def _on_TurnResult(self, event: TurnResult) -> None:
        turn = self.turn_on(event.incarnation)
        if turn is None or turn.state is not TurnState.RUNNING:
            return
        turn.heard = True
        if event.needs_details:
            turn.state = TurnState.AWAITING_DETAILS
            self._emit(ArmDeadline(Deadline.DETAILS, turn.seq, event.incarnation))
        elif event.error is not None:
            self._finish(turn, error=event.error)
        elif event.offer_retry and not self._is_cancelled(turn.seq):
            turn.state = TurnState.ASKING
            self._emit(AskAllowRetry(turn.seq))
        else:
            self._finish(turn, Stop.END_TURN)

    def _on_ErrorDetails(self, event: ErrorDetails) -> None:
        turn = self.turn_on(event.incarnation)
        if turn is not None and turn.state is TurnState.AWAITING_DETAILS:
            self._finish(turn, Stop.END_TURN, event.error)

    def _on_ChildFailedBeforeTurn(self, event: ChildFailedBeforeTurn) -> None:
        child = self.child
        if child is not None and child.incarnation == event.incarnation:
            self.startup_failure = event.error

    def _on_ChildExited(self, event: ChildExited) -> None:
        inc = event.incarnation
        was_current = self.child is not None and self.child.incarnation == inc
        retired = inc in self.retiring
        warm = self.retiring.pop(inc, False)
        if was_current:
            self.child = None
        turn = self.current
        if turn is not None and turn.incarnation == inc:
            self._turn_child_exited(turn, event, retired)
        elif was_current and not retired and not event.clean and self.startup_failure is None:
            self.startup_failure = event.error
        if warm and not self.closing:
            self._spawn_if_idle()
        self._maybe_closed()

    def _turn_child_exited(self, turn: Turn, event: ChildExited, retired: bool) -> None:
        if turn.state is TurnState.RETIRING:
            self._finish(turn, turn.pending_stop, turn.pending_error)
        elif turn.state is TurnState.AWAITING_DETAILS:
            # Its result came; the exit is agy's reaction to it.
            self._finish(turn, Stop.END_TURN, event.result_error)
        elif turn.state is TurnState.RUNNING:
            if not turn.heard and turn.attempt == 1 and not retired:
                # agy was already exiting (e.g. exit 3 after a quota error,
                # contract.md §5) and never read this prompt: send it again
                # to a fresh agy that resumes the conversation.
                turn.attempt = 2
                turn.state = TurnState.STARTING
                turn.incarnation = None
            else:
                self._finish(turn, error=event.error)

    def _on_GateVerified(self, event: GateVerified) -> None:
        if self.gate is GateState.NONE:
            return
        if event.auth_error is not None:
            # Not the gate's fault: say so first, and check again next turn
            # (the user may sign in meanwhile).
            self.auth_failure = event.auth_error
            self.gate = GateState.UNVERIFIED
            return
        self.gate = GateState.VERIFIED if event.ok else GateState.FAILED

    def _on_AllowAnswered(self, event: AllowAnswered) -> None:
        turn = self.current
        if turn is None or turn.seq != event.seq or turn.state is not TurnState.ASKING:
            return
        if not event.allowed or self._is_cancelled(turn.seq):
            self._finish(turn, Stop.END_TURN)
            return
        # The same prompt again, now behind the gate with the allowance.
        self.session_allows = True
        self._emit(RecordTurn(turn.seq))
        turn.reached_agy = False
        turn.attempt += 1
        turn.state = TurnState.STARTING
        turn.incarnation = None
        turn.heard = False
        self._emit(StartTurn(turn.seq, turn.attempt))
        if self.child is not None:
            self._retire(self.child, "allowing for the session", warm=True)

    def _on_InternalError(self, event: InternalError) -> None:
        turn = self.current
        if turn is None:
            return
        self._fail(turn, event.error, "internal error")

    def _on_DeadlinePassed(self, event: DeadlinePassed) -> None:
        turn = self.current
        if turn is None or turn.seq != event.seq or turn.incarnation != event.incarnation:
            return  # stale: that turn or attempt is over
        if event.kind is Deadline.DETAILS:
            if turn.state is TurnState.AWAITING_DETAILS:
                self._finish(turn, Stop.END_TURN, event.error)
            return
        if turn.state is not TurnState.RUNNING:
            return
        if event.kind is Deadline.STARTUP:
            child = self.child
            if child is not None and child.incarnation == event.incarnation and child.output_seen:
                return
            assert event.error is not None
            self._fail(turn, event.error, "agy did not start")
        elif event.kind is Deadline.STALL_NOTICE:
            if not turn.stall_noticed:
                turn.stall_noticed = True
                self._emit(StallNotice(turn.seq))
        else:
            assert event.error is not None
            self._fail(turn, event.error, "agy stalled")

    # --- the queue -------------------------------------------------------------

    def _advance(self) -> None:
        """Start the next turn, or move the current one forward, as far as
        the state allows."""
        while True:
            turn = self.current
            if turn is None:
                if not self.queue or not self._start_next():
                    return
                continue
            if turn.state is not TurnState.STARTING or not self._progress(turn):
                return

    def _start_next(self) -> bool:
        while self.queue and self.current is None:
            seq = self.queue[0]
            if self._is_cancelled(seq):
                self._answer(seq, Stop.CANCELLED)
                continue
            if seq not in self.ready:
                return False
            self.current = Turn(seq)
            # A change requested while no turn ran applies from this turn.
            self._apply_settings(announce=False)
            self._emit(StartTurn(seq, 1))
            return True
        return False

    def _progress(self, turn: Turn) -> bool:
        """A STARTING turn: wait for the gate, then a live child, then send.
        True if the turn's state changed (keep advancing)."""
        if self._is_cancelled(turn.seq):
            self._finish(turn, Stop.CANCELLED)
            return True
        if self.startup_failure is not None:
            failure, self.startup_failure = self.startup_failure, None
            self._finish(turn, error=failure)
            return True
        if self.auth_failure is not None:
            failure, self.auth_failure = self.auth_failure, None
            self._finish(turn, error=failure)
            return True
        if self.settings.mode in GATED_MODES or self.gate_in_use():
            if self.gate in (GateState.UNVERIFIED, GateState.VERIFYING):
                self._maybe_verify_gate()
                return False
            if self.gate is GateState.FAILED and not self.gate_notice_sent:
                self.gate_notice_sent = True
                self._emit(GateFallbackNotice(turn.seq))
        child = self.child
        if child is not None and child.gated and not self.gate_in_use():
            # Spawned warm behind a gate that is not usable: never run a turn on it.
            self._retire(child, "permission gate not verified", warm=False)
            child = None
        if self.retiring:
            return False  # never two agy processes on one conversation
        if child is None:
            self._spawn()
            return False
        if not child.live:
            return False
        self._emit(AcceptPermissions())
        turn.state = TurnState.RUNNING
        turn.incarnation = child.incarnation
        turn.heard = False
        turn.reached_agy = True
        self.resumable = True  # agy records the turn even if it is cancelled later
        self._emit(SendUserTurn(turn.seq, child.incarnation))
        if not child.output_seen:
            self._emit(ArmDeadline(Deadline.STARTUP, turn.seq, child.incarnation))
        self._emit(ArmDeadline(Deadline.STALL_NOTICE, turn.seq, child.incarnation))
        return True

    def _is_cancelled(self, seq: float) -> bool:
        return self.closing or seq < self.cancelled_before or seq in self.cancelled_seqs

    def _cancel_matching(self) -> None:
        """Answer every cancelled queued prompt; stop the running turn."""
        for seq in [s for s in self.queue if self._is_cancelled(s)]:
            if self.current is None or self.current.seq != seq:
                self._answer(seq, Stop.CANCELLED)
        turn = self.current
        if turn is None or not self._is_cancelled(turn.seq):
            return
        if turn.state in (TurnState.STARTING, TurnState.ASKING):
            self._finish(turn, Stop.CANCELLED)  # nothing of it is running
        elif turn.state in (TurnState.RUNNING, TurnState.AWAITING_DETAILS):
            self._emit(RefusePermissions())
            self._retire_turn(turn, Stop.CANCELLED, None, "session/cancel")

    def _fail(self, turn: Turn, error: SessionError, reason: str) -> None:
        if turn.state in (TurnState.RUNNING, TurnState.AWAITING_DETAILS):
            self._emit(RefusePermissions())
            self._retire_turn(turn, None, error, reason, warm=False)
        elif turn.state is not TurnState.RETIRING:
            self._finish(turn, error=error)

    def _retire_turn(
        self,
        turn: Turn,
        stop: Stop | None,
        error: SessionError | None,
        reason: str,
        *,
        warm: bool = True,
    ) -> None:
        """Stop the turn's child; the turn is answered once it is gone, so
        the answer means nothing of the turn is still running."""
        turn.pending_stop, turn.pending_error = stop, error
        turn.state = TurnState.RETIRING
        child = self.child
        if child is not None and child.incarnation == turn.incarnation:
            self._retire(child, reason, warm=warm)
        elif turn.incarnation not in self.retiring:
            self._finish(turn, stop, error)  # already gone

    def _finish(
        self, turn: Turn, stop: Stop | None = None, error: SessionError | None = None
    ) -> None:
        self.current = None
        self.queue.remove(turn.seq)
        self.ready.discard(turn.seq)
        self._apply_settings(announce=True)
        if turn.reached_agy:
            self._emit(RecordTurn(turn.seq))
        if error is not None:
            self._answer(turn.seq, error=error)
        else:
            self._answer(turn.seq, stop or Stop.END_TURN)
        self._arm_idle()

    def _arm_idle(self) -> None:
        self.idle_token += 1
        self._emit(ArmIdle(self.idle_token))

    def _on_IdlePassed(self, event: IdlePassed) -> None:
        """Idle that long: stop agy (the session stays; the next prompt starts
        one that resumes the conversation)."""
        child = self.child
        idle = self.current is None and not self.queue and not self.closing
        if event.token == self.idle_token and idle and child is not None and child.live:
            self._retire(child, "idle timeout", warm=False)

    def _answer(
        self, seq: float, stop: Stop | None = None, error: SessionError | None = None
    ) -> None:
        if seq in self.queue:
            self.queue.remove(seq)
        self.ready.discard(seq)
        self.steered.discard(seq)
        if seq in self.gone:
            self.gone.discard(seq)
        else:
            self.answered.add(seq)
        self._emit(AnswerPrompt(seq, stop, error))
        if stop is Stop.CANCELLED:
            self.muted = True
        self._maybe_closed()

    # --- children and settings ---------------------------------------------------

    def _spawn(self) -> None:
        if self.child is not None or self.retiring or self.closing:
            return
        self.incarnations += 1
        self.child = Child(self.incarnations, gated=self.gate_in_use())
        self._emit(SpawnChild(self.incarnations, resume=self.resumable, gated=self.child.gated))

    def _spawn_if_idle(self, *, force: bool = False) -> None:
        """Warm agy for the next prompt (not while a failed child would loop)."""
        if force or self.startup_failure is None:
            self._spawn()

    def _retire(self, child: Child, reason: str, *, warm: bool) -> None:
        if self.child is child:
            self.child = None
        self.retiring[child.incarnation] = warm and not self.closing
        self._emit(RetireChild(child.incarnation, reason))

    def _apply_settings(self, *, announce: bool) -> None:
        new = self.requested
        if new is self.settings or new == self.settings:  # mostly the same object
            return
        old, self.settings = self.settings, new
        self._emit(ApplySettings(old, new, announce))
        self._maybe_verify_gate()
        child = self.child
        if child is not None:
            # Launch flags cannot change inside a process: respawn it warm,
            # resuming the conversation.
            self._retire(child, "configuration changed", warm=True)

    def _maybe_verify_gate(self) -> None:
        if self.gate is GateState.UNVERIFIED and self.settings.mode in GATED_MODES:
            self.gate = GateState.VERIFYING
            self._emit(VerifyGate())

    def _maybe_closed(self) -> None:
        if (
            self.closing
            and not self.closed
            and self.current is None
            and self.child is None
            and not self.retiring
        ):
            self.closed = True
            self._emit(Closed())

    def _emit(self, action: Action) -> None:
        self._out.append(action)


#: ``_on_<event class>`` of each event (looked up once, not per event).
_HANDLERS: dict[type[Any], Callable[[TurnCore, Any], None]] = {
    kind: getattr(TurnCore, "_on_" + kind.__name__) for kind in get_args(Event)
}


__all__ = [
    "AcceptPermissions",
    "Action",
    "AllowAnswered",
    "AnswerPrompt",
    "ApplySettings",
    "ArmDeadline",
    "ArmIdle",
    "AskAllowRetry",
    "Cancel",
    "CancelPrompt",
    "Child",
    "ChildExited",
    "ChildFailedBeforeTurn",
    "ChildOutput",
    "ChildSpawnFailed",
    "ChildSpawned",
    "ClientRequest",
    "Close",
    "Closed",
    "Deadline",
    "DeadlinePassed",
    "ErrorDetails",
    "Event",
    "GateFallbackNotice",
    "GateState",
    "GateVerified",
    "IdlePassed",
    "InternalError",
    "PromptArrived",
    "PromptDropped",
    "PromptReady",
    "RecordTurn",
    "RefusePermissions",
    "RetireChild",
    "SendAnnouncements",
    "SendUserTurn",
    "SettingsRequested",
    "SpawnChild",
    "StallNotice",
    "StartTurn",
    "Stop",
    "Turn",
    "TurnCore",
    "TurnResult",
    "TurnState",
    "VerifyGate",
]
