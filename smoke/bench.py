#!/usr/bin/env python3
"""The benchmark matrix: agybridge driven over stdio against the bundled fake agy.

Run from the repository root with the project's venv (no real agy needed)::

    .venv/bin/python smoke/bench.py            # 10 repetitions per row
    .venv/bin/python smoke/bench.py --quick    # 3 repetitions, smaller throughput run

Every row is measured with the real clock (``time.perf_counter``) from the client's
side of the pipe, N times, and reported as median / p90 / max. Phases, each with
fresh bridges and its own leftover marker:

* ``basic``      per repetition a new bridge: start -> initialize answered, session/new,
                 a first echo turn, warm follow-up turns, stdin EOF with an idle session;
* ``cancel``     session/cancel 0.5 s into a ``slow`` turn, then into an
                 ``ignore-sigint`` turn (the escalation budget is reported), each
                 followed by an echo turn on the same session (agy was respawned);
* ``shutdown``   stdin EOF with two sessions mid-turn;
* ``throughput`` K concurrent sessions each doing M echo turns, then session/close;
* ``big``        a 1 MiB tool output and a 10 MiB text line (``FAKE_AGY_REPLAY`` of a
                 generated capture: the fake has no big-output scenario of its own);
* bridge peak RSS (VmHWM of every bridge, read just before its shutdown).

Every wait is bounded; after each phase, processes carrying the phase's environment
marker are reported as leftovers (and killed by pid). Reports go to
``smoke/reports/bench-<UTC>.json`` and ``.md``; the Markdown is printed. Exit status 0
when every row passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import trio
from smokekit import (
    DEFAULT_REPORT_DIR,
    FAKE_AGY,
    VANISH_GRACE_S,
    Bridge,
    TurnLog,
    base_env,
    bridge_warnings,
    describe_error,
    facts_markdown,
    fmt,
    kill_processes,
    machine_facts,
    marked_processes,
    open_bridge,
    proc_cpu_s,
    summarize,
    utc_stamp,
    wait_marked_gone,
    write_reports,
)

from agybridge.config import Settings

#: Bound on one request that should take milliseconds (initialize, session/new, close).
REQUEST_S = 30.0
#: Bound on one echo turn against the fake.
TURN_S = 30.0
#: Bound on one big-output turn.
BIG_TURN_S = 120.0
#: How long leftovers may take to vanish after a phase before they count.
LEFTOVER_GRACE_S = 3.0
#: How long agy's SIGKILLed tool children may take to leave /proc after a cancel.
CHILD_VANISH_LIMIT_S = 2.0
#: Slack over the escalation budget before a cancel counts as too slow.
CANCEL_SLACK_S = 2.0
MIB = 2**20

ECHO_TEXT = "Smoke prompt {n}: the quick brown fox jumps over the lazy dog."
SLOW_PROMPT = "[fake-agy:slow] stream ticks until cancelled"
DEAF_PROMPT = "[fake-agy:ignore-sigint] stream ticks and ignore SIGINT"
BIG_TOOL_REPLY = "The command printed a big log."


@dataclass
class Row:
    """One line of the report: a measured quantity and what went wrong with it."""

    key: str
    phase: str
    title: str
    unit: str
    values: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.errors and (bool(self.values) or self.skipped is not None)

    def fail(self, message: str) -> None:
        if message not in self.errors:
            self.errors.append(message)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "phase": self.phase,
            "title": self.title,
            "unit": self.unit,
            "ok": self.ok,
            "skipped": self.skipped,
            **summarize(self.values),
            "values": [round(v, 3) for v in self.values],
            "errors": self.errors,
            "notes": self.notes,
        }


ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("startup", "basic", "bridge start → initialize answered", "ms"),
    ("session_new", "basic", "session/new (first session, agy spawned warm)", "ms"),
    ("first_ttfc", "basic", "first turn: time to first agent_message_chunk", "ms"),
    ("first_total", "basic", "first turn: full turn (echo)", "ms"),
    ("warm_ttfc", "basic", "warm turn: time to first agent_message_chunk", "ms"),
    ("warm_total", "basic", "warm turn: full turn (echo)", "ms"),
    ("idle_shutdown", "basic", "stdin EOF → bridge exit (1 idle session)", "ms"),
    ("cancel_slow", "cancel", "session/cancel → cancelled (slow turn)", "ms"),
    ("cancel_deaf", "cancel", "session/cancel → cancelled (ignore-sigint turn)", "ms"),
    ("after_cancel", "cancel", "echo turn right after a cancel (respawned agy)", "ms"),
    ("shutdown_busy", "shutdown", "stdin EOF → bridge exit (2 sessions mid-turn)", "ms"),
    ("tp_turn", "throughput", "throughput: echo turn latency under load", "ms"),
    ("tp_rate", "throughput", "throughput: turns per second (whole bridge)", "turns/s"),
    ("tp_cpu", "throughput", "throughput: bridge CPU time per turn", "ms"),
    ("session_close", "throughput", "session/close (idle session)", "ms"),
    ("big_tool", "big", "big output: turn with a 1 MiB tool output", "ms"),
    ("big_text", "big", "big output: turn with a 10 MiB text line", "ms"),
    ("rss_peak", "all", "bridge peak RSS (VmHWM at the end of each bridge)", "MiB"),
)
PHASES = ("basic", "cancel", "shutdown", "throughput", "big")


def _ms(seconds: float | None) -> float:
    assert seconds is not None
    return seconds * 1000.0


class Bench:
    """The whole run: options, rows, bridges started, leftovers seen."""

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args = args
        self.tmp = tmp
        self.run_id = f"bench-{uuid.uuid4().hex[:12]}"
        self.rows = {key: Row(key, phase, title, unit) for key, phase, title, unit in ROWS}
        self.bridges: list[dict[str, Any]] = []
        self.leftovers: list[dict[str, Any]] = []
        #: Wire-order rules the bridge broke (seen by the `WireTap` of each bridge).
        self.protocol_failures: list[str] = []
        #: Tool children seen alive at the instant a cancelled answer arrived.
        self.alive_at_answer: list[str] = []
        self.workspace = tmp / "workspace"
        self.workspace.mkdir()
        self.grace_env: dict[str, str] = {}
        if args.sigint_grace is not None:
            self.grace_env["AGYBRIDGE_SIGINT_GRACE_S"] = str(args.sigint_grace)
        if args.sigterm_grace is not None:
            self.grace_env["AGYBRIDGE_SIGTERM_GRACE_S"] = str(args.sigterm_grace)
        self.settings = Settings.from_env(self.grace_env)
        self.rows[
            "big_tool"
        ].title = f"big output: turn with a {args.big_tool_mib:g} MiB tool output"
        self.rows["big_text"].title = f"big output: turn with a {args.big_line_mib:g} MiB text line"

    # --- plumbing ---------------------------------------------------------------

    def marker(self, phase: str) -> str:
        return f"{self.run_id}-{phase}"

    def env(self, phase: str, **extra: str) -> dict[str, str]:
        return base_env(
            self.marker(phase),
            AGY_BIN=str(FAKE_AGY),
            FAKE_AGY_SCENARIO="echo",
            FAKE_AGY_STATE_DIR=str(self.tmp / "agy-state"),
            FAKE_AGY_FRAGMENT_DELAY=str(self.args.fragment_delay),
            **self.grace_env,
            **extra,
        )

    @asynccontextmanager
    async def bridge(self, phase: str, **extra: str) -> AsyncIterator[Bridge]:
        """A fresh bridge for ``phase``; its memory, exit and warnings are recorded."""
        number = len(self.bridges) + 1
        stderr_path = self.tmp / f"bridge-{number:03d}-{phase}.stderr"
        record: dict[str, Any] = {"phase": phase, "stderr": stderr_path.name}
        self.bridges.append(record)
        opened: Bridge | None = None
        try:
            async with open_bridge(self.env(phase, **extra), stderr_path) as bridge:
                opened = bridge
                record["pid"] = bridge.pid
                try:
                    yield bridge
                finally:
                    if not bridge.memory_kib and bridge.process.returncode is None:
                        bridge.read_memory()
                    record.update(
                        memory_kib=bridge.memory_kib,
                        exit_s=bridge.exit_s,
                        stray_updates=dict(bridge.client.stray_updates),
                        early_updates=bridge.tap.early_updates[:5],
                        early_update_count=len(bridge.tap.early_updates),
                    )
        finally:
            count, first = bridge_warnings(stderr_path)
            returncode = opened.process.returncode if opened is not None else None
            record.update(returncode=returncode, warning_lines=count, warnings=first)

    def row(self, key: str) -> Row:
        return self.rows[key]

    async def run_phase(self, phase: str, body: Callable[[], Awaitable[None]]) -> None:
        rows = [row for row in self.rows.values() if row.phase == phase]
        budget_s = self.phase_budget_s(phase)
        print(f"[bench] {phase} ...", file=sys.stderr, flush=True)
        started = perf_counter()
        try:
            with trio.fail_after(budget_s):
                await body()
        except Exception as exc:
            for row in rows:
                row.fail(f"phase {phase!r} failed: {describe_error(exc)}")
        survivors = await wait_marked_gone(self.marker(phase), LEFTOVER_GRACE_S)
        if survivors:
            kill_processes(survivors)
            self.leftovers.append({"phase": phase, "processes": [str(p) for p in survivors]})
            for row in rows:
                row.fail(
                    f"{len(survivors)} process(es) still alive {LEFTOVER_GRACE_S:g} s after "
                    f"the phase ended (killed now): {', '.join(map(str, survivors))[:300]}"
                )
        print(
            f"[bench] {phase} done in {perf_counter() - started:.1f} s", file=sys.stderr, flush=True
        )

    def phase_budget_s(self, phase: str) -> float:
        reps: int = self.args.reps
        escalation = self.settings.sigint_grace_s + self.settings.sigterm_grace_s
        per_rep: float = {
            "basic": 20.0 + 5.0 * self.args.warm_turns,
            "cancel": 30.0 + 2 * escalation,
            "shutdown": 30.0 + escalation,
            "throughput": 30.0 + 2.0 * self.args.turns * self.args.sessions,
            "big": 2 * BIG_TURN_S,
        }[phase]
        return 60.0 + reps * per_rep

    # --- checks -----------------------------------------------------------------

    @staticmethod
    def check_echo(row: Row, turn: TurnLog, prompt: str) -> None:
        """An echo turn ends normally and shows the prompt exactly once."""
        if turn.stop_reason != "end_turn":
            row.fail(f"stopReason {turn.stop_reason!r}, expected 'end_turn'")
        if turn.text.strip() != prompt:
            row.fail(f"echo text {turn.text[:120]!r} differs from the prompt {prompt!r}")
        if turn.late_updates:
            row.fail(f"{turn.late_updates} session/update(s) arrived after the prompt response")

    # --- phases -----------------------------------------------------------------

    async def phase_basic(self) -> None:
        rows = self.rows
        for rep in range(self.args.reps):
            async with self.bridge("basic") as bridge:
                with trio.fail_after(REQUEST_S):
                    await bridge.initialize()
                rows["startup"].values.append(_ms(perf_counter() - bridge.spawned_at))
                started = perf_counter()
                with trio.fail_after(REQUEST_S):
                    session_id = await bridge.new_session(str(self.workspace))
                rows["session_new"].values.append(_ms(perf_counter() - started))
                for number in range(1 + self.args.warm_turns):
                    prompt = ECHO_TEXT.format(n=f"{rep}.{number}")
                    with trio.fail_after(TURN_S):
                        turn = await bridge.prompt(session_id, prompt)
                    prefix = "first" if number == 0 else "warm"
                    self.check_echo(rows[f"{prefix}_total"], turn, prompt)
                    rows[f"{prefix}_ttfc"].values.append(_ms(turn.ttfc_s))
                    rows[f"{prefix}_total"].values.append(_ms(turn.total_s))
                exit_s = await bridge.shutdown()
                rows["idle_shutdown"].values.append(_ms(exit_s))
                if bridge.process.returncode != 0:
                    rows["idle_shutdown"].fail(f"bridge exited {bridge.process.returncode}")

    async def cancel_mid_turn(
        self, bridge: Bridge, session_id: str, prompt: str, row: Row
    ) -> tuple[TurnLog, float]:
        """Send ``prompt``, cancel it ``--cancel-after`` s later; returns the turn and
        the seconds from session/cancel to the response."""
        done: list[TurnLog] = []

        async def run_prompt() -> None:
            done.append(await bridge.prompt(session_id, prompt))

        cancel_at = 0.0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_prompt)
            await trio.sleep(self.args.cancel_after)
            cancel_at = await bridge.cancel(session_id)
        turn = done[0]
        if turn.stop_reason != "cancelled":
            row.fail(f"stopReason {turn.stop_reason!r}, expected 'cancelled'")
        assert turn.ended_at is not None
        return turn, turn.ended_at - cancel_at

    async def check_children_gone(self, phase: str, row: Row) -> int:
        """agy's ``sleep`` children must be gone once ``cancelled`` is answered.

        Returns how many were still alive at the instant of the answer (noted with
        how long they took to vanish); fails the row if any survive
        ``CHILD_VANISH_LIMIT_S`` (a SIGKILLed process takes a moment to die).
        """

        def sleepers() -> list[Any]:
            found = marked_processes(self.marker(phase))
            return [p for p in found if p.cmdline.split(" ", 1)[0].endswith("sleep")]

        seen = sleepers()
        if not seen:
            return 0
        started = perf_counter()
        with trio.move_on_after(CHILD_VANISH_LIMIT_S):
            # A process's death is not an event we can await: poll /proc.
            while sleepers():  # noqa: ASYNC110
                await trio.sleep(0.005)
        vanished_ms = _ms(perf_counter() - started)
        self.alive_at_answer.append(f"{'; '.join(map(str, seen))}, gone {vanished_ms:.0f} ms later")
        survivors = sleepers()
        if survivors:
            row.fail(
                f"agy's tool children alive {CHILD_VANISH_LIMIT_S:g} s after the cancelled "
                "answer: " + ", ".join(map(str, survivors))
            )
        return len(seen)

    async def phase_cancel(self) -> None:
        budget_s = self.settings.sigint_grace_s + self.settings.sigterm_grace_s
        after = self.rows["after_cancel"]
        async with self.bridge("cancel") as bridge:
            with trio.fail_after(REQUEST_S):
                await bridge.initialize()
            for key, prompt in (("cancel_slow", SLOW_PROMPT), ("cancel_deaf", DEAF_PROMPT)):
                row = self.rows[key]
                alive_at_answer = early_cancels = 0
                for rep in range(self.args.reps):
                    with trio.fail_after(REQUEST_S):
                        session_id = await bridge.new_session(str(self.workspace))
                    with trio.fail_after(TURN_S + budget_s):
                        turn, latency_s = await self.cancel_mid_turn(
                            bridge, session_id, prompt, row
                        )
                    row.values.append(_ms(latency_s))
                    if not turn.text_parts:
                        early_cancels += 1
                    if latency_s > budget_s + CANCEL_SLACK_S:
                        row.fail(
                            f"cancel took {latency_s:.2f} s, over the escalation budget "
                            f"{budget_s:g} s + {CANCEL_SLACK_S:g} s slack"
                        )
                    if await self.check_children_gone("cancel", row):
                        alive_at_answer += 1
                    text = ECHO_TEXT.format(n=f"after-{key}-{rep}")
                    with trio.fail_after(TURN_S):
                        turn = await bridge.prompt(session_id, text)
                    self.check_echo(after, turn, text)
                    after.values.append(_ms(turn.total_s))
                    with trio.fail_after(REQUEST_S):
                        await bridge.close_session(session_id)
                row.notes.append(
                    f"cancel sent {self.args.cancel_after:g} s after the prompt; escalation "
                    f"budget {budget_s:g} s (SIGINT grace {self.settings.sigint_grace_s:g} s + "
                    f"SIGTERM grace {self.settings.sigterm_grace_s:g} s)"
                )
                if alive_at_answer:
                    row.notes.append(
                        f"in {alive_at_answer}/{self.args.reps} cancels a tool child of agy was "
                        "still alive at the instant the cancelled answer arrived: "
                        + " | ".join(self.alive_at_answer[-alive_at_answer:])
                    )
                if early_cancels:
                    row.notes.append(
                        f"in {early_cancels}/{self.args.reps} repetitions no agent_message_chunk "
                        f"had arrived {self.args.cancel_after:g} s into the turn (agy still "
                        "starting): the cancel came first"
                    )
            self.rows["cancel_deaf"].notes.append(
                "the fake ignores SIGINT but honours SIGTERM: expect ≈ the SIGINT grace"
            )

    async def phase_shutdown(self) -> None:
        row = self.rows["shutdown_busy"]
        answers: list[str] = []
        for _ in range(self.args.reps):
            async with self.bridge("shutdown") as bridge:
                with trio.fail_after(REQUEST_S):
                    await bridge.initialize()
                    sessions = [await bridge.new_session(str(self.workspace)) for _ in range(2)]

                async def run_prompt(session_id: str, bridge: Bridge = bridge) -> None:
                    try:
                        turn = await bridge.prompt(session_id, SLOW_PROMPT)
                        answers.append(str(turn.stop_reason))
                    except Exception as exc:
                        answers.append(f"no answer ({describe_error(exc)[:80]})")

                answered_before = len(answers)
                async with trio.open_nursery() as nursery:
                    for session_id in sessions:
                        nursery.start_soon(run_prompt, session_id)
                    with trio.fail_after(TURN_S):
                        # Both turns streaming: poll the client's record (no event to await).
                        while not all(
                            (t := bridge.client.turns.get(s)) and t.first_chunk_at for s in sessions
                        ):
                            if len(answers) > answered_before:
                                raise RuntimeError(
                                    f"a slow turn ended before the shutdown: {answers[-1]}"
                                )
                            await trio.sleep(0.02)
                    exit_s = await bridge.shutdown()
                row.values.append(_ms(exit_s))
                if bridge.process.returncode != 0:
                    row.fail(f"bridge exited {bridge.process.returncode}")
                await trio.sleep(VANISH_GRACE_S)
                alive = marked_processes(self.marker("shutdown"))
                if alive:
                    row.fail(
                        f"alive {VANISH_GRACE_S} s after the bridge exited: "
                        + ", ".join(map(str, alive))
                    )
        tally = {answer: answers.count(answer) for answer in sorted(set(answers))}
        row.notes.append(f"the 2×{self.args.reps} interrupted prompts were answered: {tally}")
        if set(answers) != {"cancelled"}:
            row.fail(f"every prompt should be answered 'cancelled' before exit; got {tally}")

    async def phase_throughput(self) -> None:
        turn_row, rate_row = self.rows["tp_turn"], self.rows["tp_rate"]
        close_row, cpu_row = self.rows["session_close"], self.rows["tp_cpu"]
        sessions_n, turns_n = self.args.sessions, self.args.turns
        new_ms: list[float] = []
        first_ms: list[float] = []
        later_ms: list[float] = []
        for rep in range(self.args.reps):
            async with self.bridge("throughput") as bridge:
                with trio.fail_after(REQUEST_S):
                    await bridge.initialize()
                sessions: list[str] = []

                async def open_session(
                    bridge: Bridge = bridge, sessions: list[str] = sessions
                ) -> None:
                    started = perf_counter()
                    sessions.append(await bridge.new_session(str(self.workspace)))
                    new_ms.append(_ms(perf_counter() - started))

                with trio.fail_after(REQUEST_S):
                    async with trio.open_nursery() as nursery:
                        for _ in range(sessions_n):
                            nursery.start_soon(open_session)

                async def run_turns(
                    index: int, session_id: str, rep: int = rep, bridge: Bridge = bridge
                ) -> None:
                    for number in range(turns_n):
                        prompt = ECHO_TEXT.format(n=f"{rep}.{index}.{number}")
                        with trio.fail_after(TURN_S):
                            turn = await bridge.prompt(session_id, prompt)
                        self.check_echo(turn_row, turn, prompt)
                        turn_row.values.append(_ms(turn.total_s))
                        (first_ms if number == 0 else later_ms).append(_ms(turn.total_s))

                cpu_before = proc_cpu_s(bridge.pid)
                started = perf_counter()
                async with trio.open_nursery() as nursery:
                    for index, session_id in enumerate(sessions):
                        nursery.start_soon(run_turns, index, session_id)
                rate_row.values.append(sessions_n * turns_n / (perf_counter() - started))
                cpu_after = proc_cpu_s(bridge.pid)
                if cpu_before is not None and cpu_after is not None:
                    cpu_row.values.append(_ms((cpu_after - cpu_before) / (sessions_n * turns_n)))

                async def close(session_id: str, bridge: Bridge = bridge) -> None:
                    started = perf_counter()
                    with trio.fail_after(REQUEST_S):
                        await bridge.close_session(session_id)
                    close_row.values.append(_ms(perf_counter() - started))

                async with trio.open_nursery() as nursery:
                    for session_id in sessions:
                        nursery.start_soon(close, session_id)
        stats = summarize(new_ms)
        rate_row.notes.append(
            f"{sessions_n} concurrent sessions × {turns_n} turns per repetition; "
            f"session/new with {sessions_n} at once: median {fmt(stats['median'])} ms, "
            f"max {fmt(stats['max'])} ms"
        )
        first, later = summarize(first_ms), summarize(later_ms)
        turn_row.notes.append(
            f"each session's first turn waits for its agy to start ({sessions_n} at once): "
            f"median {fmt(first['median'])} ms, max {fmt(first['max'])} ms; later turns: "
            f"median {fmt(later['median'])} ms, p90 {fmt(later['p90'])} ms, "
            f"max {fmt(later['max'])} ms"
        )
        close_row.notes.append(f"{sessions_n} sessions closed concurrently per repetition")
        cpu_row.notes.append(
            "utime+stime of the bridge process over the turns (/proc/<pid>/stat, clock-tick "
            "resolution), divided by the number of turns; the fake agys and the client are "
            "not counted"
        )

    async def phase_big(self) -> None:
        tool_bytes = int(self.args.big_tool_mib * MIB)
        line_bytes = int(self.args.big_line_mib * MIB)
        capture = self.tmp / "big-output.ndjson"
        big_text = write_big_capture(capture, tool_bytes, line_bytes)
        tool_row, text_row = self.rows["big_tool"], self.rows["big_text"]
        shown: set[int] = set()
        async with self.bridge("big", FAKE_AGY_REPLAY=str(capture)) as bridge:
            with trio.fail_after(REQUEST_S):
                await bridge.initialize()
            for _ in range(self.args.reps):
                with trio.fail_after(REQUEST_S):
                    session_id = await bridge.new_session(str(self.workspace))
                with trio.fail_after(BIG_TURN_S):
                    turn = await bridge.prompt(session_id, "print the big log")
                tool_row.values.append(_ms(turn.total_s))
                if turn.stop_reason != "end_turn":
                    tool_row.fail(f"stopReason {turn.stop_reason!r}")
                if turn.max_raw_output_chars != tool_bytes:
                    tool_row.fail(
                        f"rawOutput carried {turn.max_raw_output_chars} chars, "
                        f"expected {tool_bytes}"
                    )
                if turn.text.strip() != BIG_TOOL_REPLY:
                    tool_row.fail(f"reply {turn.text[:120]!r}, expected {BIG_TOOL_REPLY!r}")
                shown.add(turn.max_content_chars)
                with trio.fail_after(BIG_TURN_S):
                    turn = await bridge.prompt(session_id, "write a very long answer")
                text_row.values.append(_ms(turn.total_s))
                if turn.stop_reason != "end_turn":
                    text_row.fail(f"stopReason {turn.stop_reason!r}")
                if turn.text != big_text + "\n":
                    text_row.fail(
                        f"received {len(turn.text)} chars of text, expected {len(big_text) + 1} "
                        "(the delta plus the DONE newline, once)"
                    )
                with trio.fail_after(REQUEST_S):
                    await bridge.close_session(session_id)
        tool_row.notes.append(
            f"replayed capture: run_command DONE with {tool_bytes} bytes of output; the tool "
            f"card content showed {sorted(shown)} chars (rawOutput keeps all)"
        )
        text_row.notes.append(
            f"replayed capture: one {line_bytes}-char text_delta (a ~{line_bytes / MIB:g} MiB "
            "NDJSON line from agy) and a result restating it"
        )

    # --- the run ------------------------------------------------------------------

    async def run(self) -> None:
        bodies: dict[str, Callable[[], Awaitable[None]]] = {
            "basic": self.phase_basic,
            "cancel": self.phase_cancel,
            "shutdown": self.phase_shutdown,
            "throughput": self.phase_throughput,
            "big": self.phase_big,
        }
        for phase in PHASES:
            if phase in self.args.only:
                await self.run_phase(phase, bodies[phase])
            else:
                for row in self.rows.values():
                    if row.phase == phase:
                        row.skipped = "not selected (--only)"
        rss = self.rows["rss_peak"]
        by_phase: dict[str, float] = {}
        for record in self.bridges:
            hwm = record.get("memory_kib", {}).get("VmHWM")
            if hwm is not None:
                rss.values.append(hwm / 1024)
                by_phase[record["phase"]] = max(by_phase.get(record["phase"], 0.0), hwm / 1024)
            else:
                rss.notes.append(f"no VmHWM read for bridge {record.get('pid')}")
        if by_phase:
            rss.notes.append(
                "max per phase: " + ", ".join(f"{p} {v:.1f} MiB" for p, v in by_phase.items())
            )
        for record in self.bridges:
            if record.get("returncode") not in (0, None):
                rss.fail(f"bridge {record.get('pid')} exited {record['returncode']}")
        early = [r for r in self.bridges if r.get("early_update_count")]
        if early:
            self.protocol_failures.append(
                f"{sum(r['early_update_count'] for r in early)} session/update(s) reached the "
                f"client before their session's session/new response, e.g. "
                f"{early[0]['early_updates'][0]} (bridge pid {early[0].get('pid')})"
            )
        survivors = await wait_marked_gone(self.run_id, LEFTOVER_GRACE_S, prefix=True)
        if survivors:
            kill_processes(survivors)
            self.leftovers.append({"phase": "end", "processes": [str(p) for p in survivors]})


def write_big_capture(path: Path, tool_bytes: int, line_bytes: int) -> str:
    """A synthetic two-turn agy capture for ``FAKE_AGY_REPLAY``; returns turn 2's text.

    Turn 1: a ``run_command`` step whose output is ``tool_bytes`` long, then a short
    reply. Turn 2: one ``text_delta`` of ``line_bytes`` characters. Shapes follow
    tests/data/fake_agy/synthetic-tool-two-turn.ndjson (contract.md §3.2-§3.5).
    """
    conversation = "00000000-0000-4000-8000-00000000b160"
    unit = "".join(
        f"{i:07d} big output line, padded to a round length ...........\n" for i in range(8)
    )
    tool_output = (unit * (tool_bytes // len(unit) + 1))[:tool_bytes]
    big_text = (unit * (line_bytes // len(unit) + 1))[:line_bytes]
    usage = {
        "input_tokens": 15600,
        "output_tokens": 30,
        "thinking_tokens": 0,
        "cache_read_tokens": 0,
        "total_tokens": 15630,
    }

    def step(index: int, state: str, step_type: str, **fields: Any) -> dict[str, Any]:
        body = {
            "conversation_id": conversation,
            "step_index": index,
            "state": state,
            "step_type": step_type,
        }
        body.update(fields)
        return {"event": "step_update", "step_update": body}

    def result(response: str, turns: int) -> dict[str, Any]:
        return {
            "event": "result",
            "result": {
                "conversation_id": conversation,
                "status": "SUCCESS",
                "response": response,
                "duration_seconds": 1.0 * turns,
                "num_turns": turns,
                "usage": usage,
            },
        }

    info = {"name": "run_command", "parameters": {"CommandLine": "cat big.log"}}
    lines = [
        {
            "event": "init",
            "conversation_id": conversation,
            "init": {
                "cwd": "/tmp",
                "tools": ["run_command", "view_file"],
                "permission_mode": "request-review",
            },
        },
        step(0, "DONE", "user_input"),
        step(2, "ACTIVE", "tool", tool_name="run_command", tool_info=info),
        step(
            2,
            "DONE",
            "tool",
            tool_name="run_command",
            duration_seconds=0.05,
            tool_info={**info, "output": tool_output},
        ),
        step(4, "ACTIVE", "agent_response", text_delta=BIG_TOOL_REPLY),
        step(4, "DONE", "agent_response", text_delta="\n", duration_seconds=0.1, usage=usage),
        result(BIG_TOOL_REPLY + "\n", 1),
        step(5, "DONE", "user_input"),
        step(6, "ACTIVE", "agent_response", text_delta=big_text),
        step(6, "DONE", "agent_response", text_delta="\n", duration_seconds=0.1, usage=usage),
        result(big_text + "\n", 2),
    ]
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return big_text


# --------------------------------------------------------------------------- report


def build_report(bench: Bench, stamp: str, facts: dict[str, Any], wall_s: float) -> dict[str, Any]:
    args = bench.args
    return {
        "kind": "bench",
        "timestamp_utc": stamp,
        "ok": all(row.ok for row in bench.rows.values())
        and not bench.leftovers
        and not bench.protocol_failures,
        "wall_seconds": round(wall_s, 2),
        "machine": facts,
        "settings": {
            "agy": f"fake ({FAKE_AGY})",
            "reps": args.reps,
            "sessions": args.sessions,
            "turns": args.turns,
            "warm_turns": args.warm_turns,
            "fragment_delay_s": args.fragment_delay,
            "cancel_after_s": args.cancel_after,
            "sigint_grace_s": bench.settings.sigint_grace_s,
            "sigterm_grace_s": bench.settings.sigterm_grace_s,
            "big_tool_mib": args.big_tool_mib,
            "big_line_mib": args.big_line_mib,
            "phases": sorted(args.only),
        },
        "rows": [row.to_json() for row in bench.rows.values()],
        "bridges": bench.bridges,
        "leftovers": bench.leftovers,
        "protocol_failures": bench.protocol_failures,
    }


def render_markdown(report: dict[str, Any], bench: Bench) -> str:
    settings = report["settings"]
    verdict = "all rows passed" if report["ok"] else "**FAILED** (see below)"
    lines = [
        f"# agybridge benchmark — {report['timestamp_utc']}",
        "",
        f"Fake agy (`bin/fake-agy`); {settings['reps']} repetitions per row; throughput "
        f"{settings['sessions']} sessions × {settings['turns']} turns; "
        f"{settings['warm_turns']} warm turns per basic repetition; fake fragment delay "
        f"{settings['fragment_delay_s']:g} s; SIGINT/SIGTERM grace "
        f"{settings['sigint_grace_s']:g}/{settings['sigterm_grace_s']:g} s. "
        f"Wall time {report['wall_seconds']:.1f} s. Result: {verdict}.",
        "",
        facts_markdown(report["machine"]),
        "",
        "| row | unit | n | median | p90 | max | status |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    for row in report["rows"]:
        status = "skipped" if row["skipped"] else ("ok" if row["ok"] else "**FAIL**")
        digits = 2 if row["unit"] == "turns/s" else 1
        lines.append(
            f"| {row['title']} | {row['unit']} | {row['n']} | {fmt(row['median'], digits)} | "
            f"{fmt(row['p90'], digits)} | {fmt(row['max'], digits)} | {status} |"
        )
    notes = [(row["title"], note) for row in report["rows"] for note in row["notes"]]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {title}: {note}" for title, note in notes]
    errors = [(row["title"], error) for row in report["rows"] for error in row["errors"]]
    if errors:
        lines += ["", "Failures:", ""]
        lines += [f"- {title}: {error}" for title, error in errors]
    stray: dict[str, int] = {}
    for record in bench.bridges:
        for kind, count in (record.get("stray_updates") or {}).items():
            stray[kind] = stray.get(kind, 0) + count
    if stray:
        lines += ["", f"session/update outside any prompt (or after its response): {stray}"]
    codes = sorted({str(b.get("returncode")) for b in bench.bridges})
    warned = [b for b in bench.bridges if b.get("warning_lines")]
    lines += [
        "",
        f"Bridges started: {len(bench.bridges)}; exit codes: {', '.join(codes) or '–'}; "
        f"bridges with warnings on stderr: {len(warned)}.",
    ]
    for record in warned[:3]:
        lines.append(f"- pid {record.get('pid')} ({record['phase']}): {record['warnings'][0]}")
    if bench.protocol_failures:
        lines += [f"Protocol check **FAILED**: {failure}" for failure in bench.protocol_failures]
    else:
        lines.append("Protocol check: no session/update before its session's session/new response.")
    if bench.leftovers:
        lines.append("Leftover processes (killed by pid):")
        for entry in bench.leftovers:
            lines.append(f"- {entry['phase']}: {', '.join(entry['processes'])[:400]}")
    else:
        lines.append("Leftover processes: none (environment marker scan of /proc).")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="agybridge benchmark matrix against the bundled fake agy"
    )
    parser.add_argument("--quick", action="store_true", help="3 repetitions, smaller counts")
    parser.add_argument("--reps", type=int, help="repetitions per row (default 10, quick 3)")
    parser.add_argument("--sessions", type=int, help="concurrent sessions (default 8, quick 4)")
    parser.add_argument("--turns", type=int, help="turns per session (default 5, quick 3)")
    parser.add_argument(
        "--warm-turns", type=int, help="follow-up turns per basic repetition (default 3, quick 2)"
    )
    parser.add_argument(
        "--fragment-delay",
        type=float,
        default=0.0,
        help="FAKE_AGY_FRAGMENT_DELAY for echo turns (default 0: measure the bridge)",
    )
    parser.add_argument("--cancel-after", type=float, default=0.5, help="seconds into the turn")
    parser.add_argument("--sigint-grace", type=float, help="AGYBRIDGE_SIGINT_GRACE_S for bridges")
    parser.add_argument("--sigterm-grace", type=float, help="AGYBRIDGE_SIGTERM_GRACE_S")
    parser.add_argument("--big-tool-mib", type=float, default=1.0, help="tool output size")
    parser.add_argument("--big-line-mib", type=float, default=10.0, help="text line size")
    parser.add_argument(
        "--only",
        default=",".join(PHASES),
        help=f"comma-separated phases to run (default all: {','.join(PHASES)})",
    )
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    parser.add_argument("--keep-tmp", action="store_true", help="keep bridge stderr files")
    args = parser.parse_args(argv)
    quick = args.quick
    args.reps = args.reps if args.reps is not None else (3 if quick else 10)
    args.sessions = args.sessions if args.sessions is not None else (4 if quick else 8)
    args.turns = args.turns if args.turns is not None else (3 if quick else 5)
    args.warm_turns = args.warm_turns if args.warm_turns is not None else (2 if quick else 3)
    args.only = {name.strip() for name in args.only.split(",") if name.strip()}
    unknown = args.only - set(PHASES)
    if unknown:
        parser.error(f"unknown phase(s) {sorted(unknown)}; known: {', '.join(PHASES)}")
    if min(args.reps, args.sessions, args.turns) < 1 or args.warm_turns < 0:
        parser.error("--reps, --sessions and --turns must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = utc_stamp()
    facts = machine_facts()
    tmp = Path(tempfile.mkdtemp(prefix="agybridge-bench-"))
    bench = Bench(args, tmp)
    started = perf_counter()
    try:
        trio.run(bench.run)
    finally:
        if args.keep_tmp:
            print(f"[bench] bridge stderr files kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report = build_report(bench, stamp, facts, perf_counter() - started)
    markdown = render_markdown(report, bench)
    json_path, md_path = write_reports(args.report_dir, "bench", stamp, report, markdown)
    print(markdown)
    print(f"reports: {json_path} {md_path}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
