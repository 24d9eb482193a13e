"""What the smoke scripts share: a tiny ACP client, process hygiene, stats, reports.

The client is built the way ``agybridge demo`` is: ``python -m agybridge`` runs as a
child over stdio and our own `agybridge.jsonrpc.Peer` speaks NDJSON JSON-RPC to it.
The handler timestamps every ``session/update`` with ``time.perf_counter`` as the
reader parses it, so "time to first chunk" is what a client would see.

Process hygiene: every bridge gets an environment marker (``AGYBRIDGE_SMOKE_MARKER``)
that agy and agy's own children inherit; ``marked_processes`` finds live holders in
``/proc/*/environ``, so leftovers are found (and reported, then killed by pid) however
they escaped. Nothing here imports from ``tests/``.
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import trio

import agybridge
from agybridge.jsonrpc import MessageContext, Peer, RequestContext, RpcError

REPO = Path(__file__).resolve().parents[1]
FAKE_AGY = REPO / "bin" / "fake-agy"
DEFAULT_REPORT_DIR = REPO / "smoke" / "reports"
MARKER_VAR = "AGYBRIDGE_SMOKE_MARKER"
BRIDGE_ARGV = (sys.executable, "-m", "agybridge")
#: How long a bridge may take to exit after its stdin closed before we escalate.
EXIT_WAIT_S = 10.0
#: A SIGKILLed process takes a moment to leave /proc (or to become a zombie).
VANISH_GRACE_S = 0.5


# --------------------------------------------------------------------------- client


@dataclass
class TurnLog:
    """What one ``session/prompt`` produced, as the client saw it."""

    sent_at: float
    first_chunk_at: float | None = None
    ended_at: float | None = None
    stop_reason: str | None = None
    text_parts: list[str] = field(default_factory=list)
    update_kinds: Counter[str] = field(default_factory=Counter)
    tool_call_ids: set[str] = field(default_factory=set)
    #: Longest ``rawOutput.output`` seen on a tool call update (characters).
    max_raw_output_chars: int = 0
    #: Longest text shown as a tool call's ``content`` (characters, all blocks).
    max_content_chars: int = 0
    #: Updates for this session that arrived after the prompt's response.
    late_updates: int = 0

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def ttfc_s(self) -> float | None:
        """Seconds from sending the prompt to the first agent_message_chunk."""
        return None if self.first_chunk_at is None else self.first_chunk_at - self.sent_at

    @property
    def total_s(self) -> float | None:
        """Seconds from sending the prompt to its response."""
        return None if self.ended_at is None else self.ended_at - self.sent_at


class SmokeClient:
    """The ACP client side: records updates per session, allows permission requests."""

    def __init__(self) -> None:
        self.turns: dict[str, TurnLog] = {}
        #: Updates for a session with no prompt in flight, by kind.
        self.stray_updates: Counter[str] = Counter()
        self.permission_requests = 0

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        """Nothing to note in wire order: every request is answered by its task."""

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        if method == "session/request_permission":
            self.permission_requests += 1
            options = params.get("options") or []
            allow = next((o for o in options if o.get("kind") == "allow_once"), None)
            if allow is None:
                return {"outcome": {"outcome": "cancelled"}}
            return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
        raise RpcError(-32601, f"Method not found: {method!r}")

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        now = perf_counter()
        if method != "session/update" or not isinstance(params, dict):
            return
        update = params.get("update") or {}
        kind = str(update.get("sessionUpdate"))
        turn = self.turns.get(str(params.get("sessionId")))
        if turn is None:
            self.stray_updates[kind] += 1
            return
        if turn.ended_at is not None:
            turn.late_updates += 1
            self.stray_updates[kind] += 1
            return
        turn.update_kinds[kind] += 1
        if kind == "agent_message_chunk":
            content = update.get("content") or {}
            if content.get("type") == "text":
                if turn.first_chunk_at is None:
                    turn.first_chunk_at = now
                turn.text_parts.append(str(content.get("text", "")))
        elif kind in ("tool_call", "tool_call_update"):
            turn.tool_call_ids.add(str(update.get("toolCallId")))
            raw = update.get("rawOutput")
            if isinstance(raw, dict) and isinstance(raw.get("output"), str):
                turn.max_raw_output_chars = max(turn.max_raw_output_chars, len(raw["output"]))
            shown = sum(
                len(str((item.get("content") or {}).get("text", "")))
                for item in update.get("content") or []
                if isinstance(item, dict)
            )
            turn.max_content_chars = max(turn.max_content_chars, shown)


_SESSION_ID = re.compile(rb'"sessionId":"([^"]+)"')
_UPDATE_KIND = re.compile(rb'"sessionUpdate":"([^"]+)"')


class WireTap(trio.abc.ReceiveStream):
    """Watches the bridge's stdout in wire order, below the peer.

    It checks one rule the client's handler cannot see reliably (a response and
    the next notification are handled in different tasks): no ``session/update``
    for a session before that session's ``session/new`` response (architecture.md:
    Zed drops them). Only the first ``HEAD_BYTES`` of each line are looked at, so
    a 10 MiB line costs a ``find``, not a parse.
    """

    HEAD_BYTES = 4096

    def __init__(self, inner: trio.abc.ReceiveStream) -> None:
        self._inner = inner
        self._head = bytearray()
        self.known_sessions: set[str] = set()
        #: ``"<kind> for <sessionId>"`` of every update that came too early.
        self.early_updates: list[str] = []
        self.lines = 0

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self._inner.receive_some(max_bytes)
        start = 0
        while True:
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            room = self.HEAD_BYTES - len(self._head)
            if room > 0:
                self._head += data[start : min(end, start + room)]
            if newline < 0:
                break
            self._line(bytes(self._head))
            self._head.clear()
            start = newline + 1
        return data

    def _line(self, head: bytes) -> None:
        self.lines += 1
        if b'"method":"session/update"' in head:
            session = _SESSION_ID.search(head)
            if session is not None and session.group(1).decode() not in self.known_sessions:
                kind = _UPDATE_KIND.search(head)
                name = kind.group(1).decode() if kind else "?"
                self.early_updates.append(f"{name} for {session.group(1).decode()}")
        elif b'"result":{"sessionId"' in head:
            session = _SESSION_ID.search(head)
            if session is not None:
                self.known_sessions.add(session.group(1).decode())

    async def aclose(self) -> None:
        await self._inner.aclose()


class Bridge:
    """A running ``python -m agybridge`` and the client talking to it."""

    def __init__(
        self,
        process: trio.Process,
        peer: Peer,
        client: SmokeClient,
        tap: WireTap,
        spawned_at: float,
    ) -> None:
        self.process = process
        self.peer = peer
        self.client = client
        self.tap = tap
        self.spawned_at = spawned_at
        #: Seconds from stdin EOF to exit, once `shutdown` ran.
        self.exit_s: float | None = None
        #: VmHWM/VmRSS (KiB) read just before shutdown.
        self.memory_kib: dict[str, int] = {}

    @property
    def pid(self) -> int:
        return self.process.pid

    async def initialize(self) -> dict[str, Any]:
        result = await self.peer.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
                "clientInfo": {"name": "agybridge-smoke", "version": "1"},
            },
        )
        assert isinstance(result, dict), f"initialize answered {result!r}"
        return result

    async def new_session(self, cwd: str) -> str:
        result = await self.peer.request("session/new", {"cwd": cwd, "mcpServers": []})
        return str(result["sessionId"])

    async def prompt(self, session_id: str, text: str) -> TurnLog:
        """Send one text prompt and wait for its response (bound it from outside)."""
        turn = TurnLog(sent_at=perf_counter())
        self.client.turns[session_id] = turn
        result = await self.peer.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )
        turn.ended_at = perf_counter()
        turn.stop_reason = str(result.get("stopReason")) if isinstance(result, dict) else None
        return turn

    async def cancel(self, session_id: str) -> float:
        """Send ``session/cancel``; returns the perf_counter time it was handed over."""
        await self.peer.notify("session/cancel", {"sessionId": session_id})
        return perf_counter()

    async def close_session(self, session_id: str) -> None:
        await self.peer.request("session/close", {"sessionId": session_id})

    def read_memory(self) -> dict[str, int]:
        """VmHWM (peak) and VmRSS of the bridge in KiB; remembered for the report."""
        self.memory_kib = proc_memory_kib(self.pid)
        return self.memory_kib

    async def shutdown(self) -> float:
        """Close the bridge's stdin (the editor went away); return seconds to exit.

        Bounded by ``EXIT_WAIT_S``; raises ``trio.TooSlowError`` past it (the
        bridge is then killed by `open_bridge`).
        """
        if self.process.returncode is None and not self.memory_kib:
            self.read_memory()
        assert self.process.stdin is not None
        started = perf_counter()
        with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await self.process.stdin.aclose()
        with trio.fail_after(EXIT_WAIT_S):
            await self.process.wait()
        self.exit_s = perf_counter() - started
        return self.exit_s


@asynccontextmanager
async def open_bridge(env: Mapping[str, str], stderr_path: Path) -> AsyncIterator[Bridge]:
    """Start a bridge with ``env``, its stderr going to ``stderr_path``.

    On leaving, a bridge still running is shut down through stdin EOF, then
    SIGTERM, then SIGKILL (each bounded), so no bridge outlives the block.
    """
    client = SmokeClient()
    with stderr_path.open("wb") as stderr:
        spawned_at = perf_counter()
        process = await trio.lowlevel.open_process(
            list(BRIDGE_ARGV),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(env),
        )
    try:
        assert process.stdin is not None and process.stdout is not None
        async with trio.open_nursery() as nursery:
            tap = WireTap(process.stdout)
            peer = Peer(tap, process.stdin, client)
            await nursery.start(peer.run)
            bridge = Bridge(process, peer, client, tap, spawned_at)
            yield bridge
            if process.returncode is None:
                await bridge.shutdown()
            # The bridge is gone: its stdout ended, the peer has nothing left to do.
            nursery.cancel_scope.cancel(reason="bridge exited")
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(process)


async def stop_process(process: trio.Process) -> None:
    """EOF, then SIGTERM, then SIGKILL, each after a bounded wait (never raises)."""
    if process.returncode is not None:
        return
    if process.stdin is not None:
        with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await process.stdin.aclose()
    for sig, wait_s in ((None, 5.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        if sig is not None:
            with suppress(ProcessLookupError):
                process.send_signal(sig)
        with trio.move_on_after(wait_s):
            await process.wait()
            return


# --------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    cmdline: str
    #: The state letter of /proc/<pid>/stat when seen (R running, S sleeping, ...).
    state: str = "?"

    def __str__(self) -> str:
        return f"{self.pid} {self.cmdline} [{self.state}]"


def marked_processes(marker: str, *, prefix: bool = False) -> list[ProcInfo]:
    """Live (non-zombie) processes whose environment holds ``MARKER_VAR=marker``
    (or, with ``prefix``, a marker starting with ``marker``)."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            variables = (entry / "environ").read_bytes().split(b"\0")
            if not any(v == needle or (prefix and v.startswith(needle)) for v in variables):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state in ("Z", "X"):
                continue  # dead and waiting to be reaped: runs nothing
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        found.append(ProcInfo(int(entry.name), cmdline.decode("utf-8", "replace").strip(), state))
    return found


async def wait_marked_gone(marker: str, limit_s: float, *, prefix: bool = False) -> list[ProcInfo]:
    """Poll until no marked process is alive; returns the survivors after ``limit_s``."""
    with trio.move_on_after(limit_s):
        # A process's death is not an event we can await: poll /proc.
        while marked_processes(marker, prefix=prefix):  # noqa: ASYNC110
            await trio.sleep(0.05)
    return marked_processes(marker, prefix=prefix)


def start_daemon(env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """``agybridge daemon`` with ``env``, once it listens (its first stderr line says so).

    Raises:
        RuntimeError: it exited or said something else first.
    """
    daemon = subprocess.Popen(
        [sys.executable, "-m", "agybridge", "daemon"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(env),
    )
    assert daemon.stderr is not None
    line = daemon.stderr.readline().decode(errors="replace")
    if "listening on" not in line:
        daemon.kill()
        daemon.wait()
        raise RuntimeError(f"the daemon did not start: {line!r}")
    return daemon


def stop_daemon(
    env: Mapping[str, str], daemon: subprocess.Popen[bytes], timeout_s: float
) -> list[str]:
    """``agybridge stop``, then wait for the daemon to exit; returns what failed."""
    failures = []
    stop = subprocess.run(
        [sys.executable, "-m", "agybridge", "stop", "--timeout", "10"],
        env=dict(env),
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    if stop.returncode != 0:
        failures.append(f"agybridge stop failed: {stop.stderr.decode(errors='replace')}")
    try:
        daemon.wait(timeout_s)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
        failures.append("the daemon did not exit after stop")
    return failures


def kill_processes(processes: Iterable[ProcInfo]) -> None:
    """SIGKILL each by pid (they carry our marker: we started them, indirectly)."""
    for proc in processes:
        with suppress(OSError):
            os.kill(proc.pid, signal.SIGKILL)


def proc_memory_kib(pid: int) -> dict[str, int]:
    """``VmHWM`` and ``VmRSS`` from ``/proc/<pid>/status``, in KiB (empty if gone)."""
    values: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return values
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            values[key] = int(rest.split()[0])
    return values


def proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds used so far by ``pid`` (None if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Fields 14 and 15 of proc(5) (utime, stime); the list starts at field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bridge_warnings(stderr_path: Path, limit: int = 5) -> tuple[int, list[str]]:
    """How many warning/error/traceback lines the bridge wrote, and the first few."""
    try:
        lines = stderr_path.read_text(errors="replace").splitlines()
    except OSError:
        return 0, []
    hits = [
        line
        for line in lines
        if "WARNING" in line or "ERROR" in line or line.startswith("Traceback")
    ]
    return len(hits), [line[:300] for line in hits[:limit]]


_SCRATCH: list[str] = []


def _scratch_root() -> str:
    """One private temp dir per smoke run, removed when the run ends."""
    if not _SCRATCH:
        root = tempfile.mkdtemp(prefix="agyb-smoke-")
        _SCRATCH.append(root)
        atexit.register(shutil.rmtree, root, True)
    return _SCRATCH[0]


def base_env(marker: str, **extra: str) -> dict[str, str]:
    """The caller's environment without bridge/agy settings, plus the marker."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGYBRIDGE_", "FAKE_AGY_", "AGY_"))
    }
    env.update({"AGYBRIDGE_LOG_FILE": "", "PYTHONUNBUFFERED": "1", MARKER_VAR: marker})
    # Benchmarks never touch the user's session history.
    scratch = tempfile.mkdtemp(prefix="bridge-", dir=_scratch_root())
    env.setdefault("AGYBRIDGE_DB", os.path.join(scratch, "s.db"))
    env.setdefault("AGYBRIDGE_STAGING_DIR", os.path.join(scratch, "staging"))
    # The matrix measures streaming and supervision; replayed captures cannot
    # call the permission gate, so it runs in agy's own safe mode.
    env.setdefault("AGYBRIDGE_MODE", "safe")
    env.update(extra)
    return env


# --------------------------------------------------------------------------- stats


def summarize(values: Iterable[float]) -> dict[str, float | int | None]:
    """n, median, p90 (nearest rank), min, max, mean of ``values``."""
    data = sorted(values)
    if not data:
        return {"n": 0, "median": None, "p90": None, "min": None, "max": None, "mean": None}
    rank = max(1, math.ceil(0.9 * len(data)))
    return {
        "n": len(data),
        "median": statistics.median(data),
        "p90": data[rank - 1],
        "min": data[0],
        "max": data[-1],
        "mean": statistics.fmean(data),
    }


def fmt(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


# --------------------------------------------------------------------------- reports


def utc_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def machine_facts() -> dict[str, Any]:
    """What the numbers depend on: CPUs, Python, platform, versions, load, commit."""
    facts: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "trio": trio.__version__,
        "agybridge": agybridge.__version__,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    facts.update(_git_facts())
    return facts


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _git_facts() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(REPO), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": git("rev-parse", "HEAD"), "git_dirty": bool(status)}


def facts_markdown(facts: Mapping[str, Any]) -> str:
    load = facts.get("loadavg")
    load_text = " / ".join(f"{x:.2f}" for x in load) if load else "?"
    commit = facts.get("git_commit") or "?"
    dirty = " (uncommitted changes)" if facts.get("git_dirty") else ""
    return "\n".join(
        [
            f"- CPU: {facts.get('cpu_count')} logical ({facts.get('cpus_usable')} usable), "
            f"{facts.get('cpu_model') or 'unknown model'}",
            f"- Python {facts.get('python')} ({facts.get('python_implementation')}), "
            f"trio {facts.get('trio')}, agybridge {facts.get('agybridge')}",
            f"- Platform: {facts.get('platform')}",
            f"- Load average at start (1/5/15 min): {load_text}",
            f"- Commit: {commit[:12]}{dirty}",
        ]
    )


def write_reports(
    report_dir: Path, kind: str, stamp: str, data: Mapping[str, Any], markdown: str
) -> tuple[Path, Path]:
    """Write ``<kind>-<stamp>.json`` and ``.md`` (never overwriting); returns both paths."""
    report_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{kind}-{stamp}"
    suffix = 1
    while (report_dir / f"{stem}.json").exists() or (report_dir / f"{stem}.md").exists():
        suffix += 1
        stem = f"{kind}-{stamp}-{suffix}"
    json_path = report_dir / f"{stem}.json"
    md_path = report_dir / f"{stem}.md"
    json_path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    md_path.write_text(markdown if markdown.endswith("\n") else markdown + "\n")
    return json_path, md_path


def run_and_report(
    kind: str,
    description: str,
    bench: Callable[[int, int], Awaitable[dict[str, Any]]],
    markdown: Callable[[dict[str, Any], dict[str, Any]], str],
    *,
    runs: int,
    warmup: int,
) -> dict[str, Any]:
    """A ``--runs``/``--warmup``/``--report-dir`` benchmark's main: run ``bench``,
    write and print its reports; returns its data (the caller judges it)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--report-dir", type=Path, default=DEFAULT_REPORT_DIR)
    args = parser.parse_args()
    facts = machine_facts()
    data = trio.run(bench, args.runs, args.warmup)
    data["facts"] = facts
    text = markdown(data, facts)
    json_path, md_path = write_reports(args.report_dir, kind, utc_stamp(), data, text)
    print(text)
    print(f"\nreports: {json_path} {md_path}")
    return data


def describe_error(exc: BaseException) -> str:
    """A one-line description; exception groups are flattened to their leaves."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [describe_error(inner) for inner in exc.exceptions]
        unique = list(dict.fromkeys(leaves))
        return "; ".join(
            leaf if leaves.count(leaf) == 1 else f"{leaves.count(leaf)}× {leaf}" for leaf in unique
        )
    if isinstance(exc, RpcError):
        data = f" {json.dumps(exc.data)[:300]}" if exc.data is not None else ""
        text = f"RpcError {exc.code}: {exc.message}{data}"
    elif isinstance(exc, trio.TooSlowError):
        text = "TooSlowError: a bounded wait expired"
    else:
        text = f"{type(exc).__name__}: {exc}"
    # One line, so that it fits a Markdown list item.
    return " ⏎ ".join(line for line in text[:600].splitlines() if line.strip())


def timing_report(
    report_dir: Path,
    name: str,
    *,
    heading: str,
    rows: Mapping[str, tuple[str, Iterable[float]]],
    verdict: Callable[[dict[str, dict[str, float | int | None]]], tuple[bool, str]],
    failures: Sequence[str],
    extra: Mapping[str, Any],
) -> int:
    """A timing benchmark's report: ``rows`` (key -> title, ms values) as a
    median / p90 / max table under ``heading`` and the machine's facts,
    ``verdict(stats)`` -> (target met, its line), the failures; written as
    JSON and Markdown (``name``), printed. The exit status: 1 if anything failed."""
    stats = {key: summarize(values) for key, (_, values) in rows.items()}
    met, target_line = verdict(stats)
    lines = [
        heading,
        "",
        facts_markdown(facts := machine_facts()),
        "",
        "| row | n | median ms | p90 ms | max ms |",
        "|---|---|---|---|---|",
    ]
    for key, (title, _) in rows.items():
        row = stats[key]
        lines.append(
            f"| {title} | {row['n']} | {fmt(row['median'])} | {fmt(row['p90'])} "
            f"| {fmt(row['max'])} |"
        )
    lines += ["", target_line, *(f"- FAILED: {failure}" for failure in failures)]
    data: dict[str, Any] = {
        "ok": not failures,
        "target_met": met,
        **extra,
        "rows": {key: {"title": title, **stats[key]} for key, (title, _) in rows.items()},
        "failures": list(failures),
        "machine": facts,
    }
    markdown = "\n".join(lines)
    write_reports(report_dir, name, utc_stamp(), data, markdown)
    print(markdown)
    return 0 if not failures else 1
