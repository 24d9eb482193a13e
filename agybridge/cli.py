"""Command line: ``agybridge`` serves ACP on stdio; ``demo`` and ``doctor`` help people.

Nothing here writes to stdout while serving: the server claims stdout for
protocol bytes before anything else runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from . import __version__
from .config import ConfigError, Settings
from .logs import configure_logging
from .server import run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agybridge",
        description="An Agent Client Protocol agent for Google's Antigravity CLI (agy). "
        "Editors start it and speak ACP on its stdin/stdout.",
    )
    parser.add_argument("--version", action="version", version=f"agybridge {__version__}")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("serve", help="serve ACP on stdio (the default)")
    demo = commands.add_parser(
        "demo", help="drive one session against the bundled fake agy and show what an editor shows"
    )
    demo.add_argument("--scenario", default="echo", help="fake agy scenario (default: echo)")
    demo.add_argument(
        "--prompt",
        action="append",
        help="prompt text; repeat for several turns (default: one greeting)",
    )
    demo.add_argument(
        "--real-agy",
        action="store_true",
        help="use the real agy (AGY_BIN or agy on PATH) instead of the fake",
    )
    commands.add_parser("doctor", help="check that agy can be found and started")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"agybridge: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.command == "demo":
        # Only the demo needs the demo client: not imported when serving.
        from .demo import run_demo  # noqa: PLC0415

        sys.exit(run_demo(args.scenario, args.prompt or [], use_real_agy=args.real_agy))
    if args.command == "doctor":
        sys.exit(_doctor(settings))
    configure_logging(settings.log_file, settings.log_level)
    sys.exit(run(settings))


def _doctor(settings: Settings) -> int:
    agy = settings.resolve_agy_bin()
    print(f"agybridge {__version__}")
    print(f"log file: {settings.log_file or '(disabled)'}")
    if agy is None:
        print(f"agy: NOT FOUND ({settings.agy_bin!r}); install agy or set AGY_BIN")
        return 1
    try:
        done = subprocess.run(
            [agy, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"agy: {agy} could not run: {exc}")
        return 1
    version = (done.stdout or done.stderr).strip().splitlines()
    print(f"agy: {agy} ({version[0] if version else 'no version output'}, exit {done.returncode})")
    return 0 if done.returncode == 0 else 1
