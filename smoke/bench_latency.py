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
  line, one json.dumps per delta) as the floor; ``floor_relay.py --trio``, the same
  relay on trio, shows what trio's wake-ups alone cost per turn on this machine.
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
import json
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
from latency_report import render
from lineclient import INITIALIZE, LineClient, Rpc, prompt, spawned
from smokekit import (
    BRIDGE_ARGV,
    DEFAULT_REPORT_DIR,
    FAKE_AGY,
    REPO,
    base_env,
    describe_error,
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
#: The floor relay's echo columns and their flags (floor_relay.py).
FLOOR_MODES = {"floor": [], "trio floor": ["--trio"], "shape floor": ["--shape"]}
STREAM = ("--input-format", "stream-json", "--output-format", "stream-json")


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
    commit = run("git", "rev-parse", "--short", "HEAD")
    if not commit:  # an exported tree (git archive): its name says what it is
        return Tree(path, path.name)
    dirty = "+" if run("git", "status", "--porcelain", "--", "agybridge") else ""
    return Tree(path, f"{path.name}@{commit}{dirty}")


def percentile(data: Sequence[float], share: float) -> float:
    """Nearest-rank percentile of sorted ``data`` (like smokekit.summarize's p90)."""
    return data[max(1, math.ceil(share * len(data))) - 1]


class DeltaClock:
    """Receive time - emit time of every paced delta, and each session's delta indexes."""

    def __init__(self) -> None:
        self.seen: dict[str, list[int]] = {}
        self.latencies_ms: list[float] = []

    def on_chunk(self, params: dict[str, Any], now_ns: int) -> None:
        text = params["update"]["content"]["text"]
        for match in PACED_DELTA.finditer(text):
            self.seen.setdefault(params["sessionId"], []).append(int(match.group(1)))
            self.latencies_ms.append((now_ns - int(match.group(2))) / 1e6)


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
        clock = DeltaClock()
        async with self.bridge(tree, "latency") as (rpc, pid):
            with trio.fail_after(STEP_S):
                ids = [await rpc.new_session(self.workspace()) for _ in range(self.args.sessions)]
                # Every agy is up and every session warm before the measured turn.
                await rpc.until([await rpc.send(prompt(0, sid, ECHO_TEXT)) for sid in ids])
            cpu_before = proc_cpu_s(pid)
            with trio.fail_after(self.paced_limit_s()):
                prompts = [await rpc.send(prompt(0, sid, self.paced_prompt())) for sid in ids]
                results = await rpc.until(prompts, clock.on_chunk)
            cpu_after = proc_cpu_s(pid)
        assert cpu_before is not None and cpu_after is not None
        stops = [result.get("stopReason") for result in results]
        self.record_latency(tree.label, clock, ids, stops, cpu_after - cpu_before)

    async def floor_latency(self) -> None:
        """The same load through one ``floor_relay.py`` per session (it relays one agy)."""
        clock, stops, cpu_s, go = DeltaClock(), [], [], trio.Event()
        argv = [sys.executable, str(FLOOR_RELAY), self.paced_prompt(), str(FAKE_AGY), *STREAM]

        async def relay(key: str, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            stderr = self.stderr_path("floor-paced")
            async with spawned(argv, self.env(), stderr) as process:
                client = LineClient(process)
                async for batch in client.lines():
                    if any(b'"ready"' in line for line in batch):
                        break
                task_status.started()
                await go.wait()
                await client.send(b"go")
                async for batch in client.lines():
                    now = time.monotonic_ns()
                    messages = [json.loads(line) for line in batch]
                    for message in messages:
                        if "params" in message:
                            clock.on_chunk({**message["params"], "sessionId": key}, now)
                    answers = [m["result"] for m in messages if m.get("id") == 1]
                    if answers:
                        stops.append(answers[0].get("stopReason"))
                        break
                await client.close()
                await process.wait()
            cpu_s.append(json.loads(stderr.read_text().strip().splitlines()[-1])["cpu_s"])

        keys = [f"floor-{n}" for n in range(self.args.sessions)]
        with trio.fail_after(self.paced_limit_s()):
            async with trio.open_nursery() as nursery:
                for key in keys:
                    await nursery.start(relay, key)
                go.set()
        self.record_latency("floor", clock, keys, stops, sum(cpu_s))

    def paced_prompt(self) -> str:
        return f"[fake-agy:paced] {self.args.deltas} {self.args.interval_ms:g}"

    def paced_limit_s(self) -> float:
        return STEP_S + float(self.args.deltas * self.args.interval_ms) / 1000 * 4

    def record_latency(
        self, column: str, clock: DeltaClock, keys: list[str], stops: list[Any], cpu_s: float
    ) -> None:
        """One repetition's p50/p99/max and CPU per delta, if every turn was whole."""
        complete = all(clock.seen.get(key) == list(range(self.args.deltas)) for key in keys)
        if set(stops) != {"end_turn"} or len(stops) != len(keys) or not complete:
            got = [len(clock.seen.get(key, [])) for key in keys]
            self.failures.append(f"latency, {column}: stop reasons {stops}, deltas {got}")
            return
        latencies = sorted(clock.latencies_ms)
        self.add(column, "lat_p50", percentile(latencies, 0.5))
        self.add(column, "lat_p99", percentile(latencies, 0.99))
        self.add(column, "lat_max", latencies[-1])
        self.add(column, "lat_cpu", cpu_s / len(latencies) * 1e6)

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

    async def floor_echo(self, mode: str = "floor") -> None:
        """The floor's echo turns. ``mode`` is a `FLOOR_MODES` column: the relay
        itself, the same relay on trio (the wake-ups every trio bridge pays), or on
        trio in the bridge's task shape with a commit per turn (what the shape
        costs before any of the bridge's logic)."""
        flags = FLOOR_MODES[mode]
        argv = [sys.executable, str(FLOOR_RELAY), *flags, ECHO_TEXT, str(FAKE_AGY), *STREAM]
        # The shape relay reads JSON-RPC prompts; the others a bare line per turn.
        go = prompt(1, "floor", ECHO_TEXT) if flags == ["--shape"] else b"go"
        async with spawned(argv, self.env(), self.stderr_path("floor")) as process:
            client = LineClient(process)
            with trio.fail_after(STEP_S):
                async for batch in client.lines():
                    if any(b'"ready"' in line for line in batch):
                        break
                for _ in range(self.args.warm_turns):
                    await client.send(go)
                    await client.response(1)
            cpu_before = proc_cpu_s(process.pid)
            for _ in range(self.args.echo_turns):
                with trio.fail_after(STEP_S):
                    await client.send(go)
                    result, chunks = await client.response(1)
                if result.get("stopReason") != "end_turn" or not chunks:
                    raise RuntimeError(f"{mode} echo turn: {result!r} after {chunks} chunks")
            cpu_after = proc_cpu_s(process.pid)
            await client.close()
            with trio.fail_after(STEP_S):
                await process.wait()
        assert cpu_before is not None and cpu_after is not None
        self.add(mode, "echo_cpu", (cpu_after - cpu_before) / self.args.echo_turns * 1000)

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
                    for mode in FLOOR_MODES:
                        floor = functools.partial(self.floor_echo, mode)
                        await self.attempt(f"{mode} echo", floor)
                elif name == "latency" and self.args.floor_latency:
                    await self.attempt("floor latency", self.floor_latency)
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
    parser.add_argument(
        "--no-floor-latency",
        dest="floor_latency",
        action="store_false",
        help="skip the paced load through floor relays (one per session)",
    )
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
    markdown = render(
        bench.stamp,
        args,
        columns=[tree.label for tree in trees],
        trees=", ".join(f"`{tree.label}` ({tree.path})" for tree in trees),
        samples=bench.samples,
        facts=facts,
        load_after=load_after,
    )
    if bench.failures:
        markdown += "\n**Failures:**\n" + "".join(f"- {f}\n" for f in bench.failures)
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
