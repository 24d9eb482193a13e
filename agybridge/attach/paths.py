"""Where the daemon listens: ``AGYBRIDGE_SOCKET``, else the user runtime dir.

The socket lives in a directory of the user's alone (trust.py checks it), so
only its owner can reach it even where peer credentials cannot be checked; the
socket itself is 0600. Plain ``os.path``
strings: ``pathlib`` would double ``attach``'s import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SOCKET_NAME = "agybridge.sock"
#: The daemon's stderr when ``attach`` starts it (its log file is separate).
STDERR_NAME = "daemon-stderr.log"


def socket_path(env: Mapping[str, str] | None = None) -> str:
    """``AGYBRIDGE_SOCKET``, else ``$XDG_RUNTIME_DIR/agybridge/agybridge.sock``,
    else ``$TMPDIR/agybridge-<uid>/agybridge.sock`` (macOS has no runtime dir)."""
    env = os.environ if env is None else env
    explicit = env.get("AGYBRIDGE_SOCKET", "")
    if explicit:
        return os.path.expanduser(explicit)
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime:
        return os.path.join(runtime, "agybridge", SOCKET_NAME)
    temp = env.get("TMPDIR", "") or "/tmp"
    return os.path.join(temp, f"agybridge-{os.getuid()}", SOCKET_NAME)


def start_path(socket: str) -> str:
    """The file ``attach`` holds locked while it starts a daemon (removed once it answers)."""
    return socket + ".start"


def lock_path(socket: str) -> str:
    """The file a daemon holds locked (``flock``) for its whole life, beside its socket."""
    return socket + ".lock"
