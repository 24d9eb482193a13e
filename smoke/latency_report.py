"""The Markdown table of ``bench_latency.py``: trees side by side, the floor, the ratio."""

from __future__ import annotations

import argparse
import os
from typing import Any

from smokekit import facts_markdown, fmt, summarize

ECHO_CPU_TARGET_MS = 0.5
#: The floor's CPU per warm echo turn when issue 15 set that target (a quieter machine).
ISSUE_ECHO_FLOOR_MS = 0.1
#: (measure key, label, unit, digits); latency and echo keys are one value per repetition.
ROWS = (
    ("lat_p50", "per-event latency p50 ({shape})", "ms", 2),
    ("lat_p99", "per-event latency p99 ({shape})", "ms", 2),
    ("lat_max", "per-event latency max ({shape})", "ms", 2),
    ("lat_cpu", "relay CPU per paced delta ({shape})", "µs", 1),
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


def render(
    stamp: str,
    args: argparse.Namespace,
    *,
    columns: list[str],
    trees: str,
    samples: dict[str, dict[str, list[float]]],
    facts: dict[str, Any],
    load_after: list[float],
) -> str:
    """The Markdown table: one column per tree, the floor, and last / first tree."""
    shape = f"{args.sessions} sessions × {args.deltas} deltas @ {args.interval_ms:g} ms"
    two = len(columns) >= 2
    head = ["measure", *columns, "floor"] + ([f"{columns[-1]} / {columns[0]}"] if two else [])
    lines = [
        f"# bench_latency {stamp}",
        "",
        facts_markdown(facts),
        f"- Load average at the end: {' / '.join(f'{x:.2f}' for x in load_after)}",
        f"- Trees: {trees}",
        "",
        f"{args.reps} repetition(s), trees alternating; medians over repetitions (cancels: "
        f"{args.cancels} per repetition, pooled); {args.echo_turns} echo turns after "
        f"{args.warm_turns} warm-up; cancel {args.cancel_after_ms:g} ms after the slow "
        "turn's first chunk. Floor: `floor_relay.py` (one json.loads per agy line; for "
        "the paced load, one relay per session, each relaying its own fake agy).",
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "--:|" * (len(head) - 1),
    ]
    for key, label, unit, digits in ROWS:
        values = [column_value(samples.get(column, {}), key) for column in columns]
        if all(value is None for value in values):
            continue
        floor = column_value(samples.get("floor", {}), key)
        cells = [f"{fmt(value, digits)} {unit}" if value is not None else "–" for value in values]
        cells.append(f"{fmt(floor, digits)} {unit}" if floor is not None else "")
        if two:
            first, last = values[0], values[-1]
            cells.append(f"{last / first:.2f}×" if first and last is not None else "–")
        lines.append(f"| {label.format(shape=shape)} | " + " | ".join(cells) + " |")
    floor_echo = column_value(samples.get("floor", {}), "echo_cpu")
    trio_echo = column_value(samples.get("trio floor", {}), "echo_cpu")
    if trio_echo is not None:
        lines.append(
            f"\nThe floor's relay on trio (`floor_relay.py --trio`, the same work per read, "
            f"one task per pipe) costs {trio_echo:.3f} ms per warm echo turn"
            + (f", {trio_echo / floor_echo:.1f}× the floor" if floor_echo else "")
            + ": what trio's wake-ups alone cost a turn on this machine."
        )
    shape_echo = column_value(samples.get("shape floor", {}), "echo_cpu")
    if shape_echo is not None:
        lines.append(
            f"\nThe same relay in the bridge's task shape (`floor_relay.py --shape`: a "
            f"reader task for the caller, a task per prompt, agy's reader and a session "
            f"task apart, one SQLite commit per turn in a worker thread) costs "
            f"{shape_echo:.3f} ms"
            + (f", {shape_echo / floor_echo:.1f}× the floor" if floor_echo else "")
            + ": what the architecture costs a turn before any of the bridge's logic."
        )
    for column in columns:
        echo_cpu = column_value(samples.get(column, {}), "echo_cpu")
        if echo_cpu is not None:
            verdict = "meets" if echo_cpu <= ECHO_CPU_TARGET_MS else "misses"
            times_floor = f", {echo_cpu / floor_echo:.1f}× the floor" if floor_echo else ""
            if trio_echo:
                times_floor += f", {echo_cpu / trio_echo:.1f}× the trio floor"
            if shape_echo:
                times_floor += f", {echo_cpu / shape_echo:.1f}× the shape floor"
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
    return "\n".join(lines) + "\n"
