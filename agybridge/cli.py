"""Command line: ``agybridge`` serves ACP on stdio; ``demo`` and ``doctor`` help people;
``daemon``, ``attach``, ``status`` and ``stop`` are the workstation supervisor.

Nothing here writes to stdout while serving: the server claims stdout for
protocol bytes before anything else runs. The heavy modules (trio, attrs,
the server) are imported only by the commands that need them: ``attach``,
``status`` and ``stop`` run on the standard library alone.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__

if TYPE_CHECKING:
    from .config import Settings

#: Commands that do not need the bridge's settings (nor its imports).
_LIGHT = ("attach", "status", "stop")


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
    daemon = commands.add_parser(
        "daemon", help="run the workstation supervisor in the foreground (systemd, launchd)"
    )
    daemon.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    commands.add_parser(
        "attach", help="speak ACP on stdio through the daemon (started if needed)", add_help=False
    )
    commands.add_parser("status", help="what the daemon is doing (--json)", add_help=False)
    commands.add_parser("stop", help="stop the daemon gracefully (--timeout)", add_help=False)
    return parser


def _light(command: str, rest: list[str]) -> int:
    if command == "attach":
        from .attach.relay import main as attach_main

        return attach_main(rest)
    from .attach import control

    return control.status_main(rest) if command == "status" else control.stop_main(rest)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _LIGHT:
        sys.exit(_light(argv[0], argv[1:]))
    args = _parser().parse_args(argv)
    from .config import ConfigError, Settings
    from .logs import configure_logging

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"agybridge: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.command == "demo":
        from .demo import run_demo

        sys.exit(run_demo(args.scenario, args.prompt or [], use_real_agy=args.real_agy))
    if args.command == "doctor":
        sys.exit(_doctor(settings))
    configure_logging(settings.log_file, settings.log_level)
    if args.command == "daemon":
        from .attach.paths import socket_path
        from .daemon import run_daemon

        sys.exit(run_daemon(settings, Path(socket_path()), args.ready_fd))
    from .server import run

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
