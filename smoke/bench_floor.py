"""The bridge against its floors, measured side by side in one run.

* ``flood``: one turn of N text deltas written by the fake as fast as it can
  (``[fake-agy:flood] N``), relayed by a fresh bridge and by ``floor_relay.py`` (one
  ``json.loads`` + one ``json.dumps`` per agy line, stdlib only): events/s (N over
  prompt sent -> prompt answered, on the client side), CPU µs per event (the relay's
  own CPU over the turn) and peak RSS (``VmHWM`` after the turn), at each N.
* ``cold``: spawn -> ``initialize`` answered, for the bridge and for a floor that only
  imports the bridge's dependencies (trio, attrs, cattrs, platformdirs) and then answers
  one line; plus ``python -X importtime`` of a bridge up to its ``initialize``
  answer: the self time of agybridge's own modules, and the slowest ones. The bridge's
  package is byte-compiled first, as ``pip install`` does (cold_trees.py); a copy without
  bytecode gives the informational "no bytecode" row. Each ``--bridge-src DIR``
  (repeatable: before, after) gets its own cold rows, started as in bench_latency.py.

Both sides run in alternation within each repetition, so the ratios compare runs
made under the same machine load (the numbers themselves are noisy on a shared
machine; the ratios much less). The client reads raw lines and only counts
``agent_message_chunk`` lines, so that it costs far less than either relay.

    .venv/bin/python smoke/bench_floor.py                 # 3 reps, N = 10k and 100k
    .venv/bin/python smoke/bench_floor.py --quick         # 1 rep, N = 2k and 10k
    .venv/bin/python smoke/bench_floor.py --only cold --reps 10
    .venv/bin/python smoke/bench_floor.py --only cold --bridge-src ../base --bridge-src .
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import Any

import trio
from bench_latency import describe_tree
from cold_trees import ColdTree, prepare
from lineclient import INITIALIZE, LineClient, prompt, request, spawned, timed_initialize
from smokekit import (
    BRIDGE_ARGV,
    DEFAULT_REPORT_DIR,
    FAKE_AGY,
    base_env,
    describe_error,
    facts_markdown,
    fmt,
    kill_processes,
    machine_facts,
    proc_cpu_s,
    proc_memory_kib,
    stop_process,
    summarize,
    utc_stamp,
    wait_marked_gone,
    write_reports,
)

HERE = Path(__file__).resolve().parent
FLOOR_RELAY = HERE / "floor_relay.py"
#: What the bridge needs before it can answer ``initialize`` (pyproject dependencies).
DEPENDENCY_FLOOR = (
    "import sys, json, trio, attrs, cattrs, platformdirs\n"
    "sys.stdin.buffer.readline()\n"
    'sys.stdout.buffer.write(b\'{"jsonrpc":"2.0","id":1,"result":{}}\\n\'); sys.stdout.flush()\n'
    "sys.stdin.buffer.read()\n"
)
#: Bound on one flood turn (100k deltas take seconds even under load).
TURN_LIMIT_S = 300.0
STEP_LIMIT_S = 60.0


def flood_key(tree: ColdTree, measure: str) -> str:
    """The samples' key of a tree's flood measure (``bridge_<measure>`` for the default tree)."""
    return f"bridge_{measure}@{tree.label}" if tree.label else f"bridge_{measure}"


def cold_key(tree: ColdTree, *, bytecode: bool) -> str:
    """The samples' key of a tree's cold starts (``cold_bridge`` for the default tree)."""
    key = "cold_bridge" if bytecode else "cold_bridge_nobytecode"
    return f"{key}@{tree.label}" if tree.label else key


class FloorBench:
    def __init__(self, args: argparse.Namespace, tmp: Path, trees: Sequence[ColdTree]) -> None:
        self.args = args
        self.tmp = tmp
        self.trees = list(trees)
        self.stamp = utc_stamp()
        self.samples: dict[str, list[float]] = {}
        self.failures: list[str] = []
        self.counter = 0

    def add(self, key: str, value: float) -> None:
        self.samples.setdefault(key, []).append(value)

    def env(self, **extra: str) -> dict[str, str]:
        self.counter += 1
        return base_env(
            f"agyb-floor-{self.stamp}",
            AGY_BIN=str(FAKE_AGY),
            FAKE_AGY_STATE_DIR=str(self.tmp / "agy-state"),
            FAKE_AGY_FRAGMENT_DELAY="0",
            **extra,
        )

    def stderr_path(self, name: str) -> Path:
        return self.tmp / f"{self.counter:03d}-{name}.stderr"

    # --- flood -------------------------------------------------------------------

    async def bridge_flood(self, count: int, tree: ColdTree) -> None:
        workspace = tempfile.mkdtemp(dir=self.tmp)
        cwd, extra = tree.launch(bytecode=True)
        env = self.env(**extra)
        async with spawned(BRIDGE_ARGV, env, self.stderr_path("bridge"), cwd=cwd) as process:
            client = LineClient(process)
            with trio.fail_after(STEP_LIMIT_S):
                await client.send(INITIALIZE)
                await client.response(1)
                await client.send(request(2, "session/new", {"cwd": workspace, "mcpServers": []}))
                session_id = (await client.response(2))[0]["sessionId"]
                # A one-delta turn first: agy is up and the turn path is warm.
                await client.send(prompt(3, session_id, "[fake-agy:flood] 1"))
                await client.response(3)
            cpu_before = proc_cpu_s(process.pid)
            started = perf_counter()
            with trio.fail_after(TURN_LIMIT_S):
                await client.send(prompt(4, session_id, f"[fake-agy:flood] {count}"))
                result, chunks = await client.response(4)
            elapsed = perf_counter() - started
            cpu_after = proc_cpu_s(process.pid)
            hwm = proc_memory_kib(process.pid).get("VmHWM", 0)
            await client.close()
            with trio.fail_after(STEP_LIMIT_S):
                await process.wait()
        self.check(f"bridge flood {count}", result, chunks, count, process.returncode)
        assert cpu_before is not None and cpu_after is not None
        self.add(flood_key(tree, f"eps_{count}"), count / elapsed)
        self.add(flood_key(tree, f"cpu_{count}"), (cpu_after - cpu_before) / count * 1e6)
        self.add(flood_key(tree, f"rss_{count}"), hwm / 1024)

    async def floor_flood(self, count: int) -> None:
        argv = [sys.executable, str(FLOOR_RELAY), f"[fake-agy:flood] {count}", str(FAKE_AGY)]
        argv += ["--input-format", "stream-json", "--output-format", "stream-json"]
        stderr = self.stderr_path("floor")
        async with spawned(argv, self.env(), stderr) as process:
            client = LineClient(process)
            with trio.fail_after(STEP_LIMIT_S):
                async for batch in client.lines():
                    if any(b'"ready"' in line for line in batch):
                        break
            started = perf_counter()
            with trio.fail_after(TURN_LIMIT_S):
                await client.send(b"go")
                result, chunks = await client.response(1)
            elapsed = perf_counter() - started
            hwm = proc_memory_kib(process.pid).get("VmHWM", 0)
            await client.close()
            with trio.fail_after(STEP_LIMIT_S):
                await process.wait()
        self.check(f"floor flood {count}", result, chunks, count, process.returncode)
        cpu_s = json.loads(stderr.read_text().strip().splitlines()[-1])["cpu_s"]
        self.add(f"floor_eps_{count}", count / elapsed)
        self.add(f"floor_cpu_{count}", cpu_s / count * 1e6)
        self.add(f"floor_rss_{count}", hwm / 1024)

    def check(self, what: str, result: dict[str, Any], chunks: int, count: int, rc: Any) -> None:
        # N deltas plus the DONE step's "\n".
        if result.get("stopReason") != "end_turn" or chunks < count:
            self.failures.append(
                f"{what}: stopReason {result.get('stopReason')!r}, {chunks} chunks"
            )
        if rc != 0:
            self.failures.append(f"{what}: exit status {rc}")

    # --- cold start --------------------------------------------------------------

    async def initialize_time(
        self, argv: Sequence[str], env: dict[str, str], name: str, cwd: Path | None = None
    ) -> float:
        elapsed, returncode = await timed_initialize(
            argv, env, self.stderr_path(name), STEP_LIMIT_S, cwd
        )
        if returncode != 0:
            self.failures.append(f"{name}: exit status {returncode}")
        return elapsed

    async def cold(self, flip: bool) -> None:
        """The floor, each tree with bytecode, each without; the order is reversed
        every other repetition, so that no start always comes first."""
        runs: list[tuple[ColdTree | None, bool]] = [(None, True)]
        runs += [(tree, bytecode) for bytecode in (True, False) for tree in self.trees]
        for tree, bytecode in runs[::-1] if flip else runs:
            if tree is None:
                floor_argv = [sys.executable, "-c", DEPENDENCY_FLOOR]
                floor = await self.initialize_time(floor_argv, self.env(), "cold-floor")
                self.add("cold_floor", floor * 1000)
                continue
            cwd, extra = tree.launch(bytecode=bytecode)
            name = "cold-bridge" if bytecode else "cold-bridge-nobytecode"
            # With a log file, as a bridge has by default.
            env = self.env(AGYBRIDGE_LOG_FILE=str(self.tmp / "cold-bridge.log"), **extra)
            elapsed = await self.initialize_time(BRIDGE_ARGV, env, name, cwd)
            self.add(cold_key(tree, bytecode=bytecode), elapsed * 1000)

    async def import_profile(self) -> dict[str, Any]:
        """``-X importtime`` up to the ``initialize`` answer: with stderr on the
        stdout pipe, the import lines before the answer are what answering needed
        (the start-up work after it imports more, off the critical path). The last
        tree, with bytecode."""
        cwd, extra = self.trees[-1].launch(bytecode=True)
        env = self.env(PYTHONPROFILEIMPORTTIME="1", **extra)
        process = await trio.lowlevel.open_process(
            list(BRIDGE_ARGV),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
        )
        lines: list[bytes] = []
        try:
            client = LineClient(process)
            with trio.fail_after(STEP_LIMIT_S):
                await client.send(INITIALIZE)
                async for batch in client.lines():
                    answered = [n for n, line in enumerate(batch) if line.startswith(b"{")]
                    lines += batch[: answered[0]] if answered else batch
                    if answered:
                        break
            await client.close()
            with trio.fail_after(STEP_LIMIT_S):
                async for _ in client.lines():
                    pass
        except EOFError:
            pass
        finally:
            with trio.CancelScope(shield=True):
                await stop_process(process)
        own: list[tuple[int, str]] = []
        total = 0
        for raw in lines:
            line = raw.decode(errors="replace")
            if not line.startswith("import time:") or "|" not in line:
                continue
            fields = [part.strip() for part in line.removeprefix("import time:").split("|")]
            if not fields[0].isdigit():
                continue
            self_us, name = int(fields[0]), fields[2].strip()
            total += self_us
            if name.startswith("agybridge"):
                own.append((self_us, name))
        own.sort(reverse=True)
        return {
            "agybridge_self_ms": sum(us for us, _ in own) / 1000,
            "agybridge_modules": len(own),
            "all_self_ms": total / 1000,
            "slowest": [f"{name} {us / 1000:.1f} ms" for us, name in own[:6]],
        }

    # --- the run -----------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        profile: dict[str, Any] = {}
        only = set(self.args.only.split(","))
        for rep in range(self.args.reps):
            print(f"[bench_floor] repetition {rep + 1}/{self.args.reps}", file=sys.stderr)
            try:
                if "cold" in only:
                    for _ in range(self.args.cold_reps):
                        await self.cold(flip=rep % 2 == 1)
                if "flood" in only:
                    trees = self.trees if rep % 2 == 0 else self.trees[::-1]
                    for count in self.args.sizes:
                        await self.floor_flood(count)
                        for tree in trees:
                            await self.bridge_flood(count, tree)
            except Exception as exc:
                self.failures.append(describe_error(exc))
            survivors = await wait_marked_gone(f"agyb-floor-{self.stamp}", 2.0)
            if survivors:
                kill_processes(survivors)
                self.failures.append(f"left over: {', '.join(map(str, survivors))[:300]}")
        if "cold" in only:
            profile = await self.import_profile()
        return profile


def _median(values: list[float]) -> float | None:
    return summarize(values)["median"]


def render(bench: FloorBench, profile: dict[str, Any], facts: dict[str, Any]) -> str:
    s = bench.samples
    lines = [
        f"# bench_floor {bench.stamp}",
        "",
        facts_markdown(facts),
        "",
        f"{bench.args.reps} repetition(s); medians; ratio = bridge / floor "
        "(for events/s: bridge as a share of the floor).",
        "",
        "| measure | bridge | floor | ratio |",
        "|---|--:|--:|--:|",
    ]

    def row(
        label: str, tree: ColdTree, key: str, unit: str, *, digits: int = 1, share: bool = False
    ) -> None:
        bridge = _median(s.get(flood_key(tree, key), []))
        floor = _median(s.get(f"floor_{key}", []))
        ratio = None
        if bridge and floor:
            ratio = bridge / floor
        ratio_text = f"{ratio:.0%}" if share and ratio else f"{fmt(ratio, 2)}×"
        of = f", {tree.label}" if tree.label else ""
        lines.append(
            f"| {label}{of} | {fmt(bridge, digits)} {unit} | {fmt(floor, digits)} {unit} | "
            f"{ratio_text} |"
        )

    sizes = bench.args.sizes
    for tree in bench.trees if s.get(flood_key(bench.trees[0], f"eps_{sizes[0]}")) else ():
        for count in sizes:
            row(
                f"text deltas relayed per second ({count:,} deltas)",
                tree,
                f"eps_{count}",
                "/s",
                digits=0,
                share=True,
            )
            row(f"CPU per delta ({count:,} deltas)", tree, f"cpu_{count}", "µs", digits=2)
            row(f"peak RSS after a {count:,}-delta turn", tree, f"rss_{count}", "MiB")
        if len(sizes) >= 2:
            small, big = sizes[0], sizes[-1]
            pairs = zip(
                s.get(flood_key(tree, f"rss_{small}"), []),
                s.get(flood_key(tree, f"rss_{big}"), []),
                strict=False,
            )
            growth = [b - a for a, b in pairs]
            of = f", {tree.label}" if tree.label else ""
            lines.append(
                f"| bridge peak RSS growth {small:,} → {big:,} deltas{of} (each repetition: "
                f"{', '.join(fmt(g) for g in growth)}) | {fmt(_median(growth))} MiB | | |"
            )
    floor = _median(s.get("cold_floor", []))
    for tree in bench.trees if floor else ():
        of = f", {tree.label}" if tree.label else ""
        for bytecode, what in ((True, ""), (False, ", no bytecode (informational)")):
            bridge = _median(s.get(cold_key(tree, bytecode=bytecode), []))
            ratio = bridge / floor if bridge and floor else None
            lines.append(
                f"| spawn → `initialize` answered{of}{what} (floor: dependency imports) | "
                f"{fmt(bridge)} ms | {fmt(floor)} ms | {fmt(ratio, 2)}× |"
            )
    if floor:
        lines += [
            "",
            "Cold starts: the bridge's package was byte-compiled first (`compileall`, as "
            "`pip install` does), as a user has it; the dependencies load from the bytecode pip "
            "wrote. The no-bytecode rows start a copy of the package without `__pycache__` "
            "with `PYTHONDONTWRITEBYTECODE=1`: every launch compiles the bridge's own modules "
            "(a machine that exports that variable and never wrote them, such as a CI job).",
            *(f"- {tree.label or 'bridge'}: {tree.package}" for tree in bench.trees),
        ]
    if profile:
        lines += [
            "",
            "`-X importtime` of a bridge up to its `initialize` answer: agybridge's own modules "
            f"{profile['agybridge_self_ms']:.1f} ms self time ({profile['agybridge_modules']} "
            f"modules) of {profile['all_self_ms']:.1f} ms; slowest: "
            + ", ".join(profile["slowest"]),
        ]
    if bench.failures:
        lines += ["", "**Failures:**", *(f"- {f}" for f in bench.failures)]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cold-reps", type=int, default=5, help="cold starts per repetition")
    parser.add_argument("--sizes", default="10000,100000", help="deltas per flood turn")
    parser.add_argument("--only", default="flood,cold")
    parser.add_argument(
        "--bridge-src",
        action="append",
        type=Path,
        help="flood and cold rows for this tree holding agybridge/ (repeat: before, after; "
        "default: the bridge this python imports from the current directory)",
    )
    parser.add_argument("--quick", action="store_true", help="1 rep, sizes 2000,10000")
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.cold_reps, args.sizes = 1, 2, "2000,10000"
    args.sizes = [int(size) for size in args.sizes.split(",")]
    return args


async def main_async(args: argparse.Namespace) -> int:
    facts = machine_facts()
    with tempfile.TemporaryDirectory(prefix="agyb-floor-") as tmp:
        trees = cold_trees(args, Path(tmp))
        bench = FloorBench(args, Path(tmp), trees)
        profile = await bench.run()
    markdown = render(bench, profile, facts)
    data: dict[str, Any] = {"facts": facts, "samples": bench.samples, "profile": profile}
    data["failures"] = bench.failures
    data["trees"] = {tree.label or "bridge": str(tree.package) for tree in bench.trees}
    write_reports(args.report_dir, "bench_floor", bench.stamp, data, markdown)
    print(markdown)
    return 1 if bench.failures else 0


def cold_trees(args: argparse.Namespace, tmp: Path) -> list[ColdTree]:
    """The trees of the cold rows, byte-compiled, each with a bytecode-free copy."""
    if not args.bridge_src:
        return [prepare("", None, None, tmp / "source-0")]
    described = [describe_tree(path) for path in args.bridge_src]
    return [
        prepare(tree.label, tree.path, str(tree.path), tmp / f"source-{n}")
        for n, tree in enumerate(described)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    return trio.run(main_async, parse_args(argv))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
