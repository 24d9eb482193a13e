"""Directory params of session/new, load and resume; session/list's folder filter;
the methods the bridge does not offer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agybridge import causes
from agybridge.acp import models
from agybridge.agent.handlers import not_offered
from agybridge.agent.params import check_directories, check_directory, listed_directories
from agybridge.jsonrpc import ErrorCode, RpcError


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


@pytest.mark.parametrize(
    ("folders", "message", "path"),
    [
        (
            "nope",
            "session/list's folder filter _meta.additionalDirectories must be an array of "
            "absolute directory paths",
            "$._meta.additionalDirectories",
        ),
        (
            ["/abs", "relative"],
            "session/list's folder filter _meta.additionalDirectories must be an array of "
            "absolute directory paths, not 'relative'",
            "$._meta.additionalDirectories[1]",
        ),
    ],
)
def test_a_bad_list_filter_says_so_and_names_its_cause(
    folders: object, message: str, path: str
) -> None:
    """session/list's folder filter: -32602 in the catalogue's words, naming the
    field and the cause (list_filter_invalid)."""
    request = models.ListSessionsRequest(meta={"additionalDirectories": folders})
    with pytest.raises(RpcError) as refused:
        listed_directories(request)
    assert refused.value.code == ErrorCode.INVALID_PARAMS
    assert refused.value.message == message
    assert refused.value.data["path"] == path
    assert causes.cause_of(refused.value.data) == "list_filter_invalid"


def test_logout_is_refused_saying_why() -> None:
    """logout is -32601 whose message says agy cannot be signed out, with its cause."""
    refused = not_offered("logout")
    assert refused.code == ErrorCode.METHOD_NOT_FOUND
    assert refused.message.startswith("Method not found: 'logout' (agybridge cannot sign agy out")
    assert "agy has no sign-out command a program can run" in refused.message
    assert causes.cause_of(refused.data) == "logout_unsupported"
    plain = not_offered("session/teleport")
    assert plain.message == "Method not found: 'session/teleport'" and plain.data is None
