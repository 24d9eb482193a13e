"""attach/trust.py: a socket directory, lock file or listener another user
could control is refused with a sentence naming the path and its owner."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from agybridge.attach.trust import (
    UntrustedError,
    check_peer,
    check_socket_dir,
    make_socket_dir,
    open_lock_file,
)
from tests.other_user import OTHER_UID, as_other_user, needs_root


def test_a_private_directory_of_the_users_is_accepted(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    make_socket_dir(str(directory))
    assert directory.stat().st_mode & 0o777 == 0o700
    check_socket_dir(str(directory))


@pytest.mark.parametrize("mode", [0o777, 0o755, 0o750])
def test_a_directory_others_may_reach_is_refused_and_left_alone(tmp_path: Path, mode: int) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    directory.chmod(mode)
    with pytest.raises(UntrustedError, match=f"mode {mode:04o}") as caught:
        make_socket_dir(str(directory))
    assert str(directory) in str(caught.value) and "chmod 700" in str(caught.value)
    assert directory.stat().st_mode & 0o777 == mode  # never changed


def test_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "run"
    link.symlink_to(real)
    with pytest.raises(UntrustedError, match="is a symlink"):
        check_socket_dir(str(link))


def test_a_directory_under_one_others_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone may rename what is in it
    directory = shared / "run"
    directory.mkdir(mode=0o700)
    with pytest.raises(UntrustedError, match=f"{shared} .above {directory}. is mode 0777"):
        check_socket_dir(str(directory))
    shared.chmod(0o1777)  # sticky, as /tmp: only the owner may rename it
    check_socket_dir(str(directory))


@needs_root
def test_a_directory_another_user_made_first_is_refused(reachable_tmp: Path) -> None:
    """The other user creates ``$TMPDIR/agybridge-<uid>`` before us (issue 28)."""
    base = reachable_tmp / "tmp"
    base.mkdir()
    base.chmod(0o1777)
    directory = base / f"agybridge-{os.getuid()}"
    as_other_user("import os, sys; os.mkdir(sys.argv[1], 0o700)", str(directory))
    with pytest.raises(UntrustedError) as caught:
        make_socket_dir(str(directory))
    message = str(caught.value)
    assert str(directory) in message and f"uid {OTHER_UID}" in message, message


def test_a_symlinked_lock_file_is_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me")
    lock = tmp_path / "agybridge.sock.lock"
    lock.symlink_to(target)
    with pytest.raises(UntrustedError, match="symlink") as caught:
        open_lock_file(str(lock))
    assert str(lock) in str(caught.value)
    assert target.read_text() == "keep me"


def test_a_lock_file_with_another_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me")
    lock = tmp_path / "agybridge.sock.lock"
    os.link(target, lock)
    with pytest.raises(UntrustedError, match="2 link"):
        open_lock_file(str(lock))
    assert target.read_text() == "keep me"


def test_a_listener_of_the_same_user_is_trusted() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        check_peer(ours, "/some/path")
