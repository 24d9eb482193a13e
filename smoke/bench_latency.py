"""Per-event latency, warm echo turn CPU and cancel time, one bridge tree beside another.

* ``latency``: one bridge, K sessions (default 8) prompted at once with
  ``[fake-agy:paced] N INTERVAL_MS``: every text delta carries the fake's
  ``time.monotonic_ns()`` at its write, the client stamps each read of the bridge's
  stdout with the same clock (CLOCK_MONOTONIC is system-wide), so receive - emit is the
  delta's whole trip through the bridge (two pipes included). p50 / p99 / max over all
  sessions' deltas of a repetition, and the bridge's CPU per delta over that turn.
* ``echo``: one session, warm-up turns, then M echo turns one after another: the
  bridge's CPU (utime + stime from ``/proc``) over those turns / M, against issue 15's
  target (≤ 0.5 ms), and the same through ``floor_relay.py`` (one json.loads per agy
  line, one json.dumps per delta) as the floor.
* ``cancel``: ``session/cancel`` some ms after a ``slow`` turn's first chunk until the
  prompt's ``cancelled`` answer, then the next echo turn on that session (agy respawned).

Each ``--bridge-src DIR`` (repeatable; default this repository) is run as
``python -m agybridge`` with ``PYTHONPATH=DIR`` and cwd DIR, with this repository's
fake agy, so an old tree is measured by the same bench. Trees alternate within each
repetition (the order flips every repetition), so every column sees the same machine
load; the table gives medians over repetitions and the ratio last / first tree.

    .venv/bin/python smoke/bench_latency.py --bridge-src /work/wtbase --bridge-src .
    .venv/bin/python smoke/bench_latency.py --quick
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from lineclient import INITIALIZE, LineClient, Rpc, prompt, spawned
from smokekit import (
    BRIDGE_ARGV,
    DEFAULT_REPORT_DIR,
    FAKE_AGY,
    REPO,
    base_env,
    describe_error,
    facts_markdown,
    fmt,
    kill_processes,
    machine_facts,
    proc_cpu_s,
    summarize,
    utc_stamp,
    wait_marked_gone,
    write_reports,
)

FLOOR_RELAY = Path(__file__).resolve().parent / "floor_relay.py"
#: Bound on one request or echo turn; a paced or slow turn adds its own length.
STEP_S = 60.0
ECHO_TEXT = "Latency bench: the quick brown fox jumps over the lazy dog."
SLOW_PROMPT = "[fake-agy:slow] stream ticks until cancelled"
#: One paced delta: ``"<index>@<monotonic ns> "`` (fake_agy paced_delta).
PACED_DELTA = re.compile(r"(\d+)@(\d+) ")
ECHO_CPU_TARGET_MS = 0.5
#: The floor's CPU per warm echo turn when issue 15 set that target (a quieter machine).
ISSUE_ECHO_FLOOR_MS = 0.1


@dataclass(frozen=True)
class Tree:
    """A bridge source tree and how the report names it."""

    path: Path
    label: str


def describe_tree(path: Path) -> Tree:
    """``path`` as a bridge tree, once a bridge started the bench's way imports from it."""
    path = path.resolve()

    def run(*argv: str, **env: str) -> str:
        environment = {**os.environ, **env}
        done = subprocess.run(argv, cwd=path, env=environment, capture_output=True, check=False)
        return done.stdout.decode(errors="replace").strip()

    # cwd and PYTHONPATH as in LatencyBench.bridge: -m puts the cwd first on sys.path.
    code = "import agybridge; print(agybridge.__file__)"
    imported = run(sys.executable, "-c", code, PYTHONPATH=str(path))
    if not imported.startswith(f"{path}{os.sep}"):
        raise SystemExit(f"--bridge-src {path}: agybridge is imported from {imported!r} there")
    commit = run("git", "rev-parse", "--short", "HEAD") or "?"
    dirty = "+" if run("git", "status", "--porcelain", "--", "agybridge") else ""
    return Tree(path, f"{path.name}@{commit}{dirty}")


def percentile(data: Sequence[float], share: float) -> float:
    """Nearest-rank percentile of sorted ``data`` (like smokekit.summarize's p90)."""
    return data[max(1, math.ceil(share * len(data))) - 1]


class LatencyBench:
    def __init__(self, args: argparse.Namespace, trees: list[Tree], tmp: Path) -> None:
        self.args = args
        self.trees = trees
        self.tmp = tmp
        self.stamp = utc_stamp()
        self.marker = f"agyb-lat-{self.stamp}"
        #: column (tree label or "floor") -> measure -> one value per repetition (or event)
        self.samples: dict[str, dict[str, list[float]]] = {}
        self.failures: list[str] = []
        self.counter = 0

    def add(self, column: str, measure: str, *values: float) -> None:
        self.samples.setdefault(column, {}).setdefault(measure, []).extend(values)

    def env(self, **extra: str) -> dict[str, str]:
        return base_env(
            self.marker,
            AGY_BIN=str(FAKE_AGY),
            FAKE_AGY_SCENARIO="echo",
            FAKE_AGY_STATE_DIR=str(self.tmp / "agy-state"),
            FAKE_AGY_FRAGMENT_DELAY="0",
            # Bytecode, if written at all, goes to our scratch dir, not into the trees.
            PYTHONPYCACHEPREFIX=str(self.tmp / "pycache"),
            **extra,
        )

    def stderr_path(self, name: str) -> Path:
        self.counter += 1
        return self.tmp / f"{self.counter:03d}-{name}.stderr"

    def workspace(self) -> str:
        return tempfile.mkdtemp(dir=self.tmp)

    @asynccontextmanager
    async def bridge(self, tree: Tree, name: str) -> AsyncIterator[tuple[Rpc, int]]:
        """An initialized bridge from ``tree``; it must exit 0 on stdin EOF."""
        env = self.env(PYTHONPATH=str(tree.path))
        stderr = self.stderr_path(f"{name}-{tree.path.name}")
        async with spawned(BRIDGE_ARGV, env, stderr, cwd=tree.path) as process:
            rpc = Rpc(LineClient(process))
            with trio.fail_after(STEP_S):
                await rpc.until([await rpc.send(INITIALIZE)])
            yield rpc, process.pid
            await rpc.client.close()
            with trio.fail_after(STEP_S):
                await process.wait()
        if process.returncode != 0:
            self.failures.append(f"{name} bridge of {tree.label} exited {process.returncode}")

    # --- latency -----------------------------------------------------------------

    async def latency(self, tree: Tree) -> None:
        sessions, count = self.args.sessions, self.args.deltas
        seen: dict[str, list[int]] = {}
        latencies: list[float] = []

        def on_chunk(params: dict[str, Any], now: int) -> None:
            text = params["update"]["content"]["text"]
            for match in PACED_DELTA.finditer(text):
                seen.setdefault(params["sessionId"], []).append(int(match.group(1)))
                latencies.append((now - int(match.group(2))) / 1e6)

        async with self.bridge(tree, "latency") as (rpc, pid):
            with trio.fail_after(STEP_S):
                ids = [await rpc.new_session(self.workspace()) for _ in range(sessions)]
                # Every agy is up and every session warm before the measured turn.
                await rpc.until([await rpc.send(prompt(0, sid, ECHO_TEXT)) for sid in ids])
            cpu_before = proc_cpu_s(pid)
            paced = f"[fake-agy:paced] {count} {self.args.interval_ms:g}"
            with trio.fail_after(STEP_S + count * self.args.interval_ms / 1000 * 4):
                prompts = [await rpc.send(prompt(0, sid, paced)) for sid in ids]
                results = await rpc.until(prompts, on_chunk)
            cpu_after = proc_cpu_s(pid)
        stops = {result.get("stopReason") for result in results}
        in_order = all(seen.get(sid) == list(range(count)) for sid in ids)
        if stops != {"end_turn"} or not in_order:
            got = {sid[:8]: len(seen.get(sid, [])) for sid in ids}
            self.failures.append(
                f"latency, {tree.label}: stop reasons {stops}, deltas in order per session: "
                f"{in_order} ({got})"
            )
            return
        latencies.sort()
        self.add(tree.label, "lat_p50", percentile(latencies, 0.5))
        self.add(tree.label, "lat_p99", percentile(latencies, 0.99))
        self.add(tree.label, "lat_max", latencies[-1])
        assert cpu_before is not None and cpu_after is not None
        self.add(tree.label, "lat_cpu", (cpu_after - cpu_before) / len(latencies) * 1e6)

    # --- warm echo turns ---------------------------------------------------------

    async def echo_turns(self, rpc: Rpc, session_id: str, turns: int) -> list[float]:
        """``turns`` echo prompts one after another; each turn's wall ms."""
        walls = []
        parts: list[str] = []
        for _ in range(turns):
            parts.clear()
            started = time.monotonic_ns()
            request_id = await rpc.send(prompt(0, session_id, ECHO_TEXT))
            with trio.fail_after(STEP_S):
                (result,) = await rpc.until(
                    [request_id],
                    lambda params, _: parts.append(params["update"]["content"]["text"]),
                )
            walls.append(rpc.answered_at.pop(request_id) - started)
            if result.get("stopReason") != "end_turn" or "".join(parts) != ECHO_TEXT + "\n":
                raise RuntimeError(f"echo turn: {result!r}, text {''.join(parts)!r}")
        return [wall / 1e6 for wall in walls]

    async def echo(self, tree: Tree) -> None:
        async with self.bridge(tree, "echo") as (rpc, pid):
            with trio.fail_after(STEP_S):
                session_id = await rpc.new_session(self.workspace())
            await self.echo_turns(rpc, session_id, self.args.warm_turns)
            cpu_before = proc_cpu_s(pid)
            walls = await self.echo_turns(rpc, session_id, self.args.echo_turns)
            cpu_after = proc_cpu_s(pid)
        assert cpu_before is not None and cpu_after is not None
        self.add(tree.label, "echo_cpu", (cpu_after - cpu_before) / len(walls) * 1000)
        self.add(tree.label, "echo_wall", summarize(walls)["median"] or 0.0)

    async def floor_echo(self) -> None:
        argv = [sys.executable, str(FLOOR_RELAY), ECHO_TEXT, str(FAKE_AGY)]
        argv += ["--input-format", "stream-json", "--output-format", "stream-json"]
        async with spawned(argv, self.env(), self.stderr_path("floor")) as process:
            client = LineClient(process)
            with trio.fail_after(STEP_S):
                async for batch in client.lines():
                    if any(b'"ready"' in line for line in batch):
                        break
                for _ in range(self.args.warm_turns):
                    await client.send(b"go")
                    await client.response(1)
            cpu_before = proc_cpu_s(process.pid)
            for _ in range(self.args.echo_turns):
                with trio.fail_after(STEP_S):
                    await client.send(b"go")
                    result, chunks = await client.response(1)
                if result.get("stopReason") != "end_turn" or not chunks:
                    raise RuntimeError(f"floor echo turn: {result!r} after {chunks} chunks")
            cpu_after = proc_cpu_s(process.pid)
            await client.close()
            with trio.fail_after(STEP_S):
                await process.wait()
        assert cpu_before is not None and cpu_after is not None
        self.add("floor", "echo_cpu", (cpu_after - cpu_before) / self.args.echo_turns * 1000)

    # --- cancel ------------------------------------------------------------------

    async def cancel(self, tree: Tree) -> None:
        async with self.bridge(tree, "cancel") as (rpc, _):
            for _ in range(self.args.cancels):
                with trio.fail_after(STEP_S):
                    session_id = await rpc.new_session(self.workspace())
                    slow = await rpc.send(prompt(0, session_id, SLOW_PROMPT))
                    # Cancel into a streaming turn: agy is up once its first chunk is here
                    # (nothing but this turn's chunks can come meanwhile).
                    async for batch in rpc.client.lines():
                        if any(b'"agent_message_chunk"' in line for line in batch):
                            break
                    await trio.sleep(self.args.cancel_after_ms / 1000)
                    cancel_at = time.monotonic_ns()
                    await rpc.client.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "session/cancel",
                            "params": {"sessionId": session_id},
                        }
                    )
                    (result,) = await rpc.until([slow])
                    cancelled_ms = (rpc.answered_at.pop(slow) - cancel_at) / 1e6
                if result.get("stopReason") != "cancelled":
                    raise RuntimeError(f"cancel, {tree.label}: answered {result!r}")
                self.add(tree.label, "cancel", cancelled_ms)
                walls = await self.echo_turns(rpc, session_id, 1)
                self.add(tree.label, "after_cancel", *walls)
                with trio.fail_after(STEP_S):
                    await rpc.call("session/close", {"sessionId": session_id})

    # --- the run -----------------------------------------------------------------

    async def run(self) -> None:
        only = set(self.args.only.split(","))
        phases = [
            (name, body)
            for name, body in (
                ("latency", self.latency),
                ("echo", self.echo),
                ("cancel", self.cancel),
            )
            if name in only
        ]
        for rep in range(self.args.reps):
            print(f"[bench_latency] repetition {rep + 1}/{self.args.reps}", file=sys.stderr)
            # The order flips every repetition: neither tree always runs first.
            trees = self.trees if rep % 2 == 0 else self.trees[::-1]
            for name, body in phases:
                if name == "echo":
                    await self.attempt("floor echo", self.floor_echo)
                for tree in trees:
                    await self.attempt(f"{name}, {tree.label}", functools.partial(body, tree))
            survivors = await wait_marked_gone(self.marker, 3.0)
            if survivors:
                kill_processes(survivors)
                self.failures.append(f"left over: {', '.join(map(str, survivors))[:300]}")

    async def attempt(self, what: str, body: Callable[[], Any]) -> None:
        try:
            await body()
        except Exception as exc:
            self.failures.append(f"{what}: {describe_error(exc)}")


#: (measure key, label, unit, digits); latency and echo keys are one value per repetition.
ROWS = (
    ("lat_p50", "per-event latency p50 ({shape})", "ms", 2),
    ("lat_p99", "per-event latency p99 ({shape})", "ms", 2),
    ("lat_max", "per-event latency max ({shape})", "ms", 2),
    ("lat_cpu", "bridge CPU per paced delta ({shape})", "µs", 1),
    ("echo_cpu", "bridge CPU per warm echo turn (target ≤ 0.5 ms)", "ms", 3),
    ("echo_wall", "warm echo turn, prompt → answer", "ms", 2),
    ("cancel", "session/cancel → cancelled, median", "ms", 1),
    ("cancel_p90", "session/cancel → cancelled, p90", "ms", 1),
    ("after_cancel", "echo turn after a cancel (agy respawned), median", "ms", 1),
)


def column_value(samples: dict[str, list[float]], key: str) -> float | None:
    """The table's number: the median over repetitions; cancels pool every cancel."""
    if key == "cancel_p90":
        return summarize(samples.get("cancel", []))["p90"]
    return summarize(samples.get(key, []))["median"]


def render(bench: LatencyBench, facts: dict[str, Any], load_after: list[float]) -> str:
    args = bench.args
    columns = [tree.label for tree in bench.trees]
    shape = f"{args.sessions} sessions × {args.deltas} deltas @ {args.interval_ms:g} ms"
    two = len(columns) >= 2
    head = ["measure", *columns, "floor"] + ([f"{columns[-1]} / {columns[0]}"] if two else [])
    lines = [
        f"# bench_latency {bench.stamp}",
        "",
        facts_markdown(facts),
        f"- Load average at the end: {' / '.join(f'{x:.2f}' for x in load_after)}",
        f"- Trees: {', '.join(f'`{t.label}` ({t.path})' for t in bench.trees)}",
        "",
        f"{args.reps} repetition(s), trees alternating; medians over repetitions (cancels: "
        f"{args.cancels} per repetition, pooled); {args.echo_turns} echo turns after "
        f"{args.warm_turns} warm-up; cancel {args.cancel_after_ms:g} ms after the slow "
        "turn's first chunk. Floor: `floor_relay.py` (one json.loads per agy line).",
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "--:|" * (len(head) - 1),
    ]
    for key, label, unit, digits in ROWS:
        values = [column_value(bench.samples.get(column, {}), key) for column in columns]
        if all(value is None for value in values):
            continue
        floor = column_value(bench.samples.get("floor", {}), key)
        cells = [f"{fmt(value, digits)} {unit}" if value is not None else "–" for value in values]
        cells.append(f"{fmt(floor, digits)} {unit}" if floor is not None else "")
        if two:
            first, last = values[0], values[-1]
            cells.append(f"{last / first:.2f}×" if first and last is not None else "–")
        lines.append(f"| {label.format(shape=shape)} | " + " | ".join(cells) + " |")
    floor_echo = column_value(bench.samples.get("floor", {}), "echo_cpu")
    for column in columns:
        echo_cpu = column_value(bench.samples.get(column, {}), "echo_cpu")
        if echo_cpu is not None:
            verdict = "meets" if echo_cpu <= ECHO_CPU_TARGET_MS else "misses"
            times_floor = f", {echo_cpu / floor_echo:.1f}× the floor" if floor_echo else ""
            lines.append(
                f"\n`{column}` {verdict} the warm echo target: {echo_cpu:.3f} ms "
                f"(≤ {ECHO_CPU_TARGET_MS} ms{times_floor}; the issue measured the target "
                f"as {ECHO_CPU_TARGET_MS / ISSUE_ECHO_FLOOR_MS:g}× its floor of "
                f"{ISSUE_ECHO_FLOOR_MS} ms)."
            )
    ticks = os.sysconf("SC_CLK_TCK")
    lines.append(
        f"\nCPU comes from /proc (utime + stime, {1000 / ticks:g} ms ticks): "
        f"{args.echo_turns} echo turns put the echo row's resolution at "
        f"{1000 / ticks / args.echo_turns:.3f} ms per turn."
    )
    if bench.failures:
        lines += ["", "**Failures:**", *(f"- {f}" for f in bench.failures)]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bridge-src",
        action="append",
        type=Path,
        help="a tree holding agybridge/ (repeat: first = before, last = after; default: this repo)",
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--deltas", type=int, default=500, help="paced deltas per session")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="between paced deltas")
    parser.add_argument("--echo-turns", type=int, default=200, help="measured echo turns")
    parser.add_argument("--warm-turns", type=int, default=2, help="echo turns before those")
    parser.add_argument("--cancels", type=int, default=5, help="cancels per repetition")
    parser.add_argument("--cancel-after-ms", type=float, default=300.0)
    parser.add_argument("--only", default="latency,echo,cancel")
    parser.add_argument("--quick", action="store_true", help="1 rep, a small load of each kind")
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.sessions, args.deltas, args.echo_turns, args.cancels = 1, 4, 100, 50, 2
    unknown = set(args.only.split(",")) - {"latency", "echo", "cancel"}
    if unknown:
        parser.error(f"--only: unknown phase(s) {', '.join(sorted(unknown))}")
    positive = ("reps", "sessions", "deltas", "echo_turns", "cancels")
    for name in positive:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.interval_ms < 0 or args.warm_turns < 0 or args.cancel_after_ms < 0:
        parser.error("--interval-ms, --warm-turns and --cancel-after-ms must not be negative")
    return args


async def main_async(args: argparse.Namespace, trees: list[Tree]) -> int:
    facts = machine_facts()
    with tempfile.TemporaryDirectory(prefix="agyb-lat-") as tmp:
        bench = LatencyBench(args, trees, Path(tmp))
        await bench.run()
    load_after = list(os.getloadavg())
    markdown = render(bench, facts, load_after)
    data = {
        "facts": facts,
        "load_after": load_after,
        "trees": {tree.label: str(tree.path) for tree in trees},
        "args": {key: str(value) for key, value in vars(args).items()},
        "samples": bench.samples,
        "failures": bench.failures,
    }
    write_reports(args.report_dir, "bench_latency", bench.stamp, data, markdown)
    print(markdown)
    return 1 if bench.failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    trees = [describe_tree(path) for path in args.bridge_src or [REPO]]
    return trio.run(main_async, args, trees)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
