"""``python -m agybridge`` and the ``agybridge`` command.

``attach``, ``status`` and ``stop`` are dispatched before anything else is
imported: an editor starts ``attach`` for every agent session, so its start-up
is the user's wait (README "Long-running sessions"; smoke/bench_attach.py
measures it), and ``status`` should answer at once (smoke/bench_status.py).
"""

import gc
import sys

#: The terminal auth method (agent/auth.py) has the editor run the command line
#: it launches the agent with plus ``login``: the README's set-ups make these.
LOGIN_LINES = (["attach", "login"], ["serve", "login"])


def main() -> None:
    argv = sys.argv[1:]
    if argv in LOGIN_LINES:
        argv = ["login"]
    if argv[:1] == ["attach"]:
        from .attach.relay import main as attach_main  # noqa: PLC0415

        sys.exit(attach_main(argv[1:]))
    if argv[:1] in (["status"], ["stop"]):
        from .attach import control  # noqa: PLC0415

        sys.exit((control.status_main if argv[0] == "status" else control.stop_main)(argv[1:]))
    # Start-up builds what lives as long as the process (modules, classes,
    # converters): the collector's passes over it while it grows are wasted
    # on an editor's wait (issue 15; ~20 ms here, smoke/bench_floor.py). cli.py
    # turns it back on, once serving's start-up is frozen.
    gc.disable()
    from .cli import main as cli_main  # noqa: PLC0415

    cli_main(argv)


if __name__ == "__main__":
    main()
