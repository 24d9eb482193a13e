"""Directory params of session/new, load and resume."""

from __future__ import annotations

import os
from pathlib import Path

from agybridge.agent.params import check_directories, check_directory


def test_dot_dot_after_a_symlink_is_the_directory_the_path_names(tmp_path: Path) -> None:
    """``<root>/link/..`` with ``link -> deep/dir`` is ``<root>/deep`` (the kernel's
    answer), not ``<root>`` (what cutting ``link/..`` from the text gives): agy must
    work where the client said."""
    (tmp_path / "deep" / "dir").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "deep" / "dir")
    asked = f"{tmp_path}/link/.."
    for checked in (check_directory(asked, "cwd"), *check_directories([asked])):
        assert os.path.samefile(checked, tmp_path / "deep"), checked


def test_a_plain_path_is_only_tidied(tmp_path: Path) -> None:
    """Without '..' through a symlink the path keeps its spelling (a symlinked
    workspace stays under the name the client uses)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert check_directory(f"{tmp_path}//link/./", "cwd") == f"{tmp_path}/link"
    assert check_directory(f"{tmp_path}/real/../link", "cwd") == f"{tmp_path}/link"
