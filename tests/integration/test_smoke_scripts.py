"""The benchmark script runs end to end: it exits 0 and writes its reports.

Timings are never asserted (this machine is shared and small); the script's own
checks (echo text, cancelled answers, no leftover processes) decide its exit code.
The live matrix is ``examples/smoke/live.toml`` for ``agybridge smoke run``
(tests/integration/test_smoke_run.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import REPO

SMOKE = REPO / "smoke"
FAKE_AGY = REPO / "bin" / "fake-agy"
SCRIPT_TIMEOUT_S = 120

pytestmark = pytest.mark.integration


def _run(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGYBRIDGE_", "FAKE_AGY_", "AGY_"))
    }
    environment.update(env)
    return subprocess.run(
        [sys.executable, str(SMOKE / script), *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )


def _report(report_dir: Path, kind: str) -> dict[str, object]:
    written = sorted(report_dir.glob(f"{kind}-*.json"))
    assert len(written) == 1, f"expected one {kind} JSON report, found {written}"
    assert written[0].with_suffix(".md").is_file(), "the Markdown report is missing"
    report = json.loads(written[0].read_text())
    assert isinstance(report, dict)
    return report


def _explain(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr[-4000:]}"


def test_bench_quick_passes_and_writes_reports(tmp_path: Path) -> None:
    """A small benchmark run passes every row and writes JSON and Markdown."""
    done = _run(
        "bench.py",
        "--quick",
        "--reps",
        "2",
        "--sessions",
        "2",
        "--turns",
        "2",
        "--warm-turns",
        "1",
        "--sigint-grace",
        "0.5",
        "--sigterm-grace",
        "0.5",
        "--big-line-mib",
        "2",
        "--report-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench")
    assert report["ok"] is True
    rows = report["rows"]
    assert isinstance(rows, list)
    assert all(row["ok"] and row["n"] > 0 for row in rows), rows
    assert report["leftovers"] == []
    assert "| row | unit | n | median | p90 | max | status |" in done.stdout


def test_bench_attach_runs_and_writes_reports(tmp_path: Path) -> None:
    """The attach start-up benchmark runs a daemon, measures, stops it, leaves
    nothing behind and writes its reports (its speed verdict is not asserted)."""
    done = _run("bench_attach.py", "--reps", "2", "--warmup", "1", "--report-dir", str(tmp_path))
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench-attach")
    assert report["ok"] is True and report["leftovers"] == []
    rows = report["rows"]
    assert isinstance(rows, dict)
    assert rows["attach"]["n"] == 2
    assert "Target: median ≤ 60 ms" in done.stdout


def test_bench_status_runs_small_and_writes_reports(tmp_path: Path) -> None:
    """The status benchmark with 2 busy sessions: both run, every status is
    answered, nothing is left behind (its speed verdict is not asserted)."""
    done = _run(
        "bench_status.py",
        "--sessions",
        "2",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--report-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench-status")
    assert report["ok"] is True and report["leftovers"] == [] and report["running"] == 2


def test_bench_scale_runs_small_and_writes_reports(tmp_path: Path) -> None:
    """The scale benchmark in a small configuration: every streaming turn ends
    end_turn, nothing is left running, the reports are written."""
    done = _run(
        "bench_scale.py",
        "--idle",
        "2",
        "--streaming",
        "2",
        "--seconds",
        "0.2",
        "--report-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench-scale")
    assert report["ok"] is True and report["leftovers"] == []
    assert report["fairness"] is not None and report["rss_peak_mb"] > 0


def test_bench_floor_small_run_passes_and_writes_reports(tmp_path: Path) -> None:
    """A tiny bench_floor run: both relays deliver every delta, reports are written."""
    done = _run(
        "bench_floor.py",
        "--reps",
        "1",
        "--cold-reps",
        "1",
        "--sizes",
        "200,400",
        "--report-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench_floor")
    assert report["failures"] == []
    samples = report["samples"]
    assert isinstance(samples, dict)
    for side in ("bridge", "floor"):
        for measure in ("eps", "cpu", "rss"):
            assert len(samples[f"{side}_{measure}_400"]) == 1
    assert len(samples["cold_bridge"]) == len(samples["cold_floor"]) == 1
    # The bridge as installed (byte-compiled) and without bytecode of its own.
    assert len(samples["cold_bridge_nobytecode"]) == 1
    assert report["trees"] == {"bridge": str((REPO / "agybridge").resolve())}


def test_bench_latency_echo_runs_the_bridge_and_every_floor(tmp_path: Path) -> None:
    """A tiny echo run: the bridge and the three floor relays (stdlib, trio, the
    bridge's task shape) each answer every echo turn and get a CPU figure."""
    done = _run(
        "bench_latency.py",
        "--only",
        "echo",
        "--reps",
        "1",
        "--echo-turns",
        "3",
        "--warm-turns",
        "1",
        "--report-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench_latency")
    assert report["failures"] == []
    samples = report["samples"]
    assert isinstance(samples, dict)
    assert {"floor", "trio floor", "shape floor"} < set(samples)
    assert all(len(columns["echo_cpu"]) == 1 for columns in samples.values()), samples
    assert "in the bridge's task shape" in done.stdout


def test_bench_load_small_run_passes_and_writes_reports(tmp_path: Path) -> None:
    """A tiny bench_load run: every load replays the recorded session, reports are written."""
    done = _run(
        "bench_load.py",
        "--reps",
        "1",
        "--loads",
        "1",
        "--cold-reps",
        "1",
        "--turns",
        "6",
        "--report-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench_load")
    assert report["failures"] == []
    samples = report["samples"]
    assert isinstance(samples, dict)
    (label,) = report["trees"]
    for measure in ("load_first", "load_first_cpu", "load_warm", "load_warm_cpu", "cold"):
        assert len(samples[label][measure]) == 1
    assert len(samples["floor"]["cold"]) == 1
    # Six turns: two of each kind, each with its prompt and at least one more line.
    (replayed,) = report["replayed"][label]
    assert replayed >= 12


def test_bench_smoke_baseline_smallest_run_passes(tmp_path: Path) -> None:
    """One history run, one identical and one slowed run, no hogs: the script's own
    checks (no false alarm, every slowed cell reported) decide its exit code."""
    done = _run(
        "bench_smoke_baseline.py",
        "--quick",
        "--history",
        "1",
        "--runs",
        "1",
        "--hogs",
        "0",
        "--report-dir",
        str(tmp_path),
    )
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench-smoke-baseline")
    assert report["false_alarms"] == [] and report["missed_slowdowns"] == []
    assert report["baseline_cells"] == 3


def test_bench_observer_runs_small_and_writes_reports(tmp_path: Path) -> None:
    """The observer-hook benchmark runs the helper against a real observing gate:
    every call is allowed and every edit's before-state noted (timings not asserted)."""
    done = _run("bench_observer.py", "--runs", "2", "--warmup", "1", "--report-dir", str(tmp_path))
    assert done.returncode == 0, _explain(done)
    report = _report(tmp_path, "bench-observer")
    assert report["ok"] is True and report["before_states_noted"] == 3
    assert report["outputs"] == {
        "view_file": '{"decision":"allow"}',
        "write_to_file": '{"decision":"allow"}',
        "sh -c true": "",
    }
