"""The daemon's socket path: what is found there decides what happens, and
every refusal is a sentence naming the path (no traceback, nothing deleted)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import trio

from agybridge.attach.trust import UntrustedError
from agybridge.daemon.listener import SocketPathError, own_socket_path


async def test_a_stale_socket_file_is_replaced(tmp_path: Path) -> None:
    """A socket nobody listens on (a dead daemon's) is replaced."""
    path = tmp_path / "run" / "s.sock"
    path.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()
    async with own_socket_path(path):
        with trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            await client.connect(str(path))  # somebody listens now
    assert not path.exists()


@pytest.mark.parametrize("kind", ["file", "directory"])
async def test_a_path_that_is_not_a_socket_is_refused_and_kept(tmp_path: Path, kind: str) -> None:
    """AGYBRIDGE_SOCKET naming a file or a directory: refused, and left alone."""
    path = tmp_path / "run" / "s.sock"
    path.parent.mkdir(mode=0o700)
    if kind == "file":
        path.write_text("my notes")
    else:
        path.mkdir()
    with pytest.raises(SocketPathError, match="not a socket") as caught:
        async with own_socket_path(path):
            pass  # pragma: no cover
    assert str(path) in str(caught.value)
    assert path.read_text() == "my notes" if kind == "file" else path.is_dir()
    assert not path.with_name("s.sock.lock").exists()


async def test_a_path_too_long_for_a_socket_is_a_sentence(tmp_path: Path) -> None:
    """A Unix socket path has a length limit: say so, and what to do."""
    path = tmp_path / ("x" * 120) / "s.sock"
    with pytest.raises(SocketPathError, match="AGYBRIDGE_SOCKET") as caught:
        async with own_socket_path(path):
            pass  # pragma: no cover
    assert "too long" in str(caught.value)
    assert not path.exists()
    assert not path.with_name("s.sock.lock").exists()
    assert os.listdir(path.parent) == []


@pytest.mark.parametrize("mode", [0o755, 0o777])
async def test_a_directory_others_may_reach_is_refused_and_kept(tmp_path: Path, mode: int) -> None:
    """AGYBRIDGE_SOCKET in an existing directory others may enter or write
    (the home directory, a shared one): refused before anything is made in it,
    and its permissions are not changed (issue 28)."""
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(mode)
    path = home / "agybridge.sock"
    with pytest.raises(UntrustedError, match=f"mode {mode:04o}") as caught:
        async with own_socket_path(path):
            pass  # pragma: no cover
    assert str(home) in str(caught.value)
    assert home.stat().st_mode & 0o777 == mode
    assert os.listdir(home) == []


async def test_a_symlinked_lock_file_is_never_written_through(tmp_path: Path) -> None:
    """Another user (or a mistake) left the lock file a symlink: the daemon
    refuses to start and the file it points to is untouched."""
    path = tmp_path / "run" / "s.sock"
    path.parent.mkdir(mode=0o700)
    target = tmp_path / "precious"
    target.write_text("keep me")
    path.with_name("s.sock.lock").symlink_to(target)
    with pytest.raises(UntrustedError, match="symlink"):
        async with own_socket_path(path):
            pass  # pragma: no cover
    assert target.read_text() == "keep me"
    assert path.with_name("s.sock.lock").is_symlink()


async def test_a_symlink_at_the_socket_path_is_refused_and_kept(tmp_path: Path) -> None:
    """Only a dead daemon's socket is replaced; a symlink is not followed nor removed."""
    path = tmp_path / "run" / "s.sock"
    path.parent.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.sock"
    path.symlink_to(target)
    with pytest.raises(SocketPathError, match="is a symlink") as caught:
        async with own_socket_path(path):
            pass  # pragma: no cover
    assert str(path) in str(caught.value)
    assert path.is_symlink() and not target.exists()


async def test_a_missing_directory_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "agybridge.sock"
    async with own_socket_path(path):
        pass
    assert path.parent.stat().st_mode & 0o777 == 0o700
