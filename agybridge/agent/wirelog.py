"""What the log says about a connection: start-up, ``initialize``, and the
opt-in wire trace (``AGYBRIDGE_TRACE=1``).

The trace writes every JSON-RPC message in and out to the log file at INFO,
with secrets redacted: MCP servers' ``env`` and ``headers`` values, anything
named like a token, key, secret or password, and image/blob bytes (only
their size is kept). It is for debugging an editor handshake; prompts are
logged in full, so it is off by default.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

import trio

from .. import __version__
from ..acp import models

logger = logging.getLogger(__name__)
trace_logger = logging.getLogger("agybridge.trace")

#: Keys whose values are never logged (case-insensitive, anywhere in a message).
_SECRET_KEY = re.compile(r"token|secret|password|passwd|api[-_]?key|authorization|cookie", re.I)
#: Containers whose every value is a secret (MCP server env and HTTP headers).
_SECRET_MAPS = ("env", "headers")
#: Fields holding base64 bytes (ImageContent.data, BlobResourceContents.blob, AudioContent).
_BYTES_KEYS = ("data", "blob")
REDACTED = "<redacted>"


def log_startup(agy_bin: str, log_file: object) -> None:
    logger.info(
        "agybridge %s starting: python %s, trio %s, %s; agy %s; log %s",
        __version__,
        # platform.python_version(), without importing platform (issue 15).
        sys.version.split()[0],
        trio.__version__,
        sys.platform,
        agy_bin,
        log_file,
    )


def log_initialize(request: models.InitializeRequest) -> None:
    client = request.client_info
    name = f"{client.name} {client.version}" if client else "an unnamed client"
    caps = request.client_capabilities
    logger.info(
        "initialize from %s: protocol %s, fs read=%s write=%s, terminal=%s, auth=%s, _meta keys=%s",
        name,
        request.protocol_version,
        caps.fs.read_text_file,
        caps.fs.write_text_file,
        caps.terminal,
        json.dumps(caps.auth),
        sorted((caps.meta or {}).keys()),
    )


def redact(value: Any, key: str = "") -> Any:
    """A copy of a JSON value with secrets and bytes replaced (pure)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if key in _SECRET_MAPS or (isinstance(k, str) and _SECRET_KEY.search(k)):
                out[k] = REDACTED
            elif k in _BYTES_KEYS and isinstance(v, str) and len(v) > 64:
                out[k] = f"<{len(v)} base64 chars>"
            else:
                out[k] = redact(v, k if isinstance(k, str) else "")
        return out
    if isinstance(value, list):
        # MCP env/headers as [{name, value}] lists (ACP EnvVariable, HttpHeader).
        if key in _SECRET_MAPS:
            return [
                {**item, "value": REDACTED} if isinstance(item, dict) and "value" in item else item
                for item in value
            ]
        return [redact(item, key) for item in value]
    return value


def trace(direction: str, line: bytes) -> None:
    """Log one wire message (``direction`` is ``"<-"`` in or ``"->"`` out)."""
    try:
        message = json.loads(line)
    except ValueError:
        trace_logger.info("%s (not JSON, %d bytes)", direction, len(line))
        return
    trace_logger.info("%s %s", direction, json.dumps(redact(message), ensure_ascii=False))


class TracingReceiveStream(trio.abc.ReceiveStream):
    """Passes bytes through, tracing each complete line received."""

    def __init__(self, inner: trio.abc.ReceiveStream) -> None:
        self._inner = inner
        self._partial = b""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data = bytes(await self._inner.receive_some(max_bytes))
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            if line.strip():
                trace("<-", line)
        return data

    async def aclose(self) -> None:
        await self._inner.aclose()


class TracingSendStream(trio.abc.SendStream):
    """Passes bytes through, tracing each line sent (the peer's single writer
    sends whole lines)."""

    def __init__(self, inner: trio.abc.SendStream) -> None:
        self._inner = inner

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        for line in bytes(data).split(b"\n"):
            if line.strip():
                trace("->", line)
        await self._inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._inner.aclose()
