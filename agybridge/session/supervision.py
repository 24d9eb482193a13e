"""The turn core's rules for agy children and the permission gate (part of
the core: see ``turns.py``): when agy is spawned, retired and replaced, when
the gate is verified and used (or only observes), and when a STARTING turn
can be sent.
"""

from __future__ import annotations

from .config import GATED_MODES
from .core_state import Child, CoreState, Turn
from .turn_events import (
    AcceptPermissions,
    ArmDeadline,
    ArmIdle,
    ChildExited,
    ChildOutput,
    ChildResult,
    ChildSpawned,
    ChildSpawnFailed,
    Deadline,
    GateFallbackNotice,
    GateStarted,
    GateState,
    GateVerified,
    IdlePassed,
    Outcome,
    RetireChild,
    SendUserTurn,
    SpawnChild,
    StartFailed,
    Stop,
    TurnState,
    VerifyGate,
)


class Supervision(CoreState):
    """Children and the gate; see the module docstring."""

    def output_is_news(self, incarnation: int, heard: bool) -> bool:
        """Whether ``ChildOutput(incarnation, heard)`` would change anything
        (most of agy's lines are deltas of a turn already heard)."""
        child = self._children.current
        if child is not None and child.incarnation == incarnation and not child.output_seen:
            return True
        turn = self.turn_on(incarnation) if heard else None
        return turn is not None and not turn.heard

    def is_current_child(self, incarnation: int) -> bool:
        return self._children.is_current(incarnation)

    def gate_in_use(self) -> bool:
        """agy runs behind the gate: a gated mode, or safe mode after the user
        allowed something for the session; never a gate known to be broken."""
        if self._gate in (GateState.NONE, GateState.FAILED):
            return False
        mode = self._settings.mode
        return mode in GATED_MODES or (
            mode == "safe" and self._session_allows and self._gate is GateState.VERIFIED
        )

    # --- the gate ----------------------------------------------------------------

    def _on_GateStarted(self, event: GateStarted) -> None:
        if self._gate is GateState.NONE:
            self._gate = GateState.UNVERIFIED if event.ok else GateState.FAILED

    def _on_GateVerified(self, event: GateVerified) -> None:
        if self._gate is GateState.NONE:
            return  # stale: no gate
        if event.auth_error is not None:
            # Not the gate's fault: say so first, and check again next turn
            # (the user may sign in meanwhile).
            self._auth_failure = event.auth_error
            self._gate = GateState.UNVERIFIED
            return
        self._gate = GateState.VERIFIED if event.ok else GateState.FAILED

    def _on_ChildSpawned(self, event: ChildSpawned) -> None:
        if self._children.is_retiring(event.incarnation):
            # Retired while it was being started: stop it now that it exists.
            self._emit(RetireChild(event.incarnation, "retired while starting"))
            return
        child = self._children.current
        if child is None or child.incarnation != event.incarnation:
            return  # stale
        child.live = True
        if self._closing:
            self._retire(child, "session closed", warm=False)
        elif self._current is None:
            self._arm_idle()

    def _on_ChildSpawnFailed(self, event: ChildSpawnFailed) -> None:
        child = self._children.current
        first = child is not None and child.incarnation == event.incarnation and child.first
        self._children.gone(event.incarnation)
        if first:
            # No agy for the session at all: it never started (session/new fails).
            self._closing = True
            self._emit(StartFailed(event.error))
            self._cancel_matching()
        elif self._current is not None and self._current.state is TurnState.STARTING:
            self._finish(self._current, error=event.error)
        else:
            self._startup_failure = self._startup_failure or event.error
        self._maybe_closed()

    def _on_ChildOutput(self, event: ChildOutput) -> None:
        child = self._children.current
        if child is not None and child.incarnation == event.incarnation:
            child.output_seen = True
        turn = self.turn_on(event.incarnation)
        if turn is not None and event.heard:
            turn.heard = True

    def _offers_retry(self, event: ChildResult) -> bool:
        """Safe mode auto-denied something: ask to allow it and retry."""
        return (
            bool(event.denied)
            and event.outcome is Outcome.END_TURN
            and self._gate is not GateState.NONE
            and self._settings.mode == "safe"
        )

    def _exit_between_turns(self, event: ChildExited) -> None:
        inc = event.incarnation
        unasked = self._children.is_current(inc) and not self._children.is_retiring(inc)
        warm = self._children.gone(inc)
        if unasked and not event.clean and self._startup_failure is None:
            self._startup_failure = event.error
        self._after_exit(warm)

    def _after_exit(self, warm: bool) -> None:
        if warm and not self._closing and self._startup_failure is None:
            self._spawn()  # warm for the next prompt (not while a failed one would loop)
        self._maybe_closed()

    def _on_IdlePassed(self, event: IdlePassed) -> None:
        """Idle that long: stop agy (the session stays; the next prompt starts
        one that resumes the conversation)."""
        child = self._children.current
        idle = self._current is None and not self._prompts and not self._closing
        if event.token == self._idle_token and idle and child is not None and child.live:
            self._retire(child, "idle timeout", warm=False)

    def _arm_idle(self) -> None:
        self._idle_token += 1
        self._emit(ArmIdle(self._idle_token))

    # --- children and settings ---------------------------------------------------

    def _spawn(self, *, first: bool = False) -> None:
        if self._children.current is not None or self._children.retiring or self._closing:
            return
        child = self._children.new(gated=self.gate_in_use(), first=first)
        # Not gated, a working gate still observes every tool call: the files
        # agy changes keep their before-state in every mode (issue 27).
        observed = not child.gated and self._gate not in (GateState.NONE, GateState.FAILED)
        self._emit(
            SpawnChild(
                child.incarnation, self._resumable, child.gated, self._settings, first, observed
            )
        )

    def _retire(
        self, child: Child, reason: str, *, warm: bool, cancelling: float | None = None
    ) -> None:
        self._children.retire(child, warm=warm and not self._closing)
        self._emit(RetireChild(child.incarnation, reason, cancelling))

    def _maybe_verify_gate(self) -> None:
        if self._gate is GateState.UNVERIFIED and self._settings.mode in GATED_MODES:
            self._gate = GateState.VERIFYING
            self._emit(VerifyGate())

    def _progress(self, turn: Turn) -> bool:
        """A STARTING turn: wait for the gate, then a live child, then send.
        True if the turn's state changed (keep advancing)."""
        if self._is_cancelled(turn.seq):
            self._finish(turn, Stop.CANCELLED)
            return True
        failure = self._startup_failure or self._auth_failure
        if failure is not None:
            if self._startup_failure is not None:
                self._startup_failure = None
            else:
                self._auth_failure = None
            self._finish(turn, error=failure)
            return True
        if self._settings.mode in GATED_MODES or self.gate_in_use():
            if self._gate in (GateState.UNVERIFIED, GateState.VERIFYING):
                self._maybe_verify_gate()
                return False
            if self._gate is GateState.FAILED and not self._gate_notice_sent:
                self._gate_notice_sent = True
                self._emit(GateFallbackNotice(turn.seq))
        child = self._children.current
        if child is not None and child.gated and not self.gate_in_use():
            # Spawned warm behind a gate that is not usable: never run a turn on it.
            self._retire(child, "permission gate not verified", warm=False)
            child = None
        if self._children.retiring:
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
        self._resumable = True  # agy records the turn even if it is cancelled later
        self._emit(SendUserTurn(turn.seq, child.incarnation, gated=self.gate_in_use()))
        if not child.output_seen:
            self._emit(ArmDeadline(Deadline.STARTUP, turn.seq, child.incarnation))
        self._emit(ArmDeadline(Deadline.STALL_NOTICE, turn.seq, child.incarnation))
        return True
