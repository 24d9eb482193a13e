"""``agybridge smoke run MATRIX.toml``: the command line of the smoke matrix runner.

Exit status: 0 every cell passed (or was skipped), 1 a cell failed or errored, 2 the
matrix (or the baseline, or the command line) is invalid or the bridge cannot start,
3 agy is missing and ``--require-agy`` was given. Ctrl-C stops every bridge and
exits 130.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import attrs
import trio

from . import baseline, reports
from .cell import Setup
from .matrix import MatrixError, load_matrix
from .model import Matrix
from .progress import Progress
from .results import CellResult
from .runner import Runner

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_NO_AGY, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="agybridge smoke",
        description="Run a smoke matrix (prompts × modes × models) through the bridge over "
        "ACP, as an editor would, and report JUnit, JSON and Markdown.",
    )
    commands = top.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a matrix file (see the README for the format)")
    run.add_argument("matrix", type=Path, help="the matrix file (TOML)")
    run.add_argument(
        "--bridge",
        metavar="CMD",
        help="the bridge command line (default: this Python's `-m agybridge`), "
        "e.g. 'agybridge attach'",
    )
    run.add_argument(
        "--fake",
        metavar="SCENARIO",
        help="run against the bundled fake agy with this scenario (sets AGY_BIN)",
    )
    run.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML here")
    run.add_argument("--json", type=Path, metavar="FILE", help="write the JSON report here")
    run.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="write the Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set)",
    )
    run.add_argument("--baseline", type=Path, metavar="FILE", help="an earlier --json report")
    run.add_argument("--max-slowdown", type=_ratio, default=1.5, metavar="X")
    run.add_argument("--max-token-growth", type=_ratio, default=1.5, metavar="X")
    run.add_argument(
        "--update-baseline",
        action="store_true",
        help="write this run's JSON report to the --baseline file when the run passed",
    )
    run.add_argument(
        "--require-agy", action="store_true", help="exit 3 when agy is missing (else: skip)"
    )
    run.add_argument("--concurrency", type=int, metavar="N", help="override run.concurrency")
    run.add_argument("-v", "--verbose", action="store_true", help="stream cell transcripts")
    run.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    run.add_argument(
        "--keep", action="store_true", help="keep the cells' workspaces and bridge stderr"
    )
    return top


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 1:  # NaN too: it would compare as never exceeded
        raise argparse.ArgumentTypeError(f"a growth factor is 1 or more, not {value:g}")
    return value


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    # A bridge stopped mid-request makes the client peer log expected warnings (a late
    # response, a closed pipe): the cell's own result says what happened.
    logging.getLogger("agybridge.jsonrpc").setLevel(logging.ERROR)
    if args.update_baseline and args.baseline is None:
        print("agybridge smoke: --update-baseline needs --baseline FILE", file=sys.stderr)
        return EXIT_INVALID
    if args.concurrency is not None and args.concurrency < 1:
        print("agybridge smoke: --concurrency must be 1 or more", file=sys.stderr)
        return EXIT_INVALID
    if args.bridge is not None:
        try:
            args.bridge_argv = tuple(shlex.split(args.bridge))
        except ValueError as exc:
            print(f"agybridge smoke: --bridge {args.bridge!r}: {exc}", file=sys.stderr)
            return EXIT_INVALID
        if not args.bridge_argv and args.bridge:
            print("agybridge smoke: --bridge is blank: give a command line", file=sys.stderr)
            return EXIT_INVALID
    try:
        matrix = load_matrix(args.matrix)
    except MatrixError as exc:
        print(f"agybridge smoke: invalid matrix: {exc}", file=sys.stderr)
        return EXIT_INVALID
    before: dict[str, dict[str, Any]] = {}
    if args.baseline is not None and (args.baseline.exists() or not args.update_baseline):
        try:
            before = baseline.load(args.baseline)
        except baseline.BaselineError as exc:
            print(f"agybridge smoke: {exc}", file=sys.stderr)
            return EXIT_INVALID
    scratch = Path(tempfile.mkdtemp(prefix="agybridge-smoke-"))
    try:
        return trio.run(_run, args, matrix, before, scratch)
    except BaseException as exc:
        # Ctrl-C reaches us from inside the task tree, so maybe inside a group.
        interrupted = isinstance(exc, KeyboardInterrupt) or (
            isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None
        )
        if not interrupted:
            raise
        print("agybridge smoke: interrupted; every bridge was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
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


def find_agy(env: dict[str, str]) -> str | None:
    """agy as the bridge finds it: ``AGY_BIN`` (a path or a name on PATH), else ``agy``."""
    name = env.get("AGY_BIN") or "agy"
    if os.sep in name:
        path = Path(name).expanduser()
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH"))


async def _run(
    args: argparse.Namespace, matrix: Matrix, before: dict[str, dict[str, Any]], scratch: Path
) -> int:
    run = matrix.run
    if args.concurrency is not None:
        run = attrs.evolve(run, concurrency=args.concurrency)
    env = _environment(args, scratch)
    argv = args.bridge_argv if args.bridge else (sys.executable, "-m", "agybridge")
    setup = Setup(argv, env, scratch, run, uuid.uuid4().hex[:12])
    cells = matrix.cells()
    skipped = {
        cell.index: f"skip_if: {cell.case.skip_if.text}"
        for cell in cells
        if cell.case.skip_if is not None and cell.case.skip_if.holds(cell.axes)
    }
    note = ""
    agy_missing = False
    if args.bridge is None and find_agy({**env, **run.env}) is None:
        agy_missing = True
        where = env.get("AGY_BIN") or "agy on PATH"
        note = f"agy not found ({where}): every cell SKIPPED"
        print(f"agybridge smoke: WARNING: {note}; set AGY_BIN or install agy", file=sys.stderr)
        skipped = {cell.index: "agy not found" for cell in cells}
    live = sys.stdout.isatty() and not args.plain
    progress = Progress(sys.stdout, len(cells), live=live, verbose=args.verbose)
    runner = Runner(matrix, setup, progress.events())
    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(progress.tick)
        results = await runner.run(cells, skipped)
        nursery.cancel_scope.cancel()
    progress.close()
    duration = trio.current_time() - started
    if before:
        baseline.compare(results, before, args.max_slowdown, args.max_token_growth)
    agent = next((r.record.agent_info for r in results if r.record.agent_info), None)
    unwritten = _write_reports(
        args, matrix, results, duration=duration, agent=agent, note=note, setup=setup
    )
    tally = reports.counts(results)
    print(
        f"agybridge smoke: {len(results)} cells: {tally['passed']} passed, {tally['failed']} "
        f"failed, {tally['error']} errors, {tally['skipped']} skipped ({duration:.1f} s)"
    )
    if agy_missing and args.require_agy:
        return EXIT_NO_AGY
    if unwritten:
        return EXIT_INVALID  # a report path on the command line cannot be written
    ran = [r for r in results if r.status != "skipped"]
    if ran and all(r.error is not None and r.error.kind == "bridge_start" for r in ran):
        assert ran[0].error is not None
        print(f"agybridge smoke: the bridge cannot start: {ran[0].error.message}", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_FAILED if tally["failed"] or tally["error"] else EXIT_OK


def _write_reports(
    args: argparse.Namespace,
    matrix: Matrix,
    results: list[CellResult],
    *,
    duration: float,
    agent: dict[str, Any] | None,
    note: str,
    setup: Setup,
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
    meta = {
        "matrix": str(matrix.path),
        "bridge": list(setup.bridge_argv),
        "agent_info": agent,
        "agy_bin": setup.env.get("AGY_BIN"),
        "note": note or None,
    }
    data = reports.json_report(results, meta, duration)
    if args.json is not None:
        write(args.json, reports.json_text(data))
    counted = data["counts"]
    if args.update_baseline and not (counted["failed"] or counted["error"]):
        write(args.baseline, reports.json_text(data))
    elif args.update_baseline:
        print(f"agybridge smoke: the run failed: {args.baseline} is not updated", file=sys.stderr)
    if args.junit is not None:
        write(args.junit, reports.junit(results, title, duration))
    text = reports.markdown(results, title, duration, note)
    if args.markdown is not None:
        write(args.markdown, text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        write(Path(summary), text, append=True)
    return failed
