#!/usr/bin/env python3
"""Do smoke baselines cry wolf? Identical reruns on a loaded machine, then a 2x slowdown.

Run from the repository root with the project's venv::

    .venv/bin/python smoke/bench_smoke_baseline.py              # 5 + 20 + 20 runs, 2 hogs
    .venv/bin/python smoke/bench_smoke_baseline.py --quick      # 3 cells; 2 + 3 + 3 runs

A 12-cell matrix (2 efforts x 2 modes x 3 cases: an echo, a tool call and a 3 s
streaming turn) runs through ``agybridge smoke run --fake echo`` with ``--hogs`` busy
loops running beside it the whole time:

1. ``--history`` runs with ``--update-baseline`` build the baseline (median of N);
2. ``--runs`` identical runs against it: any ``baseline.*`` failure is a false alarm;
3. ``--runs`` runs where the streaming case's whole turn takes twice as long: its
   streaming time grows by the median turn its history holds (3 s + M for a turn of
   M ≈ 3.7 s: the fixed part of a turn does not double by itself), set through a
   ``[vars]`` placeholder so the cell keys are unchanged; every run must report
   ``baseline.turn_s`` for each of that case's 4 cells.

``--quick``: 3 cells (one effort, one mode), at most 2 + 3 + 3 runs.

Reports go to ``smoke/reports/bench-smoke-baseline-<UTC>.json`` and ``.md``; the
Markdown is printed. Exit status 1 when a false alarm or a missed slowdown occurred.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "smoke" / "reports"
SLOW_CASE = "stream"
#: The streaming case's streaming time in the identical runs.
STREAM_S = 3.0
MATRIX = """\
[run]
concurrency = 4
timeout_s = 120

[vars]
stream_s = "{stream_s}"

[matrix]
effort = {efforts}
mode = {modes}

[[case]]
name = "echo"
prompt = "Reply with exactly the word PONG."
expect.contains = "PONG"

[[case]]
name = "tool"
prompt = "[fake-agy:tool] run one command"
expect.tool_kinds = ["execute"]

[[case]]
name = "{slow_case}"
prompt = "count for a while"
env = {{ FAKE_AGY_SCENARIO = "slow", FAKE_AGY_SLOW_SECONDS = "{{{{stream_s}}}}" }}
"""


def _matrix(directory: Path, stream_s: float, *, small: bool) -> Path:
    path = directory / f"matrix-{stream_s:g}.toml"
    efforts, modes = (["low"], ["safe"]) if small else (["low", "high"], ["safe", "ask"])
    text = MATRIX.format(
        stream_s=f"{stream_s:g}",
        slow_case=SLOW_CASE,
        efforts=json.dumps(efforts),
        modes=json.dumps(modes),
    )
    path.write_text(text)
    return path


def _run(matrix: Path, work: Path, *extra: str) -> dict[str, Any]:
    report = work / "report.json"
    report.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGYBRIDGE_", "FAKE_AGY_"))}
    argv = [sys.executable, "-m", "agybridge", "smoke", "run", str(matrix), "--fake", "echo"]
    done = subprocess.run(
        [*argv, "--plain", "--json", str(report), *extra],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    data = json.loads(report.read_text()) if report.exists() else {"cells": []}
    return {"code": done.returncode, "report": data, "stderr": done.stderr[-2000:]}


def _stream_median(baseline: dict[str, Any]) -> float:
    """The median turn of the streaming case's cells, as the baseline holds them."""
    medians = [
        statistics.median(phases["turn_s"])
        for key, phases in baseline.get("cells", {}).items()
        if key.startswith(f"{SLOW_CASE} [") and phases.get("turn_s")
    ]
    return statistics.median(medians) if medians else STREAM_S


def _regressions(run: dict[str, Any]) -> list[str]:
    return [
        f"{cell['id']}: {failure['expectation']} ({failure['seen']})"
        for cell in run["report"]["cells"]
        for failure in cell["failures"]
        if failure["expectation"].startswith("baseline.")
    ]


def _turns(runs: list[dict[str, Any]], case: str) -> list[float]:
    return [
        cell["turn_s"]
        for run in runs
        for cell in run["report"]["cells"]
        if cell["case"] == case and cell["turn_s"] is not None
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--report-dir", type=Path, default=REPORTS, metavar="DIR")
    args = parser.parse_args()
    if args.quick:
        args.history = min(args.history, 2)
        args.runs = min(args.runs, 3)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-smoke-baseline-") as tmp:
            work = Path(tmp)
            normal = _matrix(work, STREAM_S, small=args.quick)
            baseline = work / "baseline.json"
            history = [
                _run(normal, work, "--baseline", str(baseline), "--update-baseline")
                for _ in range(args.history)
            ]
            kept = json.loads(baseline.read_text()) if baseline.exists() else {}
            reference = _stream_median(kept)
            slowed = _matrix(work, STREAM_S + reference, small=args.quick)
            judge = ["--baseline", str(baseline), "--baseline-min-samples"]
            judge.append(str(min(3, args.history)))
            same = [_run(normal, work, *judge) for _ in range(args.runs)]
            slow = [_run(slowed, work, *judge) for _ in range(args.runs)]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    false_alarms = [(i, r) for i, run in enumerate(same) for r in _regressions(run)]
    bad_exits = [run["code"] for run in same if run["code"] != 0]
    missed = []
    for index, run in enumerate(slow):
        flagged = {r.split(":")[0] for r in _regressions(run) if "baseline.turn_s" in r}
        wanted = {c["id"] for c in run["report"]["cells"] if c["case"] == SLOW_CASE}
        if not wanted or flagged != wanted:
            missed.append((index, sorted(wanted - flagged)))
    summary: dict[str, Any] = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "hogs": args.hogs,
        "history_runs": args.history,
        "history_exits": [run["code"] for run in history],
        "history_problems": [
            f"{cell['id']}: {cell['status']} "
            + "; ".join(f["expectation"] for f in cell["failures"])
            + (f" {cell['error']['cause']}" if cell["error"] else "")
            for run in history
            for cell in run["report"]["cells"]
            if cell["status"] not in ("passed", "flaky")
        ],
        "identical_runs": args.runs,
        "false_alarms": false_alarms,
        "identical_nonzero_exits": bad_exits,
        "slowed_runs": args.runs,
        "stream_history_median_s": round(reference, 3),
        "slowed_stream_s": round(STREAM_S + reference, 3),
        "missed_slowdowns": missed,
        "turn_s": {
            case: {
                "identical_median": round(statistics.median(_turns(same, case)), 3),
                "identical_max": round(max(_turns(same, case)), 3),
                "slowed_median": round(statistics.median(_turns(slow, case)), 3),
                "slowed_min": round(min(_turns(slow, case)), 3),
            }
            for case in ("echo", "tool", SLOW_CASE)
            if _turns(same, case) and _turns(slow, case)
        },
        "baseline_cells": len(kept.get("cells", {})),
    }
    args.report_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.report_dir / f"bench-smoke-baseline-{stamp}"
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        f"# smoke baselines under {args.hogs} CPU hogs ({summary['when']})",
        "",
        f"- baseline: {args.history} runs (exits {summary['history_exits']}), "
        f"{summary['baseline_cells']} cells; problems: {summary['history_problems'] or 'none'}",
        f"- {args.runs} identical runs: {len(false_alarms)} false alarms, "
        f"non-zero exits {bad_exits}",
        f"- {args.runs} runs with `{SLOW_CASE}`'s turn 2x (streaming {STREAM_S:g} s -> "
        f"{STREAM_S + reference:.2f} s over a history median of {reference:.2f} s): "
        f"{len(missed)} runs missed a cell",
        "",
        "| case | identical median (s) | identical max | 2x median | 2x min |",
        "|---|--:|--:|--:|--:|",
    ]
    for case, row in summary["turn_s"].items():
        lines.append(
            f"| {case} | {row['identical_median']} | {row['identical_max']} | "
            f"{row['slowed_median']} | {row['slowed_min']} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if false_alarms or missed or bad_exits or summary["history_problems"]:
        print(json.dumps({"false_alarms": false_alarms, "missed": missed}, indent=2))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
