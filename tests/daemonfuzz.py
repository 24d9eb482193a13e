"""The daemon fuzzer's pure parts: a plan per seed, and the invariants over
each connection's wire log (tests/integration/test_daemon_fuzz.py runs them).

A `Plan` is what one seed does to one ``agybridge daemon``: two or three
clients (each a raw socket connection, reconnected after it was dropped), one
or two sessions they share, and a sequence of `Step`s: session/new, load and
resume of a session another client drives, prompts (several in one write),
session/cancel, session/set_mode, session/set_config_option, close, delete,
dropping a connection (mid-turn or not), a connection that stops reading (and
later reads again, or is dropped), reconnecting, pauses.

`check_connection` lists the violations found in one connection's log (see
its docstring); everything it checks can be decided from that connection's
wire alone, so no cross-connection timing is assumed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from .wirefuzz import TURN_KINDS

#: Prompt scenarios of the fake agy.
SCENARIOS = ("echo", "echo", "slow", "slow", "tool", "permission-tool", "noise", "big-output")
MODES = ("ask", "safe", "autonomous")
#: The error codes a request of a session may be answered with here: not
#: attached to this client, unknown session, request cancelled (daemon stop).
SESSION_ERRORS = frozenset({-32600, -32002, -32800})
#: A read timeout short enough for a plan to end with a client detached for not reading.
FREEZING_TIMEOUT = "0.3"
#: The session that never existed.
GHOST = -1
GHOST_ID = "sess_" + "0" * 32
OPENS = frozenset({"session/load", "session/resume"})
#: What only the client attached to a session may do.
DRIVING_REQUESTS = frozenset({"session/prompt", "session/set_mode", "session/set_config_option"})

Op = Literal[
    "connect",
    "new",
    "load",
    "resume",
    "prompt",
    "cancel",
    "mode",
    "config",
    "close",
    "delete",
    "drop",
    "stall",
    "unstall",
    "sleep",
    "burst",
]
_WEIGHTS: tuple[tuple[Op, int], ...] = (
    ("prompt", 24),
    ("load", 10),
    ("resume", 6),
    ("sleep", 16),
    ("cancel", 7),
    ("mode", 4),
    ("config", 4),
    ("close", 4),
    ("delete", 2),
    ("drop", 5),
    ("stall", 4),
    ("new", 3),
    ("burst", 8),
)
#: A burst: a load or resume, prompts, and (pick odd) a session/cancel, in one write.
BURST_OPENS = ("session/load", "session/resume")


@attrs.frozen
class Step:
    op: Op
    client: int = 0
    slot: int = 0
    #: prompt: the texts written together; mode/config: a pick among the modes.
    texts: tuple[str, ...] = ()
    pick: int = 0
    seconds: float = 0.0

    def describe(self) -> str:
        if self.op == "sleep":
            return f"sleep {self.seconds}"
        if self.op in ("connect", "drop", "stall", "unstall"):
            return f"{self.op} client={self.client}"
        extra = f" {list(self.texts)}" if self.texts else ""
        if self.op in ("mode", "config"):
            extra = f" pick={self.pick}"
        if self.op == "burst":
            cancel = " + cancel" if self.pick % 2 else ""
            extra = f" [{BURST_OPENS[self.pick // 2 % 2]} + prompts {list(self.texts)}{cancel}]"
        return f"{self.op} client={self.client} slot={self.slot}{extra}"


@attrs.frozen
class Plan:
    seed: int
    clients: int
    env: Mapping[str, str]
    steps: tuple[Step, ...]

    def describe(self) -> str:
        lines = [f"seed {self.seed}: {self.clients} clients, env {dict(self.env)}"]
        lines += [f"  {step.describe()}" for step in self.steps]
        return "\n".join(lines)


def make_plan(seed: int) -> Plan:
    """The plan of one seed (the same on every machine and Python version)."""
    rng = random.Random(seed)
    clients = rng.choice((2, 2, 3))
    env = {
        "AGYBRIDGE_MODE": rng.choice(MODES),
        "FAKE_AGY_SLOW_INTERVAL": "0.05",
        "FAKE_AGY_SLOW_SECONDS": str(rng.choice((0.3, 0.6, 1.2))),
        "FAKE_AGY_SPAWN_CHILDREN": "0",
        "AGYBRIDGE_SIGINT_GRACE_S": "0.5",
        "AGYBRIDGE_SIGTERM_GRACE_S": "0.5",
        "AGYBRIDGE_ON_DISCONNECT": rng.choice(("keep", "keep", "cancel")),
        # A stalled client is detached after this (issue 28). Its own draw, so
        # that the plans of the seeds from before it stay the same.
        "AGYBRIDGE_CLIENT_READ_TIMEOUT_S": random.Random(seed * 7919 + 28).choice(
            (FREEZING_TIMEOUT, FREEZING_TIMEOUT, "1", "10")
        ),
    }
    steps: list[Step] = [Step("connect", c) for c in range(clients)]
    steps.append(Step("new", 0, 0))
    created = 1
    connected = set(range(clients))
    stalled: set[int] = set()

    def slot() -> int:
        return GHOST if rng.random() < 0.05 else rng.randrange(created)

    for _ in range(rng.randint(10, 18)):
        op = rng.choices([w[0] for w in _WEIGHTS], [w[1] for w in _WEIGHTS])[0]
        client = rng.randrange(clients)
        if op == "sleep":
            steps.append(Step("sleep", seconds=rng.choice((0.0, 0.05, 0.2, 0.5))))
            continue
        if client not in connected:
            steps.append(Step("connect", client))
            connected.add(client)
        if op == "drop":
            steps.append(Step("drop", client))
            connected.discard(client)
            stalled.discard(client)
        elif op == "stall":
            if client in stalled:
                steps.append(Step("unstall", client))
                stalled.discard(client)
            else:
                steps.append(Step("stall", client))
                stalled.add(client)
        elif op == "new":
            if created == 2 or client in stalled:
                steps.append(Step("load", client, rng.randrange(created)))
            else:
                steps.append(Step("new", client, created))
                created += 1
        elif op in ("prompt", "burst"):
            target = slot()
            count = rng.choice((1, 1, 2, 3))
            texts = tuple(
                f"[fake-agy:{rng.choice(SCENARIOS)}] c{client} {len(steps)}.{k}"
                for k in range(count)
            )
            steps.append(Step(op, client, target, texts=texts, pick=rng.randrange(4)))
        elif op in ("mode", "config"):
            steps.append(Step(op, client, slot(), pick=rng.randrange(100)))
        else:
            steps.append(Step(op, client, slot()))
    if env["AGYBRIDGE_CLIENT_READ_TIMEOUT_S"] == FREEZING_TIMEOUT:
        # A client that stops reading while its own turn floods it is detached
        # (issue 28). No draws: the steps before stay those of older plans.
        if 0 not in connected:
            steps.append(Step("connect", 0))
        steps += [
            Step("load", 0, 0),
            Step("stall", 0),
            Step("prompt", 0, 0, texts=("[fake-agy:flood] 20000",)),
            Step("sleep", seconds=1.0),
            Step("unstall", 0),
        ]
        stalled.discard(0)
    for client in sorted(stalled):
        steps.append(Step("unstall", client))
    return Plan(seed=seed, clients=clients, env=env, steps=tuple(steps))


# --------------------------------------------------------------------------- the log


@attrs.frozen
class Entry:
    """One message of one connection, in the order the client saw it."""

    index: int
    direction: str  # "c2a" | "a2c"
    message: dict[str, Any]
    #: When the test wrote or read it, on one clock for every connection.
    at: int = 0


def entries(records: Iterable[tuple[str, str, int]]) -> list[Entry]:
    """(direction, raw line, clock stamp) records as messages (unparsable
    lines: the validator's)."""
    out: list[Entry] = []
    for direction, raw, at in records:
        for line in raw.splitlines():
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                out.append(Entry(len(out), direction, message, at))
    return out


#: Requests (of any client) that may end a session's prompts as cancelled.
CANCELLING = frozenset(
    {"session/cancel", "session/close", "session/delete", "session/load", "session/resume"}
)


def check_cancels(logs: Sequence[tuple[str, Sequence[Entry]]], drops: Sequence[int]) -> list[str]:
    """A prompt answered ``cancelled`` has a cause the test wrote before it
    read that answer: a session/cancel, close, delete, load or resume of its
    session on any connection, or a dropped connection (``drops``: when, with
    ``on_disconnect = cancel``). The wires of two connections are not ordered
    against each other, but a cause can only come before its effect."""
    causes: dict[str, list[int]] = {}
    for _, log in logs:
        for entry in log:
            method = entry.message.get("method")
            session = _session_of(entry.message)
            if entry.direction == "c2a" and method in CANCELLING and session is not None:
                causes.setdefault(session, []).append(entry.at)
    problems: list[str] = []
    for name, log in logs:
        prompts = {
            e.message["id"]: e
            for e in log
            if e.direction == "c2a" and e.message.get("method") == "session/prompt"
        }
        for entry in log:
            result = entry.message.get("result")
            prompt = prompts.get(entry.message.get("id")) if "method" not in entry.message else None
            if prompt is None or entry.direction != "a2c" or not isinstance(result, dict):
                continue
            if result.get("stopReason") != "cancelled":
                continue
            session = _session_of(prompt.message) or ""
            found = [at for at in [*causes.get(session, []), *drops] if at < entry.at]
            if not found:
                problems.append(
                    f"{name}: #{entry.index}: prompt id {entry.message['id']} (#{prompt.index}) "
                    f"answered cancelled with no cancel, close, delete, load, resume of "
                    f"{session} or dropped connection before it"
                )
    return problems


def _session_of(message: Mapping[str, Any]) -> str | None:
    params = message.get("params")
    if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
        return str(params["sessionId"])
    return None


def _opened_at(log: Sequence[Entry], requests: Mapping[Any, Entry]) -> dict[str, int]:
    """Session -> when this connection read the last successful answer to its
    session/new, load or resume of it."""
    found: dict[str, int] = {}
    for entry in log:
        request = requests.get(entry.message.get("id"))
        if entry.direction != "a2c" or "method" in entry.message or request is None:
            continue
        result = entry.message.get("result")
        method = request.message.get("method")
        if method == "session/new" and isinstance(result, dict):
            found[str(result.get("sessionId"))] = entry.at
        elif method in OPENS and result is not None:
            found[_session_of(request.message) or ""] = entry.at
    return found


def _update(message: Mapping[str, Any]) -> dict[str, Any]:
    update = (message.get("params") or {}).get("update")
    return update if isinstance(update, dict) else {}


def _agybridge_meta(message: Mapping[str, Any]) -> dict[str, Any]:
    meta = _update(message).get("_meta") or {}
    found = meta.get("agybridge") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def _stop(message: Mapping[str, Any]) -> Any:
    result = message.get("result")
    return result.get("stopReason") if isinstance(result, dict) else None


def check_connection(
    log: Sequence[Entry],
    *,
    complete: bool,
    ghost: str = GHOST_ID,
    ended_elsewhere: Mapping[str, Sequence[int]] | None = None,
    closed_elsewhere: Mapping[str, Sequence[int]] | None = None,
    stalls: Sequence[int] = (),
) -> list[str]:
    """Violations in one connection's wire log:

    - every request is answered at most once, and (``complete``: the
      connection was read to its end, not dropped by the client) exactly once;
      no answer to an id never sent;
    - a request naming a session is answered with a result or one of
      `SESSION_ERRORS` (-32602 for set_config_option/set_mode too); the
      session that never existed is -32002;
    - a prompt, mode or config change for a session this connection has not
      opened (session/new answered here, or a load or resume sent here), or
      was told it lost (``attached: false``) and has not opened again since,
      is refused (-32600 or -32002), never served (or answered ``cancelled``
      when this connection cancelled the session after it);
    - nothing is sent for a session to a connection that has not opened it,
      nor after its ``attached: false`` notice, nor after its own close or
      delete of it was answered, until it sends a load or resume of it again;
    - turn content (`TURN_KINDS`) for a session while this connection has no
      request of it pending belongs to a turn it does not own (it took over a
      running turn): it must be followed by that turn's outcome (a
      ``session_info_update`` with ``_meta.agybridge.turn`` ended or failed)
      or by the end of the connection's attachment, never run into the next
      ``end_turn`` answer of this connection's prompts (that turn ran after
      it); a turn's content after its own answer fails this. A client
      another client's close or delete lets go is sent nothing more (README
      "Two clients"): ``ended_elsewhere`` (session -> when other connections
      wrote a close or delete of it) excuses a turn with no outcome that such
      a close or delete, written after this connection's last open of the
      session, may have cut off;
    - a prompt written together with a later session/cancel of its session
      (one write) never ends ``end_turn``;
    - (``complete``) a connection that still drives a session at its end was
      told ``attached: false`` if another connection's close or delete of it
      (``closed_elsewhere``: when written, answered with a result) was written
      after this connection read the answer to its last open of it — unless
      this connection stalled after that (``stalls``): the notice is given a
      bound, and a client not reading is let go without it (issue 28).
    """
    problems: list[str] = []
    requests: dict[Any, Entry] = {}
    answers: dict[Any, list[Entry]] = {}
    pending: dict[str, set[Any]] = {}
    opened: set[str] = set()  # sessions this connection may hear of
    #: session -> attached (True), told it is not (False), or cannot tell (None):
    #: an ``attached: false`` notice that comes while a load or resume of this
    #: connection is pending may be about the attachment before it or that one.
    driving: dict[str, bool | None] = {}
    opens: dict[str, set[Any]] = {}  # session -> its pending loads and resumes
    noticed: set[Any] = set()  # pending opens an ``attached: false`` came during
    #: session -> the first turn content since nothing was pending and no outcome came.
    unowned: dict[str, Entry] = {}
    refused_when_sent: dict[Any, str] = {}
    cancels: dict[str, list[int]] = {}  # session -> where its session/cancels were sent

    def end_unowned(session: str) -> None:
        unowned.pop(session, None)

    for entry in log:
        message = entry.message
        method = message.get("method")
        session = _session_of(message)
        if entry.direction == "c2a":
            if method == "session/cancel" and session is not None:
                cancels.setdefault(session, []).append(entry.index)
            if not isinstance(method, str) or "id" not in message:
                continue
            requests[message["id"]] = entry
            if session is None:
                continue
            pending.setdefault(session, set()).add(message["id"])
            if method in OPENS:
                opened.add(session)
                opens.setdefault(session, set()).add(message["id"])
                if driving.get(session) is False:
                    driving[session] = None  # attached once it is handled
            elif method in DRIVING_REQUESTS and (
                session not in opened or driving.get(session) is False
            ):
                refused_when_sent[message["id"]] = (
                    "never opened here" if session not in opened else "told attached: false"
                )
            continue
        if method is None:
            request_id = message.get("id")
            request = requests.get(request_id)
            if request is None:
                problems.append(f"#{entry.index}: answer to id {request_id!r}, never sent here")
                continue
            answers.setdefault(request_id, []).append(entry)
            req_method = request.message.get("method")
            req_session = _session_of(request.message)
            result = message.get("result")
            error = message.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            if req_method == "session/new" and isinstance(result, dict):
                new_id = str(result.get("sessionId"))
                opened.add(new_id)
                driving[new_id] = True
            if req_session is None:
                continue
            pending.get(req_session, set()).discard(request_id)
            where = f"#{entry.index}: {req_method} id {request_id} (#{request.index})"
            allowed = SESSION_ERRORS
            if req_method in ("session/set_mode", "session/set_config_option"):
                allowed = allowed | {-32602}
            if error is not None and code not in allowed:
                problems.append(f"{where} answered error {error}")
            why = refused_when_sent.get(request_id)
            cancelled = isinstance(result, dict) and result.get("stopReason") == "cancelled"
            # One that never ran may be answered as this client's later cancel asks.
            own_cancel = cancelled and any(i > request.index for i in cancels.get(req_session, []))
            if own_cancel:
                why = None
            never_existed = req_session == ghost and req_method != "session/delete"
            if never_existed and code != -32002 and not own_cancel:
                problems.append(f"{where} for a session that never existed: {result or error}")
            if why is not None and code not in (-32600, -32002):
                problems.append(
                    f"{where} sent for a session not attached here ({why}) was served: "
                    f"{result if error is None else error}"
                )
            if req_method in ("session/close", "session/delete") and error is None:
                end_unowned(req_session)
                if opens.get(req_session):
                    driving[req_session] = None  # opened again behind it
                else:
                    opened.discard(req_session)
                    driving.pop(req_session, None)
            if req_method in OPENS:
                opens.get(req_session, set()).discard(request_id)
                told = request_id in noticed
                noticed.discard(request_id)
                driving[req_session] = True if error is None and not told else None
            ran = req_method == "session/prompt" and _stop(message) == "end_turn"
            if req_method in OPENS:
                unowned.pop(req_session, None)  # a load's replay, or a turn taken over
            elif ran and not pending.get(req_session) and req_session in unowned:
                # Its turn ran after the one the content was of: that one's
                # outcome came first (a mode change does not end a turn).
                first = unowned.pop(req_session)
                problems.append(
                    f"{where} answered while turn content sent with nothing pending "
                    f"(#{first.index}, {_update(first.message).get('sessionUpdate')}) "
                    "had no outcome: a turn's content after its answer?"
                )
            continue
        if session is None or method not in ("session/update", "session/request_permission"):
            continue
        what = _update(message).get("sessionUpdate") if method == "session/update" else method
        if session not in opened:
            problems.append(f"#{entry.index}: {what} for {session}, not opened here (or closed)")
            continue
        if driving.get(session, True) is False:
            problems.append(
                f"#{entry.index}: {what} for {session} after this connection was told it is "
                "not attached"
            )
            continue
        meta = _agybridge_meta(message)
        if meta.get("attached") is False:
            waiting = opens.get(session, set())
            noticed.update(waiting)
            driving[session] = None if waiting else False
            end_unowned(session)
            continue
        turn = meta.get("turn")
        if isinstance(turn, dict) and turn.get("state") in ("ended", "failed"):
            end_unowned(session)
        elif what in TURN_KINDS and not pending.get(session):
            unowned.setdefault(session, entry)
    for request_id, request in requests.items():
        answer = next(iter(answers.get(request_id, [])), None)
        result = answer.message.get("result") if answer is not None else None
        stop = result.get("stopReason") if isinstance(result, dict) else None
        if request.message.get("method") == "session/prompt" and stop == "end_turn":
            session = _session_of(request.message) or ""
            together = [
                e
                for e in log
                if e.at == request.at
                and e.index > request.index
                and e.message.get("method") == "session/cancel"
                and _session_of(e.message) == session
            ]
            if together:
                problems.append(
                    f"prompt id {request_id} (#{request.index}) answered end_turn though a "
                    f"session/cancel (#{together[0].index}) was written together with it"
                )
        count = len(answers.get(request_id, []))
        if count > 1 or (complete and count == 0):
            what = request.message.get("method")
            problems.append(f"request id {request_id} ({what}, #{request.index}) answered {count}x")
    last_open: dict[str, int] = {}
    for entry in log:
        session = _session_of(entry.message)
        if entry.direction == "c2a" and entry.message.get("method") in OPENS and session:
            last_open[session] = entry.at
    ended = ended_elsewhere or {}
    if complete:
        opened_at = _opened_at(log, requests)
        for session, state in driving.items():
            # Written after this client read its open's answer, the close ran after the open.
            since = opened_at.get(session, -1)
            if state is not True or any(at > since for at in stalls):
                continue
            later = [at for at in (closed_elsewhere or {}).get(session, ()) if at > since]
            if later:
                problems.append(
                    f"{session}: still driven here at the end, though another client's "
                    f"close or delete of it (written at {later[0]}) was answered: never told "
                    "attached: false"
                )
        for session, first in unowned.items():
            if any(at > last_open.get(session, -1) for at in ended.get(session, ())):
                continue  # let go by another client's close or delete: told nothing more
            kind = _update(first.message).get("sessionUpdate")
            problems.append(
                f"#{first.index}: {kind} for {session} with no request pending and no "
                "outcome of the turn after it"
            )
    return problems
