"""ACP ``mcpServers`` → agy's ``.agents/mcp_config.json`` in the session's private root.

agy reads MCP servers from ``mcp_config.json`` in its customization roots: the
global ``~/.gemini/config/`` and ``.agents/`` of each workspace root, which
includes every ``--add-dir`` (hooks-and-tools.md §A2; google-antigravity/
antigravity-cli#60 confirms ``<root>/.agents/mcp_config.json`` loads). The
bridge writes only into its own private ``--add-dir`` root
(``workspace/staging.py``), never the user's ``.agents/`` and never the global
file. Caveat: agy 1.1.26 started no MCP servers headless, 1.1.18 did
(contract.md §8.9, hooks-and-tools.md §A11.5): the file is written either way.

The file format (the same as the global file; antigravity-cli bundled docs
``agy-customizations/docs/mcp_servers.md`` as quoted in quirq-ai/xo-space#177,
langchain-ai/docs#1609, withastro/docs#13148: remote servers take
``serverUrl``, not ``url`` or ``httpUrl``)::

    {"mcpServers": {
        "<name>": {"command": "/abs/bin", "args": ["-x"], "env": {"KEY": "value"}},
        "<name>": {"serverUrl": "https://host/mcp", "headers": {"Authorization": "..."}}}}

ACP shapes (acp/brief.md §2): stdio ``{name, command, args, env:[{name,value}]}``
with no ``type`` (or ``type: "stdio"``); ``{type: "http", name, url,
headers:[{name,value}]}``. ``sse`` servers are skipped with a warning (agy has
no SSE transport and ``mcpCapabilities.sse`` is false, but Zed sends them
anyway), as are unknown types and repeated names. A malformed server is the
client's error: :class:`McpServerError` (-32602).

Env and header values are secrets: they reach the file (mode 0600) and nothing
else: not logs, not error messages. Logs name servers, env and header names,
the command's base name and the URL's host.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs

logger = logging.getLogger(__name__)

AGENTS_DIR = ".agents"
MCP_CONFIG_NAME = "mcp_config.json"


@attrs.frozen
class McpServerError(Exception):
    """An ``mcpServers`` entry is malformed (JSON-RPC -32602); names no secret."""

    message: str
    #: JSON path of the offending value, e.g. ``$.mcpServers[1].env[0].name``.
    path: str

    def __str__(self) -> str:
        return self.message

    @property
    def data(self) -> dict[str, Any]:
        return {"path": self.path}


@attrs.frozen
class SkippedServer:
    """A well-formed server the bridge cannot pass to agy."""

    index: int
    name: str
    reason: str


def build_mcp_config(servers: Sequence[Any]) -> tuple[dict[str, Any], list[SkippedServer]]:
    """agy's ``mcp_config.json`` content for the ACP ``mcpServers`` list (pure).

    Returns:
        ``({"mcpServers": {...}}, skipped)``; skipped servers are logged as
        warnings by name and reason.

    Raises:
        McpServerError: an entry is malformed.
    """
    entries: dict[str, dict[str, Any]] = {}
    skipped: list[SkippedServer] = []
    for index, server in enumerate(servers):
        path = f"$.mcpServers[{index}]"
        if not isinstance(server, Mapping):
            raise McpServerError(f"MCP server {index} must be an object", path)
        name = server.get("name")
        if not isinstance(name, str) or not name.strip():
            raise McpServerError(f"MCP server {index} needs a non-empty string 'name'", path)
        kind = server.get("type", "stdio")
        if not isinstance(kind, str):
            raise McpServerError(f"MCP server {name!r}: 'type' must be a string", f"{path}.type")
        reason = None
        if name in entries:
            reason = "a server with this name came earlier"
        elif kind == "sse":
            reason = "agy has no SSE transport (mcpCapabilities.sse is false)"
        elif kind not in ("stdio", "http"):
            reason = f"unknown transport type {kind!r}"
        if reason is not None:
            logger.warning("MCP server %r skipped: %s", name, reason)
            skipped.append(SkippedServer(index=index, name=name, reason=reason))
            continue
        if kind == "stdio":
            entries[name] = _stdio_entry(server, name, path)
        else:
            entries[name] = _http_entry(server, name, path)
    return {"mcpServers": entries}, skipped


def mcp_config_path(root: str) -> str:
    """``<root>/.agents/mcp_config.json``."""
    return os.path.join(root, AGENTS_DIR, MCP_CONFIG_NAME)


def write_mcp_config(root: str, config: Mapping[str, Any]) -> str | None:
    """Write ``config`` to ``<root>/.agents/mcp_config.json`` (0600, atomically; blocking).

    ``root`` must be the session's private directory (a 0700 directory of
    this user, not a symlink), which keeps the user's own ``.agents/`` out of
    reach. With no servers the file is removed, so a resumed session does not
    keep an earlier session's servers.

    Returns:
        The file's path, or None when there are no servers.

    Raises:
        ValueError: ``root`` is not a private directory.
        OSError: writing failed.
    """
    _check_private(root)
    target = mcp_config_path(root)
    servers = config.get("mcpServers") or {}
    if not servers:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        return None
    agents = os.path.join(root, AGENTS_DIR)
    with contextlib.suppress(FileExistsError):
        os.mkdir(agents, 0o700)
    _check_private(agents)
    temporary = f"{target}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(config, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    logger.info("MCP config for %s written to %s", ", ".join(map(repr, servers)), target)
    return target


# --- entries --------------------------------------------------------------------------


def _stdio_entry(server: Mapping[str, Any], name: str, path: str) -> dict[str, Any]:
    command = server.get("command")
    if not isinstance(command, str) or not command:
        raise McpServerError(
            f"MCP server {name!r} needs a non-empty string 'command'", f"{path}.command"
        )
    args = server.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise McpServerError(
            f"MCP server {name!r}: 'args' must be an array of strings", f"{path}.args"
        )
    env = _pairs(server.get("env", []), name, f"{path}.env", "env")
    for index, (key, value) in enumerate(env):
        if "=" in key or "\0" in key or "\0" in value:
            raise McpServerError(
                f"MCP server {name!r}: env variable {key!r} has an invalid name or value",
                f"{path}.env[{index}]",
            )
    entry: dict[str, Any] = {"command": command, "args": list(args)}
    if env:
        entry["env"] = dict(env)
    logger.debug(
        "MCP server %r: stdio, command %r, %d arg(s), env names %s",
        name,
        os.path.basename(command),
        len(args),
        [key for key, _ in env],
    )
    return entry


def _http_entry(server: Mapping[str, Any], name: str, path: str) -> dict[str, Any]:
    url = server.get("url")
    if not isinstance(url, str) or urlsplit(url).scheme.lower() not in ("http", "https"):
        raise McpServerError(f"MCP server {name!r} needs an http(s) 'url'", f"{path}.url")
    headers = _pairs(server.get("headers", []), name, f"{path}.headers", "headers")
    for index, (key, value) in enumerate(headers):
        if not _is_token(key) or any(char in value for char in "\r\n\0"):
            raise McpServerError(
                f"MCP server {name!r}: header {key!r} has an invalid name or value",
                f"{path}.headers[{index}]",
            )
    entry: dict[str, Any] = {"serverUrl": url}
    if headers:
        entry["headers"] = dict(headers)
    logger.debug(
        "MCP server %r: http, host %r, header names %s",
        name,
        urlsplit(url).hostname,
        [key for key, _ in headers],
    )
    return entry


def _pairs(value: Any, server: str, path: str, what: str) -> list[tuple[str, str]]:
    """ACP ``[{name, value}]`` → ``[(name, value)]``; the error names no value."""
    if not isinstance(value, list):
        raise McpServerError(f"MCP server {server!r}: {what!r} must be an array", path)
    pairs = []
    for index, item in enumerate(value):
        if (
            not isinstance(item, Mapping)
            or not isinstance(item.get("name"), str)
            or not item["name"]
            or not isinstance(item.get("value"), str)
        ):
            raise McpServerError(
                f"MCP server {server!r}: {what}[{index}] must be {{name: string, value: string}}",
                f"{path}[{index}]",
            )
        pairs.append((item["name"], item["value"]))
    return pairs


_TOKEN_CHARS = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


def _is_token(name: str) -> bool:
    """An HTTP field name (RFC 9110 §5.1 token)."""
    return bool(name) and all(char in _TOKEN_CHARS for char in name)


def _check_private(path: str) -> None:
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise ValueError(f"{path!r} is not a private bridge directory: {exc}") from exc
    private = stat.S_ISDIR(info.st_mode)
    if private and os.name == "posix":  # Windows has no mode bits to check
        private = not info.st_mode & 0o077 and info.st_uid == os.getuid()
    if not private:
        raise ValueError(
            f"refusing to write MCP config under {path!r}: not a private (0700) bridge directory"
        )
