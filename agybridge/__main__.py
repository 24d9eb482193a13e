"""``python -m agybridge`` and the ``agybridge`` command.

``attach`` is dispatched before anything else is imported: an editor starts
it for every agent session, so its start-up is the user's wait (README
"Long-running sessions"; smoke/bench_attach.py measures it).
"""

import gc
import sys


def main() -> None:
    if sys.argv[1:2] == ["attach"]:
        from .attach.relay import main as attach_main  # noqa: PLC0415

        sys.exit(attach_main(sys.argv[2:]))
    # Start-up builds what lives as long as the process (modules, classes,
    # converters): the collector's passes over it while it grows are wasted
    # on an editor's wait (issue 15; ~20 ms here, smoke/bench_floor.py). cli.py
    # turns it back on, once serving's start-up is frozen.
    gc.disable()
    from .cli import main as cli_main  # noqa: PLC0415

    cli_main()


if __name__ == "__main__":
    main()
