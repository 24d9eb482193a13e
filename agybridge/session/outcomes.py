"""The turn core's rules for how a turn ends (part of the core: see
``turns.py``): agy's result and its error details, safe mode's "allow and
retry" (at most once per permission and turn), the turn's child exiting,
deadlines, and bugs in the bridge.
"""

from __future__ import annotations

from .core_state import Turn
from .errors import SessionError
from .supervision import Supervision
from .turn_events import (
    ActionFailed,
    AgyErrorLine,
    AllowAnswered,
    AmendAnswer,
    AnswerPrompt,
    ArmDeadline,
    AskAllowRetry,
    ChildExited,
    ChildResult,
    Deadline,
    DeadlinePassed,
    InternalError,
    Outcome,
    RecordTurn,
    RefusePermissions,
    RetryRefused,
    ShowAllowAnswer,
    StallNotice,
    StartTurn,
    Stop,
    TurnState,
)


class Outcomes(Supervision):
    """How turns end; see the module docstring."""

    def _allow_answered(self, event: AllowAnswered) -> None:
        turn = self._running()
        if turn.seq != event.seq:
            return  # stale: another prompt's question
        # (A cancel answered the turn already: it no longer asks.)
        self._emit(ShowAllowAnswer(turn.seq, event.allowed, event.gate_failure))
        if not event.allowed or event.gate_failure is not None:
            self._finish(turn, Stop.END_TURN)
            return
        # The same prompt again, now behind the gate with the allowance.
        self._session_allows = True
        turn.retried |= turn.asked
        self._emit(RecordTurn(turn.seq))
        turn.reached_agy = False
        turn.attempt += 1
        turn.state = TurnState.STARTING
        turn.incarnation = None
        turn.heard = False
        self._emit(StartTurn(turn.seq, turn.attempt))
        if self._children.current is not None:
            self._retire(self._children.current, "allowing for the session", warm=True)

    def _turn_result(self, event: ChildResult) -> None:
        turn = self._running()
        if turn.incarnation != event.incarnation or event.outcome is None:
            self._result_outside_turn(event)
            return
        turn.heard = True
        if event.outcome is Outcome.AGY_ERROR and event.details_pending:
            turn.state = TurnState.AWAITING_DETAILS
            self._emit(ArmDeadline(Deadline.DETAILS, turn.seq, event.incarnation))
        elif event.error is not None:
            self._finish(turn, error=event.error)
        elif self._offers_retry(event) and not self._is_cancelled(turn.seq):
            fresh = event.denied - turn.retried
            if fresh:
                turn.state = TurnState.ASKING
                turn.asked = fresh
                self._emit(AskAllowRetry(turn.seq, fresh))
            else:
                # Allowed and retried once already: asking again would loop
                # (agy's own settings keep denying it).
                self._emit(RetryRefused(turn.seq, event.denied))
                self._finish(turn, Stop.END_TURN)
        else:
            self._finish(turn, Stop.END_TURN)

    def _result_outside_turn(self, event: ChildResult) -> None:
        if event.success or self.turn_on(event.incarnation) is not None:
            return  # stale: a turn's result already had, or a retired child's
        if self._children.is_current(event.incarnation) and event.error is not None:
            self._startup_failure = event.error  # e.g. an unknown model: the next prompt's

    def _details_arrived(self, event: AgyErrorLine) -> None:
        turn = self._running()
        if turn.incarnation == event.incarnation:
            self._finish(turn, Stop.END_TURN, event.error)

    def _exit_during_turn(self, event: ChildExited) -> None:
        turn = self._running()
        if turn.incarnation != event.incarnation:
            self._exit_between_turns(event)
            return
        retired = self._children.is_retiring(event.incarnation)
        warm = self._children.gone(event.incarnation)
        if turn.state is TurnState.RETIRING:
            self._finish(turn, turn.pending_stop, turn.pending_error)
        elif turn.state is TurnState.AWAITING_DETAILS:
            # Its result came; the exit is agy's reaction to it.
            self._finish(turn, Stop.END_TURN, event.result_error)
        elif not turn.heard and turn.attempt == 1 and not retired:
            # agy was already exiting (e.g. exit 3 after a quota error,
            # contract.md §5) and never read this prompt: send it again
            # to a fresh agy that resumes the conversation.
            turn.attempt = 2
            turn.state = TurnState.STARTING
            turn.incarnation = None
        else:
            self._finish(turn, error=event.error)
        self._after_exit(warm)

    # --- failures and deadlines ---------------------------------------------------

    def _on_InternalError(self, event: InternalError) -> None:
        self._bug_in(event.seq, event.error)

    def _on_ActionFailed(self, event: ActionFailed) -> None:
        action = event.action
        if type(action) is AmendAnswer or (type(action) is AnswerPrompt and not action.amendable):
            return  # stale: that answer was given whatever failed before it
        self._bug_in(getattr(action, "seq", None), event.error)

    def _bug_in(self, seq: float | None, error: SessionError) -> None:
        """A bug hit the work of prompt ``seq`` (None: whatever turn runs): it
        fails that prompt, never another one."""
        turn = self._current
        if turn is not None and (seq is None or seq == turn.seq):
            self._fail(turn, error, "internal error")
        elif seq is not None and seq == self._last_end_turn:
            # Its end_turn answer is decided; if it is not given yet (it
            # follows the turn's journalling), it says the bug instead.
            self._last_end_turn = None
            self._emit(AmendAnswer(seq, error))

    def _deadline_running(self, event: DeadlinePassed) -> None:
        turn = self._running()
        if turn.seq != event.seq or turn.incarnation != event.incarnation:
            return  # stale: that attempt is over
        if event.kind is Deadline.STARTUP:
            child = self._children.current
            if child is not None and child.incarnation == event.incarnation and child.output_seen:
                return  # stale: agy spoke in time
            assert event.error is not None
            self._fail(turn, event.error, "agy did not start")
        elif event.kind is Deadline.STALL_NOTICE:
            if not turn.stall_noticed:
                turn.stall_noticed = True
                self._emit(StallNotice(turn.seq))
                # The watch goes on to the stall timeout (if one is set).
                self._emit(ArmDeadline(Deadline.STALL_TIMEOUT, turn.seq, event.incarnation))
        elif event.kind is Deadline.STALL_TIMEOUT:
            assert event.error is not None
            self._fail(turn, event.error, "agy stalled")

    def _deadline_details(self, event: DeadlinePassed) -> None:
        turn = self._running()
        same = turn.seq == event.seq and turn.incarnation == event.incarnation
        if same and event.kind is Deadline.DETAILS:
            self._finish(turn, Stop.END_TURN, event.error)

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
        child = self._children.current
        if child is not None and child.incarnation == turn.incarnation:
            cancelling = turn.seq if stop is Stop.CANCELLED else None
            self._retire(child, reason, warm=warm, cancelling=cancelling)
        elif turn.incarnation is None or not self._children.is_retiring(turn.incarnation):
            self._finish(turn, stop, error)  # already gone
