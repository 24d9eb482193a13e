"""``session/load`` of a long session, and cold start on a populated database, tree beside tree.

For each bridge tree (``--bridge-src``, repeatable: before, after; default: this
repository), a bridge of that tree first records a session of ``--turns`` (200) turns
through the fake agy: echo turns, ``tool`` turns (a run_command with its output) and
``multi-tool`` turns (read, search, print and write a workspace file), in turn, so the
history holds what real turns hold: prompts, text, tool cards, usage. Each tree writes
its own database with its own code, so a tree is never fed a schema it does not know.
Then, per repetition, with the trees alternating and the order flipping every
repetition:

* ``load``: a fresh bridge on that database, ``initialize`` answered, then
  ``session/load`` as its first request (what an editor reopening a session at start
  sees), timed from the request sent to its response (the history's
  ``session/update`` notifications all arrive before it), ``--loads`` (5) times, each on
  a fresh bridge; the row checks every load replays the same number of updates. A
  second row does the same on a fresh bridge that first ran a session with one echo
  turn (its session machinery loaded, agy's model catalog in hand, that agy idle): the
  history's own cost.
* ``cold``: spawn → ``initialize`` answered with the populated database (as a user's
  bridge starts: its package byte-compiled, logging to a file), beside the
  dependency-import floor of ``bench_floor.py`` (ratio = bridge / floor).

    .venv/bin/python smoke/bench_load.py                        # this tree, 5 reps
    .venv/bin/python smoke/bench_load.py --bridge-src ../old --bridge-src .   # before / after
    .venv/bin/python smoke/bench_load.py --quick                # 1 rep, 40 turns
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import Any

import trio
from bench_floor import DEPENDENCY_FLOOR
from bench_latency import Tree, describe_tree
from cold_trees import ColdTree, prepare
from lineclient import INITIALIZE, LineClient, Rpc, prompt, request, spawned, timed_initialize
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
    summarize,
    utc_stamp,
    wait_marked_gone,
    write_reports,
)

#: The recorded session's turns, in turn: text only, one tool, four tools.
TURN_KINDS = ("echo turn {n}: a line of text to keep", "[fake-agy:tool]", "[fake-agy:multi-tool]")
STEP_S = 60.0
#: Bound on recording the whole session (200 turns take a few seconds).
RECORD_S = 600.0


def cpu_ms(pid: int) -> float:
    """CPU time of all of ``pid``'s threads so far, in ms (``schedstat``: nanoseconds,
    unlike ``stat``'s 10 ms ticks): on a busy machine the wall time of one load
    moves with other work, its CPU time much less."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a worker thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e6


class LoadBench:
    def __init__(self, args: argparse.Namespace, trees: list[Tree], tmp: Path) -> None:
        self.args = args
        self.trees = trees
        self.tmp = tmp
        self.stamp = utc_stamp()
        self.marker = f"agyb-load-{self.stamp}"
        #: column (tree label or "floor") -> measure -> values
        self.samples: dict[str, dict[str, list[float]]] = {}
        self.failures: list[str] = []
        self.counter = 0
        #: tree label -> (database, session id, workspace) of its recorded session
        self.recorded: dict[str, tuple[Path, str, str]] = {}
        #: tree label -> the counts of session/update notifications its loads replayed
        self.replayed: dict[str, set[int]] = {}
        self.cold_trees: dict[str, ColdTree] = {}

    def add(self, column: str, measure: str, *values: float) -> None:
        self.samples.setdefault(column, {}).setdefault(measure, []).extend(values)

    def env(self, **extra: str) -> dict[str, str]:
        return base_env(
            self.marker,
            AGY_BIN=str(FAKE_AGY),
            FAKE_AGY_STATE_DIR=str(self.tmp / "agy-state"),
            FAKE_AGY_FRAGMENT_DELAY="0",
            **extra,
        )

    def stderr_path(self, name: str) -> Path:
        self.counter += 1
        return self.tmp / f"{self.counter:03d}-{name}.stderr"

    async def record(self, tree: Tree) -> None:
        """A ``--turns`` session in a database of the tree's own."""
        database = self.tmp / f"{len(self.recorded)}-{tree.path.name}.db"
        workspace = tempfile.mkdtemp(dir=self.tmp)
        env = self.env(
            AGYBRIDGE_DB=str(database),
            PYTHONPATH=str(tree.path),
            PYTHONPYCACHEPREFIX=str(self.tmp / "pycache"),
        )
        stderr = self.stderr_path(f"record-{tree.path.name}")
        async with spawned(BRIDGE_ARGV, env, stderr, cwd=tree.path) as process:
            rpc = Rpc(LineClient(process))
            with trio.fail_after(RECORD_S):
                await rpc.until([await rpc.send(INITIALIZE)])
                session_id = await rpc.new_session(workspace)
                for n in range(self.args.turns):
                    text = TURN_KINDS[n % len(TURN_KINDS)].format(n=n)
                    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
                    result = await rpc.call("session/prompt", params)
                    if result.get("stopReason") != "end_turn":
                        raise RuntimeError(f"recording, turn {n}: answered {result!r}")
            await rpc.client.close()
            with trio.fail_after(STEP_S):
                await process.wait()
        if process.returncode != 0:
            raise RuntimeError(f"recording bridge of {tree.label} exited {process.returncode}")
        self.recorded[tree.label] = (database, session_id, workspace)

    async def load(self, tree: Tree, *, warm: bool) -> None:
        database, session_id, workspace = self.recorded[tree.label]
        # As installed: byte-compiled (a first request imports the session machinery).
        cwd, extra = self.cold_trees[tree.label].launch(bytecode=True)
        env = self.env(AGYBRIDGE_DB=str(database), **extra)
        stderr = self.stderr_path(f"load-{tree.path.name}")
        async with spawned(BRIDGE_ARGV, env, stderr, cwd=cwd) as process:
            client = LineClient(process)
            with trio.fail_after(STEP_S):
                await client.send(INITIALIZE)
                await client.response(1)
                if not warm and self.args.first_after_ms:
                    # An editor that opens a stored session some time after start-up.
                    await trio.sleep(self.args.first_after_ms / 1000)
                if warm:
                    # A session and a turn first: the bridge has then loaded its
                    # session machinery and agy's model catalog, and that agy is
                    # idle, so the load times the history alone.
                    new = {"cwd": tempfile.mkdtemp(dir=self.tmp), "mcpServers": []}
                    await client.send(request(2, "session/new", new))
                    warm_id = (await client.response(2))[0]["sessionId"]
                    await client.send(prompt(3, warm_id, "warm-up"))
                    await client.response(3)
                params = {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
                cpu_before = cpu_ms(process.pid)
                started = perf_counter()
                await client.send(request(4, "session/load", params))
                updates = (await client.response(4, counting=b'"session/update"'))[1]
                elapsed = perf_counter() - started
                cpu = cpu_ms(process.pid) - cpu_before
            await client.close()
            with trio.fail_after(STEP_S):
                await process.wait()
        if process.returncode != 0:
            self.failures.append(f"load bridge of {tree.label} exited {process.returncode}")
        self.replayed.setdefault(tree.label, set()).add(updates)
        kind = "warm" if warm else "first"
        self.add(tree.label, f"load_{kind}", elapsed * 1000)
        self.add(tree.label, f"load_{kind}_cpu", cpu)

    async def initialize_time(
        self, argv: Sequence[str], env: dict[str, str], name: str, cwd: Path | None
    ) -> float:
        elapsed, returncode = await timed_initialize(argv, env, self.stderr_path(name), STEP_S, cwd)
        if returncode != 0:
            self.failures.append(f"{name}: exit status {returncode}")
        return elapsed * 1000

    async def cold(self, trees: Sequence[Tree]) -> None:
        """The floor, then each tree on its populated database."""
        floor_argv = [sys.executable, "-c", DEPENDENCY_FLOOR]
        self.add("floor", "cold", await self.initialize_time(floor_argv, self.env(), "floor", None))
        for tree in trees:
            cold_tree = self.cold_trees[tree.label]
            cwd, extra = cold_tree.launch(bytecode=True)
            env = self.env(
                AGYBRIDGE_DB=str(self.recorded[tree.label][0]),
                AGYBRIDGE_LOG_FILE=str(self.tmp / "cold-bridge.log"),
                **extra,
            )
            self.add(tree.label, "cold", await self.initialize_time(BRIDGE_ARGV, env, "cold", cwd))

    async def run(self) -> None:
        only = set(self.args.only.split(","))
        for n, tree in enumerate(self.trees):
            print(
                f"[bench_load] recording {self.args.turns} turns with {tree.label}", file=sys.stderr
            )
            await self.record(tree)
            self.cold_trees[tree.label] = prepare(
                tree.label, tree.path, str(tree.path), self.tmp / f"source-{n}"
            )
        for rep in range(self.args.reps):
            print(f"[bench_load] repetition {rep + 1}/{self.args.reps}", file=sys.stderr)
            trees = self.trees if rep % 2 == 0 else self.trees[::-1]
            try:
                if "load" in only:
                    for _ in range(self.args.loads):
                        for tree in trees:
                            await self.load(tree, warm=False)
                            await self.load(tree, warm=True)
                if "cold" in only:
                    for _ in range(self.args.cold_reps):
                        await self.cold(trees)
            except Exception as exc:
                self.failures.append(describe_error(exc))
            survivors = await wait_marked_gone(self.marker, 3.0)
            if survivors:
                kill_processes(survivors)
                self.failures.append(f"left over: {', '.join(map(str, survivors))[:300]}")
        for label, counts in self.replayed.items():
            if len(counts) != 1:
                self.failures.append(f"{label}: loads replayed {sorted(counts)} updates")


def render(bench: LoadBench, facts: dict[str, Any]) -> str:
    columns = [tree.label for tree in bench.trees]
    lines = [
        f"# bench_load {bench.stamp}",
        "",
        facts_markdown(facts),
        "",
        f"{bench.args.reps} repetition(s) × {bench.args.loads} loads, "
        f"{bench.args.cold_reps} cold starts; a {bench.args.turns}-turn session "
        "(echo, tool and multi-tool turns in turn). Median / p90 (nearest rank) / min / max."
        + (
            f" The first-request loads were sent {bench.args.first_after_ms:g} ms after "
            "`initialize` was answered."
            if bench.args.first_after_ms
            else ""
        ),
        "",
        "| measure | tree | n | median | p90 | min | max |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    measures = (
        ("load_first", "`session/load` as a fresh bridge's first request (ms)"),
        ("load_first_cpu", "bridge CPU over that load (ms)"),
        ("load_warm", "`session/load` after a session and a turn (ms)"),
        ("load_warm_cpu", "bridge CPU over that load (ms)"),
        ("cold", "spawn → `initialize`, populated database (ms)"),
    )
    for measure, label in measures:
        for column in [*columns, "floor"]:
            values = bench.samples.get(column, {}).get(measure)
            if not values:
                continue
            s = summarize(values)
            lines.append(
                f"| {label} | {column} | {s['n']} | {fmt(s['median'])} | {fmt(s['p90'])} | "
                f"{fmt(s['min'])} | {fmt(s['max'])} |"
            )
    floor = summarize(bench.samples.get("floor", {}).get("cold", []))["median"]
    for column in columns if floor else ():
        bridge = summarize(bench.samples.get(column, {}).get("cold", []))["median"]
        if bridge and floor:
            lines.append(
                f"| cold start / dependency-import floor | {column} | | "
                f"{bridge / floor:.2f}× | | | |"
            )
    for column in columns:
        counts = sorted(bench.replayed.get(column, ()))
        lines.append(f"\n- {column}: each load replayed {counts} `session/update` notifications")
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
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--turns", type=int, default=200, help="turns of the recorded session")
    parser.add_argument("--loads", type=int, default=2, help="loads per tree per repetition")
    parser.add_argument("--cold-reps", type=int, default=2, help="cold starts per repetition")
    parser.add_argument(
        "--first-after-ms",
        type=float,
        default=0.0,
        help="wait this long after initialize before the first-request load (default: none)",
    )
    parser.add_argument("--only", default="load,cold")
    parser.add_argument("--quick", action="store_true", help="1 rep, 40 turns")
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.turns = 1, 40
    unknown = set(args.only.split(",")) - {"load", "cold"}
    if unknown:
        parser.error(f"--only: unknown phase(s) {', '.join(sorted(unknown))}")
    if args.first_after_ms < 0:
        parser.error("--first-after-ms must not be negative")
    for name in ("reps", "turns", "loads", "cold_reps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


async def main_async(args: argparse.Namespace, trees: list[Tree]) -> int:
    facts = machine_facts()
    with tempfile.TemporaryDirectory(prefix="agyb-load-") as tmp:
        bench = LoadBench(args, trees, Path(tmp))
        try:
            await bench.run()
        except Exception as exc:
            bench.failures.append(describe_error(exc))
    markdown = render(bench, facts)
    data = {
        "facts": facts,
        "trees": {tree.label: str(tree.path) for tree in trees},
        "args": {key: str(value) for key, value in vars(args).items()},
        "samples": bench.samples,
        "replayed": {label: sorted(counts) for label, counts in bench.replayed.items()},
        "failures": bench.failures,
    }
    write_reports(args.report_dir, "bench_load", bench.stamp, data, markdown)
    print(markdown)
    return 1 if bench.failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    trees = [describe_tree(path) for path in args.bridge_src or [REPO]]
    return trio.run(main_async, args, trees)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
