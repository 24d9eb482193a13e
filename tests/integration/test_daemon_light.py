"""``attach``, ``status`` and ``stop`` import the standard library only: an
editor starts ``attach`` for every agent session (measured with -X importtime)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("trio", "attrs", "cattrs", "platformdirs", "sqlite3", "agybridge.config")
#: Standard modules that would more than double attach's start-up for nothing.
SLOW_STDLIB = ("argparse", "subprocess", "pathlib", "typing", "re")


def test_light_commands_import_no_third_party_module() -> None:
    """Nothing outside the standard library is imported on the attach path, and
    none of the slow standard modules."""
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "import agybridge.__main__, agybridge.attach.relay",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "agybridge.attach.relay" in imported  # the measurement works
    heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY or m in HEAVY)
    assert heavy == []
    assert sorted(m for m in imported if m in SLOW_STDLIB) == []
