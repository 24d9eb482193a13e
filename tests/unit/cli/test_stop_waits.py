"""``agybridge stop`` says "stopped" once the daemon lets go of the lock it holds
for its whole life (after its socket file is gone), not when its connections close."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agybridge.attach.start import wait_lock_free

HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


def test_waits_for_the_lock_and_is_bounded(tmp_path: Path) -> None:
    lock = tmp_path / "agybridge.sock.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert wait_lock_free(str(lock), 0.2) is False  # held: bounded
    finally:
        assert holder.stdin is not None
        holder.stdin.close()  # the holder exits, which frees the lock
        holder.wait(timeout=30)
    assert wait_lock_free(str(lock), 30) is True


def test_a_lock_file_already_gone_is_free(tmp_path: Path) -> None:
    assert wait_lock_free(str(tmp_path / "none.lock"), 1) is True
