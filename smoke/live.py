#!/usr/bin/env python3
"""The live matrix: a few cheap prompts through agybridge to a REAL agy.

Run from the repository root with the project's venv::

    AGY_BIN=/path/to/agy .venv/bin/python smoke/live.py
    AGY_BIN=bin/fake-agy .venv/bin/python smoke/live.py --allow-fake   # dry run

agy is found like the bridge finds it (``AGY_BIN``, else ``agy`` on PATH). Without one,
or if ``agy --version`` fails, it prints ``skipped: no agy found (set AGY_BIN)``, writes
a report saying so and exits 0. The bundled fake agy is refused unless ``--allow-fake``
is given (it then adds ``[fake-agy:NAME]`` directives to prompts so the fake behaves
like a model would, and skips checks only a model can pass).

Cases, each on its own session in one bridge, each workspace a fresh temporary
directory outside any git repository:

* ``one-word``  one short reply;
* ``memory``    two turns: a number to remember, then asked back;
* ``tool``      a file in the workspace that the model must read with a tool;
* ``cancel``    a long answer cancelled 0.5 s after its first chunk (or thought, or tool
                call; at the latest 10 s after the prompt), then one more turn on
                the same session (agy was respawned with ``--conversation``).

Every turn must end (bounded by ``--turn-timeout``) and show text; after the bridge
exits, no process carrying the run's environment marker may be left. Reports go to
``smoke/reports/live-<UTC>.json`` and ``.md``. Exit status: 0 passed or skipped,
1 a check failed, 2 refused (a fake agy without ``--allow-fake``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import trio
from smokekit import (
    DEFAULT_REPORT_DIR,
    FAKE_AGY,
    Bridge,
    TurnLog,
    base_env,
    bridge_warnings,
    describe_error,
    facts_markdown,
    fmt,
    kill_processes,
    machine_facts,
    open_bridge,
    utc_stamp,
    wait_marked_gone,
    write_reports,
)

from agybridge.config import ConfigError, Settings

SKIP_MESSAGE = "skipped: no agy found (set AGY_BIN)"
VERSION_TIMEOUT_S = 30.0
REQUEST_S = 60.0
LEFTOVER_GRACE_S = 3.0
#: How long after the turn's first visible work the cancel case sends session/cancel.
CANCEL_AFTER_CHUNK_S = 0.5
#: ... or this long after the prompt, if nothing showed up by then (a thinking model).
CANCEL_AT_LATEST_S = 10.0
WORKING_UPDATES = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call"})
CANCEL_SLACK_S = 5.0
EXCERPT_CHARS = 200

MEMORY_NUMBER = "4711"
CODE_WORD = "TANGERINE-42"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""
    #: Not decided (e.g. a model-only check against the fake): never a failure.
    inconclusive: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "detail": self.detail,
            "inconclusive": self.inconclusive,
        }


@dataclass
class CaseResult:
    name: str
    description: str
    checks: list[Check] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(c.ok or c.inconclusive for c in self.checks)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append(Check(name, ok, detail))

    def inconclusive(self, name: str, detail: str) -> None:
        self.checks.append(Check(name, True, detail, inconclusive=True))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "ok": self.ok,
            "error": self.error,
            "checks": [c.to_json() for c in self.checks],
            "turns": self.turns,
        }


def find_agy() -> tuple[str | None, str]:
    """The agy binary the bridge would use and why it was (not) accepted."""
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        return None, str(exc)
    path = settings.resolve_agy_bin()
    if path is None:
        return None, f"AGY_BIN/agy {settings.agy_bin!r} not found or not executable"
    return path, ""


def agy_version(path: str) -> tuple[str | None, str]:
    """``agy --version``'s first line, or None and the reason it failed."""
    try:
        done = subprocess.run(
            [path, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{path} --version could not run: {exc}"
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[0]
        return None, f"{path} --version exited {done.returncode}: {said[:200]}"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return (lines[0] if lines else "(no version output)"), ""


def looks_fake(path: str) -> bool:
    """True for the bundled fake agy (bin/fake-agy, the fake-agy console script)."""
    resolved = Path(path).resolve()
    if resolved == FAKE_AGY.resolve():
        return True
    try:
        with resolved.open("rb") as binary:
            head = binary.read(64 * 1024)
    except OSError:
        return False
    return b"fake_agy" in head or b"fake-agy" in head


class Live:
    """One live run: the bridge, its sessions, the case results."""

    def __init__(self, args: argparse.Namespace, agy: str, fake: bool, tmp: Path) -> None:
        self.args = args
        self.agy = agy
        self.fake = fake
        self.tmp = tmp
        self.marker = f"live-{uuid.uuid4().hex[:12]}"
        self.results: list[CaseResult] = []
        self.leftovers: list[str] = []
        self.bridge_info: dict[str, Any] = {}
        self.stderr_path = tmp / "bridge.stderr"
        self.log_path = tmp / "bridge.log"
        settings = Settings.from_env()
        self.escalation_s = settings.sigint_grace_s + settings.sigterm_grace_s

    def env(self) -> dict[str, str]:
        extra = {
            "AGY_BIN": self.agy,
            "AGYBRIDGE_LOG_FILE": str(self.log_path),
            "AGYBRIDGE_DB": str(self.log_path.with_suffix(".db")),
            "AGYBRIDGE_STAGING_DIR": str(self.log_path.with_suffix(".staging")),
            "AGYBRIDGE_LOG_LEVEL": "INFO",
        }
        if self.fake:
            extra.update(
                FAKE_AGY_SCENARIO="echo",
                FAKE_AGY_STATE_DIR=str(self.tmp / "fake-agy-state"),
                FAKE_AGY_SLOW_SECONDS="30",
            )
        return base_env(self.marker, **extra)

    def directive(self, name: str) -> str:
        """What the fake needs to act like a model for this case (nothing for agy)."""
        return f" [fake-agy:{name}]" if self.fake else ""

    def workspace(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.tmp))
        return path

    async def prompt(self, bridge: Bridge, result: CaseResult, session: str, text: str) -> TurnLog:
        with trio.fail_after(self.args.turn_timeout):
            turn = await bridge.prompt(session, text)
        self.record_turn(result, text, turn)
        return turn

    @staticmethod
    def record_turn(result: CaseResult, prompt: str, turn: TurnLog) -> None:
        result.turns.append(
            {
                "prompt": prompt,
                "stop_reason": turn.stop_reason,
                "ttfc_ms": None if turn.ttfc_s is None else round(turn.ttfc_s * 1000, 1),
                "total_ms": None if turn.total_s is None else round(turn.total_s * 1000, 1),
                "text_chars": len(turn.text),
                "text_excerpt": turn.text[:EXCERPT_CHARS],
                "update_kinds": dict(turn.update_kinds),
                "tool_calls": len(turn.tool_call_ids),
                "late_updates": turn.late_updates,
            }
        )

    @staticmethod
    def check_turn(result: CaseResult, label: str, turn: TurnLog, stop: str = "end_turn") -> None:
        """Every turn: it ended as expected, text arrived, nothing after the response."""
        result.check(f"{label}: stopReason {stop}", turn.stop_reason == stop, str(turn.stop_reason))
        result.check(f"{label}: text arrived", bool(turn.text.strip()), f"{len(turn.text)} chars")
        if turn.late_updates:
            result.check(
                f"{label}: no update after the response", False, f"{turn.late_updates} late"
            )

    def model_check(self, result: CaseResult, name: str, ok: bool, detail: str) -> None:
        """A check only a real model can pass: inconclusive against the fake."""
        if self.fake:
            result.inconclusive(name, "not checked: the fake agy has no model")
        else:
            result.check(name, ok, detail)

    # --- cases ------------------------------------------------------------------

    async def case_one_word(self, bridge: Bridge, result: CaseResult) -> None:
        session = await self.new_session(bridge, "one-word")
        turn = await self.prompt(
            bridge, result, session, "Reply with exactly one word: pong. Use no tools."
        )
        self.check_turn(result, "turn", turn)
        words = turn.text.split()
        self.model_check(
            result, "reply is the word pong", "pong" in turn.text.lower(), f"{len(words)} word(s)"
        )
        await self.close_session(bridge, session)

    async def case_memory(self, bridge: Bridge, result: CaseResult) -> None:
        session = await self.new_session(bridge, "memory")
        first = await self.prompt(
            bridge,
            result,
            session,
            f"Remember this number for later: {MEMORY_NUMBER}. Reply with just OK. Use no tools.",
        )
        self.check_turn(result, "turn 1", first)
        second = await self.prompt(
            bridge,
            result,
            session,
            "What number did I ask you to remember? Reply with just the number. Use no tools.",
        )
        self.check_turn(result, "turn 2", second)
        self.model_check(
            result,
            f"turn 2 recalls {MEMORY_NUMBER}",
            MEMORY_NUMBER in second.text,
            second.text[:80],
        )
        await self.close_session(bridge, session)

    async def case_tool(self, bridge: Bridge, result: CaseResult) -> None:
        workspace = self.workspace("tool")
        (workspace / "secret.txt").write_text(f"The code word is {CODE_WORD}.\n")
        session = await self.new_session(bridge, "tool", workspace)
        turn = await self.prompt(
            bridge,
            result,
            session,
            "Read the file secret.txt in the workspace with your file-viewing tool and reply "
            "with just the code word written in it." + self.directive("tool"),
        )
        self.check_turn(result, "turn", turn)
        result.check(
            "a tool call was shown",
            bool(turn.tool_call_ids),
            f"{len(turn.tool_call_ids)} tool call(s), "
            f"{bridge.client.permission_requests} permission request(s) so far",
        )
        self.model_check(result, f"reply names {CODE_WORD}", CODE_WORD in turn.text, turn.text[:80])
        await self.close_session(bridge, session)

    async def case_cancel(self, bridge: Bridge, result: CaseResult) -> None:
        session = await self.new_session(bridge, "cancel")
        prompt = (
            "Count from 1 to 300, one number per line, with no other text. Use no tools."
            + self.directive("slow")
        )
        done: list[TurnLog] = []

        async def run_prompt() -> None:
            done.append(await bridge.prompt(session, prompt))

        cancel_at: float | None = None
        with trio.fail_after(self.args.turn_timeout + self.escalation_s + CANCEL_SLACK_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_prompt)
                # Wait until the turn visibly works (or ends): no event to await.
                waiting_since = perf_counter()
                while not done:
                    turn = bridge.client.turns.get(session)
                    if turn is not None and (
                        turn.update_kinds.keys() & WORKING_UPDATES
                        or perf_counter() - waiting_since > CANCEL_AT_LATEST_S
                    ):
                        break
                    await trio.sleep(0.05)
                if not done:
                    await trio.sleep(CANCEL_AFTER_CHUNK_S)
                if not done:
                    cancel_at = await bridge.cancel(session)
        turn = done[0]
        self.record_turn(result, prompt, turn)
        if cancel_at is None:
            result.inconclusive(
                "cancel mid-turn", "the turn finished before its first chunk could be cancelled"
            )
        else:
            assert turn.ended_at is not None
            latency = turn.ended_at - cancel_at
            result.turns[-1]["cancel_latency_ms"] = round(latency * 1000, 1)
            result.check(
                "stopReason cancelled", turn.stop_reason == "cancelled", str(turn.stop_reason)
            )
            result.check(
                "cancel answered within the escalation budget",
                latency <= self.escalation_s + CANCEL_SLACK_S,
                f"{latency * 1000:.0f} ms (budget {self.escalation_s:g} s + "
                f"{CANCEL_SLACK_S:g} s slack)",
            )
            result.check(
                "the turn showed work before the cancel",
                bool(turn.update_kinds.keys() & WORKING_UPDATES),
                ", ".join(sorted(turn.update_kinds)),
            )
        after = await self.prompt(
            bridge, result, session, "Reply with exactly one word: ok. Use no tools."
        )
        self.check_turn(result, "turn after the cancel", after)
        await self.close_session(bridge, session)

    # --- plumbing -----------------------------------------------------------------

    async def new_session(self, bridge: Bridge, name: str, workspace: Path | None = None) -> str:
        cwd = workspace if workspace is not None else self.workspace(name)
        with trio.fail_after(REQUEST_S):
            return await bridge.new_session(str(cwd))

    async def close_session(self, bridge: Bridge, session: str) -> None:
        with trio.fail_after(REQUEST_S + self.escalation_s):
            await bridge.close_session(session)

    async def run(self) -> None:
        cases: dict[str, tuple[str, Callable[[Bridge, CaseResult], Awaitable[None]]]] = {
            "one-word": ("a one-word reply", self.case_one_word),
            "memory": ("a two-turn memory check", self.case_memory),
            "tool": ("a tool-using prompt in a temporary git-free workspace", self.case_tool),
            "cancel": ("a cancel mid-turn, then one more turn", self.case_cancel),
        }
        selected = [name for name in cases if name in self.args.cases]
        bridge_ok = CaseResult("bridge", "start, initialize, stdin EOF, exit 0, no leftovers")
        started = perf_counter()
        try:
            async with open_bridge(self.env(), self.stderr_path) as bridge:
                with trio.fail_after(REQUEST_S):
                    info = await bridge.initialize()
                self.bridge_info["initialize_ms"] = round((perf_counter() - started) * 1000, 1)
                self.bridge_info["agent_info"] = info.get("agentInfo")
                for name in selected:
                    description, body = cases[name]
                    result = CaseResult(name, description)
                    self.results.append(result)
                    print(f"[live] {name} ...", file=sys.stderr, flush=True)
                    try:
                        await body(bridge, result)
                    except Exception as exc:
                        result.error = describe_error(exc)
                    if bridge.process.returncode is not None:
                        bridge_ok.error = f"the bridge exited {bridge.process.returncode} early"
                        break
                bridge.read_memory()
                exit_s = await bridge.shutdown()
                self.bridge_info.update(
                    exit_ms=round(exit_s * 1000, 1), memory_kib=bridge.memory_kib
                )
                bridge_ok.check(
                    "exit code 0", bridge.process.returncode == 0, f"{bridge.process.returncode}"
                )
                early = bridge.tap.early_updates
                bridge_ok.check(
                    "no session/update before its session/new response",
                    not early,
                    f"{len(early)}: {', '.join(early[:3])}" if early else "",
                )
                self.bridge_info["stray_updates"] = dict(bridge.client.stray_updates)
        except Exception as exc:
            bridge_ok.error = describe_error(exc)
        survivors = await wait_marked_gone(self.marker, LEFTOVER_GRACE_S)
        if survivors:
            kill_processes(survivors)
            self.leftovers = [str(p) for p in survivors]
        bridge_ok.check(
            "no process left running",
            not survivors,
            ", ".join(self.leftovers)[:300] or "environment marker scan of /proc: none",
        )
        count, first = bridge_warnings(self.stderr_path)
        self.bridge_info.update(warning_lines=count, warnings=first)
        self.results.append(bridge_ok)


# --------------------------------------------------------------------------- report


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# agybridge live matrix — {report['timestamp_utc']}", ""]
    if report["status"] == "skipped":
        lines += [f"Skipped: {report['reason']}.", "", facts_markdown(report["machine"])]
        return "\n".join(lines) + "\n"
    agy = report["agy"]
    kind = "the bundled FAKE agy (--allow-fake)" if agy["fake"] else "a real agy"
    lines += [
        f"agy: `{agy['path']}` ({agy['version']}), {kind}. "
        f"Result: **{report['status']}**. Wall time {report['wall_seconds']:.1f} s.",
        "",
        facts_markdown(report["machine"]),
        "",
        "| case | turns | stop reasons | first chunk (ms) | turn (ms) | checks | result |",
        "|---|--:|---|---|---|---|---|",
    ]
    for case in report["cases"]:
        turns = case["turns"]
        stops = ", ".join(str(t["stop_reason"]) for t in turns) or "–"
        ttfc = ", ".join(fmt(t["ttfc_ms"], 0) for t in turns) or "–"
        total = ", ".join(fmt(t["total_ms"], 0) for t in turns) or "–"
        passed = sum(1 for c in case["checks"] if c["ok"] and not c["inconclusive"])
        unsure = sum(1 for c in case["checks"] if c["inconclusive"])
        checks = f"{passed}/{len(case['checks'])}" + (f" ({unsure} n/a)" if unsure else "")
        verdict = "ok" if case["ok"] else "**FAIL**"
        lines.append(
            f"| {case['name']} | {len(turns)} | {stops} | {ttfc} | {total} | {checks} | {verdict} |"
        )
    lines += ["", "Checks:", ""]
    for case in report["cases"]:
        if case["error"]:
            lines.append(f"- {case['name']}: **error** {case['error']}")
        for check in case["checks"]:
            mark = "n/a" if check["inconclusive"] else ("ok" if check["ok"] else "**FAIL**")
            detail = f" — {check['detail']}" if check["detail"] else ""
            lines.append(f"- {case['name']}: {check['name']}: {mark}{detail}")
    bridge = report["bridge"]
    memory = bridge.get("memory_kib") or {}
    lines += [
        "",
        f"Bridge: initialize {fmt(bridge.get('initialize_ms'))} ms after start, exit "
        f"{fmt(bridge.get('exit_ms'))} ms after stdin EOF, peak RSS "
        f"{fmt(memory.get('VmHWM', 0) / 1024)} MiB, {bridge.get('warning_lines', 0)} "
        "warning line(s) on stderr.",
    ]
    lines += [f"- {w}" for w in bridge.get("warnings") or []]
    lines.append(
        "Leftover processes: " + (", ".join(report["leftovers"]) if report["leftovers"] else "none")
    )
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="agybridge live matrix against a real agy")
    parser.add_argument(
        "--allow-fake",
        action="store_true",
        help="accept the bundled fake agy as AGY_BIN (a dry run of this script)",
    )
    parser.add_argument(
        "--turn-timeout", type=float, default=180.0, help="seconds one turn may take"
    )
    parser.add_argument(
        "--cases",
        default="one-word,memory,tool,cancel",
        help="comma-separated cases (default all: one-word,memory,tool,cancel)",
    )
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    args = parser.parse_args(argv)
    args.cases = {name.strip() for name in args.cases.split(",") if name.strip()}
    unknown = args.cases - {"one-word", "memory", "tool", "cancel"}
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = utc_stamp()
    facts = machine_facts()
    agy, reason = find_agy()
    version: str | None = None
    if agy is not None:
        version, reason = agy_version(agy)
    if agy is None or version is None:
        report = {
            "kind": "live",
            "timestamp_utc": stamp,
            "status": "skipped",
            "ok": True,
            "reason": reason,
            "machine": facts,
        }
        paths = write_reports(args.report_dir, "live", stamp, report, render_markdown(report))
        print(SKIP_MESSAGE)
        print(f"  ({reason})")
        print(f"reports: {paths[0]} {paths[1]}")
        return 0
    fake = looks_fake(agy)
    if fake and not args.allow_fake:
        print(
            f"refusing: {agy} is the bundled fake agy; pass --allow-fake to dry-run the live "
            "matrix against it",
            file=sys.stderr,
        )
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="agybridge-live-"))
    live = Live(args, agy, fake, tmp)
    started = perf_counter()
    try:
        trio.run(live.run)
        ok = all(result.ok for result in live.results)
        report = {
            "kind": "live",
            "timestamp_utc": stamp,
            "status": "passed" if ok else "failed",
            "ok": ok,
            "wall_seconds": round(perf_counter() - started, 2),
            "machine": facts,
            "agy": {"path": agy, "version": version, "fake": fake},
            "settings": {"turn_timeout_s": args.turn_timeout, "cases": sorted(args.cases)},
            "cases": [result.to_json() for result in live.results],
            "bridge": live.bridge_info,
            "leftovers": live.leftovers,
        }
        markdown = render_markdown(report)
        json_path, md_path = write_reports(args.report_dir, "live", stamp, report, markdown)
        if not ok and live.log_path.exists():
            kept = json_path.with_suffix(".bridge.log")
            shutil.copyfile(live.log_path, kept)
            print(f"bridge log kept: {kept}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(markdown)
    print(f"reports: {json_path} {md_path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
