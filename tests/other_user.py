"""A second local user for the tests that need one: the suite runs as root
(CI, containers) and drops a child process to ``nobody``'s uid to plant
directories and sockets as another user would. Skipped when not root."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: ``nobody`` on Linux and macOS.
OTHER_UID = 65534

#: A Python the other user may run (the test venv may live in root's home).
PYTHON = next(
    (
        found
        for found in (
            shutil.which(name, path="/usr/bin:/bin:/usr/local/bin") for name in ("python3",)
        )
        if found and os.stat(found).st_mode & 0o001
    ),
    None,
)

needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or PYTHON is None,
    reason="planting files as another user needs root (to drop a child to that uid) "
    "and a system python3 that user may run",
)

#: The other user's listener: binds ``argv[1]``, says "listening", then for
#: each of ``argv[2]`` connections prints how many bytes it was sent before
#: the client closed it.
_LISTENER = """
import socket, sys
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(8)
print("listening", flush=True)
for _ in range(int(sys.argv[2])):
    conn, _ = server.accept()
    received = 0
    while chunk := conn.recv(65536):
        received += len(chunk)
    conn.close()
    print(received, flush=True)
"""


@pytest.fixture
def reachable_tmp() -> Iterator[Path]:
    """A short temporary directory the other user may pass through (0711;
    pytest's own are 0700 under root's 0700 base) whose paths fit a socket."""
    path = Path(tempfile.mkdtemp(prefix="agyt-"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def as_other_user(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (Python) as `OTHER_UID` and wait for it."""
    return subprocess.run(
        [str(PYTHON), "-c", code, *args],
        cwd="/",
        user=OTHER_UID,
        group=OTHER_UID,
        extra_groups=[],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )


@contextmanager
def listening_as_other_user(path: str, connections: int) -> Iterator[subprocess.Popen[str]]:
    """A socket at ``path`` (its directory must let the other user in) that
    the other user listens on; read ``stdout`` for the bytes each connection got."""
    listener = subprocess.Popen(
        [str(PYTHON), "-c", _LISTENER, path, str(connections)],
        cwd="/",
        user=OTHER_UID,
        group=OTHER_UID,
        extra_groups=[],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == "listening"
        yield listener
    finally:
        listener.kill()
        listener.wait()
