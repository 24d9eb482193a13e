"""Where the daemon listens: ``AGYBRIDGE_SOCKET``, else the user runtime dir.

By default the socket lives in a directory of its own (made 0700), so only its
owner can reach it even where peer credentials cannot be checked; the socket
itself is 0600 wherever it is. Plain ``os.path``
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


def lock_path(socket: str) -> str:
    """The file a daemon holds locked (``flock``) for its whole life, beside its socket."""
    return socket + ".lock"


def ensure_private_dir(directory: str) -> None:
    """Create ``directory`` 0700 if it is missing, or check that the existing
    one is ours. An existing directory's mode is left alone: it may be the
    user's own (``AGYBRIDGE_SOCKET=~/agybridge.sock``), and the socket in it
    is 0600 and checks each peer's uid anyway.

    Raises:
        PermissionError: it belongs to another user.
    """
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.stat(directory)
    if info.st_uid != os.getuid():
        raise PermissionError(
            f"{directory} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}): "
            "set AGYBRIDGE_SOCKET to a path in a directory of your own"
        )
