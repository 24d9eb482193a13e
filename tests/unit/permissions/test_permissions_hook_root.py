"""HookRoot: private runtime dir, read-only hook root, strict hooks.json, cleanup."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agybridge.permissions import (
    ENV_SOCKET,
    ENV_TIMEOUT,
    ENV_TOKEN,
    HOOK_NAME,
    HookRoot,
    HookRootError,
    child_env,
    helper_command,
)
from agybridge.permissions.hook_root import check_private_dir, hooks_json_text


def mode(path: str | Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def root() -> Iterator[HookRoot]:
    made = HookRoot.create(hook_timeout_s=600)
    yield made
    made.remove()


def test_layout_and_modes(root: HookRoot) -> None:
    """The runtime dir is 0700 and ours; hook dir and .agents 0500; hooks.json 0400."""
    assert os.path.basename(root.runtime_dir).startswith("agyb-")
    assert mode(root.runtime_dir) == 0o700
    assert os.lstat(root.runtime_dir).st_uid == os.geteuid()
    assert root.hook_dir == os.path.join(root.runtime_dir, "hook")
    assert root.hooks_json == os.path.join(root.hook_dir, ".agents", "hooks.json")
    assert mode(root.hook_dir) == 0o500
    assert mode(os.path.dirname(root.hooks_json)) == 0o500
    assert mode(root.hooks_json) == 0o400
    assert root.socket_path == os.path.join(root.runtime_dir, "s.sock")
    assert len(os.fsencode(root.socket_path)) < 100
    assert not os.path.exists(root.socket_path)  # the broker makes it


def test_hooks_json_is_strict_json_with_an_integer_timeout(root: HookRoot) -> None:
    """hooks.json parses as strict JSON with one PreToolUse '*' command and an int timeout."""

    def no_constants(name: str) -> None:
        raise AssertionError(f"non-strict JSON constant {name}")

    text = Path(root.hooks_json).read_text()
    doc = json.loads(text, parse_constant=no_constants)
    assert list(doc) == [HOOK_NAME]
    gate = doc[HOOK_NAME]
    assert gate["enabled"] is True
    (group,) = gate["PreToolUse"]
    assert group["matcher"] == "*"
    (handler,) = group["hooks"]
    assert handler["type"] == "command"
    assert type(handler["timeout"]) is int and handler["timeout"] == 600
    assert re.search(r'"timeout": 600\b', text)
    assert shlex.split(handler["command"]) == list(helper_command())
    assert Path(root.hooks_json).read_bytes() == root.hooks_json_bytes


def test_command_is_shell_quoted(tmp_path: Path) -> None:
    """Paths with spaces and quotes survive agy's `sh -c`."""
    argv = [sys.executable, "-I", "-S", "/odd dir/it's/hook.py"]
    handler = json.loads(hooks_json_text(argv, 30))[HOOK_NAME]["PreToolUse"][0]["hooks"][0]
    assert shlex.split(handler["command"]) == argv


def test_env_and_token(root: HookRoot) -> None:
    """The child env carries the socket, a 64-hex-digit token and the helper timeout."""
    assert re.fullmatch(r"[0-9a-f]{64}", root.token)
    assert root.env == {
        ENV_SOCKET: root.socket_path,
        ENV_TOKEN: root.token,
        ENV_TIMEOUT: "590",
    }
    env = child_env(root, {"PATH": "/bin"})
    assert env["PATH"] == "/bin" and env[ENV_TOKEN] == root.token
    assert root.token not in repr(root)
    other = HookRoot.create()
    try:
        assert other.token != root.token and other.runtime_dir != root.runtime_dir
    finally:
        other.remove()


def test_timeouts_nest(root: HookRoot) -> None:
    """wait < helper timeout < hooks.json timeout, with the defaults and custom values."""
    assert root.max_wait_s < root.helper_timeout_s < root.hook_timeout_s
    short = HookRoot.create(hook_timeout_s=5, helper_timeout_s=3)
    try:
        assert short.max_wait_s < short.helper_timeout_s == 3 < short.hook_timeout_s
        assert short.env[ENV_TIMEOUT] == "3"
    finally:
        short.remove()


@pytest.mark.parametrize(
    ("hook_timeout_s", "helper_timeout_s"),
    [(600, 600), (600, 700), (600, 0), (0, None), (2**31, None), (1.5, None), (True, None)],
)
def test_bad_timeouts_are_refused(hook_timeout_s: object, helper_timeout_s: float | None) -> None:
    """Out-of-order or non-integer timeouts raise before anything is created."""
    with pytest.raises(ValueError, match="timeout"):
        HookRoot.create(hook_timeout_s=hook_timeout_s, helper_timeout_s=helper_timeout_s)  # type: ignore[arg-type]


def test_remove_deletes_everything_and_is_idempotent() -> None:
    """remove() deletes the read-only tree (socket included) and may be called twice."""
    made = HookRoot.create()
    Path(made.socket_path).write_text("stand-in for the socket")
    made.remove()
    assert not os.path.exists(made.runtime_dir)
    made.remove()


def test_verify_detects_tampering(root: HookRoot) -> None:
    """verify() passes on a fresh root and fails after hooks.json or a mode changes."""
    root.verify()
    os.chmod(root.hook_dir, 0o700)
    with pytest.raises(HookRootError, match="mode 500"):
        root.verify()
    os.chmod(root.hooks_json, 0o600)
    Path(root.hooks_json).write_text("{}")
    os.chmod(root.hooks_json, 0o400)
    os.chmod(root.hook_dir, 0o500)
    with pytest.raises(HookRootError, match="was modified"):
        root.verify()
    os.chmod(root.runtime_dir, 0o755)
    with pytest.raises(HookRootError, match="not 0700"):
        root.verify()


def test_base_dir_too_long_is_refused(tmp_path: Path) -> None:
    """A base dir that would push the socket path past ~100 bytes is refused."""
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    with pytest.raises(HookRootError, match="socket path"):
        HookRoot.create(base_dir=str(deep))
    assert list(deep.iterdir()) == []


def test_private_xdg_runtime_dir_is_preferred(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private $XDG_RUNTIME_DIR is used; a group-readable one is skipped."""
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    made = HookRoot.create()
    try:
        assert os.path.dirname(made.runtime_dir) == str(xdg)
    finally:
        made.remove()
    os.chmod(xdg, 0o755)
    made = HookRoot.create()
    try:
        assert os.path.dirname(made.runtime_dir) != str(xdg)
        assert mode(made.runtime_dir) == 0o700
    finally:
        made.remove()


def test_check_private_dir_refuses_symlinks_and_open_modes(tmp_path: Path) -> None:
    """Symlinks and group/other bits are refused."""
    private = tmp_path / "p"
    private.mkdir(mode=0o700)
    check_private_dir(str(private))
    link = tmp_path / "link"
    link.symlink_to(private)
    with pytest.raises(HookRootError, match="symlink"):
        check_private_dir(str(link))
    os.chmod(private, 0o750)
    with pytest.raises(HookRootError, match="not 0700"):
        check_private_dir(str(private))


def test_protected_paths_include_the_resolved_runtime_dir(root: HookRoot) -> None:
    """The policy gets the runtime dir as given and resolved."""
    assert root.runtime_dir in root.protected_paths
    assert os.path.realpath(root.runtime_dir) in root.protected_paths
