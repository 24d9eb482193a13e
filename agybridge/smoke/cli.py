"""``agybridge smoke run MATRIX.toml``: the command line of the smoke matrix runner.

Exit status: 0 every cell passed (flaky counts as passed) or was skipped; 1 a cell
failed or errored; 2 the matrix, the baseline or the command line is invalid, the
bridge cannot start, or a baseline compared 0 cells or fewer than it holds; 3 agy is
missing or unusable (a cell errored with one of `causes.AGY_UNUSABLE`) and
``--require-agy`` was given; 130 / 143 SIGINT / SIGTERM (the reports are still
written, every bridge is stopped, the temp dir is removed).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from . import app
from .baseline import KEEP, Baseline, BaselineError, Limits
from .matrix import MatrixError, load_matrix
from .selection import CACHE_DIR, SelectionError, keyword, last_failed

EXIT_OK, EXIT_FAILED, EXIT_INVALID = app.EXIT_OK, app.EXIT_FAILED, app.EXIT_INVALID


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
    pick = run.add_argument_group("selecting cells (as pytest does)")
    pick.add_argument(
        "-k",
        dest="keyword",
        metavar="EXPR",
        help="only cells whose id matches: words (substrings, any case) with and/or/not/()",
    )
    pick.add_argument(
        "--list",
        "--collect-only",
        dest="list_only",
        action="store_true",
        help="print the selected cell ids and exit",
    )
    pick.add_argument(
        "-x", "--exitfirst", action="store_true", help="stop at the first failed or errored cell"
    )
    pick.add_argument(
        "--lf",
        "--last-failed",
        dest="last_failed",
        action="store_true",
        help="only the cells that failed or errored last time (all if none did)",
    )
    pick.add_argument(
        "--cache-dir",
        type=Path,
        default=CACHE_DIR,
        metavar="DIR",
        help=f"where --lf state is kept (default {CACHE_DIR})",
    )
    pick.add_argument(
        "--reruns",
        type=_count0,
        default=0,
        metavar="N",
        help="run a cell whose expectations failed again, up to N times; one that then "
        "passes is flaky (transient errors are retried by run.retries)",
    )
    pick.add_argument(
        "--repeat",
        type=_count,
        default=1,
        metavar="N",
        help="run every selected cell N times (flakiness, baseline samples)",
    )
    out = run.add_argument_group("reports")
    out.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML here")
    out.add_argument("--json", type=Path, metavar="FILE", help="write the JSON report here")
    out.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="write the Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set)",
    )
    base = run.add_argument_group("baselines")
    base.add_argument(
        "--baseline", type=Path, metavar="FILE", help="a baseline file (or an earlier --json)"
    )
    base.add_argument(
        "--max-slowdown",
        type=_ratio,
        default=1.5,
        metavar="X",
        help="a phase regresses past X times the median of its history … (default 1.5)",
    )
    base.add_argument(
        "--slowdown-floor",
        type=_seconds,
        default=2.0,
        metavar="S",
        help="… and S seconds more than it (default 2.0)",
    )
    base.add_argument("--max-token-growth", type=_ratio, default=1.5, metavar="X")
    base.add_argument("--token-floor", type=_count0, default=200, metavar="N")
    base.add_argument(
        "--update-baseline",
        action="store_true",
        help="add this run's samples to the --baseline file's history when every cell "
        "passed (none failed, errored or skipped)",
    )
    base.add_argument(
        "--baseline-min-samples",
        type=_count,
        default=3,
        metavar="N",
        help="samples a cell's history needs before it can fail the cell (default 3; "
        "fewer: the deltas are reported, nothing fails)",
    )
    base.add_argument(
        "--baseline-keep",
        type=_count,
        default=KEEP,
        metavar="N",
        help=f"samples kept per cell (default {KEEP}); the reference is their median",
    )
    run.add_argument(
        "--require-agy",
        action="store_true",
        help="exit 3 when agy is missing or unusable (else: skip)",
    )
    run.add_argument("--concurrency", type=_count, metavar="N", help="override run.concurrency")
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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"seconds are 0 or more, not {value:g}")
    return value


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {least} or more, not {value}")
    return value


def _count(text: str) -> int:
    return _whole(text, 1)


def _count0(text: str) -> int:
    return _whole(text, 0)


def _fail(message: str) -> int:
    print(f"agybridge smoke: {message}", file=sys.stderr)
    return EXIT_INVALID


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    # A bridge stopped mid-request makes the client peer log expected warnings (a late
    # response, a closed pipe): the cell's own result says what happened.
    logging.getLogger("agybridge.jsonrpc").setLevel(logging.ERROR)
    if args.update_baseline and args.baseline is None:
        return _fail("--update-baseline needs --baseline FILE")
    args.bridge_argv = None
    if args.bridge is not None:
        try:
            args.bridge_argv = tuple(shlex.split(args.bridge))
        except ValueError as exc:
            return _fail(f"--bridge {args.bridge!r}: {exc}")
        if not args.bridge_argv:
            return _fail("--bridge is blank: give a command line")
    try:
        matrix = load_matrix(args.matrix)
        selected = keyword(args.keyword) if args.keyword is not None else None
    except (MatrixError, SelectionError) as exc:
        return _fail(f"invalid matrix: {exc}" if isinstance(exc, MatrixError) else str(exc))
    for warning in matrix.warnings:
        print(f"agybridge smoke: WARNING: {warning}", file=sys.stderr)
    cells = [c for c in matrix.cells(args.repeat) if selected is None or selected(c.id)]
    if args.last_failed:
        failed = last_failed(args.cache_dir, args.matrix)
        if failed:
            cells = [c for c in cells if c.id in failed or c.key in failed]
        else:
            print("agybridge smoke: --lf: no failure recorded, running every selected cell")
    if args.list_only:
        for cell in cells:
            print(cell.id)
        print(f"{len(cells)} cells selected")
        return EXIT_OK
    if not cells:
        return _fail("no cell is selected (check -k / --lf)")
    reference: Baseline | None = None
    if args.baseline is not None and (args.baseline.exists() or not args.update_baseline):
        try:
            reference = Baseline.load(args.baseline)
        except BaselineError as exc:
            return _fail(str(exc))
    limits = Limits(
        args.max_slowdown,
        args.slowdown_floor,
        args.max_token_growth,
        args.token_floor,
        args.baseline_min_samples,
    )
    return app.run(args, matrix, cells, reference, limits)
