"""The wire fuzzer's pure parts: a plan per seed, and the invariants over a wire log.

A `Plan` is everything one seed does to one bridge process: its environment (mode,
agy start-up delay, escalation graces), how the client answers permission questions,
and a sequence of `Step`s (session/new, prompt, session/cancel, session/close,
session/load, session/resume, ``$/cancel_request``, pauses) over a few sessions, each
session with its own fake-agy scenario and its own working directory (so that a
process scan can tell which session an agy child belongs to). The driver
(tests/test_wire_fuzz.py) performs it and records the wire; `check` then lists the
violations of issue 9's promises found in the log.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

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
ENDING_REQUESTS = frozenset({"session/close", "session/load", "session/resume"})
#: Two agy children of one session both alive this long is a duplicate, not a
#: retiring child still dying (the plan's escalation graces sum to 1 s).
CHILD_OVERLAP_S = 2.5

Op = Literal["new", "prompt", "cancel", "close", "load", "resume", "cancel_request", "sleep"]
_WEIGHTS: tuple[tuple[Op, int], ...] = (
    ("prompt", 34),
    ("sleep", 20),
    ("cancel", 10),
    ("close", 8),
    ("load", 8),
    ("cancel_request", 8),
    ("new", 6),
    ("resume", 6),
)


@attrs.frozen
class Step:
    op: Op
    slot: int = 0
    text: str = ""
    seconds: float = 0.0
    #: cancel_request: which earlier prompt (index into the prompts sent so far, mod len).
    pick: int = 0


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
        lines += [f"  {s.op} slot={s.slot} {s.text or ''}{s.seconds or ''}" for s in self.steps]
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
            scenario = scenarios[slot] if rng.random() < 0.8 else rng.choice(SCENARIOS)
            steps.append(Step("prompt", slot, text=f"[fake-agy:{scenario}] fuzz {index}"))
        elif op == "sleep":
            steps.append(Step("sleep", seconds=round(rng.choice((0, 0.02, 0.1, 0.3, 0.8)), 2)))
        elif op == "cancel_request":
            steps.append(Step("cancel_request", slot, pick=rng.randrange(1000)))
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


# --------------------------------------------------------------------------- the log


@attrs.frozen
class Entry:
    """One message on the wire, in the order the client saw it."""

    index: int
    direction: str  # "c2a" | "a2c" | "eof" (the client closed stdin)
    message: dict[str, Any]


def wire_log(transcript: Iterable[str]) -> list[Entry]:
    """`RawClient.transcript` lines (``{"dir", "raw"}``, a client write may hold
    several lines) as one ordered list of messages; ``{"dir": "eof"}`` lines pass."""
    entries: list[Entry] = []
    for line in transcript:
        record = json.loads(line)
        if record["dir"] == "eof":
            entries.append(Entry(len(entries), "eof", {}))
            continue
        for raw in str(record["raw"]).splitlines():
            try:
                message = json.loads(raw)
            except ValueError:
                continue  # the validator reports unparsable lines
            if isinstance(message, dict):
                entries.append(Entry(len(entries), record["dir"], message))
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
    return problems


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
