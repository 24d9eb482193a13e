"""The private staging directory: modes, writing, clearing, removing, sweeping."""

from __future__ import annotations

import base64
import os
import re
import signal
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from agybridge.acp import models
from agybridge.acp.content import StagedFile, convert_prompt
from agybridge.workspace import private_root
from agybridge.workspace.staging import StagingArea, StagingError, sweep_stale

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes and flock")

PNG = b"\x89PNG\r\n\x1a\n" + bytes(24)
DAY_S = 24 * 3600.0
MCP = {"mcpServers": {"files": {"command": "/bin/true", "args": []}}}


def mode(path: str | Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def area(tmp_path: Path) -> Iterator[StagingArea]:
    created = StagingArea.create(str(tmp_path / "base"))
    yield created
    created.remove()


def staged(area: StagingArea, name: str, data: bytes = b"x") -> StagedFile:
    path = os.path.join(area.attachments_dir, name)
    return StagedFile(name=name, path=path, data=data, mime_type="text/plain", index=0)


def test_create_makes_private_directories(tmp_path: Path) -> None:
    """Base, root and attachments are 0700 and the lock file 0600, whatever the umask."""
    old_umask = os.umask(0)
    try:
        area = StagingArea.create(str(tmp_path / "a" / "base"))
    finally:
        os.umask(old_umask)
    base = tmp_path / "a" / "base"
    assert mode(base) == 0o700
    assert os.path.dirname(area.root) == str(base.resolve())
    assert re.fullmatch(rf"{os.getpid()}-[0-9a-f]{{16}}", os.path.basename(area.root))
    assert mode(area.root) == 0o700
    assert mode(area.attachments_dir) == 0o700
    assert mode(os.path.join(area.root, ".lock")) == 0o600
    assert area.attachments_dir == os.path.join(area.root, "attachments")
    area.remove()


def test_sessions_get_distinct_roots(tmp_path: Path) -> None:
    """Two areas in one base never share a root."""
    first = StagingArea.create(str(tmp_path))
    second = StagingArea.create(str(tmp_path))
    assert first.root != second.root
    first.remove()
    second.remove()


def test_create_failure_is_a_staging_error(tmp_path: Path) -> None:
    """A base that cannot be made is reported with its path."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StagingError, match="cannot create a staging directory in"):
        StagingArea.create(str(blocker / "base"))


def test_converted_prompt_files_land_where_the_text_says(area: StagingArea) -> None:
    """The paths named in the prompt text exist after write, with the exact bytes, 0600."""
    image = models.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
    converted = convert_prompt([image], staging_dir=area.attachments_dir)
    area.write(converted.files)
    (file,) = converted.files
    assert file.path in converted.text
    assert Path(file.path).read_bytes() == PNG
    assert mode(file.path) == 0o600


def test_write_resets_the_mode_of_an_existing_file(area: StagingArea) -> None:
    """Rewriting a file leaves it 0600 with the new bytes."""
    spec = staged(area, "a.txt", b"new")
    Path(spec.path).write_bytes(b"old")
    os.chmod(spec.path, 0o644)
    area.write([spec])
    assert (Path(spec.path).read_bytes(), mode(spec.path)) == (b"new", 0o600)


@pytest.mark.parametrize(
    "bad",
    [
        StagedFile(name="x.png", path="/tmp/x.png", data=b"x", mime_type="image/png", index=0),
        "../escape.png",
        ".hidden",
    ],
)
def test_write_refuses_paths_outside_and_leaves_nothing(
    area: StagingArea, bad: StagedFile | str
) -> None:
    """A file not meant for this directory is refused and earlier files are removed."""
    good = staged(area, "good.txt")
    wrong = bad if isinstance(bad, StagedFile) else staged(area, bad)
    with pytest.raises(StagingError, match="refusing to stage"):
        area.write([good, wrong])
    assert os.listdir(area.attachments_dir) == []
    assert not os.path.exists(os.path.join(area.root, "escape.png"))


def test_write_failure_removes_what_was_written(area: StagingArea) -> None:
    """An I/O error mid-way leaves no partial set of files."""
    first = staged(area, "one.txt")
    os.mkdir(os.path.join(area.attachments_dir, "two.txt"))  # cannot open a directory
    with pytest.raises(StagingError, match="cannot write a staged file"):
        area.write([first, staged(area, "two.txt")])
    assert os.listdir(area.attachments_dir) == ["two.txt"]


def test_symlink_is_not_followed(area: StagingArea, tmp_path: Path) -> None:
    """A symlink planted at a staged name is not written through."""
    target = tmp_path / "outside.txt"
    target.write_bytes(b"keep")
    os.symlink(target, os.path.join(area.attachments_dir, "link.txt"))
    with pytest.raises(StagingError):
        area.write([staged(area, "link.txt", b"overwrite")])
    assert target.read_bytes() == b"keep"


def test_clear_empties_attachments_only(area: StagingArea) -> None:
    """After a turn the attachments are gone (files and directories); the root stays."""
    area.write([staged(area, "a.txt"), staged(area, "b.txt")])
    os.makedirs(os.path.join(area.attachments_dir, "made-by-agy", "deep"))
    agents = Path(area.root, ".agents")
    agents.mkdir(mode=0o700)
    (agents / "mcp_config.json").write_text("{}")
    area.clear()
    assert os.listdir(area.attachments_dir) == []
    assert mode(area.attachments_dir) == 0o700
    assert (agents / "mcp_config.json").exists()


def test_clear_recreates_a_missing_attachments_dir(area: StagingArea) -> None:
    """Clearing works even if something removed the attachments directory."""
    os.rmdir(area.attachments_dir)
    area.clear()
    assert mode(area.attachments_dir) == 0o700


def test_remove_deletes_everything_and_is_idempotent(area: StagingArea) -> None:
    """Closing the session removes the whole root; a second remove is harmless."""
    area.write([staged(area, "a.txt")])
    area.remove()
    assert not os.path.exists(area.root)
    area.remove()


def test_keep_keeps_everything(tmp_path: Path) -> None:
    """With keep (AGYBRIDGE_KEEP_STAGING=1) nothing is cleared, removed or swept."""
    base = str(tmp_path)
    area = StagingArea.create(base, keep=True)
    area.write([staged(area, "a.txt")])
    area.clear()
    area.remove()
    assert os.listdir(area.attachments_dir) == ["a.txt"]
    assert (
        sweep_stale(base, keep=True, now=time.time() + 10 * DAY_S, pid_alive=lambda _: False) == []
    )
    assert os.path.isdir(area.root)
    assert sweep_stale(base, now=time.time() + 10 * DAY_S) == [area.root]


def _leftover(base: Path, pid: int, *, lock: bool = True) -> Path:
    root = base / f"{pid}-{'ab' * 8}"
    (root / "attachments").mkdir(parents=True)
    (root / "attachments" / "img.png").write_bytes(PNG)
    if lock:
        (root / ".lock").write_bytes(b"")
    return root


@pytest.mark.parametrize("lock", [True, False])
def test_sweep_removes_leftovers_of_dead_processes(tmp_path: Path, lock: bool) -> None:
    """A directory whose pid is gone is removed, lock file or not."""
    root = _leftover(tmp_path, 999_999, lock=lock)
    assert sweep_stale(str(tmp_path), pid_alive=lambda pid: pid != 999_999) == [str(root)]
    assert not root.exists()


def test_sweep_keeps_fresh_directories_of_live_pids(tmp_path: Path) -> None:
    """A recent directory whose pid runs is another bridge's: kept."""
    root = _leftover(tmp_path, 4242)
    assert sweep_stale(str(tmp_path), pid_alive=lambda _: True) == []
    assert root.exists()


def test_sweep_removes_old_directories_of_reused_pids(tmp_path: Path) -> None:
    """Older than max_age and unlocked: the pid was reused, so the directory goes."""
    root = _leftover(tmp_path, 4242)
    later = time.time() + 2 * DAY_S
    assert sweep_stale(str(tmp_path), now=later, pid_alive=lambda _: True) == [str(root)]
    assert sweep_stale(str(tmp_path), now=later) == []


def test_sweep_respects_max_age(tmp_path: Path) -> None:
    """max_age_s decides what counts as old."""
    root = _leftover(tmp_path, 4242)
    alive = lambda _: True  # noqa: E731
    soon = time.time() + 3600
    assert sweep_stale(str(tmp_path), now=soon, max_age_s=2 * 3600, pid_alive=alive) == []
    assert sweep_stale(str(tmp_path), now=soon, max_age_s=1800, pid_alive=alive) == [str(root)]


def test_sweep_never_removes_a_locked_directory(tmp_path: Path) -> None:
    """A live session's lock protects it, however old it looks and whatever its pid says."""
    area = StagingArea.create(str(tmp_path))
    later = time.time() + 30 * DAY_S
    assert sweep_stale(str(tmp_path), now=later, pid_alive=lambda _: False) == []
    assert os.path.isdir(area.root)
    area.remove()


def test_sweep_leaves_foreign_entries_alone(tmp_path: Path) -> None:
    """Names not ours, plain files and symlinks are never touched."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "123-nothex").mkdir()
    (tmp_path / f"77-{'cd' * 8}").write_text("a file")
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(target, tmp_path / f"78-{'ef' * 8}")
    later = time.time() + 30 * DAY_S
    assert sweep_stale(str(tmp_path), now=later, pid_alive=lambda _: False) == []
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["notes", "123-nothex", f"77-{'cd' * 8}", "elsewhere", f"78-{'ef' * 8}"]
    )


def test_sweep_of_a_missing_base_is_a_no_op(tmp_path: Path) -> None:
    """Nothing to sweep when the base does not exist yet."""
    assert sweep_stale(str(tmp_path / "missing")) == []


def test_real_pid_check(tmp_path: Path) -> None:
    """Without an injected check, this process counts as alive."""
    root = _leftover(tmp_path, os.getpid())
    assert sweep_stale(str(tmp_path)) == []
    assert root.exists()


@pytest.mark.parametrize(("base_mode", "ok"), [(0o700, True), (0o1777, True), (0o777, False)])
def test_base_writable_by_others_is_refused(tmp_path: Path, base_mode: int, ok: bool) -> None:
    """A base others may write to is refused unless it is sticky (like /tmp)."""
    base = tmp_path / "base"
    base.mkdir()
    os.chmod(base, base_mode)
    if ok:
        StagingArea.create(str(base)).remove()
    else:
        with pytest.raises(StagingError, match="is writable by other users"):
            StagingArea.create(str(base))
        assert os.listdir(base) == []


def test_each_prompt_has_its_own_directory(area: StagingArea) -> None:
    """A queued prompt's files survive the discard of the turn before it."""
    image = models.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
    first = convert_prompt([image], staging_dir=area.prompt_dir(1))
    second = convert_prompt([image], staging_dir=area.prompt_dir(2))
    area.write(first.files)
    area.write(second.files)
    assert mode(area.prompt_dir(1)) == 0o700
    assert first.files[0].path != second.files[0].path
    area.discard(1)
    assert not os.path.exists(area.prompt_dir(1))
    assert Path(second.files[0].path).read_bytes() == PNG
    area.discard(1)  # again: harmless
    area.discard(2)
    assert os.listdir(area.attachments_dir) == []


def test_discard_with_keep_keeps(tmp_path: Path) -> None:
    """With keep, a prompt's files stay after its turn."""
    area = StagingArea.create(str(tmp_path), keep=True)
    area.write([staged_in(area.prompt_dir("7"), "a.txt")])
    area.discard("7")
    assert os.listdir(area.prompt_dir("7")) == ["a.txt"]


def staged_in(directory: str, name: str) -> StagedFile:
    return StagedFile(
        name=name, path=os.path.join(directory, name), data=b"x", mime_type="text/plain", index=0
    )


@pytest.mark.parametrize("key", ["..", "a/b", "", ".x", "x" * 65, "a b"])
def test_prompt_keys_are_plain_names(area: StagingArea, key: str) -> None:
    """A prompt key can never name a path outside the attachments directory."""
    with pytest.raises(ValueError, match="prompt key must be"):
        area.prompt_dir(key)


@pytest.mark.parametrize(
    "relative",
    ["deeper/one/a.txt", "../a.txt", "../../a.txt", ".git/a.txt", "bad key/a.txt"],
)
def test_write_refuses_other_directories(area: StagingArea, relative: str) -> None:
    """Only attachments/ and attachments/<key>/ take files."""
    path = os.path.join(area.attachments_dir, relative)
    spec = StagedFile(
        name=os.path.basename(path), path=path, data=b"x", mime_type="text/plain", index=0
    )
    with pytest.raises(StagingError, match="refusing to stage"):
        area.write([spec])
    assert os.listdir(area.attachments_dir) == []


def test_write_failure_mid_file_leaves_no_partial_file(area: StagingArea) -> None:
    """A write that fails inside a file's bytes (disk full, file-size limit)
    removes that file too, and the prompt directory the write made."""
    resource = pytest.importorskip("resource")  # POSIX only
    directory = area.prompt_dir(7)
    files = [
        StagedFile(name=name, path=os.path.join(directory, name), data=data, mime_type="x", index=0)
        for name, data in (("small.txt", b"x"), ("big.txt", bytes(4096)))
    ]
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
    try:
        with pytest.raises(StagingError, match="cannot write a staged file"):
            area.write(files)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert not os.path.exists(os.path.join(directory, "big.txt"))
    assert os.listdir(area.attachments_dir) == []


async def test_a_private_root_whose_mcp_config_fails_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing the MCP config failing (a full disk) fails session/new with a
    clear error and leaves no private directory behind (nor its lock open)."""

    def full(root: str, config: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(private_root, "write_mcp_config", full)
    base = tmp_path / "base"
    with pytest.raises(private_root.PrivateRootError, match="No space left on device"):
        await private_root.prepare_private_root(str(base), False, MCP)
    assert list(base.iterdir()) == []


async def test_a_private_root_whose_preparation_is_cancelled_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled once the directory exists (session/new's client gone, the
    bridge shutting down), preparing it removes it again."""
    real_create = StagingArea.create
    base = tmp_path / "base"
    with trio.CancelScope() as scope:

        def create_then_cancel(base_dir: str, *, keep: bool = False) -> StagingArea:
            created = real_create(base_dir, keep=keep)
            trio.from_thread.run_sync(scope.cancel)
            return created

        monkeypatch.setattr(StagingArea, "create", create_then_cancel)
        await private_root.prepare_private_root(str(base), False, MCP)
    assert scope.cancelled_caught
    assert list(base.iterdir()) == []
