"""Command line: ``agybridge`` serves ACP on stdio; ``demo``, ``doctor``, ``login``,
``sessions`` and ``logs`` help people; ``daemon``, ``attach``, ``status`` and ``stop``
are the workstation supervisor (``attach`` is dispatched in ``__main__`` before this
module is imported).

Nothing here writes to stdout while serving: the server claims stdout for
protocol bytes before anything else runs.
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING

import trio

from . import __version__
from .config import ConfigError, Settings
from .logs import configure_logging

if TYPE_CHECKING:
    import argparse

TTY_HINT = (
    "agybridge: waiting for an ACP client (an editor) on stdin/stdout; try `agybridge demo`, "
    "`agybridge doctor` or `agybridge --help` (Ctrl+D quits)"
)


def _parser() -> argparse.ArgumentParser:
    # The commands' own modules are imported by the commands, not by serving
    # (issue 15: an editor's launch waits for every import before initialize).
    import argparse  # noqa: PLC0415

    from . import cli_sessions  # noqa: PLC0415
    from .demo import SCENARIO_NAMES  # noqa: PLC0415

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
    demo.add_argument(
        "--scenario",
        default="echo",
        choices=SCENARIO_NAMES,
        metavar="NAME",
        help="fake agy scenario (default: echo): " + ", ".join(SCENARIO_NAMES),
    )
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
    doctor = commands.add_parser(
        "doctor",
        help="find every setup problem, each with a fix (exit code = number of failed checks)",
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    commands.add_parser(
        "login", help="sign agy in (agy's interactive sign-in); exit 0 once signed in"
    )
    cli_sessions.add_parser(commands)
    logs = commands.add_parser("logs", help="print the end of the log file")
    logs.add_argument("-n", type=int, default=40, metavar="N", help="lines to print (default 40)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument("--session", metavar="ID", help="only the lines of this session")
    smoke = commands.add_parser(
        "smoke",
        add_help=False,
        help="run a smoke matrix through the bridge: agybridge smoke run MATRIX.toml",
    )
    smoke.add_argument("smoke_args", nargs=argparse.REMAINDER)  # for --help; main() routes
    daemon = commands.add_parser(
        "daemon",
        help="run the workstation supervisor in the foreground (systemd, launchd)",
        description="Run the workstation supervisor in the foreground: one per user and "
        "session database, it owns every session and agy child; editors reach it with "
        "`agybridge attach` (which starts it when none runs). It listens on "
        "AGYBRIDGE_SOCKET (default $XDG_RUNTIME_DIR/agybridge/agybridge.sock, else "
        "$TMPDIR/agybridge-<uid>/agybridge.sock) in a directory of the user's alone, and "
        "stops on SIGTERM, SIGINT, SIGHUP or `agybridge stop`. Exit status: 0 stopped, "
        "1 cannot start (another daemon has the database, an unsafe or unusable socket "
        "path), 2 a bad database path, 3 another daemon has the socket.",
    )
    daemon.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    # These parse their own options (main() routes them before this parser).
    commands.add_parser(
        "attach", help="speak ACP on stdio through the daemon (started if needed)", add_help=False
    )
    commands.add_parser("status", help="what the daemon is doing (--json)", add_help=False)
    commands.add_parser("stop", help="stop the daemon gracefully (--timeout)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> None:
    # Each command imports what it needs when it runs: serving, the path every
    # editor launch takes, loads only what answering initialize needs (issue 15).
    raw = sys.argv[1:] if argv is None else argv
    serving = raw in ([], ["serve"])
    if not serving:
        gc.enable()  # __main__ defers it for serving's start-up only
    if raw[:1] == ["smoke"]:
        # A client of the bridge with its own options; it needs none of the bridge's settings.
        from .smoke import main as smoke_main  # noqa: PLC0415

        sys.exit(smoke_main(raw[1:]))
    if raw[:1] == ["attach"]:
        from .attach.relay import main as attach_main  # noqa: PLC0415

        sys.exit(attach_main(raw[1:]))
    if raw[:1] in (["status"], ["stop"]):
        from .attach import control  # noqa: PLC0415

        sys.exit((control.status_main if raw[0] == "status" else control.stop_main)(raw[1:]))
    if serving:
        sys.exit(_serve(_settings()))
    args = _parser().parse_args(argv)
    settings = _settings()
    if args.command == "demo":
        from .demo import run_demo  # noqa: PLC0415

        sys.exit(run_demo(args.scenario, args.prompt or [], use_real_agy=args.real_agy))
    if args.command == "doctor":
        sys.exit(_doctor(settings, as_json=args.json))
    if args.command == "login":
        from .login import run_login  # noqa: PLC0415

        sys.exit(run_login(settings))
    if args.command == "sessions":
        from . import cli_sessions  # noqa: PLC0415

        sys.exit(cli_sessions.run(args, settings.db_path))
    if args.command == "logs":
        from . import cli_logs  # noqa: PLC0415

        sys.exit(cli_logs.run(settings.log_file, args.n, args.follow, args.session))
    if args.command == "daemon":
        from pathlib import Path  # noqa: PLC0415

        from .attach.paths import socket_path  # noqa: PLC0415
        from .daemon import run_daemon  # noqa: PLC0415

        configure_logging(settings.log_file, settings.log_level)
        gc.freeze()  # see _serve
        sys.exit(run_daemon(settings, Path(socket_path()), args.ready_fd))
    sys.exit(_serve(settings))


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except ConfigError as exc:
        print(f"agybridge: {exc}", file=sys.stderr)
        sys.exit(2)


def _serve(settings: Settings) -> int:
    from .server import run  # noqa: PLC0415

    configure_logging(settings.log_file, settings.log_level)
    # What start-up built (modules, classes, converters) lives as long as the
    # process: frozen, it is no longer walked by every full collection, which
    # a long turn triggers again and again (smoke/bench_floor.py). What the
    # first session loads is frozen then (agent/handlers.py). The collector
    # was off until now (__main__): the cycles start-up left are collected
    # once initialize is answered (server.py).
    gc.freeze()
    gc.enable()
    if sys.stdin.isatty():
        # A person, not an editor: say what this is instead of waiting silently.
        print(TTY_HINT, file=sys.stderr)
    return run(settings)


def _doctor(settings: Settings, *, as_json: bool) -> int:
    from . import doctor  # noqa: PLC0415

    found = trio.run(doctor.run_checks, settings)
    if not as_json:
        print(f"agybridge {__version__}")
    print(doctor.to_json(found) if as_json else doctor.text(found), end="")
    return doctor.failures(found)
