"""Command line: ``agybridge`` serves ACP on stdio; ``demo`` and ``doctor`` help people.

Nothing here writes to stdout while serving: the server claims stdout for
protocol bytes before anything else runs.
"""

from __future__ import annotations

import argparse
import sys

import trio

from . import __version__
from .agy import Completed, run_owned
from .config import ConfigError, Settings
from .logs import configure_logging
from .server import run

DOCTOR_TIMEOUT_S = 30.0


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
    smoke = commands.add_parser(
        "smoke",
        add_help=False,
        help="run a smoke matrix through the bridge: agybridge smoke run MATRIX.toml",
    )
    smoke.add_argument("smoke_args", nargs=argparse.REMAINDER)  # for --help; main() routes
    return parser


def main(argv: list[str] | None = None) -> None:
    raw = sys.argv[1:] if argv is None else argv
    if raw[:1] == ["smoke"]:
        # A client of the bridge with its own options; it needs none of the bridge's settings.
        from .smoke import main as smoke_main  # noqa: PLC0415 - imported only when used

        sys.exit(smoke_main(raw[1:]))
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

    async def ask_version() -> Completed:
        # Owned like every agy invocation: a hanging wrapper script's children die too.
        with trio.fail_after(DOCTOR_TIMEOUT_S):
            return await run_owned([agy, "--version"], label="agy --version")

    try:
        done = trio.run(ask_version)
    except (OSError, trio.TooSlowError) as exc:
        reason = exc if isinstance(exc, OSError) else f"no answer within {DOCTOR_TIMEOUT_S:g} s"
        print(f"agy: {agy} could not run: {reason}")
        return 1
    output = done.stdout or done.stderr
    version = output.decode("utf-8", "replace").strip().splitlines()
    print(f"agy: {agy} ({version[0] if version else 'no version output'}, exit {done.returncode})")
    return 0 if done.returncode == 0 else 1
