"""One ``agybridge smoke run``: set up, run the cells, judge, report, decide the exit status.

Theory of operation: `run` makes the scratch directory (removed on every path, a
signal included) and runs `_run` under trio. `_run` listens for SIGINT and SIGTERM
for its whole life: the first one stops the `Runner` (running cells are cancelled and
their bridges stopped by the ladder; cells without a verdict are reported skipped with
the reason), the reports are still written, and the exit status is 128 + the signal
(130 / 143). Each cell is judged by its expectations and the baseline before its
progress line is printed. The baseline is updated only by ``--update-baseline``, only
by a run in which every selected cell passed, and to the median of its kept history.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import shutil
import signal
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import attrs
import trio

from . import github, reports
from .baseline import Baseline, Comparison, Limits, finish
from .causes import AGY_UNUSABLE
from .cell import Setup, find_agy
from .model import Cell, Matrix
from .progress import Progress
from .results import CellResult
from .runner import Runner
from .selection import last_failed, record_failed

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_NO_AGY = 0, 1, 2, 3


def run(
    args: argparse.Namespace,
    matrix: Matrix,
    cells: list[Cell],
    reference: Baseline | None,
    limits: Limits,
) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agybridge-smoke-"))
    try:
        return trio.run(
            functools.partial(_run, args, matrix, cells, reference, limits, scratch=scratch)
        )
    except BaseException as exc:
        # A Ctrl-C before the signal watcher is listening (or after it stopped) reaches
        # us as KeyboardInterrupt, maybe inside a group: nothing ran or all is written.
        interrupted = isinstance(exc, KeyboardInterrupt) or (
            isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None
        )
        if not interrupted:
            raise
        print("agybridge smoke: interrupted; every bridge was stopped", file=sys.stderr)
        return 128 + signal.SIGINT.value
    finally:
        if args.keep:
            print(f"agybridge smoke: workspaces and bridge stderr kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _environment(args: argparse.Namespace, scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    if args.fake:
        from ..demo import fake_agy_command  # noqa: PLC0415 - only --fake needs it

        env["AGY_BIN"] = fake_agy_command()
        env["FAKE_AGY_SCENARIO"] = args.fake
        env.setdefault("FAKE_AGY_STATE_DIR", str(scratch / "fake-agy-state"))
    # A smoke run stays out of the user's session history and log.
    env.setdefault("AGYBRIDGE_DB", str(scratch / "sessions.db"))
    env.setdefault("AGYBRIDGE_STAGING_DIR", str(scratch / "staging"))
    env.setdefault("AGYBRIDGE_LOG_FILE", str(scratch / "bridge.log"))
    return env


@attrs.define
class _Signals:
    received: signal.Signals | None = None


async def _watch_signals(runner: Runner, seen: _Signals, task_status: Any) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            if seen.received is None:
                seen.received = signal.Signals(signum)
                name = seen.received.name
                print(
                    f"agybridge smoke: {name}: stopping every bridge, then writing the reports",
                    file=sys.stderr,
                    flush=True,
                )
                runner.stop(f"interrupted by {name}")


async def _run(
    args: argparse.Namespace,
    matrix: Matrix,
    cells: list[Cell],
    reference: Baseline | None,
    limits: Limits,
    *,
    scratch: Path,
) -> int:
    started_at = dt.datetime.now(dt.UTC)
    config = matrix.run
    if args.concurrency is not None:
        config = attrs.evolve(config, concurrency=args.concurrency)
    env = _environment(args, scratch)
    argv = args.bridge_argv or (sys.executable, "-m", "agybridge")
    ours = args.bridge_argv is None
    setup = Setup(argv, env, scratch, config, uuid.uuid4().hex[:12], check_agy=ours)
    skipped = {
        cell.index: f"skip_if: {cell.case.skip_if.text}"
        for cell in cells
        if cell.case.skip_if is not None and cell.case.skip_if.holds(cell.axes)
    }
    note = ""
    agy_missing = ours and find_agy({**env, **config.env}) is None
    if agy_missing:
        where = env.get("AGY_BIN") or "agy on PATH"
        note = f"agy not found ({where}): every cell SKIPPED"
        print(f"agybridge smoke: WARNING: {note}; set AGY_BIN or install agy", file=sys.stderr)
        skipped = {cell.index: "agy not found" for cell in cells}
    comparison: Comparison | None = None
    if reference is not None:
        keys = {cell.key for cell in cells}
        every = {cell.key for cell in matrix.cells()}
        if args.update_baseline and not (args.keyword or args.last_failed):
            for gone in sorted(set(reference.cells) - every):
                print(f"agybridge smoke: baseline: dropping {gone} (no longer in the matrix)")
                del reference.cells[gone]
        comparison = reference.comparison(lambda key: key in keys or key not in every)

    def judge(result: CellResult) -> None:
        if reference is not None:
            reference.compare(result, limits, comparison)

    live = sys.stdout.isatty() and not args.plain
    progress = Progress(sys.stdout, len(cells), live=live, verbose=args.verbose)
    runner = Runner(
        matrix,
        setup,
        progress.events(),
        judge=judge,
        stop_on_failure=args.exitfirst,
        reruns=args.reruns,
    )
    seen = _Signals()
    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(_watch_signals, runner, seen)
        nursery.start_soon(progress.tick)
        results = await runner.run(cells, skipped)
        nursery.cancel_scope.cancel()
    progress.close()
    duration = trio.current_time() - started
    problem = finish(comparison, results).problem() if comparison is not None else None
    interrupted = seen.received
    if interrupted is not None:
        note = (note + "; " if note else "") + f"interrupted by {interrupted.name}"
    elif runner.stopped:
        note = (note + "; " if note else "") + runner.stopped
    if problem is not None:
        note = (note + "; " if note else "") + f"baseline not trusted: {problem}"
    unwritten = _write_reports(
        args, matrix, results, duration=duration, note=note, setup=setup, started_at=started_at
    )
    tally = reports.counts(results)
    print(f"agybridge smoke: {len(results)} cells: {reports.tally_text(tally)} ({duration:.1f} s)")
    if github.enabled():
        lines = github.commands(results, str(matrix.path))
        if problem is not None:
            lines.append(github.error(f"smoke baseline not trusted: {problem}", str(matrix.path)))
        print("\n".join(lines), flush=True)
    _remember_failures(args, results)
    if problem is not None:
        print(f"agybridge smoke: BASELINE NOT TRUSTED: {problem}", file=sys.stderr)
    if args.update_baseline and interrupted is None:
        unwritten |= _update_baseline(args, reference, results)
    if interrupted is not None:
        return 128 + interrupted.value
    unusable = any(r.error is not None and r.error.kind in AGY_UNUSABLE for r in results)
    if (agy_missing or unusable) and args.require_agy:
        return EXIT_NO_AGY
    if unwritten or problem is not None:
        return EXIT_INVALID
    ran = [r for r in results if r.status != "skipped"]
    if ran and all(r.error is not None and r.error.kind == "bridge_start" for r in ran):
        assert ran[0].error is not None
        print(f"agybridge smoke: the bridge cannot start: {ran[0].error.message}", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_FAILED if tally["failed"] or tally["error"] else EXIT_OK


def _remember_failures(args: argparse.Namespace, results: list[CellResult]) -> None:
    """``--lf`` state: earlier failures of cells not run now, plus this run's."""
    ran = {r.cell.id for r in results if r.status != "skipped"}
    failed = {r.cell.id for r in results if r.status in ("failed", "error")}
    before = last_failed(args.cache_dir, args.matrix)
    try:
        record_failed(args.cache_dir, args.matrix, (before - ran) | failed)
    except OSError as exc:
        print(f"agybridge smoke: cannot write the --lf cache: {exc}", file=sys.stderr)


def _update_baseline(
    args: argparse.Namespace, reference: Baseline | None, results: list[CellResult]
) -> bool:
    """True when the baseline could not be written."""
    bad = [r for r in results if r.status in ("failed", "error", "skipped")]
    if bad:
        print(
            f"agybridge smoke: {args.baseline} is NOT updated: {len(bad)} cells failed, "
            "errored or were skipped (a baseline learns only from complete, passing runs)",
            file=sys.stderr,
        )
        return False
    updated = reference if reference is not None else Baseline(keep=args.baseline_keep)
    updated.keep = args.baseline_keep
    updated.update(results)
    try:
        reports.write(args.baseline, reports.json_text(updated.to_json()))
    except OSError as exc:
        print(f"agybridge smoke: cannot write {args.baseline}: {exc}", file=sys.stderr)
        return True
    return False


def _properties(results: list[CellResult], setup: Setup) -> dict[str, str]:
    from .. import __version__  # noqa: PLC0415

    agent = next((r.record.agent_info for r in results if r.record.agent_info), None) or {}
    agy = next((r.record.agy_version for r in results if r.record.agy_version), None)
    return {
        "agybridge.smoke.version": __version__,
        "bridge.name": str(agent.get("name") or "unknown"),
        "bridge.version": str(agent.get("version") or "unknown"),
        "bridge.command": " ".join(setup.bridge_argv),
        "agy.version": agy or "unknown",
        "agy.bin": setup.env.get("AGY_BIN") or "agy",
    }


def _write_reports(
    args: argparse.Namespace,
    matrix: Matrix,
    results: list[CellResult],
    *,
    duration: float,
    note: str,
    setup: Setup,
    started_at: dt.datetime,
) -> bool:
    """Write every report asked for; True when one of them could not be written."""
    failed = False

    def write(path: Path, data: bytes | str, *, append: bool = False) -> None:
        nonlocal failed
        try:
            if isinstance(data, str) and append:
                reports.append(path, data)
            else:
                reports.write(path, data)
        except OSError as exc:
            failed = True
            print(f"agybridge smoke: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)

    title = matrix.path.name
    properties = _properties(results, setup)
    if note:
        properties["run.note"] = note  # agy missing, interrupted, -x, an untrusted baseline
    agent = next((r.record.agent_info for r in results if r.record.agent_info), None)
    meta = {
        "matrix": str(matrix.path),
        "bridge": list(setup.bridge_argv),
        "agent_info": agent,
        "agy_bin": setup.env.get("AGY_BIN"),
        "agy_version": properties["agy.version"],
        "started_at": started_at.replace(microsecond=0).isoformat(),
        "note": note or None,
    }
    if args.json is not None:
        write(args.json, reports.json_text(reports.json_report(results, meta, duration)))
    if args.junit is not None:
        write(args.junit, reports.junit(results, title, duration, properties, started_at))
    text = reports.markdown(results, title, duration, note)
    if args.markdown is not None:
        write(args.markdown, text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        write(Path(summary), text, append=True)
    return failed
