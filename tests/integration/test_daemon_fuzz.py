"""A seeded fuzzer of two or three clients of one daemon (``agybridge daemon``).

Each seed (`daemonfuzz.make_plan`) starts one daemon with the fake agy (its own
socket, store and state directories) and performs a plan over raw socket
connections to it: session/new, load and resume of a session another client
drives, prompts (several in one write), session/cancel, session/set_mode,
session/set_config_option, close, delete, a connection dropped (mid-turn or
not), one that stops reading for a while, reconnecting, pauses. Then every
connection reads again, the answers still due are awaited, the daemon is
stopped (``_agybridge/stop``) and must exit 0 and leave no process behind.
Every connection's raw wire is schema-checked (`acp_wire.WireValidator`) and
checked by `daemonfuzz.check_connection`.

``AGYBRIDGE_DAEMON_FUZZ_SEEDS=N`` runs seeds 0..N-1 (default `DEFAULT_SEEDS`,
sized for well under half a minute of a 2-core CI machine);
``AGYBRIDGE_DAEMON_FUZZ_SEED=S`` runs seed S alone (the replay command printed
for a failing seed). Timing is part of what is fuzzed, so a replay runs the
same plan but may not hit the same race.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, get_args

import attrs
import pytest
import trio

from ..acp_wire import BRIDGE_CMD, Harness, WireValidator, tail, wait_no_leftovers
from ..daemonfuzz import (
    BURST_OPENS,
    GHOST,
    GHOST_ID,
    Entry,
    Op,
    Plan,
    Step,
    check_cancels,
    check_connection,
    entries,
    make_plan,
)
from ..wirefuzz import assert_none_failing, run_all, selected_seeds
from ..wirefuzz import report as failing_report

pytestmark = pytest.mark.integration

SEED_VAR = "AGYBRIDGE_DAEMON_FUZZ_SEED"
SEEDS_VAR = "AGYBRIDGE_DAEMON_FUZZ_SEEDS"
DEFAULT_SEEDS = 8
#: Daemons run side by side (most of a seed's time is agy start-ups and pauses).
PARALLEL = 3
SEED_TIMEOUT_S = 60
#: How long the answers still due at the end may take (turns end by themselves).
SETTLE_S = 20
START_S = 20


class Conn:
    """One raw connection to the daemon: everything on it recorded and validated."""

    def __init__(self, name: str, stream: trio.SocketStream, clock: Iterator[int]) -> None:
        self.name = name
        #: Stamps every record: the order the test wrote and read, across connections.
        self.clock = clock
        self.stream = stream
        self.validator = WireValidator()
        self.records: list[tuple[str, str, int]] = []
        self.received: list[dict[str, Any]] = []
        self.next_id = 0
        self.eof = False
        self.dropped = False
        #: When it stopped reading (clock stamps).
        self.stalls: list[int] = []
        #: Called whenever something arrives (the run waits on every connection).
        self.on_wake: Callable[[], None] | None = None
        self.reading = trio.Event()
        self.reading.set()
        self._changed = trio.Event()
        self._send_lock = trio.Lock()

    async def send(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            self.validator.feed("c2a", message)
        data = "".join(json.dumps(m) + "\n" for m in messages)
        async with self._send_lock:  # the reader answers questions meanwhile
            self.records.append(("c2a", data, next(self.clock)))
            await self.stream.send_all(data.encode())

    def request(self, method: str, params: Any) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        return message

    async def call(self, method: str, params: Any) -> dict[str, Any] | None:
        """Send one request and wait for its answer (None: the connection ended)."""
        message = self.request(method, params)
        await self.send([message])
        return await self.wait_for(lambda: self.answer(message["id"]))

    def answer(self, request_id: int) -> dict[str, Any] | None:
        for message in self.received:
            if "method" not in message and message.get("id") == request_id:
                return message
        return None

    def unanswered(self, lost: Mapping[str, int] | None = None) -> list[int]:
        """Requests not answered yet, but (``lost``: session -> when a client was
        let go from it for not reading, issue 28) those of such a session sent
        before: a permission question of theirs waits for a client to open the
        session again (these clients do not), so their answers may come only
        at stop."""
        log = self.log()
        lost = lost or {}
        sent = [  # requests only: the answers to the daemon's questions have ids too
            e.message["id"]
            for e in log
            if e.direction == "c2a"
            and "id" in e.message
            and "method" in e.message
            and e.at > lost.get(str(e.message.get("params", {}).get("sessionId")), -1)
        ]
        sent = [i for i in sent if isinstance(i, int)]
        return [i for i in sent if self.answer(i) is None]

    def lost_for_not_reading(self) -> dict[str, int]:
        return _lost_for_not_reading(self.log())

    async def wait_for(self, condition: Any) -> Any:
        while True:
            value = condition()
            if value or self.eof:
                return value
            await self._changed.wait()

    async def read(self) -> None:
        buffer = b""
        try:
            while True:
                await self.reading.wait()
                chunk = await self.stream.receive_some()
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    await self._on_line(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            if buffer:
                self.records.append(("a2c", buffer.decode("utf-8", "replace"), next(self.clock)))
                # A line cut off by the daemon's end is its fault; one the client
                # cut off by dropping the connection mid-line is not.
                if not self.dropped:
                    self.validator.feed_line("a2c", buffer)
            self.eof = True
            self._wake()

    async def _on_line(self, line: bytes) -> None:
        self.records.append(("a2c", line.decode("utf-8", "replace"), next(self.clock)))
        self.validator.feed_line("a2c", line)
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        self.received.append(message)
        self._wake()
        if message.get("method") == "session/request_permission" and "id" in message:
            options = message.get("params", {}).get("options") or []
            outcome: dict[str, Any] = {"outcome": "cancelled"}
            if options:
                outcome = {"outcome": "selected", "optionId": options[0]["optionId"]}
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}}
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self.send([answer])

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        if self.on_wake is not None:
            self.on_wake()

    def log(self) -> list[Entry]:
        return entries(self.records)


def _lost_for_not_reading(log: list[Entry]) -> dict[str, int]:
    """Session -> when this connection was told it was let go for not reading."""
    lost: dict[str, int] = {}
    for entry in log:
        update = (entry.message.get("params") or {}).get("update") or {}
        meta = (update.get("_meta") or {}).get("agybridge") or {}
        if meta.get("attached") is False and "did not read" in str(meta.get("reason")):
            lost.setdefault(str(entry.message["params"].get("sessionId")), entry.at)
    return lost


class Run:
    """One seed's daemon, its connections, and what was found."""

    def __init__(self, plan: Plan, tmp: Path, socket_dir: Path) -> None:
        self.plan = plan
        self.harness = Harness(tmp)
        self.socket = socket_dir / "run" / "agybridge.sock"
        self.problems: list[str] = []
        self.conns: list[Conn] = []  # every connection ever made, in order
        self.current: dict[int, Conn] = {}
        self.session_ids: dict[int, str] = {}
        self.clock = itertools.count()
        #: When each dropped connection was dropped (clock stamps).
        self.drops: list[int] = []
        #: When the stop was sent (every answer read after it may be cancelled).
        self.stop_at = 2**62
        #: Set when anything arrives on any connection.
        self._arrived = trio.Event()
        self.modes: list[str] = []
        self.cwds = [tmp / f"ws{slot}" for slot in range(2)]
        for cwd in self.cwds:
            cwd.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        return self.harness.env("echo", AGYBRIDGE_SOCKET=str(self.socket), **self.plan.env)

    async def run(self) -> None:
        try:
            with trio.fail_after(SEED_TIMEOUT_S):
                await self._run()
        except* trio.TooSlowError:
            self.problems.append(f"seed took longer than {SEED_TIMEOUT_S} s")
        finally:
            survivors = await wait_no_leftovers(self.harness.marker, 5.0)
            if survivors:
                self.problems.append(f"processes left after the daemon exited: {survivors}")
            self.harness.kill_leftovers()
            self._write_logs()

    async def _run(self) -> None:
        ready_r, ready_w = os.pipe()
        stderr_path = self.harness.tmp_path / "daemon-stderr.log"
        with stderr_path.open("ab") as stderr:
            process = await trio.lowlevel.open_process(
                [*BRIDGE_CMD, "daemon", "--ready-fd", str(ready_w)],
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                env=self.env(),
                cwd=str(self.harness.tmp_path),
                pass_fds=(ready_w,),
            )
        os.close(ready_w)
        try:
            async with trio.lowlevel.FdStream(ready_r) as ready:
                with trio.fail_after(START_S):
                    byte = await ready.receive_some(1)
            if byte != b"R":
                self.problems.append(f"the daemon did not start: {tail(stderr_path)}")
                return
            async with trio.open_nursery() as nursery:
                for step in self.plan.steps:
                    await self._perform(nursery, step)
                await self._settle()
                await self._stop()
                with trio.move_on_after(SETTLE_S):
                    for conn in self.conns:
                        await conn.wait_for(lambda c=conn: c.eof)
                for conn in self.conns:
                    if not conn.eof:
                        self.problems.append(f"{conn.name}: no EOF after the daemon stopped")
                        await conn.stream.aclose()
            with trio.move_on_after(SETTLE_S):
                await process.wait()
            if process.returncode is None:
                self.problems.append("the daemon still runs after stop")
            elif process.returncode != 0:
                self.problems.append(f"the daemon exited {process.returncode}")
        finally:
            if process.returncode is None:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()
        self._check()

    async def _perform(self, nursery: trio.Nursery, step: Step) -> None:
        if step.op == "sleep":
            await trio.sleep(step.seconds)  # a pause is part of the interleaving
            return
        if step.op == "connect":
            await self._connect(nursery, step.client)
            return
        conn = self.current.get(step.client)
        if conn is None:
            return
        if step.op == "drop":
            conn.dropped = True
            self.drops.append(next(self.clock))
            del self.current[step.client]
            await conn.stream.aclose()
            conn.reading.set()  # its reader sees the closed stream
        elif step.op == "stall":
            if conn.reading.is_set():  # its reader may wait on the unset one already
                conn.reading = trio.Event()
            conn.stalls.append(next(self.clock))
        elif step.op == "unstall":
            conn.reading.set()
        elif step.op == "new":
            cwd = str(self.cwds[step.slot])
            answer = await conn.call("session/new", {"cwd": cwd, "mcpServers": []})
            result = (answer or {}).get("result")
            if isinstance(result, dict):
                self.session_ids[step.slot] = result["sessionId"]
                modes = result.get("modes") or {}
                self.modes = [m["id"] for m in modes.get("availableModes", [])]
            elif not conn.eof:
                self.problems.append(f"{conn.name}: session/new failed: {answer}")
        else:
            message = self._message(conn, step)
            if message:
                try:
                    await conn.send(message)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    self.problems.append(f"{conn.name}: the daemon closed the connection: {exc}")

    async def _connect(self, nursery: trio.Nursery, client: int) -> None:
        stream = await trio.open_unix_socket(str(self.socket))
        conn = Conn(f"client {client} connection {len(self.conns)}", stream, self.clock)
        conn.on_wake = self._wake_any
        self.conns.append(conn)
        self.current[client] = conn
        nursery.start_soon(conn.read)
        init = await conn.call(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
            },
        )
        if not init or "result" not in init:
            self.problems.append(f"{conn.name}: initialize failed: {init}")

    def _message(self, conn: Conn, step: Step) -> list[dict[str, Any]]:
        session = GHOST_ID if step.slot == GHOST else self.session_ids.get(step.slot)
        if session is None:
            return []
        cwd = str(self.cwds[max(step.slot, 0)])
        params: dict[str, Any] = {"sessionId": session}
        if step.op == "prompt":
            return [
                conn.request(
                    "session/prompt", {**params, "prompt": [{"type": "text", "text": text}]}
                )
                for text in step.texts
            ]
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": params}
        if step.op == "cancel":
            return [cancel]
        if step.op == "burst":
            opening = BURST_OPENS[step.pick // 2 % 2]
            messages = self._message(conn, attrs.evolve(step, op=opening.split("/")[1]))
            messages += self._message(conn, attrs.evolve(step, op="prompt"))
            return messages + ([cancel] if step.pick % 2 else [])
        if step.op in ("mode", "config"):
            if not self.modes:
                return []
            mode = self.modes[step.pick % len(self.modes)]
            if step.op == "mode":
                return [conn.request("session/set_mode", {**params, "modeId": mode})]
            return [
                conn.request(
                    "session/set_config_option", {**params, "configId": "mode", "value": mode}
                )
            ]
        if step.op == "load":
            return [conn.request("session/load", {**params, "cwd": cwd, "mcpServers": []})]
        if step.op == "resume":
            return [conn.request("session/resume", {**params, "cwd": cwd})]
        return [conn.request(f"session/{step.op}", params)]  # close, delete

    def _lost(self) -> dict[str, int]:
        """Session -> when the first client was let go from it for not reading."""
        lost: dict[str, int] = {}
        for conn in self.conns:
            for session, at in conn.lost_for_not_reading().items():
                lost[session] = min(at, lost.get(session, at))
        return lost

    def _due(self) -> dict[str, list[int]]:
        lost = self._lost()
        due = {c.name: c.unanswered(lost) for c in self.current.values() if not c.eof}
        return {name: ids for name, ids in due.items() if ids}

    def _wake_any(self) -> None:
        self._arrived.set()
        self._arrived = trio.Event()

    async def _settle(self) -> None:
        """Every connection reads again; the answers still due arrive."""
        for conn in self.current.values():
            conn.reading.set()
        with trio.move_on_after(SETTLE_S):
            while True:
                arrived = self._arrived
                if not self._due():
                    break
                await arrived.wait()
        for name, ids in self._due().items():
            self.problems.append(
                f"{name}: requests {ids} not answered {SETTLE_S} s after the plan ended"
            )

    async def _stop(self) -> None:
        stream = await trio.open_unix_socket(str(self.socket))
        conn = Conn("stop", stream, self.clock)
        self.stop_at = next(self.clock)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.read)
            answer = await conn.call("_agybridge/stop", {"timeoutS": 5})
            if not answer or "result" not in answer:
                self.problems.append(f"_agybridge/stop: {answer}")
            await conn.wait_for(lambda: conn.eof)

    def _check(self) -> None:
        cancelling = self.plan.env.get("AGYBRIDGE_ON_DISCONNECT") == "cancel"
        logs = [(conn.name, conn.log()) for conn in self.conns]
        # Written before a prompt's cancelled answer was read, the stop caused it.
        causes = [*(self.drops if cancelling else []), self.stop_at]
        self.problems += check_cancels(logs, causes)

        def ended_by_others(conn: Conn) -> dict[str, list[int]]:
            ended: dict[str, list[int]] = {}
            for other, log in logs:
                for entry in log if other != conn.name else ():
                    session = entry.message.get("params", {}).get("sessionId")
                    if entry.direction == "c2a" and entry.message.get("method") in (
                        "session/close",
                        "session/delete",
                    ):
                        ended.setdefault(str(session), []).append(entry.at)
            return ended

        def closed_by_others(conn: Conn) -> dict[str, list[int]]:
            closed: dict[str, list[int]] = {}
            for other in self.conns:
                if other is conn:
                    continue
                for entry in other.log():
                    method = entry.message.get("method")
                    if entry.direction != "c2a" or method not in (
                        "session/close",
                        "session/delete",
                    ):
                        continue
                    answer = other.answer(entry.message.get("id"))
                    if answer is not None and "result" in answer:
                        session = str(entry.message.get("params", {}).get("sessionId"))
                        closed.setdefault(session, []).append(entry.at)
            return closed

        for conn in self.conns:
            found = check_connection(
                conn.log(),
                complete=not conn.dropped,
                ended_elsewhere=ended_by_others(conn),
                closed_elsewhere=closed_by_others(conn),
                stalls=conn.stalls,
            )
            found += [f"schema: {p}" for p in conn.validator.problems]
            self.problems += [f"{conn.name}: {p}" for p in found]

    def _write_logs(self) -> None:
        for number, conn in enumerate(self.conns):
            path = self.harness.tmp_path / f"wire-{number}.ndjson"
            path.write_text(
                "\n".join(
                    json.dumps({"dir": d, "raw": raw, "at": at}) for d, raw, at in conn.records
                )
            )


def report(runs: list[Run]) -> str:
    return failing_report(
        runs,
        wire=lambda run: f"wire logs: {run.harness.tmp_path}/wire-*.ndjson (connections in order)",
        seed_var=SEED_VAR,
        test_file="tests/integration/test_daemon_fuzz.py",
        shown=10,
    )


async def run_seeds(seeds: list[int], tmp_path: Path) -> list[Run]:
    # A Unix socket path must fit in 108 bytes: pytest's tmp_path may not.
    short = Path(tempfile.mkdtemp(prefix="agyf-"))
    try:
        runs = [Run(make_plan(seed), tmp_path / f"seed{seed}", short / str(seed)) for seed in seeds]
        for seed in seeds:
            (short / str(seed)).mkdir(mode=0o700)
        await run_all(runs, PARALLEL)
        return runs
    finally:
        shutil.rmtree(short, ignore_errors=True)


async def test_daemon_fuzz(tmp_path: Path) -> None:
    """Every selected seed keeps every promise (see daemonfuzz.check_connection)."""
    runs = await run_seeds(selected_seeds(SEED_VAR, SEEDS_VAR, DEFAULT_SEEDS), tmp_path)
    assert_none_failing(report(runs))


def test_plans_are_deterministic_and_varied() -> None:
    """The same seed gives the same plan; the default seeds cover every operation."""
    assert make_plan(7) == make_plan(7)
    plans = [make_plan(seed) for seed in range(DEFAULT_SEEDS * 3)]
    ops = {step.op for plan in plans for step in plan.steps}
    assert ops == set(get_args(Op))
    assert {plan.clients for plan in plans} == {2, 3}
    # Issue 28's rules are exercised at the CI seeds: a close or delete, and a
    # stall with a read timeout short enough to detach the stalled client.
    ci = [make_plan(seed) for seed in range(DEFAULT_SEEDS)]
    assert any(step.op in ("close", "delete") for plan in ci for step in plan.steps)
    assert any(plan.env["AGYBRIDGE_CLIENT_READ_TIMEOUT_S"] == "0.3" for plan in ci)


def test_checker_finds_each_violation() -> None:
    """`check_connection` flags each broken promise and passes the clean exchanges."""

    def req(request_id: int, method: str, **params: Any) -> tuple[str, dict[str, Any]]:
        return "c2a", {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    def ok(request_id: int, result: Any) -> tuple[str, dict[str, Any]]:
        return "a2c", {"jsonrpc": "2.0", "id": request_id, "result": result}

    def err(request_id: int, code: int) -> tuple[str, dict[str, Any]]:
        return "a2c", {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": "m"}}

    def update(kind: str, **extra: Any) -> tuple[str, dict[str, Any]]:
        params = {"sessionId": "s", "update": {"sessionUpdate": kind, **extra}}
        return "a2c", {"jsonrpc": "2.0", "method": "session/update", "params": params}

    def log(*items: tuple[str, dict[str, Any]], start: int = 0) -> list[Entry]:
        return entries((d, json.dumps(m), start + i) for i, (d, m) in enumerate(items))

    def check(*items: tuple[str, dict[str, Any]], complete: bool = True) -> list[str]:
        return check_connection(log(*items), complete=complete)

    new = (req(1, "session/new", cwd="/w"), ok(1, {"sessionId": "s"}))
    prompt = req(2, "session/prompt", sessionId="s", prompt=[])
    chunk = update("agent_message_chunk", content={"type": "text", "text": "x"})
    done = ok(2, {"stopReason": "end_turn"})
    told = update("session_info_update", _meta={"agybridge": {"attached": False}})
    outcome = update("session_info_update", _meta={"agybridge": {"turn": {"state": "ended"}}})
    load = req(3, "session/load", sessionId="s", cwd="/w", mcpServers=[])
    assert check(*new, prompt, chunk, done) == []
    # Took over a running turn: its content, then its outcome.
    assert check(*new, told, load, ok(3, {}), chunk, outcome) == []
    # A notice while a load is pending may be about the attachment before it.
    assert check(*new, load, told, chunk, ok(3, {}), chunk, outcome) == []

    assert any("answered 2x" in p for p in check(*new, prompt, done, done))
    assert any("answered 0x" in p for p in check(*new, prompt))
    assert check(*new, prompt, complete=False) == []
    assert any("never sent" in p for p in check(*new, done))
    assert any("not opened here" in p for p in check(chunk))
    assert any("told it is not attached" in p for p in check(*new, told, chunk))
    served = check(*new, told, prompt, done)
    assert any("not attached here" in p and "served" in p for p in served)
    assert check(*new, told, prompt, err(2, -32600)) == []
    cancel = ("c2a", {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
    assert check(*new, told, prompt, cancel, ok(2, {"stopReason": "cancelled"})) == []
    ghost = req(4, "session/prompt", sessionId=GHOST_ID, prompt=[])
    assert any("never existed" in p for p in check(ghost, err(4, -32600)))
    assert any("answered error" in p for p in check(*new, prompt, err(2, -32603)))
    late = check(*new, prompt, done, chunk)
    assert any("no outcome of the turn" in p for p in late)
    again = req(5, "session/prompt", sessionId="s", prompt=[])
    ended = ok(5, {"stopReason": "end_turn"})
    assert any("after its answer" in p for p in check(*new, prompt, done, chunk, again, ended))
    # A mode change answered while a turn taken over runs on is no end of it.
    mode = req(7, "session/set_mode", sessionId="s", modeId="ask")
    assert check(*new, told, load, ok(3, {}), chunk, mode, ok(7, {}), chunk, outcome) == []
    closed = (req(6, "session/close", sessionId="s"), ok(6, {}))
    assert any("not opened here" in p for p in check(*new, *closed, chunk))

    # A cancelled answer needs a cause written before it was read, on any connection.
    stopped = ok(2, {"stopReason": "cancelled"})
    alone = [("a", log(*new, prompt, stopped))]
    assert any("no cancel" in p for p in check_cancels(alone, []))
    assert check_cancels(alone, [1]) == []
    other = log(cancel, start=2)  # written between the prompt and its answer
    assert check_cancels([("a", log(*new, prompt, ("a2c", {}), stopped)), ("b", other)], []) == []
    late = log(cancel, start=10)
    assert check_cancels([("a", log(*new, prompt, stopped)), ("b", late)], [])
    # Let go by another client's close: nothing more, no outcome either.
    taken = log(*new, told, load, ok(3, {}), chunk)
    assert check_connection(taken, complete=True)
    assert check_connection(taken, complete=True, ended_elsewhere={"s": [99]}) == []
    # Another client's close of a session this one drives: it is told.
    driven = log(*new)
    assert any(
        "never told" in p
        for p in check_connection(driven, complete=True, closed_elsewhere={"s": [5]})
    )
    assert check_connection(driven, complete=True, closed_elsewhere={"s": [5]}, stalls=[3]) == []
    told_closed = log(*new, told)
    assert check_connection(told_closed, complete=True, closed_elsewhere={"s": [5]}) == []
    # A prompt written together with a later cancel never ends end_turn.
    both = [
        *log(*new),
        *entries([("c2a", json.dumps(prompt[1]) + "\n" + json.dumps(cancel[1]), 5)]),
    ]
    both += log(done, start=6)
    assert any("written together" in p for p in check_connection(both, complete=True))
