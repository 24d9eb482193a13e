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
* turns start in wire order (FIFO), steers ahead of waiting prompts;
* a configuration change is applied exactly once, and never during a turn;
  so is a new directory list.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agybridge.session import turn_events as ev
from agybridge.session import turns
from agybridge.session.config import LaunchSettings
from agybridge.session.core_state import ChildLedger, PromptQueue, Turn
from agybridge.session.errors import SessionError

ERROR = SessionError("boom")


def _state(core: turns.TurnCore) -> str:
    # Sets sorted: a set's repr depends on its history (a copy's may differ).
    def plain(value: Any) -> Any:
        if isinstance(value, set):
            return sorted(value)
        if isinstance(value, PromptQueue | ChildLedger):
            return {k: plain(v) for k, v in vars(value).items()}
        return value

    return repr({name: plain(value) for name, value in vars(core).items() if name != "_out"})


# White-box reads of the core's own records, for the invariants only (the
# driver asks the core's queries; the test checks the records behind them).
def _current(core: turns.TurnCore) -> Turn | None:
    return core._current


def _queue(core: turns.TurnCore) -> list[float]:
    return list(core._prompts._queue)


def _ready(core: turns.TurnCore) -> set[float]:
    return set(core._prompts._ready)


def _answered(core: turns.TurnCore) -> set[float]:
    return set(core._prompts._answered)


def _gone(core: turns.TurnCore) -> set[float]:
    return set(core._prompts._gone)


class TurnCoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.gated = False
        self.core = turns.TurnCore(LaunchSettings(mode="safe"))
        #: Answers given (prompt -> its answer), as the driver gives them: an
        #: amendment replaces an end_turn answer not yet given.
        self.amended: set[float] = set()
        assert self.core.handle(ev.GateStarted(True)) == []
        self.seq = 0
        self.performed: list[ev.Action] = []
        self.arrived: list[float] = []
        #: Prompts whose request task has ended (PromptDropped): never told again.
        self.tasks_done: set[float] = set()
        self.steers: set[float] = set()
        self.answers: dict[float, list[ev.AnswerPrompt]] = {}
        self.cancel_marks: list[float] = []  # wire positions of session/cancel
        self.cancelled_prompts: set[float] = set()
        self.closing = False
        self.closed_count = 0
        self.spawning: set[int] = set()  # SpawnChild seen, ChildSpawned not yet
        self.alive: set[int] = set()  # spawned, not exited
        self.started: list[float] = []
        self.applied: list[LaunchSettings] = []
        #: The directory list last sent (session/load or resume of the live session).
        self.requested_dirs: tuple[str, ...] = ()
        #: The cwd last asked for (set_workspace), and the one applied.
        self.requested_cwd: str | None = None
        self.cwd: str | None = None
        self.armed: list[ev.ArmDeadline] = []
        self.asking: set[float] = set()
        #: "Allow and retry" per prompt: what was asked, what was allowed.
        self.asked: dict[float, list[frozenset[str]]] = {}
        self.allowed: dict[float, set[str]] = {}
        self.idle_tokens: list[int] = []
        #: A cancelled answer went out and the client has not spoken since:
        #: the session must stay silent.
        self.silent = False
        self.do(self.core.start())

    # --- plumbing ------------------------------------------------------------

    def next_seq(self) -> float:
        self.seq += 1
        return self.seq

    def feed(self, event: ev.Event) -> None:
        self.do(self.core.handle(event))

    def do(self, actions: list[ev.Action]) -> None:
        self.performed.extend(actions)
        for action in actions:
            if isinstance(action, ev.AmendAnswer):
                [answer] = self.answers[action.seq]
                assert answer.stop is ev.Stop.END_TURN and answer.error is None, action
                assert action.seq not in self.amended, "amended twice"
                self.amended.add(action.seq)
            elif isinstance(action, ev.AnswerPrompt):
                self.answers.setdefault(action.seq, []).append(action)
                assert len(self.answers[action.seq]) == 1, f"answered twice: {action}"
                if action.stop is ev.Stop.CANCELLED:
                    covered = (
                        self.closing
                        or action.seq in self.cancelled_prompts
                        or any(mark > action.seq for mark in self.cancel_marks)
                    )
                    assert covered, f"cancelled without a cancel: {action}"
                    self.silent = True
                self.asking.discard(action.seq)
            elif isinstance(action, ev.SpawnChild):
                # The hook gates, or observes while the gate works, never both.
                assert not (action.gated and action.observed), action
                working = self.core.status().gate not in (ev.GateState.NONE, ev.GateState.FAILED)
                assert action.observed == (working and not action.gated), action
                assert not self.spawning and not self.alive, (
                    f"second child while {self.spawning | self.alive} exist"
                )
                self.spawning.add(action.incarnation)
            elif isinstance(action, ev.StartTurn) and action.attempt == 1:
                self.check_order(action.seq)
                self.started.append(action.seq)
            elif isinstance(action, ev.ApplySettings):
                assert action.new != action.old
                self.applied.append(action.new)
            elif isinstance(action, ev.ApplyDirectories):
                assert action.new == self.requested_dirs, action
                assert action.new != action.old or action.cwd is not None, action
                if action.cwd is not None:
                    assert action.cwd != self.cwd, action  # a move to where it is: nothing
                    self.cwd = action.cwd
            elif isinstance(action, ev.ArmDeadline):
                self.armed.append(action)
            elif isinstance(action, ev.ArmIdle):
                self.idle_tokens.append(action.token)
            elif isinstance(action, ev.AskAllowRetry):
                self.asking.add(action.seq)
                asked = self.asked.setdefault(action.seq, [])
                assert action.permissions, "asked to allow nothing"
                assert not action.permissions & self.allowed.get(action.seq, set()), (
                    f"asked again for what was allowed and retried: {action}"
                )
                asked.append(action.permissions)
            elif isinstance(action, ev.RetryRefused):
                # Final only for what the user allowed and the turn retried.
                assert action.permissions <= self.allowed.get(action.seq, set()), action
            elif isinstance(action, ev.StartFailed):
                # The first agy could not be started: the session is over, as
                # after a close (session/new fails; nothing more arrives).
                self.closing = True
            elif isinstance(action, ev.Closed):
                self.closed_count += 1
            elif isinstance(action, ev.SendAnnouncements):
                assert not self.silent, "announced after a cancelled answer"

    def check_order(self, seq: float) -> None:
        """Steers first, each kind in wire order (FIFO)."""
        waiting_steers = [
            s for s in self.steers if s not in self.started and s not in self.answers and s != seq
        ]
        kind = [s for s in self.started if (s in self.steers) == (seq in self.steers)]
        assert not kind or kind[-1] < seq, "not FIFO"
        if seq in self.steers:
            assert all(s > seq for s in waiting_steers), "steers out of order"
        else:
            assert not waiting_steers, f"prompt {seq} started before steers {waiting_steers}"

    def running(self) -> Turn | None:
        turn = _current(self.core)
        if turn is None or turn.incarnation is None:
            return None
        return self.core.turn_on(turn.incarnation)

    # --- the client ----------------------------------------------------------

    @rule(ready_now=st.booleans())
    def prompt(self, ready_now: bool) -> None:
        seq = self.next_seq()
        self.arrived.append(seq)
        self.spoke()
        self.feed(ev.PromptArrived(seq))
        if ready_now:
            self.feed(ev.PromptReady(seq))

    @rule(ready_now=st.booleans())
    def steer(self, ready_now: bool) -> None:
        seq = self.next_seq()
        self.arrived.append(seq)
        self.steers.add(seq)
        self.spoke()
        self.feed(ev.PromptArrived(seq, steer=True))
        if ready_now:
            self.feed(ev.PromptReady(seq))

    @rule(data=st.data())
    def make_ready(self, data: st.DataObject) -> None:
        waiting = [s for s in _queue(self.core) if s not in _ready(self.core)]
        if waiting:
            self.feed(ev.PromptReady(data.draw(st.sampled_from(waiting))))

    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        # Only a prompt that never became ready can be dropped (bad params).
        waiting = [s for s in _queue(self.core) if s not in _ready(self.core)]
        if waiting:
            seq = data.draw(st.sampled_from(waiting))
            # Answered by the handler (an error) before the core hears of it.
            self.answers.setdefault(seq, []).append(ev.AnswerPrompt(seq, error=ERROR))
            self.tasks_done.add(seq)
            self.feed(ev.PromptDropped(seq))

    @rule(data=st.data())
    def told_again(self, data: st.DataObject) -> None:
        """A prompt's request task tells the core too (Session.prompt), perhaps
        after its answer: a prompt told twice changes nothing at all."""
        told = [s for s in self.arrived if s not in self.tasks_done]
        if told:
            seq = data.draw(st.sampled_from(told))
            if seq in _queue(self.core) or seq in _answered(self.core):
                trial = copy.deepcopy(self.core)
                assert trial.handle(ev.PromptArrived(seq, steer=seq in self.steers)) == []
                assert _state(trial) == _state(self.core)

    @rule(data=st.data())
    def request_done(self, data: st.DataObject) -> None:
        """A request task ends (Session.drop_prompt) after its prompt was
        answered, or while its turn still runs (the request went away): the
        core sends nothing, and nothing of it is told again."""
        current = _current(self.core)
        done = sorted(_answered(self.core)) + ([current.seq] if current is not None else [])
        done = [s for s in done if s not in self.tasks_done]
        if done:
            seq = data.draw(st.sampled_from(done))
            self.tasks_done.add(seq)
            assert self.core.handle(ev.PromptDropped(seq)) == []

    @rule()
    def cancel(self) -> None:
        seq = self.next_seq()
        self.cancel_marks.append(seq)
        self.feed(ev.Cancel(seq))

    @rule(data=st.data())
    def cancel_one(self, data: st.DataObject) -> None:
        if self.arrived:
            seq = data.draw(st.sampled_from(self.arrived))
            self.cancelled_prompts.add(seq)
            self.feed(ev.CancelPrompt(seq))

    @rule()
    def client_request(self) -> None:
        seq = self.next_seq()
        self.spoke()
        self.feed(ev.ClientRequest(seq))

    def spoke(self) -> None:
        self.silent = False

    @rule(kind=st.sampled_from(["catalog", "commands"]))
    def announce(self, kind: str) -> None:
        self.do(self.core.announce(kind))

    @rule(mode=st.sampled_from(["safe", "ask", "autonomous"]), model=st.sampled_from([None, "m2"]))
    def configure(self, mode: str, model: str | None) -> None:
        self.feed(ev.SettingsRequested(LaunchSettings(mode=mode, model=model)))

    @rule(dirs=st.sampled_from([(), ("/a",), ("/a", "/b")]))
    def send_directories(self, dirs: tuple[str, ...]) -> None:
        self.requested_dirs = dirs
        self.feed(ev.DirectoriesRequested(dirs))

    @rule(cwd=st.sampled_from(["/w1", "/w2"]))
    def move(self, cwd: str) -> None:
        self.requested_cwd = cwd
        self.feed(ev.DirectoriesRequested(None, cwd))

    @rule()
    def reload(self) -> None:
        self.feed(ev.SettingsRequested(None, reload=True))

    @precondition(lambda self: not self.closing)
    @rule()
    def close(self) -> None:
        self.closing = True
        self.feed(ev.Close())

    # --- agy and the world ------------------------------------------------------

    @rule(ok=st.booleans())
    def spawned(self, ok: bool) -> None:
        if not self.spawning:
            return
        inc = self.spawning.pop()
        if ok:
            self.alive.add(inc)
            self.feed(ev.ChildSpawned(inc))
        else:
            self.feed(ev.ChildSpawnFailed(inc, ERROR))

    @rule(data=st.data(), heard=st.booleans())
    def output(self, data: st.DataObject, heard: bool) -> None:
        if self.alive:
            inc = data.draw(st.sampled_from(sorted(self.alive)))
            if not self.core.output_is_news(inc, heard):
                # The driver skips this event: it must change nothing at all.
                trial = copy.deepcopy(self.core)
                assert trial.handle(ev.ChildOutput(inc, heard=heard)) == []
                assert _state(trial) == _state(self.core)
            self.feed(ev.ChildOutput(inc, heard=heard))

    @rule(
        kind=st.sampled_from(["plain", "details", "error", "retry"]),
        denied=st.sets(st.sampled_from(["command", "write_file"]), min_size=1),
    )
    def result(self, kind: str, denied: set[str]) -> None:
        turn = self.running()
        if turn is None or turn.incarnation not in self.alive:
            return
        self.feed(
            ev.ChildResult(
                turn.incarnation,
                success=kind in ("plain", "retry"),
                outcome=ev.Outcome.AGY_ERROR
                if kind in ("details", "error")
                else ev.Outcome.END_TURN,
                details_pending=kind == "details",
                denied=frozenset(denied) if kind == "retry" else frozenset(),
                error=ERROR if kind == "error" else None,
            )
        )

    @rule(with_error=st.booleans())
    def details(self, with_error: bool) -> None:
        turn = self.running()
        if turn is not None and turn.incarnation is not None:
            self.feed(ev.AgyErrorLine(turn.incarnation, ERROR if with_error else None))

    @rule(data=st.data())
    def fails_before_turn(self, data: st.DataObject) -> None:
        if self.alive:
            inc = data.draw(st.sampled_from(sorted(self.alive)))
            self.feed(ev.ChildResult(inc, success=False, error=ERROR))

    @rule(data=st.data(), clean=st.booleans())
    def exits(self, data: st.DataObject, clean: bool) -> None:
        if self.alive:
            inc = data.draw(st.sampled_from(sorted(self.alive)))
            self.alive.discard(inc)
            self.feed(ev.ChildExited(inc, ERROR, clean=clean))

    @rule(ok=st.booleans())
    def gate(self, ok: bool) -> None:
        if self.core.status().gate is ev.GateState.VERIFYING:
            self.feed(ev.GateVerified(ok))

    @rule(allowed=st.booleans())
    def allow(self, allowed: bool) -> None:
        if self.asking:
            seq = min(self.asking)
            self.asking.discard(seq)
            self.feed(ev.GateVerified(True))
            out = self.core.handle(
                ev.AllowAnswered(seq, allowed, gate_failure=None if allowed else "broken")
            )
            if allowed and any(isinstance(a, ev.StartTurn) and a.seq == seq for a in out):
                self.allowed.setdefault(seq, set()).update(self.asked[seq][-1])
            self.do(out)

    @rule(data=st.data())
    def idle_passed(self, data: st.DataObject) -> None:
        """The idle timeout fires (perhaps a stale one): agy may be stopped only
        while nothing runs or waits, and is started again by the next prompt."""
        if self.idle_tokens:
            token = data.draw(st.sampled_from(self.idle_tokens))
            busy = _current(self.core) is not None or bool(_queue(self.core))
            out = self.core.handle(ev.IdlePassed(token))
            retired = [a for a in out if isinstance(a, ev.RetireChild)]
            assert not (retired and busy), "stopped agy while a prompt was waiting"
            assert not retired or token == self.idle_tokens[-1], "a stale idle timer fired"
            self.do(out)

    @rule(data=st.data())
    def internal_error(self, data: st.DataObject) -> None:
        """A bug in the driver: while serving the running turn, or a given prompt's."""
        seq = data.draw(st.none() | st.sampled_from(self.arrived)) if self.arrived else None
        self.feed(ev.InternalError(ERROR, seq))

    @rule(data=st.data())
    def action_failed(self, data: st.DataObject) -> None:
        """Performing one of the actions decided so far raised (a bug)."""
        if self.performed:
            action = data.draw(st.sampled_from(self.performed[-8:]))
            self.feed(ev.ActionFailed(action, ERROR))

    @rule(data=st.data())
    def deadline(self, data: st.DataObject) -> None:
        if self.armed:
            armed = data.draw(st.sampled_from(self.armed))
            kind = armed.kind
            if kind is ev.Deadline.STALL_NOTICE and data.draw(st.booleans()):
                kind = ev.Deadline.STALL_TIMEOUT
            self.feed(ev.DeadlinePassed(kind, armed.seq, armed.incarnation, ERROR))

    # --- invariants -------------------------------------------------------------

    @invariant()
    def one_child_at_most(self) -> None:
        assert len(self.spawning | self.alive) <= 1

    @invariant()
    def nothing_mapped_for_an_answered_turn(self) -> None:
        turn = _current(self.core)
        if turn is not None:
            assert turn.seq not in self.answers

    @invariant()
    def only_prompts_that_may_be_told_again_are_remembered(self) -> None:
        """The core's memory of answered prompts is bounded by the requests
        still running (it grew by one per prompt for the session's life)."""
        assert not _answered(self.core) & self.tasks_done
        assert _answered(self.core) <= set(self.answers)
        assert len(_gone(self.core)) <= 1

    @invariant()
    def settings_only_change_between_turns(self) -> None:
        if _current(self.core) is None and not self.closing:
            assert self.core.settings == self.core.requested
            assert self.core.dirs == self.requested_dirs
            assert self.cwd == self.requested_cwd

    def teardown(self) -> None:
        """Close, let every child go: every prompt is answered exactly once."""
        if not self.closing:
            self.closing = True
            self.feed(ev.Close())
        for _ in range(10):
            for inc in sorted(self.spawning):
                self.spawning.discard(inc)
                self.alive.add(inc)
                self.feed(ev.ChildSpawned(inc))
            for inc in sorted(self.alive):
                self.alive.discard(inc)
                self.feed(ev.ChildExited(inc, ERROR))
            if not self.spawning and not self.alive:
                break
        assert self.closed_count == 1, "the session never finished closing"
        unanswered = [seq for seq in self.arrived if len(self.answers.get(seq, [])) != 1]
        assert not unanswered, f"prompts not answered exactly once: {unanswered}"
        assert _current(self.core) is None and not _queue(self.core)


TurnCoreMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=40,
    suppress_health_check=[HealthCheck.too_slow],
)
test_turn_core = TurnCoreMachine.TestCase


def run(events: list[Any]) -> list[ev.Action]:
    core = turns.TurnCore(LaunchSettings())
    out = core.start()
    for event in events:
        out += core.handle(event)
    return out


def test_a_prompt_runs_on_the_warm_child_and_ends_on_its_result() -> None:
    actions = run(
        [
            ev.ChildSpawned(1),
            ev.PromptArrived(1),
            ev.PromptReady(1),
            ev.ChildResult(1, success=True, outcome=ev.Outcome.END_TURN),
        ]
    )
    kinds = [type(a).__name__ for a in actions]
    assert kinds == [
        "SpawnChild",
        "ArmIdle",  # the warm agy is idle until the prompt
        "StartTurn",
        "AcceptPermissions",
        "SendUserTurn",
        "ArmDeadline",
        "ArmDeadline",
        "RecordTurn",
        "AnswerPrompt",
        "ArmIdle",
    ]
    assert actions[-2] == ev.AnswerPrompt(1, ev.Stop.END_TURN)


def test_close_while_the_gate_is_verified_answers_the_prompt() -> None:
    """Issue 9 item 1: a first ask-mode turn waiting for the gate check."""
    core = turns.TurnCore(LaunchSettings(mode="ask"))
    core.handle(ev.GateStarted(True))
    out = core.start()
    assert ev.VerifyGate() in out
    out = core.handle(ev.PromptArrived(1)) + core.handle(ev.PromptReady(1))
    assert not any(isinstance(a, ev.SendUserTurn) for a in out)
    out = core.handle(ev.Close())
    assert ev.AnswerPrompt(1, ev.Stop.CANCELLED) in out


def test_after_a_cancelled_answer_announcements_wait_for_the_client() -> None:
    core = turns.TurnCore(LaunchSettings())
    core.start()
    core.handle(ev.ChildSpawned(1))
    core.handle(ev.PromptArrived(1))
    core.handle(ev.PromptReady(1))
    core.handle(ev.Cancel(2))
    out = core.handle(ev.ChildExited(1, ERROR))
    assert ev.AnswerPrompt(1, ev.Stop.CANCELLED) in out
    assert core.announce("catalog") == []
    assert core.announce("commands") == []
    out = core.handle(ev.ClientRequest(3))
    assert out == [ev.SendAnnouncements(frozenset({"catalog", "commands"}))]
    assert core.announce("catalog") == [ev.SendAnnouncements(frozenset({"catalog"}))]


def test_a_silent_agy_fails_the_turn_once_it_is_gone_and_the_session_goes_on() -> None:
    core = turns.TurnCore(LaunchSettings())
    core.start()
    core.handle(ev.ChildSpawned(1))
    core.handle(ev.PromptArrived(1))
    out = core.handle(ev.PromptReady(1))
    assert ev.ArmDeadline(ev.Deadline.STARTUP, 1, 1) in out
    out = core.handle(ev.DeadlinePassed(ev.Deadline.STARTUP, 1, 1, ERROR))
    assert out == [ev.RefusePermissions(), ev.RetireChild(1, "agy did not start")]
    out = core.handle(ev.ChildExited(1, ERROR))
    assert ev.AnswerPrompt(1, error=ERROR) in out
    # Retired for a failure: not respawned warm; the next prompt spawns.
    assert not any(isinstance(a, ev.SpawnChild) for a in out)
    out = core.handle(ev.PromptArrived(2)) + core.handle(ev.PromptReady(2))
    assert ev.SpawnChild(2, resume=True, gated=False) in out


def test_an_idle_agy_is_stopped_and_the_next_prompt_starts_one() -> None:
    core = turns.TurnCore(LaunchSettings())
    core.start()
    out = core.handle(ev.ChildSpawned(1))
    assert out == [ev.ArmIdle(1)]
    core.handle(ev.PromptArrived(1))
    core.handle(ev.PromptReady(1))
    out = core.handle(ev.ChildResult(1, success=True, outcome=ev.Outcome.END_TURN))
    assert out[-1] == ev.ArmIdle(2)
    assert core.handle(ev.IdlePassed(1)) == []  # stale: a turn ran since
    out = core.handle(ev.IdlePassed(2))
    assert out == [ev.RetireChild(1, "idle timeout")]
    out = core.handle(ev.ChildExited(1, ERROR))
    assert not any(isinstance(a, ev.SpawnChild) for a in out)
    out = core.handle(ev.PromptArrived(2)) + core.handle(ev.PromptReady(2))
    assert ev.SpawnChild(2, resume=True, gated=False) in out


def test_a_change_during_a_turn_applies_once_when_it_ends() -> None:
    core = turns.TurnCore(LaunchSettings())
    core.start()
    core.handle(ev.ChildSpawned(1))
    core.handle(ev.PromptArrived(1))
    core.handle(ev.PromptReady(1))
    new = attrs.evolve(LaunchSettings(), model="m2")
    assert core.handle(ev.SettingsRequested(new)) == []
    out = core.handle(ev.ChildResult(1, success=True, outcome=ev.Outcome.END_TURN))
    applied = [a for a in out if isinstance(a, ev.ApplySettings)]
    assert applied == [ev.ApplySettings(LaunchSettings(), new, announce=True)]
    assert ev.RetireChild(1, "configuration changed") in out
    assert out.index(applied[0]) < out.index(ev.AnswerPrompt(1, ev.Stop.END_TURN))


def test_a_new_directory_list_respawns_agy_now_or_when_the_turn_ends() -> None:
    """Idle: applied at once and agy is respawned warm with it. During a turn:
    nothing until the turn ends, then applied once, before the answer."""
    core = turns.TurnCore(LaunchSettings(), dirs=("/a",))
    core.start()
    core.handle(ev.ChildSpawned(1))
    out = core.handle(ev.DirectoriesRequested(("/b",)))
    applied = ev.ApplyDirectories(("/a",), ("/b",))
    assert out == [applied, ev.RetireChild(1, "configuration changed")]
    out = core.handle(ev.ChildExited(1, ERROR, clean=True))
    assert [type(a) for a in out] == [ev.SpawnChild]  # warm, with the new list
    core.handle(ev.ChildSpawned(2))
    core.handle(ev.PromptArrived(1))
    core.handle(ev.PromptReady(1))
    assert core.handle(ev.DirectoriesRequested(("/c",))) == []
    assert core.handle(ev.DirectoriesRequested(("/d",))) == []  # the last list wins
    assert core.dirs == ("/b",)
    out = core.handle(ev.ChildResult(2, success=True, outcome=ev.Outcome.END_TURN))
    applied = [a for a in out if isinstance(a, ev.ApplyDirectories)]
    assert applied == [ev.ApplyDirectories(("/b",), ("/d",))]
    assert ev.RetireChild(2, "configuration changed") in out
    assert out.index(applied[0]) < out.index(ev.AnswerPrompt(1, ev.Stop.END_TURN))
    assert core.handle(ev.DirectoriesRequested(("/d",))) == []  # the same list: nothing
    # A move (set_workspace) is the same change: the list kept, the cwd new.
    out = core.handle(ev.DirectoriesRequested(("/d",), "/w2"))
    assert ev.ApplyDirectories(("/d",), ("/d",), "/w2") in out
    assert core.handle(ev.DirectoriesRequested(("/d",), "/w2")) == []


def test_a_reload_respawns_agy_with_nothing_changed() -> None:
    """``settings/reload``: agy respawned warm (and the skills announced again),
    at once when idle, when the turn ends otherwise; the settings stay."""
    core = turns.TurnCore(LaunchSettings(model="m"))
    core.start()
    core.handle(ev.ChildSpawned(1))
    out = core.handle(ev.SettingsRequested(None, reload=True))
    assert ev.RetireChild(1, "configuration changed") in out
    assert any(isinstance(a, ev.SendAnnouncements) and "commands" in a.kinds for a in out)
    assert core.requested == LaunchSettings(model="m")
    core.handle(ev.ChildExited(1, ERROR, clean=True))
    core.handle(ev.ChildSpawned(2))
    core.handle(ev.PromptArrived(1))
    core.handle(ev.PromptReady(1))
    assert core.handle(ev.SettingsRequested(None, reload=True)) == []
    out = core.handle(ev.ChildResult(2, success=True, outcome=ev.Outcome.END_TURN))
    assert ev.RetireChild(2, "configuration changed") in out


def test_a_steer_goes_ahead_of_waiting_prompts_and_idle_it_is_a_prompt() -> None:
    """During turn 1, prompts 2 and 3 wait; steers 4 and 5 run next (in wire
    order), then 2 and 3. With nothing running a steer starts at once."""
    core = turns.TurnCore(LaunchSettings(mode="safe"))
    out = core.start()
    out += core.handle(ev.ChildSpawned(1))
    for seq, steer in ((1, False), (2, False), (3, False), (4, True), (5, True)):
        out += core.handle(ev.PromptArrived(seq, steer=steer))
        out += core.handle(ev.PromptReady(seq))
    started = [a.seq for a in out if isinstance(a, ev.StartTurn)]
    assert started == [1]
    for _ in range(4):
        out += core.handle(ev.ChildResult(1, success=True, outcome=ev.Outcome.END_TURN))
    started = [a.seq for a in out if isinstance(a, ev.StartTurn)]
    assert started == [1, 4, 5, 2, 3]
    idle = core.handle(ev.ChildResult(1, success=True, outcome=ev.Outcome.END_TURN))
    assert not core.busy
    idle += core.handle(ev.PromptArrived(6, steer=True))
    idle += core.handle(ev.PromptReady(6))
    assert [a.seq for a in idle if isinstance(a, ev.StartTurn)] == [6]


def test_output_is_news_until_the_child_spoke_and_the_turn_was_heard() -> None:
    core = turns.TurnCore(LaunchSettings())
    core.start()
    for event in (ev.ChildSpawned(1), ev.PromptArrived(1), ev.PromptReady(1)):
        core.handle(event)
    assert core.output_is_news(1, heard=False)  # the child's first line
    core.handle(ev.ChildOutput(1, heard=False))  # e.g. its init
    assert not core.output_is_news(1, heard=False)
    assert core.output_is_news(1, heard=True)  # the turn's first step
    core.handle(ev.ChildOutput(1, heard=True))
    assert not core.output_is_news(1, heard=True)
    assert not core.output_is_news(2, heard=True)  # no such child


def _denied(incarnation: int, *permissions: str) -> ev.ChildResult:
    return ev.ChildResult(
        incarnation, success=True, outcome=ev.Outcome.END_TURN, denied=frozenset(permissions)
    )


def test_allow_and_retry_is_offered_once_per_permission_and_turn() -> None:
    """Issue 27: agy denying again what was allowed and retried ends the turn
    (saying so) instead of asking again; a permission not retried yet is asked."""
    core = turns.TurnCore(LaunchSettings(mode="safe"))
    core.handle(ev.GateStarted(True))
    core.start()
    core.handle(ev.ChildSpawned(1))
    core.handle(ev.PromptArrived(1))
    core.handle(ev.PromptReady(1))
    out = core.handle(_denied(1, "command"))
    assert out == [ev.AskAllowRetry(1, frozenset({"command"}))]
    core.handle(ev.GateVerified(True))
    out = core.handle(ev.AllowAnswered(1, allowed=True))
    assert ev.StartTurn(1, 2) in out and ev.RetireChild(1, "allowing for the session") in out
    out = core.handle(ev.ChildExited(1, ERROR))
    assert out[0] == ev.SpawnChild(2, resume=True, gated=True)
    core.handle(ev.ChildSpawned(2))
    # Denied again, plus a permission not asked about yet: only that one is asked.
    out = core.handle(_denied(2, "command", "write_file"))
    assert out == [ev.AskAllowRetry(1, frozenset({"write_file"}))]
    core.handle(ev.AllowAnswered(1, allowed=True))
    core.handle(ev.ChildExited(2, ERROR))
    core.handle(ev.ChildSpawned(3))
    out = core.handle(_denied(3, "write_file"))
    assert out[0] == ev.RetryRefused(1, frozenset({"write_file"}))
    assert ev.AnswerPrompt(1, ev.Stop.END_TURN) in out
    assert not any(isinstance(a, ev.AskAllowRetry) for a in out)
    # The next prompt is a new turn: its denials may be asked about again.
    core.handle(ev.PromptArrived(2))
    core.handle(ev.PromptReady(2))
    out = core.handle(_denied(3, "command"))
    assert out == [ev.AskAllowRetry(2, frozenset({"command"}))]


def test_an_ungated_agy_is_observed_when_the_gate_works() -> None:
    """Issue 27: in safe (and autonomous) modes the hook observes every tool
    call, so the files agy changes keep their before-state; no gate, no hook."""
    for mode in ("safe", "autonomous"):
        core = turns.TurnCore(LaunchSettings(mode=mode))
        core.handle(ev.GateStarted(True))
        spawn = ev.SpawnChild(1, resume=False, gated=False, first=True, observed=True)
        assert core.start()[0] == spawn
    core = turns.TurnCore(LaunchSettings(mode="safe"))
    core.handle(ev.GateStarted(False))
    assert core.start()[0] == ev.SpawnChild(1, resume=False, gated=False, first=True)
    core = turns.TurnCore(LaunchSettings(mode="ask"))
    core.handle(ev.GateStarted(True))
    assert ev.SpawnChild(1, resume=False, gated=True, first=True) in core.start()


@given(
    denials=st.lists(
        st.frozensets(st.sampled_from(["command", "write_file", "read_url"]), min_size=1),
        min_size=1,
        max_size=8,
    ),
    allows=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_allow_and_retry_never_asks_twice_for_a_permission_in_a_turn(
    denials: list[frozenset[str]], allows: list[bool]
) -> None:
    """Issue 27: whatever agy denies attempt after attempt and whatever the user
    answers, a permission is asked about at most once per turn, a refusal names
    only what was allowed and retried, and the prompt is answered end_turn
    exactly once, after at most one attempt per permission (plus the first)."""
    core = turns.TurnCore(LaunchSettings(mode="safe"))
    core.handle(ev.GateStarted(True))
    out = core.start()

    def settle(actions: list[ev.Action]) -> list[ev.Action]:
        """Perform the children's lifecycle as the driver would: spawned ones
        come up, retired ones exit; returns every action decided meanwhile."""
        done: list[ev.Action] = []
        while actions:
            done += actions
            followup: list[ev.Action] = []
            for action in actions:
                if isinstance(action, ev.SpawnChild):
                    followup += core.handle(ev.ChildSpawned(action.incarnation))
                elif isinstance(action, ev.RetireChild):
                    followup += core.handle(ev.ChildExited(action.incarnation, ERROR))
                elif isinstance(action, ev.AskAllowRetry):
                    followup += core.handle(ev.GateVerified(True))
            actions = followup
        return done

    seen = settle(out)
    seen += settle(core.handle(ev.PromptArrived(1)) + core.handle(ev.PromptReady(1)))
    asked: list[frozenset[str]] = []
    allowed: set[str] = set()
    for attempt, denied in enumerate(denials):
        sent = [a for a in seen if isinstance(a, ev.SendUserTurn)]
        if any(isinstance(a, ev.AnswerPrompt) for a in seen) or not sent:
            break
        seen = settle(core.handle(_denied(sent[-1].incarnation, *denied)))
        refused = [a for a in seen if isinstance(a, ev.RetryRefused)]
        # Everything denied was allowed and retried already: final, said once.
        assert len(refused) == (denied <= allowed), (seen, allowed)
        for action in seen:
            if isinstance(action, ev.AskAllowRetry):
                assert action.permissions == denied - allowed, (action, allowed)
                assert not action.permissions & set().union(*asked)
                asked.append(action.permissions)
                answer = allows[attempt]
                if answer:
                    allowed |= action.permissions
                seen = settle(core.handle(ev.AllowAnswered(1, answer)))
                break
            if isinstance(action, ev.RetryRefused):
                assert action.permissions == denied <= allowed, (action, allowed)
    answers = [a for a in seen if isinstance(a, ev.AnswerPrompt)]
    if answers:
        assert answers == [ev.AnswerPrompt(1, ev.Stop.END_TURN)]
    assert len(asked) <= 3  # one question per permission at most
