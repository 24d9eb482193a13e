"""A seeded wire-level fuzzer: random interleavings against the real bridge process.

Each seed (`wirefuzz.make_plan`) starts one bridge with the fake agy and performs a
random plan: a few sessions with a scenario each (and an id that never existed),
prompts, session/cancel, session/close, session/load, session/resume,
session/delete, session/list, session/set_mode, ``$/cancel_request``, bursts (a
lifecycle request with requests for its session written right behind it, in one
write), permission answers after random delays, pauses, agy start-up delays, and
stdin EOF at the end.
The raw wire is recorded (every message schema-checked by `acp_wire.WireValidator`)
and checked by `wirefuzz.check`; a process scan samples the agy children of each
session (one working directory per session) while it runs; the bridge must exit 0
after EOF and leave nothing behind.

``AGYBRIDGE_FUZZ_SEEDS=N`` runs seeds 0..N-1 (default `DEFAULT_SEEDS`: CI's share;
deeper runs set N by hand, e.g. 200); ``AGYBRIDGE_FUZZ_SEED=S`` runs
seed S alone (the replay command printed for a failing seed). Timing is part of
what is fuzzed, so a replay runs the same plan but may not hit the same race.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, get_args

import pytest
import trio

from ..acp_wire import BridgeGone, Harness, RawClient, leftover_processes, wait_no_leftovers
from ..wirefuzz import (
    GHOST,
    Op,
    Plan,
    Step,
    assert_none_failing,
    check,
    child_overlaps,
    make_plan,
    run_all,
    selected_seeds,
    wire_log,
)
from ..wirefuzz import report as failing_report

pytestmark = pytest.mark.integration

SEED_VAR = "AGYBRIDGE_FUZZ_SEED"
SEEDS_VAR = "AGYBRIDGE_FUZZ_SEEDS"
#: Enough for every operation, burst lead and the ghost session (already true of
#: the first 8: test_plans_are_deterministic_and_varied checks these), at about
#: 1.3 s of CPU per seed (10 seeds: 13.1 s); it was 40.
DEFAULT_SEEDS = 24
#: Bridges run side by side (most of a seed's time is agy start-ups and pauses).
PARALLEL = 3
#: The seeds are split into this many tests (seed % SHARDS), so that pytest-xdist
#: spreads them over its workers instead of leaving one long test to the end.
SHARDS = 4
SEED_TIMEOUT_S = 90
EXIT_TIMEOUT_S = 15
SAMPLE_INTERVAL_S = 0.1
#: The id the plans' session that never existed goes by.
GHOST_ID = "sess_" + "0" * 32


class Run:
    """One seed's bridge, its wire, and what was found."""

    def __init__(self, plan: Plan, tmp: Path) -> None:
        self.plan = plan
        self.harness = Harness(tmp)
        self.problems: list[str] = []
        self.samples: list[tuple[float, dict[str, frozenset[int]]]] = []
        self.session_ids: dict[int, str] = {}
        self.prompt_ids: list[int] = []
        self.cwds = [tmp / f"ws{slot}" for slot in range(len(plan.scenarios))]
        for cwd in self.cwds:
            cwd.mkdir(parents=True, exist_ok=True)

    async def run(self) -> None:
        try:
            with trio.fail_after(SEED_TIMEOUT_S):
                await self._run()
        except* trio.TooSlowError:
            self.problems.append(f"seed took longer than {SEED_TIMEOUT_S} s")
        except* BridgeGone as group:
            first = str(group.exceptions[0]).splitlines()[0]
            self.problems.append(f"bridge closed stdout early: {first}")
        finally:
            survivors = await wait_no_leftovers(self.harness.marker, 3.0)
            if survivors:
                self.problems.append(f"processes left after exit: {survivors}")
            self.harness.kill_leftovers()

    async def _run(self) -> None:
        async with self.harness.open_bridge(**self.plan.env) as client:
            client.permission_choice = "hold"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._answer_permissions, client)
                nursery.start_soon(self._sample_children)
                await client.initialize()
                for step in self.plan.steps:
                    await self._perform(client, step)
                client.transcript.append(json.dumps({"dir": "eof"}))
                await client.close_stdin()
                with trio.move_on_after(EXIT_TIMEOUT_S):
                    await client.process.wait()
                    await client.wait_for(lambda: client.eof, "stdout EOF")
                nursery.cancel_scope.cancel()
            if client.process.returncode is None:
                self.problems.append(f"bridge still running {EXIT_TIMEOUT_S} s after stdin EOF")
                client.process.kill()
            elif client.process.returncode != 0:
                self.problems.append(f"bridge exited {client.process.returncode} after EOF")
            self.problems += check(wire_log(client.transcript))
            self.problems += [f"schema: {p}" for p in client.validator.problems]
            self.problems += child_overlaps(self.samples)
            (self.harness.tmp_path / "wire.ndjson").write_text("\n".join(client.transcript))

    async def _perform(self, client: RawClient, step: Step) -> None:
        if step.op == "sleep":
            await trio.sleep(step.seconds)  # a pause is part of the interleaving
        elif step.op == "new":
            cwd = str(self.cwds[step.slot])
            response = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
            if "result" in response:
                self.session_ids[step.slot] = response["result"]["sessionId"]
        else:
            steps = step.burst or (step,)
            messages = [m for m in (self._message(client, s) for s in steps) if m is not None]
            if messages:
                # One write: the bridge reads them together, before any is answered.
                await client.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    def _message(self, client: RawClient, step: Step) -> dict[str, Any] | None:
        """The message of one step (validated as sent), or None when it has no target."""
        session = GHOST_ID if step.slot == GHOST else self.session_ids.get(step.slot)
        cwd = str(self.cwds[max(step.slot, 0)])
        method = ""
        params: dict[str, Any] = {"sessionId": session}
        if step.op == "list":
            method, params = "session/list", {}
        elif session is None:
            return None  # its session/new failed: nothing to address
        elif step.op == "prompt":
            method = "session/prompt"
            params["prompt"] = [{"type": "text", "text": step.text}]
        elif step.op == "cancel":
            method = "session/cancel"
        elif step.op == "cancel_request":
            if not self.prompt_ids:
                return None
            method = "$/cancel_request"
            params = {"requestId": self.prompt_ids[step.pick % len(self.prompt_ids)]}
        elif step.op == "mode":
            method = "session/set_mode"
            params["modeId"] = step.text
        elif step.op in ("close", "delete"):
            method = f"session/{step.op}"
        elif step.op == "load":
            method = "session/load"
            params.update(cwd=cwd, mcpServers=[])
        elif step.op == "resume":
            method = "session/resume"
            params["cwd"] = cwd
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if method not in ("session/cancel", "$/cancel_request"):
            message["id"] = client.new_id()
            if method == "session/prompt":
                self.prompt_ids.append(message["id"])
        client.validator.feed("c2a", message)
        return message

    async def _answer_permissions(self, client: RawClient) -> None:
        answered = 0
        while True:
            try:
                await client.wait_for(
                    lambda n=answered: len(client.permission_requests) > n or None, "a question"
                )
            except BridgeGone:
                return  # the bridge exited: no more questions
            request = client.permission_requests[answered]
            answered += 1
            await trio.sleep(self.plan.permission_delay_s)  # the user takes a moment
            choice = None if self.plan.permission == "cancelled" else self.plan.permission
            await client.answer_permission(request, choice)

    async def _sample_children(self) -> None:
        while True:
            by_cwd: dict[str, set[int]] = {}
            for line in leftover_processes(self.harness.marker):
                if "--input-format" not in line:
                    continue  # discovery, the gate check, tool children
                pid = int(line.split()[0])
                try:
                    cwd = os.readlink(f"/proc/{pid}/cwd")
                except OSError:
                    continue
                by_cwd.setdefault(cwd, set()).add(pid)
            self.samples.append((trio.current_time(), {k: frozenset(v) for k, v in by_cwd.items()}))
            await trio.sleep(SAMPLE_INTERVAL_S)  # a sampling period, not a synchronisation


def report(runs: list[Run]) -> str:
    return failing_report(
        runs,
        wire=lambda run: f"wire log: {run.harness.tmp_path / 'wire.ndjson'}",
        seed_var=SEED_VAR,
        test_file="tests/integration/test_wire_fuzz.py",
        shown=8,
    )


async def run_seeds(seeds: list[int], tmp_path: Path) -> list[Run]:
    runs = [Run(make_plan(seed), tmp_path / f"seed{seed}") for seed in seeds]
    await run_all(runs, PARALLEL)
    return runs


@pytest.mark.parametrize("shard", range(SHARDS))
async def test_wire_fuzz(shard: int, tmp_path: Path) -> None:
    """Every selected seed of this shard keeps every promise (see wirefuzz.check)."""
    seeds = [
        seed
        for seed in selected_seeds(SEED_VAR, SEEDS_VAR, DEFAULT_SEEDS)
        if seed % SHARDS == shard
    ]
    if not seeds:
        pytest.skip(f"no selected seed falls in shard {shard}")
    runs = await run_seeds(seeds, tmp_path)
    assert_none_failing(report(runs))


def test_plans_are_deterministic_and_varied() -> None:
    """The same seed gives the same plan; seeds cover every operation and scenario."""
    assert make_plan(7) == make_plan(7)
    plans = [make_plan(seed) for seed in range(DEFAULT_SEEDS)]
    ops = {step.op for plan in plans for step in plan.steps}
    ops |= {s.op for plan in plans for step in plan.steps for s in step.burst}
    assert ops == set(get_args(Op))
    leads = {step.burst[0].op for plan in plans for step in plan.steps if step.burst}
    assert leads == {"load", "resume", "close", "delete"}
    assert any(step.slot == GHOST for plan in plans for step in plan.steps)
    scenarios = {s for plan in plans for s in plan.scenarios}
    assert len(scenarios) >= 6, scenarios


def test_checker_finds_each_violation() -> None:
    """The checker flags a late update, an unexplained cancel and a double answer,
    and passes a clean exchange."""

    def log(*items: tuple[str, dict[str, Any]]) -> list[str]:
        return [json.dumps({"dir": d, "raw": json.dumps(m)}) for d, m in items]

    prompt = {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s"}}
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    cancelled = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "cancelled"}}
    update = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "config_option_update"}},
    }
    chunk = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}},
    }
    clean = log(("c2a", prompt), ("a2c", chunk), ("c2a", cancel), ("a2c", cancelled))
    assert check(wire_log(clean)) == []
    late = check(wire_log([*clean, *log(("a2c", update))]))
    assert len(late) == 1 and "answered cancelled" in late[0]
    unexplained = check(wire_log(log(("c2a", prompt), ("a2c", cancelled))))
    assert len(unexplained) == 1 and "no cancel" in unexplained[0]
    twice = check(wire_log([*clean, *log(("a2c", cancelled))]))
    assert any("answered 2x" in p for p in twice)
    stray = check(wire_log([*log(("c2a", prompt), ("a2c", cancelled)), *log(("a2c", chunk))]))
    assert any("agent_message_chunk" in p for p in stray)
    assert child_overlaps([(0.0, {"w": frozenset({1, 2})}), (3.0, {"w": frozenset({1, 2})})])
    assert not child_overlaps([(0.0, {"w": frozenset({1, 2})}), (1.0, {"w": frozenset({1})})])


def test_checker_finds_each_lifecycle_violation() -> None:
    """The lifecycle rules (wirefuzz.check_lifecycle): each violation is flagged,
    the clean exchange passes."""

    def log(*items: tuple[str, dict[str, Any]]) -> list[str]:
        return [json.dumps({"dir": d, "raw": json.dumps(m)}) for d, m in items]

    def req(request_id: int, method: str, **params: Any) -> tuple[str, dict[str, Any]]:
        return "c2a", {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    def ok(request_id: int, result: Any) -> tuple[str, dict[str, Any]]:
        return "a2c", {"jsonrpc": "2.0", "id": request_id, "result": result}

    def update(kind: str, text: str = "") -> tuple[str, dict[str, Any]]:
        content = {"type": "text", "text": text}
        params = {"sessionId": "s", "update": {"sessionUpdate": kind, "content": content}}
        return "a2c", {"jsonrpc": "2.0", "method": "session/update", "params": params}

    text = "[fake-agy:echo] hi"
    prompt = [{"type": "text", "text": text}]
    new = (req(1, "session/new", cwd="/w"), ok(1, {"sessionId": "s"}))
    ran = (req(2, "session/prompt", sessionId="s", prompt=prompt),)
    ran += (update("agent_message_chunk", "x"), ok(2, {"stopReason": "end_turn"}))
    closed = (req(3, "session/close", sessionId="s"), ok(3, {}))
    load = req(4, "session/load", sessionId="s", cwd="/w", mcpServers=[])
    behind = req(5, "session/prompt", sessionId="s", prompt=prompt)
    replay = update("user_message_chunk", text)
    clean = log(
        *new, *ran, *closed, load, behind, replay, ok(4, {}), ok(5, {"stopReason": "end_turn"})
    )
    assert check(wire_log(clean)) == []

    after_close = log(*new, *closed, behind, ok(5, {"stopReason": "end_turn"}))
    assert any("not -32002" in p for p in check(wire_log(after_close)))
    chatty = log(*new, *closed, update("agent_message_chunk", "late"))
    assert any("after its session/close" in p for p in check(wire_log(chatty)))
    refused = log(
        *new, *closed, load, behind, replay, ok(4, {}), ok(5, {"stopReason": "cancelled"})
    )
    assert any("right behind session/load" in p for p in check(wire_log(refused)))
    forgot = log(*new, *ran, *closed, load, ok(4, {}))
    assert any("without" in p for p in check(wire_log(forgot)))
    twice = log(*new, *ran, *closed, load, replay, replay, ok(4, {}))
    assert any("2x" in p for p in check(wire_log(twice)))
    deleted = (req(6, "session/delete", sessionId="s"), ok(6, {}))
    listed = (req(7, "session/list"), ok(7, {"sessions": [{"sessionId": "s", "cwd": "/w"}]}))
    assert any("shows s" in p for p in check(wire_log(log(*new, *deleted, *listed))))
    empty = (req(7, "session/list"), ok(7, {"sessions": []}))
    assert any("misses s" in p for p in check(wire_log(log(*new, *empty))))
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    together = [
        *log(*new),
        json.dumps({"dir": "c2a", "raw": json.dumps(behind[1]) + "\n" + json.dumps(cancel)}),
        *log(ok(5, {"stopReason": "end_turn"})),
    ]
    assert any("written together" in p for p in check(wire_log(together)))
    mode = req(8, "session/set_mode", sessionId="s", modeId="ask")
    assert any("set_mode" in p for p in check(wire_log(log(*new, *closed, mode, ok(8, {})))))
    behind_mode = log(
        *new,
        *closed,
        load,
        mode,
        ok(4, {}),
        ("a2c", {"jsonrpc": "2.0", "id": 8, "error": {"code": -32002, "message": "gone"}}),
    )
    assert any("right behind" in p for p in check(wire_log(behind_mode)))
