"""Issue 28: ``attach``, ``status``, ``stop`` and ``daemon`` trust no socket,
directory or listener another local user could control. The other user is a
child process dropped to ``nobody``'s uid (tests/other_user.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.acp_wire import BRIDGE_CMD
from tests.other_user import OTHER_UID, as_other_user, listening_as_other_user, needs_root

pytestmark = [pytest.mark.integration, needs_root]


def _run(*args: str, socket: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "AGYBRIDGE_SOCKET": str(socket), "AGYBRIDGE_LOG_FILE": ""}
    return subprocess.run(
        [*BRIDGE_CMD, *args], input=stdin, env=env, capture_output=True, timeout=60, check=False
    )


def test_a_socket_another_user_listens_on_is_refused_before_a_byte_is_sent(
    reachable_tmp: Path,
) -> None:
    """The directory passes every check (ours, 0700), but the process listening
    on the socket in it runs as another uid: attach, status and stop refuse,
    naming the path and the owner, and that process receives nothing."""
    directory = reachable_tmp / "run"
    directory.mkdir()
    directory.chmod(0o777)  # only while the other user plants its socket
    socket = directory / "agybridge.sock"
    initialize = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
    with listening_as_other_user(str(socket), connections=3) as planted:
        directory.chmod(0o700)
        for args in (("attach",), ("status",), ("stop",)):
            done = _run(*args, socket=socket, stdin=initialize)
            message = done.stderr.decode()
            assert done.returncode == 1, message
            assert str(socket) in message and f"uid {OTHER_UID}" in message, message
            assert "nothing was sent" in message, message
            assert done.stdout == b""
            assert planted.stdout is not None
            assert planted.stdout.readline().strip() == "0", args  # not one byte


@pytest.mark.parametrize("planted", ["world-writable", "foreign-owned"])
def test_a_directory_another_user_could_control_is_refused_by_daemon_and_attach(
    reachable_tmp: Path, planted: str
) -> None:
    """``$TMPDIR/agybridge-<uid>`` made first by another user (or made 0777):
    neither the daemon nor attach makes, binds or writes anything in it."""
    tmp = reachable_tmp / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)  # as /tmp
    directory = tmp / f"agybridge-{os.getuid()}"
    if planted == "world-writable":
        directory.mkdir()
        directory.chmod(0o777)
    else:
        as_other_user("import os, sys; os.mkdir(sys.argv[1], 0o700)", str(directory))
    socket = directory / "agybridge.sock"
    for args in (("daemon",), ("attach",)):
        done = _run(*args, socket=socket)
        message = done.stderr.decode()
        assert done.returncode == 1, message
        assert str(directory) in message, message
        if planted == "foreign-owned":
            assert f"uid {OTHER_UID}" in message, message
        else:
            assert "mode 0777" in message, message
    info = directory.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (
        (os.getuid(), 0o777) if planted == "world-writable" else (OTHER_UID, 0o700)
    )
    if planted == "world-writable":
        assert os.listdir(directory) == []
