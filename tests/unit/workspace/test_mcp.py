"""ACP mcpServers → agy's .agents/mcp_config.json: format, skips, errors, secrecy."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from agybridge.workspace.mcp import (
    McpServerError,
    SkippedServer,
    build_mcp_config,
    mcp_config_path,
    write_mcp_config,
)
from agybridge.workspace.staging import StagingArea

SECRET_ENV = "env-secret-7f3a9c"
SECRET_HEADER = "Bearer header-secret-91b2e4"

STDIO = {
    "name": "files",
    "command": "/usr/local/bin/mcp-files",
    "args": ["--root", "/home/u/p"],
    "env": [{"name": "FILES_TOKEN", "value": SECRET_ENV}],
}
HTTP = {
    "type": "http",
    "name": "search",
    "url": "https://mcp.example.test/mcp?tenant=a",
    "headers": [{"name": "Authorization", "value": SECRET_HEADER}],
}
SSE = {"type": "sse", "name": "legacy", "url": "https://old.example.test/sse", "headers": []}

EXPECTED = {
    "mcpServers": {
        "files": {
            "command": "/usr/local/bin/mcp-files",
            "args": ["--root", "/home/u/p"],
            "env": {"FILES_TOKEN": SECRET_ENV},
        },
        "search": {
            "serverUrl": "https://mcp.example.test/mcp?tenant=a",
            "headers": {"Authorization": SECRET_HEADER},
        },
    }
}


def test_stdio_and_http_in_agy_format() -> None:
    """stdio keeps command/args/env (as an object); http becomes serverUrl + headers."""
    assert build_mcp_config([STDIO, HTTP]) == (EXPECTED, [])


@pytest.mark.parametrize(
    ("server", "entry"),
    [
        ({"name": "a", "command": "c", "args": [], "env": []}, {"command": "c", "args": []}),
        ({"name": "a", "command": "c"}, {"command": "c", "args": []}),
        ({"type": "stdio", "name": "a", "command": "c", "args": ["x"]},
         {"command": "c", "args": ["x"]}),
        ({"type": "http", "name": "a", "url": "http://h/mcp", "headers": []},
         {"serverUrl": "http://h/mcp"}),
        ({"type": "http", "name": "a", "url": "HTTPS://h"}, {"serverUrl": "HTTPS://h"}),
    ],
)  # fmt: skip
def test_optional_parts_are_left_out(server: dict[str, Any], entry: dict[str, Any]) -> None:
    """Empty env and headers are omitted; args is always a list."""
    assert build_mcp_config([server]) == ({"mcpServers": {"a": entry}}, [])


def test_sse_and_unknown_types_are_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """sse (and unknown transports, repeated names) are skipped, not failures."""
    servers = [SSE, STDIO, {"type": "acp", "name": "inline", "id": "x"}, dict(STDIO, command="/b")]
    with caplog.at_level(logging.WARNING, logger="agybridge.workspace.mcp"):
        config, skipped = build_mcp_config(servers)
    assert config == {"mcpServers": {"files": EXPECTED["mcpServers"]["files"]}}
    assert skipped == [
        SkippedServer(0, "legacy", "agy has no SSE transport (mcpCapabilities.sse is false)"),
        SkippedServer(2, "inline", "unknown transport type 'acp'"),
        SkippedServer(3, "files", "a server with this name came earlier"),
    ]
    assert [record.getMessage() for record in caplog.records] == [
        "MCP server 'legacy' skipped: agy has no SSE transport (mcpCapabilities.sse is false)",
        "MCP server 'inline' skipped: unknown transport type 'acp'",
        "MCP server 'files' skipped: a server with this name came earlier",
    ]


def test_no_servers() -> None:
    """An empty list gives an empty config."""
    assert build_mcp_config([]) == ({"mcpServers": {}}, [])


MALFORMED: list[tuple[str, Any, str, str]] = [
    ("not an object", "files", "$.mcpServers[0]", "MCP server 0 must be an object"),
    ("no name", {"command": "c"}, "$.mcpServers[0]",
     "MCP server 0 needs a non-empty string 'name'"),
    ("blank name", {"name": " ", "command": "c"}, "$.mcpServers[0]",
     "MCP server 0 needs a non-empty string 'name'"),
    ("type not a string", {"name": "a", "type": 1}, "$.mcpServers[0].type",
     "MCP server 'a': 'type' must be a string"),
    ("no command", {"name": "a", "args": []}, "$.mcpServers[0].command",
     "MCP server 'a' needs a non-empty string 'command'"),
    ("args not strings", {"name": "a", "command": "c", "args": [1]}, "$.mcpServers[0].args",
     "MCP server 'a': 'args' must be an array of strings"),
    ("args a string", {"name": "a", "command": "c", "args": "-x"}, "$.mcpServers[0].args",
     "MCP server 'a': 'args' must be an array of strings"),
    ("env an object", {"name": "a", "command": "c", "env": {"K": SECRET_ENV}},
     "$.mcpServers[0].env", "MCP server 'a': 'env' must be an array"),
    ("env value missing", {"name": "a", "command": "c", "env": [{"name": "K"}]},
     "$.mcpServers[0].env[0]",
     "MCP server 'a': env[0] must be {name: string, value: string}"),
    ("env value a number", {"name": "a", "command": "c", "env": [{"name": "K", "value": 1}]},
     "$.mcpServers[0].env[0]",
     "MCP server 'a': env[0] must be {name: string, value: string}"),
    ("env name with =",
     {"name": "a", "command": "c", "env": [{"name": "K=V", "value": SECRET_ENV}]},
     "$.mcpServers[0].env[0]",
     "MCP server 'a': env variable 'K=V' has an invalid name or value"),
    ("env value with NUL",
     {"name": "a", "command": "c", "env": [{"name": "K", "value": SECRET_ENV + "\0"}]},
     "$.mcpServers[0].env[0]",
     "MCP server 'a': env variable 'K' has an invalid name or value"),
    ("http without url", {"type": "http", "name": "h", "headers": []}, "$.mcpServers[0].url",
     "MCP server 'h' needs an http(s) 'url'"),
    ("ftp url", {"type": "http", "name": "h", "url": "ftp://h/"}, "$.mcpServers[0].url",
     "MCP server 'h' needs an http(s) 'url'"),
    ("headers an object", {"type": "http", "name": "h", "url": "https://h", "headers": {}},
     "$.mcpServers[0].headers", "MCP server 'h': 'headers' must be an array"),
    ("header name with space",
     {"type": "http", "name": "h", "url": "https://h",
      "headers": [{"name": "X Token", "value": SECRET_HEADER}]},
     "$.mcpServers[0].headers[0]",
     "MCP server 'h': header 'X Token' has an invalid name or value"),
    ("header value with CRLF",
     {"type": "http", "name": "h", "url": "https://h",
      "headers": [{"name": "X-Token", "value": SECRET_HEADER + "\r\nX-Evil: 1"}]},
     "$.mcpServers[0].headers[0]",
     "MCP server 'h': header 'X-Token' has an invalid name or value"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("server", "path", "message"), [pytest.param(*row[1:], id=row[0]) for row in MALFORMED]
)
def test_malformed_servers(server: Any, path: str, message: str) -> None:
    """A malformed entry fails with its JSON path and a message naming no secret value."""
    with pytest.raises(McpServerError) as caught:
        build_mcp_config([server])
    assert (str(caught.value), caught.value.data) == (message, {"path": path})
    assert SECRET_ENV not in message
    assert SECRET_HEADER not in message


def test_error_path_counts_every_server() -> None:
    """The path points at the offending entry, after skipped ones too."""
    with pytest.raises(McpServerError) as caught:
        build_mcp_config([SSE, STDIO, {"name": "b"}])
    assert caught.value.path == "$.mcpServers[2].command"


# --- writing -------------------------------------------------------------------------

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")


@pytest.fixture
def private_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o700)
    return root


def _mode(path: str | Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@posix_only
def test_write_creates_a_private_file(private_root: Path) -> None:
    """The config lands in <root>/.agents/mcp_config.json: directory 0700, file 0600."""
    config, _ = build_mcp_config([STDIO, HTTP])
    path = write_mcp_config(str(private_root), config)
    assert path == mcp_config_path(str(private_root))
    assert path == str(private_root / ".agents" / "mcp_config.json")
    assert json.loads(Path(path).read_text()) == EXPECTED
    assert _mode(private_root / ".agents") == 0o700
    assert _mode(path) == 0o600
    assert os.listdir(private_root / ".agents") == ["mcp_config.json"]


@posix_only
def test_rewrite_replaces_and_empty_removes(private_root: Path) -> None:
    """A new list replaces the old file; no servers removes it."""
    write_mcp_config(str(private_root), build_mcp_config([STDIO, HTTP])[0])
    path = write_mcp_config(str(private_root), build_mcp_config([HTTP])[0])
    assert path is not None
    assert list(json.loads(Path(path).read_text())["mcpServers"]) == ["search"]
    assert write_mcp_config(str(private_root), {"mcpServers": {}}) is None
    assert not os.path.exists(path)
    assert write_mcp_config(str(private_root), {"mcpServers": {}}) is None


@posix_only
@pytest.mark.parametrize("root_mode", [0o755, 0o750, 0o701])
def test_write_refuses_a_shared_directory(tmp_path: Path, root_mode: int) -> None:
    """A directory others can read (a user's project) is refused, and left untouched."""
    project = tmp_path / "project"
    project.mkdir()
    os.chmod(project, root_mode)
    with pytest.raises(ValueError, match="not a private \\(0700\\) bridge directory"):
        write_mcp_config(str(project), EXPECTED)
    assert os.listdir(project) == []


@posix_only
def test_write_refuses_a_symlinked_root(private_root: Path, tmp_path: Path) -> None:
    """A symlink is not a private directory, even if it points at one."""
    link = tmp_path / "link"
    os.symlink(private_root, link)
    with pytest.raises(ValueError):
        write_mcp_config(str(link), EXPECTED)
    assert os.listdir(private_root) == []


@posix_only
def test_write_into_a_staging_root(tmp_path: Path) -> None:
    """The session's staging root is the intended place; remove() takes the config too."""
    area = StagingArea.create(str(tmp_path))
    path = write_mcp_config(area.root, build_mcp_config([STDIO])[0])
    assert path is not None
    assert os.path.dirname(os.path.dirname(path)) == area.root
    area.remove()
    assert not os.path.exists(path)


@posix_only
def test_secrets_never_reach_the_logs(private_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Env and header values appear in the file only: not in any log record."""
    with caplog.at_level(logging.DEBUG):
        config, _ = build_mcp_config([STDIO, HTTP, SSE])
        write_mcp_config(str(private_root), config)
        for bad in MALFORMED:
            with contextlib.suppress(McpServerError):
                build_mcp_config([bad[1]])
    logged = "\n".join(
        [caplog.text]
        + [record.getMessage() for record in caplog.records]
        + [repr(record.args) for record in caplog.records]
    )
    assert SECRET_ENV not in logged
    assert SECRET_HEADER not in logged
    assert "header-secret" not in logged
    assert "tenant=a" not in logged  # URL query strings can hold tokens too
    assert "FILES_TOKEN" in logged  # names are fine
    assert "Authorization" in logged
    text = Path(mcp_config_path(str(private_root))).read_text()
    assert SECRET_ENV in text
    assert SECRET_HEADER in text
