"""The wire fuzzer's pure parts: a plan per seed, and the invariants over a wire log.

A `Plan` is everything one seed does to one bridge process: its environment (mode,
agy start-up delay, escalation graces), how the client answers permission questions,
and a sequence of `Step`s (session/new, prompt, session/cancel, session/close,
session/load, session/resume, session/delete, session/list, session/set_mode,
``$/cancel_request``, pauses, and bursts: a load, resume, close or delete with
requests for the same session written right behind it in one write) over a few
sessions and one that never existed, each
session with its own fake-agy scenario and its own working directory (so that a
process scan can tell which session an agy child belongs to). The driver
(tests/integration/test_wire_fuzz.py) performs it and records the wire; `check` then lists the
violations of issue 9's promises found in the log.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

import attrs
import trio

#: Scenarios a session may run (permission-tool asks questions in gated modes).
SCENARIOS = ("echo", "slow", "tool", "ignore-sigint", "crash", "permission-tool", "noise")
MODES = ("ask", "ask", "safe", "autonomous")
STARTUP_DELAYS_S = (0.0, 0.0, 0.05, 0.2, 0.6)
PERMISSION_ANSWERS = ("allow_once", "reject_once", "cancelled")
#: Update kinds that belong to a turn (or a load's replay): never without a pending request.
TURN_KINDS = frozenset(
    {
        "agent_message_chunk",
        "agent_thought_chunk",
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "usage_update",
    }
)
#: Client requests that may end a session's prompts as ``cancelled``.
ENDING_REQUESTS = frozenset({"session/close", "session/load", "session/resume", "session/delete"})
#: Requests after which a session is gone until it is loaded or resumed again.
GONE_REQUESTS = frozenset({"session/close", "session/delete"})
OPENING_REQUESTS = frozenset({"session/load", "session/resume"})
#: The slot of a session id that never existed.
GHOST = -1
#: A prompt with this scenario ends ``end_turn`` unless something stops it.
ECHO = "[fake-agy:echo]"
#: Two agy children of one session both alive this long is a duplicate, not a
#: retiring child still dying (the plan's escalation graces sum to 1 s).
CHILD_OVERLAP_S = 2.5

Op = Literal[
    "new",
    "prompt",
    "cancel",
    "close",
    "load",
    "resume",
    "delete",
    "list",
    "mode",
    "cancel_request",
    "burst",
    "sleep",
]
_WEIGHTS: tuple[tuple[Op, int], ...] = (
    ("prompt", 30),
    ("sleep", 18),
    ("cancel", 9),
    ("close", 6),
    ("load", 6),
    ("cancel_request", 7),
    ("new", 6),
    ("resume", 4),
    ("burst", 12),
    ("delete", 2),
    ("list", 3),
    ("mode", 3),
)
#: What a burst starts with, and what is written right behind it.
_LEADS: tuple[Op, ...] = ("load", "load", "resume", "close", "close", "delete")
_FOLLOWERS: tuple[tuple[Op, int], ...] = (
    ("prompt", 10),
    ("cancel", 4),
    ("cancel_request", 2),
    ("mode", 2),
    ("list", 2),
    ("close", 1),
    ("load", 4),
)
MODE_IDS = ("ask", "safe", "autonomous")


@attrs.frozen
class Step:
    op: Op
    slot: int = 0
    text: str = ""
    seconds: float = 0.0
    #: cancel_request: which earlier prompt (index into the prompts sent so far, mod len).
    pick: int = 0
    #: burst: the messages written together (the first is a lifecycle request).
    burst: tuple[Step, ...] = ()

    def describe(self) -> str:
        if self.op == "burst":
            return "burst [" + "; ".join(step.describe() for step in self.burst) + "]"
        extra = self.text or (self.seconds if self.op == "sleep" else "")
        if self.op == "cancel_request":
            extra = f"pick={self.pick}"
        return f"{self.op} slot={self.slot} {extra}".rstrip()


@attrs.frozen
class Plan:
    seed: int
    env: Mapping[str, str]
    #: How permission questions are answered, and after how long.
    permission: str
    permission_delay_s: float
    scenarios: tuple[str, ...]
    steps: tuple[Step, ...]

    def describe(self) -> str:
        lines = [f"seed {self.seed}: env {dict(self.env)}, permissions {self.permission}"]
        lines += [f"  sessions' scenarios: {list(self.scenarios)}"]
        lines += [f"  {step.describe()}" for step in self.steps]
        return "\n".join(lines)


def make_plan(seed: int) -> Plan:
    """The plan of one seed (the same on every machine and Python version)."""
    rng = random.Random(seed)
    sessions = rng.randint(1, 3)
    scenarios = tuple(rng.choice(SCENARIOS) for _ in range(sessions))
    env = {
        "AGYBRIDGE_MODE": rng.choice(MODES),
        "FAKE_AGY_STARTUP_DELAY": str(rng.choice(STARTUP_DELAYS_S)),
        "FAKE_AGY_SLOW_INTERVAL": "0.05",
        "FAKE_AGY_SLOW_SECONDS": str(rng.choice((0.3, 1.0, 3.0))),
        "FAKE_AGY_CHILD_SECONDS": "30",
        "AGYBRIDGE_SIGINT_GRACE_S": "0.5",
        "AGYBRIDGE_SIGTERM_GRACE_S": "0.5",
    }
    steps: list[Step] = [Step("new", 0)]
    created = 1

    def prompt_text(slot: int, label: str) -> str:
        own = scenarios[slot] if slot != GHOST else "echo"
        scenario = own if rng.random() < 0.7 else rng.choice(("echo", *SCENARIOS))
        return f"[fake-agy:{scenario}] fuzz {label}"

    def target() -> int:
        # Now and then a session id that never existed.
        return GHOST if rng.random() < 0.08 else rng.randrange(created)

    for index in range(rng.randint(6, 14)):
        op = rng.choices([w[0] for w in _WEIGHTS], [w[1] for w in _WEIGHTS])[0]
        if op == "new":
            if created == sessions:
                op = "prompt"
            else:
                steps.append(Step("new", created))
                created += 1
                continue
        slot = rng.randrange(created)
        if op == "prompt":
            steps.append(Step("prompt", slot, text=prompt_text(slot, str(index))))
        elif op == "sleep":
            steps.append(Step("sleep", seconds=round(rng.choice((0, 0.02, 0.1, 0.3, 0.8)), 2)))
        elif op == "cancel_request":
            steps.append(Step("cancel_request", slot, pick=rng.randrange(1000)))
        elif op == "mode":
            steps.append(Step("mode", slot, text=rng.choice(MODE_IDS)))
        elif op == "burst":
            slot = target()
            burst = [Step(rng.choice(_LEADS), slot)]
            for k in range(rng.randint(1, 4)):
                follower = rng.choices([f[0] for f in _FOLLOWERS], [f[1] for f in _FOLLOWERS])[0]
                if follower == "prompt":
                    burst.append(Step("prompt", slot, text=prompt_text(slot, f"{index}.{k}")))
                elif follower == "mode":
                    burst.append(Step("mode", slot, text=rng.choice(MODE_IDS)))
                elif follower == "cancel_request":
                    burst.append(Step("cancel_request", slot, pick=-1))  # its last prompt
                else:
                    burst.append(Step(follower, slot))
            steps.append(Step("burst", slot, burst=tuple(burst)))
        elif op in ("load", "resume", "close", "delete"):
            steps.append(Step(op, target()))
        else:
            steps.append(Step(op, slot))
    steps.append(Step("sleep", seconds=rng.choice((0.0, 0.2, 1.0))))
    return Plan(
        seed=seed,
        env=env,
        permission=rng.choice(PERMISSION_ANSWERS),
        permission_delay_s=rng.choice((0.0, 0.05, 0.3)),
        scenarios=scenarios,
        steps=tuple(steps),
    )


def selected_seeds(seed_var: str, seeds_var: str, default: int) -> list[int]:
    """``seed_var=S``: seed S alone (a replay); else seeds 0..N-1, N from
    ``seeds_var`` or ``default``."""
    one = os.environ.get(seed_var, "").strip()
    if one:
        return [int(one)]
    return list(range(int(os.environ.get(seeds_var, "") or default)))


class SeedPlan(Protocol):
    @property
    def seed(self) -> int: ...

    def describe(self) -> str: ...


class SeedRun(Protocol):
    """One seed's run, as `report` reads it."""

    @property
    def plan(self) -> SeedPlan: ...

    @property
    def problems(self) -> Sequence[str]: ...


R = TypeVar("R", bound=SeedRun)


class Runnable(Protocol):
    def run(self) -> Awaitable[None]: ...


async def run_all(runs: Iterable[Runnable], parallel: int) -> None:
    """Run the seeds' runs, ``parallel`` at a time."""
    limiter = trio.CapacityLimiter(parallel)

    async def one(run: Runnable) -> None:
        async with limiter:
            await run.run()

    async with trio.open_nursery() as nursery:
        for run in runs:
            nursery.start_soon(one, run)


def assert_none_failing(failing: str) -> None:
    """Fail with the report of the failing seeds, if any."""
    print(failing)  # whole, for the log: pytest shortens assertion messages
    assert not failing, f"{failing.count('replay:')} failing seed(s), see the captured stdout"


def report(
    runs: Iterable[R], *, wire: Callable[[R], str], seed_var: str, test_file: str, shown: int
) -> str:
    """The failing seeds (the first ``shown`` problems of each), where their
    wire logs are (``wire``), their plans and replay commands."""
    lines = []
    for run in runs:
        if not run.problems:
            continue
        seed = run.plan.seed
        lines.append(f"seed {seed}: {len(run.problems)} problem(s)")
        lines += [f"    {p}" for p in run.problems[:shown]]
        lines.append(f"    {wire(run)}")
        lines += [f"    {line}" for line in run.plan.describe().splitlines()]
        lines.append(f"    replay: {seed_var}={seed} .venv/bin/pytest {test_file}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the log


@attrs.frozen
class Entry:
    """One message on the wire, in the order the client saw it."""

    index: int
    direction: str  # "c2a" | "a2c" | "eof" (the client closed stdin)
    message: dict[str, Any]
    #: Which transcript line (one client write) it came in.
    write: int = 0


def wire_log(transcript: Iterable[str]) -> list[Entry]:
    """`RawClient.transcript` lines (``{"dir", "raw"}``, a client write may hold
    several lines) as one ordered list of messages; ``{"dir": "eof"}`` lines pass."""
    entries: list[Entry] = []
    for write, line in enumerate(transcript):
        record = json.loads(line)
        if record["dir"] == "eof":
            entries.append(Entry(len(entries), "eof", {}, write))
            continue
        for raw in str(record["raw"]).splitlines():
            try:
                message = json.loads(raw)
            except ValueError:
                continue  # the validator reports unparsable lines
            if isinstance(message, dict):
                entries.append(Entry(len(entries), record["dir"], message, write))
    return entries


def _session_of(message: Mapping[str, Any]) -> str | None:
    params = message.get("params")
    if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
        return str(params["sessionId"])
    return None


def check(log: Sequence[Entry]) -> list[str]:
    """Violations of: every client request answered exactly once; ``cancelled`` only
    after a cancel/close/load/EOF for that session (or ``$/cancel_request`` of that
    prompt); after a ``cancelled`` answer nothing for the session until a request for
    it is pending or sent; no turn content for a session without a pending request.

    A request the client sent after the cancel that a ``cancelled`` answer comes from
    (pipelined, before that answer arrived) is already its next request: the quiet
    period is over once the client has moved on."""
    problems: list[str] = []
    requests: dict[Any, Entry] = {}
    answers: dict[Any, list[Entry]] = {}
    pending: dict[str, set[Any]] = {}  # session -> ids of its unanswered requests
    quiet_since: dict[str, Entry] = {}  # session -> its last cancelled answer, until a request
    cancels: dict[str, list[int]] = {}  # session -> indices of its session/cancels
    ended: dict[str, list[int]] = {}  # session -> indices of its close/load/resume
    cancelled_ids: dict[Any, int] = {}  # prompt id -> index of its first $/cancel_request
    last_request: dict[str, int] = {}  # session -> index of its last request
    eof_at: int | None = None
    for entry in log:
        message = entry.message
        if entry.direction == "eof":
            eof_at = entry.index
            continue
        session = _session_of(message)
        method = message.get("method")
        if entry.direction == "c2a" and isinstance(method, str):
            if method == "session/cancel" and session is not None:
                cancels.setdefault(session, []).append(entry.index)
            elif method == "$/cancel_request":
                target = (message.get("params") or {}).get("requestId")
                cancelled_ids.setdefault(target, entry.index)
            if "id" in message:
                requests[message["id"]] = entry
                if session is not None:
                    pending.setdefault(session, set()).add(message["id"])
                    quiet_since.pop(session, None)
                    last_request[session] = entry.index
                    if method in ENDING_REQUESTS:
                        ended.setdefault(session, []).append(entry.index)
            continue
        if entry.direction == "a2c" and method is None and "id" in message:
            request = requests.get(message["id"])
            if request is None:
                continue  # our answer to a permission request, or a stray (validator)
            answers.setdefault(message["id"], []).append(entry)
            req_session = _session_of(request.message)
            if req_session is not None:
                pending.get(req_session, set()).discard(message["id"])
            result = message.get("result")
            stop = result.get("stopReason") if isinstance(result, dict) else None
            if request.message.get("method") == "session/prompt" and stop == "cancelled":
                assert req_session is not None
                # A session/cancel covers the prompts sent before it (a watermark);
                # a close/load/resume of the session ends any prompt it finds.
                after = [i for i in cancels.get(req_session, []) if i > request.index]
                own = cancelled_ids.get(message["id"], -1)
                reasons = [
                    bool(after),
                    bool(ended.get(req_session)),
                    own > request.index,
                    eof_at is not None,
                ]
                if not any(reasons):
                    problems.append(
                        f"#{entry.index}: prompt id {message['id']} answered cancelled with no "
                        f"cancel/close/load/$/cancel_request/EOF for it after #{request.index}"
                    )
                # What ended it first: the first cancel after it was sent, its own
                # $/cancel_request, or the first close/load/resume.
                causes = [*after[:1], *([own] if own > request.index else [])]
                causes += ended.get(req_session, [])[:1]
                cause_at = min(causes, default=request.index)
                if last_request.get(req_session, -1) <= max(cause_at, request.index):
                    quiet_since[req_session] = entry
            continue
        if method == "session/update" and session is not None:
            kind = (message.get("params") or {}).get("update", {}).get("sessionUpdate")
            if pending.get(session):
                continue
            cancelled = quiet_since.get(session)
            if cancelled is not None:
                problems.append(
                    f"#{entry.index}: {kind} for {session} after prompt id "
                    f"{cancelled.message['id']} answered cancelled at #{cancelled.index}, "
                    "before any new request for the session"
                )
            elif kind in TURN_KINDS:
                problems.append(
                    f"#{entry.index}: {kind} for {session} while no request of it is pending"
                )
    for request_id, request in requests.items():
        count = len(answers.get(request_id, []))
        if count != 1:
            what = request.message.get("method")
            problems.append(f"request id {request_id} ({what}, #{request.index}) answered {count}x")
    return problems + check_lifecycle(log)


def child_overlaps(samples: Sequence[tuple[float, Mapping[str, frozenset[int]]]]) -> list[str]:
    """Sessions (by working directory) with two agy children alive together for
    `CHILD_OVERLAP_S` or more. ``samples``: (time, {cwd: pids}) from process scans."""
    first_seen: dict[tuple[str, frozenset[int]], float] = {}
    found: dict[str, str] = {}
    for when, by_cwd in samples:
        for cwd, pids in by_cwd.items():
            if len(pids) < 2:
                continue
            key = (cwd, pids)
            start = first_seen.setdefault(key, when)
            if when - start >= CHILD_OVERLAP_S and cwd not in found:
                found[cwd] = (
                    f"{cwd}: agy children {sorted(pids)} alive together for {when - start:.1f} s"
                )
    return list(found.values())


# --------------------------------------------------------------------------- lifecycle


@attrs.frozen
class _Sent:
    entry: Entry
    method: str
    session: str | None

    @property
    def id(self) -> Any:
        return self.entry.message.get("id")


def _error_code(answer: Entry | None) -> Any:
    error = answer.message.get("error") if answer is not None else None
    return error.get("code") if isinstance(error, dict) else None


def _stop(answer: Entry | None) -> Any:
    result = answer.message.get("result") if answer is not None else None
    return result.get("stopReason") if isinstance(result, dict) else None


def _ok(answer: Entry | None) -> bool:
    return answer is not None and "result" in answer.message


def _prompt_text(message: Mapping[str, Any]) -> str:
    blocks = (message.get("params") or {}).get("prompt") or []
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict))


def check_lifecycle(log: Sequence[Entry]) -> list[str]:
    """What the wire order of a session's lifecycle requests promises
    (agent/ordering.py, README "behind"):

    - a prompt sent after a close or delete of its session, and before any
      later load or resume of it, never runs: -32002 (or ``cancelled`` when
      the client cancelled it);
    - after a close or delete is answered, nothing is sent for the session
      until a load or resume of it sent after that close;
    - a prompt written together with a later session/cancel of its session
      (or its own ``$/cancel_request``) never ends ``end_turn``;
    - a mode change sent after a close or delete (before a later load or
      resume) is -32002; one sent right behind a load or resume that succeeds
      is served;
    - an echo prompt sent right behind a load or resume that succeeds (before
      its answer) ends ``end_turn``, unless the client cancelled, closed,
      deleted, loaded or resumed the session after it (or EOF);
    - ``session/list`` shows no session whose delete was answered before the
      list was sent, and every session created and not deleted before it;
    - a load replays each turn once: every prompt of the session answered
      ``end_turn`` before the load was sent, none sent after its answer."""
    problems: list[str] = []
    sent: list[_Sent] = []
    by_id: dict[Any, _Sent] = {}
    answers: dict[Any, Entry] = {}
    created: dict[str, int] = {}  # session -> index of its session/new answer
    eof_at: int | None = None
    for entry in log:
        message = entry.message
        if entry.direction == "eof":
            eof_at = entry.index if eof_at is None else eof_at
        elif entry.direction == "c2a" and isinstance(message.get("method"), str):
            item = _Sent(entry, message["method"], _session_of(message))
            sent.append(item)
            if "id" in message:
                by_id[message["id"]] = item
        elif entry.direction == "a2c" and "method" not in message and message.get("id") in by_id:
            answers.setdefault(message["id"], entry)
            request = by_id[message["id"]]
            result = message.get("result")
            if request.method == "session/new" and isinstance(result, dict):
                created[str(result.get("sessionId"))] = entry.index

    def for_session(session: str | None, methods: frozenset[str]) -> list[_Sent]:
        return [s for s in sent if s.session == session and s.method in methods]

    lifecycle = GONE_REQUESTS | OPENING_REQUESTS
    for prompt in (s for s in sent if s.method == "session/prompt" and "id" in s.entry.message):
        answer = answers.get(prompt.id)
        if answer is None:
            continue  # reported as never answered
        before = [
            s for s in for_session(prompt.session, lifecycle) if s.entry.index < prompt.entry.index
        ]
        after = [
            s
            for s in sent
            if prompt.entry.index < s.entry.index < answer.index
            and (
                (s.session == prompt.session and s.method in lifecycle | {"session/cancel"})
                or (
                    s.method == "$/cancel_request"
                    and (s.entry.message.get("params") or {}).get("requestId") == prompt.id
                )
            )
        ]
        stopped = bool(after) or (eof_at is not None and eof_at < answer.index)
        where = f"#{answer.index}: prompt id {prompt.id} (#{prompt.entry.index})"
        together = [
            s
            for s in after
            if s.entry.write == prompt.entry.write
            and s.method in ("session/cancel", "$/cancel_request")
        ]
        if together and _stop(answer) == "end_turn":
            # Read with it, long before its turn can end: it must stop it.
            problems.append(
                f"{where} answered end_turn though {together[0].method} "
                f"(#{together[0].entry.index}) was written together with it"
            )
        if before and before[-1].method in GONE_REQUESTS:
            gone = before[-1]
            if _stop(answer) == "cancelled" and stopped:
                continue
            if _error_code(answer) != -32002:
                problems.append(
                    f"{where} sent after {gone.method} of its session (#{gone.entry.index}) "
                    f"was answered {answer.message.get('result') or answer.message.get('error')}, "
                    "not -32002"
                )
        elif (
            before
            and before[-1].method in OPENING_REQUESTS
            and ECHO in _prompt_text(prompt.entry.message)
            and _ok(answers.get(before[-1].id))
            and answers[before[-1].id].index > prompt.entry.index
            and not stopped
            and _stop(answer) != "end_turn"
        ):
            opened = before[-1]
            problems.append(
                f"{where} sent right behind {opened.method} (#{opened.entry.index}) answered "
                f"{answer.message.get('result') or answer.message.get('error')}, not end_turn"
            )

    # A mode change: -32002 after a close or delete, served right behind an open.
    for change in (s for s in sent if s.method == "session/set_mode" and "id" in s.entry.message):
        answer = answers.get(change.id)
        before = [
            s for s in for_session(change.session, lifecycle) if s.entry.index < change.entry.index
        ]
        if answer is None or not before or (eof_at is not None and eof_at < answer.index):
            continue  # (at EOF every request still waiting is cancelled: -32800)
        last = before[-1]
        where = f"#{answer.index}: session/set_mode id {change.id} (#{change.entry.index})"
        outcome = answer.message.get("result", answer.message.get("error"))
        if last.method in GONE_REQUESTS and _error_code(answer) != -32002:
            problems.append(f"{where} sent after {last.method} (#{last.entry.index}): {outcome}")
        elif (
            last.method in OPENING_REQUESTS
            and _ok(answers.get(last.id))
            and answers[last.id].index > change.entry.index
            and not _ok(answer)
        ):
            problems.append(
                f"{where} sent right behind {last.method} (#{last.entry.index}): {outcome}"
            )

    # Silence after a close or delete, until the session is opened again.
    for gone in (s for s in sent if s.method in GONE_REQUESTS):
        answer = answers.get(gone.id)
        if not _ok(answer):
            continue
        assert answer is not None
        reopened = [
            s.entry.index
            for s in for_session(gone.session, OPENING_REQUESTS)
            if s.entry.index > gone.entry.index
        ]
        until = min(reopened, default=len(log))
        for entry in log[answer.index + 1 :]:
            if entry.index >= until:
                break
            if (
                entry.direction == "a2c"
                and entry.message.get("method") == "session/update"
                and _session_of(entry.message) == gone.session
            ):
                kind = entry.message["params"].get("update", {}).get("sessionUpdate")
                problems.append(
                    f"#{entry.index}: {kind} for {gone.session} after its {gone.method} "
                    f"was answered at #{answer.index}"
                )
                break

    # session/list against the deletes and creations answered before it.
    for listing in (s for s in sent if s.method == "session/list"):
        answer = answers.get(listing.id)
        result = answer.message.get("result") if answer is not None else None
        if not isinstance(result, dict) or result.get("nextCursor"):
            continue
        assert answer is not None
        shown = {s.get("sessionId") for s in result.get("sessions", [])}
        for session, made_at in created.items():
            deletes = for_session(session, frozenset({"session/delete"}))
            deleted = [
                d
                for d in deletes
                if _ok(answers.get(d.id)) and answers[d.id].index < listing.entry.index
            ]
            if deleted and session in shown:
                problems.append(
                    f"#{answer.index}: session/list (#{listing.entry.index}) shows {session}, "
                    f"deleted at #{answers[deleted[0].id].index}"
                )
            sent_deletes = [d for d in deletes if d.entry.index < answer.index]
            if made_at < listing.entry.index and not sent_deletes and session not in shown:
                problems.append(
                    f"#{answer.index}: session/list (#{listing.entry.index}) misses {session}, "
                    f"created at #{made_at} and never deleted"
                )

    # A load's replay: each turn once, the turns answered before it, none after.
    for load in (s for s in sent if s.method == "session/load"):
        answer = answers.get(load.id)
        if not _ok(answer):
            continue
        assert answer is not None
        earlier = [
            answers[s.id].index
            for s in for_session(load.session, lifecycle)
            if s.entry.index < load.entry.index
            and s.id in answers
            and answers[s.id].index < answer.index
        ]
        start = max([load.entry.index, *earlier])
        replayed = [
            _update_text(e)
            for e in log[start + 1 : answer.index]
            if e.direction == "a2c"
            and e.message.get("method") == "session/update"
            and _session_of(e.message) == load.session
            and e.message["params"].get("update", {}).get("sessionUpdate") == "user_message_chunk"
        ]
        prompts = [
            s
            for s in sent
            if s.method == "session/prompt"
            and s.session == load.session
            and "id" in s.entry.message
        ]
        texts = {_prompt_text(s.entry.message) for s in prompts if s.entry.index < answer.index}
        done = [
            _prompt_text(s.entry.message)
            for s in prompts
            if s.id in answers
            and answers[s.id].index < load.entry.index
            and _stop(answers[s.id]) == "end_turn"
        ]
        where = f"#{answer.index}: session/load (#{load.entry.index}) of {load.session} replayed"
        for text in set(replayed):
            if replayed.count(text) > 1:
                problems.append(f"{where} {text!r} {replayed.count(text)}x")
            if text not in texts:
                problems.append(f"{where} {text!r}, not sent before its answer")
        missing = [t for t in done if t not in replayed]
        if missing:
            problems.append(f"{where} without {missing}, answered end_turn before it")
    return problems


def _update_text(entry: Entry) -> str:
    content = entry.message["params"]["update"].get("content")
    return str(content.get("text", "")) if isinstance(content, dict) else ""
