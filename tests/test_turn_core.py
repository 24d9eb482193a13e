"""The session's turn core under generated interleavings (hypothesis stateful).

Every rule feeds the sans-I/O core one event a real session could see at that
moment (a prompt, a cancel, agy's output or exit, a deadline, the gate's
verdict, ...), a small model of the world reacts to the actions it returns
(children spawn and exit), and after every step the promises are checked:

* each prompt is answered at most once, and at the end exactly once;
* the turn the core lets the driver map output for is never an answered one;
* ``cancelled`` only for a prompt covered by a cancel, ``$/cancel_request``
  or close;
* at most one agy child is alive or starting at any time;
* turns start in wire order (FIFO);
* a configuration change is applied exactly once, and never during a turn.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agybridge.session import turns
from agybridge.session.config import LaunchSettings
from agybridge.session.errors import SessionError

ERROR = SessionError("boom")


class TurnCoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.gated = False
        self.core = turns.TurnCore(LaunchSettings(mode="safe"), gate=turns.GateState.UNVERIFIED)
        self.seq = 0
        self.arrived: list[float] = []
        self.answers: dict[float, list[turns.AnswerPrompt]] = {}
        self.cancel_marks: list[float] = []  # wire positions of session/cancel
        self.cancelled_prompts: set[float] = set()
        self.closing = False
        self.closed_count = 0
        self.spawning: set[int] = set()  # SpawnChild seen, ChildSpawned not yet
        self.alive: set[int] = set()  # spawned, not exited
        self.started: list[float] = []
        self.applied: list[LaunchSettings] = []
        self.armed: list[turns.ArmDeadline] = []
        self.asking: set[float] = set()
        #: A cancelled answer went out and the client has not spoken since:
        #: the session must stay silent.
        self.silent = False
        self.do(self.core.start())

    # --- plumbing ------------------------------------------------------------

    def next_seq(self) -> float:
        self.seq += 1
        return self.seq

    def feed(self, event: turns.Event) -> None:
        self.do(self.core.handle(event))

    def do(self, actions: list[turns.Action]) -> None:
        for action in actions:
            if isinstance(action, turns.AnswerPrompt):
                self.answers.setdefault(action.seq, []).append(action)
                assert len(self.answers[action.seq]) == 1, f"answered twice: {action}"
                if action.stop is turns.Stop.CANCELLED:
                    covered = (
                        self.closing
                        or action.seq in self.cancelled_prompts
                        or any(mark > action.seq for mark in self.cancel_marks)
                    )
                    assert covered, f"cancelled without a cancel: {action}"
                    self.silent = True
                self.asking.discard(action.seq)
            elif isinstance(action, turns.SpawnChild):
                assert not self.spawning and not self.alive, (
                    f"second child while {self.spawning | self.alive} exist"
                )
                self.spawning.add(action.incarnation)
            elif isinstance(action, turns.StartTurn) and action.attempt == 1:
                assert not self.started or self.started[-1] < action.seq, "not FIFO"
                self.started.append(action.seq)
            elif isinstance(action, turns.ApplySettings):
                assert action.new != action.old
                self.applied.append(action.new)
            elif isinstance(action, turns.ArmDeadline):
                self.armed.append(action)
            elif isinstance(action, turns.AskAllowRetry):
                self.asking.add(action.seq)
            elif isinstance(action, turns.Closed):
                self.closed_count += 1
            elif isinstance(action, turns.SendAnnouncements):
                assert not self.silent, "announced after a cancelled answer"

    def running(self) -> turns.Turn | None:
        turn = self.core.current
        if turn is None or turn.incarnation is None:
            return None
        return self.core.turn_on(turn.incarnation)

    # --- the client ----------------------------------------------------------

    @rule(ready_now=st.booleans())
    def prompt(self, ready_now: bool) -> None:
        seq = self.next_seq()
        self.arrived.append(seq)
        self.spoke()
        self.feed(turns.PromptArrived(seq))
        if ready_now:
            self.feed(turns.PromptReady(seq))

    @rule(data=st.data())
    def make_ready(self, data: st.DataObject) -> None:
        waiting = [s for s in self.core.queue if s not in self.core.ready]
        if waiting:
            self.feed(turns.PromptReady(data.draw(st.sampled_from(waiting))))

    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        # Only a prompt that never became ready can be dropped (bad params).
        waiting = [s for s in self.core.queue if s not in self.core.ready]
        if waiting:
            seq = data.draw(st.sampled_from(waiting))
            self.feed(turns.PromptDropped(seq))
            self.answers.setdefault(seq, []).append(turns.AnswerPrompt(seq, error=ERROR))

    @rule()
    def cancel(self) -> None:
        seq = self.next_seq()
        self.cancel_marks.append(seq)
        self.feed(turns.Cancel(seq))

    @rule(data=st.data())
    def cancel_one(self, data: st.DataObject) -> None:
        if self.arrived:
            seq = data.draw(st.sampled_from(self.arrived))
            self.cancelled_prompts.add(seq)
            self.feed(turns.CancelPrompt(seq))

    @rule()
    def client_request(self) -> None:
        seq = self.next_seq()
        self.spoke()
        self.feed(turns.ClientRequest(seq))

    def spoke(self) -> None:
        self.silent = False

    @rule(kind=st.sampled_from(["catalog", "commands"]))
    def announce(self, kind: str) -> None:
        self.do(self.core.announce(kind))

    @rule(mode=st.sampled_from(["safe", "ask", "autonomous"]), model=st.sampled_from([None, "m2"]))
    def configure(self, mode: str, model: str | None) -> None:
        self.feed(turns.SettingsRequested(LaunchSettings(mode=mode, model=model)))

    @precondition(lambda self: not self.closing)
    @rule()
    def close(self) -> None:
        self.closing = True
        self.feed(turns.Close())

    # --- agy and the world ------------------------------------------------------

    @rule(ok=st.booleans())
    def spawned(self, ok: bool) -> None:
        if not self.spawning:
            return
        inc = self.spawning.pop()
        if ok:
            self.alive.add(inc)
            self.feed(turns.ChildSpawned(inc))
        else:
            self.feed(turns.ChildSpawnFailed(inc, ERROR))

    @rule(data=st.data(), heard=st.booleans())
    def output(self, data: st.DataObject, heard: bool) -> None:
        if self.alive:
            inc = data.draw(st.sampled_from(sorted(self.alive)))
            self.feed(turns.ChildOutput(inc, heard=heard))

    @rule(kind=st.sampled_from(["plain", "details", "error", "retry"]))
    def result(self, kind: str) -> None:
        turn = self.running()
        if turn is None or turn.incarnation not in self.alive:
            return
        self.feed(
            turns.TurnResult(
                turn.incarnation,
                needs_details=kind == "details",
                error=ERROR if kind == "error" else None,
                offer_retry=kind == "retry",
            )
        )

    @rule(with_error=st.booleans())
    def details(self, with_error: bool) -> None:
        turn = self.running()
        if turn is not None and turn.incarnation is not None:
            self.feed(turns.ErrorDetails(turn.incarnation, ERROR if with_error else None))

    @rule(data=st.data())
    def fails_before_turn(self, data: st.DataObject) -> None:
        if self.alive:
            inc = data.draw(st.sampled_from(sorted(self.alive)))
            self.feed(turns.ChildFailedBeforeTurn(inc, ERROR))

    @rule(data=st.data(), clean=st.booleans())
    def exits(self, data: st.DataObject, clean: bool) -> None:
        if self.alive:
            inc = data.draw(st.sampled_from(sorted(self.alive)))
            self.alive.discard(inc)
            self.feed(turns.ChildExited(inc, ERROR, clean=clean))

    @rule(ok=st.booleans())
    def gate(self, ok: bool) -> None:
        if self.core.gate is turns.GateState.VERIFYING:
            self.feed(turns.GateVerified(ok))

    @rule(allowed=st.booleans())
    def allow(self, allowed: bool) -> None:
        if self.asking:
            seq = min(self.asking)
            self.asking.discard(seq)
            self.feed(turns.GateVerified(True))
            self.feed(turns.AllowAnswered(seq, allowed))

    @rule()
    def internal_error(self) -> None:
        self.feed(turns.InternalError(ERROR))

    @rule(data=st.data())
    def deadline(self, data: st.DataObject) -> None:
        if self.armed:
            armed = data.draw(st.sampled_from(self.armed))
            kind = armed.kind
            if kind is turns.Deadline.STALL_NOTICE and data.draw(st.booleans()):
                kind = turns.Deadline.STALL_TIMEOUT
            self.feed(turns.DeadlinePassed(kind, armed.seq, armed.incarnation, ERROR))

    # --- invariants -------------------------------------------------------------

    @invariant()
    def one_child_at_most(self) -> None:
        assert len(self.spawning | self.alive) <= 1

    @invariant()
    def nothing_mapped_for_an_answered_turn(self) -> None:
        turn = self.core.current
        if turn is not None:
            assert turn.seq not in self.answers

    @invariant()
    def settings_only_change_between_turns(self) -> None:
        if self.core.current is None and not self.closing:
            assert self.core.settings == self.core.requested

    def teardown(self) -> None:
        """Close, let every child go: every prompt is answered exactly once."""
        if not self.closing:
            self.closing = True
            self.feed(turns.Close())
        for _ in range(10):
            for inc in sorted(self.spawning):
                self.spawning.discard(inc)
                self.alive.add(inc)
                self.feed(turns.ChildSpawned(inc))
            for inc in sorted(self.alive):
                self.alive.discard(inc)
                self.feed(turns.ChildExited(inc, ERROR))
            if not self.spawning and not self.alive:
                break
        assert self.closed_count == 1, "the session never finished closing"
        unanswered = [seq for seq in self.arrived if len(self.answers.get(seq, [])) != 1]
        assert not unanswered, f"prompts not answered exactly once: {unanswered}"
        assert self.core.current is None and not self.core.queue


TurnCoreMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=40,
    suppress_health_check=[HealthCheck.too_slow],
)
test_turn_core = TurnCoreMachine.TestCase


def run(events: list[Any]) -> list[turns.Action]:
    core = turns.TurnCore(LaunchSettings())
    out = core.start()
    for event in events:
        out += core.handle(event)
    return out


def test_a_prompt_runs_on_the_warm_child_and_ends_on_its_result() -> None:
    actions = run(
        [
            turns.ChildSpawned(1),
            turns.PromptArrived(1),
            turns.PromptReady(1),
            turns.TurnResult(1),
        ]
    )
    kinds = [type(a).__name__ for a in actions]
    assert kinds == [
        "SpawnChild",
        "StartTurn",
        "AcceptPermissions",
        "SendUserTurn",
        "ArmDeadline",
        "ArmDeadline",
        "RecordTurn",
        "AnswerPrompt",
    ]
    assert actions[-1] == turns.AnswerPrompt(1, turns.Stop.END_TURN)


def test_close_while_the_gate_is_verified_answers_the_prompt() -> None:
    """Issue 9 item 1: a first ask-mode turn waiting for the gate check."""
    core = turns.TurnCore(LaunchSettings(mode="ask"), gate=turns.GateState.UNVERIFIED)
    out = core.start()
    assert turns.VerifyGate() in out
    out = core.handle(turns.PromptArrived(1)) + core.handle(turns.PromptReady(1))
    assert not any(isinstance(a, turns.SendUserTurn) for a in out)
    out = core.handle(turns.Close())
    assert turns.AnswerPrompt(1, turns.Stop.CANCELLED) in out


def test_after_a_cancelled_answer_announcements_wait_for_the_client() -> None:
    core = turns.TurnCore(LaunchSettings())
    core.start()
    core.handle(turns.ChildSpawned(1))
    core.handle(turns.PromptArrived(1))
    core.handle(turns.PromptReady(1))
    core.handle(turns.Cancel(2))
    out = core.handle(turns.ChildExited(1, ERROR))
    assert turns.AnswerPrompt(1, turns.Stop.CANCELLED) in out
    assert core.announce("catalog") == []
    assert core.announce("commands") == []
    out = core.handle(turns.ClientRequest(3))
    assert out == [turns.SendAnnouncements(frozenset({"catalog", "commands"}))]
    assert core.announce("catalog") == [turns.SendAnnouncements(frozenset({"catalog"}))]


def test_a_silent_agy_fails_the_turn_once_it_is_gone_and_the_session_goes_on() -> None:
    core = turns.TurnCore(LaunchSettings())
    core.start()
    core.handle(turns.ChildSpawned(1))
    core.handle(turns.PromptArrived(1))
    out = core.handle(turns.PromptReady(1))
    assert turns.ArmDeadline(turns.Deadline.STARTUP, 1, 1) in out
    out = core.handle(turns.DeadlinePassed(turns.Deadline.STARTUP, 1, 1, ERROR))
    assert out == [turns.RefusePermissions(), turns.RetireChild(1, "agy did not start")]
    out = core.handle(turns.ChildExited(1, ERROR))
    assert turns.AnswerPrompt(1, error=ERROR) in out
    # Retired for a failure: not respawned warm; the next prompt spawns.
    assert not any(isinstance(a, turns.SpawnChild) for a in out)
    out = core.handle(turns.PromptArrived(2)) + core.handle(turns.PromptReady(2))
    assert turns.SpawnChild(2, resume=True, gated=False) in out


def test_a_change_during_a_turn_applies_once_when_it_ends() -> None:
    core = turns.TurnCore(LaunchSettings())
    core.start()
    core.handle(turns.ChildSpawned(1))
    core.handle(turns.PromptArrived(1))
    core.handle(turns.PromptReady(1))
    new = attrs.evolve(LaunchSettings(), model="m2")
    assert core.handle(turns.SettingsRequested(new)) == []
    out = core.handle(turns.TurnResult(1))
    applied = [a for a in out if isinstance(a, turns.ApplySettings)]
    assert applied == [turns.ApplySettings(LaunchSettings(), new, announce=True)]
    assert turns.RetireChild(1, "configuration changed") in out
    assert out.index(applied[0]) < out.index(turns.AnswerPrompt(1, turns.Stop.END_TURN))
