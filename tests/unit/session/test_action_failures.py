"""A real session (its loop, ``_perform`` and actions) while its actions fail
(hypothesis): journal and index writes raise ``StoreError`` or a bug, agy
cannot be spawned (or spawning it hits a bug), agy's stdin is closed or broken
or writing it hits a bug, the client's sink raises; interleaved with prompts
and steers, cancels, ``$/cancel_request``, settings changes, agy's output,
results, errors, stderr and exits, slow spawns, deadlines and close.

agy is an in-process stand-in (`FakeChild`, in the child slot's place) that
the generated program drives; the store and the client are fakes that fail
when told to. After the program, agy behaves (it answers every prompt it
was sent and exits when killed) and nothing fails any more; then:

* every prompt got exactly one answer: a stop reason, or a `SessionError`
  (a JSON-RPC error with a message) — a bug only if one was put in;
* ``cancelled`` only for a prompt covered by a cancel, ``$/cancel_request``
  or close;
* no update of a turn reached the client after the turn's answer;
* no prompt is left waiting once agy behaves (no hang), and the session
  still serves a prompt (``end_turn``) unless it was closed;
* ``close`` ends the session; ``run`` raises nothing; the only exceptions
  logged are the ones put in.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from unittest import mock

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agybridge.acp import models
from agybridge.agy import (
    AgySpawnError,
    ChildEvent,
    ChildEvents,
    ChildExited,
    ChildStderr,
    EscalationPolicy,
    classify_stderr,
    parse_event,
)
from agybridge.session import child_slot
from agybridge.session.deps import SessionDeps, Timeouts
from agybridge.session.errors import AgyStartError, InternalSessionError, SessionError
from agybridge.session.outlet import Outlet
from agybridge.session.prompts import PromptResult
from agybridge.session.session import Session
from agybridge.session.spec import SessionSpec
from agybridge.store import StoreError

CONVERSATION = "conv-0001"


#: What agy may print on stderr during a turn (contract.md §4).
STDERR = {
    "agy_error": 'AGY_ERROR: {"short_error":"RESOURCE_EXHAUSTED (code 429)","error_code":429}',
    "auth": "error: not logged into Antigravity",
    "other": "warning: something",
}


class Injected(RuntimeError):
    """A bug the test put in."""


#: (where, kind): where the next operation of that kind fails, and how.
FAULTS = [
    ("journal", "store_error"),
    ("journal", "bug"),
    ("save", "store_error"),
    ("save", "bug"),
    ("client", "bug"),
    ("spawn", "spawn_error"),
    ("spawn", "bug"),
    ("stdin", "bug"),
]


@attrs.define
class World:
    """What the fakes share: armed faults and what happened."""

    #: where -> [kind, how many operations there succeed first]
    faults: dict[str, list[Any]] = attrs.Factory(dict)
    fired: list[tuple[str, str]] = attrs.Factory(list)
    children: dict[int, FakeChild] = attrs.Factory(dict)
    #: Killed children exit at once (else at a ``reap`` step).
    quick_exit: bool = True
    #: Set: the next spawns take until a ``started`` step.
    slow_spawn: trio.Event | None = None
    #: The client's view, in order: ("updates", [...]) and ("answer", seq, outcome).
    log: list[tuple[Any, ...]] = attrs.Factory(list)

    def fault(self, where: str) -> None:
        armed = self.faults.get(where)
        if armed is None:
            return
        if armed[1]:
            armed[1] -= 1
            return
        del self.faults[where]
        kind = armed[0]
        self.fired.append((where, kind))
        if kind == "store_error":
            raise StoreError(f"injected: {where} failed in /nowhere/agybridge.db: disk full")
        if kind == "spawn_error":
            raise AgySpawnError("injected: could not start agy")
        raise Injected(f"injected bug in {where}")


class FakeChild:
    """An agy process in the test's hands (the `AgyChild` interface the
    session uses)."""

    def __init__(self, world: World, **kwargs: Any) -> None:
        self.world = world
        self.argv: list[str] = list(kwargs["argv"])
        self.incarnation: int = kwargs["incarnation"]
        self.messages = kwargs["messages"]
        self.received: list[str] = []
        self.replies = 0
        self.steps = 0
        self.said_init = False
        self.killed = False
        self.stdin_broken = False
        self.returncode: int | None = None
        self._exit = trio.Event()
        self.exited = trio.Event()

    @property
    def alive(self) -> bool:
        return not self.exited.is_set()

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.lowlevel.checkpoint()
        if self.incarnation > 1:  # the session's first spawn is not the subject here
            if self.world.slow_spawn is not None:
                await self.world.slow_spawn.wait()
            self.world.fault("spawn")
        self.world.children[self.incarnation] = self
        task_status.started(self)
        await self._exit.wait()
        self.exited.set()
        exited = ChildExited(self.incarnation, self.returncode, self.killed, ())
        await self.messages.send(exited)

    async def send_user(self, text: str) -> None:
        if self.exited.is_set() or self._exit.is_set():
            raise trio.ClosedResourceError("agy's stdin is closed")
        if self.stdin_broken:
            raise trio.BrokenResourceError("agy's stdin: broken pipe")
        self.world.fault("stdin")
        self.received.append(text)
        await trio.lowlevel.checkpoint()

    def close_stdin(self) -> None:
        self.stdin_broken = True

    def kill(self, reason: str) -> None:
        if not self.killed:
            self.killed = True
            if self.world.quick_exit:
                self.exit(1)

    def exit(self, returncode: int) -> bool:
        """Exit (once); whether this call made it exit."""
        if self._exit.is_set():
            return False
        self.returncode = returncode
        self._exit.set()
        return True

    async def stream(self) -> None:
        """agy streams part of its reply to the oldest prompt it was sent."""
        await self._send([self._step(f"reply to {self.received[0]} (streamed)")])

    async def tool(self) -> None:
        """agy starts a command for the oldest prompt it was sent."""
        self.steps += 1
        info = {"name": "run_command", "parameters": {"CommandLine": "true"}}
        step = {
            "conversation_id": CONVERSATION,
            "step_index": self.steps,
            "state": "ACTIVE",
            "step_type": "tool",
            "tool_name": "run_command",
            "tool_info": info,
        }
        await self._send([{"event": "step_update", "step_update": step}])

    async def reply(self) -> None:
        """agy answers the oldest prompt it was sent."""
        text = self.received.pop(0)
        result = {
            "conversation_id": CONVERSATION,
            "status": "SUCCESS",
            "response": f"reply to {text}",
            "num_turns": self.replies + 1,
        }
        await self._send([self._step(f"reply to {text}"), {"event": "result", "result": result}])
        self.replies += 1

    async def stderr(self, text: str) -> None:
        await self.messages.send(ChildStderr(self.incarnation, classify_stderr(text)))

    async def agy_error(self) -> None:
        """agy's turn for the oldest prompt it was sent fails (a quota error)."""
        self.received.pop(0)
        error = "API error: RESOURCE_EXHAUSTED (code 429): Individual quota reached."
        await self._send([{"event": "result", "result": {"status": "ERROR", "error": error}}])

    def _step(self, text: str) -> dict[str, Any]:
        self.steps += 1
        step = {
            "conversation_id": CONVERSATION,
            "step_index": self.steps,
            "state": "DONE",
            "step_type": "agent_response",
            "text_delta": text,
        }
        return {"event": "step_update", "step_update": step}

    async def _send(self, events: list[dict[str, Any]]) -> None:
        if not self.said_init:
            self.said_init = True
            events = [{"event": "init", "conversation_id": CONVERSATION, "init": {}}, *events]
        batch = tuple(ChildEvent(self.incarnation, parse_event(json.dumps(e))) for e in events)
        await self.messages.send(ChildEvents(self.incarnation, batch))


class FakeStore:
    def __init__(self, world: World) -> None:
        self.world = world
        self.turns = 0

    async def upsert_session(self, record: Any) -> None:
        await trio.lowlevel.checkpoint()
        self.world.fault("save")

    async def update_session(self, record: Any) -> bool:
        await self.upsert_session(record)
        return True

    async def record_turn(self, entries: Any, record: Any, *, create: bool = True) -> bool:
        await trio.lowlevel.checkpoint()
        self.world.fault("journal")
        self.turns += 1
        return True

    async def meta_get(self, key: str) -> Any:
        await trio.lowlevel.checkpoint()
        return None

    async def meta_put(self, key: str, value: Any) -> None:
        await trio.lowlevel.checkpoint()

    async def save_edit_log(self, session_id: str, log: Any, blobs: Any) -> bool:
        await trio.lowlevel.checkpoint()
        return True


class _Errors(logging.Handler):
    """Exceptions the session logged."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.exceptions: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.exceptions.append(record.exc_info[1])


@contextmanager
def _logged_errors() -> Iterator[_Errors]:
    handler = _Errors()
    logger = logging.getLogger("agybridge")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _clock() -> trio.testing.MockClock:
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    return clock


class Driver:
    """The agent's side of a session, as agent/handlers.py and
    session_methods.py call it, and what it was answered."""

    def __init__(self, world: World, session: Session, nursery: trio.Nursery) -> None:
        self.world = world
        self.session = session
        self.nursery = nursery
        self.seq = 0
        self.prompts: list[int] = []
        self.answers: dict[int, list[PromptResult | SessionError]] = {}
        self.cancel_marks: list[int] = []
        self.cancel_requested: set[int] = set()
        #: Prompts whose request task was cancelled (its connection went away).
        self.abandoned: set[int] = set()
        self._request_scopes: dict[int, trio.CancelScope] = {}
        self.closing = False
        #: Where in the client's view (`World.log`) close was asked for.
        self.closed_at: int | None = None
        self.close_done = trio.Event()

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def prompt(self, *, steer: bool = False) -> int:
        seq = self.next_seq()
        self.prompts.append(seq)
        if steer:
            self.session.steer_arrived(seq)
        else:
            self.session.prompt_arrived(seq)
        self.nursery.start_soon(self._prompt_task, seq)
        return seq

    def configure(self, effort: str) -> None:
        """``session/set_config_option`` (answered once applied or queued)."""
        self.session.client_request(self.next_seq())
        self.nursery.start_soon(self.session.set_config_option, "effort", effort)

    async def _prompt_task(self, seq: int) -> None:
        outcome: PromptResult | SessionError | None = None
        with trio.CancelScope() as self._request_scopes[seq]:
            try:
                await self.session.mutations.settled()
                outcome = await self.session.prompt(seq, f"p{seq}", f"p{seq}")
            except SessionError as exc:
                outcome = exc
            finally:
                self.session.drop_prompt(seq)
        if outcome is None:  # abandoned: nobody is there to be answered
            return
        self.answers.setdefault(seq, []).append(outcome)
        self.world.log.append(("answer", seq, outcome))

    def cancel(self) -> None:
        seq = self.next_seq()
        self.cancel_marks.append(seq)
        self.session.cancel(seq)

    def cancel_request(self, index: int) -> None:
        waiting = [seq for seq in self.prompts if seq not in self.answers]
        if waiting:
            seq = waiting[index % len(waiting)]
            self.cancel_requested.add(seq)
            self.session.cancel_prompt(seq)

    def abandon(self, index: int) -> None:
        """The request task of a waiting prompt is cancelled, as when its
        connection goes away."""
        waiting = self.waiting()
        if waiting:
            seq = waiting[index % len(waiting)]
            self.abandoned.add(seq)
            self._request_scopes[seq].cancel()

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self.closed_at = len(self.world.log)
            self.nursery.start_soon(self._close_task)

    async def _close_task(self) -> None:
        await self.session.close()
        self.close_done.set()

    def live_children(self) -> list[FakeChild]:
        return [c for c in self.world.children.values() if c.alive]

    async def step(self, op: tuple[Any, ...]) -> None:
        name = op[0]
        children = self.live_children()
        newest = children[-1] if children else None
        if name in ("prompt", "steer"):
            self.prompt(steer=name == "steer")
        elif name == "config":
            self.configure(op[1])
        elif name == "cancel":
            self.cancel()
        elif name == "cancel_request":
            self.cancel_request(op[1])
        elif name == "abandon":
            self.abandon(op[1])
        elif name in ("reply", "stream", "tool", "agy_error"):
            for child in reversed(children):
                if child.received:
                    await getattr(child, name)()
                    break
        elif name == "exit" and newest is not None:
            newest.exit(op[1])
        elif name == "stderr" and newest is not None:
            await newest.stderr(STDERR[op[1]])
        elif name == "slow_spawn":
            if self.world.slow_spawn is None:
                self.world.slow_spawn = trio.Event()
        elif name == "started" and self.world.slow_spawn is not None:
            self.world.slow_spawn.set()
            self.world.slow_spawn = None
        elif name == "stdin_breaks" and newest is not None:
            newest.stdin_broken = True
        elif name == "reap":
            for child in children:
                if child.killed:
                    child.exit(1)
        elif name == "fault":
            (where, kind), skip = op[1], op[2]
            self.world.faults[where] = [kind, skip]
        elif name == "close":
            self.close()
        elif name == "deadline":
            _clock().jump(op[1])

    async def settle_while_agy_behaves(self) -> None:
        """agy answers what it was sent and exits when killed or broken,
        until nothing moves."""
        self.world.faults.clear()
        self.world.quick_exit = True
        waited = False
        for _ in range(200):
            await trio.testing.wait_all_tasks_blocked()
            moved = self.world.slow_spawn is not None
            if self.world.slow_spawn is not None:
                self.world.slow_spawn.set()
                self.world.slow_spawn = None
            for child in self.live_children():
                if child.killed or child.stdin_broken:
                    moved = child.exit(1) or moved
                elif child.received:
                    await child.reply()
                    moved = True
            if not moved and waited:
                return
            if not moved:
                # A second passes: a turn may wait that long for an error's
                # details (timers.ERROR_DETAILS_GRACE_S); no other deadline is near.
                _clock().jump(1.0)
            waited = not moved
        raise AssertionError("the session never settled")

    def waiting(self) -> list[int]:
        return [
            seq for seq in self.prompts if seq not in self.answers and seq not in self.abandoned
        ]


def _check_answers(driver: Driver) -> None:
    world = driver.world
    fired = {kind for _, kind in world.fired}
    answered_at = {entry[1]: at for at, entry in enumerate(world.log) if entry[0] == "answer"}
    for seq in driver.prompts:
        outcomes = driver.answers.get(seq, [])
        if seq in driver.abandoned and not outcomes:
            continue  # its request task was cancelled before an answer came
        assert len(outcomes) == 1, f"prompt {seq} answered {len(outcomes)} times: {outcomes}"
        [outcome] = outcomes
        if isinstance(outcome, SessionError):
            assert outcome.message, f"prompt {seq}: an error without a message"
            if isinstance(outcome, InternalSessionError):
                assert "bug" in fired, f"prompt {seq}: an internal error nobody put in: {outcome}"
            if isinstance(outcome, AgyStartError):
                assert "spawn_error" in fired, f"prompt {seq}: a start error nobody put in"
            continue
        assert outcome.stop_reason in (models.STOP_END_TURN, models.STOP_CANCELLED), outcome
        if outcome.stop_reason == models.STOP_CANCELLED:
            closed_at = driver.closed_at
            covered = (
                (closed_at is not None and closed_at <= answered_at[seq])
                or seq in driver.cancel_requested
                or any(mark > seq for mark in driver.cancel_marks)
            )
            assert covered, f"prompt {seq} answered cancelled without a cancel"


def _check_updates_before_answers(world: World) -> None:
    answered: set[int] = set()
    turn_of: dict[str, int] = {}  # message id -> prompt seq
    for entry in world.log:
        if entry[0] == "answer":
            answered.add(entry[1])
            continue
        for update in entry[1]:
            message_id = getattr(update, "message_id", None)
            content = getattr(update, "content", None)
            text = getattr(content, "text", "")
            seq = None
            if isinstance(update, models.AgentMessageChunk) and text.startswith("reply to p"):
                seq = int(text.removeprefix("reply to p").split()[0])
                if message_id is not None:
                    turn_of[message_id] = seq
            elif message_id is not None:
                seq = turn_of.get(message_id.rsplit("-", 1)[0], turn_of.get(message_id))
            assert seq is None or seq not in answered, (
                f"an update of prompt {seq} after its answer: {update}"
            )


#: The steps a program is made of (repeated: weighted), faults among them
#: failing the next operation of their kind, or the one after it.
OPS = st.sampled_from(
    [("prompt",)] * 6
    + [("reply",)] * 5
    + [("stream",), ("stream",), ("tool",), ("agy_error",), ("steer",)]
    + [("config", "low"), ("config", "high")]
    + [("cancel",)] * 2
    + [("close",), ("stdin_breaks",), ("reap",), ("reap",), ("slow_spawn",), ("started",)]
    + [("stderr", kind) for kind in STDERR]
    + [("cancel_request", 0), ("cancel_request", 1), ("abandon", 0)]
    + [("exit", 0), ("exit", 1), ("exit", 3)]
    + [("deadline", 61.0), ("deadline", 121.0), ("deadline", 301.0)]
    + [("fault", fault, skip) for fault in FAULTS for skip in (0, 1)]
)


def _session(world: World, cwd: str) -> Session:
    deps = SessionDeps(
        agy_bin="agy",
        policy=EscalationPolicy(),
        max_line_bytes=2**20,
        store=FakeStore(world),  # type: ignore[arg-type]
        timeouts=Timeouts(idle_s=120.0),
    )
    outlet_log = world.log

    async def client(session_id: str, updates: Sequence[models.SessionUpdate]) -> None:
        await trio.lowlevel.checkpoint()
        world.fault("client")
        outlet_log.append(("updates", list(updates)))

    spec = SessionSpec(session_id="sess_test", cwd=cwd)
    return Session(spec, deps, Outlet(spec.session_id, client))


#: Real seconds with every task blocked before the mock clock jumps: only a
#: deadlock lasts that long (no threads run here); then `_guarded` fails.
HANG_S = 2.0


async def _guarded(world: World, program: list[tuple[Any, ...]]) -> Driver:
    with trio.fail_after(10**6):
        return await _run_program(world, program)


async def _run_program(world: World, program: list[tuple[Any, ...]]) -> Driver:
    session = _session(world, "/nonexistent-project")
    failure: list[BaseException] = []

    async def run_session(task_status: trio.TaskStatus[None]) -> None:
        try:
            await session.run(task_status=task_status)
        except BaseException as exc:  # checked below
            failure.append(exc)

    async with trio.open_nursery() as nursery:
        await nursery.start(run_session)
        driver = Driver(world, session, nursery)
        for op in program:
            await driver.step(op)
            await trio.testing.wait_all_tasks_blocked()
        await driver.settle_while_agy_behaves()
        assert not driver.waiting(), (
            f"prompts {driver.waiting()} never answered though agy answered all it was sent; "
            f"faults fired: {world.fired}"
        )
        if not driver.closing:
            # The session goes on: a new prompt is served (a start-up failure
            # agy reported is the next prompt's answer, once).
            for _ in range(2):
                seq = driver.prompt()
                await driver.settle_while_agy_behaves()
                [outcome] = driver.answers.get(seq, [None])  # type: ignore[list-item]
                assert outcome is not None, f"the probe prompt {seq} was never answered"
                if isinstance(outcome, PromptResult):
                    break
            assert isinstance(outcome, PromptResult), f"the session is unusable: {outcome!r}"
            assert outcome.stop_reason == models.STOP_END_TURN, outcome
        driver.close()
        await driver.settle_while_agy_behaves()
        assert driver.close_done.is_set(), "close never returned"
    assert not failure, f"the session's run raised {failure[0]!r}"
    return driver


def _run(program: list[tuple[Any, ...]], *, quick_exit: bool = True) -> Driver:
    """Run ``program`` against a fresh session, then check the promises."""
    world = World(quick_exit=quick_exit)

    def make_child(**kwargs: Any) -> FakeChild:
        return FakeChild(world, **kwargs)

    with mock.patch.object(child_slot, "AgyChild", make_child), _logged_errors() as errors:
        clock = trio.testing.MockClock(autojump_threshold=HANG_S)
        driver = trio.run(_guarded, world, program, clock=clock)
    _check_answers(driver)
    _check_updates_before_answers(world)
    unexpected = [exc for exc in errors.exceptions if not isinstance(exc, Injected)]
    assert not unexpected, f"exceptions nobody put in: {unexpected!r}"
    return driver


@settings(max_examples=300, deadline=None)
@given(program=st.lists(OPS, max_size=30), quick_exit=st.booleans())
def test_actions_that_fail_never_lose_a_prompt_or_hang_the_session(
    program: list[tuple[Any, ...]], quick_exit: bool
) -> None:
    """Whatever fails where, every prompt is answered once, nothing of a turn
    follows its answer, the session goes on, and close ends it."""
    _run(program, quick_exit=quick_exit)


def test_a_bug_in_the_journal_write_of_a_cancelled_turn_still_respawns_agy() -> None:
    """The journal write before a cancelled turn's answer raises: the warm
    respawn decided with that answer still happens, so the next prompt is
    served (it waited forever for an agy that was never started)."""
    driver = _run([("fault", ("journal", "bug"), 0), ("prompt",), ("cancel",)])
    [outcome] = driver.answers[1]
    assert isinstance(outcome, PromptResult)
    assert outcome.stop_reason == models.STOP_CANCELLED


def test_a_bug_sending_a_turn_start_still_starts_agy_for_the_next_prompt() -> None:
    """The client sink raises on a turn's first update while agy had exited
    on its own: the prompt fails with the bug, and the spawn decided with it
    still happens, so the next prompt is served."""
    driver = _run([("exit", 0), ("fault", ("client", "bug"), 0), ("prompt",)])
    [outcome] = driver.answers[1]
    assert isinstance(outcome, InternalSessionError)


def test_a_bug_while_spawning_agy_fails_the_waiting_turn_and_the_next_spawn_works() -> None:
    """Spawning agy raises something other than a spawn error (a bug): the
    turn waiting for that agy fails with it, and the next prompt gets a new
    agy (the session waited forever for the one that never started)."""
    driver = _run([("prompt",), ("fault", ("spawn", "bug"), 0), ("exit", 0)])
    [outcome] = driver.answers[1]
    assert isinstance(outcome, InternalSessionError)
    assert "injected bug in spawn" in outcome.message


def test_a_bug_handing_over_a_turns_last_updates_still_answers_it() -> None:
    """The client sink raises on the updates mapped from agy's last output of a
    turn, held until the turn's result is decided: the actions decided with
    that result (its answer among them) are still performed, the answer says
    the bug (it waited forever: the core had decided, nothing was performed)."""
    driver = _run([("prompt",), ("fault", ("client", "bug"), 0), ("reply",)])
    [outcome] = driver.answers[1]
    assert isinstance(outcome, InternalSessionError)
    assert "injected bug in client" in outcome.message


def test_a_bug_handing_over_a_read_of_agy_output_fails_the_turn_not_the_session() -> None:
    """The client sink raises on the updates mapped from one read of agy's
    output (nothing decided with them): the running turn fails with the bug and
    the session goes on (the exception left the session loop: the session
    ended, every prompt answered "the session failed")."""
    driver = _run([("prompt",), ("fault", ("client", "bug"), 0), ("stream",)])
    [outcome] = driver.answers[1]
    assert isinstance(outcome, InternalSessionError)
    assert "injected bug in client" in outcome.message


def test_a_bug_reporting_unfinished_tool_calls_still_answers_the_prompt() -> None:
    """The client sink raises on the last updates of a cancelled turn (its
    unfinished tool call, sent with the answer): the prompt is answered all the
    same (it waited forever, even past close: its answer was taken from the
    session's book first)."""
    driver = _run([("prompt",), ("tool",), ("fault", ("client", "bug"), 0), ("cancel",)])
    [outcome] = driver.answers[1]
    assert isinstance(outcome, PromptResult)
    assert outcome.stop_reason == models.STOP_CANCELLED


def test_a_bug_journalling_a_turn_fails_that_turn_only() -> None:
    """The journal write of a finished turn raises while the next prompt's turn
    starts with it: the finished turn's answer says the bug, the next turn runs
    on (it failed with the other turn's bug, its agy killed)."""
    program = [("prompt",), ("prompt",), ("fault", ("journal", "bug"), 0), ("reply",), ("reply",)]
    driver = _run(program)
    first, second = driver.answers[1][0], driver.answers[2][0]
    assert isinstance(first, InternalSessionError)
    assert "injected bug in journal" in first.message
    assert isinstance(second, PromptResult), second
    assert second.stop_reason == models.STOP_END_TURN


def test_a_bug_handing_over_a_turns_last_updates_fails_that_turn_only() -> None:
    """As above, with the next prompt's turn starting as the first ends: only
    the first turn's answer says the bug; the next runs on."""
    program = [("prompt",), ("prompt",), ("fault", ("client", "bug"), 0), ("reply",), ("reply",)]
    driver = _run(program)
    first, second = driver.answers[1][0], driver.answers[2][0]
    assert isinstance(first, InternalSessionError)
    assert isinstance(second, PromptResult), second
    assert second.stop_reason == models.STOP_END_TURN


@pytest.mark.parametrize("first", ["journal", "client"])
def test_a_second_bug_in_the_actions_performed_after_one_fails_its_own_turn(first: str) -> None:
    """A finished turn's journal write or last updates fail, and then sending the
    next prompt (started with it) to agy fails too: the next turn fails with
    its own bug (it waited forever for a reply to a prompt agy never got)."""
    program = [
        ("prompt",),
        ("prompt",),
        ("fault", (first, "bug"), 0),
        ("fault", ("stdin", "bug"), 0),
        ("reply",),
    ]
    driver = _run(program)
    first_answer, second_answer = driver.answers[1][0], driver.answers[2][0]
    assert isinstance(first_answer, InternalSessionError)
    assert f"injected bug in {first}" in first_answer.message
    assert isinstance(second_answer, InternalSessionError)
    assert "injected bug in stdin" in second_answer.message


def test_a_bug_journalling_a_turn_whose_request_went_away_fails_that_turn_only() -> None:
    """As above for a turn whose request task was cancelled (its connection went
    away), so the turn is cancelled: the core does not keep such a prompt among
    the answered ones, and the bug failed the next turn, started with that answer."""
    program = [("prompt",), ("prompt",), ("fault", ("journal", "bug"), 0), ("abandon", 0)]
    driver = _run(program)
    assert driver.abandoned == {1}
    [second] = driver.answers[2]
    assert isinstance(second, PromptResult), second
    assert second.stop_reason == models.STOP_END_TURN


def test_a_turns_opening_update_comes_before_its_answer_when_agy_wrote_nothing() -> None:
    """The turn's session_info_update (updatedAt, title) waits for the turn's
    first hand-over; cancelled before agy wrote anything, the answer sends it."""
    driver = _run([("prompt",), ("cancel",)])
    [outcome] = driver.answers[1]
    assert isinstance(outcome, PromptResult)
    kinds = [
        "answer" if entry[0] == "answer" else type(update).__name__
        for entry in driver.world.log
        for update in (entry[2:3] if entry[0] == "answer" else entry[1])
    ]
    assert kinds[:2] == ["SessionInfoUpdate", "answer"], kinds


def test_a_bug_announcing_settings_as_a_turn_ends_stops_the_next_turn_starting() -> None:
    """A setting changed during turn 1 is applied and announced as it ends, and
    turn 2 starts in the same batch; the client raises on the announcement: the
    bug fails turn 2 (the running turn once the batch was decided), and the
    start of turn 2 decided before is not performed for an answered prompt
    (it asserted the prompt was still there, a bug of its own)."""
    program = [("prompt",), ("prompt",), ("config", "low"), ("fault", ("client", "bug"), 1)]
    driver = _run([*program, ("reply",)], quick_exit=False)
    first, second = driver.answers[1][0], driver.answers[2][0]
    assert isinstance(first, PromptResult), first
    assert isinstance(second, InternalSessionError), second
    assert "injected bug in client" in second.message
